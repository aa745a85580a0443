"""``streamer audit``'s memory and speed against the table's size: ``python -m bench.audit``.

For each size, a table of the bulk shape's columns is loaded (outside the binlog), a streamer
snapshots it into its topic, and ``streamer audit`` compares the two while that streamer runs.
The audit must keep its memory flat in the table's size (its digests go to SQLite on disk): the
line records its peak RSS (the child's ru_maxrss), its wall time and rows per second, and the
verdict, which must be "equal". Results are appended to the results file like the suite's.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from typing import Any, Dict, List, Optional

import yaml

from . import env, results, snapshot
from .proc import BenchError, Streamer
from .shapes import drop
from .suite import _label
from .watch import delete_namespace


def run(python: str, rows: int, workdir: str) -> Dict[str, Any]:
    db, rows, _ = snapshot.load(False, rows)
    ns = env.unique("audit")
    cfg_path = env.write_streamer_config(os.path.join(workdir, f"{ns}.yaml"), ns, [f"{db}.snap"])
    with open(cfg_path, encoding="utf-8") as fh:
        cfg = yaml.safe_load(fh)
    cfg["start"] = {"initial": "snapshot"}
    with open(cfg_path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(cfg, fh)
    log_path = os.path.join(workdir, f"{ns}.log")
    try:
        with Streamer(python, cfg_path, log_path, []) as streamer:
            deadline = time.monotonic() + 1800
            while b" done: " not in open(log_path, "rb").read():
                streamer.sample()
                if time.monotonic() > deadline:
                    raise BenchError(f"the snapshot did not finish (log {log_path})")
                time.sleep(0.5)
            began = time.monotonic()
            proc = subprocess.Popen([python, "-m", "streamer.cli", "audit", "-c", cfg_path,
                                     "--tables", f"{db}.snap", "--json"], cwd=env.ROOT,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            out, err = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
            _, status, usage = os.wait4(proc.pid, 0)
            seconds = time.monotonic() - began
            streamer.stop()
    finally:
        delete_namespace(ns)
        drop(db)
    if os.waitstatus_to_exitcode(status) != 0:
        raise BenchError(f"the audit exited with {status}: {err.decode()[-2000:]}")
    found = json.loads(out)
    return {"shape": "audit", "python": _label(python), "rows": rows, "audit_rows": found["rows"], "equal": found["equal"],
            "audit_s": round(seconds, 2), "audit_rows_s": round(rows / seconds, 1),
            "audit_rss_mb": round(usage.ru_maxrss / 1024.0, 1)}


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--python", required=True)
    p.add_argument("--rows", type=int, action="append", help="table sizes (default 100k and 1M)")
    p.add_argument("--results", default=os.path.join(env.ROOT, "bench", "results.jsonl"))
    args = p.parse_args(argv)
    header = results.run_header(False, 1)
    lines = []
    with tempfile.TemporaryDirectory(prefix="bench-audit-") as workdir:
        for rows in args.rows or [100000, 1000000]:
            line = dict(header, **run(args.python, rows, workdir))
            print(f"bench: audit of {rows} rows: {line['audit_s']} s "
                  f"({line['audit_rows_s']:.0f} rows/s), peak RSS {line['audit_rss_mb']} MB, "
                  f"{'equal' if line['equal'] else 'DIFFERENT'}", flush=True)
            lines.append(line)
    with open(args.results, "a", encoding="utf-8") as fh:
        for line in lines:
            fh.write(json.dumps(line, sort_keys=True) + "\n")
    return 0 if all(line["equal"] for line in lines) else 1


if __name__ == "__main__":
    raise SystemExit(main())
