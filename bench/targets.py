"""``python -m bench.targets [COMMIT|FILE ...]``: the performance targets, judged on result lines.

The targets are the project's (docs/benchmarks.md): under PyPy, end to end at least 0.6 of the
bare read on the bulk and OLTP shapes and at least 70k rows/s on bulk (start-up included); PyPy at
least 3x CPython, cold and warm, on every shape; at half of saturation, p50 at most 20 ms and p99
at most 100 ms (bulk also with the source's table in BLACKHOLE, and OLTP in MEMORY, when such
lines exist); peak RSS at most 300 MB, and flat over the 1M-row `long` shape. And #37's: at each
fixed live rate (bench.latency, 1k and 5k rows/s), warm, PyPy's p50 at most 1.5x and its p99 at
most 2x those of the floor grouped at the same rate (bench.floor), and its max at most 100 ms.

Each target is judged on the median over the lines of its group (bench.compare's groups), so a
commit measured by several `make bench` runs is judged on all of them, and the table says how
many lines each median took. A load at a share of saturation that sysbench could not hold
measured the machine, not the streamer: such lines are left out and counted, with the cores
such a load needs against the host's where the lines know them. Quick runs (other
row counts) are left out unless there is nothing else. `make bench` prints this table for its
own lines; without arguments this judges the newest commit in bench/results.jsonl.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from . import env, results
from .compare import group_of, select, share_group
from .report import _num, _table

# "Flat": the second half of the 1M-row run grew RSS by at most this share of its peak.
FLAT_SHARE = 0.05
HALF = 0.5
SHAPES = ("bulk", "long", "oltp", "wide")
LIVE_SHAPES = ("bulk", "oltp")
LATENCY_RATES = (1000.0, 5000.0)
# #37: the streamer's warm latency against the floor's at the same rate (key, factor).
OVER_FLOOR = (("p50_ms", 1.5), ("p99_ms", 2.0))
WARM_MAX_MS = 100.0


class Target(NamedTuple):
    name: str
    group: Tuple[str, str]  # (bench.compare group, interpreter)
    key: str
    at_least: bool  # the median must be >= bound (else <=)
    bound: float
    digits: int


def _targets() -> List[Target]:
    out = [Target(f"PyPy e2e / bare, {s}", (s, "pypy"), "ratio", True, 0.6, 2) for s in ("bulk", "oltp")]
    out.append(Target("PyPy bulk e2e rows/s (start-up included)", ("bulk", "pypy"), "e2e_rows_s",
                      True, 70000.0, 0))
    for key, when in (("pypy_over_cpython", "cold"), ("pypy_over_cpython_warm", "warm")):
        out += [Target(f"PyPy / CPython {when}, {s}", (s, "pypy"), key, True, 3.0, 2) for s in SHAPES]
    # The blackhole and memory groups are the same loads with the source's storage lighter
    # (bench.loaded): judged apart, never pooled with the InnoDB lines.
    for s, engine in [(s, "innodb") for s in LIVE_SHAPES] + [("bulk", "blackhole"), ("oltp", "memory")]:
        group = (share_group(f"{s}-live", HALF, engine), "pypy")
        what = s if engine == "innodb" else f"{s}, source in {engine.upper()}"
        out.append(Target(f"PyPy p50 ms at half of saturation, {what}", group, "p50_ms", False, 20.0, 1))
        out.append(Target(f"PyPy p99 ms at half of saturation, {what}", group, "p99_ms", False, 100.0, 1))
    out.append(Target("PyPy snapshot rows/s", ("snapshot", "pypy"), "rows_s", True, 150000.0, 0))
    out.append(Target("PyPy snapshot peak RSS MB", ("snapshot", "pypy"), "rss_mb", False, 300.0, 0))
    # Realistic rows, from launch to the last row in Kafka: twice Maxwell's bootstrap here (#53).
    out.append(Target("PyPy snapshot-wide rows/s, launch to done", ("snapshot-wide", "pypy"),
                      "launch_rows_s", True, 200000.0, 0))
    out.append(Target("PyPy snapshot-wide peak RSS MB", ("snapshot-wide", "pypy"), "rss_mb",
                      False, 300.0, 0))
    return out


TARGETS = _targets()


def _chosen(lines: List[Dict[str, Any]]) -> Tuple[List[Dict[str, Any]], bool]:
    """Full-run lines, or the quick ones when there are no others (then grouped as if full)."""
    full = [r for r in lines if not r.get("quick")]
    if full:
        return full, False
    return [dict(r, quick=False) for r in lines], bool(lines)


def judge(lines: List[Dict[str, Any]]) -> Tuple[List[List[str]], int, bool]:
    """The table's rows, how many targets were missed, and whether only quick lines were judged."""
    lines, quick = _chosen(lines)
    groups: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
    unheld: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
    for rec in lines:
        group = group_of(rec)
        if "saturation_share" in rec and not rec.get("load_held"):
            unheld.setdefault(group, []).append(rec)
            continue
        groups.setdefault(group, []).append(rec)
    rows: List[List[str]] = []
    missed = 0
    for t in TARGETS:
        recs = _having(groups.get(t.group, []), t.key)
        notes = []
        busy = _having(recs, "busy_pct")
        if busy:
            # What decides a loaded line's latency on shared cores (docs/benchmarks.md).
            notes.append(f"host {statistics.median(r['busy_pct'] for r in busy):.0f} % busy")
        if t.group in unheld:
            notes.append(_unheld_note(unheld[t.group]))
        note = "; ".join(notes)
        value = statistics.median(r[t.key] for r in recs) if recs else None
        missed += _row(rows, t.name, recs, value, t.at_least, t.bound, t.digits, note)
    missed += _over_floor(rows, groups)
    recs = _having(lines, "rss_mb")
    missed += _row(rows, "peak RSS MB, every line", recs, max(r["rss_mb"] for r in recs) if recs else None,
                   False, 300.0, 0, "the highest line")
    for interp in ("pypy", "cpython"):
        recs = _having(_having(groups.get(("long", interp), []), "rss_growth_mb"), "rss_mb")
        bound = FLAT_SHARE * statistics.median(r["rss_mb"] for r in recs) if recs else 0.0
        value = statistics.median(r["rss_growth_mb"] for r in recs) if recs else None
        missed += _row(rows, f"{interp} RSS growth MB, 2nd half of 1M rows", recs, value, False, bound,
                       1, f"{FLAT_SHARE:.0%} of its median peak")
    return rows, missed, quick


