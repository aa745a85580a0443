"""The charsets Python has no codec for, decoded by tables the server gives (a fake server here;
tests/e2e/test_types.py reads every one from MariaDB)."""
from streamer.source import charsets, decoders


class _Server:
    """Answers the table query as a server with swe7 and without the rest would."""

    def __init__(self):
        self.asked = []

    def cursor(self):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, sql):
        self.asked.append(sql)
        if "USING swe7)" not in sql:
            raise RuntimeError("Unknown character set")  # as pymysql raises it, more or less
        # swe7: ASCII with Swedish letters at [\\]{|}, nothing above 0x7F.
        table = [chr(b) if b < 0x80 else "?" for b in range(256)]
        for b, ch in zip(b"[\\]{|}", "ÄÖÅäöå"):
            table[b] = ch
        self.row = ("".join(table),)

    def fetchone(self):
        return self.row


def test_a_charset_the_server_has_decodes_by_its_table_and_one_it_lacks_is_left_out():
    server = _Server()
    charsets._tables.pop("mysql-swe7", None)
    assert charsets.load(server) == ["swe7"]
    assert len(server.asked) == len(charsets.SERVER_DEFINED)
    assert decoders.CODEC_OF["swe7"] == "mysql-swe7"
    assert b"[abc]\xc0".decode("mysql-swe7") == "ÄabcÅ?"
    assert "ÄabcÅ".encode("mysql-swe7") == b"[abc]"
    # Loaded once per process: a reconnect asks again only for what is still missing.
    again = _Server()
    assert charsets.load(again) == ["swe7"] and not any("swe7" in q for q in again.asked)


def test_a_multibyte_table_decodes_two_and_three_byte_sequences_and_refuses_the_rest():
    charsets._tables["mysql-ujis"] = ({0xA4A2: "あ", 0x8EB1: "ｱ"}, {0xF3F3: "\ue000"})
    assert b"a\xa4\xa2\x8e\xb1\x8f\xf3\xf3z".decode("mysql-ujis") == "aあｱ\ue000z"
    import pytest
    with pytest.raises(UnicodeDecodeError, match="no such character in the server's table"):
        b"\xa4\xa3".decode("mysql-ujis")
    assert b"\xa4\xa3".decode("mysql-ujis", "replace") == "\ufffd\ufffd"
    # As the server reads it: one '?' for a pair (or a 0x8F triple) it has no character for.
    assert b"a\xa4\xa3\x8f\xa1\xa1z\xa4".decode("mysql-ujis", "mysql-replace") == "a??z?"


def test_bytes_no_character_stands_for_read_as_the_server_reads_them():
    # One '?' for each character the server reads: a byte of a single-byte charset, a pair of
    # a two-byte one (even where Python's codec stops after the first byte), four bytes of a
    # gb18030 sequence whose second byte is a digit.
    for raw, encoding, shown in [(b"A\xdb\xdcB", "ascii", "A??B"), (b"A\x81B", "cp1250", "A?B"),
                                 (b"A\xaa\xa1B", "gbk", "A?B"), (b"A\xf0\x40B", "shift_jis", "A?B"),
                                 (b"A\xc8\xa1B", "big5", "A?B"), (b"A\xa2\xe8B", "euc_kr", "A?B"),
                                 (b"A\x80B", "gb2312", "A?B")]:
        assert raw.decode(encoding, "mysql-replace") == shown, encoding


def test_a_value_with_such_bytes_is_published_with_them_as_question_marks_and_counted(caplog):
    from types import SimpleNamespace

    from streamer.source.rowplan import INVALID
    packet = SimpleNamespace(read_length_coded_pascal_string=lambda size: b"A\xdbB",
                             log_pos=900, event_size=100)
    event = SimpleNamespace(packet=packet, _ignore_decode_errors=False, schema="shop", table="t",
                            charset_to_encoding=lambda name: name)
    column = SimpleNamespace(character_set_name="ascii", name="note")
    before = INVALID.by_column.get(("shop", "t", "note"), 0)
    assert decoders.read_string(event, 1, column) == "A?B"
    assert INVALID.by_column[("shop", "t", "note")] == before + 1
    assert "invalid ascii text (bytes 41db42) in shop.t column note (rows event at offset 800): " \
           "published as 'A?B'" in caplog.text
    # The library's ignore_decode_errors keeps its own meaning.
    event._ignore_decode_errors = True
    assert decoders.read_string(event, 1, column) == "AB"


def test_a_value_in_a_server_defined_charset_asks_for_its_table_once():
    from types import SimpleNamespace
    asked = []
    charsets._tables["mysql-hebrew"] = "".join(chr(b) for b in range(256))
    charsets._tables["mysql-hebrew"] = charsets._tables["mysql-hebrew"][:0xAF] + "\u203e" + \
        charsets._tables["mysql-hebrew"][0xB0:]
    decoders.CODEC_OF.pop("hebrew", None)
    old = decoders.SERVER_TABLE, decoders.SERVER_TABLE_NAMES
    try:
        decoders.SERVER_TABLE_NAMES = frozenset(["hebrew"])
        decoders.SERVER_TABLE = lambda name: (asked.append(name), charsets.load(None, [name]),
                                              decoders.CODEC_OF.get(name))[2]
        event = SimpleNamespace(packet=SimpleNamespace(
            read_length_coded_pascal_string=lambda size: b"a\xaf"), _ignore_decode_errors=False)
        column = SimpleNamespace(character_set_name="hebrew")
        assert decoders.read_string(event, 1, column) == "a\u203e"  # Python's hebrew: "a¯"
        assert decoders.read_string(event, 1, column) == "a\u203e"
        assert asked == ["hebrew"]
    finally:
        decoders.SERVER_TABLE, decoders.SERVER_TABLE_NAMES = old


def test_a_charset_the_server_gives_no_table_for_is_asked_for_once():
    connections = []

    class Refusing(_Server):
        def execute(self, sql):
            raise RuntimeError("Unknown character set")

        def close(self):
            pass

    def connect(settings):
        connections.append(settings)
        return Refusing()

    charsets._tables.pop("mysql-geostd8", None)
    decoders.CODEC_OF.pop("geostd8", None)
    old = decoders.SERVER_TABLE, decoders.SERVER_TABLE_NAMES
    try:
        charsets.configure(lambda: {"host": "h"}, connect)
        assert decoders.SERVER_TABLE("geostd8") is None
        assert decoders.SERVER_TABLE("geostd8") is None
        assert len(connections) == 1
    finally:
        decoders.SERVER_TABLE, decoders.SERVER_TABLE_NAMES = old
        charsets._refused.discard("geostd8")


def test_gb18030_is_the_2005_edition_mysql_has():
    # 0xA8BC and 0x8135F437 swapped characters in 2005; the rest reads as Python's codec does,
    # and a sequence with no character is one '?', four bytes long when its second is a digit.
    assert decoders.CODEC_OF["gb18030"] == "mysql-gb18030"
    raw = bytes.fromhex("41a8bc8135f437d6d09530e232")
    assert raw.decode("mysql-gb18030") == "A\u1e3f\ue7c7中" + bytes.fromhex("9530e232").decode(
        "gb18030")
    assert bytes.fromhex("41e332b53442").decode("mysql-gb18030", "mysql-replace") == "A?B"


def test_sjis_has_the_servers_backslash():
    assert decoders.CODEC_OF["sjis"] == "mysql-sjis"
    assert bytes.fromhex("815f5c82a0").decode("mysql-sjis") == "\\\\あ"
    assert bytes.fromhex("41f04042").decode("mysql-sjis", "mysql-replace") == "A?B"
