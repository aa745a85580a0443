"""The planned row reader gives what python-mysql-replication gives, value for value."""
import datetime
import decimal
import struct
from types import SimpleNamespace

from pymysqlreplication.constants import BINLOG, FIELD_TYPE
from pymysqlreplication.row_event import WriteRowsEvent

from streamer import reader  # noqa: F401  (applies the library fixes, as the streamer does)
from streamer import rowplan
from tests.unit.test_mysql_decimal import mysql_pack


class Packet:
    """The few reads of the library's binlog packet that row decoding uses, over fixed bytes."""

    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def read(self, n):
        n = int(n)
        out = self.data[self.at:self.at + n]
        self.at += n
        return out

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
    table = SimpleNamespace(columns=COLUMNS, streamer_plan=plan)
    ev.__dict__.update({"table_map": {7: table}, "table_id": 7, "packet": Packet(data),
                        "columns": COLUMNS, "event_type": BINLOG.WRITE_ROWS_EVENT_V2,
                        "_RowsEvent__none_sources": {}, "_ignore_decode_errors": False})
    return ev


def test_planned_reads_equal_the_librarys_and_consume_the_same_bytes():
    data = row_bytes()
    present = bytes([0xFF, 0xFF, 0x0F])
    planned = event(data, rowplan.plan_for(COLUMNS))
    library = event(data, None)
    got = rowplan._read_column_data(planned, present)
    want = rowplan._read_column_data(library, present)
    assert got == want
    assert planned.packet.at == library.packet.at == len(data)
    assert planned._RowsEvent__none_sources == library._RowsEvent__none_sources == {
        "note": "null", "zero": "out of datetime2 range", "zday": "out of date range"}
    assert got["id"] == -5 and got["u"] == 4000000000 and got["big"] == -(2 ** 63)
    assert got["tiny"] == -128 and got["name"] == "héllo" and got["body"] == "x" * 300
    assert got["amount"] == decimal.Decimal("-1234.5678")
    assert got["created"] == datetime.datetime(2026, 11, 21, 12, 34, 56, 123456)
    assert got["odd"] == datetime.datetime(1999, 1, 2, 3, 4, 5, 123000)
    assert got["y"] == 2026 and got["d"] == 2.5
    assert got["ts3"] == datetime.datetime(2023, 11, 14, 22, 13, 20, 123000)
    assert got["ts0"] == datetime.datetime(2038, 1, 19, 3, 14, 7)
    assert got["ts5"] == datetime.datetime(1970, 1, 1, 0, 0, 0, 123450)
    assert got["day"] == datetime.date(2024, 2, 29) and got["zday"] is None
    assert got["t6"] == -datetime.timedelta(hours=1, minutes=2, seconds=3, microseconds=4)
    assert got["e"] == "c"


def test_every_type_gets_a_reader_or_the_librarys_and_a_nameless_table_gets_no_plan():
    plan = rowplan.plan_for(COLUMNS)
    readers = dict(plan)
    assert readers["y"] is None  # YEAR: the library's reader
    assert all(readers[n] is not None for n in ("id", "name", "body", "amount", "created", "d",
                                                "ts3", "day", "t6", "e"))
    assert rowplan.plan_for([col("", FIELD_TYPE.LONG)]) is None


def test_none_sources_are_listed_only_for_tables_that_need_them():
    ev = event(row_bytes(), rowplan.plan_for(COLUMNS))
    values = rowplan._read_column_data(ev, bytes([0xFF, 0xFF, 0x0F]))
    ev.table_map[7].streamer_skip_none_sources = False
    assert rowplan._get_none_sources(ev, values) == {"note": "null", "zero": "out of datetime2 range",
                                                     "zday": "out of date range"}
    ev.table_map[7].streamer_skip_none_sources = True
    assert rowplan._get_none_sources(ev, values) == {}
