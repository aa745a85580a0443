-- The scenario behind savepoint.binlog (tests/unit/engine/test_engine.py): a transaction that touches a
-- non-transactional table and rolls back to a savepoint. MariaDB can't drop the rolled-back rows
-- from the binlog then: it writes them, then ROLLBACK TO `s` for a replica to undo them. Rows 3
-- and 4 are not in the table; 2 and 5 are.
CREATE DATABASE app;
CREATE TABLE app.m (id INT PRIMARY KEY) ENGINE=MyISAM;
CREATE TABLE app.t (id INT PRIMARY KEY) ENGINE=InnoDB;
INSERT INTO app.t VALUES (1);
BEGIN;
INSERT INTO app.t VALUES (2);
INSERT INTO app.m VALUES (1);
SAVEPOINT s;
INSERT INTO app.t VALUES (3), (4);
ROLLBACK TO SAVEPOINT s;
INSERT INTO app.t VALUES (5);
COMMIT;
INSERT INTO app.t VALUES (6);
