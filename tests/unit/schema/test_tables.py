"""Per-table versions built from table-map events, without a server."""
import hashlib

import pytest
from pymysqlreplication.constants import FIELD_TYPE

from streamer.errors import MissingColumnNames
from streamer.schema.versions import TableCatalog, TableFilter, TableVersion


class Col:
    def __init__(self, name, type_, primary=False, **extra):
        self.name, self.type, self.is_primary = name, type_, primary
        self.unsigned = False
        self.character_set_name = extra.pop("charset", None)
        self.enum_values = self.set_values = None
        self.__dict__.update(extra)


class TableMap:
    def __init__(self, columns, nullable_bits=b"\x00"):
        self.schema, self.table, self.table_id = "shop", "orders", 7
        self.columns = columns
        self.null_bitmask = nullable_bits


def test_columns_without_names_are_never_published():
    event = TableMap([Col("id", FIELD_TYPE.LONG, True), Col("UNKNOWN_COL1", FIELD_TYPE.LONG)])
    with pytest.raises(MissingColumnNames, match="binlog_row_metadata=FULL"):
        TableVersion("ns", event)
    with pytest.raises(MissingColumnNames):
        TableVersion("ns", TableMap([Col(None, FIELD_TYPE.LONG)]))


@pytest.mark.parametrize("name, expected", [
    ("orders", "orders"), ("order-items.v2", "order-items.v2"), ("Order_Items", "Order_Items"),
    ("café", "caf__" + hashlib.sha1("café".encode()).hexdigest()[:8]),
    ("order$items", "order_items_" + hashlib.sha1(b"order$items").hexdigest()[:8]),
    ("sales 2024", "sales_2024_" + hashlib.sha1(b"sales 2024").hexdigest()[:8]),
])
def test_a_name_a_topic_cant_hold_gets_one_it_can_and_never_anothers(name, expected):
    from streamer.schema.naming import topic_name, topic_part

    assert topic_part(name) == expected
    assert topic_part("order$items") != topic_part("order_items") != topic_part("order items")
    assert topic_name("{namespace}.{db}.{table}", "ns", "shop$1", name) == \
        f"ns.{topic_part('shop$1')}.{expected}"


def test_topic_key_and_nullability_come_from_the_table_map():
    event = TableMap([Col("id", FIELD_TYPE.LONG, True),
                      Col("note", FIELD_TYPE.VARCHAR, charset="utf8mb4", max_length=20)],
                     nullable_bits=b"\x02")
    tv = TableVersion("canary", event)
    assert tv.topic == "canary.shop.orders" and tv.pk_names == ["id"]
    fields = {f["name"]: f["type"] for f in tv.row_schema["fields"]}
    assert fields == {"id": "int", "note": ["null", "string"]}
    assert tv.key_schema["fields"][0]["name"] == "id"


def test_filters_include_then_exclude_db_table_globs():
    f = TableFilter(["shop.*", "crm.customers"], ["shop.tmp_*"])
    assert f("shop", "orders") and f("crm", "customers")
    assert not f("shop", "tmp_import") and not f("crm", "leads") and not f("other", "orders")


def test_a_text_value_that_could_not_be_decoded_is_one_error_naming_the_column():
    from streamer.errors import UnsupportedValue
    event = TableMap([Col("id", FIELD_TYPE.LONG, True),
                      Col("note", FIELD_TYPE.VARCHAR, charset="eucjpms", max_length=20)])
    tv = TableVersion("ns", event)
    tv.convert({"id": 1, "note": "ascii decodes"})
    with pytest.raises(UnsupportedValue, match=r"shop\.orders column note: a text value the "
                                               r"streamer can't decode .*utf8mb4"):
        tv.convert({"id": 1, "note": b"\xad\xa1"})


def one_row_events():
    from types import SimpleNamespace

    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent
    packet = SimpleNamespace(log_pos=500, event_size=100, server_id=1)

    def event(cls, row):
        return SimpleNamespace(__class__=cls, timestamp=1700000000, packet=packet, rows=[row])
    return [(event(WriteRowsEvent, {"values": {"id": 1, "note": "one"}}), "c"),
            (event(UpdateRowsEvent, {"before_values": {"id": 1, "note": "one"},
                                     "after_values": {"id": 1, "note": None}}), "u"),
            (event(UpdateRowsEvent, {"before_values": {"id": 1, "note": None},
                                     "after_values": {"id": 2, "note": "moved"}}), "u"),
            (event(DeleteRowsEvent, {"values": {"id": 2, "note": "moved"}}), "d")]


def published(process, tv_of):
    import copy

    from streamer.engine.tracker import Tracker
    from streamer.position import Position
    tracker, out = Tracker(Position("f", 4)), []
    tracker.begin(200, "0-1-5")
    for event, op in one_row_events():
        process(copy.deepcopy(event), op, tv_of(), tracker,
                lambda *message: out.append(message))
    return out


