"""Turn any message the streamer wrote back into a dict, with no server but Kafka.

Messages are Avro single-object encoded. The writer schema of each fingerprint is in the
compacted topic ``{namespace}.__schemas``; the decoder reads it when it meets a fingerprint it
doesn't know yet. In schema-registry mode messages carry the Confluent wire format instead
(``00`` + 4-byte schema id); the decoder then asks the registry for the schema of that id.
"""
from __future__ import annotations

import datetime
import io
import json
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import fastavro

from .avro import CONFLUENT_MAGIC, MAGIC

# How long the broker may hold an empty fetch while a topic is read to its end (read_topic).
READ_FETCH_WAIT_MS = 10

SchemaSource = Callable[[], Dict[str, Dict[str, Any]]]
RegistrySource = Callable[[int], Dict[str, Any]]


class UnknownSchema(LookupError):
    pass


def _time_micros(value: int) -> datetime.timedelta:
    return datetime.timedelta(microseconds=value)


def _named(schema: Any, names: Dict[str, Any], space: str = "") -> Dict[str, Any]:
    """Full name -> definition of every named record in a schema, for references by name."""
    if isinstance(schema, list):
        for branch in schema:
            _named(branch, names, space)
    elif isinstance(schema, dict) and schema.get("type") == "record":
        ns = schema.get("namespace", space)
        full = schema["name"] if "." in schema["name"] or not ns else f"{ns}.{schema['name']}"
        names[full] = schema
        for f in schema["fields"]:
            _named(f["type"], names, ns)
    return names


def _restore(datum: Any, schema: Any, names: Dict[str, Any]) -> Any:
    """Apply what fastavro doesn't know: TIME as timedelta and original MySQL column names."""
    if datum is None:
        return None
    if isinstance(schema, str):
        schema = names.get(schema, schema)
    if isinstance(schema, list):
        for branch in schema:
            if branch != "null":
                return _restore(datum, branch, names)
        return datum
    if isinstance(schema, dict):
        t = schema.get("type")
        if t == "record":
            out = {}
            for f in schema["fields"]:
                out[f.get("mysql.column", f["name"])] = _restore(datum[f["name"]], f["type"], names)
            return out
        if schema.get("logicalType") == "streamer.time-micros":
            return _time_micros(datum)
    return datum


class Decoder:
    """Decodes keys and values; ``schemas`` loads {fingerprint hex: schema dict} on demand,
    ``registry`` (schema id -> schema) serves messages in the Confluent wire format."""

    def __init__(self, schemas: SchemaSource, registry: Optional[RegistrySource] = None):
        self._load = schemas
        self._registry = registry
        self._parsed: Dict[bytes, Any] = {}
        self._raw: Dict[bytes, Any] = {}
        self._names: Dict[bytes, Dict[str, Any]] = {}

    def _schema(self, fp: bytes) -> Any:
        parsed = self._parsed.get(fp)
        if parsed is None:
            for hexfp, schema in self._load().items():
                key = bytes.fromhex(hexfp)
                self._raw[key] = schema
                self._names[key] = _named(schema, {})
                self._parsed[key] = fastavro.parse_schema(schema)
            parsed = self._parsed.get(fp)
            if parsed is None:
                raise UnknownSchema(f"no writer schema with fingerprint {fp.hex()} in the schema topic")
        return parsed

    def decode(self, data: Optional[bytes]) -> Optional[Dict[str, Any]]:
        if data is None:
            return None
        fp, body = self._split(data)
        parsed = self._schema(fp)
        datum = fastavro.schemaless_reader(io.BytesIO(data[body:]), parsed)
        return _restore(datum, self._raw[fp], self._names[fp])

    def _split(self, data: bytes) -> Tuple[bytes, int]:
        """(cache key of the writer schema, offset of the body); loads a registry schema."""
        if data[:2] == MAGIC:
            return data[2:10], 10
        if data[:1] == CONFLUENT_MAGIC and len(data) >= 5:
            if self._registry is None:
                raise ValueError("message in the Confluent wire format (schema id "
                                 f"{int.from_bytes(data[1:5], 'big')}): pass the schema registry")
            key = data[:5]
            if key not in self._parsed:
                schema = self._registry(int.from_bytes(data[1:5], "big"))
                self._raw[key] = schema
                self._names[key] = _named(schema, {})
                self._parsed[key] = fastavro.parse_schema(schema)
            return key, 5
        raise ValueError("not a streamer message: neither Avro single-object encoding (C3 01) "
                         "nor the Confluent wire format (00 + schema id)")

    def schema_of(self, data: bytes) -> Dict[str, Any]:
        fp, _ = self._split(data)
        self._schema(fp)
        return self._raw[fp]


def read_topic(conf: Dict[str, Any], topic: str,
               timeout: float = 60.0) -> List[Tuple[Optional[bytes], Optional[bytes]]]:
    """(key, value) of every committed record of a topic, read_committed, in offset order."""
    return read_topic_tail(conf, topic, timeout)[0]


