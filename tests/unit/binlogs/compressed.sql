-- The scenario behind compressed.binlog (tests/unit/test_engine.py): MariaDB's binlog compression
-- switched on at run time, so plain and compressed row events interleave in one binlog.
CREATE DATABASE app;
CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(200));
INSERT INTO app.t VALUES (1, 'plain, before the switch');
SET GLOBAL log_bin_compress = ON;
SET GLOBAL log_bin_compress_min_len = 10;
INSERT INTO app.t VALUES (2, REPEAT('compressed once the setting is on ', 5));
SET GLOBAL log_bin_compress = OFF;
INSERT INTO app.t VALUES (3, 'plain again');
