"""Kafka transactions: two transactional producers taking turns, a batch and its checkpoint in one.

Every batch is one transaction holding its messages, any new schemas and the checkpoint (the
position after the batch) in ``{namespace}.__positions``. A read_committed consumer therefore sees
a batch and its checkpoint together or not at all, which is what makes restarts exactly-once.
No per-message delivery callback is registered: a failed delivery fails the commit of the batch.

A batch's transaction opens with the last committed checkpoint produced again, so that the
positions topic joins the transaction with the batch's first messages; otherwise it would join
only at commit, and each commit would wait for one more broker round trip. The new checkpoint,
produced at commit, comes after it and is the one read back.

Two transactional producers take turns, one transaction each. The broker answers a commit once it
has logged the decision, and writes the markers and the transaction's end after that; until then,
the same producer's next transaction is refused its partitions (CONCURRENT_TRANSACTIONS), and
librdkafka tries again after a fixed 20 ms. The other producer's transaction does not wait for
that end (docs/benchmarks-history.md, "Two producers taking turns"). Both producers' ids belong to this
source (``transactional_ids``) and both are fenced at a start; only one transaction is ever open,
the next begins after the last commit returned, so their messages are in the topics in commit
order, as with one producer.
"""
from __future__ import annotations

import logging
import time
import uuid
from typing import Any, Dict, List, Optional

from confluent_kafka import KafkaError, KafkaException

from streamer.config import Config
from streamer.errors import (BatchAborted, Fenced, KafkaFatal, LeaseLost, OversizedRow,
                             ProducerBroken, RefusedRow)
from streamer.kafka.rdkafka import KEY_SHOWN, Producer, Refused
from streamer.kafka.settings import kafka_error as _kafka_error
from streamer.kafka.settings import client, producer_settings, transactional_ids
from streamer.kafka.sink import Headers
from streamer.position import Position

log = logging.getLogger(__name__)

# A Kafka outage makes the queue fill again and again; say so once, not once per message.
QUEUE_FULL_LOG_EVERY_S = 300.0
# A topic that doesn't exist (deleted while the streamer ran): librdkafka's and the broker's code.
GONE = (KafkaError._UNKNOWN_TOPIC, KafkaError.UNKNOWN_TOPIC_OR_PART)
WAYS_ON = ("keep the big column out with tables.columns.exclude or mask ('truncate:N'), then "
           "restart: the position is before this row")


# What init_transactions ends with while the coordinator is still getting ready: librdkafka
# retries these itself, and when the wait ends first, it gives the last one, not a time-out.
NOT_READY = (KafkaError._TIMED_OUT, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
             KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR)


def _coordinator_not_ready(err: KafkaError) -> bool:
    return err.code() in NOT_READY and not err.fatal()


def _key_text(key: Optional[bytes], length: int) -> str:
    """A message's key as an error names it: its first KEY_SHOWN bytes in hex."""
    if key is None:
        return "none (a keyless table)"
    return key[:KEY_SHOWN].hex() + ("..." if length > KEY_SHOWN else "")


