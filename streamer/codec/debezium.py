"""``format: debezium``: change events as Debezium's MySQL connector writes them, in JSON as
Connect's JsonConverter writes it, or in Avro as Connect's AvroConverter writes it (Confluent wire
format, through ``schema_registry``).

The value is Debezium's envelope: ``before`` and ``after`` (the table's ``Value`` struct),
``source`` (``io.debezium.connector.mysql.Source``: version, connector, name, ts_ms, snapshot, db,
sequence, ts_us, ts_ns, table, server_id, gtid, file, pos, row, thread, query), ``op`` (c, u, d,
r, t), the processing time as ``ts_ms``/``ts_us``/``ts_ns``, and ``transaction``: with transaction
metadata on (``topics.transactions``), the change's id and order within its source transaction
(``TxOrder``), else null. The key is the
table's ``Key`` struct of its primary key columns. Names follow Debezium's:
``{namespace}.{db}.{table}.Value``/``.Key``/``.Envelope``; the topic is the streamer's, which is
Debezium's ``{topic.prefix}.{db}.{table}`` with the namespace as the prefix. Column types map as
``codec.connect`` says. docs/debezium.md lists what matches and what differs.

An ``EventEncoder`` is made per table version (``DebeziumFormat.attach``) and has the interface of
``codec.avro.EnvelopeWriter``: the parts of an event encoded once, then a row at a time.
"""
from __future__ import annotations

import base64
import copy
import json
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from streamer import __version__
from streamer.codec import avro
from streamer.codec.encode import write_long, write_string
from streamer.codec.jsonformat import rendered
from streamer.codec.connect import (DECIMAL, Field, Options, fields_of, schema, struct, to_avro,
                                    unscaled_bytes)

VERSION = f"streamer-{__version__}"
SNAPSHOT_VALUES = ("true", "first", "first_in_data_collection", "last_in_data_collection",
                   "last", "false", "incremental")
OPS = {avro.OP_BYTES[op]: op for op in ("c", "u", "d", "t", "r")}
SNAPSHOT_FLAGS = {avro.SNAPSHOT_BYTES["true"]: "true", avro.SNAPSHOT_BYTES["last"]: "last"}


def source_schema(connector: str) -> Dict[str, Any]:
    def f(name: str, ctype: str, optional: bool, **extra: Any) -> Dict[str, Any]:
        return dict(schema(ctype, **extra), field=name, optional=optional)
    snapshot = dict(schema("string", "io.debezium.data.Enum",
                           {"allowed": ",".join(SNAPSHOT_VALUES)}, 1),
                    field="snapshot", optional=True, default="false")
    return {"type": "struct", "name": f"io.debezium.connector.{connector}.Source",
            "optional": False, "fields": [
                f("version", "string", False), f("connector", "string", False),
                f("name", "string", False), f("ts_ms", "int64", False), snapshot,
                f("db", "string", False), f("sequence", "string", True),
                f("ts_us", "int64", True), f("ts_ns", "int64", True),
                f("table", "string", True), f("server_id", "int64", False),
                f("gtid", "string", True), f("file", "string", False), f("pos", "int64", False),
                f("row", "int32", False), f("thread", "int64", True),
                f("query", "string", True)]}


TRANSACTION_BLOCK = {"type": "struct", "name": "event.block", "version": 1, "optional": True,
                     "fields": [dict(schema("string"), field="id", optional=False),
                                dict(schema("int64"), field="total_order", optional=False),
                                dict(schema("int64"), field="data_collection_order",
                                     optional=False)]}


def envelope_schema(space: str, value: Dict[str, Any], connector: str) -> Dict[str, Any]:
    def opt_long(name: str) -> Dict[str, Any]:
        return {"type": "int64", "optional": True, "field": name}
    return {"type": "struct", "name": f"{space}.Envelope", "version": 2, "optional": False,
            "fields": [dict(value, field="before"), dict(value, field="after"),
                       dict(source_schema(connector), field="source"),
                       dict(TRANSACTION_BLOCK, field="transaction"),
                       {"type": "string", "optional": False, "field": "op"},
                       opt_long("ts_ms"), opt_long("ts_us"), opt_long("ts_ns")]}


