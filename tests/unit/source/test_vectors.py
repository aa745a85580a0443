"""MySQL 9's VECTOR columns (source.vectors), on its documented layouts: no MySQL 9 runs here.

binlogs/vectors.binlog was recorded on MySQL 8.0 with LONGBLOB columns holding 32-bit floats
(binlogs/vectors.sql). MySQL 9 writes a VECTOR column's values as such a LONGBLOB's, its column
under type 242 with the same one-byte metadata, and adds the optional metadata field
VECTOR_DIMENSIONALITY (13: a packed integer per VECTOR column); it counts VECTOR columns among
the character columns, as a LONGBLOB is. ``as_mysql9`` makes each table map of app.emb the one
MySQL 9 writes for VECTOR(3) v and VECTOR(1) w.
"""
import os
import struct
from types import SimpleNamespace

import pytest
from pymysqlreplication.row_event import TableMapEvent

from streamer.errors import UnsupportedValue
from streamer.position import Position
from streamer.schema import columns
from streamer.source import patches, rowcount, standins, vectors
from tests.unit.engine_parts import BINLOGS, HEADER, ReplayedBinlog, maps_rewritten

patches.apply()

FILE = "mysql-bin.000002"
EMB_TYPES = bytes([3, 15, 252, 15, 252, 15])  # id, label, v, note, w, tail as MySQL 8.0 wrote them
DIMENSIONS = bytes([vectors.DIMENSIONALITY, 2, 3, 1])  # v is VECTOR(3), w VECTOR(1)


# app.emb's charsets field (COLUMN_CHARSET: a collation per character column) as recorded, the
# LONGBLOBs (binary, 63) counted; and without them, as a server not counting VECTORs would write.
CHARSETS = b"\x03\x09\xfc\xff\x00\x3f\x08\x3f\xfc\xff\x00"
UNCOUNTED = b"\x03\x07\xfc\xff\x00\x08\xfc\xff\x00"
# The other form a server may choose (DEFAULT_CHARSET: the most used collation, then (index,
# collation) of each other column): counted, and not.
DEFAULT_FORM = b"\x02\x09\xfc\xff\x00\x01\x3f\x02\x08\x03\x3f"
DEFAULT_UNCOUNTED = b"\x02\x05\xfc\xff\x00\x01\x08"


def as_mysql9(extra_field: bytes = b"", charsets: bytes = CHARSETS) -> bytes:
    """The recording with app.emb's table maps as MySQL 9 writes them for VECTOR columns (and
    ``extra_field``, an optional metadata field of a later server, after them; ``charsets``
    for its charsets field); every later event's end position moved."""
    def rewrite(body):
        if b"\x03emb\x00" not in body:
            return body
        at = body.index(b"\x03emb\x00") + 5  # the column count, then the types
        assert body[at] == len(EMB_TYPES) and body[at + 1:at + 7] == EMB_TYPES, body
        assert body.count(CHARSETS) == 1, body
        return body[:at + 1] + EMB_TYPES.replace(b"\xfc", b"\xf2") + \
            body[at + 7:].replace(CHARSETS, charsets) + DIMENSIONS + extra_field
    return maps_rewritten("vectors.binlog", rewrite)


def _table_maps(data):
    return [e for e in ReplayedBinlog("vectors.binlog", Position(FILE, 4), data=data)
            if isinstance(e, TableMapEvent) and e.table == "emb"]


def test_a_table_map_with_vector_columns_is_read_with_their_type_size_and_the_charsets_after():
    maps = _table_maps(as_mysql9())
    assert len(maps) == 3  # the inserts', the update's and the delete's
    cols = maps[0].columns
    assert [c.name for c in cols] == ["id", "label", "v", "note", "w", "tail"]
    assert [c.type for c in cols] == [3, 15, vectors.VECTOR, 15, vectors.VECTOR, 15]
    assert (cols[2].dimensions, cols[4].dimensions) == (3, 1)
    assert (cols[2].length_size, cols[4].length_size) == (4, 4)
    # The vectors count among the character columns: the charsets after them are their own.
    assert [cols[i].character_set_name for i in (1, 3, 5)] == ["utf8", "cp1252", "utf8"]
    assert [c.is_primary for c in cols] == [True] + [False] * 5
    assert standins.translated(
        *_event_body(as_mysql9(), "emb")) is not None  # the walk finds what it changes


def _event_body(data, table):
    """(the wrapper's packet data of ``table``'s first table map: the OK byte, the event; 20)."""
    pos = 4
    while pos < len(data):
        kind, size = HEADER.unpack_from(data, pos)[1], HEADER.unpack_from(data, pos)[3]
        if kind == 19 and bytes([len(table)]) + table.encode() + b"\0" in data[pos:pos + size]:
            return b"\x00" + data[pos:pos + size], 20
        pos += size
    raise AssertionError(table)