class Transactions:
    """The producer pair of one source and its transactions. ``committed`` is the last position
    committed (or read back); a subclass supplies ``prepare()`` (the internal topics exist),
    ``partitions_of(topic)``, ``reachable()`` and ``read_checkpoint()``."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        ns = cfg.namespace
        self.source = cfg.source.name
        self.source_key = self.source.encode()
        self.positions_topic = f"{ns}.__positions"
        self.txids = transactional_ids(ns, self.source)
        self.txid = self.txids[0]
        self.kafka_conf = dict(cfg.kafka)
        # This process's checkpoints say so (Position.run): a reset tells its own from a newer
        # instance's.
        self.run = uuid.uuid4().hex[:16]
        self.in_tx = False
        self.committed: Optional[Position] = None
        self.prepared = False  # the internal topics are known to exist (prepare)
        self._queue_full_logged_at = -1e9
        # The producer whose turn it is, and both (the module's docstring says why two).
        self.producer: Optional[Producer] = None
        self.producers: List[Producer] = []
        self._turn = 0
        self.last_commit_s = 0.0
        # Set by the pipeline's signal handler: waits on an unavailable Kafka give up early.
        self.stopping = False
        self._abort_pending = False
        # A hot standby's lease (kafka.lease): once lost, no commit goes out again.
        self.lease: Optional[Any] = None

    def prepare(self) -> None:
        self.prepared = True

    def partitions_of(self, topic: str) -> int:
        return 1

    def reachable(self) -> bool:
        return True

    def read_checkpoint(self) -> Optional[Position]:
        return self.committed

    def topic_config(self, topic: str) -> Dict[str, str]:
        """The topic's settings, when they can be read (an error names them)."""
        return {}

    def _producer_settings(self) -> Dict[str, Any]:
        """The producer's settings: the defaults, overridden by the config's kafka section."""
        return producer_settings(self.kafka_conf)

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
                started.append(client(Producer, dict(conf, **{
                    "transactional.id": txid, "enable.idempotence": True, "acks": "all"})))
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
        first = self.cfg.kafka_connect_timeout_s
        try:
            try:
                producer.init_transactions(first)
            except KafkaException as exc:
                err = _kafka_error(exc)
                if not _coordinator_not_ready(err) or not self.reachable():
                    raise
                # The brokers answer; the coordinator is slow (loading its log after a start,
                # say): wait on. librdkafka retries within the wait.
                log.warning("Kafka's transaction coordinator has not accepted the producer in "
                            "%.0f s (%s); waiting longer", first, err.str())
                producer.init_transactions(self.cfg.shutdown_timeout_s + 30)
        except KafkaException as exc:
            err = _kafka_error(exc)
            head = (f"Kafka at {conf.get('bootstrap.servers')} did not accept the transactional "
                    f"producer {txid}: {err.str()}. ")
            if err.code() == KafkaError.INVALID_TRANSACTION_TIMEOUT or \
                    "transaction timeout is larger" in err.str().lower():
                # (Kafka's text calls the broker's setting max.transaction.timeout.ms.)
                raise KafkaFatal(
                    f"{head}Set kafka.transaction.timeout.ms (now "
                    f"{conf.get('transaction.timeout.ms')}) to at most the brokers' "
                    f"transaction.max.timeout.ms (900000 unless set), or raise theirs") from None
            raise KafkaFatal(f"{head}Check that the brokers are reachable and support "
                             f"transactions, and that this source may use the transactional ids "
                             f"{self.txids[0]}* (kafka.bootstrap.servers; "
                             f"kafka_connect_timeout_s is {first:g})") from None

    def _take_turns(self) -> None:
        """After a commit: the next transaction goes to the other producer."""
        if len(self.producers) > 1:
            self._turn = 1 - self._turn
            self.producer = self.producers[self._turn]

    def replace_producers(self) -> None:
        """Replace the producers after a fatal error other than fencing (e.g. INVALID_TXN_STATE
        after aborting while a new topic's partitions were being added), or a commit whose
        outcome is unknown. The new producers' init_transactions settle whatever the old ones
        left open, which may complete a commit whose end was already sent (the publisher reads
        the checkpoint back after this). Kafka being away is waited for."""
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

    # -- transactions ---------------------------------------------------------------------------
    def begin(self) -> None:
        """Opens a batch's transaction, with the positions topic in it from the start (above)."""
        self._begin()
        if self.committed is not None:
            self.produce(self.positions_topic, self.committed.to_json(), self.source_key)

    def _begin(self) -> None:
        assert self.producer is not None
        if not self.prepared:
            self.prepare()
        if self._abort_pending:
            self.abort()
        forget = getattr(self.producer, "forget_failures", None)
        if forget is not None:
            forget()  # of a transaction that ended: not this one's
        try:
            self.producer.begin_transaction()
        except KafkaException as exc:
            self._raise(exc, "begin a transaction")
        self.in_tx = True

    def produce(self, topic: str, value: Optional[bytes], key: Optional[bytes],
                headers: Optional[Headers] = None) -> None:
        """Queue one message in the open transaction; blocks (backpressure) while the queue is full."""
        try:
            self.producer.produce(topic, value, key, headers)  # type: ignore[union-attr]
        except BufferError:
            self._wait_for_room(topic, value, key, headers)
        except KafkaException as exc:
            code = _kafka_error(exc).code()
            if code == KafkaError.MSG_SIZE_TOO_LARGE:
                self._oversized(topic, value, key)
            if code in GONE:
                self._gone(topic)
            self._raise(exc, f"produce to {topic}")

    def _gone(self, topic: str) -> None:
        """A topic deleted while the streamer runs: the batch is read again, and the topic made
        again first, as a restart would (librdkafka refuses every message to it from then on)."""
        self.forget_topic(topic)
        self.abort()
        raise BatchAborted(f"topic {topic} is gone (deleted while the streamer ran?): the batch "
                           f"was aborted, and the topic is made again before it is read again")

    def forget_topic(self, topic: str) -> None:
        """``topic`` is to be made sure of again (Publisher: it was deleted)."""

    def topic_exists(self, topic: str) -> Optional[bool]:
        """Whether ``topic`` exists (Publisher: as a broker says); None: can't be told."""
        return None

    def _oversized(self, topic: str, value: Optional[bytes], key: Optional[bytes]) -> None:
        """Stop at a message no retry can publish, naming it and the ways on. The batch is
        aborted, so the position stays before the row: after the fix, nothing is lost."""
        size = len(value or b"") + len(key or b"")
        limit = self._producer_settings()["message.max.bytes"]
        self.abort()
        raise OversizedRow(
            f"a row change of topic {topic} is {size} bytes, over the {limit} bytes Kafka takes "
            f"(kafka.message.max.bytes; the topic's max.message.bytes and the broker's "
            f"message.max.bytes must allow it too); its key, Avro-encoded: "
            f"{_key_text(key, len(key or b''))}. Raise those limits, or {WAYS_ON}")

    def _stop_if_refused(self) -> str:
        """After a failed transaction is aborted: stop when Kafka refused one of its messages in
        a way no retry can change (too large for its topic, or invalid there), naming it, rather
        than read the batch again and again into the same refusal. Otherwise, what Kafka refused
        and why, for the warning of the retry ("" if nothing): once a transaction has failed,
        the calls after it say only "Erroneous state". A topic refused as unknown is made again
        before the retry (``_gone``)."""
        too_large: Optional[Refused] = None
        refused: Optional[Refused] = None
        for producer in self.producers:
            seen, other = getattr(producer, "too_large", None), getattr(producer, "refused", None)
            if seen is not None:
                producer.too_large = None
                if too_large is None or seen.size > too_large.size:
                    too_large = seen
            if other is not None:
                producer.refused = None
                refused = refused or other
        if too_large is not None:
            raise self._too_large(too_large)
        if refused is None:
            return ""
        if refused.err == KafkaError.INVALID_RECORD:
            raise self._invalid(refused)
        said = (f"; {refused.count} message(s) failed, the first of topic {refused.topic}: "
                f"{refused.reason} ({KafkaError(refused.err).name()})")
        if refused.err in GONE:
            self.forget_topic(refused.topic)
        elif refused.err == KafkaError._MSG_TIMED_OUT and \
                self.topic_exists(refused.topic) is False:
            # librdkafka may go on sending to a deleted topic's partition, as the broker calls
            # it unknown for a while, until its messages time out: the same batch then timed out
            # again and again (kafka.message.timeout.ms each), the topic never made again.
            self.forget_topic(refused.topic)
            said += (f"; topic {refused.topic} no longer exists (deleted while the streamer "
                     f"ran?): it is made again before the batch is read again")
        return said

    def _txn_failure(self) -> str:
        """Why the open transaction failed, as librdkafka logged it, for a call refused after it
        ("Erroneous state"); a topic the streamer may not write names its fix."""
        failure = getattr(self.producer, "txn_failure", None)
        if not failure:
            return ""
        partition = getattr(self.producer, "partition_failure", None)
        if partition:
            failure += f"; {partition}"
        grant = ("; grant the streamer's principal WRITE on the topic: it goes on by itself "
                 "once granted" if "TOPIC_AUTHORIZATION_FAILED" in failure else "")
        return f": the transaction had failed: {failure}{grant}"

    def _too_large(self, refused: Refused) -> OversizedRow:
        topic = refused.topic
        text = self.topic_config(topic).get("max.message.bytes")
        limit = int(text) if text is not None and text.isdigit() else None
        batch = "" if limit is None or refused.size > limit else (
            f"; the message is under it, the batch it went in was not: set kafka.batch.size "
            f"below {limit}")
        return OversizedRow(
            f"Kafka refused {refused.count} message(s) as too large (MESSAGE_TOO_LARGE); the "
            f"largest, {refused.size} bytes, is a row change of topic {topic}, which takes "
            f"{'fewer' if limit is None else limit} bytes (its max.message.bytes){batch}; its "
            f"key, Avro-encoded: {_key_text(refused.key, refused.key_len)}. Raise the topic's "
            f"limit (kafka-configs.sh --alter --entity-type topics --entity-name {topic} "
            f"--add-config max.message.bytes=N), or {WAYS_ON}")

    def _invalid(self, refused: Refused) -> RefusedRow:
        """INVALID_RECORD: the topic's settings refuse the message. A compacted topic refuses
        every keyless record (a TRUNCATE, a row of a table without a primary key); a broker may
        validate more (a schema, on some distributions)."""
        topic = refused.topic
        policy = self.topic_config(topic).get("cleanup.policy", "")
        head = (f"Kafka refused {refused.count} message(s) of topic {topic} as invalid "
                f"(INVALID_RECORD: {refused.reason})")
        if refused.key is None and "compact" in policy:
            return RefusedRow(
                f"{head}: the topic is compacted (cleanup.policy {policy}), which takes only "
                f"keyed records, and the message has none: a TRUNCATE, or a row of a table "
                f"without a primary key. Nothing from it on was published. Set the topic's "
                f"cleanup.policy to delete (kafka-configs.sh --alter --entity-type topics "
                f"--entity-name {topic} --add-config cleanup.policy=delete), or leave the table "
                f"out (tables.exclude), then restart: the position is before this message")
        return RefusedRow(
            f"{head}: the topic's settings refuse it (the broker's log names the check that "
            f"failed); its key, Avro-encoded: {_key_text(refused.key, refused.key_len)}. Nothing "
            f"from it on was published. Change the topic's settings (kafka-configs.sh "
            f"--describe --entity-type topics --entity-name {topic}), then restart: the position "
            f"is before this message")

    def _wait_for_room(self, topic: str, value: Optional[bytes], key: Optional[bytes],
                       headers: Optional[Headers]) -> None:
        now = time.monotonic()
        if now - self._queue_full_logged_at > QUEUE_FULL_LOG_EVERY_S:
            self._queue_full_logged_at = now
            self._say_queue_full()
        while True:
            if self.stopping:
                self.abort()
                raise BatchAborted("stopping while the producer queue is full; the batch was "
                                   "aborted and is re-read on the next start")
            self.producer.poll(0.1)  # type: ignore[union-attr]
            try:
                self.producer.produce(topic, value, key, headers)  # type: ignore[union-attr]
                return
            except BufferError:
                continue
            except KafkaException as exc:
                self._raise(exc, f"produce to {topic}")

    def _say_queue_full(self) -> None:
        """The queue fills for a moment whenever more is produced than Kafka has taken yet (a
        batch or snapshot chunk larger than the queue), and for as long as Kafka is slow or down:
        the line names both, and the limits."""
        conf = self._producer_settings()
        log.warning("producer queue full (kafka.queue.buffering.max.messages %s, "
                    "queue.buffering.max.kbytes %s): pausing reads (binlog, snapshot) until Kafka "
                    "has taken some. For a moment, while a batch or snapshot chunk larger than the "
                    "queue is sent, this is backpressure; if it lasts, Kafka is slow or down",
                    conf["queue.buffering.max.messages"], conf["queue.buffering.max.kbytes"])

    def produce_everywhere(self, topic: str, value: bytes,
                           headers: Optional[Headers] = None) -> int:
        """Queue ``value`` (keyless) once in every partition of ``topic``: a TRUNCATE, which a
        consumer of any partition must see before that partition's later changes. Returns how
        many messages that was."""
        assert self.producer is not None
        partitions = self.partitions_of(topic)
        for p in range(partitions):
            try:
                self.producer.produce_to(topic, p, value, None, headers)
            except BufferError:
                self.producer.poll(0.1)
                self.producer.produce_to(topic, p, value, None, headers)
            except KafkaException as exc:
                self._raise(exc, f"produce to {topic}")
        return partitions

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
        position.run = self.run
        self.produce(self.positions_topic, position.to_json(), self.source_key)
        started = time.monotonic()
        retries = self.cfg.commit_retries
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
                                         f"{self.cfg.commit_retries} retries): replacing "
                                         f"the producer") from None
                self.abort()
                why = self._stop_if_refused()
                raise BatchAborted(f"commit failed ({err.str()}){why}; the batch was aborted and "
                                   f"will be re-read from {self.committed.describe() if self.committed else 'the start'}") from None
        self.in_tx = False
        self.last_commit_s = time.monotonic() - started
        self.committed = position
        self._take_turns()

    def abort(self, drain: bool = False) -> None:
        """Abort the open transaction; while Kafka is unreachable, keep trying (unless stopping).

        librdkafka needs an abort that timed out to be called again until it completes; a new
        transaction can't begin before that. ``drain``: a healthy transaction dropped by choice
        (engine.stages.savepoints) first has its messages delivered. Aborting with messages
        still queued purges them after they took their sequence numbers, and the next
        transaction then fails on the gap (OUT_OF_ORDER_SEQUENCE_NUMBER, seen with librdkafka
        2.x): one more abort, and the batch read once more.
        """
        assert self.producer is not None
        if not self.in_tx and not self._abort_pending:
            return
        if drain and self.in_tx:
            self.producer.flush(self.cfg.shutdown_timeout_s)
        self.in_tx = False
        self._abort_pending = True
        warned = False
        while True:
            try:
                self.producer.abort_transaction(self.cfg.shutdown_timeout_s)
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
            self.abort()  # (librdkafka's line saying why has been read by then)
            failure = self._txn_failure() if err.code() == KafkaError._STATE else ""
            why = self._stop_if_refused()
            raise BatchAborted(f"{what} failed ({err.str()}{failure}){why}; the batch was "
                               f"aborted") from None
        raise KafkaFatal(f"Kafka error during {what}: {err.str()}") from None

    def queue_depth(self) -> int:
        """Messages waiting in the producer's queue."""
        return sum(len(p) for p in self.producers)


    def close_producers(self) -> None:
        """Abort what is open and close both producers. Nothing uncommitted is lost: the next
        start resumes from the checkpoint."""
        if self.producer is None:
            return
        try:
            if self.in_tx or self._abort_pending:
                self.stopping = True
                self.abort()
            for producer in self.producers:
                producer.flush(5)
        except (KafkaException, KafkaFatal) as exc:
            log.warning("closing the Kafka producer: %s", exc)
        for producer in self.producers:
            producer.close()
        self.producer = None
        self.producers = []
