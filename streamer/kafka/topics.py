"""Reading the streamer's own Kafka topics to their end, read_committed: the checkpoint's tail of
``{namespace}.__positions`` and the writer schemas in ``{namespace}.__schemas``."""
from __future__ import annotations

import json
import logging
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from streamer.codec.decode import SchemaSource
from streamer.errors import KafkaFatal, OpenTransaction
from streamer.kafka import logs

log = logging.getLogger(__name__)
# How long the broker may hold an empty fetch while a topic is read to its end (read_topic_tail).
READ_FETCH_WAIT_MS = 10
# How much of a topic TopicReader lets the client fetch ahead (kB).
READ_PREFETCH_KB = 8192


def read_topic_tail(conf: Dict[str, Any], topic: str, timeout: float = 60.0,
                    tail: Optional[int] = None, settle: bool = False,
                    on_open: Optional[Callable[[int, int, int], None]] = None,
                    must_exist: bool = False
                    ) -> Tuple[List[Tuple[Optional[bytes], Optional[bytes]]], bool]:
    """(key, value) of every committed record of a topic, read_committed, in offset order, or
    with ``tail`` only those among each partition's last ``tail`` offsets; and whether what was
    read is the whole topic (the tail reached back to each partition's first offset), so a
    caller needs no second, full read.

    A read_committed read ends at the partition's last stable offset: a transaction still open
    there hides every record after its first, those of transactions committed since included.
    With ``settle``, the read goes on until the records written before its end (the high
    watermark it saw there) are decided, calling ``on_open(partition, stable, high)`` once when
    it has to wait, and raises OpenTransaction if they are not by ``timeout``.

    An empty or missing topic answers at once: a fresh namespace starts without a fetch round.
    With ``must_exist`` (a topic the caller just made sure of), a broker that doesn't know the
    topic is asked again until ``timeout``: during a rolling restart its metadata can lag, and
    taking the checkpoint topic for missing would start the stream at the binlog's end.
    """
    from confluent_kafka import Consumer, TopicPartition

    # The end of a partition shows as an empty fetch, which the broker holds for up to
    # fetch.wait.max.ms (500 ms by default): every start waited that long for its checkpoint.
    c = Consumer(logs.client_conf(dict(conf, **{
        "group.id": f"streamer-reader-{time.time()}", "enable.auto.commit": False,
        "enable.partition.eof": True, "isolation.level": "read_committed",
        "fetch.wait.max.ms": READ_FETCH_WAIT_MS})))
    try:
        deadline = time.monotonic() + timeout
        offsets = _offsets(c, topic, deadline, must_exist)
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
        return _drain(c, topic, set(starts), deadline, settle, on_open, timeout), whole
    finally:
        c.close()


def _drain(c: Any, topic: str, pending: set, deadline: float, settle: bool,
           on_open: Optional[Callable[[int, int, int], None]], timeout: float
           ) -> List[Tuple[Optional[bytes], Optional[bytes]]]:
    """The records of the assigned partitions to their end (settled: until what was written
    before it is decided)."""
    from confluent_kafka import KafkaError, TopicPartition

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
            raise _read_failed(topic, msg.error())
        out.append((msg.key(), msg.value()))
    if pending & set(settled_at):
        raise OpenTransaction(f"a transaction on {topic} stayed open for {timeout:.0f} s")
    if pending:
        raise _read_timed_out(topic, timeout)
    return out


def _read_failed(topic: str, err: Any) -> KafkaFatal:
    return KafkaFatal(f"reading {topic} failed: {err.str()} ({err.name()}); check that the "
                      f"brokers of kafka.bootstrap.servers are up and that the streamer's "
                      f"principal may read {topic}")


def _read_timed_out(topic: str, timeout: float) -> KafkaFatal:
    return KafkaFatal(f"reading {topic} to its end took over {timeout:.0f} s: check that the "
                      f"brokers of kafka.bootstrap.servers are up and that its partitions have "
                      f"leaders (kafka-topics.sh --describe --topic {topic})")


