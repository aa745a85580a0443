"""``python -m bench.suite``: the whole benchmark, per interpreter, appended to the results file.

For each shape a backlog is loaded once (streamer stopped); then, per repeat and interpreter, the
bare python-mysql-replication read of that binlog range and the streamer's catch-up of it are
timed. Then the live loads run once per interpreter: sysbench oltp_insert at a fixed rate, and
each shape's own rows at a share of the warm catch-up rate just measured (bench/loaded.py). One
JSON line per (interpreter, shape) is appended (medians over the repeats) and the tables are
printed. A run needs room on the binlog's disk first, and ends by rotating the local server's
binlog and purging every older file (--keep-binlogs keeps them; bench/binlogs.py).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Any, Dict, List, Optional, Sequence

import pymysql

from . import (binlogs, catchup, env, latency, live, loaded, report, results, snapshot, startup,
               targets)
from .proc import (JIT_THREADS, BenchError, interpreter_of, run_json, server_pids,
                   threads_cpu_seconds)
from .shapes import SHAPES, Backlog, drop, load_backlog
from .watch import delete_namespace


def _bare(python: str, backlog: Backlog) -> Dict[str, Any]:
    out = run_json([python, "-m", "bench.bare", "--port", str(env.MYSQL_PORT),
                    "--password-file", env.password_file("streamer"),
                    "--server-id", str(env.server_id(backlog.db)),
                    "--start", "%s:%d" % backlog.start, "--end", "%s:%d" % backlog.end,
                    "--db", backlog.db, "--rows", str(backlog.rows)], f"bare read under {python}")
    return json.loads(out)


def _label(python: str) -> str:
    """A path as recorded (an interpreter, a library): relative to the repo when inside it, or
    to the project's venv it is in (a worktree measured with the main tree's venv): results
    name no machine's paths."""
    path = os.path.abspath(python)
    if path.startswith(env.ROOT + os.sep):
        return os.path.relpath(path, env.ROOT)
    parts = path.split(os.sep)
    venv = next((i for i, p in enumerate(parts) if p.startswith(".venv")), None)
    return os.sep.join(parts[venv:]) if venv is not None else python


# Unrecorded bulk catch-ups per interpreter before the first shape. Two left the broker compiling
# ~1 s per catch-up through the first measured runs (warm_servers).
WARMUP_ROUNDS = 5


def warm_servers(pythons: List[str], runs: int, quick: bool, workdir: str) -> None:
    """Catch-ups that are timed but not recorded: Kafka's JVM compiles its own hot paths under
    the first million or so messages. Right after `make up`, the first three bulk runs of each
    interpreter came out at 59k, 79k and 91k rows/s (PyPy) and the next three at 94k, 119k and
    121k; CPython 33-42k, then 49-51k. The broker's JIT compilers took 3.1 s of a PyPy
    catch-up's 6.1 s in the first round, ~1 s in the third, 0.15-0.45 s from the sixth on; PyPy's
    e2e went 34k, 84k, 61k, 88k, 93k, then 97k, 87k, 93k rows/s. Each line says how long the
    broker compiled."""
    if runs <= 0:
        return
    kafka = server_pids().get("kafka")
    backlog = load_backlog(SHAPES["bulk"], quick)
    try:
        for n in range(runs):
            for python in pythons:
                began = threads_cpu_seconds(kafka, JIT_THREADS) if kafka else None
                c = catchup.run(python, backlog, workdir)
                ended = threads_cpu_seconds(kafka, JIT_THREADS) if kafka else None
                jit = (f", Kafka's JIT compilers {ended - began:.2f} s"
                       if began is not None and ended is not None else "")
                print(f"bench: warm-up {n + 1}/{runs} under {_label(python)} (not recorded): "
                      f"e2e {c['e2e_rows_s']:.0f} rows/s{jit}", flush=True)
    finally:
        drop(backlog.db)


