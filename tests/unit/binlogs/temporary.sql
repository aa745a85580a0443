-- The scenario behind temporary.binlog (tests/unit/source/test_temporary.py), recorded on
-- MariaDB 10.11 (record.sh temporary): a session logging statements uses a temporary table
-- named like the published app.t, then drops it while logging rows (MariaDB logs that drop,
-- the table's creation having been logged), then changes the real app.t by a statement that
-- reads another temporary table. Every statement touching a temporary table is flagged
-- (LOG_EVENT_THREAD_SPECIFIC_F); the last one is too, though the table it changes is real.
-- The row (2, 20) goes to the temporary t as well (it hides app.t however qualified), and a
-- temporary table's rows are not logged in row format: it is in no event.
CREATE DATABASE app;
CREATE TABLE app.t (id INT PRIMARY KEY, v INT);
INSERT INTO app.t VALUES (1, 10);
USE app;
SET SESSION binlog_format = 'STATEMENT';
CREATE TEMPORARY TABLE t (id INT PRIMARY KEY, v INT);
INSERT INTO t VALUES (7, 70);
UPDATE t SET v = 71;
TRUNCATE TABLE t;
INSERT INTO t VALUES (8, 80);
SET SESSION binlog_format = 'ROW';
INSERT INTO app.t VALUES (2, 20);
DROP TEMPORARY TABLE t;
INSERT INTO app.t VALUES (3, 30);
SET SESSION binlog_format = 'STATEMENT';
CREATE TEMPORARY TABLE tmp (id INT PRIMARY KEY, v INT);
INSERT INTO tmp VALUES (4, 40);
INSERT INTO t SELECT * FROM tmp;
