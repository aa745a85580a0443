-- The scenario behind images.binlog (tests/unit/source/test_events.py): row changes a session writes
-- with a partial row image, then as a statement. Both must stop the streamer, never be published
-- with nulls or skipped. record.sh runs it on a private MariaDB and keeps the binlog it wrote.
CREATE DATABASE app;
CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(20), n INT);
INSERT INTO app.t VALUES (1, 'a', 10), (2, 'b', 20);
SET SESSION binlog_row_image = 'MINIMAL';
UPDATE app.t SET v = 'a2' WHERE id = 1;
SET SESSION binlog_row_image = 'FULL';
SET SESSION binlog_format = 'STATEMENT';
INSERT INTO app.t VALUES (3, 'c', 30);
SET SESSION binlog_format = 'ROW';
INSERT INTO app.t VALUES (4, 'd', 40);
