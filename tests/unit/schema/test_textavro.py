"""Messages written from text-protocol row packets (schema.textavro) against the general way: the
packet read into PyMySQL's values, shaped, converted and encoded, on every kind it writes, on
the values its fast paths leave to the general way, and on the tables it leaves whole."""
import decimal

import pytest
from pymysql import converters
from pymysqlreplication.constants import FIELD_TYPE as T

from streamer import config
from streamer.schema import textavro
from streamer.codec.avro import SNAPSHOT_BYTES
from streamer.codec.debezium import AvroEvents
from streamer.codec.formats import make
from streamer.schema.masking import ColumnRules
from streamer.schema.versions import TableCatalog, TableFilter
from streamer.source import chunks
from streamer.source.textrows import row_reader
from streamer.source.vectors import VECTOR

ASCII_INT = ("ascii", int)
TEXT = ("utf8", None)
DECIMAL = ("ascii", decimal.Decimal)
DATETIME = ("ascii", converters.convert_datetime)


def _col(name, t, primary=False, nullable=True, **attrs):
    attrs.setdefault("unsigned", False)
    return chunks.Column(name, t, is_primary=primary, nullable=nullable, **attrs)


def _text(name, **kw):
    return _col(name, T.VARCHAR, character_set_name="utf8mb4", **kw)


def _table(cols, key, catalog=None):
    d = chunks.Described("shop", "t", cols, key, 1)
    catalog = catalog or TableCatalog("ns", TableFilter(["shop.*"], []))
    return d, catalog.snapshot_version(d)


def packet(*values):
    """A text-protocol row: each value length-encoded, None as NULL (0xFB)."""
    out = bytearray()
    for v in values:
        if v is None:
            out.append(251)
            continue
        b = v if isinstance(v, bytes) else str(v).encode("utf-8")
        n = len(b)
        if n < 251:
            out.append(n)
        elif n < 1 << 16:
            out += b"\xfc" + n.to_bytes(2, "little")
        elif n < 1 << 24:
            out += b"\xfd" + n.to_bytes(3, "little")
        else:
            out += b"\xfe" + n.to_bytes(8, "little")
        out += b
    return bytes(out)


MID, TXID = b"\x02\x04mid", b"\x04txid"


def _mid(envelope):
    """An event's parts as the envelope makes them: the streamer's ``mid`` as is, Debezium's
    from a high watermark's position."""
    if isinstance(envelope, AvroEvents):
        return envelope.event_parts(1700000000123, 9, "mysql-bin.000003", 1234, "0-9-5",
                                       "shop", "t", "f:1")[0]
    return MID


def general(tv, d, plan, data, row=7, flag="true"):
    """The message the general way: PyMySQL's values, shaped, converted, encoded."""
    fix = chunks.shapers(d.columns, d.schema, d.table)
    values = chunks._shaped_row(row_reader(plan)(data), [c.name for c in d.columns], fix)
    tv.convert(values)
    return (tv.envelope.encode_read(values, _mid(tv.envelope), row, TXID, SNAPSHOT_BYTES[flag]),
            tv.key(values))


def writer(tv, d, plan):
    return textavro.text_writer(tv, d, plan, chunks.shapers(d.columns, d.schema, d.table))


def direct(w, data, row=7, flag="true"):
    return w.encode(data, _mid(w.envelope), row, TXID, SNAPSHOT_BYTES[flag])


WIDE = [_col("id", T.LONGLONG, primary=True, nullable=False), _text("name", nullable=False),
        _text("email"), _col("created", T.DATETIME2, nullable=False, fsp=6),
        _col("amount", T.NEWDECIMAL, nullable=False, precision=12, decimals=4),
        _col("payload", T.BLOB, character_set_name="utf8mb4"),
        _col("n", T.TINY), _col("m", T.LONG, unsigned=True), _col("s", T.SHORT)]
WIDE_PLAN = [ASCII_INT, TEXT, TEXT, DATETIME, DECIMAL, TEXT, ASCII_INT, ASCII_INT, ASCII_INT]
WIDE_ROWS = [
    (1, "name-00000001", "user1@example.com", "2024-01-01 00:00:01.123456", "-1234567.8901",
     "ab" * 100, -128, 4294967295, -32768),
    (-9223372036854775808, "", None, "1970-01-01 00:00:00.000000", "0.0000", None, 0, 0, 0),
    (9223372036854775807, "é€😀", "ünï", "1969-12-31 23:59:59.999999", "-0.0000", "x" * 70000,
     None, None, None),
    (2, "n", "e", "2024-02-29 12:00:00.000001", "99999999.9999", "", 127, 1, 32767),
    (3, "n" * 300, "e", "0001-01-01 00:00:00.000000", "-99999999.9999", "ü" * 200, 1, 2, 3),
    (4, "n", "e", "9999-12-31 23:59:59.999999", "0.0001", "y", 1, 2, 3),
    (5, "n", "e", "2000-02-29 00:00:00.500000", "1.5000", "y", 1, 2, 3),
    # Dates the general way reads as None (and counts): left to it, value by value.
    (6, "n", "e", "2023-02-29 00:00:00.000000", "1.0000", "y", 1, 2, 3),
    (7, "n", "e", "0000-00-00 00:00:00.000000", "1.0000", "y", 1, 2, 3),
    (8, "n", "e", "2024-13-01 00:00:00.000000", "1.0000", "y", 1, 2, 3),
    (9, "n", "e", "1900-02-29 00:00:00.000000", "1.0000", "y", 1, 2, 3),
    (10, "n", "e", "2024-01-00 00:00:00.000000", "1.0000", "y", 1, 2, 3),
    # A decimal with other digits than its scale: left to the general way.
    (11, "n", "e", "2024-01-01 00:00:00.000000", "12.5", "y", 1, 2, 3),
    (12, "n", "e", "2024-01-01 00:00:00.000000", "0012.5000", "y", 1, 2, 3),
]


