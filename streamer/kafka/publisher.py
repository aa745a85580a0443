"""The Kafka edge of the engine: the publisher, a ``Sink`` (kafka.sink) on a real cluster.

It is the source's transactions (kafka.transactions: two producers taking turns, each batch and
its checkpoint in one transaction) with what they need around them: the internal topics and the
table topics made sure of (kafka.admin), the checkpoint read back (kafka.checkpoints), the writer
schemas published to ``{namespace}.__schemas``. Use it as a context manager: entering starts the
producers, which fences older instances of the source; it creates nothing until ``prepare()``.
"""
from __future__ import annotations

import json
import logging
from typing import Any, Dict, List, Optional

from confluent_kafka.admin import AdminClient

from streamer.config import Config
from streamer.errors import Fenced, KafkaFatal
from streamer.kafka import checkpoints, logs
from streamer.kafka.admin import TopicAdmin
from streamer.kafka.settings import as_int, client, client_settings
from streamer.kafka.topics import read_schema_records
from streamer.kafka.transactions import Transactions
from streamer.position import Position

log = logging.getLogger(__name__)

# Roll the compacted internal topics hourly so that compaction can drop superseded checkpoints.
COMPACTED_SEGMENT_MS = 3600 * 1000
# librdkafka's log level for a producer on its mock cluster: warnings and worse. Its notice that
# the mock replaces bootstrap.servers is for librdkafka's own tests, not a user's log.
MOCK_LOG_LEVEL = 4


