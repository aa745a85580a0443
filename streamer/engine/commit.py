"""When a batch commits: the one commit policy of a pipeline.

A batch is one Kafka transaction. Live, a batch commits as soon as the reader has read all the
server has sent (at a transaction's end, or at an idle heartbeat); at a transaction's end within
``gather_ms`` of the batch's start, once nothing more arrives within the rest of it. Changes that
arrive during the commit queue up and make the next batch, so batches grow with the load (group
commit). Catching up, changes are old anyway: a commit every linger would stall reading for a
synchronous commit every few hundred rows, so batches wait ``catchup_linger_ms`` or
``max_messages``. With nothing to publish, an idle checkpoint still moves the position past
tables that are not published and DDL, so a restart need not re-read them.

A snapshot's rows (``in_background``) wait for no reader: a batch of those alone commits at its
chunk's end (``request_commit``) or ``catchup_linger_ms`` old, not at every idle heartbeat. The
binlog is idle during a snapshot of a quiet source, its heartbeat came every 20 ms, and each
commit stopped the snapshot for its Kafka round trip (~17 % of a wide snapshot's time:
docs/benchmarks.md, "A snapshot's rows commit with their chunk"). Nor do they count towards
``max_messages`` (``full``): a chunk is bounded by its own size (``snapshot.chunk_bytes``,
``chunk_rows``), and a wide table's 31,000-row chunks were cut in two transactions, twice the
commits (docs/benchmarks.md, "One transaction a chunk"). A change of the stream's own in the
batch makes it commit as any other.

The policy owns what is pending, the heartbeat flag, the linger and gather waits and the hooks
that run when the stream is idle; stages only add what they produced (``after``), ask for a
commit at the end of the transaction (``request_commit``), or say a heartbeat arrived.
"""
from __future__ import annotations

import time
from typing import Any, Callable, List, Tuple

from pymysqlreplication.event import HeartbeatLogEvent

from streamer.config import Config
from streamer.position import Position

# Changes at least this old (by the server's event time, whole seconds) mean the reader is
# catching up; batches then wait catchup_linger_ms instead of linger_ms.
CATCHUP_LAG_S = 2


