"""The planned row reader gives what python-mysql-replication gives, value for value."""
import datetime
import decimal
import random
import struct
from types import SimpleNamespace

import pytest

from pymysqlreplication.constants import BINLOG, FIELD_TYPE, NONE_SOURCE
from pymysqlreplication.row_event import RowsEvent, WriteRowsEvent

from streamer.schema import columns
from streamer.source import patches, rowplan
from tests.unit.source.test_mysql_decimal import mysql_pack

# As the streamer does before reading: the rows below go through the installed fixes.
patches.apply()
read_column_data = RowsEvent._read_column_data
get_none_sources = RowsEvent._get_none_sources


class Packet:
    """The few reads of the library's binlog packet that row decoding uses, over fixed bytes."""

    log_pos, event_size = 1100, 100  # where the event is, for the messages that name it

    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def read(self, n):
        n = int(n)
        out = self.data[self.at:self.at + n]
        self.at += n
        return out

    def advance(self, n):
        self.at += int(n)

    def read_int64(self):
        return struct.unpack("<q", self.read(8))[0]

    def read_uint8(self):
        return self.read(1)[0]

    def read_uint24(self):
        return int.from_bytes(self.read(3), "little")

    def read_uint_by_size(self, size):
        return int.from_bytes(self.read(size), "little")

    def read_length_coded_pascal_string(self, size):
        return self.read(self.read_uint_by_size(size))

    def read_int_be_by_size(self, size):
        return int.from_bytes(self.read(size), "big", signed=size != 5)


def col(name, ftype, **attrs):
    base = dict(name=name, type=ftype, unsigned=False, max_length=0, length_size=0, fsp=0,
                precision=0, decimals=0, character_set_name="utf8mb4")
    base.update(attrs)
    return SimpleNamespace(**base)


COLUMNS = [
    col("id", FIELD_TYPE.LONG), col("u", FIELD_TYPE.LONG, unsigned=True),
    col("big", FIELD_TYPE.LONGLONG), col("tiny", FIELD_TYPE.TINY),
    col("name", FIELD_TYPE.VARCHAR, max_length=200), col("note", FIELD_TYPE.VARCHAR, max_length=200),
    col("body", FIELD_TYPE.BLOB, length_size=2),
    col("amount", FIELD_TYPE.NEWDECIMAL, precision=12, decimals=4),
    col("created", FIELD_TYPE.DATETIME2, fsp=6), col("zero", FIELD_TYPE.DATETIME2),
    col("odd", FIELD_TYPE.DATETIME2, fsp=3),
    col("y", FIELD_TYPE.YEAR), col("d", FIELD_TYPE.DOUBLE),
    col("ts3", FIELD_TYPE.TIMESTAMP2, fsp=3), col("ts0", FIELD_TYPE.TIMESTAMP2),
    col("ts5", FIELD_TYPE.TIMESTAMP2, fsp=5), col("day", FIELD_TYPE.DATE),
    col("zday", FIELD_TYPE.DATE), col("t6", FIELD_TYPE.TIME2, fsp=6),
    col("e", FIELD_TYPE.ENUM, size=1, enum_values=["", "a", "b", "c"]),
]


def datetime2(year, month, day, hour, minute, second):
    packed = 1 << 39 | (year * 13 + month) << 22 | day << 17 | hour << 12 | minute << 6 | second
    return packed.to_bytes(5, "big")


