-- The scenario behind zcolumns.binlog (tests/unit/source/test_zcolumns.py), recorded on MariaDB
-- 10.11 (record.sh zcolumns): a table of MariaDB's compressed columns (types 140 and 141 in the
-- table map, which python-mysql-replication doesn't know) between text columns in other
-- character sets, and a table without any beside it. Values long enough to be stored compressed
-- (zlib, raw deflate by default, then wrapped with column_compression_zlib_wrap), short ones
-- stored as they are (header byte 0), empty ones and NULLs; an update and a delete.
CREATE DATABASE app;
CREATE TABLE app.z (id INT PRIMARY KEY, a TEXT COMPRESSED, l VARCHAR(20) CHARACTER SET latin1,
                    b VARCHAR(1000) COMPRESSED, c BLOB COMPRESSED,
                    d VARCHAR(50) COMPRESSED CHARACTER SET latin1, m MEDIUMTEXT COMPRESSED,
                    vb VARBINARY(300) COMPRESSED, tail VARCHAR(10) CHARACTER SET utf8mb4);
CREATE TABLE app.plain (id INT PRIMARY KEY, s VARCHAR(10));
INSERT INTO app.z VALUES (1, REPEAT('héllo ', 100), 'café', REPEAT('x✓', 300), REPEAT(X'00FF', 300),
                          REPEAT('é', 50), REPEAT('z', 70000), REPEAT(X'AB', 300), 'één'),
                         (2, 'tiny', 'naïve', 'b', NULL, '', '', X'', NULL);
INSERT INTO app.plain VALUES (1, 'p1');
SET SESSION column_compression_zlib_wrap = ON;
INSERT INTO app.z VALUES (3, REPEAT('wrapped ', 50), NULL, REPEAT('w', 900), REPEAT(X'01', 999),
                          'abcabcabcabcabcabcabcabc', 'm', X'00', 'w');
SET SESSION column_compression_zlib_wrap = OFF;
UPDATE app.z SET a = 'changed', b = REPEAT('y', 1000) WHERE id = 1;
DELETE FROM app.z WHERE id = 2;
INSERT INTO app.plain VALUES (2, 'p2');
DROP DATABASE app;
