"""The message formats (config format) on one table of every type: the values, keys and schemas
they write, against what each format's readers expect."""
import base64
import datetime
import decimal
import io
import json
from types import SimpleNamespace

import fastavro
import pytest
from pymysqlreplication.constants import FIELD_TYPE as T

from streamer import config
from streamer.codec import avro, formats
from streamer.codec.decode import Decoder, to_jsonable
from streamer.schema.versions import TableVersion
from streamer.source.vectors import VECTOR


def _col(name, type_code, pk=False, **extra):
    base = dict(name=name, type=type_code, unsigned=False, is_primary=pk,
                character_set_name=None, enum_values=None, set_values=None, max_length=0,
                precision=0, decimals=0, fsp=0, bits=0, bytes=0, size=1)
    base.update(extra)
    return SimpleNamespace(**base)


COLUMNS = [
    _col("id", T.LONG, pk=True),
    _col("ti", T.TINY), _col("tu", T.TINY, unsigned=True), _col("sm", T.SHORT),
    _col("iu", T.LONG, unsigned=True), _col("bi", T.LONGLONG),
    _col("bu", T.LONGLONG, unsigned=True),
    _col("fl", T.FLOAT), _col("db", T.DOUBLE),
    _col("de", T.NEWDECIMAL, precision=10, decimals=2),
    _col("dw", T.NEWDECIMAL, precision=65, decimals=30),  # beyond the default context's 28
    _col("vc", T.VARCHAR, character_set_name="utf8mb4"),
    _col("vb", T.VARCHAR),  # VARBINARY
    _col("js", T.JSON),
    _col("dt", T.DATE), _col("d3", T.DATETIME2, fsp=3), _col("d6", T.DATETIME2, fsp=6),
    _col("ts", T.TIMESTAMP2, fsp=2), _col("tm", T.TIME2, fsp=6), _col("yr", T.YEAR),
    _col("en", T.ENUM, enum_values=["a", "b"]), _col("st", T.SET, set_values=["x", "y"]),
    _col("b1", T.BIT, bits=1, bytes=1), _col("b9", T.BIT, bits=9, bytes=2),
    _col("ve", VECTOR, length_size=4, dimensions=2),  # MySQL 9's VECTOR(2) (source.vectors)
]
ROW = {"id": 7, "ti": -5, "tu": 200, "sm": -300, "iu": 4000000000, "bi": -9000000000,
       "bu": 18446744073709551615, "fl": 1.5, "db": 2.25, "de": decimal.Decimal("-12.50"),
       "dw": decimal.Decimal("-" + "9" * 35 + "." + "9" * 30),
       "vc": "héllo", "vb": b"\x00\xff", "js": '{"a": 1}', "dt": datetime.date(2024, 2, 29),
       "d3": datetime.datetime(2024, 2, 29, 12, 0, 1, 123000),
       "d6": datetime.datetime(1969, 12, 31, 23, 59, 59, 999999),
       "ts": datetime.datetime(2024, 1, 1, 0, 0, 0, 120000),
       "tm": datetime.timedelta(hours=-838, minutes=-59, seconds=-59),
       "yr": 2024, "en": "b", "st": "x,y", "b1": "1", "b9": "100000001",
       "ve": b"\x00\x00\x80\x3f\x00\x00\x00\xbf"}