def row_bytes() -> bytes:
    text = "héllo".encode()
    body = ("x" * 300).encode()
    return b"".join([
        bytes([0b00100000, 0, 0]),  # null bitmap: 'note' (the 6th column) is NULL
        (-5).to_bytes(4, "little", signed=True), (4000000000).to_bytes(4, "little"),
        (-(2 ** 63)).to_bytes(8, "little", signed=True), (-128).to_bytes(1, "little", signed=True),
        bytes([len(text)]) + text,
        len(body).to_bytes(2, "little") + body,
        mysql_pack("-1234.5678", 12, 4),
        datetime2(2026, 11, 21, 12, 34, 56) + (123456).to_bytes(3, "big"),
        datetime2(0, 0, 0, 0, 0, 0),
        datetime2(1999, 1, 2, 3, 4, 5) + (1230).to_bytes(2, "big"),
        bytes([126]), struct.pack("<d", 2.5),
        (1700000000).to_bytes(4, "big") + (1230).to_bytes(2, "big"),
        (2147483647).to_bytes(4, "big"),
        (0).to_bytes(4, "big") + (123450).to_bytes(3, "big"),
        (2024 << 9 | 2 << 5 | 29).to_bytes(3, "little"),
        (0).to_bytes(3, "little"),
        (0x800000000000 - ((1 << 12 | 2 << 6 | 3) << 24 | 4)).to_bytes(6, "big"),
        bytes([3]),
    ])


def event(data: bytes, plan):
    ev = WriteRowsEvent.__new__(WriteRowsEvent)
    table = SimpleNamespace(columns=COLUMNS, streamer=rowplan.TableState(None, plan, False))
    ev.__dict__.update({"table_map": {7: table}, "table_id": 7, "packet": Packet(data),
                        "schema": "app", "table": "t",
                        "columns": COLUMNS, "event_type": BINLOG.WRITE_ROWS_EVENT_V2,
                        "_RowsEvent__none_sources": {}, "_ignore_decode_errors": False})
    return ev


TEMPORAL = {FIELD_TYPE.DATETIME2: columns.datetime_to_micros,
            FIELD_TYPE.TIMESTAMP2: columns.datetime_to_micros,
            FIELD_TYPE.DATE: columns.date_to_days, FIELD_TYPE.TIME2: columns.timedelta_to_micros}


def micros(value: datetime.datetime) -> int:
    return (value - datetime.datetime(1970, 1, 1)) // datetime.timedelta(microseconds=1)


def avro_values(library_row):
    """The library's row with temporal values as the converters make them: the planned reader
    reads those types straight into these numbers."""
    out = dict(library_row)
    for c in COLUMNS:
        if c.type in TEMPORAL and out[c.name] is not None:
            out[c.name] = TEMPORAL[c.type](out[c.name])
    return out


def test_planned_reads_equal_the_librarys_and_consume_the_same_bytes():
    data = row_bytes()
    present = bytes([0xFF, 0xFF, 0x0F])
    planned = event(data, rowplan.plan_for(COLUMNS))
    library = event(data, None)
    got = read_column_data(planned, present)
    want = avro_values(read_column_data(library, present))
    assert got == want
    assert planned.packet.at == library.packet.at == len(data)
    assert planned._RowsEvent__none_sources == library._RowsEvent__none_sources == {
        "note": "null", "zero": "out of datetime2 range", "zday": "out of date range"}
    assert got["id"] == -5 and got["u"] == 4000000000 and got["big"] == -(2 ** 63)
    assert got["tiny"] == -128 and got["name"] == "héllo" and got["body"] == "x" * 300
    assert got["amount"] == decimal.Decimal("-1234.5678")
    assert got["created"] == micros(datetime.datetime(2026, 11, 21, 12, 34, 56, 123456))
    assert got["odd"] == micros(datetime.datetime(1999, 1, 2, 3, 4, 5, 123000))
    assert got["y"] == 2026 and got["d"] == 2.5
    assert got["ts3"] == 1700000000123000  # 2023-11-14 22:13:20.123 UTC
    assert got["ts0"] == 2147483647000000 and got["ts5"] == 123450
    assert got["day"] == 19782 and got["zday"] is None  # 2024-02-29
    assert got["t6"] == -3723000004  # -01:02:03.000004
    assert got["e"] == "c"