class OpenTransaction(RuntimeError):
    """A transaction that was open when a settled read reached the end stayed open."""


def read_topic_tail(conf: Dict[str, Any], topic: str, timeout: float = 60.0,
                    tail: Optional[int] = None, settle: bool = False,
                    on_open: Optional[Callable[[int, int, int], None]] = None
                    ) -> Tuple[List[Tuple[Optional[bytes], Optional[bytes]]], bool]:
    """``read_topic``, but with ``tail`` only the records among each partition's last ``tail``
    offsets; and whether what was read is the whole topic (the tail reached back to each
    partition's first offset), so a caller needs no second, full read.

    A read_committed read ends at the partition's last stable offset: a transaction still open
    there hides every record after its first, those of transactions committed since included.
    With ``settle``, the read goes on until the records written before its end (the high
    watermark it saw there) are decided, calling ``on_open(partition, stable, high)`` once when
    it has to wait, and raises OpenTransaction if they are not by ``timeout``.

    An empty or missing topic answers at once: a fresh namespace starts without a fetch round.
    """
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    # The end of a partition shows as an empty fetch, which the broker holds for up to
    # fetch.wait.max.ms (500 ms by default): every start waited that long for its checkpoint.
    c = Consumer(dict(conf, **{"group.id": f"streamer-reader-{time.time()}",
                               "enable.auto.commit": False, "enable.partition.eof": True,
                               "isolation.level": "read_committed",
                               "fetch.wait.max.ms": READ_FETCH_WAIT_MS}))
    try:
        deadline = time.monotonic() + timeout
        offsets = _offsets(c, topic, deadline)
        if offsets is None:
            return [], True
        starts = {}
        whole = True
        for p, (low, high) in offsets.items():
            # (high is the last stable offset: a partition whose records are all in an open
            # transaction looks empty, so a settled read fetches it anyway.)
            if high > low or settle:
                starts[p] = low if tail is None else max(low, high - tail)
                whole = whole and starts[p] == low
        c.assign([TopicPartition(topic, p, off) for p, off in starts.items()])
        pending = set(starts)
        settled_at: Dict[int, int] = {}  # partition -> the high watermark at its first end
        out: List[Tuple[Optional[bytes], Optional[bytes]]] = []
        while pending and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    p = msg.partition()
                    if settle and p not in settled_at:
                        # The fetch's high watermark, cached: no request of its own.
                        settled_at[p] = c.get_watermark_offsets(TopicPartition(topic, p),
                                                                cached=True)[1]
                        if msg.offset() < settled_at[p] and on_open is not None:
                            on_open(p, msg.offset(), settled_at[p])
                    if msg.offset() >= settled_at.get(p, -1):
                        pending.discard(p)
                    continue
                raise RuntimeError(f"reading {topic}: {msg.error().str()}")
            out.append((msg.key(), msg.value()))
        if pending & set(settled_at):
            raise OpenTransaction(f"a transaction on {topic} stayed open for {timeout:.0f} s")
        if pending:
            raise RuntimeError(f"timed out reading {topic}")
        return out, whole
    finally:
        c.close()


def _offsets(c: Any, topic: str, deadline: float) -> Optional[Dict[int, Tuple[int, int]]]:
    """Each partition's (low, high) offsets, or None when the topic doesn't exist. A partition
    whose leader is moving, or not yet known for a topic created a moment ago, is asked again
    until the deadline: taking it for an empty topic would lose the checkpoint."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    moving = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
              KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION)
    while True:
        try:
            md = c.list_topics(topic, timeout=30)
            err = md.topics[topic].error
            if err is not None:
                if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    return None
                raise KafkaException(err)
            return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
                    for p in md.topics[topic].partitions}
        except KafkaException as exc:
            code = exc.args[0].code() if exc.args and isinstance(exc.args[0], KafkaError) else None
            if code not in moving or time.monotonic() >= deadline:
                raise
            time.sleep(0.1)


def read_schema_records(conf: Dict[str, Any], namespace: str) -> List[Dict[str, Any]]:
    """Every committed record of ``{namespace}.__schemas`` in offset order (none if no topic)."""
    return [json.loads(value) for _, value in read_topic(conf, f"{namespace}.__schemas")
            if value is not None]


def kafka_schema_source(conf: Dict[str, Any], namespace: str) -> SchemaSource:
    """Reads the whole schema topic, read_committed, each time it is called."""

    def load() -> Dict[str, Dict[str, Any]]:
        return {rec["fingerprint"]: json.loads(rec["schema"])
                for rec in read_schema_records(conf, namespace)}

    return load


def to_jsonable(value: Any) -> Any:
    """For printing: bytes as hex-free latin-1 escapes, decimals and times as strings."""
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return str(value)
    if hasattr(value, "as_tuple"):
        return str(value)
    return value
