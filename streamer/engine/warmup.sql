-- The scenario behind warmup.binlog, the changes streamer.engine.warmup replays to warm PyPy's JIT
-- before the first real change (tests/unit/binlogs/record.sh streamer/engine/warmup.sql records it).
-- Single-row transactions mostly, as a live OLTP load writes them, over common column types; a few
-- updates, deletes and a multi-row insert so that those paths are compiled too. A second table of
-- integers alone (no column that needs converting, microsecond times and large ids, whose Avro
-- varints take 8 and 9 bytes) is interleaved with the first: a stream that switches tables, and
-- tables of either kind, are then compiled before the first real change.
CREATE DATABASE streamer_warmup;
CREATE TABLE streamer_warmup.warm (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  account INT NOT NULL,
  name VARCHAR(64) NOT NULL,
  amount DECIMAL(12,2) NOT NULL,
  score DOUBLE NULL,
  state TINYINT NOT NULL DEFAULT 0,
  created DATETIME(6) NOT NULL,
  updated TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
  note TEXT NULL
) DEFAULT CHARSET=utf8mb4;
CREATE TABLE streamer_warmup.ticks (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  at_us BIGINT NOT NULL,
  kind INT NOT NULL,
  ref BIGINT NULL
);
INSERT INTO streamer_warmup.warm (account, name, amount, score, created, note) VALUES (101, 'alice', 12.50, 0.5, '2026-01-02 03:04:05.123456', NULL);
INSERT INTO streamer_warmup.warm (account, name, amount, score, created, note) VALUES (102, 'bob', 7.25, NULL, '2026-01-02 03:04:06.000001', 'first order');
INSERT INTO streamer_warmup.ticks (at_us, kind, ref) VALUES (1767323045123456, 1, NULL);
INSERT INTO streamer_warmup.warm (account, name, amount, score, created, note) VALUES (103, 'carol', 1999.99, 3.25, '2026-01-02 03:04:07.5', NULL);
INSERT INTO streamer_warmup.warm (account, name, amount, score, created, note) VALUES (104, 'dave', 0.01, -1.5, '2026-01-02 03:04:08', 'gift');
INSERT INTO streamer_warmup.ticks (at_us, kind, ref) VALUES (1767323046000001, 2, 734912345678901234);
INSERT INTO streamer_warmup.warm (account, name, amount, score, created, note) VALUES (105, 'émilie', 42.00, 2.75, '2026-01-02 03:04:09.999999', NULL);
INSERT INTO streamer_warmup.ticks (at_us, kind, ref) VALUES (1767323046500000, 1, 17);
UPDATE streamer_warmup.warm SET amount = amount + 1, state = 1 WHERE id = 1;
INSERT INTO streamer_warmup.warm (account, name, amount, score, created, note) VALUES (106, 'frank', 310.40, 1.0, '2026-01-02 03:04:10.25', NULL);
INSERT INTO streamer_warmup.ticks (at_us, kind, ref) VALUES (1767323047250000, 3, NULL);
INSERT INTO streamer_warmup.warm (account, name, amount, score, created, note) VALUES (107, 'grace', 88.88, NULL, '2026-01-02 03:04:11', 'express');
INSERT INTO streamer_warmup.warm (account, name, amount, score, created, note) VALUES (108, 'heidi', 5.00, 0.125, '2026-01-02 03:04:12.000500', NULL);
INSERT INTO streamer_warmup.ticks (at_us, kind, ref) VALUES (1767323048999999, 2, 9123456789012345678);
UPDATE streamer_warmup.warm SET note = 'shipped', state = 2 WHERE id = 2;
INSERT INTO streamer_warmup.warm (account, name, amount, score, created, note) VALUES (109, 'ivan', 64.10, 9.5, '2026-01-02 03:04:13.1', NULL);
UPDATE streamer_warmup.ticks SET kind = 4, ref = 2 WHERE id = 1;
INSERT INTO streamer_warmup.warm (account, name, amount, score, created, note) VALUES (110, 'judy', 23.45, 4.0, '2026-01-02 03:04:14', 'repeat');
DELETE FROM streamer_warmup.warm WHERE id = 4;
INSERT INTO streamer_warmup.ticks (at_us, kind, ref) VALUES (1767323049100000, 1, -5);
INSERT INTO streamer_warmup.warm (account, name, amount, score, created, note) VALUES (111, 'mallory', 17.70, NULL, '2026-01-02 03:04:15.75', NULL);
INSERT INTO streamer_warmup.warm (account, name, amount, score, created, note) VALUES (112, 'niaj', 940.00, 0.0, '2026-01-02 03:04:16.333', NULL);
INSERT INTO streamer_warmup.ticks (at_us, kind, ref) VALUES (1767323050000000, 5, 734912345678905678);
UPDATE streamer_warmup.warm SET score = 6.5 WHERE id = 3;
INSERT INTO streamer_warmup.warm (account, name, amount, score, created, note) VALUES (113, 'olivia', 3.14, 3.14, '2026-01-02 03:04:17', 'pi');
INSERT INTO streamer_warmup.ticks (at_us, kind, ref) VALUES (1767323051333333, 2, NULL);
INSERT INTO streamer_warmup.warm (account, name, amount, score, created, note) VALUES (114, 'peggy', 250.00, 1.75, '2026-01-02 03:04:18.000002', NULL);
INSERT INTO streamer_warmup.warm (account, name, amount, score, created, note) VALUES (115, 'rupert', 11.11, NULL, '2026-01-02 03:04:19.9', NULL);
DELETE FROM streamer_warmup.ticks WHERE id = 3;
UPDATE streamer_warmup.warm SET amount = 0.50, updated = updated WHERE id = 5;
INSERT INTO streamer_warmup.warm (account, name, amount, score, created, note) VALUES (116, 'sybil', 77.00, 7.0, '2026-01-02 03:04:20', 'vip');
INSERT INTO streamer_warmup.ticks (at_us, kind, ref) VALUES (1767323052000002, 1, 40000000000);
DELETE FROM streamer_warmup.warm WHERE id = 7;
BEGIN;
INSERT INTO streamer_warmup.warm (account, name, amount, score, created, note) VALUES (117, 'trent', 1.00, 1.0, '2026-01-02 03:04:21', NULL);
UPDATE streamer_warmup.warm SET state = 3 WHERE id = 6;
COMMIT;
INSERT INTO streamer_warmup.warm (account, name, amount, score, created, note) VALUES (118, 'victor', 2.00, 2.0, '2026-01-02 03:04:22', NULL), (119, 'walter', 3.00, NULL, '2026-01-02 03:04:23', 'batch');
INSERT INTO streamer_warmup.warm (account, name, amount, score, created, note) VALUES (120, 'yvonne', 19.99, 0.75, '2026-01-02 03:04:24.4', NULL);
INSERT INTO streamer_warmup.ticks (at_us, kind, ref) VALUES (1767323053750000, 3, 734912345678909999);
