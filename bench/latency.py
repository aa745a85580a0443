"""Live latency at a fixed rate (#37): single-row transactions, a client µs stamp in each row.

Loader threads INSERT one row per autocommit transaction at a fixed total rate; each row holds
the wall clock in µs, taken by the client right before it sends the statement. A
``read_committed`` consumer in its own process notes when each row's message arrives; the
latency is ``arrival - stamp`` (same host, same clock): the source's commit, the binlog read,
the streamer's loop and its Kafka transaction, up to the moment a consumer can read the row.
Rows stamped in the first ``warmup_s`` seconds after the streamer caught up are reported apart
(``cold_*``): the JIT warming at the first changes belongs there, not to the steady state.

One line per rate: p50, p90, p99, p99.9 and max in ms, the share over 50 and 100 ms, the rate the
loader achieved, and the CPU of the streamer, the broker and MariaDB over the load (cores). The
floor these are judged against is bench/floor.py's.

Under PyPy the streamer warms its JIT up while idle (engine.warmup, ``warmup.transactions``): the
load starts once that is over (``jit_warmup_wait_s``), as a first burst meets a streamer that has
been idle a few seconds. ``--jit-warmup 0`` measures a load that meets the JIT cold.
``--after-start S`` is the restart pattern instead (shape ``latency-restart``): the load starts
S seconds after the first probe row came through, into the warm-up under way; ``all_*`` is then
the whole load's, its first second included. ``--format`` publishes in another message format
(bench.env.FORMATS; debezium-avro through the local registry), and the line says which.

    python -m bench.latency --python PY [--rate N ...] [--seconds S] [--warmup W]
        [--jit-warmup TRANSACTIONS] [--after-start S] [--format F] [--results F]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import env, results
from .floor import percentiles
from .proc import BenchError, CpuWindow, Streamer, interpreter_of
from .watch import Watcher, delete_namespace

TABLE = "lat"
DDL = f"CREATE TABLE {TABLE} (id BIGINT AUTO_INCREMENT PRIMARY KEY, ts_us BIGINT NOT NULL)"
INSERT = f"INSERT INTO {TABLE} (ts_us) VALUES (%s)"
# Rows written only to learn that the streamer publishes: never measured.
PRIMER_TS = 0
LAST_PRIMER_TS = 1
# One connection keeps up with ~2-3k single-row commits/s here; more share the rate.
ROWS_S_PER_CONNECTION = 1500
# What the streamer logs once its JIT warm-up is over (done, not needed, or given up).
JIT_WARMUP_OVER = b"JIT warm-up"
# The interpreter this driver runs under. Its loader stamps each row and its consumer child notes
# each arrival, so its own pauses count as the streamer's: driven under PyPy, 5 of 7 runs had a
# burst of 121-223 ms that none had driven under CPython (docs/benchmarks.md, "The driver's own
# pauses").
DRIVER = sys.implementation.name  # as bench.engine's and bench.payload's lines name theirs


def flatten(prefix: str, p: Dict[str, Optional[float]]) -> Dict[str, Optional[float]]:
    """bench.floor's percentiles as a line's fields: ``{prefix}p50_ms``... and the shares over
    50 and 100 ms in % (``{prefix}over_50ms_pct``)."""
    out: Dict[str, Optional[float]] = {f"{prefix}{k}_ms": p[k]
                                       for k in ("p50", "p90", "p99", "p999", "max")}
    for k in ("over_50ms", "over_100ms"):
        share = p[k]
        out[f"{prefix}{k}_pct"] = None if share is None else round(100.0 * share, 3)
    return out


def stats(prefix: str, values_ms: List[float]) -> Dict[str, Optional[float]]:
    """The line's latency fields of ``values_ms``."""
    return flatten(prefix, percentiles(values_ms))


def driver_warning(driver: str = DRIVER) -> Optional[str]:
    """What to tell a user who runs this driver under another interpreter than CPython."""
    if driver == "cpython":
        return None
    return (f"bench.latency: this driver runs under {driver}, and its own JIT compiles and "
            f"collections count as latency (its loader stamps each row, its consumer notes each "
            f"arrival): run it under CPython, as make bench does (.venv-cpy/bin/python -m "
            f"bench.latency --python <the streamer's interpreter>); each line says its 'driver'")


