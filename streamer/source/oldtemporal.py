"""DATETIME, TIME and TIMESTAMP columns in their old formats, as the binlog writes them.

MySQL 5.6 and MariaDB 10.1 made the temporal formats the binlog writes as DATETIME2, TIME2 and
TIMESTAMP2 (18, 19, 17), with the column's fractional digits in the table map. A column made
before (MySQL 5.5, MariaDB 10.0 and older) keeps its old format until an ALTER rebuilds the
table, and MariaDB still makes one while ``mysql56_temporal_format`` is OFF. The binlog writes
such a column as DATETIME, TIME or TIMESTAMP (12, 11, 7), with no metadata at all, and its value
as the server stores it (sql/field.cc; checked byte for byte on MariaDB 10.11):

- without fractional digits: DATETIME an 8-byte little-endian ``YYYYMMDDhhmmss``; TIME a 3-byte
  little-endian signed ``±(hh·10000 + mm·100 + ss)``; TIMESTAMP 4 bytes little-endian, seconds;
- with n of them (MariaDB 5.3's formats), big-endian, µs being the value's microseconds:
  DATETIME(n) in ``(6, 6, 7, 7, 7, 8)[n-1]`` bytes, ``(((((year·13 + month)·32 + day)·24 +
  hour)·60 + minute)·60 + second)·10⁶ + µs``, over ``10^(6-n)``; TIME(n) in ``(4, 4, 5, 5, 5,
  6)[n-1]`` bytes, the signed µs of the time over ``10^(6-n)``, plus ``3020400·10⁶`` over the
  same (so that the stored value is never negative); TIMESTAMP(n) 4 bytes of seconds, then
  ``(1, 1, 2, 2, 3, 3)[n-1]`` bytes of µs over ``10^(6-n)``.

The library reads the three types by the layouts without fractional digits, and a TIME as
unsigned: a negative TIME came out as another time (−838:59:59 as 839:12:57) in silence; a
DATETIME(6) as a year past 9999, which stopped the stream for good; a DATETIME(3) a byte short,
and every column after it wrong. As a table map doesn't say n, a table map with such a column
has n read from ``information_schema`` (source.definitions) the first time it is parsed, before
any of its rows are read or counted, published or not (``measuring``): each such column gets its
``fsp``. Its values are read by these layouts (source.rowplan), and counted by their sizes
(source.rowcount). n is the table's when read: a stream far behind a DDL that changes it (while
``mysql56_temporal_format`` is OFF, as any other ALTER makes the new formats) reads the older
rows by the newer n.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

from pymysqlreplication.constants import FIELD_TYPE

OLD = frozenset([FIELD_TYPE.DATETIME, FIELD_TYPE.TIME, FIELD_TYPE.TIMESTAMP])
_DATETIME_BYTES = (8, 6, 6, 7, 7, 7, 8)  # by fractional digits; 0: the old 8-byte integer
_TIME_BYTES = (3, 4, 4, 5, 5, 5, 6)
_TIMESTAMP_FRACTION_BYTES = (0, 1, 1, 2, 2, 3, 3)
_TIME_ZERO = 3020400 * 1000000  # (838:59:59 + 1 s) in µs: a stored TIME's 0
# By type, the sizes a value may have whatever its digits (for a column no definition has).
SIZES = {FIELD_TYPE.DATETIME: sorted(set(_DATETIME_BYTES)), FIELD_TYPE.TIME: sorted(set(_TIME_BYTES)),
         FIELD_TYPE.TIMESTAMP: sorted(set(4 + n for n in _TIMESTAMP_FRACTION_BYTES))}
# The server's table definitions (source.definitions.Definitions.of), once the stream has them;
# None: n unknown, read as 0 (the tests that replay a recording without a server).
_DEFINITIONS: List[Optional[Callable[[str, str, Any], Any]]] = [None]

Parts = Tuple[int, int, int, int, int, int, int]  # year, month, day, hour, minute, second, µs


def configure(definitions_of: Optional[Callable[[str, str, Any], Any]]) -> None:
    """Where the fractional digits of a table's old temporal columns come from."""
    _DEFINITIONS[0] = definitions_of


def size(kind: int, fsp: int) -> int:
    """The bytes of a value of an old temporal column of type ``kind`` and ``fsp`` digits."""
    if kind == FIELD_TYPE.DATETIME:
        return _DATETIME_BYTES[fsp]
    if kind == FIELD_TYPE.TIME:
        return _TIME_BYTES[fsp]
    return 4 + _TIMESTAMP_FRACTION_BYTES[fsp]


def datetime_parts(raw: bytes, fsp: int) -> Parts:
    """An old DATETIME's stored bytes as its fields (a zero or invalid date as stored)."""
    if not fsp:
        packed = int.from_bytes(raw, "little")
        date, clock = divmod(packed, 1000000)
        return (date // 10000, date // 100 % 100, date % 100, clock // 10000, clock // 100 % 100,
                clock % 100, 0)
    packed = int.from_bytes(raw, "big") * 10 ** (6 - fsp)
    packed, micro = divmod(packed, 1000000)
    packed, second = divmod(packed, 60)
    packed, minute = divmod(packed, 60)
    packed, hour = divmod(packed, 24)
    packed, day = divmod(packed, 32)
    year, month = divmod(packed, 13)
    return year, month, day, hour, minute, second, micro


def time_micros(raw: bytes, fsp: int) -> int:
    """An old TIME's stored bytes as signed microseconds."""
    if not fsp:
        packed = int.from_bytes(raw, "little", signed=True)
        hms = abs(packed)
        micros = ((hms // 10000 * 60 + hms // 100 % 100) * 60 + hms % 100) * 1000000
        return -micros if packed < 0 else micros
    scale = 10 ** (6 - fsp)
    return (int.from_bytes(raw, "big") - _TIME_ZERO // scale) * scale


def timestamp_micros(raw: bytes, fsp: int) -> int:
    """An old TIMESTAMP's stored bytes as microseconds since 1970-01-01 00:00 UTC."""
    if not fsp:
        return int.from_bytes(raw, "little") * 1000000
    return (int.from_bytes(raw[:4], "big") * 1000000
            + int.from_bytes(raw[4:], "big") * 10 ** (6 - fsp))


def measuring(parse: Callable[..., None]) -> Callable[..., None]:
    """TableMapEvent.__init__ that gives each old temporal column of the map its ``fsp``, by
    the table's definition, once the library has parsed it."""
    def __init__(self: Any, from_packet: Any, event_size: int, table_map: Any,
                 ctl_connection: Any, **kwargs: Any) -> None:
        parse(self, from_packet, event_size, table_map, ctl_connection, **kwargs)
        columns = self.__dict__.get("columns")
        definitions_of = _DEFINITIONS[0]
        if not columns or definitions_of is None or not any(c.type in OLD for c in columns):
            return
        found = definitions_of(self.schema, self.table, columns)
        for column in columns:
            if column.type in OLD:
                column.fsp = found.fraction_of(column.name)
    return __init__