def test_every_kind_is_written_as_the_general_way_writes_it():
    d, tv = _table(WIDE, ["id"])
    w = writer(tv, d, WIDE_PLAN)
    assert w is not None
    for i, row in enumerate(WIDE_ROWS):
        data = packet(*row)
        assert direct(w, data, i) == general(tv, d, WIDE_PLAN, data, i), row


def test_datetimes_of_each_precision_and_decimals_of_each_scale():
    cols = [_col("id", T.LONG, primary=True, nullable=False)] + [
        _col(f"t{p}", T.DATETIME2, fsp=p) for p in range(7)] + [
        _col("d0", T.NEWDECIMAL, precision=20, decimals=0),
        _col("d30", T.NEWDECIMAL, precision=65, decimals=30),
        _col("d44", T.NEWDECIMAL, precision=4, decimals=4)]
    plan = [ASCII_INT] + [DATETIME] * 7 + [DECIMAL] * 3
    d, tv = _table(cols, ["id"])
    w = writer(tv, d, plan)
    times = ["2024-05-06 07:08:09"] + ["2024-05-06 07:08:09." + "123456"[:p] for p in range(1, 7)]
    # (DECIMAL(4,4)'s "0.1234" has more digits than its precision, counting the leading zero.)
    for dec in [("-12345678901234567890", "0." + "1" * 30, "0.1234"),
                ("0", "-" + "9" * 35 + "." + "9" * 30, "-0.9999"), (None, None, None),
                ("1", "-0." + "0" * 29 + "1", "0.0000"), ("-5", "1" * 35 + "." + "0" * 30, "-0.0001")]:
        data = packet(1, *times, *dec)
        assert direct(w, data) == general(tv, d, plan, data)


def test_invalid_dates_are_counted_as_the_general_way_counts_them():
    from streamer.source.rowplan import INVALID

    d, tv = _table(WIDE, ["id"])
    w = writer(tv, d, WIDE_PLAN)
    counted = ("shop", "t", "created")
    for when, more in [("2023-02-29 00:00:00.000000", 1), ("0000-00-00 00:00:00.000000", 0),
                       ("2023-02-28 00:00:00.000000", 0)]:
        data = packet(6, "n", "e", when, "1.0000", "y", 1, 2, 3)
        before = INVALID.by_column.get(counted, 0)
        value, _ = direct(w, data)
        assert INVALID.by_column.get(counted, 0) == before + more, when
        assert (value, _) == general(tv, d, WIDE_PLAN, data)


def test_what_the_general_way_refuses_the_writer_refuses_alike():
    d, tv = _table(WIDE, ["id"])
    w = writer(tv, d, WIDE_PLAN)
    bad_utf8 = packet(1, b"caf\xc3", "e", "2024-01-01 00:00:00.000000", "1.0000", "y", 1, 2, 3)
    too_long = packet(1, "n", "e", "2024-01-01 00:00:00.000000", "1234567890.0000", "y", 1, 2, 3)
    null_name = packet(1, None, "e", "2024-01-01 00:00:00.000000", "1.0000", "y", 1, 2, 3)
    for data, error in [(bad_utf8, UnicodeDecodeError), (too_long, ValueError)]:
        with pytest.raises(error):
            general(tv, d, WIDE_PLAN, data)
        with pytest.raises(error):
            direct(w, data)
    with pytest.raises(textavro.NullInNotNull, match="column name is NULL"):
        direct(w, null_name)


def test_a_composite_key_in_the_columns_order_is_written_with_the_row():
    cols = [_col("at", T.DATETIME2, primary=True, nullable=False, fsp=3), _text("v"),
            _col("id", T.LONG, primary=True, nullable=False)]
    plan = [DATETIME, TEXT, ASCII_INT]
    d, tv = _table(cols, ["at", "id"])
    w = writer(tv, d, plan)
    assert w is not None and tv.pk_names == ["at", "id"]
    for row in [("2024-01-01 00:00:00.123", "v", 5), ("0000-00-00 00:00:00.000", None, 6)]:
        data = packet(*row)
        value, key = direct(w, data)
        assert key is not None and (value, key) == general(tv, d, plan, data)


