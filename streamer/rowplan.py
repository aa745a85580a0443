"""Row decoding planned once per table version, instead of python-mysql-replication's per-value
type dispatch.

For every value of every row the library walks an if/elif chain over the column type and looks
the column's name and flags up through the table map twice: ~17 % of a bulk catch-up's vmprof
samples under PyPy. A table version (tables.TableVersion) builds a plan, one reader per column
chosen by its type, and the streamer hangs it on the library's Table object of each matching
table map. Rows of planned tables are read column by column through it. Types without a
reader here, partial JSON updates, and tables without a plan (not published) take the library's
path. Values and "none sources" are the same as the library's; the type round-trip tests hold it
to that.
"""
from __future__ import annotations

import datetime
import struct
from typing import Any, Callable, List, Optional, Tuple

from pymysqlreplication.bitmap import BitCount
from pymysqlreplication.constants import BINLOG, FIELD_TYPE, NONE_SOURCE
from pymysqlreplication.row_event import RowsEvent

from .mysql_fixes import _read_string, _read_time2, decimal_layout, decimal_unscaled, make_decimal

Reader = Callable[[Any, Any], Any]
Plan = List[Tuple[str, Optional[Reader]]]

_library_read_column_data = RowsEvent._read_column_data
_library_get_none_sources = RowsEvent._get_none_sources
_FLOAT = struct.Struct("<f").unpack
_DOUBLE = struct.Struct("<d").unpack


def _int_reader(size: int, signed: bool) -> Reader:
    def read(event: Any, column: Any) -> int:
        return int.from_bytes(event.packet.read(size), "little", signed=signed)
    return read


def _decimal_reader(precision: int, scale: int) -> Reader:
    """A DECIMAL(precision, scale) reader with its byte layout found once, for the table: looked
    up per value, the layout was ~2 % of a bulk catch-up's main thread (vmprof)."""
    size, groups = decimal_layout(precision, scale)

    def read(event: Any, column: Any) -> Any:
        sign, unscaled = decimal_unscaled(event.packet.read(size), groups)
        return make_decimal(sign, unscaled, scale)
    return read


_EPOCH_ORDINAL = datetime.date(1970, 1, 1).toordinal()
_from_ordinal = datetime.date.fromordinal


def _timestamp2_reader(fsp: int) -> Reader:
    """TIMESTAMP(fsp): what the library's utcfromtimestamp(seconds).replace(microsecond=...)
    gives, from calendar arithmetic. Under PyPy utcfromtimestamp goes through time.gmtime and
    its struct: 216 ns a value against 21 ns (CPython: 933 and 414 ns)."""
    frac = (fsp + 1) // 2
    odd = fsp % 2
    scale = 10 ** (6 - fsp)

    def read(event: Any, column: Any) -> datetime.datetime:
        packet = event.packet
        days, secs = divmod(int.from_bytes(packet.read(4), "big", signed=True), 86400)
        micro = 0
        if frac:
            micro = int.from_bytes(packet.read(frac), "big", signed=True)
            if odd:
                micro = int(micro / 10)
            micro *= scale
        day = _from_ordinal(_EPOCH_ORDINAL + days)
        return datetime.datetime(day.year, day.month, day.day, secs // 3600, secs // 60 % 60,
                                 secs % 60, micro)
    return read


def _date(event: Any, column: Any) -> Optional[datetime.date]:
    packed = int.from_bytes(event.packet.read(3), "little")
    year, month, day = packed >> 9, (packed >> 5) & 0xF, packed & 0x1F
    if not (year and month and day):  # zero dates: None, and why, as the library reports them
        event._RowsEvent__none_sources[column.name] = NONE_SOURCE.OUT_OF_DATE_RANGE
        return None
    return datetime.date(year, month, day)


def _enum_reader(size: int, values: List[str]) -> Reader:
    def read(event: Any, column: Any) -> str:
        return values[int.from_bytes(event.packet.read(size), "little")]
    return read


def _varchar(event: Any, column: Any) -> Any:
    return _read_string(event, 2 if column.max_length > 255 else 1, column)


def _blob(event: Any, column: Any) -> Any:
    return _read_string(event, column.length_size, column)


def _float(event: Any, column: Any) -> float:
    return _FLOAT(event.packet.read(4))[0]


def _double(event: Any, column: Any) -> float:
    return _DOUBLE(event.packet.read(8))[0]


