"""The snapshot's row reader gives PyMySQL's values, field by field, on every kind of value."""
import datetime

import pytest
import pymysql
from pymysql import converters
from pymysql.connections import MySQLResult
from pymysql.protocol import MysqlPacket

from streamer.source import textrows


def lenenc(value):
    if value is None:
        return b"\xfb"
    n = len(value)
    if n < 251:
        return bytes([n]) + value
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little") + value
    if n < 1 << 24:
        return b"\xfd" + n.to_bytes(3, "little") + value
    return b"\xfe" + n.to_bytes(8, "little") + value


PLAN = [("ascii", converters.convert_datetime), ("ascii", converters.convert_timedelta),
        ("ascii", converters.convert_date), ("ascii", int), ("ascii", converters.Decimal),
        ("utf8", None), (None, None), ("ascii", float)]
DATETIMES = [b"2024-02-29 12:00:01", b"2024-02-29 12:00:01.5", b"2024-02-29 12:00:01.123456",
             b"0000-00-00 00:00:00", b"2024-02-30 00:00:00", b"9999-12-31 23:59:59.999999",
             b"1000-01-01 00:00:00.000", b"2024-02-29"]
TIMES = [b"-838:59:59", b"838:59:59.000000", b"00:00:00", b"-00:00:00.5", b"12:34:56.123",
         b"25:06:17", b"bogus", b"1:2:3"]
ROWS = [
    [DATETIMES[i % len(DATETIMES)], TIMES[i % len(TIMES)], b"2024-01-0" + str(i % 9 + 1).encode(),
     str(-i * 1000003).encode(), b"-12.5000", ("héllo " * i).encode(), bytes(range(i % 256)),
     b"1.5e-3"]
    for i in range(40)
] + [[None] * 8, [b"2024-01-01 00:00:00", None, None, b"1", None, "x".encode() * 70000,
                  b"\x00" * 300, b"0"]]


class _Result:
    converters = PLAN


def _pymysql(data):
    return MySQLResult._read_row_from_packet(_Result(), MysqlPacket(data, "utf8"))


@pytest.mark.parametrize("row", ROWS)
def test_each_row_reads_as_pymysql_reads_it(row):
    data = b"".join(lenenc(v) for v in row)
    assert textrows.row_reader(PLAN)(data) == _pymysql(data)


def test_the_fast_converters_agree_with_pymysqls_on_every_layout():
    for text in [t.decode() for t in DATETIMES]:
        assert textrows.fast_datetime(text) == converters.convert_datetime(text), text
    for text in [t.decode() for t in TIMES]:
        assert textrows.fast_timedelta(text) == converters.convert_timedelta(text), text
    assert textrows.fast_timedelta("-00:00:00.5") == -datetime.timedelta(microseconds=500000)


DECIMALS = ["0", "-0", "0.0000", "-0.0000", "12.5000", "-12.5000", "0.0010", "-0.0010",
            "00012.30", "99999999999999999999999999999999999.999999999999999999999999999999",
            "-1234567.8901", "7", "1.", ".5", "-", "", "1e5", "1.2.3", "NaN", "-Infinity", " 12",
            "1_000", "\u0663", "1.\u00b2", "+5"]


def test_decimals_read_from_their_parts_are_decimals_parsed_digit_for_digit():
    import _pydecimal

    fast = textrows.decimal_reader(_pydecimal)
    for text in DECIMALS:
        try:
            expected = _pydecimal.Decimal(text)
        except _pydecimal.InvalidOperation:
            with pytest.raises(_pydecimal.InvalidOperation):
                fast(text)
            continue
        got = fast(text)
        assert type(got) is _pydecimal.Decimal, text
        assert (got.as_tuple(), str(got)) == (expected.as_tuple(), str(expected)), text
    # What the row reader uses for a DECIMAL field reads as the interpreter's own Decimal does.
    assert textrows.row_reader([("ascii", converters.Decimal)])(lenenc(b"-0.0010"))[0] \
        .as_tuple() == converters.Decimal("-0.0010").as_tuple()