def test_events_of_one_row_are_written_by_the_versions_second_compile_byte_for_byte():
    # The one-row path's writers are compiled again (JIT-compiled on their own under PyPy,
    # encode.compiled_apart); what they write is what the version's own write.
    from streamer.codec.avro import confluent_header
    from streamer.engine.rows import process_event, process_one_row_event
    from streamer.schema.versions import OneRowVersion
    event = TableMap([Col("id", FIELD_TYPE.LONG, True),
                      Col("note", FIELD_TYPE.VARCHAR, charset="utf8mb4", max_length=20)],
                     nullable_bits=b"\x02")
    tv = TableVersion("ns", event, tombstones=True)
    twin = tv.one_row()
    assert isinstance(twin, OneRowVersion) and tv.one_row() is twin  # made once
    assert twin.envelope is not tv.envelope and twin.envelope._row is not tv.envelope._row
    assert twin.topic == tv.topic and twin.convert == tv.convert
    expected = published(process_event, lambda: tv)
    # insert, update, a key change (delete, tombstone, create), delete and its tombstone
    assert [m[1] is None for m in expected] == [False, False, False, True, False, False, True]
    assert published(process_one_row_event, tv.one_row) == expected
    # A registry frames the version's writers after the twin was made: the twin follows.
    tv.value_writer.header = confluent_header(7)
    tv.key_writer.header = confluent_header(8)
    framed = published(process_one_row_event, tv.one_row)
    assert framed == published(process_event, lambda: tv) != expected
    assert all(v is None or v[:5] == confluent_header(7) for _, v, _, _ in framed)
    assert all(k[:5] == confluent_header(8) for _, _, k, _ in framed)


def test_a_version_a_message_format_or_fastavro_writes_is_its_own_one_row_version(monkeypatch):
    from streamer.codec import avro
    from streamer.codec.jsonformat import JsonFormat
    from streamer.errors import GeneratedWriterUnsupported
    event = TableMap([Col("id", FIELD_TYPE.LONG, True)])
    tv = TableVersion("ns", event, fmt=JsonFormat("ns"))
    assert tv.one_row() is tv  # the format's own writers, on both paths

    def unsupported(schema, apart=False):
        raise GeneratedWriterUnsupported("a type the generator lacks")
    monkeypatch.setattr(avro, "compile_writer", unsupported)
    tv = TableVersion("ns", event)
    assert tv.value_writer.uses_fastavro() and tv.one_row() is tv


def test_a_key_fastavro_writes_is_the_versions_own_on_the_one_row_path(monkeypatch):
    from streamer.codec import avro
    from streamer.engine.rows import process_event, process_one_row_event
    from streamer.errors import GeneratedWriterUnsupported
    generated = avro.compile_writer

    def no_key(schema, apart=False):
        if schema["name"] == "Key":
            raise GeneratedWriterUnsupported("a type the generator lacks")
        return generated(schema, apart)
    monkeypatch.setattr(avro, "compile_writer", no_key)
    event = TableMap([Col("id", FIELD_TYPE.LONG, True),
                      Col("note", FIELD_TYPE.VARCHAR, charset="utf8mb4", max_length=20)],
                     nullable_bits=b"\x02")
    tv = TableVersion("ns", event, tombstones=True)
    assert tv.key_writer.uses_fastavro() and not tv.value_writer.uses_fastavro()
    assert tv.one_row()._key is tv.key_writer
    expected = published(process_event, lambda: tv)
    assert published(process_one_row_event, tv.one_row) == expected


class _Cached:
    """The definitions a catalog read (source.definitions.Definitions): the names it was asked
    to forget."""

    def __init__(self, *tables):
        self.cache = {("shop", t): object() for t in tables}
        self.forgotten = []

    def forget(self, db, table):
        self.forgotten.append(table)
        self.cache.pop((db, table), None)


@pytest.mark.parametrize("statement, forgotten", [
    ("ALTER TABLE `a``b` MODIFY u UUID", ["a`b"]),
    ('ALTER TABLE "a""b" MODIFY u UUID', ['a"b']),
    ("ALTER TABLE shop.Orders ADD COLUMN ip INET6", ["orders"]),
    ("alter table `my-t` modify u uuid", ["my-t"]),
    ("ALTER TABLE orders_old ADD COLUMN x INT", []),
    ("ALTER TABLE `a``bc` ADD COLUMN x INT", []),
])
def test_a_statement_naming_a_table_however_quoted_has_its_definition_read_again(statement,
                                                                                forgotten):
    # A change from BINARY(16) to UUID leaves the table map's bytes as they were: the definition
    # read for the table must be read again, or its values come out as the old type's.
    cached = _Cached("a`b", 'a"b', "orders", "my-t")
    catalog = TableCatalog("ns", TableFilter(["*.*"], []), definitions=cached)
    catalog.on_statement(statement)
    assert cached.forgotten == forgotten