def test_columns_it_cant_write_from_their_text_go_the_general_way_column_by_column():
    # A column kind with no fast path (BIGINT UNSIGNED, a BIT, a DOUBLE), or read other than
    # as it writes it (another encoding, a converter): that column's value is made as the
    # general way makes it, the others' from their text.
    for col, conv, text in [(_col("x", T.BLOB), ("ascii", None), b"\x00\x7f"),
                            (_col("x", T.BIT, bits=12, bytes=2), (None, None), b"\x0f\xff"),
                            (_col("x", T.LONGLONG, unsigned=True), ASCII_INT,
                             "18446744073709551615"),
                            (_text("x"), ("latin1", None), "caf\xe9".encode("latin1")),
                            (_text("x"), ("utf8", str.upper), "abc"),
                            (_col("x", T.TIME2, fsp=6), ("latin1", converters.convert_timedelta),
                             "-838:59:59.000000"),
                            (_col("x", T.DATE), ("ascii", str), "2024-02-29"),
                            (_col("x", T.DOUBLE), ("ascii", float), "2.25"),
                            # MySQL 9's VECTOR (source.vectors): an array of its floats.
                            (_col("x", VECTOR, character_set_name="binary"), (None, None),
                             b"\x00\x00\x80\x3f\x00\x00\x00\xbf")]:
        d, tv = _table([_col("id", T.LONG, primary=True, nullable=False), col, _text("v")],
                       ["id"])
        plan = [ASCII_INT, conv, TEXT]
        w = writer(tv, d, plan)
        assert w is not None, col.name
        for data in (packet(5, text, "v"), packet(6, None, None)):
            assert direct(w, data) == general(tv, d, plan, data), (col.type, text)


def test_mariadbs_vector_goes_the_general_way_as_its_floats():
    # A VARBINARY(4n) its definition names VECTOR (source.definitions): not its bytes, its floats.
    from streamer.source.definitions import Definition

    cols = [_col("id", T.LONG, primary=True, nullable=False),
            _col("x", T.VARCHAR, character_set_name="binary", max_length=8)]
    d = chunks.Described("shop", "t", cols, ["id"], 1, Definition((("x", "vector"),), None))
    tv = TableCatalog("ns", TableFilter(["shop.*"], [])).snapshot_version(d)
    plan = [ASCII_INT, (None, None)]
    w = writer(tv, d, plan)
    for data in (packet(5, b"\x00\x00\x80\x3f\x00\x00\x00\xbf"), packet(6, None)):
        assert direct(w, data) == general(tv, d, plan, data)
    values = {"id": 5, "x": b"\x00\x00\x80\x3f\x00\x00\x00\xbf"}
    tv.convert(values)
    assert values["x"] == [1.0, -0.5]


DATES = ["2024-02-29", "1970-01-01", "1969-12-31", "0001-01-01", "9999-12-31", "2000-02-29",
         # read by the general way as None (all but the all-zero one counted)
         "0000-00-00", "2023-02-29", "1900-02-29", "2024-00-10", "2024-04-31", "2024-13-01", None]
COUNTED = DATES[7:12]
# A TIMESTAMP is read in UTC; its zero value is 1970-01-01's instant.
STAMPS = ["2024-05-06 07:08:09.654321", "1970-01-01 00:00:01", "2038-01-19 03:14:07.999999",
          "2000-02-29 23:59:59.000001", "0000-00-00 00:00:00.000000", None]


def _temporal_table(catalog=None):
    cols = [_col("day", T.DATE, primary=True, nullable=False),
            _col("id", T.LONG, primary=True, nullable=False), _col("d", T.DATE),
            _col("e", T.ENUM, enum_values=("red", "grün"), character_set_name="utf8mb4")] + [
        _col(f"ts{p}", T.TIMESTAMP2, fsp=p) for p in range(7)] + [
        _col("tn", T.TIMESTAMP2, nullable=False, fsp=3)]  # its field not a union
    plan = [("ascii", converters.convert_date), ASCII_INT, ("ascii", converters.convert_date),
            TEXT] + [DATETIME] * 8
    return _table(cols, ["day", "id"], catalog) + (plan,)


def _stamp(when, p):
    return None if when is None else when[:20 + p] if p else when[:19]


@pytest.mark.parametrize("fmt", ["streamer", "adaptive_time_microseconds", "connect"])
def test_dates_timestamps_and_enums_are_written_from_their_text(fmt, frozen, made):
    # DATE: days since 1970 (the streamer's date, Debezium's Date or Connect's Date); TIMESTAMP:
    # the streamer's UTC µs, Debezium's ZonedTimestamp (the text, ISO 8601 in UTC, with the
    # column's digits); ENUM: its text (Debezium's Enum). Their values are never made the
    # general way whole.
    from streamer.source.rowplan import INVALID

    d, tv, plan = _temporal_table(None if fmt == "streamer" else _debezium(time_precision_mode=fmt))
    w = writer(tv, d, plan)
    assert w is not None and made == []
    counted = ("shop", "t", "d")
    for day in DATES:
        for j, when in enumerate(STAMPS):
            data = packet(day or "2024-01-01", 5, day, ("red", "grün", "", None)[j % 4],
                          *[_stamp(when, p) for p in range(7)],
                          _stamp(when or "1999-01-01 00:00:00", 3))
            before = INVALID.by_column.get(counted, 0)
            value, key = direct(w, data)
            assert INVALID.by_column.get(counted, 0) == before + (day in COUNTED), day
            assert (value, key) == general(tv, d, plan, data), (day, when)