def _offsets(c: Any, topic: str, deadline: float,
             must_exist: bool = False) -> Optional[Dict[int, Tuple[int, int]]]:
    """Each partition's (low, high) offsets, or None when the topic doesn't exist (unless
    ``must_exist``: then it is asked again). A partition whose leader is moving, or not yet known
    for a topic created a moment ago, is asked again until the deadline: taking it for an empty
    topic would lose the checkpoint."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    moving = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
              KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION)
    while True:
        try:
            md = c.list_topics(topic, timeout=30)
            err = md.topics[topic].error
            if err is not None:
                if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART and not must_exist:
                    return None
                raise KafkaException(err)
            return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
                    for p in md.topics[topic].partitions}
        except KafkaException as exc:
            code = exc.args[0].code() if exc.args and isinstance(exc.args[0], KafkaError) else None
            if code not in moving or time.monotonic() >= deadline:
                raise
            time.sleep(0.1)


def read_schema_records(conf: Dict[str, Any], namespace: str, settle: bool = False,
                        timeout: float = 60.0,
                        on_open: Optional[Callable[[int, int, int], None]] = None
                        ) -> List[Dict[str, Any]]:
    """Every committed record of ``{namespace}.__schemas`` in offset order (none if no topic);
    ``settle`` and ``on_open`` as in read_topic_tail."""
    topic = f"{namespace}.__schemas"
    records, _ = read_topic_tail(conf, topic, timeout, settle=settle, on_open=on_open)
    out = []
    for key, value in records:
        if value is None:
            continue
        rec = schema_record(value)
        if rec is None:
            log.warning("a record of %s (key %r) is no schema record of the streamer: %r: "
                        "skipped. Only the streamer's transactions write schema records; "
                        "something else wrote to this topic", topic, key, value[:80])
        else:
            out.append(rec)
    return out


def json_object(value: bytes) -> Optional[Dict[str, Any]]:
    """The JSON object a record of the namespace's own topics holds; None for anything else
    (not JSON, or JSON of another kind): a record something else wrote there."""
    try:
        data = json.loads(value)
    except ValueError:  # UnicodeDecodeError too
        return None
    return data if isinstance(data, dict) else None


def schema_record(value: bytes) -> Optional[Dict[str, Any]]:
    """A schema topic's record (``Publisher.produce_schema``: a JSON object whose
    ``fingerprint`` and ``schema`` are strings, the schema itself JSON, and whose ``topic`` is
    a string for a table's ``value`` schema); None for anything else."""
    rec = json_object(value)
    if rec is None or not (isinstance(rec.get("fingerprint"), str)
                           and isinstance(rec.get("schema"), str)):
        return None
    try:
        json.loads(rec["schema"])
    except ValueError:
        return None
    if rec.get("kind") == "value" and not isinstance(rec.get("topic"), str):
        return None
    return rec


class KafkaSchemas:
    """The schema topic as a Decoder's SchemaSource: a call reads it to its stable end.

    A message's schema is written in the message's own transaction, but the transaction's commit
    markers reach the schema topic and the message's partition at different moments. So a
    consumer can hold a committed message whose schema that read doesn't show yet. ``settled``
    reads on until what was written before the topic's end is decided; the decoder asks it only
    for a fingerprint the first read lacks, since a source killed mid-transaction keeps the
    topic unsettled until its successor starts (or the broker's timeout aborts it).
    """

    def __init__(self, conf: Dict[str, Any], namespace: str, timeout: float = 60.0) -> None:
        self.conf = conf
        self.namespace = namespace
        self.timeout = timeout

    def __call__(self) -> Dict[str, Dict[str, Any]]:
        return self._load(settle=False)

    def settled(self) -> Dict[str, Dict[str, Any]]:
        topic = f"{self.namespace}.__schemas"

        def on_open(partition: int, stable: int, high: int) -> None:
            log.warning("%s: offsets %d to %d are not decided yet; waiting up to %.0f s for "
                        "their transaction to end, as a schema may be among them", topic, stable,
                        high - 1, self.timeout)
        try:
            return self._load(settle=True, on_open=on_open)
        except OpenTransaction as exc:
            raise OpenTransaction(
                f"{exc}, and a message's schema may be in it. A source stopped mid-commit holds "
                f"it until the source starts again or Kafka aborts it (the producer's "
                f"transaction.timeout.ms)") from None

    def _load(self, settle: bool,
              on_open: Optional[Callable[[int, int, int], None]] = None) -> Dict[str, Dict[str, Any]]:
        return {rec["fingerprint"]: json.loads(rec["schema"])
                for rec in read_schema_records(self.conf, self.namespace, settle, self.timeout,
                                               on_open)}


