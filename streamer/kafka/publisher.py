"""The Kafka edge: batches published in Kafka transactions together with their checkpoint.

Every batch is one transaction holding its messages, any new schemas and the checkpoint (the
position after the batch) in ``{namespace}.__positions``. A read_committed consumer therefore sees
a batch and its checkpoint together or not at all, which is what makes restarts exactly-once.
No per-message delivery callback is registered: a failed delivery fails the commit of the batch.

A batch's transaction opens with the last committed checkpoint produced again, so that the
positions topic joins the transaction with the batch's first messages; otherwise it would join
only at commit, and each commit would wait for one more broker round trip. The new checkpoint,
produced at commit, comes after it and is the one read back. (Other sources of the namespace
then find the positions topic held by an open transaction for a whole batch, not only during a
commit: their checkpoint read waits for it, see read_checkpoint.)

Two transactional producers take turns, one transaction each. The broker answers a commit once
it has logged the decision, and writes the markers and the transaction's end after that; until
then, the same producer's next transaction is refused its partitions (CONCURRENT_TRANSACTIONS),
and librdkafka tries again after a fixed 20 ms. A streamer that is caught up begins its next
transaction right after a commit, so ~1-3 % of its commits took ~22 ms, which was its tail at
1k rows/s. The other producer's transaction does not wait for that end. Both producers' ids
belong to this source (``transactional_ids``) and both are fenced at a start; only one
transaction is ever open, the next begins after the last commit returned, so their messages
are in the topics in commit order, as with one producer.
"""
from __future__ import annotations

import json
import logging
import time
from typing import Any, Dict, List, Optional

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from streamer.errors import (BatchAborted, Fenced, KafkaFatal, LeaseLost, OpenTransaction,
                             OversizedRow, ProducerBroken)
from streamer.kafka import logs
from streamer.kafka.rdkafka import Producer
from streamer.kafka.topics import read_schema_records, read_topic_tail
from streamer.position import Position

log = logging.getLogger(__name__)

SAFE_IN_FLIGHT = 1
DEFAULT_PRODUCER = {
    "linger.ms": 5,
    "batch.num.messages": 10000,
    "queue.buffering.max.messages": 200000,
    "queue.buffering.max.kbytes": 262144,
    "message.max.bytes": 16777216,
    "compression.type": "lz4",
    "transaction.timeout.ms": 60000,
    # One produce request in flight per broker. With more, librdkafka (2.0.2, Debian 12's, as
    # measured here) can lose a message: a request refused with NOT_LEADER (a partition whose
    # leader is new, e.g. a topic just created) followed by an accepted later request of the same
    # partition makes it count the refused messages as delivered ("implicitly acked"), and the
    # transaction commits without them. Seen for 4 of 100 new topics; none of 300 with this.
    "max.in.flight.requests.per.connection": SAFE_IN_FLIGHT,
    # A key's partition as the Java clients pick it (kafka.partition), so that topics with more
    # than one partition co-partition with Kafka Streams and the rest; librdkafka's default
    # (consistent_random, CRC32) puts keys elsewhere.
    "partitioner": "murmur2_random",
    **logs.RECONNECT_BACKOFF,  # a start-up 40 ms shorter (kafka.logs says why)
}
# Consumer-side keys that would confuse a producer and the reverse; the rest pass through.
_PRODUCER_ONLY = (set(DEFAULT_PRODUCER) - set(logs.RECONNECT_BACKOFF)) | {
    "compression.type", "batch.size", "retries", "delivery.timeout.ms", "request.timeout.ms"}


# The checkpoint is looked for among the positions topic's last offsets first (see read_checkpoint).
CHECKPOINT_TAIL = 1000
# Roll the compacted internal topics hourly so that compaction can drop superseded checkpoints.
COMPACTED_SEGMENT_MS = 3600 * 1000

# A Kafka outage makes the queue fill again and again; say so once, not once per message.
QUEUE_FULL_LOG_EVERY_S = 300.0


def transactional_id(namespace: str, source: str) -> str:
    return f"streamer.{namespace}.{source}"


def transactional_ids(namespace: str, source: str) -> List[str]:
    """The ids of a source's two producers: ``streamer.{namespace}.{source}`` and the same with
    ``+1`` (a character no source or namespace name has, so no other source's id is one of these;
    a prefixed ACL on the first covers both)."""
    first = transactional_id(namespace, source)
    return [first, first + "+1"]


