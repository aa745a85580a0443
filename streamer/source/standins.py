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

- **MySQL's typed arrays** (``MYSQL_TYPE_TYPED_ARRAY``, 244, 8.0.17+): the hidden column of a
  multi-valued index (``INDEX ((CAST(doc->'$.tags' AS CHAR(20) ARRAY)))``), whose metadata is
  its elements' type, then that type's own metadata (``rows_event.h``). Like a functional
  index's column, it is in no rows event (source.definitions), and servers from 8.0.41 at the
  latest leave it out of the table map; those between map it. It counts among the character
  columns when its elements are strings (``is_character_type(field->real_type())``, the
  elements' type), and never among the numeric ones (``binlog_type()``: 244): MySQL 8.0.13's
  and 8.0.41's sql/log_event.cc alike.

So ``translating`` hands the library the table map with each such column under its stand-in
(VECTOR and BLOB_COMPRESSED as BLOB, VARCHAR_COMPRESSED as VARCHAR: the same metadata; a typed
array of strings as its elements' type and metadata, any other as a DATE, which counts in no
optional field and has no metadata) and without the optional fields it doesn't know (13 and
any later one, listed in ``LEFT_OUT``). The parsed columns get what the stand-in hid back: a
VECTOR its type and N, a compressed column ``compressed`` (its type stays the stand-in's, whose
layout its values have), a typed array ``typed_array`` (its elements' type).
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
TYPED_ARRAY = 244
# The column metadata's size by type (rows_event.h's table); a type not here has none.
_META = {FIELD_TYPE.FLOAT: 1, FIELD_TYPE.DOUBLE: 1, FIELD_TYPE.TIMESTAMP2: 1,
         FIELD_TYPE.DATETIME2: 1, FIELD_TYPE.TIME2: 1, FIELD_TYPE.JSON: 1, FIELD_TYPE.TINY_BLOB: 1,
         FIELD_TYPE.MEDIUM_BLOB: 1, FIELD_TYPE.LONG_BLOB: 1, FIELD_TYPE.BLOB: 1,
         FIELD_TYPE.GEOMETRY: 1, VECTOR: 1, BLOB_COMPRESSED: 1, FIELD_TYPE.VARCHAR: 2,
         FIELD_TYPE.VAR_STRING: 2, FIELD_TYPE.STRING: 2, FIELD_TYPE.BIT: 2,
         FIELD_TYPE.NEWDECIMAL: 2, FIELD_TYPE.ENUM: 2, FIELD_TYPE.SET: 2, VARCHAR_COMPRESSED: 2}
_CHARACTER = (FIELD_TYPE.VARCHAR, FIELD_TYPE.VAR_STRING, FIELD_TYPE.STRING, FIELD_TYPE.BLOB)
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
                 compressed: List[int], arrays: Dict[int, int]) -> None:
        self.data = data
        self.vectors = vectors
        self.compressed = compressed
        self.arrays = arrays  # a typed array's index -> its elements' type


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
    size, meta_at = lenenc.read(data, pos + count)
    meta = data[meta_at:meta_at + size]
    fields_at = meta_at + size + (count + 7) // 8
    end = len(data) - _CHECKSUM
    kept, dims, unknown = _fields(data, fields_at, end)
    if not unknown and not any(t in STAND_INS or t == TYPED_ARRAY for t in types):
        return None
    vectors = [i for i, t in enumerate(types) if t == VECTOR]
    uncounted = {} if counted else {VECTOR: FIELD_TYPE.GEOMETRY}
    new_types = bytearray(uncounted.get(t) or STAND_INS.get(t, t) for t in types)
    arrays: Dict[int, int] = {}
    if TYPED_ARRAY in types:
        meta = _arrays_as_stand_ins(types, meta, new_types, arrays)
    out = bytearray(data[:types_at])
    out += new_types
    out += lenenc.write(len(meta))
    out += meta
    out += data[meta_at + size:fields_at]  # the null bits
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
                                                                VARCHAR_COMPRESSED)], arrays)


def _arrays_as_stand_ins(types: bytes, meta: bytes, new_types: bytearray,
                         arrays: Dict[int, int]) -> bytes:
    """The metadata block with each typed array's as its stand-in's (``new_types`` and
    ``arrays`` filled in as it goes): a typed array of strings as its elements' type and
    metadata, any other as a DATE, with none."""
    out = bytearray()
    at = 0
    for i, t in enumerate(types):
        if t != TYPED_ARRAY:
            n = _META.get(t, 0)
            out += meta[at:at + n]
            at += n
            continue
        element = meta[at]
        n = _META.get(element, 0)
        arrays[i] = element
        if element in _CHARACTER:
            new_types[i] = element
            out += meta[at + 1:at + 1 + n]
        else:
            new_types[i] = FIELD_TYPE.DATE
        at += 1 + n
    return bytes(out)


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
            for i, element in found.arrays.items():
                columns[i].typed_array = element
    return __init__


def _binary(event: Any, vectors: Dict[int, Optional[int]]) -> bool:
    """Whether each VECTOR column of a parse that counted them got the binary charset, as its
    field has (a table filtered out by the library has no columns: nothing to check)."""
    columns = event.__dict__.get("columns")
    return not columns or all(columns[i].character_set_name == "binary" for i in vectors)