def kafka_schema_source(conf: Dict[str, Any], namespace: str) -> SchemaSource:
    """The schema topic of ``namespace``, read_committed, each time it is called (KafkaSchemas)."""
    return KafkaSchemas(conf, namespace)


class TopicReader:
    """Reads a topic, read_committed, in steps: each ``read`` yields the records from where the
    last one ended to the end the topic has when it starts, so a caller can follow a topic
    without holding it (``streamer audit``)."""

    def __init__(self, conf: Dict[str, Any], topic: str) -> None:
        self.conf = conf
        self.topic = topic
        self.next: Dict[int, int] = {}  # partition -> the offset after the last one read

    def ends(self, timeout: float = 60.0) -> Dict[int, int]:
        """Each partition's end offset (high watermark) now; {} when the topic doesn't exist."""
        from confluent_kafka import Consumer

        c = Consumer(logs.client_conf(dict(self.conf, **{"group.id": f"streamer-audit-{time.time()}"})))
        try:
            offsets = _offsets(c, self.topic, time.monotonic() + timeout)
        finally:
            c.close()
        return {} if offsets is None else {p: high for p, (_, high) in offsets.items()}

    def read(self, until: Dict[int, int], timeout: float = 300.0
             ) -> Iterator[Tuple[int, int, Optional[bytes], Optional[bytes]]]:
        """(partition, offset, key, value) of each committed record up to the offsets ``until``
        (``ends()``), partition by partition in offset order."""
        from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

        todo = {p: end for p, end in until.items() if self.next.get(p, 0) < end}
        if not todo:
            return
        c = Consumer(logs.client_conf(dict(self.conf, **{
            "group.id": f"streamer-audit-{time.time()}", "enable.auto.commit": False,
            "enable.partition.eof": True, "isolation.level": "read_committed",
            "fetch.wait.max.ms": READ_FETCH_WAIT_MS, "auto.offset.reset": "earliest",
            # librdkafka prefetches up to 64 MB by default: the read is processed one record at
            # a time anyway, and the audit's memory should not grow with the topic.
            "queued.max.messages.kbytes": READ_PREFETCH_KB})))
        try:
            # A first read starts at each partition's log start, which retention or
            # DeleteRecords may have moved past 0 (offset 0 would be out of range).
            c.assign([TopicPartition(self.topic, p, self.next.get(p, OFFSET_BEGINNING))
                      for p in todo])
            deadline = time.monotonic() + timeout
            while todo:
                if time.monotonic() > deadline:
                    raise _read_timed_out(self.topic, timeout)
                msg = c.poll(0.5)
                if msg is None:
                    # Nothing more to deliver: a partition whose fetch position passed its
                    # target over records that are never delivered (aborted ones, markers) may
                    # not report its end again.
                    for tp in c.position([TopicPartition(self.topic, q) for q in todo]):
                        if tp.offset >= todo[tp.partition]:
                            self.next[tp.partition] = max(self.next.get(tp.partition, 0),
                                                          todo.pop(tp.partition))
                    continue
                p = msg.partition()
                if msg.error():
                    if msg.error().code() != KafkaError._PARTITION_EOF:
                        raise _read_failed(self.topic, msg.error())
                    # A read_committed end: what follows is undecided (an open transaction)
                    # until its offset reaches the target.
                    self.next[p] = max(self.next.get(p, 0), msg.offset())
                    if p in todo and msg.offset() >= todo[p]:
                        del todo[p]
                    continue
                if p not in todo:
                    continue
                if msg.offset() >= todo[p]:
                    # Past the target (what lay between were transaction markers): read next time.
                    self.next[p] = max(self.next.get(p, 0), todo[p])
                    del todo[p]
                    continue
                self.next[p] = msg.offset() + 1
                if self.next[p] >= todo[p]:
                    del todo[p]
                yield p, msg.offset(), msg.key(), msg.value()
        finally:
            c.close()
