-- The scenario behind engine.binlog, which the engine's unit tests replay (tests/unit/engine/test_engine.py).
-- record.sh runs it on a private MariaDB and keeps the one binlog file it wrote.
CREATE DATABASE app;
CREATE DATABASE other;
CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(20));
CREATE TABLE other.skip (id INT PRIMARY KEY);
-- tx 1: one statement, three rows.
INSERT INTO app.t VALUES (1, 'a'), (2, 'b'), (3, 'c');
-- tx 2: one transaction of seven row changes, one of them to a table that is not published, and a
-- primary-key change (a delete and a create).
BEGIN;
INSERT INTO app.t VALUES (4, 'd');
INSERT INTO other.skip VALUES (1);
UPDATE app.t SET v = 'bb' WHERE id = 2;
INSERT INTO app.t VALUES (5, 'e'), (6, 'f');
DELETE FROM app.t WHERE id = 1;
UPDATE app.t SET id = 7 WHERE id = 6;
COMMIT;
-- the heartbeat writer's row: never published.
INSERT INTO streamer_heartbeat.heartbeat VALUES ('engine', 1700000000123456)
  ON DUPLICATE KEY UPDATE ts_us = VALUES(ts_us);
-- tx 4: changes to an unpublished table only.
INSERT INTO other.skip VALUES (2);
-- DDL between batches: the next row needs a new table version.
ALTER TABLE app.t ADD COLUMN n INT NULL;
INSERT INTO app.t VALUES (8, 'h', 80);
TRUNCATE TABLE app.t;
INSERT INTO app.t VALUES (9, 'i', 90);
