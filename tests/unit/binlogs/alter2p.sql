-- The scenario behind alter2p.binlog (tests/unit/source/test_alter2p.py), recorded on MariaDB
-- 10.11 (record.sh alter2p): ALTERs written in two phases (binlog_alter_two_phase), each one a
-- START ALTER and then a COMMIT ALTER, or a ROLLBACK ALTER when it fails, two query events with
-- the same statement, told apart by their GTID events' extra flags only.
CREATE DATABASE app;
CREATE TABLE app.p (id INT PRIMARY KEY);
CREATE TABLE app.c (id INT PRIMARY KEY, pid INT, x INT);
INSERT INTO app.p VALUES (1), (2);
INSERT INTO app.c VALUES (1, 1, 5);
SET SESSION binlog_alter_two_phase = ON;
-- Committed: app.c gets a foreign key with an action, and a column.
ALTER TABLE app.c ADD CONSTRAINT f FOREIGN KEY (pid) REFERENCES app.p (id) ON DELETE CASCADE;
ALTER TABLE app.c ADD COLUMN y INT NOT NULL DEFAULT 7;
INSERT INTO app.c VALUES (2, 2, 5, 8);
-- Rolled back (a duplicate for the unique key), in a procedure that goes on past its error.
DELIMITER //
CREATE PROCEDURE app.fails()
BEGIN
  DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
  ALTER TABLE app.c ADD UNIQUE KEY ux (x),
    ADD CONSTRAINT g FOREIGN KEY (pid) REFERENCES app.p (id) ON UPDATE CASCADE;
END //
DELIMITER ;
CALL app.fails();
INSERT INTO app.c VALUES (3, 1, 6, 9);
-- An XA transaction whose format id (6) has the bits of two phases: its GTID events hold the
-- XA id between the flags and the extra flags, which must be skipped, not read as a phase.
XA START 'x', '', 6;
INSERT INTO app.c VALUES (4, 1, 7, 9);
XA END 'x', '', 6;
XA PREPARE 'x', '', 6;
XA COMMIT 'x', '', 6;