def test_a_row_shorter_than_its_fields_stops_where_pymysql_does():
    data = lenenc(b"1")
    assert textrows.row_reader(PLAN[3:])(data) == _pymysql_short(data)


def _pymysql_short(data):
    class R:
        converters = PLAN[3:]
    return MySQLResult._read_row_from_packet(R(), MysqlPacket(data, "utf8"))


class _Fields(textrows.FastResult):
    """A result with PLAN's fields and no connection: its readers alone."""

    unbuffered_active = False

    def __init__(self):
        self.converters = PLAN


@pytest.mark.parametrize("indexes", [[0], [3], [5, 3], [0, 4, 7], [6], [7], [1, 2], [3, 3]])
def test_a_key_reader_reads_its_fields_as_the_whole_row_reader_does(indexes):
    # Past NULLs, empty values and 2- and 3-byte lengths (the last rows) to the fields it reads.
    result = _Fields()
    read, read_key = result.reader(), result.key_reader(indexes)
    empty = [b"2024-01-01 00:00:00", b"00:00:00", b"2024-01-01", b"0", b"0", b"", b"", b"0"]
    long = empty[:3] + [b"7", b"1.5", "\u00e9".encode() * 200, b"\x01" * 70000, b"2"]
    for row in ROWS + [empty, long]:
        data = b"".join(lenenc(v) for v in row)
        whole = read(data)
        got = read_key(data)
        assert got == tuple(whole[i] for i in indexes)
        assert [type(v) for v in got] == [type(whole[i]) for i in indexes]


def test_a_key_reader_is_made_once_per_layout_so_each_chunk_runs_the_same_code():
    # Each chunk's result asks again; a function generated again would be new code to the JIT.
    first, again = _Fields().key_reader([3, 5]), _Fields().key_reader([3, 5])
    assert again is first
    assert _Fields().key_reader([5, 3]) is not first  # other fields, another reader
    other = _Fields()
    other.converters = PLAN[:5] + [("latin1", None)] + PLAN[6:]  # another layout: its own
    data = b"".join(lenenc(v) for v in ROWS[3])
    assert other.key_reader([3, 5])(data) == (-3000009, ("héllo " * 3).encode().decode("latin1"))
    assert first(data) == (-3000009, "héllo " * 3)


def test_the_key_readers_kept_are_bounded(monkeypatch):
    monkeypatch.setattr(textrows, "_KEY_READERS", {})
    monkeypatch.setattr(textrows, "KEY_READERS_KEPT", 3)
    for i in range(3):
        textrows.key_reader(PLAN, [i])
    assert len(textrows._KEY_READERS) == 3
    kept = textrows.key_reader(PLAN, [3])
    assert list(textrows._KEY_READERS.values()) == [kept]
    assert textrows.key_reader(PLAN, [3]) is kept


def test_lengths_written_as_the_server_writes_them_read_back_at_every_width():
    from streamer.source import lenenc as lengths

    for n, written in [(0, b"\0"), (250, b"\xfa"), (251, b"\xfc\xfb\0"),
                       (65535, b"\xfc\xff\xff"), (65536, b"\xfd\0\0\x01"),
                       ((1 << 24) - 1, b"\xfd\xff\xff\xff"),
                       (1 << 24, b"\xfe\0\0\0\x01\0\0\0\0"),
                       (1 << 40, b"\xfe\0\0\0\0\0\x01\0\0")]:
        assert lengths.write(n) == written
        assert lengths.read(written + b"x", 0) == (n, len(written))


# MariaDB's SELECT sends a lone UTF-16 surrogate of a ucs2 column as three bytes (ED A0 80) that
# no UTF-8 character stands for; a stray byte or a character cut short are one '?' each too.
BAD = [(b"A\xed\xa0\x80B", "A?B"), (b"\xff\xfeA", "??A"), (b"caf\xc3", "caf?"),
       (b"\xc3(" * 130, "?(" * 130)]  # 260 bytes made 260 characters: the length's width stays


