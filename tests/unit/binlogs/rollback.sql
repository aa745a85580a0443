-- The scenario behind rollback.binlog (tests/unit/engine/test_engine.py): one group of a
-- non-transactional table's changes in several rows events (a MyISAM INSERT ... SELECT of
-- 60 rows of ~1 KB), between two InnoDB transactions. The test rewrites the group's closing
-- COMMIT into the ROLLBACK that MySQL writes when a transaction with non-transactional changes
-- is rolled back: its MyISAM rows stay applied, and the group ends there.
CREATE DATABASE app;
CREATE TABLE app.m (id INT PRIMARY KEY, v TEXT) ENGINE=MyISAM;
CREATE TABLE app.t (id INT PRIMARY KEY) ENGINE=InnoDB;
INSERT INTO app.t VALUES (1);
USE app;
INSERT INTO app.m SELECT seq, REPEAT('x', 1000) FROM seq_1_to_60;
INSERT INTO app.t VALUES (2), (3);
