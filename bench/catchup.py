"""Saturated catch-up: the streamer starts on a backlog and we time until all of it is in Kafka.

Three rates, all over the same rows (commit-visible, read_committed):

- e2e (cold, including start): rows / (last row visible - process spawned).
- catch-up (cold): rows after the first committed batch / (last row visible - first batch visible);
  start-up (producer init, checkpoint read, topic creation) is left out.
- warm: the second half of the rows / the time it took; PyPy's JIT has warmed up by then.

RSS is read at the half and at the end too: ``rss_growth_mb`` is how much it grew over the second
half (flat is near 0 on the long shape).

The CPU steal over the run is recorded too (``cpu_steal_pct``): on a shared virtual machine it
explains most swings between runs of the same commit.

And the streamer's CPU time per row, start-up included (all its threads): on a machine shared
with noisy neighbours, wall-clock rates of the same commit vary by 20 %, CPU time far less.
"""
from __future__ import annotations

import os
import time
from typing import Any, Dict, Optional

from . import env
from .proc import BenchError, Streamer
from .shapes import Backlog
from .watch import Watcher, delete_namespace


def _rate(rows: float, seconds: float) -> Optional[float]:
    return round(rows / seconds, 1) if seconds > 0 else None


def run(python: str, backlog: Backlog, workdir: str) -> Dict[str, Any]:
    ns = env.unique("bench")
    cfg = env.write_streamer_config(os.path.join(workdir, f"{ns}.yaml"), ns, [f"{backlog.db}.*"])
    timeout = 120.0 + backlog.rows / 500.0
    rows = backlog.rows
    seen = 0
    first: Optional[tuple] = None
    half: Optional[tuple] = None
    rss_half: Optional[float] = None
    rss_end: Optional[float] = None
    try:
        with Watcher(f"{ns}.{backlog.db}.") as watcher:
            began = time.monotonic()
            steal = env.Steal()
            args = ["--start-file", backlog.start[0], "--start-pos", str(backlog.start[1])]
            with Streamer(python, cfg, os.path.join(workdir, f"{ns}.log"), args) as streamer:
                next_sample = began
                while seen < rows:
                    got = len(watcher.poll(0.05))
                    now = time.monotonic()
                    if got:
                        if first is None:
                            first = (now, got)
                        seen += got
                        if half is None and seen >= rows // 2:
                            half = (now, seen)
                            rss_half = streamer.rss_now_mb()
                    if now >= next_sample:
                        streamer.sample()
                        next_sample = now + 0.5
                    if now - began > timeout:
                        raise BenchError(f"{seen} of {rows} rows arrived within {timeout:.0f}s "
                                         f"(streamer log {streamer.log_path})")
                done = time.monotonic()
                steal.stop()
                rss_end = streamer.rss_now_mb()
                streamer.stop()
                rss = streamer.rss_mb
                cpu = streamer.cpu_s
    finally:
        delete_namespace(ns)
    assert first is not None and half is not None
    return {
        "rows": rows,
        "start_s": round(first[0] - began, 3),
        "total_s": round(done - began, 3),
        "e2e_rows_s": _rate(rows, done - began),
        "catchup_rows_s": _rate(rows - first[1], done - first[0]),
        "warm_rows_s": _rate(rows - half[1], done - half[0]),
        "rss_mb": round(rss, 1) if rss else None,
        "cpu_us_per_row": round(cpu / rows * 1e6, 2) if cpu else None,
        "rss_growth_mb": round(rss_end - rss_half, 1) if rss_end and rss_half else None,
        "cpu_steal_pct": steal.pct,
    }