def slow_at(pairs: List[Tuple[float, float]], over_ms: float = 100.0) -> Dict[str, Any]:
    """When the load's slow rows came: the worst row's stamp, and the first and last over
    ``over_ms``, in seconds from the first row's stamp (None when none is over). A restart's
    JIT warm-up shows in the first seconds; a broker's or a GC's pause anywhere."""
    if not pairs:
        return {"all_max_at_s": None, "all_over_100ms_from_s": None, "all_over_100ms_to_s": None}
    first = min(s for _, s in pairs)
    worst = max(pairs, key=lambda p: p[0] - p[1])
    slow = sorted(s for a, s in pairs if (a - s) / 1000.0 > over_ms)
    return {"all_max_at_s": round((worst[1] - first) / 1e6, 2),
            "all_over_100ms_from_s": round((slow[0] - first) / 1e6, 2) if slow else None,
            "all_over_100ms_to_s": round((slow[-1] - first) / 1e6, 2) if slow else None}


def split(pairs: List[Tuple[float, float]], warm_from_us: float) -> Tuple[List[float], List[float]]:
    """(cold, warm) latencies in ms of ``(arrival_us, stamp_us)`` pairs, split at the stamp."""
    cold: List[float] = []
    warm: List[float] = []
    for arrival, stamp in pairs:
        (warm if stamp >= warm_from_us else cold).append((arrival - stamp) / 1000.0)
    return cold, warm