def _json_value(field: Field) -> Optional[Callable[[Any], Any]]:
    """Field value -> what JsonConverter writes: bytes (Decimal's included) as base64."""
    adapt = field.adapt
    if field.schema.get("name") == DECIMAL:
        scaled = adapt
        return lambda v: base64.b64encode(unscaled_bytes(scaled(v))).decode("ascii")  # type: ignore[misc]
    if field.schema["type"] == "bytes":
        if adapt is None:
            return lambda v: base64.b64encode(v).decode("ascii")
        return lambda v: base64.b64encode(adapt(v)).decode("ascii")
    if field.schema["type"] == "struct":  # geometry
        def geometry(v: Any) -> Any:
            g = adapt(v)  # type: ignore[misc]
            return {"wkb": base64.b64encode(g["wkb"]).decode("ascii"), "srid": g["srid"]}
        return geometry
    return adapt


class TxOrder:
    """Debezium's ``transaction`` block: each change event's order within its source transaction,
    in all (``total_order``) and within its table (``data_collection_order``), from 1. Tombstones
    are no change events and a snapshot's rows belong to no transaction: neither counts. The
    counts of the open transaction ride in the checkpoint (``state``/``restore``, through
    engine.txmeta), so a restart inside it goes on counting where the published changes stopped.
    """

    __slots__ = ("id", "total", "by_collection")

    def __init__(self) -> None:
        self.id: Optional[str] = None
        self.total = 0
        self.by_collection: Dict[str, int] = {}

    def next(self, txid: str, collection: str) -> Tuple[int, int]:
        """The next change event of transaction ``txid`` in table ``collection``: its orders."""
        if txid != self.id:
            self.id, self.total, self.by_collection = txid, 0, {}
        self.total += 1
        n = self.by_collection.get(collection, 0) + 1
        self.by_collection[collection] = n
        return self.total, n

    def counts(self, txid: str) -> Optional[Tuple[int, Dict[str, int]]]:
        """Transaction ``txid``'s change events so far, in all and by table (None: none)."""
        return (self.total, dict(self.by_collection)) if txid == self.id else None

    def state(self) -> Dict[str, Any]:
        return {"total": self.total, "by_collection": dict(self.by_collection)}

    def restore(self, txid: Optional[str], state: Optional[Dict[str, Any]]) -> None:
        """Go on from a checkpoint inside transaction ``txid`` (None: between transactions)."""
        self.id = txid if state is not None else None
        self.total = int(state["total"]) if state is not None else 0
        self.by_collection = dict(state["by_collection"]) if state is not None else {}


class Row:
    """A row dict from the streamer's converters -> Debezium's Value struct."""

    __slots__ = ("plan",)

    def __init__(self, fields: List[Field], json_mode: bool) -> None:
        self.plan = [(f.name, _json_value(f) if json_mode else f.adapt) for f in fields]

    def __call__(self, values: Dict[str, Any]) -> Dict[str, Any]:
        return rendered(self.plan, values)