def test_values_no_message_publishes_are_stepped_over_and_the_rest_read_alike():
    # Excluded columns, or masked with null (schema.versions): a string's, a blob's or a JSON's
    # bytes are not decoded; a fixed-size value is read as before, at no saving.
    data = row_bytes()
    present = bytes([0xFF, 0xFF, 0x0F])
    plan = rowplan.plan_for(COLUMNS, frozenset(["name", "note", "body", "amount", "nowhere"]))
    readers = dict(plan)
    assert readers["name"] in rowplan.SKIPPERS and readers["body"] in rowplan.SKIPPERS
    assert readers["amount"] is not None and readers["amount"] not in rowplan.SKIPPERS
    skipping = event(data, plan)
    got = read_column_data(skipping, present)
    want = read_column_data(event(data, rowplan.plan_for(COLUMNS)), present)
    assert skipping.packet.at == len(data)
    assert got["name"] is None and got["body"] is None and got["note"] is None
    assert want["name"] == "héllo" and want["body"] == "x" * 300
    assert {k: v for k, v in got.items() if k not in ("name", "body")} == \
        {k: v for k, v in want.items() if k not in ("name", "body")}


def test_every_type_gets_a_reader_or_the_librarys_and_a_nameless_table_gets_no_plan():
    plan = rowplan.plan_for(COLUMNS)
    readers = dict(plan)
    assert readers["y"] is None  # YEAR: the library's reader
    assert all(readers[n] is not None for n in ("id", "name", "body", "amount", "created", "d",
                                                "ts3", "day", "t6", "e"))
    assert rowplan.plan_for([col("", FIELD_TYPE.LONG)]) is None


def test_none_sources_are_listed_only_for_tables_that_need_them():
    ev = event(row_bytes(), rowplan.plan_for(COLUMNS))
    values = read_column_data(ev, bytes([0xFF, 0xFF, 0x0F]))
    ev.table_map[7].streamer.skip_none_sources = False
    assert get_none_sources(ev, values) == {"note": "null", "zero": "out of datetime2 range",
                                                     "zday": "out of date range"}
    ev.table_map[7].streamer.skip_none_sources = True
    assert get_none_sources(ev, values) == {}


def _one_column(column, data, plan):
    ev = event(data, plan)
    ev.columns = ev.table_map[7].columns = [column]
    return ev


def _read_both(column, data):
    """(planned, library converted) values of a one-column row, or the exception each raised."""
    out = []
    for plan in (rowplan.plan_for([column]), None):
        ev = _one_column(column, bytes([0]) + data, plan)
        try:
            value = read_column_data(ev, bytes([1]))[column.name]
            if plan is None and value is not None:
                value = TEMPORAL[column.type](value)
            out.append((value, ev._RowsEvent__none_sources, ev.packet.at))
        except ValueError:  # the same refusal; its wording differs between interpreters
            out.append("ValueError")
    return out


