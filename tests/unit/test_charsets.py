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
    charsets._TABLES.pop("mysql-swe7", None)
    assert charsets.load(server) == ["swe7"]
    assert len(server.asked) == len(charsets.SERVER_DEFINED)
    assert decoders.BYTE_ORDER["swe7"] == "mysql-swe7"
    assert b"[abc]\xc0".decode("mysql-swe7") == "ÄabcÅ?"
    assert "ÄabcÅ".encode("mysql-swe7") == b"[abc]"
    # Loaded once per process: a reconnect asks again only for what is still missing.
    again = _Server()
    assert charsets.load(again) == ["swe7"] and not any("swe7" in q for q in again.asked)
