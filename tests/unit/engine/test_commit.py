"""The commit policy on its own: an in-memory publisher, a tracker stand-in and a test clock."""
from pymysqlreplication.event import HeartbeatLogEvent, XidEvent

from streamer import config
from streamer.engine.commit import CommitPolicy, StoppedInsideEvent, Totals
from streamer.position import Position
from tests.unit.engine_parts import FakeClock, InMemoryPublisher

import pytest

BATCH = {"max_messages": 10, "linger_ms": 20, "min_linger_ms": 0, "gather_ms": 0,
         "catchup_linger_ms": 500, "idle_checkpoint_ms": 1000}


class Tracker:
    """Where the stream is: a transaction open or not, and a mark that moves with it."""

    def __init__(self):
        self.in_tx = False
        self.tx_rows = 0  # row changes of the open transaction read so far
        self.at = 4

    def mark(self):
        return ("f", self.at, 0)

    def position(self):
        return Position("f", self.at)


class Reader:
    def __init__(self, more=False):
        self.more = more

    def more_arrived(self):
        return self.more


class Control:
    stop_requested = False


class Metrics:
    def __init__(self):
        self.commits = []

    def on_idle(self):
        pass

    def tick(self):
        pass

    def on_commit(self, position, pending, *_):
        self.commits.append((position.pos, pending))


def policy(reader=None, clock=None, **batch):
    cfg = config.build({"mysql": {"server_id": 9}, "batch": dict(BATCH, **batch),
                        "shutdown_timeout_s": 1, "kafka_commit_timeout_s": 1})
    tracker, control, metrics = Tracker(), Control(), Metrics()
    publisher = InMemoryPublisher()
    p = CommitPolicy(cfg, publisher, tracker, reader or Reader(more=True), control, metrics,
                     clock or FakeClock(step=0.0001), Totals())
    return p, publisher, tracker, control, metrics


def test_a_backlog_batch_commits_at_max_messages_not_before():
    p, publisher, _, _, metrics = policy()
    p.open()
    assert p.after(object, 9, False) is False and metrics.commits == []
    assert p.after(object, 1, False) is False and metrics.commits == [(4, 10)]
    assert p.totals.published == 10 and p.pending == 0 and not publisher.in_tx


def test_a_stop_commits_what_is_open_even_nothing_and_says_stop():
    p, _, _, control, metrics = policy()
    control.stop_requested = True
    assert p.after(object, 0, False) is True and metrics.commits == [(4, 0)]


def test_once_a_transaction_has_rows_only_a_full_batch_commits_before_its_end():
    # Its rows may yet be taken back (stages.savepoints): neither the linger nor a stop commits
    # between two of them; a full batch does (and the stop is honoured there).
    clock = FakeClock(step=0.0001)
    p, _, tracker, control, metrics = policy(clock=clock, linger_ms=1, catchup_linger_ms=1)
    p.open()
    tracker.in_tx, tracker.tx_rows = True, 3
    p.after(object, 3, False)
    clock.sleep(1.0)
    control.stop_requested = True
    assert p.after(object, 2, False) is False and metrics.commits == []
    assert p.after(object, 5, False) is True and metrics.commits == [(4, 10)]  # full
    control.stop_requested = False
    p.open()
    p.after(object, 1, False)
    clock.sleep(1.0)
    tracker.in_tx, tracker.tx_rows = False, 0  # its end
    assert p.after(object, 0, True) is False and metrics.commits == [(4, 10), (4, 1)]


def test_an_idle_heartbeat_commits_a_pending_batch_at_once():
    p, _, _, _, metrics = policy(reader=Reader(more=False), linger_ms=10000)
    p.open()
    p.after(object, 3, False)
    assert metrics.commits == []
    p.after(HeartbeatLogEvent, 0, False)
    assert metrics.commits == [(4, 3)]


def test_after_a_caught_up_commit_its_hooks_run_and_what_they_make_goes_in_the_next_batch():
    p, _, _, _, metrics = policy(reader=Reader(more=False), linger_ms=10000)
    made = []
    p.caught_up_commit_hooks.append(lambda: made.append(len(metrics.commits)) or 4)
    p.open()
    p.after(object, 3, False)  # no commit yet: no hook
    assert made == []
    p.after(HeartbeatLogEvent, 0, False)
    assert metrics.commits == [(4, 3)] and made == [1] and p.pending == 4  # after the commit
    p.after(HeartbeatLogEvent, 0, False)
    assert metrics.commits == [(4, 3), (4, 4)]


def test_a_heartbeat_with_more_queued_behind_it_is_no_reason_to_commit():
    p, _, _, _, metrics = policy(reader=Reader(more=True), linger_ms=10000)
    p.open()
    p.after(object, 3, False)
    p.after(HeartbeatLogEvent, 0, False)
    assert metrics.commits == []