def measure_shape(shape: str, pythons: List[str], repeat: int, quick: bool,
                  workdir: str) -> List[Dict[str, Any]]:
    backlog = load_backlog(SHAPES[shape], quick)
    print(f"bench: {shape}: {backlog.rows} rows loaded in {backlog.load_s:.1f}s into {backlog.db} "
          f"({backlog.start[0]}:{backlog.start[1]} .. {backlog.end[0]}:{backlog.end[1]})", flush=True)
    samples: Dict[str, List[Dict[str, Any]]] = {p: [] for p in pythons}
    try:
        for n in range(repeat):
            # Interpreters alternate within each repeat so background noise hits both alike.
            for python in pythons:
                b = _bare(python, backlog)
                c = catchup.run(python, backlog, workdir)
                line = {"shape": shape, "python": _label(python),
                        "interpreter": b["interpreter"], "version": b["version"],
                        "rows": backlog.rows, "bare_rows_s": b["rows_s"],
                        "bare_warm_rows_s": b["warm_rows_s"], "bare_rows_in_range": b["rows_in_range"],
                        "load_s": round(backlog.load_s, 2)}
                line.update({k: v for k, v in c.items() if k != "rows"})
                line["ratio"] = round(c["e2e_rows_s"] / b["rows_s"], 3)
                samples[python].append(line)
                print(f"bench: {shape} {b['interpreter']} run {n + 1}/{repeat}: bare "
                      f"{b['rows_s']:.0f} rows/s, e2e {c['e2e_rows_s']:.0f} rows/s, catch-up "
                      f"{c['catchup_rows_s']} rows/s, warm {c['warm_rows_s']} rows/s, "
                      f"RSS {c['rss_mb']} MB, CPU steal {c['cpu_steal_pct']}%", flush=True)
    finally:
        drop(backlog.db)
    out = []
    for python in pythons:
        rec = results.median_of(samples[python])
        rec["e2e_samples"] = [s["e2e_rows_s"] for s in samples[python]]
        out.append(rec)
    return out


def measure_live(python: str, args: argparse.Namespace, workdir: str) -> Dict[str, Any]:
    out = live.run(python, workdir, args.live_rate, args.live_seconds, args.live_warmup)
    # One load per interpreter, whatever --repeat says: the line's `repeat` says so.
    rec = {"shape": "live", "python": _label(python), **interpreter_of(python), **out,
           "repeat": 1}
    print(f"bench: live {rec['interpreter']}: {out['rows_s']} rows/s, p50 {out['p50_ms']} ms, "
          f"p99 {out['p99_ms']} ms, max {out['max_ms']} ms", flush=True)
    return rec


def measure_share_live(python: str, shape: str, records: List[Dict[str, Any]],
                       args: argparse.Namespace, workdir: str) -> Dict[str, Any]:
    """The shape's own load at ``args.share`` of the catch-up rate this run measured: the warm
    one, the streamer's steady rate when saturated. A quick backlog commits in a batch or two,
    so its second half times the bench's consumer, not the streamer: quick runs take the cold
    catch-up rate (start-up excluded) instead."""
    label = _label(python)
    of = "catchup_rows_s" if args.quick else "warm_rows_s"
    saturation = next(r[of] for r in records if r["shape"] == shape and r["python"] == label)
    out = loaded.run(python, workdir, SHAPES[shape], saturation, args.share, args.live_seconds,
                     args.live_warmup, args.source_engine)
    rec = {"shape": f"{shape}-live", "python": label, **interpreter_of(python), **out,
           "saturation_of": of, "repeat": 1}
    held = "" if out["load_held"] else " (sysbench could not hold the rate)"
    if out["cores_needed"] is not None:
        held += f"; the offered rate needs ~{out['cores_needed']:.2f} cores"
    print(f"bench: {shape} live ({args.source_engine}) at {args.share:g} of {saturation:.0f} rows/s "
          f"{rec['interpreter']}: {out['rows_s']:.0f} rows/s{held}, p50 {out['p50_ms']} ms, "
          f"p99 {out['p99_ms']} ms, max {out['max_ms']} ms, host busy {out['busy_pct']}%; "
          f"cores: streamer {out['streamer_cores']}, MariaDB {out['mariadb_cores']}, "
          f"Kafka {out['kafka_cores']} (its JIT {out['kafka_jit_cores']}); waiting for a CPU: "
          f"streamer {out['streamer_runq']}, MariaDB {out['mariadb_runq']}, "
          f"Kafka {out['kafka_runq']}", flush=True)
    return rec


