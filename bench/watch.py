"""A read_committed view of a namespace's topics: what a consumer can see, and when.

Messages count only once their Kafka transaction committed, so the time a message is first seen
here is its commit-visible time (plus this consumer's fetch wait, kept at 10 ms).
"""
from __future__ import annotations

import time
from typing import Any, List

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from . import env

_IGNORED = (KafkaError._PARTITION_EOF, KafkaError.UNKNOWN_TOPIC_OR_PART)


class Watcher:
    """Follows every topic named ``{prefix}...`` from its first offset, as topics appear."""

    def __init__(self, prefix: str, rescan_s: float = 0.5):
        self.prefix = prefix
        self.rescan_s = rescan_s
        self.assigned: List[str] = []
        self._next_scan = 0.0
        self.consumer = Consumer({
            "bootstrap.servers": env.KAFKA, "group.id": env.unique("bench-watch-"),
            "enable.auto.commit": False, "isolation.level": "read_committed",
            "auto.offset.reset": "earliest", "fetch.wait.max.ms": 10,
            "topic.metadata.refresh.interval.ms": 1000})

    def _scan(self) -> None:
        md = self.consumer.list_topics(timeout=10)
        for name, topic in md.topics.items():
            if name.startswith(self.prefix) and name not in self.assigned and not topic.error \
                    and topic.partitions:
                self.consumer.incremental_assign([TopicPartition(name, p, 0) for p in topic.partitions])
                self.assigned.append(name)

    def poll(self, timeout: float = 0.1, limit: int = 10000) -> List[Any]:
        """Newly visible messages (at most ``limit``); raises on a consumer error."""
        now = time.monotonic()
        if now >= self._next_scan:
            self._scan()
            # Until a topic shows up, look often: the first batch's visible time is start_s.
            self._next_scan = now + (self.rescan_s if self.assigned else 0.05)
        if not self.assigned:
            time.sleep(timeout)
            return []
        # poll() returns at the first message; consume(n, timeout) would wait for all n.
        first = self.consumer.poll(timeout)
        if first is None:
            return []
        out = []
        for msg in [first] + self.consumer.consume(num_messages=limit, timeout=0):
            err = msg.error()
            if err is None:
                out.append(msg)
            elif err.code() not in _IGNORED:
                raise RuntimeError(f"reading {msg.topic()}: {err.str()}")
        return out

    def close(self) -> None:
        self.consumer.close()

    def __enter__(self) -> "Watcher":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def delete_namespace(namespace: str) -> None:
    """Drop a bench run's topics so repeated runs don't fill the shared broker."""
    # log_level 4: librdkafka's notice about purged background events at teardown is noise here.
    client = AdminClient({"bootstrap.servers": env.KAFKA, "log_level": 4})
    names = [t for t in client.list_topics(timeout=10).topics if t.startswith(namespace + ".")]
    if not names:
        return
    for topic, fut in client.delete_topics(names, operation_timeout=30).items():
        try:
            fut.result(timeout=60)
        except Exception as exc:  # noqa: BLE001 - a leftover topic is not a bench failure; say so
            print(f"bench: could not delete topic {topic}: {exc}")