def test_the_library_alone_fails_on_such_a_table_map(monkeypatch):
    # What every run met at a VECTOR column's table map, published or not (fails before).
    monkeypatch.setattr(TableMapEvent, "__init__", TableMapEvent.__init__.__wrapped__)
    # (The column metadata it reads for a type it doesn't know is none: the fields after it are
    # read from the wrong bytes, before it meets VECTOR_DIMENSIONALITY itself.)
    with pytest.raises(ValueError, match="is not a valid MetadataFieldType"):
        _table_maps(as_mysql9())


@pytest.mark.parametrize("counted, uncounted", [(CHARSETS, UNCOUNTED),
                                                (DEFAULT_FORM, DEFAULT_UNCOUNTED)])
def test_a_table_map_whose_charsets_count_vectors_out_is_read_so(monkeypatch, caplog, counted,
                                                                 uncounted):
    # MySQL 9.0 counts VECTOR columns among the character columns (its is_character_type); a
    # server that didn't would give each text column after one the next one's charset, in
    # silence. A VECTOR's own charset is binary: one that isn't, or charsets run out, says so.
    from tests.unit import engine_parts

    monkeypatch.setattr(engine_parts._Control, "_get_dbms", lambda self: "mysql")
    cols = _table_maps(as_mysql9(charsets=uncounted))[0].columns
    assert [c.type for c in cols] == [3, 15, vectors.VECTOR, 15, vectors.VECTOR, 15]
    assert [cols[i].character_set_name for i in (1, 3, 5)] == ["utf8", "cp1252", "utf8"]
    assert (cols[2].length_size, cols[2].dimensions) == (4, 3)
    assert "its charsets leave its VECTOR columns out of the count" in caplog.text
    caplog.clear()
    cols = _table_maps(as_mysql9(charsets=counted))[0].columns
    assert [cols[i].character_set_name for i in (1, 2, 3, 4, 5)] == \
        ["utf8", "binary", "cp1252", "binary", "utf8"]
    assert "VECTOR columns out of the count" not in caplog.text  # the documented layout


def test_a_table_map_without_vectors_is_handed_to_the_library_as_it_is():
    assert standins.translated(*_event_body(as_mysql9(), "plain")) is None
    with open(os.path.join(BINLOGS, "vectors.binlog"), "rb") as fh:
        assert standins.translated(*_event_body(fh.read(), "emb")) is None


def test_an_optional_field_of_a_later_server_is_left_out_and_the_rest_read():
    before = standins.LEFT_OUT.get(77, 0)
    cols = _table_maps(as_mysql9(extra_field=bytes([77, 3, 1, 2, 3])))[0].columns
    assert [c.name for c in cols] == ["id", "label", "v", "note", "w", "tail"]
    assert cols[3].character_set_name == "cp1252" and cols[2].dimensions == 3
    assert standins.LEFT_OUT[77] == before + 1  # the three maps are the same bytes: parsed once


def test_a_vector_value_is_its_little_endian_floats():
    assert vectors.floats(struct.pack("<3f", 1.0, 2.0, -0.5)) == [1.0, 2.0, -0.5]
    assert vectors.floats(b"") == []
    with pytest.raises(UnsupportedValue, match="6 bytes, not a whole number of 32-bit floats"):
        vectors.floats(b"\0" * 6)


def test_a_vector_column_is_an_avro_array_of_floats():
    col = _table_maps(as_mysql9())[0].columns[2]
    atype, convert, kind = columns.avro_type(col)
    assert atype == {"type": "array", "items": "float"} and kind == "vector"
    assert convert(b"\x00\x00\x80\x3f") == [1.0]


def test_rows_of_an_unpublished_table_with_vectors_are_counted_by_their_sizes():
    cols = _table_maps(as_mysql9())[0].columns
    assert rowcount.size_of(cols[2]) == (0, 4) and rowcount.size_of(cols[4]) == (0, 4)


REPLAYED = [("c", 1), ("c", 2), ("u", 1), ("d", 2)]


def _replay(make, data, include):
    streamer, publisher = make(sections={"tables": {"include": include}})
    reader = ReplayedBinlog("vectors.binlog", Position(FILE, 4), on_end=streamer.request_stop,
                            data=data)
    with reader:
        streamer.stream(publisher, reader, Position(FILE, 4))
    decoder = publisher.decoder()
    return [(topic, decoder.decode(value)) for topic, _, value in publisher.messages()
            if value is not None]


