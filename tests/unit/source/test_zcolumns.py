"""MariaDB's compressed columns (source.standins, source.colcompress), on a recording.

binlogs/zcolumns.binlog was recorded on MariaDB 10.11 (binlogs/zcolumns.sql): app.z has TEXT,
VARCHAR, BLOB, MEDIUMTEXT and VARBINARY columns declared COMPRESSED, between text columns in
other charsets; app.plain has none. (Against the real servers, every value compared with
SELECT, in the binlog and a snapshot: tests/e2e/test_types.py.)
"""
import zlib

import pytest
from pymysqlreplication.constants import FIELD_TYPE as T
from pymysqlreplication.row_event import TableMapEvent

from streamer.errors import UnsupportedValue
from streamer.position import Position
from streamer.source import colcompress, patches, rowcount
from tests.unit.engine_parts import BINLOGS, ReplayedBinlog

patches.apply()

FILE = "mysql-bin.000002"
NAMES = ["id", "a", "l", "b", "c", "d", "m", "vb", "tail"]


def _recording():
    with open(f"{BINLOGS}/zcolumns.binlog", "rb") as fh:
        return fh.read()


def _table_maps():
    return [e for e in ReplayedBinlog("zcolumns.binlog", Position(FILE, 4))
            if isinstance(e, TableMapEvent) and e.table == "z"]


def test_the_library_alone_fails_on_such_a_table_map(monkeypatch):
    # The types of the compressed columns, 140 and 141, as MariaDB writes them: the library
    # reads no metadata for them, and the rest of the map from the wrong bytes (fails before:
    # every run met it at such a table's map, published or not).
    data = _recording()
    at = data.index(b"\x01z\x00") + 3
    assert data[at] == len(NAMES) and data[at + 1:at + 10] == bytes([3, 140, 15, 141, 140, 141,
                                                                      140, 141, 15])
    monkeypatch.setattr(TableMapEvent, "__init__", TableMapEvent.__init__.__wrapped__)
    with pytest.raises(ValueError, match="is not a valid MetadataFieldType"):
        _table_maps()


def test_a_table_map_with_compressed_columns_is_read_with_the_charsets_after_them():
    maps = _table_maps()
    assert len(maps) == 4  # two inserts', the update's and the delete's
    cols = maps[0].columns
    assert [c.name for c in cols] == NAMES
    assert [c.type for c in cols] == [T.LONG, T.BLOB, T.VARCHAR, T.VARCHAR, T.BLOB, T.VARCHAR,
                                      T.BLOB, T.VARCHAR, T.VARCHAR]
    assert [getattr(c, "compressed", False) for c in cols] == [
        False, True, False, True, True, True, True, True, False]
    # Counted among the character columns: each column after one has its own charset.
    assert [c.character_set_name for c in cols[1:]] == [
        "utf8", "cp1252", "utf8", "binary", "cp1252", "utf8", "binary", "utf8"]  # the library's
    # A VARCHAR COMPRESSED's length counts its header byte; MEDIUMTEXT's length takes 3 bytes.
    assert (cols[3].max_length, cols[5].max_length, cols[6].length_size) == (4001, 51, 3)


def test_rows_of_an_unpublished_table_with_compressed_columns_are_counted_by_their_sizes():
    cols = _table_maps()[0].columns
    assert rowcount.size_of(cols[1]) == rowcount.size_of(cols[4]) == (0, 2)


def _replay(make, include):
    streamer, publisher = make(sections={"tables": {"include": include}})
    reader = ReplayedBinlog("zcolumns.binlog", Position(FILE, 4), on_end=streamer.request_stop)
    with reader:
        streamer.stream(publisher, reader, Position(FILE, 4))
    decoder = publisher.decoder()
    return [decoder.decode(value) for _, _, value in publisher.messages() if value is not None]


def test_a_published_table_with_compressed_columns_streams_its_values(make, monkeypatch):
    heads = []
    inflate = colcompress.inflate
    monkeypatch.setattr(colcompress, "inflate", lambda b: heads.append(b[:1]) or inflate(b))
    first, second, third, update, delete = _replay(make, ["app.z"])
    assert first["after"] == {"id": 1, "a": "héllo " * 100, "l": "café", "b": "x✓" * 300,
                              "c": b"\x00\xff" * 300, "d": "é" * 50, "m": "z" * 70000,
                              "vb": b"\xab" * 300, "tail": "één"}
    assert second["after"] == {"id": 2, "a": "tiny", "l": "naïve", "b": "b", "c": None, "d": "",
                               "m": "", "vb": b"", "tail": None}
    assert third["after"] == {"id": 3, "a": "wrapped " * 50, "l": None, "b": "w" * 900,
                              "c": b"\x01" * 999, "d": "abc" * 8, "m": "m", "vb": b"\x00",
                              "tail": "w"}
    assert (update["op"], update["before"], update["after"]["a"], update["after"]["b"]) == (
        "u", first["after"], "changed", "y" * 1000)
    assert (delete["op"], delete["before"]) == ("d", second["after"])
    # Each way MariaDB stores a value was read: raw deflate (0x8n), wrapped zlib (0x80-0x87),
    # as it is (0x00), and empty.
    kinds = {h[0] & 0xF8 if h else None for h in heads}
    assert kinds == {0x88, 0x80, 0x00, None}, kinds


def test_a_table_beside_one_with_compressed_columns_streams(make):
    assert [(env["op"], env["after"]) for env in _replay(make, ["app.plain"])] == [
        ("c", {"id": 1, "s": "p1"}), ("c", {"id": 2, "s": "p2"})]


def _zlib(value, wrapped=False):
    n = (len(value).bit_length() + 7) // 8
    z = zlib.compressobj(wbits=zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
    head = 0x80 | n | (0 if wrapped else 8)
    return bytes([head]) + len(value).to_bytes(n, "big") + z.compress(value) + z.flush()


def test_a_stored_value_is_inflated_as_mariadb_lays_it_out():
    assert colcompress.inflate(b"") == b""
    assert colcompress.inflate(b"\x00as it is") == b"as it is"
    assert colcompress.inflate(_zlib(b"x" * 1000)) == b"x" * 1000
    assert colcompress.inflate(_zlib(b"y" * 70000, wrapped=True)) == b"y" * 70000
    with pytest.raises(UnsupportedValue, match="compression method 1, which MariaDB doesn't"):
        colcompress.inflate(b"\x10abc")
    with pytest.raises(UnsupportedValue, match="zlib can't inflate"):
        colcompress.inflate(b"\x8a\x00\x10garbage")
    with pytest.raises(UnsupportedValue, match="of 1000 bytes where its header says 2000"):
        colcompress.inflate(_zlib(b"x" * 1000)[:1] + (2000).to_bytes(2, "big") +
                            _zlib(b"x" * 1000)[3:])