@pytest.mark.parametrize("raw,text", BAD)
def test_a_row_with_text_its_encoding_cant_read_is_made_readable_as_the_binlog_publishes_it(
        raw, text):
    row = ROWS[5][:5] + [raw, None, b"0"]
    data = b"".join(lenenc(v) for v in row)
    with pytest.raises(UnicodeDecodeError):
        textrows.row_reader(PLAN)(data)
    fixed, changed = textrows.readable(PLAN, data)
    assert changed == [(5, raw, text)]
    assert textrows.row_reader(PLAN)(fixed) == _pymysql(
        b"".join(lenenc(v) for v in row[:5] + [text.encode(), None, b"0"]))


def test_a_readable_row_is_left_as_it_is():
    for row in ROWS:
        data = b"".join(lenenc(v) for v in row)
        assert textrows.readable(PLAN, data) == (data, [])


def test_a_result_reads_a_row_with_unreadable_text_made_readable_and_notes_each_value():
    from types import SimpleNamespace

    from streamer.source.rowplan import INVALID

    result = _Fields()
    result.fields = [SimpleNamespace(db=b"shop", table_name="a", org_table="t", name=f"c{i}",
                                     org_name=f"col{i}") for i in range(len(PLAN))]
    row = ROWS[2][:5] + [b"A\xed\xa0\x80B", None, b"0"]
    before = INVALID.by_column.get(("shop", "t", "col5"), 0)
    got = result._read_row_from_packet(MysqlPacket(b"".join(lenenc(v) for v in row), "utf8"))
    assert got[5] == "A?B" and got[:5] == result.reader()(b"".join(lenenc(v) for v in ROWS[2]))[:5]
    assert INVALID.by_column[("shop", "t", "col5")] == before + 1
    # Which fields were changed, each once with its first bytes, however many rows were.
    result._read_row_from_packet(MysqlPacket(b"".join(lenenc(v) for v in row), "utf8"))
    assert result.unreadable == {5: b"A\xed\xa0\x80B"}


def _field_packet(name, type_code, charsetnr):
    """A column definition packet as the server sends one in a result's metadata."""
    text = b"".join(lenenc(s) for s in (b"def", b"app", b"emb", b"emb", name, name))
    return text + b"\x0c" + charsetnr.to_bytes(2, "little") + (16).to_bytes(4, "little") + \
        bytes([type_code]) + b"\x00\x00\x00\x00\x00"


class _Described(textrows.FastResult):
    """A result whose metadata packets are ``packets``, then an EOF packet."""

    unbuffered_active = False

    def __init__(self, packets):
        queue = [MysqlPacket(p, "utf8") for p in packets] + [MysqlPacket(b"\xfe\0\0\x02\0", "utf8")]

        class Conn:
            use_unicode, encoding, decoders = True, "utf8", converters.decoders

            def _read_packet(self, packet_type=MysqlPacket):
                data = queue.pop(0)._data
                return packet_type(data, "utf8")
        self.connection = Conn()
        self.field_count = len(packets)


def test_a_mysql9_vector_field_is_read_as_its_bytes_not_decoded_as_ascii():
    # MySQL 9 sends VECTOR(n) as type 242 (source.vectors); PyMySQL, not knowing it, would
    # decode its floats as ASCII text, and a float's bytes are rarely that.
    result = _Described([_field_packet(b"id", 3, 63), _field_packet(b"v", 242, 63),
                         _field_packet(b"s", 253, 45)])
    result._get_descriptions()
    assert [e for e, _ in result.converters] == ["ascii", None, "utf8"]
    floats = b"\x00\x00\x80\x3f\x00\x00\x00\xbf"
    assert result.reader()(lenenc(b"7") + lenenc(floats) + lenenc("é".encode())) == \
        (7, floats, "é")


def test_a_result_cut_off_with_its_connection_lets_go_without_reading():
    # A chunk's SELECT whose connection was killed (KILL CONNECTION, pt-kill's default) ends with
    # 2013, and PyMySQL closes the connection. The stream's restart then gives the chunk up:
    # closing its result read from the closed socket (AttributeError) and crashed the streamer.
    conn = pymysql.connections.Connection(defer_connect=True)  # as PyMySQL leaves a broken one
    result = textrows.FastResult(conn)
    result.unbuffered_active = True
    result.close()
    assert not result.unbuffered_active
