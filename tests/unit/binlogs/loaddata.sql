-- The scenario behind loaddata.binlog (tests/unit/source/test_loaddata.py), recorded on
-- MariaDB 10.11 (record.sh loaddata): LOAD DATA logged as a statement (a session's
-- binlog_format STATEMENT), which the server writes as the file's bytes (Begin_load_query, then
-- an Append_block per 16 KB past the first) and the statement (Execute_load_query). app.o's
-- file is 2,000 lines, app.t's the same; a row-logged insert of app.t before each.
CREATE DATABASE app;
CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(20));
CREATE TABLE app.o (id INT PRIMARY KEY, v VARCHAR(20));
INSERT INTO app.t VALUES (1, 'row');
USE app;
SELECT seq, CONCAT('line ', seq) FROM seq_1_to_2000 INTO OUTFILE 'lines.csv';
SET SESSION binlog_format = 'STATEMENT';
LOAD DATA INFILE 'lines.csv' INTO TABLE o;
SET SESSION binlog_format = 'ROW';
INSERT INTO app.t VALUES (2001, 'row');
SET SESSION binlog_format = 'STATEMENT';
LOAD DATA INFILE 'lines.csv' IGNORE INTO TABLE t;
