"""Table maps python-mysql-replication can't read, read through stand-in types.

The library reads a column's metadata by its type, and reads none for a type it doesn't know:
every later column's metadata, the null bits and the optional metadata fields are then read
from the wrong bytes, and an optional field it doesn't know raises (``MetadataFieldType``).
Either made any table map of such a table fail, published or not (the streamer has every table
map parsed): the stream stopped there, again at every restart. The types it doesn't know:

- **MySQL 9's VECTOR** (242; source.vectors): one byte of metadata and a LONGBLOB's layout;
  its table map adds optional field 13 (VECTOR_DIMENSIONALITY, an N per VECTOR column).
- **MariaDB's compressed columns** (10.3+: ``TEXT COMPRESSED``, ``VARCHAR(n) COMPRESSED``, and
  their binary twins): ``MYSQL_TYPE_BLOB_COMPRESSED`` (140) with a BLOB's metadata and layout,
  ``MYSQL_TYPE_VARCHAR_COMPRESSED`` (141) with a VARCHAR's (its length one more, for the
  header byte). The bytes of a value are the stored form (source.colcompress). Seen on MariaDB
  10.11: the table map's charsets field counts them among the character columns, as the
  library counts a BLOB and a VARCHAR.

So ``translating`` hands the library the table map with each such column under its stand-in
(VECTOR and BLOB_COMPRESSED as BLOB, VARCHAR_COMPRESSED as VARCHAR: the same metadata) and
without the optional fields it doesn't know (13 and any later one, listed in ``LEFT_OUT``).
The parsed columns get what the stand-in hid back: a VECTOR its type and N, a compressed column
``compressed`` (its type stays the stand-in's, whose layout its values have).
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Dict, List, Optional, Tuple

from pymysql.protocol import MysqlPacket
from pymysqlreplication.constants import FIELD_TYPE

from streamer.source import lenenc
from streamer.source.vectors import DIMENSIONALITY, VECTOR

log = logging.getLogger(__name__)

BLOB_COMPRESSED = 140
VARCHAR_COMPRESSED = 141
# A type the library doesn't know -> the one it reads the same metadata and values of.
STAND_INS = {VECTOR: FIELD_TYPE.BLOB, BLOB_COMPRESSED: FIELD_TYPE.BLOB,
             VARCHAR_COMPRESSED: FIELD_TYPE.VARCHAR}
KNOWN_FIELDS = frozenset(range(1, 13))  # the optional metadata fields the library reads
_CHECKSUM = 4
# The packet wrapper has read the OK byte and the 19-byte event header before the event's reads.
_BODY_AT = 20
LEFT_OUT: Dict[int, int] = {}  # optional metadata field type -> table maps it was left out of


class Translation:
    """A table map as the library reads it right (``data``), and what its stand-ins hid: the
    VECTOR columns' {index: N or None}, the compressed columns' indexes."""

    def __init__(self, data: bytes, vectors: Dict[int, Optional[int]],
                 compressed: List[int]) -> None:
        self.data = data
        self.vectors = vectors
        self.compressed = compressed


def translated(data: bytes, at: int, counted: bool = True) -> Optional[Translation]:
    """The table-map event in ``data`` (its body from ``at``, its checksum last) with its
    stand-ins; None when it has nothing to translate (no type the library doesn't know, no
    optional field it doesn't know). ``counted``: the VECTOR columns count among the character
    columns (as BLOBs), or not (as GEOMETRY columns)."""
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
    if not unknown and not any(t in STAND_INS for t in types):
        return None
    vectors = [i for i, t in enumerate(types) if t == VECTOR]
    out = bytearray(data[:fields_at])
    uncounted = {} if counted else {VECTOR: FIELD_TYPE.GEOMETRY}
    out[types_at:types_at + count] = bytes(uncounted.get(t) or STAND_INS.get(t, t) for t in types)
    out += kept
    out += data[end:]
    for kind in unknown if counted else ():  # (the second translation of a map: said once)
        LEFT_OUT[kind] = LEFT_OUT.get(kind, 0) + 1
        if LEFT_OUT[kind] == 1:
            log.info("a table map carries optional metadata field %d, which the streamer doesn't "
                     "read: left out (the table's rows are read without it)", kind)
    return Translation(bytes(out),
                       {i: dims[n] if n < len(dims) else None for n, i in enumerate(vectors)},
                       [i for i, t in enumerate(types) if t in (BLOB_COMPRESSED,
                                                                VARCHAR_COMPRESSED)])


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
    """TableMapEvent.__init__ that parses a table map with types or optional fields the library
    doesn't know from its translation (``translated``), then gives the columns what their
    stand-ins hid."""
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

        try:
            parse_as(found.data)
            binary = _binary(self, found.vectors)
        except IndexError:  # more character columns than charsets: counted one too many
            binary = False
        if not binary:
            log.warning("table map of %s.%s: its charsets leave its VECTOR columns out of the "
                        "count (MySQL 9.0 counts them); read so", getattr(self, "schema", "?"),
                        getattr(self, "table", "?"))
            uncounted = translated(packet._data, _BODY_AT, counted=False)
            assert uncounted is not None  # the same event: it has VECTOR columns
            found = uncounted
            parse_as(found.data)
        columns = self.__dict__.get("columns")
        if columns:
            for i, n in found.vectors.items():
                columns[i].type = VECTOR
                columns[i].dimensions = n
            for i in found.compressed:
                columns[i].compressed = True
    return __init__


def _binary(event: Any, vectors: Dict[int, Optional[int]]) -> bool:
    """Whether each VECTOR column of a parse that counted them got the binary charset, as its
    field has (a table filtered out by the library has no columns: nothing to check)."""
    columns = event.__dict__.get("columns")
    return not columns or all(columns[i].character_set_name == "binary" for i in vectors)
