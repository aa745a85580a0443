"""Hot standby: which of several instances of one source streams, decided by Kafka's own group
coordination.

Instances with the same namespace and ``source.name`` and ``ha.enabled`` join one consumer group,
``streamer.{namespace}.{source.name}.lease``, subscribed to the one-partition topic
``{namespace}.__lease``. The coordinator assigns that partition to one member: the lease. Its
holder is active and streams; the others wait, their process, imports and Kafka connection warm.
Nothing is ever produced to the topic: only its assignment matters.

- **Taking over.** The lease is taken before the transactional producer starts
  (``engine.loop``); that producer's ``init_transactions`` then fences the previous holder's
  producer before the checkpoint is read, so a previous holder that was only paused (a zombie)
  can't commit once it wakes.
- **Losing it.** A holder whose partition is revoked or lost (its session expired, say after a
  SIGSTOP) stops at once: ``lost`` is set, the engine is asked to stop, and the publisher
  refuses every commit from then on (``Publisher.commit``), aborting instead. The process then
  exits with an error, and its service manager starts it again, as a standby.
- **Timing.** A holder that stops cleanly leaves the group after its last commit, and the
  coordinator hands the partition on at the standby's next heartbeat (``ha.heartbeat_interval_ms``).
  A holder that dies is noticed when its session expires (``ha.session_timeout_ms``; brokers
  accept 6000 ms and up by default, ``group.min.session.timeout.ms``).

The consumer is polled from its own thread (its callbacks run in ``poll``), never from the
engine's hot loop.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Dict, Optional

from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient

from streamer.config import Config
from streamer.errors import KafkaFatal
from streamer.kafka import logs
from streamer.kafka.admin import create_topics
from streamer.kafka.settings import client_settings, transactional_id

log = logging.getLogger(__name__)


def lease_names(cfg: Config) -> Dict[str, str]:
    ns, source = cfg.namespace, cfg.source.name
    return {"topic": f"{ns}.__lease", "group": f"{transactional_id(ns, source)}.lease"}


class Lease:
    """The lease of one source; a context manager whose exit gives it up (leaves the group)."""

    def __init__(self, cfg: Config, on_lost: Callable[[], None]) -> None:
        ha = cfg.ha
        names = lease_names(cfg)
        self.topic, self.group = names["topic"], names["group"]
        self.bootstrap = cfg.kafka["bootstrap.servers"]
        self.replication = cfg.topics.replication_factor
        # Every client setting the other clients get (TLS, SASL, sockets), not only some: with
        # one missing the consumer would retry its connection for good, a standby for ever.
        self.client = client_settings(cfg.kafka)
        self.conf = logs.client_conf(dict(self.client, **{
            "bootstrap.servers": self.bootstrap, "group.id": self.group,
            "session.timeout.ms": ha.session_timeout_ms,
            "heartbeat.interval.ms": ha.heartbeat_interval_ms,
            # Sticky: a standby joining must not move the lease off a live holder.
            "partition.assignment.strategy": "cooperative-sticky",
            "enable.auto.commit": False, "enable.auto.offset.store": False,
            "auto.offset.reset": "latest"}))
        self.on_lost = on_lost
        self.held = threading.Event()
        self.lost = False
        self.releasing = False
        self.takeovers = 0  # times this process took the lease
        self.since = time.time()  # of the current role
        self._stop = threading.Event()
        self._consumer: Optional[Any] = None
        self._thread = threading.Thread(target=self._run, name="streamer-lease", daemon=True)
        self._error: Optional[BaseException] = None

    @property
    def role(self) -> str:
        return "active" if self.held.is_set() and not self.lost else "standby"

    def __enter__(self) -> "Lease":
        self._ensure_topic()
        self._consumer = Consumer(self.conf)
        self._consumer.subscribe([self.topic], on_assign=self._assigned,
                                 on_revoke=self._revoked, on_lost=self._revoked)
        self._thread.start()
        log.info("standby: waiting for the lease of source %s (group %s on %s)",
                 self.group.split(".")[-2], self.group, self.topic)
        return self

    def wait(self, stopping: Callable[[], bool]) -> bool:
        """Block until the lease is held (True) or ``stopping()`` (False)."""
        while not self.held.wait(0.1):
            if self._error is not None:
                raise self._error
            if stopping():
                return False
        return True

    def __exit__(self, *exc: Any) -> None:
        self.releasing = True  # the revocation closing the consumer brings is no loss
        self._stop.set()
        self._thread.join(30)

    # -- the consumer's thread ---------------------------------------------------------------------
    def _run(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        try:
            while not self._stop.is_set():
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is not None and msg.error().fatal():
                    raise KafkaFatal(f"the lease's consumer failed: {msg.error().str()}")
        except BaseException as exc:  # noqa: BLE001 - handed to the engine's thread
            self._error = exc
            if self.held.is_set():
                self._lose(f"the lease's consumer failed ({exc})")
        finally:
            try:
                consumer.close()  # leaves the group: a standby takes over at its next heartbeat
            except (KafkaException, RuntimeError) as exc:
                log.warning("closing the lease's consumer: %s", exc)

    def _assigned(self, consumer: Any, partitions: Any) -> None:
        if partitions and not self.held.is_set() and not self.lost and not self.releasing:
            self.takeovers += 1
            self.since = time.time()
            log.warning("took the lease of %s: this instance is now the active one", self.group)
            self.held.set()

    def _revoked(self, consumer: Any, partitions: Any) -> None:
        if partitions and self.held.is_set() and not self.lost and not self.releasing:
            self._lose("the group coordinator took the lease away (this instance's session "
                       "expired, or it was paused longer than ha.session_timeout_ms)")

    def _lose(self, why: str) -> None:
        self.lost = True
        self.since = time.time()
        log.error("lost the lease of %s: %s; publishing stops now, the open transaction is "
                  "aborted, and this process exits to start again as a standby", self.group, why)
        self.on_lost()

    def _ensure_topic(self) -> None:
        admin = AdminClient(logs.client_conf(self.client))
        create_topics(admin, [self.topic], 1, self.replication, {})
