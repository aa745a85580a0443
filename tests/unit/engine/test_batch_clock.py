"""How long a batch may wait: the commit policy's Linger, without servers."""
import time

from streamer.engine.commit import CATCHUP_LAG_S, Linger

LIVE = time.time() + 3600  # the last change's event time: a live reader, however slow the test


def clock(min_linger: float = 0.0) -> Linger:
    return Linger(linger=0.02, min_linger=min_linger, catchup_linger=0.5)


def test_caught_up_commits_at_min_linger_and_behind_at_the_linger():
    c = clock(min_linger=0.005)
    assert not c.due(0.004, caught_up=True, last_ts=LIVE)
    assert c.due(0.005, caught_up=True, last_ts=LIVE)
    assert not c.due(0.019, caught_up=False, last_ts=LIVE)
    assert c.due(0.02, caught_up=False, last_ts=LIVE)


def test_a_reader_still_behind_gets_longer_batches_until_it_catches_up():
    c = clock()
    bounds = []
    for _ in range(7):
        bounds.append(c.bound)
        assert not c.due(c.bound * 0.99, caught_up=False, last_ts=LIVE)
        assert c.due(c.bound, caught_up=False, last_ts=LIVE)
        c.committed(caught_up=False)
    assert bounds == [0.02, 0.04, 0.08, 0.16, 0.32, 0.5, 0.5]
    # Caught up at last: the next batch is bounded by the linger again.
    c.committed(caught_up=True)
    assert c.bound == 0.02
    assert c.due(0.02, caught_up=False, last_ts=LIVE)


def test_a_caught_up_commit_between_cut_batches_keeps_the_linger():
    c = clock()
    c.committed(caught_up=False)
    c.committed(caught_up=True)
    c.committed(caught_up=False)
    assert c.bound == 0.04


def test_a_backlog_waits_the_catchup_linger_whatever_the_bound():
    c = clock()
    old = time.time() - CATCHUP_LAG_S - 1
    assert not c.due(0.4, caught_up=False, last_ts=old)
    assert c.due(0.5, caught_up=False, last_ts=old)
    # A reader caught up on old changes (an idle table's last change) still commits at once.
    assert c.due(0.0, caught_up=True, last_ts=old)


def test_settings_out_of_order_are_clamped_to_the_linger():
    c = Linger(linger=0.02, min_linger=1.0, catchup_linger=0.001)
    assert (c.min_linger, c.catchup_linger) == (0.02, 0.02)
    for _ in range(3):
        c.committed(caught_up=False)
    assert c.bound == 0.02