@pytest.mark.parametrize("fmt", ["streamer", "debezium"])
def test_columns_published_under_another_name_are_written_by_position(fmt, frozen):
    # "key-id" and "my-col" are published as key_id and my_col (mysql.column names them).
    cols = [_col("key-id", T.LONG, primary=True, nullable=False), _text("my-col"),
            _col("on day", T.DATE), _text("v")]
    plan = [ASCII_INT, TEXT, ("ascii", converters.convert_date), TEXT]
    d, tv = _table(cols, ["key-id"], _debezium() if fmt == "debezium" else None)
    assert tv.pk_names == ["key_id"]
    w = writer(tv, d, plan)
    assert w is not None
    for data in (packet(3, "x", "2024-02-29", "v"), packet(4, None, None, None)):
        value, key = direct(w, data)
        assert key is not None and (value, key) == general(tv, d, plan, data), data


@pytest.mark.parametrize("fmt", ["streamer", "debezium"])
def test_columns_masked_with_null_and_sets_are_written_as_the_general_way_writes_them(
        fmt, frozen):
    # In a snapshot's row, a column masked with null is None whatever its text, and a NOT NULL
    # SET's NULL becomes its empty value (masked, the mask's): each a function of its own text.
    cols = [_col("s", T.SET, primary=True, nullable=False, set_values=("a", "b")),
            _col("id", T.LONG, primary=True, nullable=False),
            _col("e", T.SET, nullable=False, set_values=("x", "y", "z")),
            _col("f", T.SET, set_values=("a", "b")), _text("secret", nullable=False),
            _col("m", T.SET, nullable=False, set_values=("a", "b")), _text("v")]
    plan = [TEXT, ASCII_INT, TEXT, TEXT, TEXT, TEXT, TEXT]
    rules = ColumnRules([], {"shop.t.secret": "null", "shop.t.m": "hash"}, b"salt")
    catalog = _debezium(rules=rules) if fmt == "debezium" else TableCatalog(
        "ns", TableFilter(["shop.*"], []), rules=rules)
    d, tv = _table(cols, ["s", "id"], catalog)
    assert tv.empty_set_columns and tv.nulled
    w = writer(tv, d, plan)
    assert w is not None
    for row in [("a,b", 1, "x,z", "b", "pii", "a", "v"), ("", 2, "", "", "", "", ""),
                (None, 3, None, None, None, None, None), ("b", 4, "z,y", None, "p", None, "v")]:
        data = packet(*row)
        value, key = direct(w, data)
        assert key is not None and (value, key) == general(tv, d, plan, data), row


@pytest.mark.parametrize("fmt", ["streamer", "debezium"])
def test_a_sets_bytes_are_kept_by_its_text_up_to_a_bound(fmt, frozen, monkeypatch):
    # A SET's value is a function of its text alone: made the general way once per text (a
    # text out of the set's order included), then written from what was kept; past the bound,
    # the general way every time.
    monkeypatch.setattr(textavro, "MEMO_TEXTS", 3)
    cols = [_col("id", T.LONG, primary=True, nullable=False),
            _col("s", T.SET, set_values=("a", "b", "c")),
            _col("k", T.SET, primary=True, nullable=False, set_values=("x", "y"))]
    plan = [ASCII_INT, TEXT, TEXT]
    made = []
    real = textavro._general_value

    def counted(where, *args):
        value = real(where, *args)
        if not where.endswith(" s"):  # the key's SET: not counted
            return value

        def made_here(text):
            made.append(text)
            return value(text)
        return made_here
    monkeypatch.setattr(textavro, "_general_value", counted)
    d, tv = _table(cols, ["id", "k"], _debezium() if fmt == "debezium" else None)
    w = writer(tv, d, plan)
    memo = w._write.__globals__["_memo1"]
    texts = ["a,b", "", "c,a", None, "a,b,c", "b", "a,b", "", "b"]
    for n, text in enumerate(texts * 2):
        data = packet(n, text, ("x", "x,y", None)[n % 3])
        assert direct(w, data) == general(tv, d, plan, data), text
    kept = [b"a,b", b"", b"c,a"]
    assert list(memo) == kept
    assert made == kept + [b"a,b,c", b"b", b"b"] + [b"a,b,c", b"b", b"b"]


