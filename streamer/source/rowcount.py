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

import itertools
import math
from typing import Any, Dict, List, Optional, Tuple

from pymysqlreplication.constants import FIELD_TYPE
from pymysqlreplication.row_event import UpdateRowsEvent

from streamer.errors import UnsupportedEvent
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
UNKNOWN = -1  # (UNKNOWN, its type): an old temporal column of fractional digits no one knows
MAX_CHOICES = 4096  # the most choices of such columns' sizes a count walks


def size_of(column: Any) -> Optional[Size]:
    """How a value of ``column`` is laid out in a row image, or None when it isn't known here."""
    kind = column.type
    if kind in _FIXED:
        return _FIXED[kind], 0
    if kind in oldtemporal.OLD:
        fsp = getattr(column, "fsp", None) or 0
        return (UNKNOWN, kind) if fsp < 0 else (oldtemporal.size(kind, fsp), 0)
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


def _sizes(table: Any) -> Optional[Tuple[List[Size], List[int]]]:
    """The sizes of the table's columns, and which of them are UNKNOWN; None when a size isn't
    known here."""
    sizes = getattr(table, SLOT, False)
    if sizes is False:
        found = [size_of(c) for c in table.columns]
        sizes = None if None in found else \
            (found, [i for i, (fixed, _) in enumerate(found) if fixed == UNKNOWN])
        setattr(table, SLOT, sizes)
    return sizes


def count(event: Any) -> Optional[int]:
    """The rows of ``event`` (a library rows event, read up to its first row), or None."""
    known = _sizes(event.table_map[event.table_id])
    if known is None or len(known[0]) != event.number_of_columns:
        return None
    sizes, unknown = known
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
    if not unknown:
        return _walk(buf, at, end, present, sizes)
    # Old temporal columns whose fractional digits no definition gives (source.oldtemporal):
    # each choice of their sizes is walked, and the count most choices end exactly with is
    # taken, the least of equals (a NULL's size makes no difference, so every choice that
    # differs only in NULLs fits the true count, and a wrong count fits by chance): the same
    # bytes count the same in every run, which a resume inside a transaction needs. Too many
    # choices: not counted.
    choices = [oldtemporal.SIZES[sizes[i][1]] for i in unknown]
    if math.prod(len(c) for c in choices) > MAX_CHOICES:
        return None
    fits: Dict[int, int] = {}
    for tried in itertools.product(*choices):
        trial = list(sizes)
        for i, size in zip(unknown, tried):
            trial[i] = (size, 0)
        n = _walk(buf, at, end, present, trial)
        if n is not None:
            fits[n] = fits.get(n, 0) + 1
    return min(fits, key=lambda n: (-fits[n], n)) if fits else None


def _walk(buf: bytes, at: int, end: int, present: List[List[int]],
          sizes: List[Size]) -> Optional[int]:
    """The rows of images laid out from ``at`` to ``end`` by ``sizes``, or None when the walk
    doesn't end exactly there."""
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
    if n is not None:
        return n
    known = _sizes(event.table_map[event.table_id])
    if known is not None and known[1]:  # the library can't decode them either
        names = ", ".join(event.columns[i].name for i in known[1])
        raise UnsupportedEvent(
            f"rows event at offset {event.packet.log_pos - event.packet.event_size} of {event.schema}."
            f"{event.table}: its rows can't be counted, as the fractional digits of its old "
            f"temporal columns ({names}) are in no definition the server has (the table was "
            f"dropped or changed since). Create the table again as it was (with "
            f"mysql56_temporal_format OFF) and restart, or restart past these changes")
    return len(event.rows)
