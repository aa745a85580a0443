"""MySQL 9's VECTOR columns, as its binlog writes them (no MySQL 9 runs here: its documented layouts).

A ``VECTOR(N)`` value is N 32-bit floats, little-endian, one after the other. The binlog writes
the column under its own type code, 242 (``MYSQL_TYPE_VECTOR``), which python-mysql-replication
doesn't know, and a table map with one adds an optional metadata field it doesn't know either,
``VECTOR_DIMENSIONALITY`` (13: a packed integer per VECTOR column, its N):

- the type's column metadata is one byte, the size of the value's length (4), as a BLOB's;
  the library reads none for a type it doesn't know, so every later column's metadata, the
  null bits and the optional fields were read from the wrong bytes;
- ``MetadataFieldType(13)`` raised ValueError.

Either made any table map of a table with a VECTOR column fail, published or not: the stream
stopped at it, again at every restart. In a row a value is laid out as a LONGBLOB's (a 4-byte
length, then the bytes), and the table map counts VECTOR columns among its character columns
(binary, for the charsets fields: MySQL 9's ``is_character_type`` in sql/log_event.cc), as the
library counts a BLOB.

So the table map is handed to the library through stand-ins (``source.standins``): each VECTOR
column as a BLOB (type 252, the same metadata), and without the optional fields it doesn't know
(13 and any later one); the parsed columns get their type back, and their N
(``Column.dimensions``, None when the field is absent). The rows are then read as VECTOR values
(``source.rowplan``: the bytes; ``floats`` makes them the floats published).

That VECTOR columns count among the character columns is read from MySQL 9.0's source, which
no server here can confirm, and the other way would give each text column after one the
charset of the next: text decoded by the wrong charset, silently. So it is checked on each
table map: a VECTOR column's charset is binary (its field's: sql/field.h), and a parse that
gives one another (or runs out of charsets) is made again with the VECTOR columns left out of
the count (as GEOMETRY columns, which the library counts out on MySQL, with the same metadata).
"""
from __future__ import annotations

import struct
from typing import Any, List

from streamer.errors import UnsupportedValue

VECTOR = 242
DIMENSIONALITY = 13  # the optional metadata field of a table map (rows_event.h)


def floats(value: Any) -> List[float]:
    """A VECTOR value's bytes as its floats (a list: a tuple in a union reads as a branch)."""
    size = len(value)
    if size % 4:
        raise UnsupportedValue(f"a VECTOR value of {size} bytes, not a whole number of 32-bit "
                               f"floats")
    return list(struct.unpack(f"<{size // 4}f", value))
