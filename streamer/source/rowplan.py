"""Row decoding planned once per table version, instead of python-mysql-replication's per-value type
dispatch.

For every value of every row the library walks an if/elif chain over the column type and looks the
column's name and flags up through the table map twice (a sixth of a bulk catch-up under PyPy:
docs/benchmarks.md). A table version (schema.versions.TableVersion) builds a plan, one reader per
column chosen by its type, and the catalog hangs it on the library's Table object of each matching
table map (``attach``); source.patches installs the reader that uses it. Rows of planned tables are
read column by column through it. Types without a reader here, partial JSON updates, and tables
without a plan (not published) take the library's path. Values and "none sources" are the same as
the library's, but for DATE, TIME, DATETIME and TIMESTAMP: those are read straight into the days or
microseconds their Avro types carry, the numbers schema/columns.py's converters make of the
library's date, timedelta and datetime values. test_rowplan and the type round-trip tests hold it
to that.
"""
from __future__ import annotations

import datetime
import logging
import struct
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Tuple

from pymysqlreplication.bitmap import BitCount
from pymysqlreplication.constants import BINLOG, FIELD_TYPE, NONE_SOURCE
from pymysqlreplication.row_event import RowImageType

from streamer.errors import UnsupportedEvent
from streamer.source import colcompress, jsondiff, mysqljson, oldtemporal
from streamer.source.decoders import (decimal_layout, decimal_unscaled, decode_string,
                                      make_decimal, read_string, time2_micros,
                                      time2_packed_from_binary)
from streamer.source.vectors import VECTOR

log = logging.getLogger(__name__)
Reader = Callable[[Any, Any], Any]
Plan = List[Tuple[str, Optional[Reader]]]

EPOCH_ORDINAL = datetime.date(1970, 1, 1).toordinal()
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


# Temporal columns are read straight into the numbers their Avro types carry (columns.py):
# microseconds or days since 1970-01-01. Building a datetime only to take it apart again cost
# PyPy ~300 ns a DATETIME value (its datetime is pure Python), against ~12 ns for the arithmetic.
# The converters pass these ints through; a value the library read (a datetime) they convert.
_DAYS_BEFORE_MONTH = (0, 0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334)
_DAYS_IN_MONTH = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _days(year: int, month: int, day: int) -> Optional[int]:
    """Days from 1970-01-01 to a date, or None where datetime.date would refuse it."""
    if not (1 <= year <= 9999 and 1 <= month <= 12 and day >= 1):
        return None
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    if day > _DAYS_IN_MONTH[month] + (month == 2 and leap):
        return None
    y = year - 1
    return (y * 365 + y // 4 - y // 100 + y // 400 + _DAYS_BEFORE_MONTH[month]
            + (month > 2 and leap) + day - EPOCH_ORDINAL)  # date.toordinal()'s arithmetic