class Loader:
    """``rate`` single-row autocommit INSERTs a second for ``seconds``, over threads of one
    connection each, every row stamped with the client's clock (µs) just before it is sent.

    The connections open before the clock starts: a connection opened after it would find its
    first rows overdue and send them back to back, a burst above the rate at the load's start
    (784-899 rows in the first 100 ms at 5k rows/s, when each thread opened its own)."""

    def __init__(self, db: str, rate: float, seconds: float,
                 connect: Callable[[str], Any] = env.admin):
        self.db = db
        self.rate = rate
        self.seconds = seconds
        self.connect = connect
        self.connections = max(1, -(-int(rate) // ROWS_S_PER_CONNECTION))
        self.written = [0] * self.connections
        # Per connection, stamp -> acknowledged (ms): the source's own part of each row's latency.
        self.source_ms: List[List[float]] = [[] for _ in range(self.connections)]
        self.errors: List[BaseException] = []
        self.elapsed_s = 0.0

    def _one(self, index: int, conn: Any, began: float) -> None:
        try:
            interval = self.connections / self.rate
            due = began + index * interval / self.connections
            with conn.cursor() as cur:
                while True:
                    now = time.monotonic()
                    if now - began >= self.seconds:
                        return
                    if due > now:
                        time.sleep(due - now)
                    due += interval
                    stamp = time.time_ns()
                    cur.execute(INSERT, (stamp // 1000,))
                    self.source_ms[index].append((time.time_ns() - stamp) / 1e6)
                    self.written[index] += 1
        except BaseException as exc:  # noqa: BLE001 - raised by run() in the main thread
            self.errors.append(exc)

    def run(self) -> int:
        conns: List[Any] = []
        try:
            for _ in range(self.connections):
                conns.append(self.connect(self.db))
            began = time.monotonic()
            threads = [threading.Thread(target=self._one, args=(i, conn, began), daemon=True)
                       for i, conn in enumerate(conns)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(self.seconds + 60)
            self.elapsed_s = time.monotonic() - began
        finally:
            for conn in conns:
                conn.close()
        if self.errors:
            raise BenchError(f"the latency loader failed: {self.errors[0]!r}")
        return sum(self.written)


def decoder(namespace: str) -> Any:
    """A decoder of the run's messages: through the schema topic, or the registry where the
    run's format (env.FORMAT) frames them."""
    from streamer.codec.decode import Decoder
    from streamer.codec.schema_registry import SchemaRegistry
    from streamer.kafka.topics import kafka_schema_source

    url = env.FORMAT.get("schema_registry", {}).get("url")
    return Decoder(kafka_schema_source({"bootstrap.servers": env.KAFKA}, namespace),
                   SchemaRegistry(url).schema if url else None)


def consume(topic: str, namespace: str, deadline_s: float) -> None:
    """The child: reads ``topic`` read_committed from its end as of now; prints ``ready``, then,
    once the parent wrote how many rows to expect on stdin (or at the deadline), one JSON list of
    ``[arrival_us, stamp_us]``. Values are decoded only after the last arrival."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": env.KAFKA, "group.id": env.unique("bench-latency-"),
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 5, "fetch.min.bytes": 1})
    parts = sorted(c.list_topics(topic, timeout=10).topics[topic].partitions)
    c.assign([TopicPartition(topic, p, c.get_watermark_offsets(TopicPartition(topic, p),
                                                                timeout=10)[1]) for p in parts])
    expected: List[int] = []

    def read_expected() -> None:
        line = sys.stdin.readline()
        expected.append(int(line) if line.strip() else -1)

    threading.Thread(target=read_expected, daemon=True).start()
    print("ready", flush=True)
    got: List[Tuple[float, bytes]] = []
    end = time.monotonic() + deadline_s
    try:
        while time.monotonic() < end and not (expected and len(got) >= expected[0]):
            m = c.poll(0.05)
            if m is None or m.error():
                continue
            got.append((time.time_ns() / 1000.0, m.value()))
    finally:
        c.close()
    read = decoder(namespace).decode
    pairs = [[arrival, float(read(value)["after"]["ts_us"])] for arrival, value in got]
    print(json.dumps(pairs), flush=True)


def _wait_until_streaming(watcher: Watcher, streamer: Streamer, db: str, topic: str,
                          namespace: str) -> None:
    """Writes a primer row every 0.2 s until one is visible (rows written before the streamer
    found its start position are never published), then one last primer, and waits for that
    one: every primer is then visible, and the consumer started next sees none of them."""
    conn = env.admin(db)
    deadline = time.monotonic() + 120
    last = None
    try:
        with conn.cursor() as cur:
            while True:
                msgs = [m for m in watcher.poll(0.2) if m.topic() == topic]
                if last is None:
                    if msgs:
                        read = decoder(namespace).decode
                        cur.execute(INSERT, (LAST_PRIMER_TS,))
                        last = cur.lastrowid
                    else:
                        cur.execute(INSERT, (PRIMER_TS,))
                elif any(read(m.value())["after"]["id"] == last for m in msgs):
                    return
                streamer.sample()
                if time.monotonic() > deadline:
                    raise BenchError(f"the primer rows did not reach {topic} within 120 s "
                                     f"(streamer log {streamer.log_path})")
    finally:
        conn.close()


def jit_warmup_of(python: str, transactions: Optional[int]) -> int:
    """The warm-up the streamer under ``python`` runs: ``transactions`` (None: the streamer's
    default), or none under CPython."""
    from streamer.config import DEFAULTS

    if interpreter_of(python)["interpreter"] != "pypy":
        return 0
    return DEFAULTS["warmup"]["transactions"] if transactions is None else transactions


def run(python: str, workdir: str, rate: float, seconds: float, warmup_s: float,
        jit_warmup: Optional[int] = None, after_start_s: Optional[float] = None
        ) -> Dict[str, Any]:
    """One load at ``rate`` rows/s against a streamer under ``python``: the line's fields.
    ``jit_warmup``: the streamer's warmup.transactions (None: its default). ``after_start_s``:
    the restart pattern: the load starts that long after the first probe row came through, the
    JIT warm-up under way or not (else once it is over)."""
    warning = driver_warning()
    if warning:
        print(warning, file=sys.stderr, flush=True)
    db = env.create_database("bench_lat_", DDL)
    ns = env.unique("bench")
    transactions = jit_warmup_of(python, jit_warmup)
    cfg = env.write_streamer_config(
        os.path.join(workdir, f"{ns}.yaml"), ns, [f"{db}.*"],
        None if jit_warmup is None else {"warmup": {"transactions": jit_warmup}})
    topic = f"{ns}.{db}.{TABLE}"
    child: Optional[subprocess.Popen] = None
    try:
        with Streamer(python, cfg, os.path.join(workdir, f"{ns}.log"), []) as streamer:
            with Watcher(f"{ns}.{db}.") as watcher:
                _wait_until_streaming(watcher, streamer, db, topic, ns)
            if after_start_s is not None:
                time.sleep(after_start_s)
                waited = after_start_s
            else:
                waited = round(streamer.wait_for_log(JIT_WARMUP_OVER, "end its JIT warm-up",
                                                     120), 2) if transactions else 0.0
            child = subprocess.Popen([sys.executable, "-m", "bench.latency", "--consume", topic,
                                      "--namespace", ns, "--deadline", str(seconds + 120),
                                      "--format", env.FORMAT_NAME],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=env.ROOT,
                                     text=True)
            assert child.stdout is not None and child.stdin is not None
            if child.stdout.readline().strip() != "ready":
                raise BenchError("the latency consumer did not start")
            loader = Loader(db, rate, seconds)
            warm_from_us = time.time_ns() / 1000.0 + warmup_s * 1e6
            steal = env.Steal()
            cpu = CpuWindow({"streamer": streamer.proc.pid, **CpuWindow.servers()})
            written = loader.run()
            used = cpu.stop()
            steal.stop()
            child.stdin.write(f"{written}\n")
            child.stdin.flush()
            out, _ = child.communicate(timeout=seconds + 180)
            streamer.sample()
            streamer.stop()
            rss = streamer.rss_mb
    finally:
        if child is not None and child.poll() is None:
            child.kill()
        delete_namespace(ns)
        env.drop_database(db)
    pairs = [(a, s) for a, s in json.loads(out or "[]")]
    if len(pairs) != written:
        raise BenchError(f"the consumer saw {len(pairs)} of the {written} rows written "
                         f"(streamer log {streamer.log_path})")
    cold, warm = split(pairs, warm_from_us)
    line: Dict[str, Any] = {
        "offered_rows_s": rate, "rows_s": round(written / loader.elapsed_s, 1),
        "rows": written, "seconds": seconds, "warmup_s": warmup_s,
        "connections": loader.connections, "rss_mb": round(rss, 1),
        "jit_warmup_transactions": transactions, "jit_warmup_wait_s": waited,
        "driver": DRIVER, "cpu_steal_pct": steal.pct, "busy_pct": steal.busy_pct, **used,
        **stats("", warm), **stats("cold_", cold), **stats("all_", cold + warm),
        **slow_at(pairs)}
    if after_start_s is not None:
        line["after_start_s"] = after_start_s
    # The source's part (client stamp -> MariaDB acknowledged the INSERT), all rows: the
    # streamer can't read a row before it is committed.
    source = stats("source_", [v for part in loader.source_ms for v in part])
    line.update({k: source[k] for k in ("source_p50_ms", "source_p99_ms", "source_max_ms")})
    return line


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.latency", description=__doc__.split("\n")[0])
    ap.add_argument("--python", default=sys.executable, help="the streamer's interpreter")
    ap.add_argument("--rate", type=float, action="append", help="rows/s (repeatable; 1000, 5000)")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--warmup", type=float, default=5.0,
                    help="the load's first seconds, reported apart as cold")
    ap.add_argument("--jit-warmup", type=int, metavar="TRANSACTIONS",
                    help="the streamer's warmup.transactions (default: its default; 0: none)")
    ap.add_argument("--after-start", type=float, metavar="SECONDS",
                    help="the restart pattern: start the load this long after the first probe "
                    "row came through (shape latency-restart), not after the JIT warm-up")
    ap.add_argument("--format", choices=sorted(env.FORMATS), default="streamer",
                    help="the message format the streamer publishes in (debezium-avro through "
                    "the local registry)")
    ap.add_argument("--results", help="JSON lines file to append the lines to")
    ap.add_argument("--consume", help=argparse.SUPPRESS)
    ap.add_argument("--namespace", help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, default=60.0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.format != "streamer":
        env.use_format(args.format, start=not args.consume)  # the consumer child's: started
    if args.consume:
        consume(args.consume, args.namespace, args.deadline)
        return 0
    labels = interpreter_of(args.python)  # the streamer's, as bench.suite's lines say it
    header = results.run_header(False, 1)  # the commit, as bench.suite's lines name it
    with tempfile.TemporaryDirectory(prefix="streamer-latency-") as workdir:
        for rate in args.rate or [1000.0, 5000.0]:
            shape = "latency" if args.after_start is None else "latency-restart"
            line = dict(header, **run(args.python, workdir, rate, args.seconds, args.warmup,
                                      args.jit_warmup, args.after_start), shape=shape, **labels)
            if args.format != "streamer":
                line["format"] = args.format  # another experiment: bench.compare keeps it apart
            results.emit(line, args.results)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
