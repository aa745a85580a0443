"""Start-up: from spawning the streamer to "reading the binlog from", first start and restart.

A first start creates the namespace's topics and finds no checkpoint; a restart of the same
source finds both, and reads its checkpoint back. Both are timed, alternately, from a fresh
process each; the medians are reported. Nothing is in the binlog for the streamer to publish
(its table pattern matches no table), so only start-up is measured.
"""
from __future__ import annotations

import os
import statistics
import time
from typing import Any, Dict, List

from . import env
from .proc import Streamer
from .watch import delete_namespace

READY = b"reading the binlog from"


def _time_to_reading(python: str, cfg: str, log_path: str, timeout: float = 60.0) -> float:
    began = time.monotonic()
    with Streamer(python, cfg, log_path, []) as streamer:
        took = streamer.wait_for_log(READY, "start reading", timeout, since=began,
                                     interval_s=0.005)
        streamer.stop()
    return took


def run(python: str, workdir: str, runs: int) -> Dict[str, Any]:
    fresh: List[float] = []
    restart: List[float] = []
    for _ in range(runs):
        ns = env.unique("startup")
        cfg = env.write_streamer_config(os.path.join(workdir, f"{ns}.yaml"), ns,
                                        ["streamer_bench_no_such_db.*"])
        try:
            fresh.append(_time_to_reading(python, cfg, os.path.join(workdir, f"{ns}.first.log")))
            restart.append(_time_to_reading(python, cfg, os.path.join(workdir, f"{ns}.again.log")))
        finally:
            delete_namespace(ns)
    return {"runs": runs,
            "fresh_start_s": round(statistics.median(fresh), 3),
            "restart_s": round(statistics.median(restart), 3),
            "fresh_start_samples": [round(s, 3) for s in fresh],
            "restart_samples": [round(s, 3) for s in restart]}