def test_a_published_table_with_vector_columns_streams_its_floats(make):
    out = _replay(make, as_mysql9(), ["app.emb"])
    assert [(env["op"], (env["after"] or env["before"])["id"]) for _, env in out] == REPLAYED
    first, second, update, delete = (env for _, env in out)
    assert first["after"] == {"id": 1, "label": "één", "v": [1.0, 2.0, -0.5], "note": "café",
                              "w": None, "tail": "z"}
    assert second["after"]["v"] == [0.0] and second["after"]["w"] == [1.5]
    assert second["after"]["note"] == "naïve" and second["after"]["tail"] is None
    assert update["before"]["v"] == [1.0, 2.0, -0.5]
    assert update["after"]["v"] == [1.0, 1.0, 1.0] and update["after"]["w"] == [4.0]
    assert delete["before"]["v"] == [0.0]


def test_a_table_beside_one_with_vectors_streams_and_the_vectors_stop_nothing(make):
    out = _replay(make, as_mysql9(), ["app.plain"])
    assert [(env["op"], env["after"]) for _, env in out] == [
        ("c", {"id": 1, "s": "p1"}), ("c", {"id": 2, "s": "p2"})]


def _information_schema_row(name, data_type, column_type, nullable, charset=None, octets=None):
    return {"COLUMN_NAME": name, "DATA_TYPE": data_type, "COLUMN_TYPE": column_type,
            "IS_NULLABLE": "YES" if nullable else "NO", "CHARACTER_SET_NAME": charset,
            "NUMERIC_PRECISION": 10 if data_type == "int" else None, "NUMERIC_SCALE": 0 if
            data_type == "int" else None, "DATETIME_PRECISION": None,
            "CHARACTER_OCTET_LENGTH": octets}


EMB = [("id", "int", "int", False), ("label", "varchar", "varchar(10)", True, "utf8mb4", 40),
       ("v", "vector", "vector(3)", False), ("note", "varchar", "varchar(20)", True, "latin1", 20),
       ("w", "vector", "vector(1)", True), ("tail", "varchar", "varchar(10)", True, "utf8mb4", 40)]


def test_a_snapshot_reads_mysqls_vector_columns_into_the_schema_the_stream_publishes():
    from streamer.schema.versions import TableCatalog, TableFilter
    from streamer.source import chunks

    cols = [chunks.column_of(_information_schema_row(*c), ["id"], "app.emb", mysql_vectors=True)
            for c in EMB]
    assert [c.type for c in cols] == [3, 15, vectors.VECTOR, 15, vectors.VECTOR, 15]
    catalog = TableCatalog("ns", TableFilter(["app.*"], []))
    snap = catalog.snapshot_version(chunks.Described("app", "emb", cols, ["id"], 2))
    stream = catalog.on_table_map(_table_maps(as_mysql9())[0])
    assert snap.row_schema["fields"] == stream.row_schema["fields"]
    row = {"id": 1, "label": None, "v": b"\x00\x00\x80\x3f", "note": None, "w": None,
           "tail": None}
    snap.convert(row)  # the bytes a snapshot's SELECT reads (source.textrows)
    assert row["v"] == [1.0]


def test_mariadbs_vector_a_varbinary_its_definition_names_is_published_as_mysqls_is():
    # MariaDB 11.7+ (not in the matrix) writes VECTOR(n) as a VARBINARY(4n) of the same floats,
    # and information_schema names it: the binlog's version and a snapshot's publish floats.
    from pymysqlreplication.constants import FIELD_TYPE as T

    from streamer.schema.versions import TableCatalog, TableFilter, TableVersion
    from streamer.source import chunks, definitions

    row = _information_schema_row("v", "vector", "vector(3)", False, "binary", 12)
    col = chunks.column_of(row, ["id"], "app.emb")  # MariaDB's
    assert (col.type, col.character_set_name, col.max_length) == (T.VARCHAR, "binary", 12)
    key = chunks.column_of(_information_schema_row(*EMB[0]), ["id"], "app.emb")
    assert definitions.worth_asking([key, col])
    definition = definitions.Definition((("v", "vector"),), None)
    snap = TableCatalog("ns", TableFilter(["app.*"], [])).snapshot_version(
        chunks.Described("app", "emb", [key, col], ["id"], 2, definition))
    table_map = SimpleNamespace(schema="app", table="emb", columns=[key, col], table_id=1,
                                null_bitmask=b"\0")
    stream = TableVersion("ns", table_map, definition=definition)
    assert snap.row_schema["fields"] == stream.row_schema["fields"]
    assert stream.row_schema["fields"][1]["type"] == {"type": "array", "items": "float"}
    for tv in (snap, stream):
        values = {"id": 1, "v": b"\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x00\xbf"}
        tv.convert(values)
        assert values["v"] == [1.0, 2.0, -0.5]
