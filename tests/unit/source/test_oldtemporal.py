"""DATETIME, TIME and TIMESTAMP columns in their old formats (source.oldtemporal), on a recording.

binlogs/oldtemporal.binlog was recorded on MariaDB 10.11 (binlogs/oldtemporal.sql): app.old was
made while mysql56_temporal_format was OFF, so its table map has types 12, 11 and 7 and no
metadata for them; the fractional digits are its definition's, which ``DEFINITION`` answers as
information_schema does. (Against the real servers, every value compared with SELECT, in the
binlog and a snapshot: tests/e2e/test_types.py.)
"""
import datetime

import pytest
from pymysqlreplication.constants import FIELD_TYPE as T
from pymysqlreplication.row_event import TableMapEvent, WriteRowsEvent

from streamer.errors import UnsupportedEvent
from streamer.position import Position
from streamer.source import definitions, oldtemporal, patches, rowcount
from tests.unit.engine_parts import ReplayedBinlog

patches.apply()

FILE = "mysql-bin.000002"
DIGITS = {"d0": 0, "d3": 3, "d6": 6, "t0": 0, "t2": 2, "t6": 6, "s0": 0, "s1": 1, "s6": 6}


class _Cursor:
    """information_schema of app.old, as MariaDB answers it."""

    rows = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, sql, args=None):
        kinds = {"d": "datetime", "t": "time", "s": "timestamp"}
        self.rows = [("BASE TABLE",)] if "information_schema.TABLES" in sql else \
            [("id", "int", "", None), ("tail", "varchar", "", None)] + \
            [(name, kinds[name[0]], "", digits) for name, digits in DIGITS.items()]

    def fetchone(self):
        return self.rows[0]

    def fetchall(self):
        return self.rows


class _Conn:
    def cursor(self):
        return _Cursor()


class _Gone(_Cursor):
    """information_schema once app.old was dropped (``left``: or once all columns but those were
    dropped from it)."""

    left = None

    def execute(self, sql, args=None):
        if self.left is None:
            self.rows = [None] if "information_schema.TABLES" in sql else []
            return
        super().execute(sql, args)
        if "information_schema.TABLES" not in sql:
            self.rows = [r for r in self.rows if r[0] not in DIGITS or r[0] in self.left]


def _gone(left=None):
    class Conn(_Conn):
        def cursor(self):
            found = _Gone()
            found.left = left
            return found
    return Conn

    def close(self):
        pass


@pytest.fixture(autouse=True)
def unmeasured():
    """No definitions, unless a test gives them (an engine test before may have left its own)."""
    previous = oldtemporal._DEFINITIONS[0]
    oldtemporal.configure(None)
    yield
    oldtemporal.configure(previous)


@pytest.fixture
def measured():
    """The streamer's definitions of the recording's tables, as a stream has them."""
    found = definitions.Definitions(_Conn, mariadb=lambda conn: True)
    oldtemporal.configure(found.of)
    return found


def _events(kind, table="old"):
    return [e for e in ReplayedBinlog("oldtemporal.binlog", Position(FILE, 4))
            if isinstance(e, kind) and e.table == table]


def test_the_library_alone_reads_them_wrong():
    # A DATETIME(6) read as the old 8-byte integer: a year past 9999 (fails before: every run
    # met it at such a table's first row, published or not).
    first = _events(WriteRowsEvent)[0]
    with pytest.raises(ValueError, match="year"):
        first.rows


def test_each_old_temporal_column_gets_its_definitions_fractional_digits(measured):
    maps = _events(TableMapEvent)
    cols = maps[0].columns
    assert [c.type for c in cols] == [T.LONG] + [T.DATETIME] * 3 + [T.TIME] * 3 + \
        [T.TIMESTAMP] * 3 + [T.VARCHAR]
    assert {c.name: c.fsp for c in cols if c.type in oldtemporal.OLD} == DIGITS
    assert len(maps) == 3 and all(m.columns[3].fsp == 6 for m in maps)
    assert "column d6 keeps an old temporal format, with 6 fractional digits" in \
        definitions.describe(measured.cache[("app", "old")])


def test_rows_of_a_table_with_them_are_counted_by_their_sizes(measured):
    counted = [rowcount.count(e) for e in ReplayedBinlog("oldtemporal.binlog", Position(FILE, 4))
               if e.__class__.__name__.endswith("RowsEvent") and e.table == "old"]
    assert counted == [3, 2, 1]  # the inserts, the update of two rows, the delete


def _dt(text):  # a DATETIME as decoded: the wall clock
    whole, _, fraction = text.partition(".")
    return datetime.datetime.strptime(whole, "%Y-%m-%d %H:%M:%S").replace(
        microsecond=int(fraction.ljust(6, "0")))


def _ts(text):  # a TIMESTAMP as decoded: the UTC instant
    return _dt(text).replace(tzinfo=datetime.timezone.utc)


def _micros(text):
    sign = -1 if text.startswith("-") else 1
    h, m, s = text.lstrip("-").split(":")
    return sign * round((int(h) * 3600 + int(m) * 60 + float(s)) * 1000000)


def _time(text):  # a TIME as decoded
    return datetime.timedelta(microseconds=_micros(text))