class DebeziumFormat:
    """``format: debezium`` for a namespace: attaches an EventEncoder to each table version."""

    def __init__(self, namespace: str, opts: Any) -> None:
        self.namespace = namespace
        self.encoding = opts.encoding
        self.schemas_enable = opts.schemas_enable
        self.connector = opts.connector
        self.options = Options(opts.decimal_handling_mode, opts.time_precision_mode)
        self.source_schema = source_schema(self.connector)
        # The changes' transaction block, with transaction metadata on (TransactionRecords).
        self.orders: Optional[TxOrder] = None

    def attach(self, tv: Any) -> None:
        """Replace the table version's envelope, key and wire writers by Debezium's."""
        space = f"{self.namespace}.{avro.avro_name(tv.db)}.{avro.avro_name(tv.table)}"
        fields = fields_of(tv.columns_info, self.options)
        key_fields = [f for f in fields if f.name in tv.pk_names]
        value = struct(f"{space}.Value", fields, True)
        enc = self.events(space, value, fields, key_fields)
        tv.envelope = enc
        tv.key = enc.key
        tv.truncate_value = enc.truncate_value
        tv.wire_value, tv.wire_key = enc.value_writer, enc.key_writer

    def events(self, space: str, value: Dict[str, Any], fields: List[Field],
               key_fields: List[Field]) -> "EventEncoder":
        kind = EventEncoder if self.encoding == "json" else AvroEvents
        return kind(self, space, value, fields, key_fields)

    def attach_topic(self, found: Any) -> None:
        """A table known only by its topic's last schema in the schema topic (to publish a
        TRUNCATE of it): its Value struct made from that schema's columns."""
        space = f"{self.namespace}.{avro.avro_name(found.db)}.{avro.avro_name(found.table)}"
        row = found.value_schema["fields"][0]["type"][1]
        columns = [(f["name"], f.get("mysql.type", "text"), isinstance(f["type"], list),
                    _Described(f)) for f in row["fields"]]
        fields = fields_of(columns, self.options)
        enc = self.events(space, struct(f"{space}.Value", fields, True), fields, [])
        found.truncate_value = enc.truncate_value
        found.wire_value, found.wire_key = enc.value_writer, None


class _Described:
    """What a column's Connect schema needs, read back from the streamer's Avro field."""

    def __init__(self, field: Dict[str, Any]) -> None:
        atype = field["type"][1] if isinstance(field["type"], list) else field["type"]
        logical = atype if isinstance(atype, dict) else {}
        self.type = None
        self.unsigned = field.get("mysql.type") in ("int unsigned", "bigint unsigned")
        self.precision = logical.get("precision", 65)
        self.decimals = logical.get("scale", 0)
        self.fsp = 6
        self.enum_values = self.set_values = ()
        self.bits = 64
        self.bytes = 8


