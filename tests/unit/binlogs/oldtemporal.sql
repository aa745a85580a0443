-- The scenario behind oldtemporal.binlog (tests/unit/source/test_oldtemporal.py), recorded on
-- MariaDB 10.11 (record.sh oldtemporal): a table made while mysql56_temporal_format was OFF, so
-- its DATETIME, TIME and TIMESTAMP columns keep the old formats (types 12, 11 and 7 in the table
-- map, with no metadata: their fractional digits are the table definition's only), with and
-- without fractional digits; edges (negative and 838-hour times, the zero DATETIME, the last
-- TIMESTAMP), NULLs, an update of two rows in one event, and a delete. A table beside it.
SET GLOBAL mysql56_temporal_format = OFF;
CREATE DATABASE app;
CREATE TABLE app.old (id INT PRIMARY KEY, d0 DATETIME NULL, d3 DATETIME(3) NULL,
                      d6 DATETIME(6) NULL, t0 TIME NULL, t2 TIME(2) NULL, t6 TIME(6) NULL,
                      s0 TIMESTAMP NULL, s1 TIMESTAMP(1) NULL, s6 TIMESTAMP(6) NULL,
                      tail VARCHAR(10));
SET GLOBAL mysql56_temporal_format = ON;
CREATE TABLE app.plain (id INT PRIMARY KEY, s VARCHAR(10));
SET time_zone = '+00:00';
SET sql_mode = '';
INSERT INTO app.old VALUES
  (1, '2024-06-30 23:59:59', '1999-01-02 03:04:05.678', '2024-06-30 23:59:59.123456',
   '-838:59:59', '12:34:56.78', '-01:02:03.000001', '1970-01-01 00:00:01',
   '2001-09-09 01:46:40.1', '2038-01-19 03:14:07.999999', 'one'),
  (2, '1000-01-01 00:00:00', '9999-12-31 23:59:59.999', '9999-12-31 23:59:59.999999',
   '838:59:59', '-00:00:00.01', '838:59:59.000000', NULL, NULL, NULL, 'two'),
  (3, '0000-00-00 00:00:00', NULL, '2020-02-29 00:00:00.000001', '00:00:00', NULL,
   '-838:59:59.000000', '2020-02-29 12:00:00', '2020-02-29 12:00:00.5', '1970-01-01 00:00:01.000001',
   NULL);
INSERT INTO app.plain VALUES (1, 'p1');
UPDATE app.old SET t0 = '-00:00:01', d3 = '2000-01-01 00:00:00.001' WHERE id IN (1, 2);
DELETE FROM app.old WHERE id = 3;
INSERT INTO app.plain VALUES (2, 'p2');
DROP DATABASE app;