def _version(fmt_cfg=None, namespace="ns"):
    event = SimpleNamespace(schema="shop", table="t", columns=COLUMNS, table_id=1,
                            null_bitmask=bytes(((len(COLUMNS) + 7) // 8) * [0xFE]))
    cfg = config.validate(config._merge(config.DEFAULTS, dict(
        {"mysql": {"server_id": 9}, "namespace": namespace}, **(fmt_cfg or {}))))
    return TableVersion(namespace, event, rules=None, fmt=formats.make(cfg))


def _encode(tv, op=avro.OP_BYTES["c"]):
    values = dict(ROW)
    tv.convert(values)
    mid, txid = tv.envelope.event_parts(1700000000123, 1, "mysql-bin.000003", 1234, "0-1-9",
                                        "shop", "t", "mysql-bin.000003:1000")
    return tv.envelope.encode(None, values, op, mid, 2, txid, 5), tv.key(dict(values))


def test_format_json_reads_as_streamer_tail_reads_the_avro_message():
    avro_tv = _version()
    value, key = _encode(avro_tv)
    decoder = Decoder(lambda: {avro_tv.value_writer.fingerprint.hex(): avro_tv.value_schema,
                               avro_tv.key_writer.fingerprint.hex(): avro_tv.key_schema})
    tailed = to_jsonable(decoder.decode(value))
    json_value, json_key = _encode(_version({"format": "json"}))
    assert json.loads(json_value) == json.loads(json.dumps(tailed))
    assert json.loads(json_key) == to_jsonable(decoder.decode(key)) == {"id": 7}


def test_debezium_json_is_connects_json_with_debeziums_types():
    value, key = _encode(_version({"format": "debezium"}))
    doc = json.loads(value)
    schema, payload = doc["schema"], doc["payload"]
    assert schema["name"] == "ns.shop.t.Envelope"
    assert [f["field"] for f in schema["fields"]] == ["before", "after", "source", "transaction",
                                                       "op", "ts_ms", "ts_us", "ts_ns"]
    row = {f["field"]: f for f in schema["fields"][1]["fields"]}
    assert schema["fields"][1]["name"] == "ns.shop.t.Value"
    assert (row["ti"]["type"], row["tu"]["type"], row["sm"]["type"]) == ("int8", "int16", "int16")
    assert (row["iu"]["type"], row["bi"]["type"]) == ("int64", "int64")
    assert row["bu"]["name"] == "org.apache.kafka.connect.data.Decimal"
    assert row["de"]["parameters"] == {"scale": "2", "connect.decimal.precision": "10"}
    assert (row["fl"]["type"], row["db"]["type"]) == ("float", "double")  # FLOAT32, FLOAT64
    assert row["dt"]["name"] == "io.debezium.time.Date"
    assert row["d3"]["name"] == "io.debezium.time.Timestamp"
    assert row["d6"]["name"] == "io.debezium.time.MicroTimestamp"
    assert row["ts"]["name"] == "io.debezium.time.ZonedTimestamp"
    assert row["tm"]["name"] == "io.debezium.time.MicroTime"
    assert row["yr"]["name"] == "io.debezium.time.Year"
    assert row["en"]["parameters"] == {"allowed": "a,b"} and row["js"]["name"] == "io.debezium.data.Json"
    assert row["st"]["name"] == "io.debezium.data.EnumSet" and row["b1"]["type"] == "boolean"
    assert row["b9"]["parameters"] == {"length": "9"}
    assert row["id"]["optional"] is False and row["vc"]["optional"] is True
    assert row["ve"] == {"type": "array", "items": {"type": "float", "optional": False},
                         "name": "io.debezium.data.FloatVector", "version": 1,
                         "optional": False, "field": "ve"}  # (the 25th column: NOT NULL here)
    after = payload["after"]
    assert after["ve"] == [1.0, -0.5]

    def unscaled(text):
        return int.from_bytes(base64.b64decode(text), "big", signed=True)
    assert unscaled(after["de"]) == -1250 and unscaled(after["bu"]) == 18446744073709551615
    assert unscaled(after["dw"]) == -int("9" * 65)
    assert after["dt"] == (datetime.date(2024, 2, 29) - datetime.date(1970, 1, 1)).days
    assert after["d3"] == 1709208001123  # ms
    assert after["d6"] == -1  # µs
    assert after["ts"] == "2024-01-01T00:00:00.12Z"
    assert after["tm"] == -(838 * 3600 + 59 * 60 + 59) * 1000000
    assert after["b1"] is True and base64.b64decode(after["b9"]) == b"\x01\x01"
    assert base64.b64decode(after["vb"]) == b"\x00\xff" and after["vc"] == "héllo"
    assert (after["en"], after["st"], after["yr"]) == ("b", "x,y", 2024)
    source = payload["source"]
    assert (source["connector"], source["name"], source["db"], source["table"]) == \
        ("mysql", "ns", "shop", "t")
    assert (source["file"], source["pos"], source["row"], source["gtid"]) == \
        ("mysql-bin.000003", 1234, 2, "0-1-9")
    assert source["ts_ms"] == 1700000000123 and source["snapshot"] == "false"
    assert payload["op"] == "c" and payload["before"] is None
    assert payload["ts_us"] // 1000 == payload["ts_ms"]
    assert json.loads(key) == {"schema": {"type": "struct", "optional": False,
                                          "name": "ns.shop.t.Key",
                                          "fields": [{"type": "int32", "optional": False,
                                                      "field": "id"}]},
                               "payload": {"id": 7}}


def test_debezium_json_without_schemas_and_the_optional_modes():
    value, key = _encode(_version({"format": "debezium", "debezium": {
        "schemas_enable": False, "decimal_handling_mode": "string",
        "time_precision_mode": "connect"}}))
    doc = json.loads(value)
    assert "schema" not in doc and json.loads(key) == {"id": 7}
    assert doc["after"]["de"] == "-12.50" and doc["after"]["d6"] == -1  # ms, rounded down
    assert doc["after"]["tm"] == -(838 * 3600 + 59 * 60 + 59) * 1000


def test_debezium_avro_is_what_connects_avro_converter_reads():
    tv = _version({"format": "debezium", "debezium": {"encoding": "avro"},
                   "schema_registry": {"url": "http://registry:8081"}})
    value, key = _encode(tv)
    assert tv.wire_value is tv.envelope.value_writer and tv.wire_key is tv.envelope.key_writer
    schema = tv.wire_value.schema
    assert schema["name"] == "Envelope" and schema["namespace"] == "ns.shop.t"
    after = fastavro.schemaless_reader(io.BytesIO(value[len(tv.wire_value.header):]),
                                       fastavro.parse_schema(schema))["after"]
    assert after["de"] == decimal.Decimal("-12.50") and after["id"] == 7
    assert after["dw"].as_tuple() == ROW["dw"].as_tuple()
    assert after["ts"] == "2024-01-01T00:00:00.12Z" and after["b1"] is True
    fields = {f["name"]: f["type"] for f in schema["fields"][0]["type"][1]["fields"]}
    assert fields["ti"] == ["null", {"type": "int", "connect.type": "int8"}]
    assert fields["dt"][1]["connect.name"] == "io.debezium.time.Date"
    # AvroData: an array's Connect name and version as properties, its items as they are.
    assert fields["ve"] == {"type": "array", "items": "float", "connect.version": 1,
                            "connect.name": "io.debezium.data.FloatVector"}
    assert after["ve"] == [1.0, -0.5]
    assert fastavro.schemaless_reader(io.BytesIO(key[len(tv.wire_key.header):]),
                                      fastavro.parse_schema(tv.wire_key.schema)) == {"id": 7}


def test_debezium_avro_without_a_registry_is_refused():
    with pytest.raises(config.ConfigError, match="schema_registry.url"):
        _version({"format": "debezium", "debezium": {"encoding": "avro"}})
    with pytest.raises(config.ConfigError, match="format"):
        _version({"format": "protobuf"})


@pytest.mark.parametrize("fmt", [{"format": "json"}, {"format": "debezium"}])
def test_a_truncate_and_a_snapshot_row_in_each_format(fmt):
    tv = _version(fmt)
    truncated = json.loads(tv.truncate_value(1700000000000, 1, "f", 4, None, "shop", "t",
                                             "f:4", 3))
    payload = truncated.get("payload", truncated)
    assert payload["op"] == "t" and payload["before"] is None and payload["after"] is None
    values = dict(ROW)
    tv.convert(values)
    mid, txid = tv.envelope.event_parts(1, 1, "f", 4, None, "shop", "t", "f:4")
    read = json.loads(tv.envelope.encode_read(values, mid, 0, txid, avro.SNAPSHOT_BYTES["last"]))
    payload = read.get("payload", read)
    assert payload["op"] == "r" and payload["source"]["snapshot"] == "last"


def _keyless(rules=None, template=None):
    cols = [_col("a", T.LONG), _col("b", T.VARCHAR, character_set_name="utf8mb4"),
            _col("c", T.LONG)]
    event = SimpleNamespace(schema="shop", table="log", columns=cols, table_id=2,
                            null_bitmask=b"\x06")
    kwargs = {} if template is None else {"topic_template": template}
    return TableVersion("ns", event, rules=rules, **kwargs)


def test_key_columns_key_a_table_without_a_primary_key_and_name_only_published_columns():
    from streamer.schema.masking import ColumnRules
    assert _keyless().key_writer is None and _keyless().key({"a": 1}) is None
    tv = _keyless(ColumnRules([], {}, None, {"shop.log": ["b", "a"]}))
    assert tv.pk_names == ["b", "a"] and tv.key_schema["fields"][0]["name"] == "b"
    decoded = fastavro.schemaless_reader(io.BytesIO(tv.key({"a": 1, "b": "x", "c": 3})[10:]),
                                         fastavro.parse_schema(tv.key_schema))
    assert decoded == {"b": "x", "a": 1}
    with pytest.raises(config.ConfigError, match="names nope for shop.log, which publishes only a, b, c"):
        _keyless(ColumnRules([], {}, None, {"shop.log": ["nope"]}))
    with pytest.raises(config.ConfigError, match="tables.key_columns"):
        config.validate(config._merge(config.DEFAULTS, {"mysql": {"server_id": 9},
                                                        "tables": {"key_columns": {"log": ["a"]}}}))


def test_topics_name_is_a_template_checked_for_db_and_table():
    assert _keyless(template="cdc-{db}-{table}").topic == "cdc-shop-log"
    assert _keyless().topic == "ns.shop.log"
    for bad in ("{namespace}.{table}", "x/{db}.{table}"):
        with pytest.raises(config.ConfigError, match="topics.name"):
            config.validate(config._merge(config.DEFAULTS, {"mysql": {"server_id": 9},
                                                            "topics": {"name": bad}}))


def test_debezium_transaction_records_are_keyed_by_id_with_counts_per_table():
    from streamer.codec.debezium import DebeziumFormat, TransactionRecords
    cfg = config.validate(config._merge(config.DEFAULTS, {"mysql": {"server_id": 9},
                                                          "format": "debezium"}))
    records = TransactionRecords(DebeziumFormat("ns", cfg.debezium),
                                 lambda topic: topic.split(".", 1)[1])
    assert records.topic == "ns.transaction" and records.writer is None
    tx = {"id": "f:4", "gtid": "0-1-9", "ts_ms": 5, "counts": {"ns.shop.a": 2, "ns.shop.b": 1}}
    key, begin = records.begin(tx)
    assert json.loads(key)["payload"] == {"id": "f:4"}
    assert json.loads(begin)["payload"] == {"status": "BEGIN", "id": "f:4", "event_count": None,
                                            "data_collections": None, "ts_ms": 5}
    _, end = records.end(tx, 9)
    doc = json.loads(end)
    assert doc["schema"]["name"] == "io.debezium.connector.common.TransactionMetadataValue"
    assert doc["payload"]["event_count"] == 3 and doc["payload"]["ts_ms"] == 9
    assert doc["payload"]["data_collections"] == [
        {"data_collection": "shop.a", "event_count": 2},
        {"data_collection": "shop.b", "event_count": 1}]


@pytest.mark.parametrize("gtid,blocks", [(None, False), ("0-1-9", False), ("0-1-9", True)])
def test_debezium_avro_from_parts_is_the_whole_envelope_encoded(monkeypatch, gtid, blocks):
    # AvroEvents writes an event's fixed parts once and each row's structs into them; the bytes
    # must be those of the envelope's writer on the whole record, for every op and snapshot flag,
    # with the changes' transaction block (transaction metadata on) and without.
    from streamer.codec import debezium
    monkeypatch.setattr(debezium.time, "time_ns", lambda: 1700000000123456789)
    tv = _version({"format": "debezium", "debezium": {"encoding": "avro"},
                   "schema_registry": {"url": "http://registry:8081"}})
    enc = tv.envelope
    assert isinstance(enc, debezium.AvroEvents)
    if blocks:
        enc.fmt.orders = debezium.TxOrder()
    counted = [0]
    values = dict(ROW)
    tv.convert(values)
    other = dict(values, vc="autre", de=decimal.Decimal("0.01"), js=None)
    args = (1700000000123, 4294967295, "mysql-bin.000003", 1234, gtid, "shop", "t", "f:1")
    parts, _ = enc.event_parts(*args)
    whole, _ = debezium.EventEncoder.event_parts(enc, *args)

    def want(before, after, op, row, snapshot="false"):
        block = None
        if blocks and op != "r":  # a snapshot's rows are in no transaction
            counted[0] += 1
            block = {"id": "f:1", "total_order": counted[0], "data_collection_order": counted[0]}
        return enc.value_writer.encode(enc.envelope_value(
            None if before is None else enc.row(before), None if after is None else enc.row(after),
            op, whole, row, snapshot, block))
    for op, before, after in (("c", None, values), ("u", values, other), ("d", other, None)):
        got = enc.encode(before, after, avro.OP_BYTES[op], parts, 3, "f:1", 9)
        assert got == want(before, after, op, 3), op
    for flag in ("true", "last"):
        got = enc.encode_read(values, parts, 70000, "f:1", avro.SNAPSHOT_BYTES[flag])
        assert got == want(None, values, "r", 70000, flag), flag
    assert enc.truncate_value(*args, 0) == want(None, None, "t", 0)
    enc.value_writer.header = b"\x00\x00\x00\x00\x07"  # a registry's frame, once registered
    assert enc.encode(None, values, avro.OP_BYTES["c"], parts, 0, "f:1", 0)[:5] == \
        b"\x00\x00\x00\x00\x07"


def test_message_headers_name_the_registry_id_or_the_fingerprint_and_none_for_json():
    from streamer.engine.announce import message_headers, schema_id
    assert schema_id(b"\x00\x00\x00\x01\x02") == "258"  # Confluent: magic 0, big-endian id
    assert schema_id(avro.MAGIC + bytes.fromhex("0102030405060708")) == "0102030405060708"
    with pytest.raises(ValueError, match="neither"):
        schema_id(b"\x07junk")
    tv = _version({"format": "debezium", "debezium": {"encoding": "avro"},
                   "schema_registry": {"url": "http://registry:8081"}})
    tv.wire_value.header = b"\x00\x00\x00\x00\x2a"  # as the registry frames it
    headers = message_headers(tv.db, tv.table, tv.wire_value)
    assert headers["u"] == (("op", b"u"), ("db", b"shop"), ("table", b"t"), ("schema_id", b"42"))
    json_tv = _version({"format": "json"})
    assert json_tv.wire_value is None
    assert message_headers("shop", "t", json_tv.wire_value)["r"] == (
        ("op", b"r"), ("db", b"shop"), ("table", b"t"))


def test_debezium_heartbeats_are_connects_serverkey_and_heartbeat_structs():
    from streamer.codec import debezium
    cfg = {"format": "debezium", "debezium": {"encoding": "avro", "heartbeat_interval_ms": 1000},
           "schema_registry": {"url": "http://registry:8081"}}
    tv = _version(cfg)
    full = config.validate(config._merge(config.DEFAULTS, dict(
        cfg, mysql={"server_id": 9}, namespace="ns")))
    beats = formats.heartbeat_records(full, tv.envelope.fmt)
    assert isinstance(beats, debezium.HeartbeatRecords) and beats.topic == "__debezium-heartbeat.ns"
    key, value = beats.encode(1700000000123)
    assert beats.writer.schema["connect.name"] == "io.debezium.connector.common.Heartbeat"
    assert beats.key_writer.schema["connect.name"] == "io.debezium.connector.common.ServerNameKey"

    def read(writer, data):
        return fastavro.schemaless_reader(io.BytesIO(data[len(writer.header):]),
                                          fastavro.parse_schema(writer.schema))
    assert read(beats.writer, value) == {"ts_ms": 1700000000123}
    assert read(beats.key_writer, key) == {"serverName": "ns"}
    json_beats = debezium.HeartbeatRecords(_version({"format": "debezium"}).envelope.fmt, "hb")
    key, value = json_beats.encode(5)
    assert json.loads(value) == {"schema": json_beats.value_schema, "payload": {"ts_ms": 5}}
    assert json_beats.topic == "hb.ns" and json.loads(key)["payload"] == {"serverName": "ns"}


def test_debezium_avro_transaction_records_read_back_with_their_collections():
    # Their END holds an array of structs: Connect's AvroData writes it as an Avro array of the
    # optional struct (found by starting a streamer with topics.transactions on, which failed).
    from streamer.codec import debezium
    tv = _version({"format": "debezium", "debezium": {"encoding": "avro"},
                   "schema_registry": {"url": "http://registry:8081"}})
    records = debezium.TransactionRecords(tv.envelope.fmt, lambda topic: "shop.t")
    items = records.writer.schema["fields"][3]["type"][1]["items"]
    assert items[0] == "null" and items[1]["connect.name"] == "event.collection"
    key, value = records.end({"id": "f:4", "counts": {"ns.shop.t": 3}}, 1700000000000)
    read = fastavro.schemaless_reader(io.BytesIO(value[len(records.writer.header):]),
                                      fastavro.parse_schema(records.writer.schema))
    assert read == {"status": "END", "id": "f:4", "event_count": 3, "ts_ms": 1700000000000,
                    "data_collections": [{"data_collection": "shop.t", "event_count": 3}]}


def test_debezium_avro_events_of_one_row_are_written_by_the_encoders_second_compile(monkeypatch):
    # The one-row path publishes with the encoder's copy, its Value struct's and key's writers
    # compiled again (JIT-compiled on their own under PyPy, encode.compiled_apart): byte for
    # byte what the version's own write, before and after a registry frames them.
    from streamer.codec import debezium
    from streamer.schema.versions import OneRowFormatVersion
    monkeypatch.setattr(debezium.time, "time_ns", lambda: 1700000000123456789)
    tv = _version({"format": "debezium", "debezium": {"encoding": "avro"},
                   "schema_registry": {"url": "http://registry:8081"}})
    twin = tv.one_row()
    assert isinstance(twin, OneRowFormatVersion) and tv.one_row() is twin  # made once
    assert twin.envelope is not tv.envelope and twin.envelope._row is not tv.envelope._row
    assert twin.envelope._encode_key != tv.envelope._encode_key
    assert twin.topic == tv.topic and twin.convert == tv.convert

    def written(version):
        values = dict(ROW)
        version.convert(values)
        other = dict(values, id=8, vc="autre")
        enc = version.envelope
        parts, txid = enc.event_parts(1700000000123, 1, "mysql-bin.000003", 1234, "0-1-9",
                                      "shop", "t", "f:1")
        return [enc.encode(None, values, avro.OP_BYTES["c"], parts, 0, txid, 0),
                enc.encode(values, other, avro.OP_BYTES["u"], parts, 1, txid, 1),
                enc.encode(other, None, avro.OP_BYTES["d"], parts, 2, txid, 2),
                enc.encode_read(values, parts, 3, txid, avro.SNAPSHOT_BYTES["true"]),
                version.key(dict(values)), version.key(dict(other))]
    expected = written(tv)
    assert written(twin) == expected
    # A registry frames the version's writers after the copy was made: the copy follows.
    tv.wire_value.header = avro.confluent_header(7)
    tv.wire_key.header = avro.confluent_header(8)
    framed = written(twin)
    assert framed == written(tv) != expected
    assert [m[:5] for m in framed] == [avro.confluent_header(7)] * 4 + [avro.confluent_header(8)] * 2


def test_debezium_json_events_of_one_row_share_the_versions_encoder():
    tv = _version({"format": "debezium"})
    assert not tv.envelope.compiles_apart and tv.one_row() is tv  # no generated writers to copy
