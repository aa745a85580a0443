"""Query events whose status variables the library does not know: MariaDB 11's, recorded."""
import struct

import pytest
from pymysqlreplication.event import QueryEvent

from streamer.source import patches
from tests.unit.engine_parts import _decoded

patches.apply()

# MariaDB 11.4.5's event for CREATE DATABASE t_660ccac5 CHARACTER SET utf8mb4, as it wrote it:
# its status variables hold Q_CHARACTER_SET_COLLATIONS (131) with no entry, before Q_CHARSET.
CREATE_DATABASE = bytes.fromhex(
    "9e59096b02010000007b000000c408000008000c000000000000000a00001c0000000000010100002054000000"
    "0006037374648300042d002d002d00745f36363063636163350043524541544520444154414241534520745f36"
    "3630636361633520434841524143544552205345542075746638 6d623474afab0e".replace(" ", ""))


def _with_status(extra):
    """CREATE_DATABASE with ``extra`` status variables added at the end of its block."""
    head, body = CREATE_DATABASE[:19], bytearray(CREATE_DATABASE[19:])
    length = struct.unpack_from("<H", body, 11)[0]
    struct.pack_into("<H", body, 11, length + len(extra))
    body[13 + length:13 + length] = extra
    size = 19 + len(body)
    return head[:9] + struct.pack("<I", size) + head[13:] + bytes(body)


def _query(event_bytes):
    return _decoded(event_bytes, {}, (11, 4, 5), {QueryEvent}, None)


def test_mariadb_11s_collations_status_variable_is_read_and_the_query_after_it():
    event = _query(CREATE_DATABASE)
    assert event.query == "CREATE DATABASE t_660ccac5 CHARACTER SET utf8mb4"
    assert event.schema == b"t_660ccac5"
    # With entries: a count, then 4 bytes each.
    event = _query(_with_status(bytes([131, 2]) + b"\x21\x00\x2d\x00" + b"\x08\x00\x2f\x00"))
    assert event.query == "CREATE DATABASE t_660ccac5 CHARACTER SET utf8mb4"


@pytest.mark.parametrize("extra", [bytes([130, 0]), bytes([130, 4]) + b"\x01" * 8,
                                   bytes([200, 9, 9, 9])])
def test_a_status_variable_the_reader_does_not_know_is_skipped_with_the_rest_of_its_block(extra):
    event = _query(_with_status(extra))
    assert event.query == "CREATE DATABASE t_660ccac5 CHARACTER SET utf8mb4"
    assert event.schema == b"t_660ccac5"


def _written_by(client, query):
    """CREATE_DATABASE made ``query`` (bytes) written by a client of collation id ``client``
    (Q_CHARSET_CODE: the client's, the connection's and the server's collations)."""
    head, body = CREATE_DATABASE[:19], bytearray(CREATE_DATABASE[19:])
    at = body.index(bytes([4]) + b"\x2d\x00" * 3)
    struct.pack_into("<H", body, at + 1, client)
    body = body[:body.index(b"CREATE DATABASE")] + query + body[-4:]  # the checksum's place
    return head[:9] + struct.pack("<I", 19 + len(body)) + head[13:] + bytes(body)


@pytest.mark.parametrize("client, query, text", [
    (8, "TRUNCATE TABLE `café`".encode("latin1"), "TRUNCATE TABLE `café`"),  # latin1
    (8, b"SELECT '\x80\x81'", "SELECT '\u20ac\x81'"),  # MySQL's latin1 is cp1252 and C1
    (51, "TRUNCATE `таблица`".encode("cp1251"), "TRUNCATE `таблица`"),
    # sjis's 表 is 0x95 0x5C: read as UTF-8 it was a bad byte and a backslash.
    (13, "TRUNCATE `表`".encode("sjis"), "TRUNCATE `表`"),
    (255, "TRUNCATE `日本`".encode("utf-8"), "TRUNCATE `日本`"),  # MySQL 8's utf8mb4 default
    (45, b"SELECT '\xff'", "SELECT '?'"),  # bytes no character stands for: '?', as the server
])
def test_a_statement_is_read_in_its_clients_charset(client, query, text):
    event = _query(_written_by(client, query))
    assert event.character_set_client == client and event.query == text
    assert event.schema == b"t_660ccac5"
