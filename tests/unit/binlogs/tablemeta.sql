-- The scenario behind tablemeta.binlog (tests/unit/source/test_tablemeta.py), recorded on
-- MariaDB 10.11 (record.sh tablemeta): what python-mysql-replication leaves unread in a table
-- map's optional metadata. app.m: ENUM and SET columns whose members are in other charsets than
-- UTF-8 (the table map writes them in the column's charset), beside a UTF-8 one. app.p and
-- app.q: primary keys with a prefix part (written as PRIMARY_KEY_WITH_PREFIX, not as
-- SIMPLE_PRIMARY_KEY), the key's parts in another order than the columns'.
CREATE DATABASE app;
CREATE TABLE app.m (id INT PRIMARY KEY, e ENUM('café', 'naïve', 'plain') CHARACTER SET latin1,
                    s SET('größe', 'x', 'ü') CHARACTER SET latin1,
                    u ENUM('Ā€', 'b') CHARACTER SET ucs2, j ENUM('日本', 'z') CHARACTER SET utf8mb4);
INSERT INTO app.m VALUES (1, 'café', 'größe,ü', 'Ā€', '日本'), (2, 'naïve', 'x', 'b', 'z'),
                         (3, NULL, '', NULL, NULL);
CREATE TABLE app.p (v INT, name VARCHAR(100) NOT NULL, id INT NOT NULL,
                    PRIMARY KEY (id, name(10)));
CREATE TABLE app.q (t TEXT NOT NULL, v INT, PRIMARY KEY (t(20)));
INSERT INTO app.p VALUES (5, 'abcdefghijklmnop', 1);
INSERT INTO app.q VALUES ('hello world', 1);