def measure_snapshots(pythons: List[str], quick: bool, workdir: str, chunk_rows: Optional[int],
                      rows: Optional[int], table: str = "bulk",
                      exclude: Sequence[str] = ()) -> List[Dict[str, Any]]:
    """The snapshot shape (bench.snapshot): one table, snapshotted by each interpreter in turn;
    ``table`` wide, mixed or binary: the snapshot-wide, snapshot-mixed or snapshot-binary shape,
    without the live stream beside it; ``exclude``: its columns kept out of Kafka, a shape of its own
    (snapshot-wide-without-payload)."""
    db, rows, load_s = snapshot.load(quick, rows, table)
    shape = "snapshot" if table == "bulk" else f"snapshot-{table}"
    if exclude:
        shape += "-without-" + "-".join(exclude)
    print(f"bench: {shape}: {rows} rows loaded in {load_s:.1f}s into {db}", flush=True)
    out = []
    try:
        for python in pythons:
            rec = {"shape": shape, "python": _label(python), **interpreter_of(python),
                   **snapshot.run(python, db, rows, workdir, chunk_rows, exclude), "repeat": 1}
            print(f"bench: {shape} {rec['interpreter']}: {rec['rows_s']:.0f} rows/s "
                  f"(launch to done {rec['launch_rows_s']:.0f} rows/s), "
                  f"{rec['cpu_s']} CPU-s, peak RSS {rec['rss_mb']:.0f} MB "
                  f"(+{rec['rss_growth_mb']} MB over the second half)", flush=True)
            out.append(rec)
            if table != "bulk" or exclude:
                continue
            cost = {"shape": "snapshot-live", "python": _label(python), **interpreter_of(python),
                    **snapshot.live_cost(python, db, workdir, 3.0 if quick else 10.0),
                    "repeat": 1}
            print(f"bench: snapshot-live {cost['interpreter']}: heartbeat latency p50/p99 "
                  f"{cost['without_p50_ms']}/{cost['without_p99_ms']} ms without a snapshot, "
                  f"{cost['p50_ms']}/{cost['p99_ms']} ms during one (host busy "
                  f"{cost['without_busy_pct']}% / {cost['busy_pct']}%)", flush=True)
            out.append(cost)
    finally:
        drop(db)
    return out


def measure_startup(python: str, runs: int, workdir: str) -> Dict[str, Any]:
    out = startup.run(python, workdir, runs)
    rec = {"shape": "startup", "python": _label(python), **interpreter_of(python), **out,
           "repeat": runs}
    print(f"bench: start-up {rec['interpreter']}: first start {out['fresh_start_s']} s, restart "
          f"{out['restart_s']} s (medians of {runs})", flush=True)
    return rec


# A live batch's length before its commit, for the txn-batch line (batch.linger_ms's default).
TXN_BATCH_MS = 20.0


