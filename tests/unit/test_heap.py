"""The old-generation limit runs PyPy's incremental major collection once garbage piles up."""
import gc
import platform

import pytest

from streamer import heap

PYPY = platform.python_implementation() == "PyPy"


@pytest.mark.skipif(not PYPY, reason="PyPy's GC only")
def test_garbage_past_the_limit_is_collected_a_step_per_commit():
    limit = heap.OldGenerationLimit(floor=8 * 1024 * 1024)
    assert limit.active
    # Old-generation garbage: objects promoted while referenced, then dropped. The full collection
    # promotes all of them and finishes any major collection their allocation started: one in
    # progress counts what it promotes while marking as live, and frees it a cycle later.
    keep = [[str(i)] * 4 for i in range(400000)]
    gc.collect()
    del keep
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
def test_an_operators_pypy_gc_min_is_left_in_charge(monkeypatch):
    monkeypatch.setenv("PYPY_GC_MIN", "64MB")
    assert not heap.OldGenerationLimit().active


@pytest.mark.skipif(PYPY, reason="CPython has no such GC")
def test_off_pypy_nothing_is_done():
    limit = heap.OldGenerationLimit()
    assert not limit.active
    limit.after_commit()
    assert limit.collections == 0
