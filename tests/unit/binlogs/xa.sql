-- The scenario behind xa.binlog (tests/unit/engine/test_xa.py): MariaDB's two-phase XA transactions. A
-- prepared one is written when it is prepared, and its XA COMMIT or XA ROLLBACK comes later in a
-- group of its own, with other transactions in between. (connect: a new session, so that the
-- prepared transaction is left detached, as an application server's transaction manager leaves it.)
CREATE DATABASE app;
CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(20));
INSERT INTO app.t VALUES (1, 'before');
XA START 'x1';
INSERT INTO app.t VALUES (10, 'xa one'), (11, 'xa one');
UPDATE app.t SET v = 'by xa' WHERE id = 1;
XA END 'x1';
XA PREPARE 'x1';
connect;
INSERT INTO app.t VALUES (2, 'between');
XA START 'x2';
INSERT INTO app.t VALUES (20, 'rolled back');
XA END 'x2';
XA PREPARE 'x2';
connect;
XA COMMIT 'x1';
XA ROLLBACK 'x2';
XA START 'x3';
INSERT INTO app.t VALUES (30, 'one phase');
XA END 'x3';
XA COMMIT 'x3' ONE PHASE;
INSERT INTO app.t VALUES (3, 'after');
