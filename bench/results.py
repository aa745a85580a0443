"""Results kept per commit: one JSON line per (interpreter, shape) and run, appended to a file.

That file (bench/results.jsonl) is committed, so a regression can be traced to the commit that
brought it (`python -m bench.compare A B`).
"""
from __future__ import annotations

import datetime
import json
import os
import statistics
from typing import Any, Dict, Iterable, List, Optional

from . import env

# Higher is better for rates, lower for latency and memory; compare.py flags changes by this.
HIGHER_IS_BETTER = ("bare_rows_s", "bare_warm_rows_s", "e2e_rows_s", "catchup_rows_s",
                    "warm_rows_s", "ratio", "pypy_over_cpython", "pypy_over_cpython_warm",
                    "rows_s", "launch_rows_s", "commits_s")
LOWER_IS_BETTER = ("start_s", "rss_mb", "p50_ms", "p99_ms", "max_ms", "over_100ms_pct",
                   "cold_p99_ms", "cold_max_ms", "cpu_us_per_row",
                   "rss_growth_mb", "fresh_start_s", "restart_s", "streamer_cores",
                   "cpu_ms_per_commit", "rdk_main_ms_per_commit", "commit_p50_ms", "commit_p99_ms",
                   "after_source_p50_ms", "after_source_p99_ms",
                   "p90_ms", "p999_ms", "over_50ms_pct", "cold_p50_ms", "kafka_cores")


def run_header(quick: bool, repeat: int) -> Dict[str, Any]:
    """What every line of one bench run shares: where and on what code it ran."""
    head, dirty, changes = env.commit()
    return {
        "commit": head,
        "dirty": dirty,
        "dirty_digest": changes,
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host_cores": os.cpu_count(),
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "quick": quick,
        "repeat": repeat,
    }


def median_of(samples: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Per key, the median of the numeric values across repeats (other values from the first)."""
    out = dict(samples[0])
    for key, value in samples[0].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            values = [s[key] for s in samples if isinstance(s.get(key), (int, float))]
            out[key] = round(statistics.median(values), 3) if values else None
    return out


def append(path: str, records: Iterable[Dict[str, Any]]) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, sort_keys=True) + "\n")


def emit(rec: Dict[str, Any], path: Optional[str]) -> None:
    """A bench CLI's result: printed as one JSON line, and appended to ``path`` when given."""
    print(json.dumps(rec, sort_keys=True), flush=True)
    if path:
        append(path, [rec])


def load(path: str) -> List[Dict[str, Any]]:
    out = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except ValueError:
                    raise ValueError(f"{path} line {number} is not a JSON object; fix or remove "
                                     f"that line") from None
    return out


# PyPy ÷ CPython, cold (the whole run, start-up included) and warm (the second half of it).
SPEEDUPS = (("pypy_over_cpython", "e2e_rows_s"), ("pypy_over_cpython_warm", "warm_rows_s"))


def speedup(records: List[Dict[str, Any]]) -> None:
    """Sets the SPEEDUPS on each PyPy line whose shape also ran under CPython."""
    for out, key in SPEEDUPS:
        cpython = {r["shape"]: r.get(key) for r in records if r["interpreter"] == "cpython"}
        for rec in records:
            base: Optional[float] = cpython.get(rec["shape"])
            value = rec.get(key)
            if rec["interpreter"] == "pypy" and base and value:
                rec[out] = round(value / base, 2)