class EventEncoder:
    """One table version's Debezium events (the interface of codec.avro.EnvelopeWriter), as
    JsonConverter writes them; ``AvroEvents`` below for Avro. An event's parts are its source
    struct and the processing time, the same for all its rows."""

    # Whether ``apart()`` makes the one-row path's copy of this encoder, its generated writers
    # compiled again (schema.versions.OneRowFormatVersion): JSON has none to compile, and both
    # paths share one encoder.
    compiles_apart = False

    def __init__(self, fmt: DebeziumFormat, space: str, value: Dict[str, Any],
                 fields: List[Field], key_fields: List[Field]) -> None:
        self.fmt = fmt
        self.json = fmt.encoding == "json"
        self.fields = fields
        self.row = Row(fields, self.json)
        self.key_row = Row(key_fields, self.json) if key_fields else None
        self.value = value
        self.envelope = envelope_schema(space, value, fmt.connector)
        self.key_schema = (struct(f"{space}.Key", key_fields, False)
                           if key_fields else None)
        self.value_writer: Optional[avro.Writer] = None
        self.key_writer: Optional[avro.Writer] = None
        if self.json:
            self._prefix = ('{"schema":' + json.dumps(self.envelope, separators=(",", ":")) +
                            ',"payload":') if fmt.schemas_enable else ""
            self._key_prefix = ('{"schema":' + json.dumps(self.key_schema, separators=(",", ":"))
                                + ',"payload":') if fmt.schemas_enable and key_fields else ""
            self._suffix = "}" if fmt.schemas_enable else ""

    # -- the parts of an event ------------------------------------------------------------------
    def event_parts(self, ts_ms: int, server_id: int, file: str, pos: int, gtid: Optional[str],
                    db: str, table: str, txid: str) -> Tuple[Any, Any]:
        now_ns = time.time_ns()
        source = {"version": VERSION, "connector": self.fmt.connector,
                  "name": self.fmt.namespace, "ts_ms": ts_ms, "snapshot": "false", "db": db,
                  "sequence": None, "ts_us": ts_ms * 1000, "ts_ns": ts_ms * 1000000,
                  "table": table, "server_id": server_id, "gtid": gtid, "file": file,
                  "pos": pos, "row": 0, "thread": None, "query": None}
        return (source, now_ns), txid

    def envelope_value(self, before: Any, after: Any, op: str, parts: Any, row: int,
                       snapshot: str = "false", transaction: Any = None) -> Dict[str, Any]:
        """The whole envelope as a dict: ``before``/``after`` as ``row`` made them."""
        source, now_ns = parts
        source = dict(source, row=row, snapshot=snapshot)
        return {"before": before, "after": after, "source": source, "transaction": transaction,
                "op": op, "ts_ms": now_ns // 1000000, "ts_us": now_ns // 1000, "ts_ns": now_ns}

    def _value(self, before: Any, after: Any, op: str, parts: Any, row: int,
               snapshot: str = "false", txid: Optional[str] = None) -> bytes:
        block = None
        orders = self.fmt.orders
        if txid is not None and orders is not None:
            source = parts[0]
            total, in_table = orders.next(txid, f"{source['db']}.{source['table']}")
            block = {"id": txid, "total_order": total, "data_collection_order": in_table}
        value = self.envelope_value(before, after, op, parts, row, snapshot, block)
        return (self._prefix + json.dumps(value, separators=(",", ":"), ensure_ascii=False)
                + self._suffix).encode("utf-8")

    def encode(self, before: Any, after: Any, op: bytes, mid: Any, row: int, txid: Any,
               tx_row: int) -> bytes:
        return self._value(None if before is None else self.row(before),
                           None if after is None else self.row(after), OPS[op], mid, row,
                           txid=txid)

    def encode_read(self, after: Any, mid: Any, row: int, txid: Any, snapshot: bytes) -> bytes:
        return self._value(None, self.row(after), "r", mid, row, SNAPSHOT_FLAGS[snapshot])

    def truncate_value(self, ts_ms: int, server_id: int, file: str, pos: int,
                       gtid: Optional[str], db: str, table: str, txid: str,
                       tx_row: int) -> bytes:
        parts, _ = self.event_parts(ts_ms, server_id, file, pos, gtid, db, table, txid)
        return self._value(None, None, "t", parts, 0, txid=txid)

    def key(self, values: Dict[str, Any]) -> Optional[bytes]:
        if self.key_row is None:
            return None
        payload = self.key_row(values)
        return (self._key_prefix + json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
                + self._suffix).encode("utf-8")


def _avro_string(text: str) -> bytes:
    out = bytearray()
    write_string(out, text)
    return bytes(out)


# source.snapshot, an optional string: the union's string branch, then the string.
_SNAPSHOT_AVRO = {flag: b"\x02" + _avro_string(flag) for flag in ("false", "true", "last")}
_SNAPSHOT_OF = {avro.SNAPSHOT_BYTES["true"]: _SNAPSHOT_AVRO["true"],
                avro.SNAPSHOT_BYTES["last"]: _SNAPSHOT_AVRO["last"]}
# source.thread and source.query (null), then the envelope's transaction when null.
_AFTER_ROW = b"\x00\x00\x00"
_THREAD_QUERY = b"\x00\x00"


def value_struct(envelope: Dict[str, Any]) -> Dict[str, Any]:
    """The Avro envelope's Value record: its ``before`` field's non-null branch."""
    return envelope["fields"][0]["type"][1]


class AvroEvents(EventEncoder):
    """Debezium's events in Avro, as Connect's AvroConverter writes them, assembled from parts
    as codec.avro.EnvelopeWriter assembles the streamer's: of an envelope, only before/after,
    op, source.row and source.snapshot change between the rows of one binlog event, so the rest
    is encoded once per event (``event_parts``) and each row writes its row structs through a
    writer generated for the table's Value record. The bytes are those of ``value_writer`` on
    the whole envelope (tests/unit/codec/test_formats.py); its header is read at each message,
    so the registry's frame applies once the schema is registered."""

    compiles_apart = True

    def __init__(self, fmt: DebeziumFormat, space: str, value: Dict[str, Any],
                 fields: List[Field], key_fields: List[Field]) -> None:
        super().__init__(fmt, space, value, fields, key_fields)
        envelope = to_avro(self.envelope)
        layout = [f["name"] for f in envelope["fields"]]
        source = [f["name"] for f in envelope["fields"][2]["type"]["fields"]]
        if layout != ENVELOPE_LAYOUT or source != SOURCE_LAYOUT:
            raise ValueError(f"AvroEvents encodes {ENVELOPE_LAYOUT} and source "
                             f"{SOURCE_LAYOUT}, the schema has {layout} and {source}")
        self.value_writer = avro.Writer(envelope)
        self._row = avro.body_writer(value_struct(envelope))
        self._encode_key: Optional[Callable[[Any], bytes]] = None
        if self.key_schema is not None:
            self.key_writer = avro.Writer(to_avro(self.key_schema))
            self._encode_key = self.key_writer.encode
        self._head = _avro_string(VERSION) + _avro_string(fmt.connector) + \
            _avro_string(fmt.namespace)

    def event_parts(self, ts_ms: int, server_id: int, file: str, pos: int, gtid: Optional[str],
                    db: str, table: str, txid: str) -> Tuple[Any, Any]:
        """(source's version through ts_ms; db through pos; the processing time's three
        fields), encoded."""
        head = bytearray(self._head)
        write_long(head, ts_ms)
        mid = bytearray()
        write_string(mid, db)
        mid.append(0)  # sequence: null
        mid.append(2)
        write_long(mid, ts_ms * 1000)
        mid.append(2)
        write_long(mid, ts_ms * 1000000)
        mid.append(2)
        write_string(mid, table)
        write_long(mid, server_id)
        if gtid is None:
            mid.append(0)
        else:
            mid.append(2)
            write_string(mid, gtid)
        write_string(mid, file)
        write_long(mid, pos)
        now_ns = time.time_ns()
        now = bytearray()
        for t in (now_ns // 1000000, now_ns // 1000, now_ns):
            now.append(2)
            write_long(now, t)
        if self.fmt.orders is None:
            return (bytes(head), bytes(mid), bytes(now), None), txid
        block = bytearray(_THREAD_QUERY)
        block.append(2)  # the transaction block's branch, then its id
        write_string(block, txid)
        return (bytes(head), bytes(mid), bytes(now), (bytes(block), f"{db}.{table}")), txid

    def _assemble(self, before: Any, after: Any, op: bytes, parts: Any, row: int,
                  txid: Optional[str] = None) -> bytes:
        """A change or a TRUNCATE, of no snapshot (a snapshot's rows: ``encode_read``)."""
        head, mid, now, block = parts
        buf = bytearray(self.value_writer.header)  # type: ignore[union-attr]
        if before is None:
            buf.append(0)
        else:
            buf.append(2)
            self._row(buf, self.row(before))
        if after is None:
            buf.append(0)
        else:
            buf.append(2)
            self._row(buf, self.row(after))
        buf += head
        buf += _SNAPSHOT_AVRO["false"]
        buf += mid
        write_long(buf, row)
        if block is None or txid is None:
            buf += _AFTER_ROW
        else:  # thread, query, then the transaction block: id, total and table orders
            prefix, collection = block
            total, in_table = self.fmt.orders.next(txid, collection)  # type: ignore[union-attr]
            buf += prefix
            write_long(buf, total)
            write_long(buf, in_table)
        buf += op
        buf += now
        return bytes(buf)

    def encode(self, before: Any, after: Any, op: bytes, mid: Any, row: int, txid: Any,
               tx_row: int) -> bytes:
        return self._assemble(before, after, op, mid, row, txid)

    def encode_read(self, after: Any, mid: Any, row: int, txid: Any, snapshot: bytes) -> bytes:
        buf = self.read_head()
        self._row(buf, self.row(after))
        return self.read_tail(buf, mid, row, txid, snapshot)

    def read_head(self) -> bytearray:
        """An op r event up to its ``after`` row (``read_tail`` follows the row written after
        it): what schema.textavro writes a snapshot's rows into."""
        buf = bytearray(self.value_writer.header)  # type: ignore[union-attr]
        buf.append(0)  # before: null
        buf.append(2)  # after: the row
        return buf

    @staticmethod
    def read_tail(buf: bytearray, parts: Any, row: int, txid: Any, snapshot: bytes) -> bytes:
        """The rest of an op r event: its source, no transaction (a snapshot's rows are in
        none), its op and the processing time."""
        head, mid, now, _ = parts
        buf += head
        buf += _SNAPSHOT_OF[snapshot]
        buf += mid
        write_long(buf, row)
        buf += _AFTER_ROW
        buf += avro.OP_READ
        buf += now
        return bytes(buf)

    def truncate_value(self, ts_ms: int, server_id: int, file: str, pos: int,
                       gtid: Optional[str], db: str, table: str, txid: str,
                       tx_row: int) -> bytes:
        parts, _ = self.event_parts(ts_ms, server_id, file, pos, gtid, db, table, txid)
        return self._assemble(None, None, avro.OP_BYTES["t"], parts, 0, txid)

    def apart(self) -> "AvroEvents":
        """This encoder, its Value struct's and key's generated writers compiled again, apart
        (``encode.compiled_apart``). The writers' headers stay this encoder's (``value_writer``,
        ``key_writer``), so a registry's framing of them holds on both paths."""
        twin = copy.copy(self)
        twin._row = avro.body_writer(value_struct(self.value_writer.schema), apart=True)
        key = self.key_writer
        if key is not None and not key.uses_fastavro():
            twin._encode_key = avro.ApartWriter(key).encode
        return twin

    def key(self, values: Dict[str, Any]) -> Optional[bytes]:
        if self.key_row is None:
            return None
        assert self._encode_key is not None
        return self._encode_key(self.key_row(values))


# The Avro envelope's and source's field order, which AvroEvents writes its parts in: a change
# to envelope_schema or source_schema must change AvroEvents too, not be written wrongly.
ENVELOPE_LAYOUT = ["before", "after", "source", "transaction", "op", "ts_ms", "ts_us", "ts_ns"]
SOURCE_LAYOUT = ["version", "connector", "name", "ts_ms", "snapshot", "db", "sequence", "ts_us",
                 "ts_ns", "table", "server_id", "gtid", "file", "pos", "row", "thread", "query"]


class _Records:
    """Records of a topic of Debezium's own (transactions, heartbeats): a key struct and a value
    struct, in Avro (``writer``, ``key_writer``) or in JSON as Connect's JsonConverter writes it."""

    def __init__(self, fmt: DebeziumFormat, key_schema: Dict[str, Any],
                 value_schema: Dict[str, Any]) -> None:
        self.fmt = fmt
        self.json = fmt.encoding == "json"
        self.key_schema = key_schema
        self.value_schema = value_schema
        self.writer: Optional[avro.Writer] = None
        self.key_writer: Optional[avro.Writer] = None
        if not self.json:
            self.writer = avro.Writer(to_avro(value_schema))
            self.key_writer = avro.Writer(to_avro(key_schema))

    def _encode(self, value: Dict[str, Any], key: Dict[str, Any]) -> Tuple[bytes, bytes]:
        """(key, value) encoded."""
        if not self.json:
            assert self.writer is not None and self.key_writer is not None
            return self.key_writer.encode(key), self.writer.encode(value)

        def framed(s: Dict[str, Any], payload: Dict[str, Any]) -> bytes:
            body = {"schema": s, "payload": payload} if self.fmt.schemas_enable else payload
            return json.dumps(body, separators=(",", ":")).encode("utf-8")
        return framed(self.key_schema, key), framed(self.value_schema, value)


class TransactionRecords(_Records):
    """Debezium's transaction metadata: ``{prefix}.transaction``, keyed by the transaction's id,
    a BEGIN and an END (its event count, and per table ``{db}.{table}`` its own); the records
    of ``topics.transactions`` in format debezium. ``collection(topic)`` names a topic's table.
    Its changes then carry their ``transaction`` block (``TxOrder``), which the END's counts
    match: change events, tombstones not counted."""

    def __init__(self, fmt: DebeziumFormat, collection: Callable[[str], str]) -> None:
        self.orders = fmt.orders = TxOrder()
        self.collection = collection
        self.topic = f"{fmt.namespace}.transaction"
        count = {"type": "struct", "name": "event.collection", "version": 1, "optional": True,
                 "fields": [dict(schema("string"), field="data_collection", optional=False),
                            dict(schema("int64"), field="event_count", optional=False)]}
        value_schema = {
            "type": "struct", "name": "io.debezium.connector.common.TransactionMetadataValue",
            "version": 1, "optional": False, "fields": [
                dict(schema("string"), field="status", optional=False),
                dict(schema("string"), field="id", optional=False),
                dict(schema("int64"), field="event_count", optional=True),
                {"type": "array", "items": count, "optional": True,
                 "field": "data_collections"},
                dict(schema("int64"), field="ts_ms", optional=False)]}
        key_schema = {
            "type": "struct", "name": "io.debezium.connector.common.TransactionMetadataKey",
            "version": 1, "optional": False,
            "fields": [dict(schema("string"), field="id", optional=False)]}
        super().__init__(fmt, key_schema, value_schema)

    def begin(self, tx: Dict[str, Any]) -> Tuple[bytes, bytes]:
        return self._encode({"status": "BEGIN", "id": tx["id"], "event_count": None,
                             "data_collections": None, "ts_ms": tx["ts_ms"]}, {"id": tx["id"]})

    def end(self, tx: Dict[str, Any], ts_ms: int) -> Tuple[bytes, bytes]:
        events = self.orders.counts(tx["id"])
        if events is None:  # none counted in this run (a checkpoint written before the blocks)
            counts = {self.collection(t): c for t, c in tx["counts"].items()}
            events = (sum(counts.values()), counts)
        total, by_collection = events
        return self._encode({
            "status": "END", "id": tx["id"], "event_count": total,
            "data_collections": [{"data_collection": name, "event_count": c}
                                 for name, c in by_collection.items()],
            "ts_ms": ts_ms}, {"id": tx["id"]})

    def progress(self) -> Dict[str, Any]:
        """What the checkpoint keeps of the open transaction's orders (TransactionLog)."""
        return self.orders.state()

    def reset(self, txid: Optional[str], saved: Optional[Dict[str, Any]]) -> None:
        self.orders.restore(txid, saved)


class HeartbeatRecords(_Records):
    """Debezium's heartbeat records (``debezium.heartbeat_interval_ms``): to
    ``{heartbeat_topic_prefix}.{namespace}``, keyed by ``ServerNameKey`` {serverName: the
    namespace}, valued ``Heartbeat`` {ts_ms: when it was written}."""

    def __init__(self, fmt: DebeziumFormat, prefix: str) -> None:
        self.topic = f"{prefix}.{fmt.namespace}"
        key_schema = {"type": "struct", "name": "io.debezium.connector.common.ServerNameKey",
                      "optional": False,
                      "fields": [dict(schema("string"), field="serverName", optional=False)]}
        value_schema = {"type": "struct", "name": "io.debezium.connector.common.Heartbeat",
                        "optional": False,
                        "fields": [dict(schema("int64"), field="ts_ms", optional=False)]}
        super().__init__(fmt, key_schema, value_schema)

    def encode(self, ts_ms: int) -> Tuple[bytes, bytes]:
        """(key, value) of a heartbeat written at ``ts_ms``."""
        return self._encode({"ts_ms": ts_ms}, {"serverName": self.fmt.namespace})