def test_a_requested_commit_happens_at_the_transactions_end_whatever_the_linger():
    p, _, _, _, metrics = policy(linger_ms=10000, catchup_linger_ms=10000)
    p.open()
    p.after(object, 2, False)
    p.request_commit()
    p.after(object, 0, False)  # not the end of the transaction yet
    assert metrics.commits == []
    p.after(XidEvent, 0, True)
    assert metrics.commits == [(4, 2)] and not p.commit_requested


def test_a_snapshots_rows_alone_wait_at_idle_heartbeats_for_their_chunks_end():
    p, _, _, _, metrics = policy(reader=Reader(more=False))
    p.open()
    p.in_background(5)
    p.after(object, 5, False)
    p.after(HeartbeatLogEvent, 0, False)  # caught up: nobody waits for these rows
    p.after(XidEvent, 0, True)
    assert metrics.commits == [] and p.pending == p.background == 5
    made = []
    p.caught_up_commit_hooks.append(lambda: made.append(1) or 0)
    p.caught_up_hooks.append(lambda: p.request_commit() or 0)  # the chunk's last slice went
    p.after(HeartbeatLogEvent, 0, False)
    assert metrics.commits == [(4, 5)] and made == [1]
    assert not p.commit_requested and p.pending == p.background == 0


def test_a_change_of_the_streams_own_among_a_snapshots_rows_commits_them_as_ever():
    p, _, _, _, metrics = policy(reader=Reader(more=False), linger_ms=10000)
    p.open()
    p.in_background(5)
    p.after(object, 5, False)
    p.after(object, 1, False)  # a change read from the binlog
    p.after(HeartbeatLogEvent, 0, False)
    assert metrics.commits == [(4, 6)]


def test_a_snapshots_rows_alone_commit_catchup_linger_old_not_at_max_messages():
    # A chunk is bounded by its own size; cut at max_messages, a wide table's chunks were two
    # transactions each.
    clock = FakeClock(step=0.0001)
    p, _, _, _, metrics = policy(reader=Reader(more=False), clock=clock)
    p.open()
    p.in_background(10)
    p.after(object, 10, False)
    p.in_background(3)
    p.after(object, 3, False)
    clock.sleep(0.4)
    p.after(HeartbeatLogEvent, 0, False)
    assert metrics.commits == [] and p.pending == p.background == 13
    clock.sleep(0.1)
    p.after(HeartbeatLogEvent, 0, False)
    assert metrics.commits == [(4, 13)]


def test_max_messages_counts_the_streams_own_changes_beside_a_snapshots_rows():
    p, _, _, _, metrics = policy(linger_ms=10000, catchup_linger_ms=10000)
    p.open()
    p.in_background(8)
    p.after(object, 8, False)
    p.after(object, 9, False)  # the stream's own: 9 of 10
    assert metrics.commits == [] and not p.full() and p.full(1)
    p.after(object, 1, False)
    assert metrics.commits == [(4, 18)] and p.pending == p.background == 0


def test_an_idle_checkpoint_moves_the_position_with_nothing_to_publish():
    clock = FakeClock(step=0.6)
    p, publisher, tracker, _, metrics = policy(clock=clock)
    p.after(object, 0, False)
    assert metrics.commits == []  # the position has not moved
    tracker.at = 100
    p.after(object, 0, False)
    p.after(object, 0, False)
    assert metrics.commits == [(100, 0)] and publisher.committed.pos == 100


def test_checkpoint_parts_go_into_the_committed_position():
    p, publisher, _, _, _ = policy()
    p.checkpoint_parts.append(lambda position: setattr(position, "snapshot", {"done": 1}))
    p.open()
    p.after(object, 10, False)
    assert publisher.committed.snapshot == {"done": 1}


def test_idle_hooks_run_caught_up_with_nothing_open_until_they_are_done():
    p, _, _, _, _ = policy(reader=Reader(more=False))
    calls = []

    def hook():
        calls.append(p.pending)
        return len(calls) == 2

    p.idle_hooks.append(hook)
    p.open()
    p.after(object, 1, False)
    p.after(HeartbeatLogEvent, 0, False)  # commits the 1, then idle: the hook's first turn
    p.after(HeartbeatLogEvent, 0, False)  # its second: done, and dropped
    p.after(HeartbeatLogEvent, 0, False)
    assert calls == [0, 0] and p.idle_hooks == []


def test_a_cut_inside_an_event_commits_and_a_stop_ends_the_event_there():
    p, _, _, control, metrics = policy()
    p.open()
    p.cut(4)
    assert metrics.commits == [(4, 4)]
    control.stop_requested = True
    with pytest.raises(StoppedInsideEvent):
        p.cut(2)
    assert metrics.commits == [(4, 4), (4, 2)]