class Publisher(Transactions):
    """Transactional producers plus the topic and checkpoint work they need."""

    def __init__(self, cfg: Config) -> None:
        super().__init__(cfg)
        self.schemas_topic = f"{cfg.namespace}.__schemas"
        self.admin: Optional[AdminClient] = None
        self.topics = TopicAdmin(cfg.topics, None, lambda: self.producers,
                                 self._producer_settings()["message.max.bytes"])
        self.topics.known = set()
        self.checkpoint_records_read = 0

    # -- lifetime -------------------------------------------------------------------------------
    def __enter__(self) -> "Publisher":
        """Starts the transactional producers, which fence older instances. Creates nothing:
        ``prepare()`` does, once the caller knows the other end works too."""
        self.admin = client(AdminClient, logs.client_conf(client_settings(self.kafka_conf)))
        self.topics.admin = self.admin
        try:
            self._start_producer()
        except BaseException:
            self.admin = self.topics.admin = None  # destroyed before the command returns
            raise
        return self

    @classmethod
    def in_process(cls, cfg: Config) -> "Publisher":
        """A publisher whose producers run against librdkafka's in-process mock cluster
        (``test.mock.num.brokers``): the very code of a real one, transactions and all, and
        nothing leaves the process (engine.warmup). The mock creates a topic when it is first
        produced to, so none is created here, and there is no admin client. ``close()`` ends it."""
        pub = cls(cfg.but({"kafka": {"bootstrap.servers": "127.0.0.1:9",
                                     "test.mock.num.brokers": 1, "log_level": MOCK_LOG_LEVEL}}))
        pub.topics = TopicAdmin(cfg.topics, None, lambda: pub.producers)
        pub._start_producer()
        pub.prepared = True
        return pub

    def close(self) -> None:
        self.__exit__(None, None, None)

    def __exit__(self, *exc: Any) -> None:
        self.close_producers()
        self.admin = self.topics.admin = None  # destroyed before the command returns

    # -- topics ---------------------------------------------------------------------------------
    def prepare(self) -> None:
        """The namespace's checkpoint and schema topics, created if missing. The reads and
        commits need them; ``streamer run`` calls this once MySQL has been checked, so that a
        start that can't go on leaves nothing behind in Kafka."""
        # Kafka compacts only closed segments: without a time-based roll, a checkpoint per batch
        # would pile up for days (the 1 GB default segment) and every start would read them all.
        compact = {"cleanup.policy": "compact", "segment.ms": str(COMPACTED_SEGMENT_MS)}
        self.ensure_topics([self.positions_topic, self.schemas_topic], partitions=1,
                           config=compact)
        self.prepared = True

    def ensure_topic(self, topic: str, partitions: Optional[int] = None,
                     config: Optional[Dict[str, str]] = None) -> None:
        self.topics.ensure([topic], partitions, config)

    def ensure_topic_soon(self, topic: str, partitions: Optional[int] = None,
                          config: Optional[Dict[str, str]] = None) -> None:
        self.topics.soon(topic, partitions, config)

    def ensure_topics(self, topics: List[str], partitions: Optional[int] = None,
                      config: Optional[Dict[str, str]] = None) -> None:
        self.topics.ensure(topics, partitions, config)

    def partitions_of(self, topic: str) -> int:
        return self.topics.partitions_of(topic)

    def topic_config(self, topic: str) -> Dict[str, str]:
        return self.topics.topic_config(topic)

    def forget_topic(self, topic: str) -> None:
        self.topics.known.discard(topic)
        if topic in (self.positions_topic, self.schemas_topic):
            self.prepared = False  # the next transaction makes them sure again (prepare)

    def topic_exists(self, topic: str) -> Optional[bool]:
        return self.topics.exists(topic)

    def reachable(self) -> bool:
        return self.topics.reachable()

    def produce_schema(self, fingerprint_hex: str, schema_json: str, topic: str, kind: str) -> None:
        body = json.dumps({"fingerprint": fingerprint_hex, "schema": schema_json,
                           "topic": topic, "kind": kind}, sort_keys=True).encode()
        self.produce(self.schemas_topic, body, fingerprint_hex.encode())

    # -- what Kafka holds -----------------------------------------------------------------------
    def read_checkpoint(self) -> Optional[Position]:
        """The last committed position of this source, read with read_committed."""
        found = self._read_checkpoint()
        self.committed = found
        return found

    def _read_checkpoint(self) -> Optional[Position]:
        if not self.prepared:
            self.prepare()
        # A dead producer's open transaction is aborted after transaction.timeout.ms.
        settle_s = as_int(self._producer_settings()["transaction.timeout.ms"]) / 1000.0 + 30.0
        found, self.checkpoint_records_read = checkpoints.read_checkpoint(
            client_settings(self.kafka_conf), self.positions_topic, self.source,
            self.cfg.namespace, settle_s)
        return found

    def _check_not_replaced(self, remembered: Optional[Position]) -> None:
        """Before new producers fence whoever holds the source's ids: a checkpoint committed by
        another process since the one known here means a newer instance took over (it fenced
        this one's producers already), and fencing it back would start a ping-pong."""
        try:
            found = self._read_checkpoint()
        except KafkaFatal:
            return  # Kafka is away: nobody committed meanwhile that could be read
        if found is not None and found.run and found.run != self.run and found != remembered:
            raise Fenced(f"another instance of source {self.source} committed the checkpoint "
                         f"{found.describe()} while this one's last commit had an unknown "
                         f"outcome: this instance stops and leaves the source to it")

    def read_schema_records(self) -> List[Dict[str, Any]]:
        """Every committed record of the namespace's schema topic, in offset order."""
        if not self.prepared:
            self.prepare()
        return read_schema_records(self.cfg.kafka, self.cfg.namespace)

    def reset(self) -> None:
        """Replace the producers (``replace_producers``), then read the checkpoint back: the
        new producers' init_transactions may have completed a commit whose outcome was unknown,
        so the caller resumes from the topic's checkpoint, not from memory. A checkpoint that
        another instance of the source committed meanwhile means this one was replaced: it
        exits as fenced rather than fence the newer one in turn."""
        remembered = self.committed
        self._check_not_replaced(remembered)
        self.replace_producers()
        self.topics.learn(sorted(self.topics.known))
        found = self.read_checkpoint()
        if found != remembered:
            log.warning("the checkpoint read back after the reset is %s, not the one known here: "
                        "resuming from it", found.describe() if found else "none")
