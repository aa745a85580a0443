"""The open batch: what is in it, when it opened, and when it commits.

A batch is one Kafka transaction. Live, a batch commits as soon as the reader has read all the
server has sent (at a transaction's end, or at an idle heartbeat); at a transaction's end within
``gather_ms`` of the batch's start, once nothing more arrives within the rest of it. Changes that
arrive during the commit queue up and make the next batch, so batches grow with the load (group
commit). Catching up, changes are old anyway: a commit every linger would stall reading for a
synchronous commit every few hundred rows.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, Tuple

# Changes at least this old (by the server's event time, whole seconds) mean the reader is
# catching up; batches then wait catchup_linger_ms instead of linger_ms.
CATCHUP_LAG_S = 2


class BatchClock:
    """When an open batch commits, by its age (s), given whether the reader is caught up and the
    last change's event time (the server's, whole seconds; ``wall`` is the clock to compare it
    with).

    Caught up (the server has sent nothing more), a batch commits once ``min_linger`` old: a
    change then waits for one commit, not for the linger. Otherwise it commits at ``bound``,
    which starts at ``linger``. Each commit stops reading for a Kafka round trip, so a reader
    that is still behind when its batch is cut short would stay behind: the next bound doubles,
    up to ``catchup_linger``, until a commit finds the reader caught up and it drops back to
    ``linger``. Changes ``CATCHUP_LAG_S`` old or more mean a backlog: batches then wait
    ``catchup_linger`` outright.
    """

    __slots__ = ("linger", "min_linger", "catchup_linger", "bound", "wall")

    def __init__(self, linger: float, min_linger: float, catchup_linger: float,
                 wall: Callable[[], float] = time.time) -> None:
        self.linger = linger
        self.min_linger = min(linger, min_linger)
        self.catchup_linger = max(linger, catchup_linger)
        self.bound = linger
        self.wall = wall

    def live(self, last_ts: float) -> bool:
        """Whether the last change read is under CATCHUP_LAG_S old: a live reader, not a backlog."""
        return self.wall() - last_ts < CATCHUP_LAG_S

    def due(self, age: float, caught_up: bool, last_ts: float) -> bool:
        if caught_up and age >= self.min_linger:
            return True
        # The clock is read only for a batch past its bound: this runs for every event.
        return age >= self.bound and (age >= self.catchup_linger or self.live(last_ts))

    def committed(self, caught_up: bool) -> None:
        """A batch that ``due`` called for was committed."""
        self.bound = self.linger if caught_up else min(self.catchup_linger, self.bound * 2)


class Batch:
    """The batch bookkeeping: the messages in the open transaction (``pending``), whether a
    heartbeat is in it (``beat``: committed within the linger like a change, never published),
    when it opened, and where the last commit left the stream.

    ``open()`` comes before anything is produced: it begins the transaction when none is open."""

    __slots__ = ("publisher", "monotonic", "clock", "max_messages", "idle_s", "pending", "beat",
                 "started", "last_commit", "committed_at", "gather_s")

    def __init__(self, publisher: Any, batch_cfg: Dict[str, Any], clock: Any,
                 committed_at: Tuple[str, int, int]) -> None:
        self.publisher = publisher
        self.monotonic = clock.monotonic
        self.clock = BatchClock(float(batch_cfg["linger_ms"]) / 1000.0,
                                float(batch_cfg["min_linger_ms"]) / 1000.0,
                                float(batch_cfg["catchup_linger_ms"]) / 1000.0, clock.time)
        self.max_messages = int(batch_cfg["max_messages"])
        self.idle_s = float(batch_cfg["idle_checkpoint_ms"]) / 1000.0
        # Caught up, a batch younger than this waits up to the rest of it for more changes:
        # librdkafka registers a transaction's partitions ~1 ms after its first message, and
        # the commit can't end before that, so what arrives until then costs the batch nothing
        # and saves the change a whole commit (docs/benchmarks.md, "Gathering until the
        # partitions register"). Never longer than the linger.
        self.gather_s = min(float(batch_cfg["gather_ms"]),
                            float(batch_cfg["linger_ms"])) / 1000.0
        self.pending = 0
        self.beat = False
        self.started = self.last_commit = self.monotonic()
        self.committed_at = committed_at

    def open(self) -> None:
        if not self.publisher.in_tx:
            self.publisher.begin()
            self.started = self.monotonic()

    def due(self, now: float, caught_up: bool, last_ts: float) -> bool:
        """Whether the open batch's linger is over (or the reader caught up)."""
        return (self.pending > 0 or self.beat) and \
            self.clock.due(now - self.started, caught_up, last_ts)

    def idle_due(self, now: float, tracker: Any) -> bool:
        """Whether to checkpoint with nothing to publish: tables we don't publish and DDL still
        move the position, and a restart need not re-read them. Pending changes are left to the
        linger: a reader slower than idle_checkpoint_ms would otherwise commit after every
        transaction and ignore catchup_linger_ms."""
        return not self.pending and not self.beat and not tracker.in_tx and \
            now - self.last_commit >= self.idle_s and tracker.mark() != self.committed_at

    def committed(self, now: float, mark: Tuple[str, int, int]) -> None:
        self.pending = 0
        self.beat = False
        self.last_commit = now
        self.committed_at = mark