def measure_txn(python: str, system: bool, seconds: float, workdir: str,
                batch_ms: float = 0.0) -> Dict[str, Any]:
    """One Kafka transaction's cost (bench/txn.py), on the project's librdkafka or the system's;
    with ``batch_ms``, each transaction open that long before its commit (txn-batch)."""
    ns = env.unique("bench")
    cfg = env.write_streamer_config(os.path.join(workdir, f"{ns}.yaml"), ns, ["none.none"])
    # Empty: the streamer's own choice, whatever this process's environment says.
    environ = {"STREAMER_LIBRDKAFKA": "system" if system else ""}
    try:
        out = json.loads(run_json([python, "-m", "bench.txn", "-c", cfg, "--seconds", str(seconds),
                                   "--batch-ms", str(batch_ms)], f"bench.txn under {python}", environ))
    finally:
        delete_namespace(ns)
    out["library"] = _label(out["library"])  # a path inside the repo is kept relative to it
    shape = "txn-system" if system else "txn-batch" if batch_ms else "txn"
    rec = {"shape": shape, "python": _label(python), **out, "seconds": seconds, "repeat": 1}
    if batch_ms:
        rec["batch_ms"] = batch_ms
    print(f"bench: {rec['shape']} {out['interpreter']} ({out['library']}): {out['commits_s']:.0f} "
          f"commits/s, {out['cpu_ms_per_commit']} ms CPU per commit, of which librdkafka's main "
          f"thread {out['rdk_main_ms_per_commit']} ms; commit p50 {out['commit_p50_ms']} ms, "
          f"p99 {out['commit_p99_ms']} ms", flush=True)
    return rec


# The restart pattern's load starts this long after the first probe row (bench.latency).
RESTART_AFTER_S = 1.5


def measure_latency(python: str, rate: float, args: argparse.Namespace,
                    workdir: str, after_start_s: Optional[float] = None) -> Dict[str, Any]:
    """Fixed-rate single-row transactions against the streamer under ``python`` (bench.latency);
    with ``after_start_s``, the restart pattern (shape latency-restart)."""
    out = latency.run(python, workdir, rate, args.latency_seconds, args.latency_warmup,
                      args.jit_warmup, after_start_s)
    shape = "latency" if after_start_s is None else "latency-restart"
    rec = {"shape": shape, "python": _label(python), **interpreter_of(python), **out,
           "repeat": 1}
    print(f"bench: {shape} {rec['interpreter']} at {rate:g} rows/s ({out['rows_s']} achieved): "
          f"p50 {out['p50_ms']} ms, p99 {out['p99_ms']} ms, p99.9 {out['p999_ms']} ms, max "
          f"{out['max_ms']} ms; cold p99 {out['cold_p99_ms']} ms, max {out['cold_max_ms']} ms; "
          f"all max {out['all_max_ms']} ms, {out['all_over_100ms_pct']} % over 100 ms "
          f"(JIT warm-up: {out['jit_warmup_transactions']} transactions)", flush=True)
    return rec


def measure_floor(python: str, rate: float, args: argparse.Namespace,
                  producers: int = 1, checkpoint: bool = False) -> Dict[str, Any]:
    """bench.floor under ``python`` as a line comparable with the latency lines: one message per
    Kafka transaction back to back (``rate`` 0), or at ``rate`` with every message due in each
    transaction, stamped when it fell due (the streamer's group commit without MySQL). With two
    ``producers`` taking turns (the streamer's publisher does), the line's shape is
    ``floor-turns``; with a ``checkpoint`` in each transaction (so do its batches),
    ``floor-checkpoint``."""
    cmd = [python, "-m", "bench.floor", "--rate", str(rate), "--seconds",
           str(args.latency_seconds), "--warmup", str(args.latency_warmup),
           "--producers", str(producers)] + (["--checkpoint"] if checkpoint else [])
    out = json.loads(run_json(cmd + (["--group"] if rate else []),
                              f"bench.floor under {python}").splitlines()[-1])
    shape = "floor-checkpoint" if checkpoint else "floor" if producers == 1 else "floor-turns"
    rec = {"shape": shape, "producers": producers, "checkpoint": checkpoint,
           "python": _label(python), **interpreter_of(python),
           "offered_rows_s": rate, "rows_s": out["rate_achieved"], "rows": out["messages"],
           "seconds": args.latency_seconds, "warmup_s": args.latency_warmup,
           "mode": out["mode"], "commits": out["commits"], "librdkafka": out["librdkafka"],
           "checkpoint_offsets": out["checkpoint_offsets"],
           **latency.flatten("", out["latency_ms"]),
           **latency.flatten("cold_", out["warmup_latency_ms"]),
           **latency.flatten("commit_", out["commit_ms"]), "repeat": 1}
    print(f"bench: {rec['shape']} {rec['interpreter']} at {rate:g}/s ({out['rate_achieved']} achieved): "
          f"p50 {rec['p50_ms']} ms, p99 {rec['p99_ms']} ms, max {rec['max_ms']} ms", flush=True)
    return rec