def test_a_published_table_with_them_streams_their_values(make, measured):
    streamer, publisher = make(sections={"tables": {"include": ["app.*"]}})
    streamer.definitions = measured
    reader = ReplayedBinlog("oldtemporal.binlog", Position(FILE, 4),
                            on_end=streamer.request_stop)
    with reader:
        streamer.stream(publisher, reader, Position(FILE, 4))
    decoder = publisher.decoder()
    out = [decoder.decode(v) for t, _, v in publisher.messages()
           if v is not None and t.endswith(".old")]
    assert [m["op"] for m in out] == ["c", "c", "c", "u", "u", "d"]
    one, two, three = (m["after"] for m in out[:3])
    assert one == {"id": 1, "d0": _dt("2024-06-30 23:59:59"),
                   "d3": _dt("1999-01-02 03:04:05.678"),
                   "d6": _dt("2024-06-30 23:59:59.123456"), "t0": _time("-838:59:59"),
                   "t2": _time("12:34:56.78"), "t6": _time("-01:02:03.000001"),
                   "s0": _ts("1970-01-01 00:00:01"), "s1": _ts("2001-09-09 01:46:40.1"),
                   "s6": _ts("2038-01-19 03:14:07.999999"), "tail": "one"}
    assert two == {"id": 2, "d0": _dt("1000-01-01 00:00:00"),
                   "d3": _dt("9999-12-31 23:59:59.999"),
                   "d6": _dt("9999-12-31 23:59:59.999999"), "t0": _time("838:59:59"),
                   "t2": _time("-00:00:00.01"), "t6": _time("838:59:59"), "s0": None,
                   "s1": None, "s6": None, "tail": "two"}
    assert three["d0"] is None  # the zero DATETIME, as a DATETIME2's
    assert (three["d6"], three["t6"], three["s1"], three["s6"]) == (
        _dt("2020-02-29 00:00:00.000001"), _time("-838:59:59"),
        _ts("2020-02-29 12:00:00.5"), _ts("1970-01-01 00:00:01.000001"))
    update = out[3]
    assert update["before"] == one and update["after"] == dict(
        one, t0=_time("-00:00:01"), d3=_dt("2000-01-01 00:00:00.001"))
    assert out[5]["before"] == three
    plain = [decoder.decode(v) for t, _, v in publisher.messages()
             if v is not None and t.endswith(".plain")]
    assert [m["after"]["s"] for m in plain] == ["p1", "p2"]
    assert dict(measured.cache[("app", "old")].fractions) == DIGITS  # read for them, once


def test_without_fractional_digits_the_old_layouts_are_read_as_the_server_stores_them():
    # TIME: a 3-byte little-endian signed ±hhmmss; DATETIME: an 8-byte YYYYMMDDhhmmss.
    assert oldtemporal.time_micros((-8385959).to_bytes(3, "little", signed=True), 0) == \
        _micros("-838:59:59")
    assert oldtemporal.datetime_parts((20240630235959).to_bytes(8, "little"), 0) == \
        (2024, 6, 30, 23, 59, 59, 0)
    assert oldtemporal.timestamp_micros((1).to_bytes(4, "little"), 0) == 1000000
    assert [oldtemporal.size(T.DATETIME, n) for n in range(7)] == [8, 6, 6, 7, 7, 7, 8]
    assert [oldtemporal.size(T.TIME, n) for n in range(7)] == [3, 4, 4, 5, 5, 5, 6]
    assert [oldtemporal.size(T.TIMESTAMP, n) for n in range(7)] == [4, 5, 5, 6, 6, 7, 7]


@pytest.fixture
def dropped():
    """The definitions of a server the table is gone from (a stream far behind its DROP)."""
    found = definitions.Definitions(_gone(), mariadb=lambda conn: True)
    oldtemporal.configure(found.of)
    return found


def _rows_events():
    return [e for e in ReplayedBinlog("oldtemporal.binlog", Position(FILE, 4))
            if e.__class__.__name__.endswith("RowsEvent") and e.table == "old"]


def test_rows_whose_digits_the_server_no_longer_has_are_counted_by_the_sizes_that_fit():
    # d6 and t6 were dropped from the table since: their values' sizes are a few, and the count
    # most choices of them walk to each event's end with is the true one (a NULL's size makes
    # no difference): a stream catching up over the table counts its rows (for the resume
    # inside a transaction), the same in every run, and stops at none of them.
    found = definitions.Definitions(_gone(left=("d0", "d3", "t0", "t2", "s0", "s1", "s6")),
                                    mariadb=lambda conn: True)
    oldtemporal.configure(found.of)
    maps = _events(TableMapEvent)
    assert {c.name: c.fsp for c in maps[0].columns if c.type in oldtemporal.OLD} == dict(
        DIGITS, d6=definitions.UNKNOWN_DIGITS, t6=definitions.UNKNOWN_DIGITS)
    assert [rowcount.rows_in(e) for e in _rows_events()] == [3, 2, 1]
    assert "column t6 keeps an old temporal format, and the table's definition no longer has " \
           "it" in definitions.describe(found.cache[("app", "old")])


def test_rows_too_many_of_whose_digits_are_unknown_stop_naming_them_and_the_way_out(dropped):
    events = _rows_events()
    assert all(c.fsp == definitions.UNKNOWN_DIGITS for c in events[0].columns
               if c.type in oldtemporal.OLD)
    assert rowcount.count(events[0]) is None  # 3 × 4 × ... choices: more than it walks
    with pytest.raises(UnsupportedEvent, match=r"its rows can't be counted, as the fractional "
                                               r"digits of its old temporal columns \(d0, d3"):
        rowcount.rows_in(events[0])


def test_a_dropped_tables_rows_published_stop_naming_the_column_and_the_way_out(make, dropped):
    streamer, publisher = make(sections={"tables": {"include": ["app.old"]}})
    streamer.definitions = dropped
    reader = ReplayedBinlog("oldtemporal.binlog", Position(FILE, 4),
                            on_end=streamer.request_stop)
    with reader, pytest.raises(UnsupportedEvent, match="column 'd0' keeps an old temporal "
                                                       "format .* Create the table again"):
        streamer.stream(publisher, reader, Position(FILE, 4))
    assert not [v for t, _, v in publisher.messages() if t.endswith(".old")]