@pytest.mark.parametrize("fmt", ["streamer", "debezium"])
def test_excluded_columns_are_passed_over(fmt, frozen):
    # tables.columns.exclude: the column is not published, and selected as NULL unless a keyless
    # table's chunks follow it (source.chunks); the writer steps over its value, whatever its
    # length (one byte of length, or 0xFC and two) or NULL.
    cols = [_col("id", T.LONG, primary=True, nullable=False), _text("ssn"),
            _col("note", T.BLOB, character_set_name="utf8mb4"), _text("v"), _text("last")]
    plan = [ASCII_INT, TEXT, TEXT, TEXT, TEXT]
    rules = ColumnRules(["*.*.ssn", "shop.t.last"], {})
    catalog = _debezium(rules=rules) if fmt == "debezium" else TableCatalog(
        "ns", TableFilter(["shop.*"], []), rules=rules)
    d, tv = _table(cols, ["id"], catalog)
    assert tv.row_schema["streamer.excluded"] == ["ssn", "last"]
    w = writer(tv, d, plan)
    assert w is not None
    for row in [(1, "123-45-6789", "n", "v", "x"), (2, "s" * 300, "n" * 70000, None, "y" * 251),
                (3, None, None, "v", None), (4, "", "", "", "")]:
        data = packet(*row)
        value, key = direct(w, data)
        assert key is not None and (value, key) == general(tv, d, plan, data), row[0]
        assert b"123-45" not in value


@pytest.mark.parametrize("fmt", ["streamer", "debezium"])
def test_binary_columns_are_written_from_their_bytes(fmt, frozen, made):
    # VARBINARY, a binary BLOB and a GEOMETRY are their bytes; a BINARY(n), which the binlog
    # gives without its trailing zero bytes, is padded to n as the general way pads it, also
    # as a key. None of them is made the general way.
    cols = [_col("uuid", T.STRING, primary=True, nullable=False, character_set_name="binary",
                 max_length=16),
            _col("vb", T.VARCHAR, character_set_name="binary", max_length=32),
            _col("b", T.BLOB, character_set_name="binary"),
            _col("bn", T.STRING, character_set_name="binary", max_length=4)]
    if fmt == "streamer":
        cols.append(_col("g", T.GEOMETRY))
    plan = [(None, None)] * len(cols)
    d, tv = _table(cols, ["uuid"], _debezium() if fmt == "debezium" else None)
    w = writer(tv, d, plan)
    assert w is not None and made == []
    point = bytes(4) + b"\x01\x01\x00\x00\x00" + bytes(range(16))
    for row in [(bytes(range(16)), b"\x00\xff", b"\xc3\x28" * 200, b"ab\x00\x00", point),
                (b"\xff" * 15 + b"\x00", b"", b"", b"\x00" * 4, point),
                (b"k\x00", None, b"x" * 70000, b"a", None)]:  # shorter than n: padded
        data = packet(*row[:len(cols)])
        value, key = direct(w, data)
        assert key is not None and (value, key) == general(tv, d, plan, data), row[0]


CLOCKS = ["00:00:00", "-838:59:59.000000", "838:59:59.999999", "12:34:56.5", "-00:00:00.000001",
         "100:00:00.123", "-12:00:00", "24:00:00.000000",
         # a text the server doesn't write, which PyMySQL reads: read the general way
         "1:2:3"]


@pytest.mark.parametrize("fmt", ["streamer", "adaptive_time_microseconds"])
def test_times_and_years_are_written_from_their_text(fmt, frozen, made):
    # TIME: µs, negative and past a day alike (the streamer's time-micros, Debezium's MicroTime);
    # YEAR: its number, '0000' as 0 (the streamer's int, Debezium's Year). Also as keys.
    cols = [_col("t", T.TIME2, primary=True, nullable=False, fsp=6),
            _col("y", T.YEAR, primary=True, nullable=False), _col("tn", T.TIME2, fsp=3),
            _col("yn", T.YEAR)]
    plan = [("ascii", converters.convert_timedelta), ("ascii", int)] * 2
    d, tv = _table(cols, ["t", "y"], None if fmt == "streamer" else _debezium(
        time_precision_mode=fmt))
    w = writer(tv, d, plan)
    assert w is not None and made == []
    for j, when in enumerate(CLOCKS):
        for year in ("2024", "0000", "1901", "2155"):
            data = packet(when, year, (when, None)[j % 2], (year, None)[j % 3 == 0])
            value, key = direct(w, data)
            assert key is not None and (value, key) == general(tv, d, plan, data), (when, year)
    # Texts the server doesn't write come out alike both ways: the same bytes, or the same
    # failure where the general way reads no time.
    def outcome(way):
        try:
            return way()
        except Exception as exc:  # noqa: BLE001 - compared, not swallowed
            return type(exc)

    outcomes = []
    for junk in ("12:34:56.5_0", " 1:00:00", "+1:00:00", "1:00:0x", "1:60:00", "1:00:00.1234567",
                 "1_0:00:00", "00:00:00.+5", "00:00:00.-5", "--1:00:00", "1:-1:00"):
        data = packet("00:00:01", "2024", junk, None)
        got, want = outcome(lambda: direct(w, data)), outcome(lambda: general(tv, d, plan, data))
        assert got == want, junk
        outcomes.append(isinstance(want, tuple))
    assert True in outcomes and False in outcomes  # both kinds of outcome were met