def _over_floor(rows: List[List[str]], groups: Dict[Tuple[str, str], List[Dict[str, Any]]]) -> int:
    """#37's rows: per live rate, PyPy's warm p50 and p99 against the grouped floor's medians at
    that rate (no bound, and '-', without floor lines), and its warm max."""
    missed = 0
    for rate in LATENCY_RATES:
        lat = groups.get((f"latency@{rate:g}/s", "pypy"), [])
        floor = groups.get((f"floor@{rate:g}/s", "pypy"), [])
        for key, factor in OVER_FLOOR:
            recs, under = _having(lat, key), _having(floor, key)
            bound = factor * statistics.median(r[key] for r in under) if under else 0.0
            value = statistics.median(r[key] for r in recs) if recs and under else None
            missed += _row(rows, f"PyPy live {key[:3]} ms at {rate:g} rows/s, <= {factor:g}x the "
                           f"floor's", recs, value, False, bound, 1,
                           f"floor {len(under)} lines" if under else "no floor lines")
        recs = _having(lat, "max_ms")
        value = statistics.median(r["max_ms"] for r in recs) if recs else None
        missed += _row(rows, f"PyPy live max ms at {rate:g} rows/s, warm", recs, value, False,
                       WARM_MAX_MS, 1, "")
    return missed


def _unheld_note(recs: List[Dict[str, Any]]) -> str:
    """Why loads were left out; with what they would have needed of the host, where known."""
    note = f"{len(recs)} not held, left out"
    needed = _having(_having(recs, "cores_needed"), "host_cores")
    if needed:
        cores = statistics.median(r["cores_needed"] for r in needed)
        host = min(r["host_cores"] for r in needed)
        if cores > host:
            return f"{note}: the load needs ~{cores:.1f} cores, the host has {host}"
        return f"{note} (the load needs ~{cores:.1f} of the host's {host} cores)"
    return note


def _having(recs: List[Dict[str, Any]], key: str) -> List[Dict[str, Any]]:
    return [r for r in recs if isinstance(r.get(key), (int, float)) and not isinstance(r[key], bool)]


def _row(rows: List[List[str]], name: str, recs: List[Dict[str, Any]], value: Optional[float],
         at_least: bool, bound: float, digits: int, note: str) -> int:
    """Appends one target's row; 1 if it was missed. ``runs``: the runs behind the lines (a
    catch-up line is already the median of its run's repeats)."""
    if value is None:
        met = "-"
    else:
        met = "yes" if (value >= bound if at_least else value <= bound) else "NO"
    sign = ">=" if at_least else "<="
    runs = sum(int(r.get("repeat") or 1) for r in recs)
    rows.append([name, str(len(recs)), str(runs), _num(value, digits), f"{sign} {_num(bound, digits)}",
                 met, note])
    return met == "NO"


def render(lines: List[Dict[str, Any]]) -> str:
    rows, missed, quick = judge(lines)
    head = ("targets (medians over each group's lines; '-' = not measured"
            + ("; QUICK lines only: smaller backlogs and shorter loads than the targets assume" if quick else "")
            + f"): {missed} missed")
    return head + "\n" + _table(["target", "lines", "runs", "median", "bound", "met", ""], rows)


def _newest(results_path: str) -> str:
    """The commit of the results file's last line, which a run appends."""
    try:
        recorded = results.load(results_path)
    except OSError as exc:
        raise ValueError(f"cannot read {results_path} ({exc.strerror}); run 'make bench' first, "
                         f"or name a results file") from None
    if not recorded:
        raise ValueError(f"{results_path} has no results yet; run 'make bench' first")
    return str(recorded[-1]["commit"])


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.targets", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sides", nargs="*",
                   help="commits or results files, judged together (default: the results file's "
                   "newest commit)")
    p.add_argument("--results", default=env.RESULTS, help="where commits are looked up")
    args = p.parse_args(argv)
    lines: List[Dict[str, Any]] = []
    labels = []
    try:
        for side in args.sides or [_newest(args.results)]:
            label, chosen = select(side, args.results)
            labels.append(f"{label} ({len(chosen)} lines)")
            lines += chosen
    except ValueError as exc:
        print(f"bench.targets: {exc}", file=sys.stderr)
        return 2
    print(", ".join(labels))
    print(render(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
