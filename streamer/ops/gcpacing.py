"""Keeps PyPy's old generation near what is live, whatever the machine's cache size.

PyPy sizes its nursery from the CPU's last-level cache and starts no major collection before the
heap reaches PYPY_GC_MIN, eight nurseries by default. On a machine with a large L3 that floor is
hundreds of MB, and the row data that outlived a minor collection piled up below it
(docs/benchmarks-history.md, "PyPy's garbage collector").

After each commit, once the old generation has grown past twice what was live after the last
major collection (and past a 32 MB floor), the incremental major collection runs one step per commit,
so no batch waits for a whole collection: the marking is one step (GC_MARKING_STEP), the sweeping
several. Nothing is done off PyPy, or when PYPY_GC_MIN is set (the operator chose).

A collection started here is also advanced by PyPy itself, a step at each minor collection, so
it usually completes between two commits, not in a step taken here. Completions are therefore
learnt from PyPy's ``on_gc_collect`` hook, whoever drove them: a step of our own reporting the end
missed them, and every commit then started a new major collection.
"""
from __future__ import annotations

import gc
import logging
import os
from typing import Any, Optional

log = logging.getLogger(__name__)

# PyPy sizes its nursery from the cache size the CPU reports (1 MB on some VMs, where the old
# generation then fills every ~12k rows); `streamer run` and the deployed service fix it, unless the
# operator has (docs/benchmarks-history.md, "PyPy's garbage collector").
GC_NURSERY = "8MB"
# A major collection marks the whole heap in one step (more bytes a step than any streamer's heap).
# PyPy before 7.3.16 (Debian 12's is 7.3.11) can free a live object when the program copies an
# array into one already marked between two marking steps (its memcopy write barrier), which
# crashes it or, were the memory reused, reads another object's bytes. Marking in one step, the
# program never runs between two of them. The streamer's heap was already marked in one or two steps
# of 16-32 MB (docs/benchmarks-history.md, "PyPy's major collections mark in one or two long
# steps"); docs/benchmarks.md, "One marking step a major collection", has what it costs.
GC_MARKING_STEP = "64GB"
# What `streamer run` and the deployed service set, unless the operator has.
GC_ENV = {"PYPY_GC_NURSERY": GC_NURSERY, "PYPY_GC_INCREMENT_STEP": GC_MARKING_STEP}

FLOOR_BYTES = 32 * 1024 * 1024
GROWTH = 2.0


class _Majors:
    """Major collections completed in this process, and the old generation each left behind."""
    count = 0
    live_after = 0
    hooked = False


def _on_gc_collect(stats: Any) -> None:
    # Called by PyPy's GC after major collections (several may come in one call: ``count``).
    _Majors.count += stats.count
    _Majors.live_after = stats.arenas_bytes + stats.rawmalloc_bytes_after


def _stats_reader() -> Optional[Any]:
    """PyPy's raw GC statistics (``gc.get_stats`` formats the same numbers as text)."""
    if os.environ.get("PYPY_GC_MIN"):
        return None
    get = getattr(gc, "_get_stats", None)
    hooks = getattr(gc, "hooks", None)
    if get is None or hooks is None or not hasattr(gc, "collect_step"):
        return None
    if not _Majors.hooked:
        hooks.on_gc_collect = _on_gc_collect
        _Majors.hooked = True
    return get


class OldGenerationLimit:
    """Call ``after_commit()`` after each commit; ``active`` says whether it does anything."""

    def __init__(self, floor: int = FLOOR_BYTES):
        self._stats = _stats_reader()
        self.floor = floor
        self.limit = floor
        self.collecting = False
        self.collections = 0  # major collections completed since this limit was made
        self.live_after = 0  # old generation left by the last of them
        self._majors_seen = _Majors.count

    @property
    def active(self) -> bool:
        return self._stats is not None

    def old_generation(self) -> int:
        s = self._stats(False)  # type: ignore[misc]
        return int(s.total_arena_memory + s.total_rawmalloced_memory)

    def after_commit(self) -> None:
        if self._stats is None:
            return
        if _Majors.count != self._majors_seen:
            self.collections += _Majors.count - self._majors_seen
            self._majors_seen = _Majors.count
            self.collecting = False
            self.live_after = _Majors.live_after
            self.limit = max(self.floor, int(self.live_after * GROWTH))
            if log.isEnabledFor(logging.DEBUG):
                log.debug("major GC %d done: old generation %d bytes, next at %d",
                          self.collections, self.live_after, self.limit)
        if not self.collecting:
            if self.old_generation() < self.limit:
                return
            self.collecting = True
        gc.collect_step()  # a minor collection and a step of the major one, started if idle