def test_tables_it_cant_write_go_the_general_way():
    cols = [_col("id", T.LONG, primary=True, nullable=False), _text("v")]
    d, tv = _table(cols, ["id"])
    assert writer(tv, d, [ASCII_INT, TEXT]) is not None
    # A masked column is converted by its mask, from its value alone: as the general way does.
    masked = TableCatalog("ns", TableFilter(["shop.*"], []),
                          rules=ColumnRules([], {"shop.t.v": "truncate:2"}))
    d, tv = _table(cols, ["id"], masked)
    w = writer(tv, d, [ASCII_INT, TEXT])
    data = packet(3, "abcdef")
    assert w is not None and direct(w, data) == general(tv, d, [ASCII_INT, TEXT], data)
    # Debezium's JSON: the general way, whole.
    assert writer(*_table(cols, ["id"], _debezium(encoding="json"))[::-1],
                  [ASCII_INT, TEXT]) is None
    # A key (tables.key_columns) in another order than the columns.
    two = [_col("a", T.LONG, primary=True, nullable=False), _col("b", T.LONG, nullable=False)]
    for key, written in [(["b", "a"], False), (["a", "b"], True)]:
        keyed = TableCatalog("ns", TableFilter(["shop.*"], []),
                             rules=ColumnRules([], {}, None, {"shop.t": key}))
        d, tv = _table(two, ["a"], keyed)
        assert tv.pk_names == key and (writer(tv, d, [ASCII_INT, ASCII_INT]) is not None) == written
        if written:
            data = packet(3, 4)
            assert direct(writer(tv, d, [ASCII_INT, ASCII_INT]), data) == \
                general(tv, d, [ASCII_INT, ASCII_INT], data)


def test_a_writer_is_made_once_per_table_version_and_layout():
    d, tv = _table(WIDE, ["id"])
    w = writer(tv, d, WIDE_PLAN)
    assert writer(tv, d, list(WIDE_PLAN)) is w
    other = [c if c.name != "n" else _col("n", T.SHORT) for c in WIDE]
    assert writer(tv, chunks.Described("shop", "t", other, ["id"], 1), WIDE_PLAN) is not w


def test_decimals_of_random_precision_scale_and_value_as_the_general_way():
    import random

    from streamer.codec.encode import _decimal_bytes
    from streamer.source.textrows import fast_decimal

    rng = random.Random(53)
    for _ in range(3000):
        precision = rng.randint(1, 65)
        scale = rng.randint(0, min(precision, 30))
        unscaled = rng.randint(-10 ** precision + 1, 10 ** precision - 1)
        digits = str(abs(unscaled)).rjust(scale + 1, "0")  # as the server writes it
        text = ("-" if unscaled < 0 else "") + (
            f"{digits[:-scale]}.{digits[-scale:]}" if scale else digits)
        assert textavro.decimal_bytes(text.encode(), scale, precision) == \
            _decimal_bytes(fast_decimal(text), scale, precision), (text, scale, precision)


@pytest.fixture
def made(monkeypatch):
    """Where the writers made next make a column's values the general way (each column's
    ``_general_value``)."""
    out = []
    real = textavro._general_value
    monkeypatch.setattr(textavro, "_general_value", lambda where, *a: out.append(where) or
                        real(where, *a))
    return out


@pytest.fixture
def frozen(monkeypatch):
    """The processing time an event's parts hold, the same for the general way and the writer."""
    from streamer.codec import debezium
    monkeypatch.setattr(debezium.time, "time_ns", lambda: 1700000000123456789)


def _debezium(rules=None, **options):
    """A catalog publishing Debezium's events in Avro, with Debezium's ``options`` (and the
    column ``rules``)."""
    cfg = config.validate(config._merge(config.DEFAULTS, {
        "mysql": {"server_id": 9}, "format": "debezium",
        "debezium": dict({"encoding": "avro"}, **options),
        "schema_registry": {"url": "http://registry:8081"}}))
    return TableCatalog("ns", TableFilter(["shop.*"], []), rules=rules, fmt=make(cfg))


PRECISIONS = [_col("id", T.LONG, primary=True, nullable=False)] + [
    _col(f"t{p}", T.DATETIME2, fsp=p) for p in range(7)] + [
    _col("d0", T.NEWDECIMAL, precision=20, decimals=0),
    _col("d30", T.NEWDECIMAL, precision=65, decimals=30)]
PRECISIONS_PLAN = [ASCII_INT] + [DATETIME] * 7 + [DECIMAL] * 2
TIMES = ["2024-05-06 07:08:09.654321", "1969-12-31 23:59:59.999999", "0000-00-00 00:00:00",
         "2023-02-29 00:00:00.5", None]