class Linger:
    """How long an open batch may wait, by its age (s), given whether the reader is caught up and
    the last change's event time (the server's, whole seconds; ``wall`` is the clock to compare it
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


class StoppedInsideEvent(Exception):
    """The stop was requested and honoured at a batch cut inside an event (``CommitPolicy.cut``):
    the checkpoint just committed says where in it the stream is."""


class Totals:
    """What a process published, across connections: read by the warm-up and the stop line."""

    __slots__ = ("published", "batches")

    def __init__(self) -> None:
        self.published = 0
        self.batches = 0


Hook = Callable[[], int]


class CommitPolicy:
    """Decides, after every event, whether the open batch commits; commits it with the tracker's
    checkpoint and the parts stages add to it (``checkpoint_parts``).

    ``control`` has ``stop_requested``; ``reader`` has ``more_arrived()`` and optionally
    ``arrives_within(seconds)``. ``caught_up_hooks`` run when an idle heartbeat says the reader
    read all there is (they return messages produced), and ``caught_up_commit_hooks`` right after
    a commit made caught up (what they produce goes in the next batch): the stream would wait for
    the server otherwise; ``idle_hooks`` when, besides, nothing is open (they return True once
    done, and are then dropped)."""

    __slots__ = ("publisher", "tracker", "reader", "control", "metrics", "totals", "monotonic",
                 "linger", "max_messages", "idle_s", "gather_s", "arrives_within", "cfg",
                 "pending", "beat", "started", "last_commit", "committed_at", "last_ts",
                 "commit_requested", "checkpoint_parts", "caught_up_hooks", "idle_hooks",
                 "after_commit", "caught_up_commit_hooks", "background")

    def __init__(self, cfg: Config, publisher: Any, tracker: Any, reader: Any,
                 control: Any, metrics: Any, clock: Any, totals: Totals,
                 after_commit: Callable[[], None] = lambda: None) -> None:
        batch = cfg.batch
        self.cfg = cfg
        self.publisher = publisher
        self.tracker = tracker
        self.reader = reader
        self.control = control
        self.metrics = metrics
        self.totals = totals
        self.monotonic = clock.monotonic
        self.linger = Linger(batch.linger_s, batch.min_linger_s, batch.catchup_linger_s,
                             clock.time)
        self.max_messages = batch.max_messages
        self.idle_s = batch.idle_checkpoint_s
        # Caught up, a batch younger than this waits up to the rest of it for more changes:
        # librdkafka registers a transaction's partitions ~1 ms after its first message, and
        # the commit can't end before that, so what arrives until then costs the batch nothing
        # and saves the change a whole commit (docs/benchmarks.md, "Gathering until the
        # partitions register"). Never longer than the linger.
        self.gather_s = min(batch.gather_s, batch.linger_s)
        self.arrives_within = getattr(reader, "arrives_within", None) if self.gather_s else None
        self.pending = 0
        self.background = 0  # of ``pending``, a snapshot's rows (``in_background``)
        self.beat = False
        self.started = self.last_commit = self.monotonic()
        self.committed_at: Tuple[str, int, int] = tracker.mark()
        self.last_ts = 0
        self.commit_requested = False
        self.checkpoint_parts: List[Callable[[Position], None]] = []
        self.caught_up_hooks: List[Hook] = []
        self.caught_up_commit_hooks: List[Hook] = []
        self.idle_hooks: List[Callable[[], bool]] = []
        self.after_commit = after_commit

    # -- what stages tell it ------------------------------------------------------------------
    def open(self) -> None:
        """Before anything is produced: begins the batch's transaction when none is open."""
        if not self.publisher.in_tx:
            self.publisher.begin()
            self.started = self.monotonic()

    def heartbeat(self) -> None:
        """A heartbeat row: never published, but committed within the linger like a change, so
        that it measures the latency a change would see."""
        self.open()
        self.beat = True

    def in_background(self, n: int) -> None:
        """``n`` of the messages handed to ``after`` (or by a hook) are a snapshot's rows, which
        no reader waits for: they don't make the batch commit sooner than its chunk's end."""
        self.background += n

    def request_commit(self) -> None:
        """Commit at the end of the current transaction, caught up or not (a snapshot chunk
        landed: what follows is mostly the next chunk's watermarks, no backlog)."""
        self.commit_requested = True

    def cut(self, sent: int) -> None:
        """Commit now, in the middle of an event that produced ``sent`` messages so far (a large
        prepared XA transaction): its stage keeps where it is in the checkpoint. A stop that
        was requested ends the pipeline here (StoppedInsideEvent)."""
        self.pending += sent
        self.commit()
        if self.control.stop_requested:
            raise StoppedInsideEvent()

    # -- the decision, after every event ------------------------------------------------------
    def after(self, cls: Any, sent: int, tx_end: bool) -> bool:
        """The event of class ``cls`` produced ``sent`` messages and may have ended a
        transaction; commits when due. True when the pipeline is to stop."""
        if sent:
            self.pending += sent
        # Once a transaction has rows, only a full batch commits before its end: they may yet
        # be taken back (a ROLLBACK TO, or a ROLLBACK ending its group: stages.savepoints),
        # which a batch that committed some of them can't do. A stop waits for that end.
        in_tx = self.tracker.tx_rows
        if self.full() or (self.control.stop_requested and not in_tx):
            self.commit()
            return self.control.stop_requested
        now = self.monotonic()
        # A binlog heartbeat with nothing queued behind it means the server had nothing more
        # to send: the reader is caught up, so waiting out the linger would only add latency.
        # A heartbeat queued before newer changes says nothing of the sort.
        caught_up = cls is HeartbeatLogEvent and not self.reader.more_arrived()
        requested = False
        if caught_up:
            self._caught_up()
            requested = self.commit_requested  # (its hooks may have asked)
        elif tx_end and self.commit_requested:
            caught_up = requested = True
        elif tx_end and (self.pending > self.background or self.beat) \
                and self.linger.live(self.last_ts):
            caught_up = self._nothing_more(now)
        if requested:
            self.commit_requested = False
        waited_for = self.beat or self.pending > self.background
        if (self.pending or self.beat) and (requested or not in_tx and self._due(
                now - self.started, caught_up, waited_for)):
            self.commit()
            if waited_for:
                self.linger.committed(caught_up)
            if caught_up:
                for hook in self.caught_up_commit_hooks:
                    self.pending += hook()
        elif self._idle_checkpoint_due(now):
            self.commit()
        if caught_up and self.idle_hooks and not self.pending and not self.beat:
            self._idle()
        return False

    def full(self, more: int = 0) -> bool:
        """Whether the batch holds ``max_messages`` of the stream's own messages, with ``more``
        about to be added. A snapshot's rows don't count: their chunk's end commits them."""
        return self.pending - self.background + more >= self.max_messages

    def _due(self, age: float, caught_up: bool, waited_for: bool) -> bool:
        """Whether the open batch, ``age`` old, commits now: by the linger when a change of the
        stream's own (or a heartbeat) waits for it, else (a snapshot's rows alone) once
        ``catchup_linger`` old."""
        if waited_for:
            return self.linger.due(age, caught_up, self.last_ts)
        return age >= self.linger.catchup_linger

    def _nothing_more(self, now: float) -> bool:
        """At a live transaction's end: whether the server has sent nothing more. The commit
        can't end before its partitions are registered (``gather_s``): a change that arrives
        until then goes in this batch, not the next, so a young batch waits for one up to the
        rest of that."""
        left = self.started + self.gather_s - now
        if left > 0 and self.arrives_within is not None:
            return not self.arrives_within(left)
        return not self.reader.more_arrived()

    def _caught_up(self) -> None:
        self.metrics.on_idle()
        self.metrics.tick()
        for hook in self.caught_up_hooks:
            self.pending += hook()

    def _idle_checkpoint_due(self, now: float) -> bool:
        """Whether to checkpoint with nothing to publish: tables we don't publish and DDL still
        move the position. Pending changes are left to the linger: a reader slower than
        idle_checkpoint_ms would otherwise commit after every transaction."""
        tracker = self.tracker
        return not self.pending and not self.beat and not tracker.in_tx and \
            now - self.last_commit >= self.idle_s and tracker.mark() != self.committed_at

    def _idle(self) -> None:
        """Caught up with nothing open: the idle hooks (the JIT warm-up) get their turn."""
        self.idle_hooks = [hook for hook in self.idle_hooks if not hook()]

    # -- the commit ---------------------------------------------------------------------------
    def commit(self) -> None:
        tracker = self.tracker
        position = tracker.position()
        for part in self.checkpoint_parts:
            part(position)
        stopping = self.control.stop_requested
        timeout = self.cfg.shutdown_timeout_s if stopping else self.cfg.kafka_commit_timeout_s
        publisher = self.publisher
        publisher.commit(position, timeout)
        pending = self.pending
        self.metrics.on_commit(position, pending, publisher.last_commit_s, publisher.queue_depth())
        self.totals.published += pending
        self.totals.batches += 1
        self.pending = self.background = 0
        self.beat = False
        self.last_commit = self.monotonic()
        self.committed_at = tracker.mark()
        self.after_commit()
        # Where the main loop does what signal handlers asked for (profiler, log level).
        self.metrics.tick()

