-- The scenario behind compressed.binlog (tests/unit/source/test_events.py): MariaDB's binlog compression
-- switched on at run time, so plain and compressed events interleave in one binlog. With a low
-- log_bin_compress_min_len, rows events and statements alike are written compressed: an insert,
-- a two-statement transaction, an update, an ALTER (a Query_compressed the schema follows), a
-- row of the new shape, and a delete. The last insert is plain again.
CREATE DATABASE app;
CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(200));
INSERT INTO app.t VALUES (1, 'plain, before the switch');
SET GLOBAL log_bin_compress = ON;
SET GLOBAL log_bin_compress_min_len = 10;
INSERT INTO app.t VALUES (2, REPEAT('compressed once the setting is on ', 5));
BEGIN;
INSERT INTO app.t VALUES (4, 'four'), (5, REPEAT('five ', 30));
UPDATE app.t SET v = 'changed while compressed' WHERE id = 1;
COMMIT;
ALTER TABLE app.t ADD COLUMN n INT NOT NULL DEFAULT 7;
INSERT INTO app.t VALUES (6, 'after the compressed ALTER', 42);
DELETE FROM app.t WHERE id = 2;
SET GLOBAL log_bin_compress = OFF;
INSERT INTO app.t VALUES (3, 'plain again', 8);