def _fraction(packet: Any, fsp: int) -> int:
    """The microseconds of a DATETIME/TIMESTAMP(fsp) value, as the library adds them to the
    value: a fraction of 0 or less adds nothing, and one above 999999 is refused."""
    micro = int.from_bytes(packet.read((fsp + 1) // 2), "big", signed=True)
    if fsp % 2:
        micro = int(micro / 10)
    micro *= 10 ** (6 - fsp)
    if micro <= 0:
        return 0
    if micro > 999999:
        raise ValueError("microsecond must be in 0..999999")
    return micro


def _timestamp2(event: Any, column: Any) -> int:
    """TIMESTAMP(fsp) as UTC microseconds: the library's utcfromtimestamp(seconds) and fraction."""
    packet = event.packet
    micros = int.from_bytes(packet.read(4), "big", signed=True) * 1000000
    fsp = column.fsp
    return micros + _fraction(packet, fsp) if fsp else micros


class InvalidValues:
    """Temporal values the server stores and Avro's types can't hold: a DATE or DATETIME the
    server took under ALLOW_INVALID_DATES (2023-02-30), or with a zero month or day but not all
    zero (without NO_ZERO_IN_DATE); and text with bytes its charset has no character for
    (decoders.read_string). A date is published as null, like a zero date, a text as SELECT
    shows it; each is counted
    (``streamer_invalid_values_total``), and logged with its value, its table and column, and
    where it was read, so the value is not lost: the first 100 of each column, then every
    10,000th (a table full of them must not flood the log). The all-zero date stays the
    documented null, without a warning."""

    def __init__(self) -> None:
        self.total = 0
        self.by_column: Dict[Tuple[str, str, str], int] = {}

    def note(self, db: str, table: str, column: str, value: str, where: str,
             published: str = "as null, as Avro can't hold it",
             fix: str = "correct the row on the server, or stop it being written: sql_mode "
                        "without ALLOW_INVALID_DATES, with NO_ZERO_IN_DATE") -> None:
        self.total += 1
        key = (db, table, column)
        n = self.by_column.get(key, 0) + 1
        self.by_column[key] = n
        if n <= 100 or n % 10000 == 0:
            log.warning("invalid %s in %s.%s column %s (%s): published %s (%d in this column "
                        "so far; streamer_invalid_values_total counts them all). To end it, %s",
                        value, db, table, column, where, published, n, fix)


INVALID = InvalidValues()


def _invalid(event: Any, column: Any, value: str) -> None:
    packet = event.packet
    INVALID.note(event.schema, event.table, column.name, value,
                 f"rows event at offset {packet.log_pos - packet.event_size}")


def _date(event: Any, column: Any) -> Optional[int]:
    packed = int.from_bytes(event.packet.read(3), "little")
    year, month, day = packed >> 9, (packed >> 5) & 0xF, packed & 0x1F
    days = _days(year, month, day) if year and month and day else None
    if days is None:  # zero dates: None, and why, as the library reports them
        if packed:
            _invalid(event, column, f"DATE '{year:04d}-{month:02d}-{day:02d}'")
        event._RowsEvent__none_sources[column.name] = NONE_SOURCE.OUT_OF_DATE_RANGE
    return days


def _old_datetime(fsp: int) -> Reader:
    """DATETIME in its old format (source.oldtemporal), as _datetime2 gives a DATETIME2."""
    size = oldtemporal.size(FIELD_TYPE.DATETIME, fsp)

    def read(event: Any, column: Any) -> Optional[int]:
        year, month, day, hour, minute, second, micro = oldtemporal.datetime_parts(
            event.packet.read(size), fsp)
        days = _days(year, month, day)
        if days is None or hour > 23 or minute > 59 or second > 59:
            if year or month or day or hour or minute or second or micro:
                _invalid(event, column, f"DATETIME '{year:04d}-{month:02d}-{day:02d} "
                                        f"{hour:02d}:{minute:02d}:{second:02d}'")
            event._RowsEvent__none_sources[column.name] = NONE_SOURCE.OUT_OF_DATETIME_RANGE
            return None
        return (days * 86400 + hour * 3600 + minute * 60 + second) * 1000000 + micro
    return read


def _old_time(fsp: int) -> Reader:
    """TIME in its old format, as signed microseconds (a negative one too)."""
    size = oldtemporal.size(FIELD_TYPE.TIME, fsp)

    def read(event: Any, column: Any) -> int:
        return oldtemporal.time_micros(event.packet.read(size), fsp)
    return read


def _old_timestamp(fsp: int) -> Reader:
    """TIMESTAMP in its old format, as UTC microseconds."""
    size = oldtemporal.size(FIELD_TYPE.TIMESTAMP, fsp)

    def read(event: Any, column: Any) -> int:
        return oldtemporal.timestamp_micros(event.packet.read(size), fsp)
    return read


def _old_unknown(fsp: int) -> Reader:
    """An old temporal column whose table's definition no longer has it: its digits, and so
    its values' layout, are unknown."""
    def read(event: Any, column: Any) -> Any:
        packet = event.packet
        raise UnsupportedEvent(
            f"rows event at offset {packet.log_pos - packet.event_size} of {event.schema}."
            f"{event.table}: column '{column.name}' keeps an old temporal format (made by MariaDB "
            f"10.0 or older, or with mysql56_temporal_format OFF), whose values' layout depends "
            f"on fractional digits the binlog doesn't carry, and the server's definition of the "
            f"table no longer has the column (the table was dropped or changed since). Create "
            f"the table again as it was (with mysql56_temporal_format OFF) and restart, or "
            f"restart past these changes")
    return read


_OLD_TEMPORAL = {FIELD_TYPE.DATETIME: _old_datetime, FIELD_TYPE.TIME: _old_time,
                 FIELD_TYPE.TIMESTAMP: _old_timestamp}


def _time2(event: Any, column: Any) -> int:
    """TIME(fsp) as signed microseconds (source.decoders reads the same bytes into a timedelta)."""
    fsp = column.fsp or 0
    return time2_micros(time2_packed_from_binary(event.packet.read(3 + (fsp + 1) // 2), fsp))


def _enum_reader(size: int, values: List[str]) -> Reader:
    def read(event: Any, column: Any) -> str:
        return values[int.from_bytes(event.packet.read(size), "little")]
    return read


def _varchar(event: Any, column: Any) -> Any:
    return read_string(event, 2 if column.max_length > 255 else 1, column)


def _blob(event: Any, column: Any) -> Any:
    return read_string(event, column.length_size, column)


def _compressed_varchar(event: Any, column: Any) -> Any:
    """MariaDB's VARCHAR COMPRESSED (source.standins): a VARCHAR of the stored form."""
    stored = event.packet.read_length_coded_pascal_string(2 if column.max_length > 255 else 1)
    return decode_string(event, colcompress.inflate(stored), column)


def _compressed_blob(event: Any, column: Any) -> Any:
    """MariaDB's TEXT or BLOB COMPRESSED (source.standins): a BLOB of the stored form."""
    stored = event.packet.read_length_coded_pascal_string(column.length_size)
    return decode_string(event, colcompress.inflate(stored), column)


def _typed_array(event: Any, column: Any) -> Any:
    """A multi-valued index's column (source.standins), which MySQL writes in no row image."""
    packet = event.packet
    raise UnsupportedEvent(f"rows event at offset {packet.log_pos - packet.event_size} of "
                           f"{event.schema}.{event.table} has a value for column "
                           f"'{column.name}', a multi-valued index's typed array, which MySQL "
                           f"writes in no row image and the streamer can't read")


def _vector(event: Any, column: Any) -> bytes:
    """MySQL 9's VECTOR (source.vectors): its bytes, laid out as a LONGBLOB's."""
    return event.packet.read_length_coded_pascal_string(column.length_size)


def _json(event: Any, column: Any) -> str:
    """MySQL's binary JSON, as the JSON text a client shows (source.mysqljson). MariaDB's JSON
    is a LONGTEXT, read as text."""
    return mysqljson.to_text(event.packet.read_length_coded_pascal_string(column.length_size))


def _float(event: Any, column: Any) -> float:
    return _FLOAT(event.packet.read(4))[0]


def _double(event: Any, column: Any) -> float:
    return _DOUBLE(event.packet.read(8))[0]


def _datetime2(event: Any, column: Any) -> Optional[int]:
    """DATETIME(fsp) as wall-clock microseconds since 1970-01-01 00:00; None (with the reason)
    where the library's datetime() refuses the date or time of day: zero dates and the like."""
    # 1 sign bit, 17 bits year*13+month, 5 day, 5 hour, 6 minute, 6 second; then the fraction.
    packed = int.from_bytes(event.packet.read(5), "big")
    fsp = column.fsp
    year_month = (packed >> 22) & 0x1FFFF
    hour, minute, second = (packed >> 12) & 0x1F, (packed >> 6) & 0x3F, packed & 0x3F
    year, month, day = year_month // 13, year_month % 13, (packed >> 17) & 0x1F
    days = _days(year, month, day)
    if days is None or hour > 23 or minute > 59 or second > 59:
        fraction = event.packet.read((fsp + 1) // 2) if fsp else b""
        if packed & 0x7FFFFFFFFF or fraction.strip(b"\0"):  # not the all-zero DATETIME
            _invalid(event, column, f"DATETIME '{year:04d}-{month:02d}-{day:02d} "
                                    f"{hour:02d}:{minute:02d}:{second:02d}'")
        event._RowsEvent__none_sources[column.name] = NONE_SOURCE.OUT_OF_DATETIME2_RANGE
        return None
    micros = (days * 86400 + hour * 3600 + minute * 60 + second) * 1000000
    return micros + _fraction(event.packet, fsp) if fsp else micros


_INTS = {FIELD_TYPE.TINY: 1, FIELD_TYPE.SHORT: 2, FIELD_TYPE.INT24: 3, FIELD_TYPE.LONG: 4,
         FIELD_TYPE.LONGLONG: 8}
_BY_TYPE = {FIELD_TYPE.VARCHAR: _varchar, FIELD_TYPE.STRING: _varchar, FIELD_TYPE.BLOB: _blob,
            FIELD_TYPE.FLOAT: _float, FIELD_TYPE.DATE: _date, FIELD_TYPE.TIME2: _time2,
            FIELD_TYPE.DOUBLE: _double, FIELD_TYPE.DATETIME2: _datetime2,
            FIELD_TYPE.TIMESTAMP2: _timestamp2, FIELD_TYPE.JSON: _json, VECTOR: _vector}


def _skip_varchar(event: Any, column: Any) -> None:
    packet = event.packet
    packet.advance(packet.read_uint_by_size(2 if column.max_length > 255 else 1))


def _skip_blob(event: Any, column: Any) -> None:
    packet = event.packet
    packet.advance(packet.read_uint_by_size(column.length_size))


# A value nobody reads (an excluded column's, or one masked with null) of a type whose
# decoding costs: stepped over, its length read and its bytes left as they are. A compressed
# column's stored form is laid out as its plain type's, a partial JSON update's diff as a JSON.
_SKIPS = {FIELD_TYPE.VARCHAR: _skip_varchar, FIELD_TYPE.STRING: _skip_varchar,
          FIELD_TYPE.BLOB: _skip_blob, FIELD_TYPE.JSON: _skip_blob,
          FIELD_TYPE.GEOMETRY: _skip_blob, VECTOR: _skip_blob}
SKIPPERS = frozenset(_SKIPS.values())


def plan_for(columns: List[Any], unread: FrozenSet[str] = frozenset()) -> Optional[Plan]:
    """One (name, reader or None for the library's) per column; None when a name is missing.
    The values of the columns named in ``unread`` are published by no message: those of the
    types ``_SKIPS`` knows are stepped over, and read as None."""
    plan: Plan = []
    for column in columns:
        if not column.name:
            return None
        if column.name in unread and column.type in _SKIPS:
            plan.append((column.name, _SKIPS[column.type]))
        elif column.type in _INTS:
            plan.append((column.name, _int_reader(_INTS[column.type], not column.unsigned)))
        elif column.type == FIELD_TYPE.NEWDECIMAL:
            plan.append((column.name, _decimal_reader(column.precision, column.decimals)))
        elif column.type == FIELD_TYPE.ENUM and column.enum_values:
            plan.append((column.name, _enum_reader(column.size, list(column.enum_values))))
        elif getattr(column, "typed_array", None) is not None:
            plan.append((column.name, _typed_array))
        elif column.type in _OLD_TEMPORAL:
            fsp = getattr(column, "fsp", None) or 0
            plan.append((column.name, (_old_unknown if fsp < 0 else
                                       _OLD_TEMPORAL[column.type])(fsp)))
        elif getattr(column, "compressed", False):
            plan.append((column.name, _compressed_varchar if column.type == FIELD_TYPE.VARCHAR
                         else _compressed_blob))
        else:
            plan.append((column.name, _BY_TYPE.get(column.type)))
    return plan


class TableState:
    """What the streamer keeps on the library's Table of a published table map, in one slot
    (``SLOT``): the table version it was built for, its plan, and whether its rows may skip the
    library's none sources."""

    __slots__ = ("version", "plan", "skip_none_sources", "hidden", "unread")

    def __init__(self, version: Any, plan: Optional[Plan], skip_none_sources: bool,
                 hidden: FrozenSet[str] = frozenset(),
                 unread: FrozenSet[str] = frozenset()) -> None:
        self.version = version
        self.plan = plan
        self.skip_none_sources = skip_none_sources
        # Columns rows events leave out by design (a functional index's, source.definitions).
        self.hidden = hidden
        # Columns whose values no message publishes (excluded, masked with null): a row image
        # may leave them out (binlog_row_image NOBLOB leaves out the BLOBs and TEXTs it can).
        self.unread = unread


SLOT = "streamer"


def attach(table_map_event: Any, version: Any, plan: Optional[Plan], none_sources: bool,
           hidden: FrozenSet[str] = frozenset(), unread: FrozenSet[str] = frozenset()) -> None:
    """Use ``plan`` for the rows that follow this table map (the library's Table object).
    Without ``none_sources`` the rows skip the library's per-row list of why each None is None
    (only an empty SET needs it, to tell it from NULL). ``hidden`` columns may be missing from
    a row image; ``unread`` ones too, read as None."""
    setattr(table_map_event.get_table(), SLOT,
            TableState(version, plan, not none_sources, hidden, unread))


def state_of(table: Any) -> Optional[TableState]:
    return getattr(table, SLOT, None)


def get_none_sources(library: Reader) -> Reader:
    """RowsEvent._get_none_sources, given the library's (source.patches installs it)."""
    def _get_none_sources(self: Any, column_data: Any) -> Any:
        state = getattr(self.table_map[self.table_id], SLOT, None)
        if state is not None and state.skip_none_sources:
            return {}
        return library(self, column_data)
    return _get_none_sources


def _partial_image(event: Any, column: str) -> UnsupportedEvent:
    """A published table's row image without one of its columns: binlog_row_image was MINIMAL or
    NOBLOB for the session that wrote it. Publishing would turn the missing value into null.
    (An update's after image may leave out what the statement didn't change: fetch_update_row.)"""
    packet = event.packet
    return UnsupportedEvent(
        f"a rows event of {event.schema}.{event.table} at offset "
        f"{packet.log_pos - packet.event_size} of the binlog file being read has no value for "
        f"column '{column}': its row image is not FULL (binlog_row_image MINIMAL or NOBLOB for "
        f"the session that wrote it), and publishing it would turn that value into null. Set "
        f"binlog_row_image=FULL globally and for every session (SET GLOBAL binlog_row_image="
        f"'FULL'; sessions started before keep their own), or, if the column need not be "
        f"published, leave it out (tables.columns.exclude). Nothing from this event on was "
        f"published, and the checkpoint stays before it; once its change is accounted for, "
        f"restart past it (streamer run --start-file/--start-pos or --start-gtid)")


def _partial_bits(event: Any, row_image_type: Any) -> Optional[bytes]:
    """A Partial_update_rows event's after image starts with binlog_row_value_options and, when
    its PARTIAL_JSON bit is set, a bit per JSON column of the table: set for a column whose value
    is a partial update (source.jsondiff). None for any other image."""
    if event.event_type != BINLOG.PARTIAL_UPDATE_ROWS_EVENT or row_image_type is None or \
            row_image_type.value != _UPDATE_AFTER_IMAGE:
        return None
    options = event.packet.read_length_coded_binary()
    if not options & _PARTIAL_JSON:
        return None
    json_columns = sum(1 for c in event.columns if c.type == FIELD_TYPE.JSON)
    return event.packet.read((json_columns + 7) // 8)


_UPDATE_AFTER_IMAGE = 2  # the library's RowImageType.UpdateAI
_PARTIAL_JSON = 1  # binlog_row_value_options' bit for PARTIAL_JSON
_BEFORE, _AFTER = RowImageType.UpdateBI, RowImageType.UpdateAI


def fetch_update_row(library: Callable[..., Any]) -> Callable[..., Any]:
    """UpdateRowsEvent._fetch_one_row and its partial twin's (source.patches installs one each):
    the library's, saying which image it reads, and with an after image made whole. Once the
    before image was read whole (a missing column there stops the stream), a column the after
    image leaves out is one the statement didn't change (MariaDB's binlog_row_image FULL_NODUP,
    11.4 and later, writes only the changed ones): its value is the before image's."""
    def _fetch_one_row(self: Any) -> Dict[str, Any]:
        before = self._read_column_data(self.columns_present_bitmap, _BEFORE)
        before_none = self._get_none_sources(before)
        after = self._read_column_data(self.columns_present_bitmap2, _AFTER)
        if len(after) != len(before):
            after = {name: after[name] if name in after else value
                     for name, value in before.items()}
        return {"before_values": before, "before_none_sources": before_none,
                "after_values": after, "after_none_sources": self._get_none_sources(after)}
    return _fetch_one_row


def read_column_data(library: Callable[..., Any]) -> Callable[..., Any]:
    """RowsEvent._read_column_data, given the library's (source.patches installs it): rows of a
    planned table are read through its plan, the rest by the library."""
    def _read_column_data(self: Any, cols_bitmap: bytes, row_image_type: Any = None) -> Any:
        state = getattr(self.table_map[self.table_id], SLOT, None)
        plan = None if state is None else state.plan
        if plan is None:
            return library(self, cols_bitmap, row_image_type)
        partial = _partial_bits(self, row_image_type) \
            if self.event_type == BINLOG.PARTIAL_UPDATE_ROWS_EVENT else None
        if partial is not None:
            return _read_partial(self, cols_bitmap, plan, partial)  # an after image
        null_bitmap = self.packet.read((BitCount(cols_bitmap) + 7) // 8)
        none_sources = self._RowsEvent__none_sources
        columns = self.columns
        values = {}
        at = 0  # the null bitmap has a bit per column present in the image only
        for i, (name, read) in enumerate(plan):
            if not cols_bitmap[i >> 3] & (1 << (i & 7)):
                if name in state.hidden or row_image_type is _AFTER:
                    continue
                if name in state.unread:
                    values[name] = None  # published by no message: not needed
                    continue
                raise _partial_image(self, name)
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
    return _read_column_data


def _read_partial(event: Any, cols_bitmap: bytes, plan: Plan, partial: bytes) -> Dict[str, Any]:
    """An after image whose JSON columns may hold partial updates (their diffs, read into a
    source.jsondiff.Diffs that the rows stage applies to the before image)."""
    null_bitmap = event.packet.read((BitCount(cols_bitmap) + 7) // 8)
    none_sources = event._RowsEvent__none_sources
    columns = event.columns
    values: Dict[str, Any] = {}
    at = json_at = 0
    for i, (name, read) in enumerate(plan):
        column = columns[i]
        if not cols_bitmap[i >> 3] & (1 << (i & 7)):
            continue  # hidden, or unchanged: fetch_update_row
        is_partial = False
        if column.type == FIELD_TYPE.JSON:
            is_partial = bool(partial[json_at >> 3] & (1 << (json_at & 7)))
            json_at += 1
        if null_bitmap[at >> 3] & (1 << (at & 7)):
            none_sources[name] = NONE_SOURCE.NULL
            values[name] = None
        elif is_partial and read not in SKIPPERS:
            values[name] = jsondiff.read(
                event.packet.read_length_coded_pascal_string(column.length_size))
        elif read is not None:
            values[name] = read(event, column)
        else:
            values[name] = event._RowsEvent__read_values_name(
                column, null_bitmap, at, False, cols_bitmap, column.unsigned, i)
        at += 1
    return values
