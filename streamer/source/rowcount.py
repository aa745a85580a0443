"""How many rows a rows event holds, without decoding them: for the tables the streamer doesn't publish.

A resume inside a transaction skips the rows the previous run already published, counted over
every row of the transaction in binlog order (``engine.tracker``), so the rows of unpublished
tables are counted too. Decoding them to count them would make one value that can't be decoded
(a DATE the server took under ALLOW_INVALID_DATES, a charset Python lacks) stop the streamer for
good over a table nobody asked for, and costs the full decode for nothing.

So the row images are walked by their sizes alone (the row format of MySQL's and MariaDB's
``log_event.cc``): per image, the bitmap of NULL columns among those present, then each non-NULL
value, whose size is fixed by the column's type and table-map metadata, or given by a 1-4 byte
little-endian length before it. A column type without a known size, or a walk that doesn't end
exactly at the event's end, falls back to the library's decoding (``None`` here).
"""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

from pymysqlreplication.constants import FIELD_TYPE
from pymysqlreplication.row_event import UpdateRowsEvent

from streamer.source import oldtemporal
from streamer.source.decoders import decimal_layout
from streamer.source.vectors import VECTOR

_FIXED = {FIELD_TYPE.TINY: 1, FIELD_TYPE.SHORT: 2, FIELD_TYPE.INT24: 3, FIELD_TYPE.LONG: 4,
          FIELD_TYPE.LONGLONG: 8, FIELD_TYPE.FLOAT: 4, FIELD_TYPE.DOUBLE: 8, FIELD_TYPE.YEAR: 1,
          FIELD_TYPE.DATE: 3, FIELD_TYPE.NEWDATE: 3}
_FRACTIONAL = {FIELD_TYPE.TIME2: 3, FIELD_TYPE.DATETIME2: 5, FIELD_TYPE.TIMESTAMP2: 4}
_PREFIXED = (FIELD_TYPE.BLOB, FIELD_TYPE.GEOMETRY, FIELD_TYPE.JSON, VECTOR)
SLOT = "streamer_sizes"  # on the library's Table: the sizes, worked out once per table map

Size = Tuple[int, int]  # (fixed size, 0) or (0, width of the length before the value)


def size_of(column: Any) -> Optional[Size]:
    """How a value of ``column`` is laid out in a row image, or None when it isn't known here."""
    kind = column.type
    if kind in _FIXED:
        return _FIXED[kind], 0
    if kind in oldtemporal.OLD:
        return oldtemporal.size(kind, getattr(column, "fsp", None) or 0), 0
    if kind in _FRACTIONAL:
        return _FRACTIONAL[kind] + ((column.fsp or 0) + 1) // 2, 0
    if kind == FIELD_TYPE.NEWDECIMAL:
        return decimal_layout(column.precision, column.decimals)[0], 0
    if kind in (FIELD_TYPE.ENUM, FIELD_TYPE.SET):
        return column.size, 0
    if kind == FIELD_TYPE.BIT:
        return column.bytes, 0
    if kind in (FIELD_TYPE.VARCHAR, FIELD_TYPE.VAR_STRING, FIELD_TYPE.STRING):
        return 0, (2 if column.max_length > 255 else 1)
    if kind in _PREFIXED:
        return 0, column.length_size
    return None


def _sizes(table: Any) -> Optional[List[Size]]:
    sizes = getattr(table, SLOT, False)
    if sizes is False:
        found = [size_of(c) for c in table.columns]
        sizes = None if None in found else found
        setattr(table, SLOT, sizes)
    return sizes


def count(event: Any) -> Optional[int]:
    """The rows of ``event`` (a library rows event, read up to its first row), or None."""
    sizes = _sizes(event.table_map[event.table_id])
    if sizes is None or len(sizes) != event.number_of_columns:
        return None
    wrapper = event.packet
    raw = wrapper.packet  # pymysql's packet; the wrapper has read event.packet.read_bytes of it
    buf = raw.get_all_data()
    at = raw._position
    end = at + event.event_size - wrapper.read_bytes
    images = [event.columns_present_bitmap]
    if event.__class__ is UpdateRowsEvent:
        images.append(event.columns_present_bitmap2)
    present = [[i for i in range(len(sizes)) if bitmap[i >> 3] & (1 << (i & 7))]
               for bitmap in images]
    rows = 0
    try:
        while at < end:
            for columns in present:
                nulls = buf[at:at + (len(columns) + 7) // 8]
                at += len(nulls)
                for j, i in enumerate(columns):
                    if nulls[j >> 3] & (1 << (j & 7)):
                        continue
                    fixed, width = sizes[i]
                    if width:
                        at += width + int.from_bytes(buf[at:at + width], "little")
                    else:
                        at += fixed
            rows += 1
    except IndexError:
        return None
    return rows if at == end else None


def rows_in(event: Any) -> int:
    """The rows of ``event``: counted without decoding where the sizes are known, else decoded."""
    n = count(event)
    return len(event.rows) if n is None else n
