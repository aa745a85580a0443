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

So ``translating`` hands the library a table map it reads right: each VECTOR column as a BLOB
(type 252, the same metadata), and without the optional fields it doesn't know (13 and any
later one, listed in ``LEFT_OUT``); the parsed columns get their type back, and their N
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

import logging
import struct
from typing import Any, Callable, Dict, List, Optional, Tuple

from pymysql.protocol import MysqlPacket
from pymysqlreplication.constants import FIELD_TYPE

from streamer.errors import UnsupportedValue
from streamer.source import lenenc

log = logging.getLogger(__name__)

VECTOR = 242
DIMENSIONALITY = 13  # the optional metadata field of a table map (rows_event.h)
KNOWN_FIELDS = frozenset(range(1, 13))  # the optional metadata fields the library reads
_CHECKSUM = 4
# The packet wrapper has read the OK byte and the 19-byte event header before the event's reads.
_BODY_AT = 20
LEFT_OUT: Dict[int, int] = {}  # optional metadata field type -> table maps it was left out of


def floats(value: Any) -> List[float]:
    """A VECTOR value's bytes as its floats (a list: a tuple in a union reads as a branch)."""
    size = len(value)
    if size % 4:
        raise UnsupportedValue(f"a VECTOR value of {size} bytes, not a whole number of 32-bit "
                               f"floats")
    return list(struct.unpack(f"<{size // 4}f", value))


def translated(data: bytes, at: int, counted: bool = True
               ) -> Optional[Tuple[bytes, Dict[int, Optional[int]]]]:
    """The table-map event in ``data`` (its body from ``at``, its checksum last) as the library
    reads it right, and {index: N} of its VECTOR columns; None when it has nothing to translate
    (no VECTOR column, no optional field the library doesn't know). ``counted``: the VECTOR
    columns count among the character columns (as BLOBs), or not (as GEOMETRY columns)."""
    pos = at + 8  # table id, flags
    pos += data[pos] + 2  # the database's name, with its length and its NUL
    pos += data[pos] + 2  # the table's
    count, pos = lenenc.read(data, pos)
    types_at = pos
    types = data[pos:pos + count]
    size, pos = lenenc.read(data, pos + count)
    fields_at = pos + size + (count + 7) // 8
    end = len(data) - _CHECKSUM
    kept, dims, unknown = _fields(data, fields_at, end)
    if VECTOR not in types and not unknown:
        return None
    vectors = [i for i, t in enumerate(types) if t == VECTOR]
    out = bytearray(data[:fields_at])
    stand_in = FIELD_TYPE.BLOB if counted else FIELD_TYPE.GEOMETRY
    out[types_at:types_at + count] = bytes(stand_in if t == VECTOR else t for t in types)
    out += kept
    out += data[end:]
    for kind in unknown if counted else ():  # (the second translation of a map: said once)
        LEFT_OUT[kind] = LEFT_OUT.get(kind, 0) + 1
        if LEFT_OUT[kind] == 1:
            log.info("a table map carries optional metadata field %d, which the streamer doesn't "
                     "read: left out (the table's rows are read without it)", kind)
    return bytes(out), {i: dims[n] if n < len(dims) else None for n, i in enumerate(vectors)}


def _fields(data: bytes, pos: int, end: int) -> Tuple[bytes, List[int], List[int]]:
    """(the optional metadata fields the library reads, as they are; the VECTOR columns' N;
    the types of the fields left out) of the fields from ``pos`` to ``end``."""
    kept = bytearray()
    dims: List[int] = []
    unknown: List[int] = []
    while pos < end:
        kind = data[pos]
        length, start = lenenc.read(data, pos + 1)
        stop = start + length
        if kind in KNOWN_FIELDS:
            kept += data[pos:stop]
        else:
            if kind == DIMENSIONALITY:
                at = start
                while at < stop:
                    n, at = lenenc.read(data, at)
                    dims.append(n)
            unknown.append(kind)
        pos = stop
    return bytes(kept), dims, unknown


def translating(parse: Callable[..., None]) -> Callable[..., None]:
    """TableMapEvent.__init__ that parses a table map with VECTOR columns (or optional fields
    the library doesn't know) from its translation (``translated``), then gives the VECTOR
    columns their type and N back."""
    def __init__(self: Any, from_packet: Any, event_size: int, table_map: Any,
                 ctl_connection: Any, **kwargs: Any) -> None:
        packet = from_packet.packet
        found = translated(packet._data, _BODY_AT) if packet._position == _BODY_AT else None
        if found is None:
            parse(self, from_packet, event_size, table_map, ctl_connection, **kwargs)
            return

        read = from_packet.read_bytes  # what the wrapper counts of the event read so far

        def parse_as(data: bytes) -> None:
            placed = MysqlPacket(data, None)
            placed._position = _BODY_AT
            from_packet.packet = placed
            from_packet.read_bytes = read
            try:
                parse(self, from_packet, event_size - (len(packet._data) - len(data)), table_map,
                      ctl_connection, **kwargs)
            finally:
                from_packet.packet = packet

        data, vectors = found
        try:
            parse_as(data)
            binary = _binary(self, vectors)
        except IndexError:  # more character columns than charsets: counted one too many
            binary = False
        if not binary:
            log.warning("table map of %s.%s: its charsets leave its VECTOR columns out of the "
                        "count (MySQL 9.0 counts them); read so", getattr(self, "schema", "?"),
                        getattr(self, "table", "?"))
            uncounted = translated(packet._data, _BODY_AT, counted=False)
            assert uncounted is not None  # the same event: it has VECTOR columns
            data, vectors = uncounted
            parse_as(data)
        columns = self.__dict__.get("columns")
        if columns:
            for i, n in vectors.items():
                columns[i].type = VECTOR
                columns[i].dimensions = n
    return __init__


def _binary(event: Any, vectors: Dict[int, Optional[int]]) -> bool:
    """Whether each VECTOR column of a parse that counted them got the binary charset, as its
    field has (a table filtered out by the library has no columns: nothing to check)."""
    columns = event.__dict__.get("columns")
    return not columns or all(columns[i].character_set_name == "binary" for i in vectors)