@pytest.mark.parametrize("time_mode", ["adaptive_time_microseconds", "connect"])
def test_debeziums_avro_is_written_as_its_general_way_writes_it(time_mode, frozen):
    # Connect's Value struct of the same columns: int8/int16 for the small integers, a
    # MicroTimestamp (fsp > 3) or ms (fsp <= 3, or time.precision.mode connect), Connect's
    # Decimal scaled to the column's scale; its key the Key struct; an op r event around them.
    d, tv = _table(WIDE, ["id"], _debezium(time_precision_mode=time_mode))
    assert isinstance(tv.envelope, AvroEvents)
    w = writer(tv, d, WIDE_PLAN)
    assert w is not None and w.key_writer is tv.envelope.key_writer
    for i, row in enumerate(WIDE_ROWS):
        data = packet(*row)
        for flag in ("true", "last"):
            value, key = direct(w, data, 70000 + i, flag)
            # before null, after the row
            assert value.startswith(bytes(tv.envelope.value_writer.header) + b"\x00\x02"), row
            assert (value, key) == general(tv, d, WIDE_PLAN, data, 70000 + i, flag), row
    d, tv = _table(PRECISIONS, ["id"], _debezium(time_precision_mode=time_mode))
    w = writer(tv, d, PRECISIONS_PLAN)
    assert w is not None
    for when in TIMES:
        for dec in [("-12345678901234567890", "0." + "1" * 30), (None, None),
                    ("12", "-" + "9" * 35 + "." + "9" * 30), ("007", "1.5"),
                    ("1", "0." + "1" * 31)]:  # more digits than its scale: Connect rounds
            data = packet(1, *[when if when is None or p == 6 else when[:20 + p] if p else
                               when[:19] for p in range(7)], *dec)
            assert direct(w, data) == general(tv, d, PRECISIONS_PLAN, data), (when, dec)


def test_debeziums_avro_keeps_a_registrys_frame_and_its_other_columns_to_the_general_way(
        frozen):
    d, tv = _table(WIDE, ["id"], _debezium())
    w = writer(tv, d, WIDE_PLAN)
    enc = tv.envelope
    enc.value_writer.header = b"\x00\x00\x00\x00\x07"  # registered: the registry's frame
    enc.key_writer.header = b"\x00\x00\x00\x00\x08"
    data = packet(*WIDE_ROWS[0])
    value, key = direct(w, data)
    assert value[:5] == b"\x00\x00\x00\x00\x07" and key[:5] == b"\x00\x00\x00\x00\x08"
    assert (value, key) == general(tv, d, WIDE_PLAN, data)
    cols = [_col("id", T.LONG, primary=True, nullable=False),
            _col("m", T.NEWDECIMAL, precision=12, decimals=4)]
    # A decimal as Connect's string or double, and BIGINT UNSIGNED (Connect's Decimal of an
    # integer): not their text's bytes, made as the general way makes them.
    for mode in ("string", "double"):
        d, tv = _table(cols, ["id"], _debezium(decimal_handling_mode=mode))
        w = writer(tv, d, [ASCII_INT, DECIMAL])
        for data in (packet(1, "-1234.5000"), packet(2, None)):
            assert direct(w, data) == general(tv, d, [ASCII_INT, DECIMAL], data), mode
    d, tv = _table([cols[0], _col("u", T.LONGLONG, unsigned=True)], ["id"], _debezium())
    data = packet(1, "18446744073709551615")
    assert direct(writer(tv, d, [ASCII_INT, ASCII_INT]), data) == \
        general(tv, d, [ASCII_INT, ASCII_INT], data)
    # A composite key, in the columns' order whatever the primary key's: Debezium's Key struct.
    two = [_col("a", T.LONG, primary=True, nullable=False), _text("v"),
           _col("b", T.LONG, primary=True, nullable=False)]
    d, tv = _table(two, ["b", "a"], _debezium())
    w = writer(tv, d, [ASCII_INT, TEXT, ASCII_INT])
    data = packet(3, "v", 4)
    assert w is not None and direct(w, data) == general(tv, d, [ASCII_INT, TEXT, ASCII_INT], data)


