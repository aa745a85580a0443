"""The old-generation limit runs PyPy's incremental major collection once garbage piles up."""
import gc
import platform

import pytest

from streamer.ops import gcpacing

PYPY = platform.python_implementation() == "PyPy"


def _old_generation_garbage() -> None:
    """Objects promoted while referenced, then dropped. The full collection promotes all of them
    and finishes any major collection their allocation started: one in progress counts what it
    promotes while marking as live, and frees it a cycle later."""
    keep = [[str(i)] * 4 for i in range(400000)]
    gc.collect()
    del keep


@pytest.mark.skipif(not PYPY, reason="PyPy's GC only")
def test_garbage_past_the_limit_is_collected_a_step_per_commit():
    _old_generation_garbage()
    limit = gcpacing.OldGenerationLimit(floor=8 * 1024 * 1024)
    assert limit.active
    grown = limit.old_generation()
    assert grown > limit.limit
    steps = 0
    while limit.collections == 0 and steps < 10000:
        limit.after_commit()
        steps += 1
    assert limit.collections == 1 and steps > 1  # incremental: several commits, not one stop
    assert limit.old_generation() < grown
    assert limit.limit >= limit.floor


@pytest.mark.skipif(not PYPY, reason="PyPy's GC only")
def test_a_collection_pypy_finishes_itself_ends_the_limits_collection():
    # PyPy advances a started major collection at its own minor collections, so it often ends
    # between two commits. The limit must see that, not start another at every commit.
    _old_generation_garbage()
    limit = gcpacing.OldGenerationLimit(floor=8 * 1024 * 1024)
    grown = limit.old_generation()
    limit.after_commit()
    assert limit.collecting and limit.collections == 0
    while not gc.collect_step().major_is_done:  # finished outside the limit
        pass
    limit.after_commit()
    assert limit.collections == 1 and not limit.collecting
    # The next limit comes from what that collection left, which no longer holds the garbage.
    # (Not "limit < grown": twice what a long test run keeps live can exceed the garbage.)
    assert 0 < limit.live_after < grown
    assert limit.limit == max(limit.floor, int(limit.live_after * gcpacing.GROWTH))
    # No new major collection was started: the collector is idle (state 0, scanning).
    step = gc.collect_step()
    assert step.oldstate == 0
    while not step.major_is_done:  # finish the one that step began
        step = gc.collect_step()


@pytest.mark.skipif(not PYPY, reason="PyPy's GC only")
def test_an_operators_pypy_gc_min_is_left_in_charge(monkeypatch):
    monkeypatch.setenv("PYPY_GC_MIN", "64MB")
    assert not gcpacing.OldGenerationLimit().active


@pytest.mark.skipif(PYPY, reason="CPython has no such GC")
def test_off_pypy_nothing_is_done():
    limit = gcpacing.OldGenerationLimit()
    assert not limit.active
    limit.after_commit()
    assert limit.collections == 0
