-- The scenario behind members.binlog (tests/unit/source/test_members.py), recorded on MariaDB
-- 10.11 (record.sh members): ENUM and SET columns whose members are in other charsets than
-- UTF-8 (the table map writes them in the column's charset), beside a UTF-8 one.
CREATE DATABASE app;
CREATE TABLE app.m (id INT PRIMARY KEY, e ENUM('café', 'naïve', 'plain') CHARACTER SET latin1,
                    s SET('größe', 'x', 'ü') CHARACTER SET latin1,
                    u ENUM('Ā€', 'b') CHARACTER SET ucs2, j ENUM('日本', 'z') CHARACTER SET utf8mb4);
INSERT INTO app.m VALUES (1, 'café', 'größe,ü', 'Ā€', '日本'), (2, 'naïve', 'x', 'b', 'z'),
                         (3, NULL, '', NULL, NULL);