def test_temporal_values_read_straight_to_numbers_match_the_library_on_odd_and_invalid_input():
    rng = random.Random(7)
    fields = [(rng.choice([0, 1, 2, 9999, rng.randint(1, 9999)]), rng.randint(0, 15),
               rng.choice([0, 1, 28, 29, 30, 31, rng.randint(0, 31)]), rng.randint(0, 31),
               rng.randint(0, 63), rng.randint(0, 63)) for _ in range(3000)]
    fields += [(2024, 2, 29, 23, 59, 59), (2023, 2, 29, 0, 0, 0), (1, 1, 1, 0, 0, 0),
               (9999, 12, 31, 23, 59, 59), (1970, 1, 1, 0, 0, 0), (2000, 13, 1, 0, 0, 0)]
    for fsp in (0, 1, 3, 5, 6):
        dt = col("v", FIELD_TYPE.DATETIME2, fsp=fsp)
        ts = col("v", FIELD_TYPE.TIMESTAMP2, fsp=fsp)
        tm = col("v", FIELD_TYPE.TIME2, fsp=fsp)
        frac = (fsp + 1) // 2
        for n, (year, month, day, hour, minute, second) in enumerate(fields):
            fraction = rng.randint(0, 10 ** fsp - 1) * (10 if fsp % 2 else 1)
            tail = fraction.to_bytes(frac, "big")
            planned, library = _read_both(dt, datetime2(year, month, day, hour, minute, second) + tail)
            assert planned == library, (fsp, year, month, day, hour, minute, second)
            if n % 10 == 0:
                secs = rng.choice([0, 1, 2 ** 31 - 1, rng.randint(0, 2 ** 31 - 1)])
                planned, library = _read_both(ts, secs.to_bytes(4, "big") + tail)
                assert planned == library, (fsp, secs)
                # TIME: any bytes at all, negative values and stray fractions included.
                raw = rng.getrandbits(8 * (3 + frac)).to_bytes(3 + frac, "big")
                planned, library = _read_both(tm, raw)
                assert planned == library, (fsp, raw)
            if n % 50 == 0:  # a fraction out of range: a negative one, or one above 999999
                wild = rng.getrandbits(8 * frac).to_bytes(frac, "big")
                head = datetime2(year, month, day, hour, minute, second)
                assert _read_both(dt, head + wild)[0] == _read_both(dt, head + wild)[1]
                assert _read_both(ts, head[:4] + wild)[0] == _read_both(ts, head[:4] + wild)[1]
    day_col = col("v", FIELD_TYPE.DATE)
    invalid = 0
    for year, month, day, *_ in fields:
        before = rowplan.INVALID.total
        planned, library = _read_both(day_col, (year << 9 | month << 5 | day).to_bytes(3, "little"))
        if library == "ValueError":
            # A date the library refuses (2023-02-30, which ALLOW_INVALID_DATES lets the server
            # store): null and counted, where the library stopped the streamer for good.
            assert planned == (None, {"v": NONE_SOURCE.OUT_OF_DATE_RANGE}, 4), (year, month, day)
            assert rowplan.INVALID.total == before + 1
            invalid += 1
        else:
            assert planned == library, (year, month, day)
            # Partly-zero dates are nulls the library gives too, but counted as invalid.
            assert rowplan.INVALID.total == before + bool(planned[0] is None and
                                                          (year or month or day))
    assert invalid > 10


def test_a_mysql_json_column_is_read_as_the_text_a_client_shows():
    # The library reads it as {b"a": 1, b"b": b"x"}, which json.dumps refuses (bytes keys).
    from tests.unit.source.test_mysqljson import SMALL_OBJECT
    js = col("js", FIELD_TYPE.JSON, length_size=4)
    data = bytes([0]) + len(SMALL_OBJECT).to_bytes(4, "little") + SMALL_OBJECT
    ev = _one_column(js, data, rowplan.plan_for([js]))
    assert read_column_data(ev, bytes([1])) == {"js": '{"a": 1, "b": "x"}'}
    from pymysqlreplication.packet import parse_json
    assert parse_json(SMALL_OBJECT[0], SMALL_OBJECT[1:]) == {b"a": 1, b"b": b"x"}  # the library


def test_an_unread_mysql_json_column_is_stepped_over_undecoded():
    from tests.unit.source.test_mysqljson import SMALL_OBJECT
    js = col("js", FIELD_TYPE.JSON, length_size=4)
    data = bytes([0]) + len(SMALL_OBJECT).to_bytes(4, "little") + SMALL_OBJECT[:1] + b"\xff" * (
        len(SMALL_OBJECT) - 1)  # not JSON at all: decoding it would fail
    ev = _one_column(js, data, rowplan.plan_for([js], frozenset(["js"])))
    assert read_column_data(ev, bytes([1])) == {"js": None} and ev.packet.at == len(data)


