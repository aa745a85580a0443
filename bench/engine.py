"""The engine's CPU per row change, two commits side by side: ``python -m bench.engine A B``.

A catch-up through Kafka varies by 10-20 % between runs of one commit on this machine (the broker
and the server share its two cores with the streamer), more than the 3 % a refactor of the hot
path is judged by. This bench takes Kafka and the server out: it records one binlog file of the
bulk shape's rows and one of single-row UPDATE transactions (bench.payload's recorder), then
streams each file from memory through each commit's engine into its in-memory publisher
(tests/unit/engine_parts), in a fresh interpreter per run, alternating the commits. Each run
streams the file three times: the first pass is cold (the JIT compiling), the third warm. What is
left is reading, decoding, encoding and the pipeline: the process's CPU time per row change.

A commit is checked out in a temporary git worktree; ``.`` is the working tree as it is. Run it
under the interpreter to measure (PyPy in production); the line goes to the results file. With
``--tuned``, each commit's engine runs with the JIT tuned as its ``streamer run`` tunes it
(``cli._tune_jit``: thresholds and hints), not with PyPy's defaults.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Sequence

from . import env, results

PASSES = 3
FILE = "mysql-bin.000002"


def child(tree: str, path: str, tuned: bool = False, exclude: Sequence[str] = ()) -> None:
    """In a fresh interpreter: stream ``path`` through ``tree``'s engine PASSES times; prints
    the CPU µs per row change of each pass as a JSON list. ``tuned``: the JIT as ``streamer run``
    tunes it; ``exclude``: columns of the table kept out of Kafka (tables.columns.exclude)."""
    import time
    sys.path.insert(0, tree)
    os.chdir(tree)
    from streamer import config
    from streamer.ops.metrics import Metrics
    from streamer.position import Position
    from streamer.source import patches
    from tests.unit.engine_parts import FakeClock, InMemoryPublisher, ReplayedBinlog
    patches.apply()
    if tuned:
        from streamer import cli
        cli._tune_jit()
    with open(path, "rb") as fh:
        data = fh.read()
    workdir = tempfile.mkdtemp(prefix="streamer-engine-")
    with open(os.path.join(workdir, "pw"), "w") as fh:
        fh.write("unused\n")
    cfg_path = os.path.join(workdir, "c.yaml")
    with open(cfg_path, "w") as fh:
        fh.write(f"namespace: bench\nsource: {{name: b}}\nmysql: {{server_id: 9, password_file: "
                 f"'{workdir}/pw'}}\ntables: {{include: ['payload*.*'], columns: {{exclude: "
                 f"{json.dumps(['payload*.t.' + c for c in exclude])}}}}}\n"
                 f"warmup: {{transactions: 0}}\n")
    cfg = config.load(cfg_path, environ={})
    out = []
    for _ in range(PASSES):
        publisher = InMemoryPublisher()
        streamer = _streamer(cfg, Metrics(cfg), publisher, FakeClock())
        start = Position(FILE, 4)
        reader = ReplayedBinlog("unused", start, on_end=streamer.request_stop, file=FILE,
                                data=data)
        began = time.process_time()
        with reader:
            streamer.stream(publisher, reader, start)
        out.append((time.process_time() - began) / len(publisher.messages()) * 1e6)
    print(json.dumps(out))


def _streamer(cfg: Dict[str, Any], metrics: Any, publisher: Any, clock: Any) -> Any:
    """The engine of the tree imported: a Supervisor's streamer, or (commits before the
    supervisor, this wave's base among them) the one Streamer of engine.loop."""
    try:
        from streamer.engine.supervisor import Supervisor
    except ImportError:
        from streamer.engine.loop import Streamer  # type: ignore[import-not-found]
        return Streamer(cfg, metrics=metrics, publisher=lambda _: publisher, clock=clock)
    return Supervisor(cfg, metrics=metrics, publisher=lambda _: publisher, clock=clock).streamer