def _datetime2(event: Any, column: Any) -> Optional[datetime.datetime]:
    # 1 sign bit, 17 bits year*13+month, 5 day, 5 hour, 6 minute, 6 second; then the fraction.
    packed = int.from_bytes(event.packet.read(5), "big")
    fsp = column.fsp or 0
    micro = 0
    if fsp:
        micro = int.from_bytes(event.packet.read((fsp + 1) // 2), "big", signed=True)
        if fsp % 2:
            micro = int(micro / 10)
        micro *= 10 ** (6 - fsp)
    year_month = (packed >> 22) & 0x1FFFF
    try:
        return datetime.datetime(year_month // 13, year_month % 13, (packed >> 17) & 0x1F,
                                 (packed >> 12) & 0x1F, (packed >> 6) & 0x3F, packed & 0x3F, micro)
    except ValueError:
        # Zero dates and the like: None, and why, as the library reports them.
        event._RowsEvent__none_sources[column.name] = NONE_SOURCE.OUT_OF_DATETIME2_RANGE
        return None


_INTS = {FIELD_TYPE.TINY: 1, FIELD_TYPE.SHORT: 2, FIELD_TYPE.INT24: 3, FIELD_TYPE.LONG: 4,
         FIELD_TYPE.LONGLONG: 8}
_BY_TYPE = {FIELD_TYPE.VARCHAR: _varchar, FIELD_TYPE.STRING: _varchar, FIELD_TYPE.BLOB: _blob,
            FIELD_TYPE.FLOAT: _float, FIELD_TYPE.DATE: _date, FIELD_TYPE.TIME2: _read_time2,
            FIELD_TYPE.DOUBLE: _double, FIELD_TYPE.DATETIME2: _datetime2}


def plan_for(columns: List[Any]) -> Optional[Plan]:
    """One (name, reader or None for the library's) per column; None when a name is missing."""
    plan: Plan = []
    for column in columns:
        if not column.name:
            return None
        if column.type in _INTS:
            plan.append((column.name, _int_reader(_INTS[column.type], not column.unsigned)))
        elif column.type == FIELD_TYPE.NEWDECIMAL:
            plan.append((column.name, _decimal_reader(column.precision, column.decimals)))
        elif column.type == FIELD_TYPE.TIMESTAMP2:
            plan.append((column.name, _timestamp2_reader(column.fsp or 0)))
        elif column.type == FIELD_TYPE.ENUM and column.enum_values:
            plan.append((column.name, _enum_reader(column.size, list(column.enum_values))))
        else:
            plan.append((column.name, _BY_TYPE.get(column.type)))
    return plan


def attach(table_map_event: Any, plan: Optional[Plan], none_sources: bool) -> None:
    """Use ``plan`` for the rows that follow this table map (the library's Table object).
    Without ``none_sources`` the rows skip the library's per-row list of why each None is None
    (only an empty SET needs it, to tell it from NULL)."""
    table = table_map_event.get_table()
    table.streamer_plan = plan
    table.streamer_skip_none_sources = not none_sources


def _get_none_sources(self: Any, column_data: Any) -> Any:
    if getattr(self.table_map[self.table_id], "streamer_skip_none_sources", False):
        return {}
    return _library_get_none_sources(self, column_data)


def _read_column_data(self: Any, cols_bitmap: bytes, row_image_type: Any = None) -> Any:
    plan = getattr(self.table_map[self.table_id], "streamer_plan", None)
    if plan is None or self.event_type == BINLOG.PARTIAL_UPDATE_ROWS_EVENT:
        return _library_read_column_data(self, cols_bitmap, row_image_type)
    null_bitmap = self.packet.read((BitCount(cols_bitmap) + 7) // 8)
    none_sources = self._RowsEvent__none_sources
    columns = self.columns
    values = {}
    at = 0  # the null bitmap has a bit per column present in the image only
    for i, (name, read) in enumerate(plan):
        if not cols_bitmap[i >> 3] & (1 << (i & 7)):
            none_sources[name] = NONE_SOURCE.COLS_BITMAP
            values[name] = None
            continue
        if null_bitmap[at >> 3] & (1 << (at & 7)):
            none_sources[name] = NONE_SOURCE.NULL
            values[name] = None
        elif read is not None:
            values[name] = read(self, columns[i])
        else:
            column = columns[i]
            values[name] = self._RowsEvent__read_values_name(
                column, null_bitmap, at, False, cols_bitmap, column.unsigned, i)
        at += 1
    return values


def apply() -> None:
    RowsEvent._read_column_data = _read_column_data  # type: ignore[method-assign]
    RowsEvent._get_none_sources = _get_none_sources  # type: ignore[method-assign]