def test_a_hidden_column_missing_from_a_row_is_passed_over_any_other_stops_the_stream():
    # MySQL's functional index column (source.definitions) is in the table map, in no rows
    # event; a missing column that isn't hidden is a partial row image.
    from streamer.errors import UnsupportedEvent

    hidden = "f92a934bb8b32234cc185c85b5f3631f"
    cols = [col("id", FIELD_TYPE.LONG), col(hidden, FIELD_TYPE.VARCHAR, max_length=80),
            col("a", FIELD_TYPE.VARCHAR, max_length=80)]
    data = bytes([0]) + (7).to_bytes(4, "little", signed=True) + bytes([1]) + b"y"
    ev = event(data, rowplan.plan_for(cols))
    ev.columns = ev.table_map[7].columns = cols
    ev.table_map[7].streamer.hidden = frozenset([hidden])
    assert read_column_data(ev, bytes([0b101])) == {"id": 7, "a": "y"}
    assert ev.packet.at == len(data)
    ev = event(data, rowplan.plan_for(cols))
    ev.columns = ev.table_map[7].columns = cols
    with pytest.raises(UnsupportedEvent, match=f"has no value for column '{hidden}': its row "
                                               f"image is not FULL"):
        read_column_data(ev, bytes([0b101]))


def test_a_row_image_may_leave_out_an_unpublished_column_read_as_none():
    # binlog_row_image NOBLOB leaves out a BLOB when it can; excluded or masked with null, its
    # value is not needed. A published column left out still stops the stream.
    from streamer.errors import UnsupportedEvent

    cols = [col("id", FIELD_TYPE.LONG), col("b", FIELD_TYPE.BLOB, length_size=2),
            col("a", FIELD_TYPE.VARCHAR, max_length=80)]
    data = bytes([0]) + (7).to_bytes(4, "little", signed=True) + bytes([1]) + b"y"
    for unread, want in ((frozenset(["b"]), {"id": 7, "b": None, "a": "y"}), (frozenset(), None)):
        ev = event(data, rowplan.plan_for(cols, unread))
        ev.columns = ev.table_map[7].columns = cols
        ev.table_map[7].streamer.unread = unread
        if want is None:
            with pytest.raises(UnsupportedEvent, match="has no value for column 'b'.*"
                                                       "tables.columns.exclude"):
                read_column_data(ev, bytes([0b101]))
        else:
            assert read_column_data(ev, bytes([0b101])) == want and ev.packet.at == len(data)


def test_an_update_whose_after_image_leaves_out_unchanged_columns_is_made_whole():
    # MariaDB 11.4's binlog_row_image FULL_NODUP: the before image whole, the after image with
    # the changed columns only. A before image without a column still stops the stream.
    from pymysqlreplication.row_event import UpdateRowsEvent

    from streamer.errors import UnsupportedEvent

    cols = [col("id", FIELD_TYPE.LONG), col("a", FIELD_TYPE.VARCHAR, max_length=80),
            col("b", FIELD_TYPE.VARCHAR, max_length=80)]

    def update(data, before_bits, after_bits):
        ev = UpdateRowsEvent.__new__(UpdateRowsEvent)
        ev.__dict__.update(event(data, rowplan.plan_for(cols)).__dict__)
        ev.columns = ev.table_map[7].columns = cols
        ev.event_type = BINLOG.UPDATE_ROWS_EVENT_V2
        ev.columns_present_bitmap, ev.columns_present_bitmap2 = bytes([before_bits]), \
            bytes([after_bits])
        return ev

    def image(nulls, *values):
        return bytes([nulls]) + b"".join(
            v.to_bytes(4, "little") if isinstance(v, int) else bytes([len(v)]) + v for v in values)

    # Row 1: a changed, b (NULL) left out; row 2: every column in both images.
    data = image(0b100, 1, b"x") + image(0, b"y") + image(0, 2, b"p", b"q") + \
        image(0, 2, b"p", b"r")
    ev = update(data, 0b111, 0b010)
    first = ev._fetch_one_row()
    assert first["before_values"] == {"id": 1, "a": "x", "b": None}
    assert first["after_values"] == {"id": 1, "a": "y", "b": None}
    assert list(first["after_values"]) == ["id", "a", "b"]  # in the table's order
    ev.columns_present_bitmap2 = bytes([0b111])
    assert ev._fetch_one_row()["after_values"] == {"id": 2, "a": "p", "b": "r"}
    assert ev.packet.at == len(data)
    with pytest.raises(UnsupportedEvent, match="has no value for column 'a'"):
        update(image(0, 1) + image(0, b"y"), 0b001, 0b010)._fetch_one_row()