def _tree(commit: str, workdir: str) -> str:
    if commit == ".":
        return env.ROOT
    path = os.path.join(workdir, commit.replace("/", "_"))
    subprocess.run(["git", "worktree", "add", "--detach", path, commit], cwd=env.ROOT,
                   check=True, capture_output=True)
    return path


def _run(tree: str, path: str, tuned: bool, exclude: Sequence[str]) -> List[float]:
    out = subprocess.run([sys.executable, "-m", "bench.engine", "--child", tree, path,
                          "--tuned" if tuned else "--untuned", *exclude],
                         cwd=env.ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"bench.engine: the run of {tree} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: List[str]) -> int:
    if argv[:1] == ["--child"]:
        child(argv[1], argv[2], tuned=argv[3] == "--tuned", exclude=argv[4:])
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("a", help="a commit, or . for the working tree")
    p.add_argument("b", help="a commit, or . for the working tree")
    p.add_argument("--rows", type=int, default=200000, help="bulk rows (1000 per INSERT)")
    p.add_argument("--oltp", type=int, default=60000, help="single-row UPDATE transactions")
    p.add_argument("--repeat", type=int, default=3, help="runs of each commit, alternating")
    p.add_argument("--tuned", action="store_true",
                   help="the JIT tuned as `streamer run` tunes it (cli._tune_jit), not PyPy's "
                   "defaults")
    p.add_argument("--exclude", action="append", default=[], metavar="COLUMN",
                   help="a column of the table (name, note, at, amount, body) kept out of Kafka "
                   "(tables.columns.exclude; repeatable): its values are read past, unpublished")
    p.add_argument("--results", default=env.RESULTS)
    args = p.parse_args(argv)
    from .payload import _record
    samples: Dict[str, Dict[str, List[List[float]]]] = {}
    with tempfile.TemporaryDirectory(prefix="streamer-engine-") as workdir:
        trees = {c: _tree(c, workdir) for c in (args.a, args.b)}
        try:
            for shape, rows, oltp in (("bulk", args.rows, 0), ("oltp", 1000, args.oltp)):
                path = os.path.join(workdir, f"{shape}.binlog")
                with open(path, "wb") as fh:
                    fh.write(_record(rows, oltp)[0])
                for _ in range(args.repeat):
                    for commit, tree in trees.items():
                        samples.setdefault(shape, {}).setdefault(commit, []).append(
                            _run(tree, path, args.tuned, args.exclude))
        finally:
            for commit, tree in trees.items():
                if commit != ".":
                    subprocess.run(["git", "worktree", "remove", "--force", tree], cwd=env.ROOT,
                                   capture_output=True)
    for shape, by_commit in samples.items():
        # With columns left out, a shape of its own (as bench.suite names its snapshot's).
        name = f"engine-{shape}" + ("-without-" + "-".join(args.exclude) if args.exclude else "")
        rec: Dict[str, Any] = dict(results.run_header(False, args.repeat), shape=name,
                                   interpreter=sys.implementation.name, a=args.a, b=args.b,
                                   tuned=args.tuned)
        if args.exclude:
            rec["exclude"] = args.exclude
        for side, commit in (("a", args.a), ("b", args.b)):
            runs = by_commit[commit]
            rec[f"{side}_cold_us_per_row"] = round(statistics.median(r[0] for r in runs), 3)
            rec[f"{side}_warm_us_per_row"] = round(statistics.median(r[-1] for r in runs), 3)
        results.emit(rec, args.results)
        for phase in ("cold", "warm"):
            a, b = rec[f"a_{phase}_us_per_row"], rec[f"b_{phase}_us_per_row"]
            print(f"engine {shape} {phase}: {args.a} {a:.3f} µs/row, {args.b} {b:.3f} "
                  f"({(b / a - 1) * 100:+.1f} %), medians of {args.repeat}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