class _RandomRows:
    """Random values of every kind the writers take, in the text the server sends: valid and
    invalid dates, TIMESTAMPs of the whole range, TIMEs past a day, integers at their bounds,
    decimals of each scale, multibyte text, bytes of each length prefix, SETs and NULLs."""

    MEMBERS = ("a", "b", "c", "dé")

    def __init__(self, seed):
        import random
        self.rng = random.Random(seed)

    def columns(self):
        """(column, plan entry, maker of a value) of a table of every kind."""
        r = self.rng
        out = [(_col("id", T.LONG, primary=True, nullable=False), ASCII_INT,
                lambda: r.randint(-2 ** 31, 2 ** 31 - 1))]
        for t, size in ((T.TINY, 1), (T.SHORT, 2), (T.INT24, 3), (T.LONG, 4), (T.LONGLONG, 8)):
            for unsigned in (False, True)[:2 if t != T.LONGLONG else 1]:
                lo, hi = (0, 2 ** (8 * size) - 1) if unsigned else (
                    -2 ** (8 * size - 1), 2 ** (8 * size - 1) - 1)
                out.append((_col(f"i{size}{unsigned}", t, unsigned=unsigned), ASCII_INT,
                            lambda lo=lo, hi=hi: r.choice([lo, hi, 0, r.randint(lo, hi)])))
        for p in range(7):
            out += [(_col(f"dt{p}", T.DATETIME2, fsp=p), DATETIME,
                     lambda p=p: f"{self.date()} {self.clock()}{self.fraction(p)}"),
                    (_col(f"ts{p}", T.TIMESTAMP2, fsp=p), DATETIME, lambda p=p: self.stamp(p)),
                    (_col(f"tm{p}", T.TIME2, fsp=p), ("ascii", converters.convert_timedelta),
                     lambda p=p: self.time(p))]
        for precision, scale in ((1, 0), (12, 4), (18, 18), (65, 30)):
            out.append((_col(f"m{precision}_{scale}", T.NEWDECIMAL, precision=precision,
                             decimals=scale), DECIMAL,
                        lambda precision=precision, scale=scale: self.decimal(precision, scale)))
        bytes_of = lambda *lengths: lambda: r.randbytes(r.choice(lengths))  # noqa: E731
        return out + [
            (_col("d", T.DATE), ("ascii", converters.convert_date), self.date),
            (_col("y", T.YEAR), ("ascii", int), lambda: r.choice(["0000", r.randint(1901, 2155)])),
            (_col("e", T.ENUM, enum_values=("red", "grün"), character_set_name="utf8mb4"), TEXT,
             lambda: r.choice(["red", "grün", ""])),
            (_text("s"), TEXT, self.text), (_text("masked"), TEXT, self.text),
            (_text("hashed"), TEXT, self.text), (_text("gone"), TEXT, self.text),
            (_col("bn", T.STRING, character_set_name="binary", max_length=6), (None, None),
             bytes_of(0, 1, 6)),
            (_col("vb", T.VARCHAR, character_set_name="binary", max_length=300), (None, None),
             bytes_of(0, 250, 251, 300)),
            (_col("bl", T.BLOB, character_set_name="binary"), (None, None), bytes_of(5, 70000)),
            (_col("st", T.SET, set_values=self.MEMBERS), TEXT, self.set),
            (_col("sn", T.SET, nullable=False, set_values=self.MEMBERS), TEXT, self.set)]

    def date(self):
        r = self.rng
        if r.random() < 0.8:
            return f"{r.randint(1, 9999):04d}-{r.randint(1, 12):02d}-{r.randint(1, 31):02d}"
        return f"{r.randint(0, 9999):04d}-{r.randint(0, 13):02d}-{r.randint(0, 32):02d}"

    def clock(self):
        return f"{self.rng.randint(0, 23):02d}:{self.rng.randint(0, 59):02d}:" \
               f"{self.rng.randint(0, 59):02d}"

    def fraction(self, p):
        return f".{self.rng.randrange(10 ** p):0{p}d}" if p else ""

    def stamp(self, p):
        import datetime
        seconds = self.rng.choice([1, 2 ** 31 - 1, self.rng.randint(1, 2 ** 31 - 1)])
        when = datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=seconds)
        return f"{when:%Y-%m-%d %H:%M:%S}{self.fraction(p)}" if self.rng.random() < 0.97 else \
            "0000-00-00 00:00:00" + ("." + "0" * p if p else "")

    def time(self, p):
        r = self.rng
        hours = r.choice([0, 23, 24, 837, r.randint(0, 837)])
        sign = "-" if r.random() < 0.3 else ""
        return f"{sign}{hours:02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}{self.fraction(p)}"

    def decimal(self, precision, scale):
        unscaled = self.rng.randint(-10 ** precision + 1, 10 ** precision - 1)
        digits = str(abs(unscaled)).rjust(scale + 1, "0")
        return ("-" if unscaled < 0 else "") + (
            f"{digits[:-scale]}.{digits[-scale:]}" if scale else digits)

    def text(self):
        return "".join(self.rng.choice("aé€😀\x00'\\\nü中") for _ in range(self.rng.randint(0, 40)))

    def set(self):
        return ",".join(m for m in self.MEMBERS if self.rng.random() < 0.5)


@pytest.mark.parametrize("fmt", ["streamer", "adaptive_time_microseconds", "connect"])
@pytest.mark.parametrize("key", [["id"], ["id", "bn", "dt3", "tm2", "st"]])
def test_random_rows_of_every_kind_are_written_as_the_general_way_writes_them(fmt, key, frozen):
    # Beside the chosen values above: 300 random rows a format and key, masks and an excluded
    # column among them, every nullable value NULL one time in ten.
    rows = _RandomRows(f"{fmt} {key}")
    kinds = rows.columns()
    cols, plan = [c for c, _, _ in kinds], [p for _, p, _ in kinds]
    rules = ColumnRules(["shop.t.gone"], {"shop.t.masked": "null", "shop.t.hashed": "hash"}, b"s")
    d, tv = _table(cols, key, _debezium(rules=rules, time_precision_mode=fmt) if fmt != "streamer"
                   else TableCatalog("ns", TableFilter(["shop.*"], []), rules=rules))
    w = writer(tv, d, plan)
    assert w is not None
    for n in range(300):
        values = [make() if c.name in key or not c.nullable or rows.rng.random() > 0.1 else None
                  for c, _, make in kinds]
        data = packet(*values)
        assert direct(w, data, n) == general(tv, d, plan, data, n), [repr(v)[:40] for v in values]
