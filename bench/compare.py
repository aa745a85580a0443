"""``python -m bench.compare A B``: what changed between two commits or two result files.

A and B are each a results file (JSON lines as bench.suite writes) or a commit (any unique prefix
of a commit recorded in bench/results.jsonl, or a ref git can resolve such as HEAD~3). Per shape
and interpreter, and for live runs per offered rate, the median over all of that side's lines is
compared, with the % change; changes beyond ``--threshold`` in the bad direction are marked.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from typing import Any, Dict, List, Optional, Tuple

from . import env, results
from .report import _table

Group = Tuple[str, str]


def _resolve(ref: str) -> Optional[str]:
    out = subprocess.run(["git", "rev-parse", "--verify", "--quiet", ref + "^{commit}"],
                         cwd=env.ROOT, capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else None


def select(side: str, results_path: str) -> Tuple[str, List[Dict[str, Any]]]:
    """The lines one side names, and a label for it; ValueError says how to fix a bad side."""
    if os.path.isfile(side):
        return side, results.load(side)
    if not os.path.isfile(results_path):
        raise ValueError(f"{side!r} is not a file, and there is no results file {results_path} "
                         f"to look the commit up in")
    lines = results.load(results_path)
    full = _resolve(side)
    wanted = full or side.lower()
    chosen = [r for r in lines if r.get("commit", "").startswith(wanted)]
    commits = sorted({r["commit"] for r in chosen})
    if not commits:
        known = sorted({r.get("commit", "")[:12] for r in lines})
        raise ValueError(f"no results for {side!r} in {results_path}; run 'make bench' at that "
                         f"commit first, or pass a results file. Commits with results: "
                         f"{', '.join(known) or 'none'}")
    if len(commits) > 1:
        raise ValueError(f"{side!r} matches several commits ({', '.join(c[:12] for c in commits)}); "
                         f"give more of the hash")
    return commits[0][:12], chosen


def share_group(shape: str, share: float, engine: str = "innodb") -> str:
    """The group name of a live load at ``share`` of its catch-up rate, e.g. bulk-live@0.5sat.

    The rate moves with the host and the code, the experiment does not. A source in another
    engine than InnoDB (its rows stored nowhere: their storage CPU off the shared cores) is
    another experiment; lines from before engines were recorded are InnoDB's."""
    return f"{shape}@{share:g}sat" + ("" if engine == "innodb" else f"/{engine}")


def group_of(rec: Dict[str, Any]) -> Group:
    """Lines of one group measured the same thing, so their median means something."""
    shape = rec["shape"]
    offered = rec.get("offered_rows_s")
    share = rec.get("saturation_share")
    if isinstance(share, (int, float)):
        shape = share_group(shape, share, rec.get("source_engine", "innodb"))
    elif isinstance(offered, (int, float)):
        # A live run at another offered rate is another experiment: its latency is not a sample
        # of the same distribution (e.g. 550 rows/s, the suite's default, against 12k).
        shape += f"@{offered:g}/s"
    # Quick runs have other row counts: never mixed with full runs of the same shape.
    if rec.get("quick"):
        shape += "/quick"
    if rec.get("format"):  # another message format than the streamer's (bench.suite --format)
        shape += f"/{rec['format']}"
    return shape, rec["interpreter"]


def medians(lines: List[Dict[str, Any]]) -> Dict[Group, Dict[str, float]]:
    groups: Dict[Group, List[Dict[str, Any]]] = {}
    for rec in lines:
        groups.setdefault(group_of(rec), []).append(rec)
    out: Dict[Group, Dict[str, float]] = {}
    for group, recs in groups.items():
        out[group] = {}
        for key in results.HIGHER_IS_BETTER + results.LOWER_IS_BETTER:
            values = [r[key] for r in recs if isinstance(r.get(key), (int, float))]
            if values:
                out[group][key] = statistics.median(values)
        out[group]["runs"] = len(recs)
    return out


def compare(a: Dict[Group, Dict[str, float]], b: Dict[Group, Dict[str, float]],
            threshold: float) -> List[List[str]]:
    rows = []
    for group in sorted(set(a) | set(b)):
        ma, mb = a.get(group, {}), b.get(group, {})
        for key in results.HIGHER_IS_BETTER + results.LOWER_IS_BETTER:
            va, vb = ma.get(key), mb.get(key)
            if va is None and vb is None:
                continue
            change, mark = "-", ""
            if va is not None and vb is not None and va != 0:
                pct = 100.0 * (vb - va) / abs(va)
                change = f"{pct:+.1f}%"
                worse = pct < 0 if key in results.HIGHER_IS_BETTER else pct > 0
                if abs(pct) >= threshold:
                    mark = "WORSE" if worse else "better"
            rows.append([group[0], group[1], key, _fmt(va), _fmt(vb), change, mark])
    return rows


def _fmt(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.6g}"


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a", help="commit or results file (before)")
    p.add_argument("b", help="commit or results file (after)")
    p.add_argument("--results", default=env.RESULTS, help="where commits are looked up")
    p.add_argument("--threshold", type=float, default=10.0,
                   help="mark changes of at least this many %% (default 10; the bench is noisy)")
    args = p.parse_args(argv)
    try:
        label_a, lines_a = select(args.a, args.results)
        label_b, lines_b = select(args.b, args.results)
    except ValueError as exc:
        print(f"bench.compare: {exc}", file=sys.stderr)
        return 2
    ma, mb = medians(lines_a), medians(lines_b)
    print(f"A = {label_a} ({len(lines_a)} lines)   B = {label_b} ({len(lines_b)} lines)")
    runs = [[s, i, str(ma.get((s, i), {}).get("runs", 0)), str(mb.get((s, i), {}).get("runs", 0))]
            for s, i in sorted(set(ma) | set(mb))]
    print(_table(["shape", "python", "lines A", "lines B"], runs))
    print()
    print(_table(["shape", "python", "metric", "A", "B", "change", ""], compare(ma, mb, args.threshold)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