def _as_int(value: Any) -> int:
    """A librdkafka integer setting; one that isn't is left for librdkafka to refuse."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _kafka_error(exc: KafkaException) -> KafkaError:
    err = exc.args[0] if exc.args else None
    return err if isinstance(err, KafkaError) else KafkaError(KafkaError._FAIL, str(exc))


def create_topics(admin: AdminClient, topics: List[str], partitions: int, replication_factor: int,
                  config: Dict[str, str]) -> None:
    """Create the topics in one request (one round trip for all); one that exists is fine."""
    futures = admin.create_topics(
        [NewTopic(t, num_partitions=partitions, replication_factor=replication_factor,
                  config=config) for t in topics], operation_timeout=30)
    for topic in topics:
        try:
            futures[topic].result(timeout=60)
            log.info("created topic %s", topic)
        except KafkaException as exc:
            err = _kafka_error(exc)
            if err.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise KafkaFatal(f"cannot create topic {topic}: {err.str()}") from None


# librdkafka's log level for a producer on its mock cluster: warnings and worse. Its notice that
# the mock replaces bootstrap.servers is for librdkafka's own tests, not a user's log.
MOCK_LOG_LEVEL = 4


class _EveryTopic(set):
    """The topics a mock cluster has: all of them (it creates one when it is produced to)."""

    def __contains__(self, topic: object) -> bool:
        return True


class Publisher:
    """Transactional producer plus the admin work it needs. Use as a context manager."""

    def __init__(self, cfg: Dict[str, Any], schemas_topic_cb: Optional[Any] = None):
        self.cfg = cfg
        ns = cfg["namespace"]
        self.source = cfg["source"]["name"]
        self.positions_topic = f"{ns}.__positions"
        self.schemas_topic = f"{ns}.__schemas"
        self.txids = transactional_ids(ns, self.source)
        self.txid = self.txids[0]
        self.kafka_conf = dict(cfg["kafka"])
        self.in_tx = False
        self.committed: Optional[Position] = None
        self._topics: set = set()
        self._partitions: Dict[str, int] = {}
        self._queue_full_logged_at = -1e9
        # The producer whose turn it is, and both (the module's docstring says why two).
        self.producer: Optional[Producer] = None
        self.producers: List[Producer] = []
        self._turn = 0
        self.admin: Optional[AdminClient] = None
        self.last_commit_s = 0.0
        # Set by the pipeline's signal handler: waits on an unavailable Kafka give up early.
        self.stopping = False
        self._abort_pending = False
        self.checkpoint_records_read = 0
        self.prepared = False  # the internal topics are known to exist (prepare)
        # A hot standby's lease (kafka.lease): once lost, no commit goes out again.
        self.lease: Optional[Any] = None

    # -- lifetime -------------------------------------------------------------------------------
    def __enter__(self) -> "Publisher":
        """Starts the transactional producer, which fences older instances. Creates nothing:
        ``prepare()`` does, once the caller knows the other end works too."""
        self.admin = AdminClient(logs.client_conf(self._client_conf()))
        try:
            self._start_producer()
        except BaseException:
            self.admin = None  # let go: destroyed before the command returns (kafka.logs)
            raise
        return self

    @classmethod
    def in_process(cls, cfg: Dict[str, Any]) -> "Publisher":
        """A publisher whose producer runs against librdkafka's in-process mock cluster
        (``test.mock.num.brokers``): the very code of a real one, transactions and all, and
        nothing leaves the process (engine.warmup). The mock creates a topic when it is first
        produced to, so none is created here, and there is no admin client. ``close()`` ends it."""
        pub = cls(dict(cfg, kafka={"bootstrap.servers": "127.0.0.1:9",
                                   "test.mock.num.brokers": 1, "log_level": MOCK_LOG_LEVEL}))
        pub._start_producer()
        pub.prepared = True
        pub._topics = _EveryTopic()
        return pub

    def close(self) -> None:
        self.__exit__(None, None, None)

    def prepare(self) -> None:
        """The namespace's checkpoint and schema topics, created if missing. The reads and
        commits below need them; ``streamer run`` calls this once MySQL has been checked, so
        that a start that can't go on leaves nothing behind in Kafka."""
        # Kafka compacts only closed segments: without a time-based roll, a checkpoint per batch
        # would pile up for days (the 1 GB default segment) and every start would read them all.
        compact = {"cleanup.policy": "compact", "segment.ms": str(COMPACTED_SEGMENT_MS)}
        self.ensure_topics([self.positions_topic, self.schemas_topic], partitions=1,
                           config=compact)
        self.prepared = True

    def _producer_settings(self) -> Dict[str, Any]:
        """The producer's settings: the defaults, overridden by the config's kafka section."""
        return dict(DEFAULT_PRODUCER, **self.kafka_conf)

    def _start_producer(self) -> None:
        """Start both producers; each one's init_transactions fences the older instances of its
        id and aborts what they left open, so the checkpoint read that follows can't be overtaken
        by a zombie's late commit. Both are created first, so the second connects while the
        first initialises."""
        conf = self._producer_settings()
        self.in_tx = False
        self._abort_pending = False
        started: List[Producer] = []
        try:
            for txid in self.txids:
                started.append(Producer(dict(conf, **{"transactional.id": txid,
                                                      "enable.idempotence": True, "acks": "all"})))
            for txid, producer in zip(self.txids, started):
                self._init_transactions(producer, txid, conf)
        except BaseException:
            for producer in started:
                producer.close()
            raise
        self.producers = started
        self.producer = started[0]
        self._turn = 0

    def _init_transactions(self, producer: Producer, txid: str, conf: Dict[str, Any]) -> None:
        first = float(self.cfg["kafka_connect_timeout_s"])
        try:
            try:
                producer.init_transactions(first)
            except KafkaException as exc:
                if _kafka_error(exc).code() != KafkaError._TIMED_OUT or not self._reachable():
                    raise
                # The brokers answer; the coordinator is slow (loading its log, say): wait on.
                log.warning("Kafka's transaction coordinator has not answered in %.0f s; "
                            "waiting longer", first)
                producer.init_transactions(float(self.cfg["shutdown_timeout_s"]) + 30)
        except KafkaException as exc:
            raise KafkaFatal(f"Kafka at {conf.get('bootstrap.servers')} did not accept the "
                             f"transactional producer {txid}: {_kafka_error(exc).str()}. "
                             f"Check that the brokers are reachable and support transactions, "
                             f"and that this source may use the transactional ids "
                             f"{self.txids[0]}* (kafka.bootstrap.servers; "
                             f"kafka_connect_timeout_s is {first:g})") from None

    def _take_turns(self) -> None:
        """After a commit: the next transaction goes to the other producer."""
        if len(self.producers) > 1:
            self._turn = 1 - self._turn
            self.producer = self.producers[self._turn]

    def _reachable(self) -> bool:
        """Whether a broker answers a metadata request within a few seconds."""
        assert self.admin is not None
        try:
            self.admin.list_topics(timeout=3)
            return True
        except KafkaException:
            return False

    def reset(self) -> None:
        """Replace a producer that hit a fatal error other than fencing (e.g. INVALID_TXN_STATE
        after aborting while a new topic's partitions were being added), or whose commit's
        outcome is unknown. The new producer's init_transactions settles whatever the old one
        left open, which may complete a commit whose end was already sent: so the checkpoint is
        read back from the topic, and the caller resumes from that one, not from memory."""
        remembered = self.committed
        log.warning("replacing the Kafka producer; the last commit known here was %s",
                    remembered.describe() if remembered else "none")
        old, self.producer, self.producers = self.producers, None, []
        for producer in old:
            producer.close()
        delay, attempts = 1.0, 0
        while True:
            if self.lease is not None and self.lease.lost:
                # Another instance took over meanwhile: a new producer would fence it.
                raise LeaseLost(f"this instance lost the lease of source {self.source} while "
                                f"its producer was being replaced; the instance holding the "
                                f"lease now goes on from the checkpoint")
            try:
                self._start_producer()
                break
            except KafkaFatal as exc:
                # Kafka is away (down, or paused across the commit that led here), or its
                # coordinator still settles the old transaction: the producer worked before, so
                # wait for it, idle, rather than exit. init_transactions then settles the old
                # transaction, and the checkpoint is read back below.
                if self.stopping:
                    raise
                attempts += 1
                if attempts == 1 or attempts % 10 == 0:
                    log.warning("%s; retrying every %.0f..30 s until Kafka answers (attempt %d)",
                                exc, delay, attempts)
                until = time.monotonic() + delay
                while time.monotonic() < until and not self.stopping:
                    time.sleep(0.2)
                delay = min(30.0, delay * 2)
        if attempts:
            log.info("Kafka answers again: the new producer is in place")
        self._learn(sorted(self._topics))
        found = self.read_checkpoint()
        if found != remembered:
            log.warning("the checkpoint read back after the reset is %s, not the one known here: "
                        "resuming from it", found.describe() if found else "none")

    def __exit__(self, *exc: Any) -> None:
        if self.producer is not None:
            try:
                if self.in_tx or self._abort_pending:
                    self.stopping = True
                    self.abort()
                for producer in self.producers:
                    producer.flush(5)
            except (KafkaException, KafkaFatal) as exc:
                # Nothing uncommitted is lost: the next start resumes from the checkpoint.
                log.warning("closing the Kafka producer: %s", exc)
            for producer in self.producers:
                producer.close()
            self.producer = None
            self.producers = []
        self.admin = None  # let go: destroyed before the command returns (kafka.logs)

    def _client_conf(self) -> Dict[str, Any]:
        return {k: v for k, v in self.kafka_conf.items() if k not in _PRODUCER_ONLY}

    # -- topics ---------------------------------------------------------------------------------
    def ensure_topic(self, topic: str, partitions: Optional[int] = None,
                     config: Optional[Dict[str, str]] = None) -> None:
        self.ensure_topics([topic], partitions, config)

    def ensure_topics(self, topics: List[str], partitions: Optional[int] = None,
                      config: Optional[Dict[str, str]] = None) -> None:
        """Create the topics that don't exist yet, in one request (one round trip for all)."""
        new_topics = [t for t in topics if t not in self._topics]
        if not new_topics:
            return
        assert self.admin is not None
        tcfg = self.cfg["topics"]
        conf = {"max.message.bytes": str(DEFAULT_PRODUCER["message.max.bytes"])}
        conf.update(config or {})
        create_topics(self.admin, new_topics, partitions or tcfg["partitions"],
                      tcfg["replication_factor"], conf)
        self._topics.update(new_topics)
        self._learn(new_topics)

    def _learn(self, topics: List[str]) -> None:
        """Fetch the topics' metadata into the producer now. Left to itself, librdkafka looks up
        a topic it has not produced to on a one-second timer, which made the first commit to
        each topic take ~1 s (measured: 1000 ms without, 4 ms with)."""
        assert self.producer is not None
        for topic in topics:
            try:
                for producer in self.producers:
                    producer.list_topics(topic, timeout=10)
            except KafkaException as exc:
                # Only a speed-up: the first produce looks the topic up by itself.
                log.debug("metadata for %s not fetched ahead: %s", topic, exc)

    # -- checkpoint -----------------------------------------------------------------------------
    def read_checkpoint(self) -> Optional[Position]:
        """The last committed position of this source, read with read_committed."""
        if not self.prepared:
            self.prepare()
        key = self.source.encode()
        found: Optional[Position] = None
        # Another source of the namespace that is publishing a batch (or died doing so) has a
        # checkpoint in an open transaction, which hides every checkpoint after it from a
        # read_committed read, this source's newest perhaps among them: resuming from an older
        # one would publish its changes twice. So the read waits until what was written before
        # it ended is decided; the broker aborts a dead producer's transaction after its
        # transaction.timeout.ms. (This source's own open transaction, if an earlier instance
        # left one, was aborted by init_transactions already.)
        settle_s = _as_int(self._producer_settings()["transaction.timeout.ms"]) / 1000.0 + 30.0

        def on_open(partition: int, stable: int, high: int) -> None:
            log.warning("another producer's transaction is open in %s (partition %d: offsets "
                        "%d to %d are not decided yet); waiting up to %.0f s for it to end, so "
                        "that no newer checkpoint of this source is missed", self.positions_topic,
                        partition, stable, high - 1, settle_s)

        # The newest checkpoint is the last record with this source's key. It is almost always
        # among the last few offsets; only when other sources of the namespace wrote many since
        # is the whole topic read.
        for tail in (CHECKPOINT_TAIL, None):
            try:
                # prepare() made sure the topic exists: a broker that says it doesn't is behind.
                records, whole = read_topic_tail(self._client_conf(), self.positions_topic,
                                                 timeout=settle_s, tail=tail, settle=True,
                                                 on_open=on_open, must_exist=True)
            except OpenTransaction as exc:
                raise KafkaFatal(f"cannot read the checkpoint from {self.positions_topic}: {exc}, "
                                 f"and a checkpoint of this source committed after it can't be "
                                 f"read until it ends. Find the producer holding it (another "
                                 f"source of namespace {self.cfg['namespace']!r}, or a client "
                                 f"writing to that topic) and let it finish or stop it, then "
                                 f"start again") from None
            except (RuntimeError, KafkaException) as exc:
                raise KafkaFatal(f"cannot read the checkpoint from {self.positions_topic}: "
                                 f"{exc}") from None
            self.checkpoint_records_read = len(records)
            for k, value in records:
                if k == key and value is not None:
                    found = Position.from_json(value)
            if found is not None or whole:
                break
        self.committed = found
        return found

    # -- transactions ---------------------------------------------------------------------------
    def begin(self) -> None:
        """Opens a batch's transaction, with the positions topic in it from the start (above)."""
        self._begin()
        if self.committed is not None:
            self.produce(self.positions_topic, self.committed.to_json(), self.source.encode())

    def _begin(self) -> None:
        assert self.producer is not None
        if not self.prepared:
            self.prepare()
        if self._abort_pending:
            self.abort()
        try:
            self.producer.begin_transaction()
        except KafkaException as exc:
            self._raise(exc, "begin a transaction")
        self.in_tx = True

    def produce(self, topic: str, value: Optional[bytes], key: Optional[bytes]) -> None:
        """Queue one message in the open transaction; blocks (backpressure) while the queue is full."""
        try:
            self.producer.produce(topic, value, key)  # type: ignore[union-attr]
        except BufferError:
            self._wait_for_room(topic, value, key)
        except KafkaException as exc:
            if _kafka_error(exc).code() == KafkaError.MSG_SIZE_TOO_LARGE:
                self._oversized(topic, value, key)
            self._raise(exc, f"produce to {topic}")

    def _oversized(self, topic: str, value: Optional[bytes], key: Optional[bytes]) -> None:
        """Stop at a message no retry can publish, naming it and the ways on. The batch is
        aborted, so the position stays before the row: after the fix, nothing is lost."""
        size = len(value or b"") + len(key or b"")
        limit = self._producer_settings()["message.max.bytes"]
        self.abort()
        shown = "none (a keyless table)" if key is None else key[:64].hex() + (
            "..." if len(key) > 64 else "")
        raise OversizedRow(
            f"a row change of topic {topic} is {size} bytes, over the {limit} bytes Kafka takes "
            f"(kafka.message.max.bytes; the topic's max.message.bytes and the broker's "
            f"message.max.bytes must allow it too); its key, Avro-encoded: {shown}. Raise those "
            f"limits, or keep the big column out with tables.columns.exclude or mask "
            f"('truncate:N'), then restart: the position is before this row")

    def _wait_for_room(self, topic: str, value: bytes, key: Optional[bytes]) -> None:
        now = time.monotonic()
        if now - self._queue_full_logged_at > QUEUE_FULL_LOG_EVERY_S:
            log.warning("producer queue full (Kafka slow or down): pausing binlog reads until "
                        "it drains")
            self._queue_full_logged_at = now
        while True:
            if self.stopping:
                self.abort()
                raise BatchAborted("stopping while the producer queue is full; the batch was "
                                   "aborted and is re-read on the next start")
            self.producer.poll(0.1)  # type: ignore[union-attr]
            try:
                self.producer.produce(topic, value, key)  # type: ignore[union-attr]
                return
            except BufferError:
                continue
            except KafkaException as exc:
                self._raise(exc, f"produce to {topic}")

    def produce_everywhere(self, topic: str, value: bytes) -> int:
        """Queue ``value`` (keyless) once in every partition of ``topic``: a TRUNCATE, which a
        consumer of any partition must see before that partition's later changes. Returns how
        many messages that was."""
        assert self.producer is not None
        partitions = self._partitions.get(topic)
        if partitions is None:
            assert self.admin is not None
            md = self.admin.list_topics(topic, timeout=10).topics.get(topic)
            partitions = len(md.partitions) if md is not None and md.partitions else 1
            self._partitions[topic] = partitions
        for p in range(partitions):
            try:
                self.producer.produce_to(topic, p, value)
            except BufferError:
                self.producer.poll(0.1)
                self.producer.produce_to(topic, p, value)
            except KafkaException as exc:
                self._raise(exc, f"produce to {topic}")
        return partitions

    def produce_schema(self, fingerprint_hex: str, schema_json: str, topic: str, kind: str) -> None:
        body = json.dumps({"fingerprint": fingerprint_hex, "schema": schema_json,
                           "topic": topic, "kind": kind}, sort_keys=True).encode()
        self.produce(self.schemas_topic, body, fingerprint_hex.encode())

    def commit(self, position: Position, timeout: float = 60.0) -> None:
        """Commit the open transaction (begun if needed) with ``position`` as its checkpoint."""
        assert self.producer is not None
        if self.lease is not None and self.lease.lost:
            self.abort()
            raise LeaseLost(f"this instance lost the lease of source {self.source}: its open "
                            f"transaction was aborted, and it exits without committing; the "
                            f"instance holding the lease now goes on from the checkpoint")
        if not self.in_tx:
            self._begin()  # a checkpoint alone is the transaction's first record anyway
        self.produce(self.positions_topic, position.to_json(), self.source.encode())
        started = time.monotonic()
        retries = int(self.cfg["commit_retries"])
        while True:
            try:
                self.producer.commit_transaction(timeout)
                break
            except KafkaException as exc:
                err = _kafka_error(exc)
                if err.fatal():
                    self.in_tx = False
                    self._raise(exc, "commit")
                if err.retriable() and retries > 0 and not self.stopping:
                    retries -= 1
                    log.warning("commit failed (%s), retrying", err.str())
                    continue
                if err.retriable() and not err.txn_requires_abort():
                    # The outcome is unknown: the commit may yet complete. Only this call can be
                    # resumed; an abort is refused (_CONFLICT, "commit in progress") for as long
                    # as it is pending, and retrying one would spin for good. A new producer's
                    # init_transactions settles the transaction either way, and the checkpoint
                    # is then read back from the topic (reset), not taken from memory.
                    self.in_tx = False
                    raise ProducerBroken(f"the commit's outcome is unknown ({err.str()}, "
                                         f"{int(self.cfg['commit_retries'])} retries): replacing "
                                         f"the producer") from None
                self.abort()
                raise BatchAborted(f"commit failed ({err.str()}); the batch was aborted and "
                                   f"will be re-read from {self.committed.describe() if self.committed else 'the start'}") from None
        self.in_tx = False
        self.last_commit_s = time.monotonic() - started
        self.committed = position
        self._take_turns()

    def abort(self) -> None:
        """Abort the open transaction; while Kafka is unreachable, keep trying (unless stopping).

        librdkafka needs an abort that timed out to be called again until it completes; a new
        transaction can't begin before that.
        """
        assert self.producer is not None
        if not self.in_tx and not self._abort_pending:
            return
        self.in_tx = False
        self._abort_pending = True
        warned = False
        while True:
            try:
                self.producer.abort_transaction(float(self.cfg["shutdown_timeout_s"]))
                self._abort_pending = False
                return
            except KafkaException as exc:
                err = _kafka_error(exc)
                if err.fatal():
                    self._abort_pending = False
                    self._raise(exc, "abort")
                if self.stopping or not err.retriable():
                    log.warning("aborting the transaction failed: %s; the broker aborts it when "
                                "transaction.timeout.ms expires", err.str())
                    return
                if not warned:
                    log.warning("Kafka unavailable (%s): retrying the abort until it completes",
                                err.str())
                    warned = True

    def _raise(self, exc: KafkaException, what: str) -> None:
        err = _kafka_error(exc)
        name = err.name()
        if name in ("_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH") or "fenced" in err.str().lower():
            raise Fenced(f"this instance was fenced: another streamer started with the same "
                         f"transactional.id {self.txid} (same namespace and source.name). "
                         f"Exiting without advancing the position; stop the other instance or "
                         f"give this one its own namespace/source.name") from None
        if err.fatal():
            raise ProducerBroken(f"Kafka fatal error during {what}: {err.str()}") from None
        # _STATE: the transaction already failed (e.g. messages timed out while the broker was
        # down) and only accepts an abort; the batch is re-read after it.
        if err.txn_requires_abort() or err.retriable() or err.code() == KafkaError._STATE:
            self.abort()
            raise BatchAborted(f"{what} failed ({err.str()}); the batch was aborted") from None
        raise KafkaFatal(f"Kafka error during {what}: {err.str()}") from None

    def queue_depth(self) -> int:
        """Messages waiting in the producer's queue."""
        return sum(len(p) for p in self.producers)

    def read_schema_records(self) -> List[Dict[str, Any]]:
        """Every committed record of the namespace's schema topic, in offset order."""
        if not self.prepared:
            self.prepare()
        return read_schema_records(self.cfg["kafka"], self.cfg["namespace"])

    def topics_in(self, names: List[str]) -> List[str]:
        return [n for n in names if n in self._topics]
