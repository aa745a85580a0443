"""What the stages of one pipeline share, built for each binlog connection.

A stage reads the stream's state here (the tracker, the table versions), produces through
``produce`` (counted by the metrics), opens the batch with ``open()`` before it does, and tells
the others what it published through two hook lists:

- ``published``: ``(tracker, topic, n, ts_ms) -> messages produced``, after any messages of a
  source transaction went to a table's topic (transaction metadata counts them);
- ``changes``: ``(tv, event, op) -> None``, after a rows event was published (an open snapshot
  window drops the keys it changed);
- ``ended``: ``(txid, ts_ms) -> messages produced``, when a source transaction's messages are
  all out: at its commit event, or after a prepared XA transaction's rows (transaction metadata
  writes its END).

A stage that is not configured registers nothing, so nothing is tested for it on the way.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional

from streamer.config import Config

Produce = Callable[[str, Optional[bytes], Optional[bytes]], None]


class Context:
    __slots__ = ("cfg", "publisher", "tracker", "tables", "clock", "metrics", "produce",
                 "announce", "policy", "published", "changes", "ended")

    def __init__(self, cfg: Config, publisher: Any, tracker: Any, tables: Any,
                 clock: Any, metrics: Any, announce: Any, policy: Any) -> None:
        self.cfg = cfg
        self.publisher = publisher
        self.tracker = tracker
        self.tables = tables
        self.clock = clock
        self.metrics = metrics
        self.produce: Produce = metrics.counting(publisher.produce)
        self.announce = announce
        self.policy = policy
        self.published: List[Callable[[Any, str, int, int], int]] = []
        self.changes: List[Callable[[Any, Any, str], None]] = []
        self.ended: List[Callable[[str, int], int]] = []

    def open(self) -> None:
        """Begin the batch's transaction, if none is open, before producing."""
        self.policy.open()

    def announce_current(self, tv: Any) -> None:
        """Make ``tv`` the table's current version, announcing it when it was not: a version
        that a snapshot described, or that a statement without rows (TRUNCATE) is published
        with, is the table's latest as much as a table map's."""
        if self.tables.make_current(tv):
            self.announce.table(tv)

    def after_publishing(self, tracker: Any, topic: str, n: int, ts_ms: int) -> int:
        """Run the ``published`` hooks; the messages they produced."""
        sent = 0
        for hook in self.published:
            sent += hook(tracker, topic, n, ts_ms)
        return sent

    def transaction_ended(self, txid: str, ts_ms: int) -> int:
        """Run the ``ended`` hooks; the messages they produced."""
        sent = 0
        for hook in self.ended:
            sent += hook(txid, ts_ms)
        return sent

    def everywhere(self, topic: str, value: bytes, headers: Any = None) -> int:
        """A keyless message in every partition of ``topic`` (a TRUNCATE), its bytes counted."""
        n = self.publisher.produce_everywhere(topic, value, headers)
        self.metrics.bytes += n * len(value)
        return n
