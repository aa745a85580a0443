-- The scenario behind vectors.binlog (tests/unit/source/test_vectors.py), recorded on MySQL 8.0
-- (record.sh --mysql vectors): tables with LONGBLOB columns holding 32-bit little-endian floats.
-- MySQL 9 writes a VECTOR column as such a LONGBLOB's value (a 4-byte length, then the floats)
-- under type 242 in the table map, with its dimensions in one more optional metadata field: the
-- tests make each table map of app.emb the one MySQL 9 writes for VECTOR columns (no MySQL 9
-- runs here). Around the vectors, text columns in three character sets: the table map's
-- charsets count VECTOR columns among the character columns.
CREATE DATABASE app;
CREATE TABLE app.emb (id INT PRIMARY KEY, label VARCHAR(10) CHARACTER SET utf8mb4,
                      v LONGBLOB NOT NULL, note VARCHAR(20) CHARACTER SET latin1,
                      w LONGBLOB NULL, tail VARCHAR(10) CHARACTER SET utf8mb4);
CREATE TABLE app.plain (id INT PRIMARY KEY, s VARCHAR(10));
INSERT INTO app.emb VALUES (1, 'één', X'0000803F00000040000000BF', 'café', NULL, 'z'),
                           (2, 'two', X'00000000', 'naïve', X'0000C03F', NULL);
INSERT INTO app.plain VALUES (1, 'p1');
UPDATE app.emb SET v = X'0000803F0000803F0000803F', w = X'00008040' WHERE id = 1;
DELETE FROM app.emb WHERE id = 2;
INSERT INTO app.plain VALUES (2, 'p2');
DROP DATABASE app;
