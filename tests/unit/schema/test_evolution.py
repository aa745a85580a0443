"""Evolution rules, distinct fingerprints for distinct full schemas, and TRUNCATE recognition."""
import io
import json
from types import SimpleNamespace

import fastavro
import pytest
from pymysqlreplication.constants import FIELD_TYPE as T

from streamer.codec import avro
from streamer.codec.decode import Decoder
from streamer.schema import evolution
from streamer.schema.versions import TableVersion
from streamer.source.truncate import truncated_table


def _col(name, type_code, pk=False, **extra):
    base = dict(name=name, type=type_code, unsigned=False, is_primary=pk, character_set_name=None,
                enum_values=None, set_values=None, max_length=0)
    base.update(extra)
    return SimpleNamespace(**base)


def _event(cols, nullable=()):
    bitmask = bytearray((len(cols) + 7) // 8)
    for i, c in enumerate(cols):
        if c.name in nullable:
            bitmask[i >> 3] |= 1 << (i & 7)
    return SimpleNamespace(schema="shop", table="orders", columns=cols, null_bitmask=bytes(bitmask),
                           table_id=1)


def _version(cols, nullable=(), previous=None):
    return TableVersion("ns", _event(cols, nullable), previous)


def _prev(tv):
    return evolution.previous_of(tv.row_schema["fields"], tv.pk_names)


def _fields(tv):
    return {f["name"]: f for f in tv.row_schema["fields"]}


def test_schemas_differing_only_in_logical_type_get_distinct_fingerprints():
    dt = _version([_col("id", T.LONG, pk=True), _col("at", T.DATETIME2, fsp=6)], nullable=("at",))
    ts = _version([_col("id", T.LONG, pk=True), _col("at", T.TIMESTAMP2, fsp=6)], nullable=("at",))
    assert dt.value_writer.fingerprint != ts.value_writer.fingerprint
    # Without the hash in the namespace the canonical forms (and fingerprints) would be equal.
    same_space = [json.loads(json.dumps(s.row_schema)) for s in (dt, ts)]
    for s in same_space:
        s["namespace"] = "shop.orders"
    assert avro.fingerprint(same_space[0]) == avro.fingerprint(same_space[1])


def test_decimal_precision_change_gets_a_distinct_fingerprint_but_the_same_key():
    a = _version([_col("id", T.LONG, pk=True), _col("p", T.NEWDECIMAL, precision=10, decimals=2)])
    b = _version([_col("id", T.LONG, pk=True), _col("p", T.NEWDECIMAL, precision=12, decimals=4)])
    assert a.value_writer.fingerprint != b.value_writer.fingerprint
    assert a.key_writer.fingerprint == b.key_writer.fingerprint


def test_same_columns_give_byte_identical_schemas():
    cols = [_col("id", T.LONG, pk=True), _col("name", T.VARCHAR, character_set_name="utf8mb4")]
    one, two = _version(cols), _version(cols)
    assert avro.canonical_json(one.value_schema) == avro.canonical_json(two.value_schema)
    assert one.value_writer.header == two.value_writer.header


def test_first_version_follows_mysql_nullability():
    tv = _version([_col("id", T.LONG, pk=True), _col("n", T.LONG)])
    assert _fields(tv)["n"]["type"] == "int"


def test_added_not_null_column_is_nullable_with_default_null_and_stays_nullable():
    v1 = _version([_col("id", T.LONG, pk=True)])
    v2 = _version([_col("id", T.LONG, pk=True), _col("n", T.LONG)], previous=_prev(v1))
    assert _fields(v2)["n"]["type"] == ["null", "int"] and _fields(v2)["n"]["default"] is None
    assert _fields(v2)["id"]["type"] == "int"
    v3 = _version([_col("id", T.LONG, pk=True), _col("n", T.LONG), _col("m", T.LONG)],
                  previous=_prev(v2))
    assert _fields(v3)["n"]["type"] == ["null", "int"]


def test_a_new_reader_reads_old_data_after_an_added_column():
    v1 = _version([_col("id", T.LONG, pk=True)])
    v2 = _version([_col("id", T.LONG, pk=True), _col("n", T.LONG)], previous=_prev(v1))
    row = v1.row_name
    data = v1.value_writer.encode({"before": None, "after": (row, {"id": 3}), "op": "c", "ts_ms": 0,
                                   "source": {"server_id": 1, "file": "f", "pos": 4, "gtid": None,
                                              "db": "shop", "table": "orders", "row": 0,
                                              "txid": "f:4", "tx_row": 0, "snapshot": None}})
    got = fastavro.schemaless_reader(io.BytesIO(data[10:]), v1.value_writer.parsed,
                                     v2.value_writer.parsed)
    assert got["after"] == {"id": 3, "n": None}


def test_columns_of_one_avro_name_keep_theirs_whatever_a_ddl_adds_or_drops_before_them():
    # `a-b` and `a_b` both make the Avro name a_b: the second in the table gets a_b_. Their names
    # come from the previous version, not from where the columns stand now, so a field never
    # comes to carry another column's values (an Avro reader resolves fields by name).
    def names(tv):
        return [(f["name"], f.get("mysql.column")) for f in tv.row_schema["fields"]]
    v1 = _version([_col("id", T.LONG, pk=True), _col("a-b", T.LONG), _col("a_b", T.LONG)])
    assert names(v1) == [("id", None), ("a_b", "a-b"), ("a_b_", "a_b")]
    # ALTER TABLE ... DROP `a-b`: `a_b` keeps a_b_, whose values were its own all along.
    v2 = _version([_col("id", T.LONG, pk=True), _col("a_b", T.LONG)], previous=_prev(v1))
    assert names(v2) == [("id", None), ("a_b_", "a_b")]
    # ... MODIFY `a_b` ... FIRST: the table's order changes, the names don't.
    v3 = _version([_col("a_b", T.LONG), _col("id", T.LONG, pk=True), _col("a-b", T.LONG)],
                  previous=_prev(v1))
    assert names(v3) == [("a_b_", "a_b"), ("id", None), ("a_b", "a-b")]
    # A column new to the table takes what is free, its own name first.
    v4 = _version([_col("a b", T.LONG), _col("id", T.LONG, pk=True), _col("a_b", T.LONG)],
                  previous=_prev(v2))
    assert names(v4) == [("a_b", "a b"), ("id", None), ("a_b_", "a_b")]
    # With no previous version, the table's order decides, as before.
    assert names(_version([_col("a_b", T.LONG), _col("a-b", T.LONG)])) == [
        ("a_b", None), ("a_b_", "a-b")]


def test_changes_are_classified():
    v1 = _version([_col("id", T.LONG, pk=True), _col("a", T.LONG), _col("w", T.DATETIME2, fsp=0)],
                  nullable=("w",))
    v2 = _version([_col("id", T.LONGLONG, pk=True), _col("c", T.LONG),
                   _col("w", T.TIMESTAMP2, fsp=0)], nullable=("w",), previous=_prev(v1))
    found = {c.text: c.breaking for c in evolution.changes(_prev(v1), v2.row_schema["fields"],
                                                           v2.pk_names)}
    assert found["column c added (nullable, default null)"] is False
    assert found["column a dropped (a rename to c?: readers see a drop and an add)"] is True
    assert found["column id type int -> long (Avro promotion: new readers read old data)"] is False
    assert any(t.startswith("column w type") and b for t, b in found.items())


def test_primary_key_change_is_breaking():
    v1 = _version([_col("id", T.LONG, pk=True), _col("code", T.LONG)])
    v2 = _version([_col("id", T.LONG), _col("code", T.LONG, pk=True)], previous=_prev(v1))
    found = evolution.changes(_prev(v1), v2.row_schema["fields"], v2.pk_names)
    assert [c for c in found if c.breaking] == [
        evolution.Change("primary key (id) -> (code): message keys change", True)]


def test_dropping_a_nullable_column_is_not_breaking():
    v1 = _version([_col("id", T.LONG, pk=True), _col("x", T.LONG)], nullable=("x",))
    v2 = _version([_col("id", T.LONG, pk=True)], previous=_prev(v1))
    assert evolution.changes(_prev(v1), v2.row_schema["fields"], v2.pk_names) == [
        evolution.Change("column x dropped", False)]


def test_lineage_is_each_topics_last_value_schema():
    v1 = _version([_col("id", T.LONG, pk=True)])
    v2 = _version([_col("id", T.LONG, pk=True), _col("n", T.LONG)], previous=_prev(v1))
    records = [{"kind": "value", "topic": "ns.shop.orders", "schema": json.dumps(tv.value_schema)}
               for tv in (v1, v2)]
    records.append({"kind": "key", "topic": "ns.shop.orders", "schema": json.dumps(v1.key_schema)})
    lineage = evolution.lineage_from_records(records)
    assert set(lineage) == {"ns.shop.orders"} and set(lineage["ns.shop.orders"].fields) == {"id", "n"}
    again = _version([_col("id", T.LONG, pk=True), _col("n", T.LONG)],
                     previous=lineage["ns.shop.orders"])
    assert again.value_writer.fingerprint == v2.value_writer.fingerprint


@pytest.mark.parametrize("query, expected", [
    ("TRUNCATE TABLE t", ("cur", "t")),
    ("truncate t", ("cur", "t")),
    ("TRUNCATE TABLE `my db`.`odd``name`;", ("my db", "odd`name")),
    ("/* app */ TRUNCATE other.t2", ("other", "t2")),
    ("TRUNCATE TABLE  shop . orders ", ("shop", "orders")),
    ("DELETE FROM t", None),
    ("INSERT INTO truncate_log VALUES (1)", None),
    ("CREATE TABLE truncate_me (id INT)", None),
    # Every partition emptied: the whole table.
    ("ALTER TABLE shop.t TRUNCATE PARTITION ALL", ("shop", "t")),
    ("alter table `t` truncate partition all;", ("cur", "t")),
    ("ALTER TABLE t TRUNCATE PARTITION p0", None),
    ("ALTER TABLE t TRUNCATE PARTITION all_rows", None),
    # Comments anywhere (an application's tag after the statement: sqlcommenter, Rails' query
    # logs), as the servers log them; MariaDB's WAIT/NOWAIT.
    ("TRUNCATE TABLE t /*controller='index',framework='django'*/", ("cur", "t")),
    ("TRUNCATE /* x */ TABLE s.t -- why\n", ("s", "t")),
    ("TRUNCATE t # c", ("cur", "t")),
    ("TRUNCATE TABLE t WAIT 5", ("cur", "t")),
    ("ALTER TABLE t /* a */ TRUNCATE PARTITION ALL /*app*/", ("cur", "t")),
    ("ALTER TABLE t NOWAIT TRUNCATE PARTITION ALL", ("cur", "t")),
    ("ALTER TABLE t COMMENT 'truncate partition all'", None),
    ("TRUNCATE TABLE t, u", None),
])
def test_truncate_statements_are_recognised(query, expected):
    assert truncated_table(query, "cur") == expected


def test_confluent_framed_message_without_a_registry_is_a_clear_error():
    dec = Decoder(lambda: {})
    with pytest.raises(ValueError, match="Confluent wire format .*pass the schema registry"):
        dec.decode(b"\x00\x00\x00\x00\x07\x02")
    with pytest.raises(ValueError, match="neither Avro single-object"):
        dec.decode(b"\x05abc")


def test_a_version_a_snapshot_announced_is_the_tables_last_and_the_previous_of_its_next():
    # A table read only by a snapshot in this run: its version is what a TRUNCATE is published
    # with, and the next version (c made NOT NULL) keeps c nullable, as after a table map.
    from streamer.schema.versions import TableCatalog, TableFilter

    catalog = TableCatalog("ns", TableFilter(["shop.*"], []))
    cols = [_col("id", T.LONG, pk=True), _col("c", T.LONG)]
    snap = catalog.snapshot_version(_event(cols, nullable=("c",)))
    assert catalog.last_version("shop", "orders") is None  # nothing announced yet
    assert catalog.make_current(snap) and not catalog.make_current(snap)
    assert catalog.last_version("shop", "orders") is snap
    table = SimpleNamespace()
    event = _event([_col("id", T.LONG, pk=True), _col("c", T.LONG)])
    event.get_table = lambda: table
    binlog = catalog.on_table_map(event)
    assert binlog is not snap and _fields(binlog)["c"]["type"] == ["null", "int"]
    assert catalog.last_version("shop", "orders") is binlog
