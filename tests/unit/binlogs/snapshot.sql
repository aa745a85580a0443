-- The scenario behind snapshot.binlog, which the snapshot's engine tests replay
-- (tests/unit/engine/test_snapshot.py) with an in-memory table reader whose chunks are read "between"
-- the watermarks below. record.sh runs it on a private MariaDB and keeps the binlog it wrote.
CREATE DATABASE shop;
CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(20));
INSERT INTO shop.t VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd'), (6, 'f');
-- A request for a snapshot of shop.t (streamer ns/src), as `streamer snapshot` writes it, and
-- one for another streamer, which ns/src ignores.
INSERT INTO streamer_heartbeat.snapshot_signal (streamer, request)
  VALUES ('ns/src', '{"tables": ["shop.t"], "where": null}');
INSERT INTO streamer_heartbeat.snapshot_signal (streamer, request)
  VALUES ('other/src', '{"tables": ["shop.t"], "where": null}');
-- Chunk 1 (keys 1..4): in its window key 2 is updated, key 3 deleted and key 5 inserted.
INSERT INTO streamer_heartbeat.snapshot_watermark VALUES ('ns/src', 'L1')
  ON DUPLICATE KEY UPDATE mark = VALUES(mark);
UPDATE shop.t SET v = 'b2' WHERE id = 2;
BEGIN;
DELETE FROM shop.t WHERE id = 3;
INSERT INTO shop.t VALUES (5, 'e');
COMMIT;
INSERT INTO streamer_heartbeat.snapshot_watermark VALUES ('ns/src', 'H1')
  ON DUPLICATE KEY UPDATE mark = VALUES(mark);
-- After the high watermark: an ordinary change, published after the chunk's rows.
UPDATE shop.t SET v = 'a2' WHERE id = 1;
-- Chunk 2 (keys 5, 6): an ALTER of the table in its window. The chunk is read again.
INSERT INTO streamer_heartbeat.snapshot_watermark VALUES ('ns/src', 'L2')
  ON DUPLICATE KEY UPDATE mark = VALUES(mark);
ALTER TABLE shop.t ADD COLUMN n INT NULL;
INSERT INTO streamer_heartbeat.snapshot_watermark VALUES ('ns/src', 'H2')
  ON DUPLICATE KEY UPDATE mark = VALUES(mark);
-- Chunk 2 again (keys 5, 6, with n), the table's last.
INSERT INTO streamer_heartbeat.snapshot_watermark VALUES ('ns/src', 'L3')
  ON DUPLICATE KEY UPDATE mark = VALUES(mark);
INSERT INTO streamer_heartbeat.snapshot_watermark VALUES ('ns/src', 'H3')
  ON DUPLICATE KEY UPDATE mark = VALUES(mark);
INSERT INTO shop.t VALUES (7, 'g', 70);
-- An operator edits the request row, then removes it: neither is a new request.
UPDATE streamer_heartbeat.snapshot_signal SET request = '{"tables": ["shop.t"], "where": "id > 1"}'
  WHERE streamer = 'ns/src';
DELETE FROM streamer_heartbeat.snapshot_signal WHERE streamer = 'ns/src';