def compile_streamer(python: str) -> None:
    """Bytecode for the streamer package under PYTHON, as `pip install` writes it for a release.
    Without it, where PYTHONDONTWRITEBYTECODE is set (as in CI), every start compiles the
    package again: ~80 ms of a PyPy start (0.41 -> 0.33 s), ~20 ms of a CPython one."""
    run_json([python, "-m", "compileall", "-q", "streamer"], f"compiling the streamer under {python}")


def parse_args(argv: List[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.suite", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--python", action="append", help="interpreter to measure (repeatable; "
                   "default: this one)")
    p.add_argument("--shape", action="append", choices=sorted(SHAPES),
                   help="catch-up shape (repeatable; default: all)")
    p.add_argument("--no-live", action="store_true",
                   help="skip the live sysbench loads (at --live-rate and at --share)")
    p.add_argument("--no-rate-live", action="store_true", help="skip the load at --live-rate")
    p.add_argument("--no-catchup", action="store_true", help="skip the catch-up shapes")
    p.add_argument("--no-snapshot", action="store_true",
                   help="skip the snapshot shape (1M rows of the bulk shape's columns)")
    p.add_argument("--snapshot-table", action="append", choices=sorted(snapshot.TABLES),
                   help="the snapshot shapes' tables (repeatable; default bulk, wide and "
                        "mixed): bulk (snapshot, with a live stream beside it), wide "
                        "(snapshot-wide), mixed (snapshot-mixed: wide's and a DATE, a TIMESTAMP "
                        "and a SET) and binary (snapshot-binary: BINARY, VARBINARY and BLOB "
                        "columns, TIMEs and a YEAR)")
    p.add_argument("--snapshot-chunk-rows", type=int,
                   help="snapshot.chunk_rows for the snapshot shape (default: the config's)")
    p.add_argument("--snapshot-exclude", action="append", default=[], metavar="COLUMN",
                   help="a column of the snapshot shapes' table kept out of Kafka "
                        "(tables.columns.exclude; repeatable): shapes of their own, such as "
                        "snapshot-wide-without-payload")
    p.add_argument("--snapshot-rows", type=int,
                   help=f"rows of the snapshot shape's table (default {snapshot.FULL_ROWS}, "
                   f"quick {snapshot.QUICK_ROWS})")
    p.add_argument("--no-startup", action="store_true",
                   help="skip timing start-up (spawn to reading the binlog)")
    p.add_argument("--no-txn", action="store_true",
                   help="skip timing Kafka transactions on the project's and the system's librdkafka")
    p.add_argument("--no-latency", action="store_true",
                   help="skip the fixed-rate latency loads and their floor")
    p.add_argument("--latency-rate", type=float, action="append",
                   help="rows/s of a latency load, and of a grouped floor (repeatable; default 1000 "
                   "and 5000, quick 200)")
    p.add_argument("--latency-seconds", type=float,
                   help="each latency load's and floor's length (default 30, quick 4)")
    p.add_argument("--latency-warmup", type=float,
                   help="their first seconds, reported apart as cold (default 5, quick 1)")
    p.add_argument("--jit-warmup", type=int, metavar="TRANSACTIONS",
                   help="the streamer's warmup.transactions in the latency loads (default: its "
                   "default); under PyPy each load starts once that warm-up is over")
    p.add_argument("--quick", action="store_true", help="small row counts and a short live run")
    p.add_argument("--format", choices=sorted(env.FORMATS), default="streamer",
                   help="the messages' format (config format): streamer (the default), json, "
                        "debezium-json, debezium-avro (through the local registry)")
    p.add_argument("--repeat", type=int, default=1, help="runs per shape and interpreter (medians)")
    p.add_argument("--warmup", type=int, help="unrecorded bulk catch-ups per interpreter first, "
                   f"to warm Kafka (default {WARMUP_ROUNDS}; 0 with --quick or --no-catchup)")
    p.add_argument("--results", default=env.RESULTS, help="JSON lines file to append to")
    p.add_argument("--keep-binlogs", action="store_true",
                   help="keep the binlog files after the run (default: rotate, and purge every "
                   "older file, the run's backlogs and loads among them)")
    p.add_argument("--live-rate", type=int, help="sysbench transactions/s (default 500, quick 100)")
    p.add_argument("--live-seconds", type=int, help="sysbench run time (default 40, quick 6)")
    p.add_argument("--live-warmup", type=float, help="seconds counted as cold (default 10, quick 2)")
    p.add_argument("--share-live", action="append", metavar="SHAPE",
                   choices=sorted(n for n, s in SHAPES.items() if s.live),
                   help="a live load of the shape's own rows at --share of the warm catch-up rate "
                   "this run measured (repeatable; default: each measured shape that has one)")
    p.add_argument("--no-share-live", action="store_true", help="skip the loads at --share")
    p.add_argument("--source-engine", choices=loaded.ENGINES, default="innodb",
                   help="the storage engine of the table the --share-live load writes (default "
                   "innodb). blackhole stores no rows but binlogs them the same, taking MariaDB's "
                   "storage work off the cores the streamer shares (inserting shapes only: bulk); "
                   "memory keeps rows in RAM, with no redo or undo log (tables without TEXT or "
                   "BLOB columns: oltp)")
    p.add_argument("--share", type=float, default=0.5,
                   help="the share of saturation offered by --share-live (default 0.5)")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error(f"--repeat must be at least 1, got {args.repeat}")
    args.python = args.python or [sys.executable]
    for python in args.python:
        if not (os.path.isfile(python) and os.access(python, os.X_OK)):
            p.error(f"--python {python} is not an executable file; run 'make venv' to create "
                    f"the project's virtualenvs")
    if args.warmup is None:
        args.warmup = 0 if args.quick or args.no_catchup else WARMUP_ROUNDS
    if args.warmup < 0:
        p.error(f"--warmup must be 0 or more, got {args.warmup}")
    args.shape = args.shape or sorted(SHAPES)
    if not 0 < args.share <= 1:
        p.error(f"--share must be above 0 and at most 1, got {args.share}")
    measured = [] if args.no_catchup else args.shape
    if args.no_live or args.no_share_live:
        args.share_live = []
    elif args.share_live is None:
        args.share_live = [s for s in measured
                           if SHAPES[s].live and loaded.fits(SHAPES[s], args.source_engine)]
    for shape in args.share_live:
        if shape not in measured:
            p.error(f"--share-live {shape} needs the {shape} catch-up in the same run, for its "
                    f"saturation rate: add --shape {shape} (and drop --no-catchup)")
        try:
            loaded.check_engine(SHAPES[shape], args.source_engine)
        except BenchError as exc:
            p.error(f"--share-live {shape}: {exc}")
    defaults = (100, 6, 2.0, [200.0], 4.0, 1.0) if args.quick else \
        (500, 40, 10.0, [1000.0, 5000.0], 30.0, 5.0)
    for name, value in zip(("live_rate", "live_seconds", "live_warmup", "latency_rate",
                            "latency_seconds", "latency_warmup"), defaults):
        if getattr(args, name) is None:
            setattr(args, name, value)
    if any(r <= 0 for r in args.latency_rate):
        p.error(f"--latency-rate must be above 0, got {args.latency_rate}")
    return args


def main(argv: List[str]) -> int:
    args = parse_args(argv)
    try:
        conn = env.admin()
    except pymysql.err.MySQLError as exc:
        print(f"bench: cannot reach the local MariaDB on 127.0.0.1:{env.MYSQL_PORT} ({exc}); "
              f"run 'make up' first", file=sys.stderr)
        return 2
    try:
        no_room = binlogs.check_room(conn, args.quick)
    finally:
        conn.close()
    if no_room:
        print(f"bench: {no_room}", file=sys.stderr)
        return 2
    try:
        return _measure(args)
    finally:
        if not args.keep_binlogs:
            _purge_binlogs()


def _purge_binlogs() -> None:
    try:
        keep_from = binlogs.local_needs()
    except ValueError as exc:
        print(f"bench: {exc}; the binlog files stay", file=sys.stderr)
        return
    try:
        conn = env.admin()
        try:
            print(binlogs.purge(conn, keep_from=keep_from).describe(), flush=True)
        finally:
            conn.close()
    except pymysql.err.MySQLError as exc:
        print(f"bench: could not purge the binlog ({exc}); the files stay", file=sys.stderr)


def _measure(args: argparse.Namespace) -> int:
    header = results.run_header(args.quick, args.repeat)
    if args.format != "streamer":
        # Another format is another experiment: bench.compare keeps its lines apart.
        header["format"] = args.format
        env.use_format(args.format)
    records: List[Dict[str, Any]] = []
    try:
        for python in args.python:
            compile_streamer(python)
        with tempfile.TemporaryDirectory(prefix="streamer-bench-") as workdir:
            warm_servers(args.python, args.warmup, args.quick, workdir)
            if not args.no_catchup:
                for shape in args.shape:
                    records.extend(measure_shape(shape, args.python, args.repeat, args.quick, workdir))
            if not args.no_snapshot:
                for table in args.snapshot_table or ["bulk", "wide", "mixed"]:
                    records.extend(measure_snapshots(args.python, args.quick, workdir,
                                                     args.snapshot_chunk_rows,
                                                     args.snapshot_rows, table,
                                                     args.snapshot_exclude))
            if not args.no_startup:
                runs = 1 if args.quick else max(5, args.repeat)
                records.extend(measure_startup(p, runs, workdir) for p in args.python)
            if not args.no_txn:
                seconds = 2.0 if args.quick else 8.0
                records.extend(measure_txn(p, system, seconds, workdir, batch_ms)
                               for p in args.python
                               for system, batch_ms in ((False, 0.0), (True, 0.0), (False, TXN_BATCH_MS)))
            if not args.no_latency:
                # The floor under the first interpreter only: it measures the broker, and the
                # producer binding is the same cffi code under both.
                records.extend(measure_floor(args.python[0], rate, args)
                               for rate in [0.0] + args.latency_rate)
                records.extend(measure_floor(args.python[0], rate, args, producers=2)
                               for rate in args.latency_rate)
                records.extend(measure_floor(args.python[0], rate, args, checkpoint=True)
                               for rate in args.latency_rate)
                records.extend(measure_latency(p, rate, args, workdir)
                               for p in args.python for rate in args.latency_rate)
                records.extend(measure_latency(p, rate, args, workdir, RESTART_AFTER_S)
                               for p in args.python for rate in args.latency_rate)
            if not (args.no_live or args.no_rate_live):
                records.extend(measure_live(p, args, workdir) for p in args.python)
            for shape in args.share_live:
                records.extend([measure_share_live(p, shape, records, args, workdir)
                                for p in args.python])
    except BenchError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 1
    results.speedup(records)
    lines = [dict(header, **rec) for rec in records]  # a record's own `repeat` wins
    results.append(args.results, lines)
    print()
    print(report.render(lines))
    print()
    print(targets.render(lines))
    print(f"\nappended {len(lines)} lines to {args.results} (commit {header['commit'][:12]}"
          f"{', dirty' if header['dirty'] else ''})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
