"""Live load: sysbench writes at a fixed rate while the streamer runs; latency per heartbeat row.

A loader thread inserts heartbeat rows at a fixed rate alongside sysbench. Each row carries the
server's clock at the write, in µs (UNIX_TIMESTAMP(NOW(6))); a read_committed consumer compares
it with the wall clock when the row becomes visible in Kafka (same host, same clock). Rows written
during the first ``warmup_s`` seconds count only towards the cold figures.

The loader also notes when MariaDB acknowledged each row's INSERT (autocommit: executed, written
to the binlog and committed). That splits a row's latency in two (``split_stats``): the source's
part, from the server's stamp to the acknowledgement, which the streamer cannot start before; and
the rest, from the acknowledgement to visible in Kafka, which holds the streamer's reading,
publishing and Kafka commit. The acknowledgement is seen by a thread of the bench process, so a
busy host makes the source's part an upper bound and the rest a lower bound.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from streamer.codec.decode import Decoder
from streamer.kafka.topics import kafka_schema_source

from . import env
from .proc import BenchError, CpuWindow, Streamer
from .watch import Watcher, delete_namespace

HEARTBEAT_DDL = "CREATE TABLE heartbeat (id BIGINT AUTO_INCREMENT PRIMARY KEY, ts_us BIGINT NOT NULL)"
HEARTBEAT_INSERT = "INSERT INTO heartbeat (ts_us) VALUES (CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED))"


def ensure_sysbench() -> str:
    """The sysbench binary; installs the Debian package once when it is missing."""
    found = shutil.which("sysbench")
    if found:
        return found
    print("bench: installing sysbench (apt)")
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "sysbench"]):
        if subprocess.run(cmd, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive")).returncode:
            raise BenchError(f"{' '.join(cmd)} failed: install sysbench (Debian package 'sysbench') "
                             f"by hand and rerun")
    found = shutil.which("sysbench")
    if not found:
        raise BenchError("sysbench is still missing after apt-get install sysbench")
    return found


class Sysbench:
    """sysbench against one database: ``oltp_insert``, or a script with its own options (which
    may not hold secrets: they go in argv). The connection's options, password included, are in
    a 0600 file."""

    def __init__(self, workdir: str, db: str, test: str = "oltp_insert",
                 test_options: Sequence[str] = ("tables=1", "table-size=1000"),
                 script_args: Sequence[str] = ()):
        self.binary = ensure_sysbench()
        self.test = test
        self.script_args = list(script_args)
        self.options = os.path.join(workdir, f"sysbench-{db}.cfg")
        lines = ["db-driver=mysql", "mysql-host=127.0.0.1", f"mysql-port={env.MYSQL_PORT}",
                 "mysql-user=admin", f"mysql-password={env.read_password('admin')}",
                 f"mysql-db={db}", *test_options]
        fd = os.open(self.options, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write("\n".join(lines) + "\n")

    def _cmd(self, *args: str) -> List[str]:
        return [self.binary, f"--config-file={self.options}", self.test, *self.script_args, *args]

    def prepare(self) -> None:
        out = subprocess.run(self._cmd("prepare"), capture_output=True, text=True)
        if out.returncode:
            raise BenchError(f"sysbench prepare failed ({out.returncode}): {out.stderr[-2000:]}")

    def start(self, rate: int, seconds: int) -> subprocess.Popen:
        return subprocess.Popen(self._cmd(f"--rate={rate}", f"--time={seconds}", "--threads=2", "run"),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def close(self) -> None:
        os.unlink(self.options)


def sysbench_tps(proc: subprocess.Popen) -> float:
    output = proc.communicate(timeout=120)[0]
    if proc.returncode:
        raise BenchError(f"sysbench run failed ({proc.returncode}): {output[-2000:]}")
    match = re.search(r"transactions:\s+\d+\s+\(([\d.]+) per sec", output)
    if not match:
        raise BenchError(f"no transaction rate in sysbench's output: {output[-2000:]}")
    return float(match.group(1))


class Heartbeat(threading.Thread):
    """Inserts one µs-stamped row at a fixed rate until stopped; counts what it wrote, and keeps
    the wall clock (µs) at which the server acknowledged each row, by the row's id."""

    def __init__(self, db: str, rate: float):
        super().__init__(daemon=True)
        self.db = db
        self.rate = rate
        self.written = 0
        self.acked_us: Dict[int, float] = {}
        self.error: Optional[BaseException] = None
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            conn = env.admin(self.db)
            try:
                began = time.monotonic()
                with conn.cursor() as cur:
                    while not self._halt.is_set():
                        cur.execute(HEARTBEAT_INSERT)
                        self.acked_us[cur.lastrowid] = time.time() * 1e6
                        self.written += 1
                        self._halt.wait(max(0.0, began + self.written / self.rate - time.monotonic()))
            finally:
                conn.close()
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread, which raises it
            self.error = exc

    def stop(self) -> int:
        self._halt.set()
        self.join(30)
        if self.error is not None:
            raise BenchError(f"the heartbeat writer failed: {self.error}")
        return self.written


def percentile(values: List[float], pct: float) -> Optional[float]:
    """Nearest-rank percentile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * pct // 100))
    return ordered[int(rank) - 1]


def latency_stats(latencies_ms: List[float]) -> Dict[str, Any]:
    over = sum(1 for v in latencies_ms if v > 100.0)
    return {"p50_ms": percentile(latencies_ms, 50), "p99_ms": percentile(latencies_ms, 99),
            "max_ms": max(latencies_ms) if latencies_ms else None,
            "over_100ms_pct": round(100.0 * over / len(latencies_ms), 3) if latencies_ms else None}


SPLIT_KEYS = ("source_p50_ms", "source_p99_ms", "after_source_p50_ms", "after_source_p99_ms")


def split_stats(beats: List[Tuple[int, float, float]], acked_us: Dict[int, float]) -> Dict[str, Any]:
    """The latency of heartbeats ``(id, stamped_us, visible_us)`` split at the server's
    acknowledgement of each INSERT: the source's part (stamp -> acknowledged) and the rest
    (acknowledged -> visible in Kafka), each as p50 and p99 in ms."""
    source: List[float] = []
    rest: List[float] = []
    for row_id, stamped, visible in beats:
        acked = acked_us.get(row_id)
        if acked is not None:
            source.append((acked - stamped) / 1000.0)
            rest.append((visible - acked) / 1000.0)
    return dict(zip(SPLIT_KEYS, (percentile(source, 50), percentile(source, 99),
                                 percentile(rest, 50), percentile(rest, 99))))


class Latencies:
    """The heartbeats of one load as they become visible: every one stamped from ``began_us``
    (cold), those from ``warm_from_us`` (warm), and the warm ones' (id, stamp, visible) for the
    split at the source's acknowledgement."""

    def __init__(self, began_us: float, warm_from_us: float):
        self.began_us = began_us
        self.warm_from_us = warm_from_us
        self.cold: List[float] = []
        self.warm: List[float] = []
        self.warm_beats: List[Tuple[int, float, float]] = []

    def add(self, row: Dict[str, Any], seen_us: float) -> bool:
        """Counts a decoded heartbeat row first seen at ``seen_us``; False if stamped before."""
        ts_us = row["ts_us"]
        if ts_us < self.began_us:
            return False
        self.cold.append((seen_us - ts_us) / 1000.0)
        if ts_us >= self.warm_from_us:
            self.warm.append(self.cold[-1])
            self.warm_beats.append((row["id"], ts_us, seen_us))
        return True

    def stats(self, acked_us: Dict[int, float]) -> Dict[str, Any]:
        """The line's latency fields, given the writer's acknowledgements (once it has stopped)."""
        out: Dict[str, Any] = {"heartbeats": len(self.cold), **latency_stats(self.warm),
                               **split_stats(self.warm_beats, acked_us)}
        cold = latency_stats(self.cold)
        out.update({"cold_p99_ms": cold["p99_ms"], "cold_max_ms": cold["max_ms"]})
        return out


def wait_until_streaming(watcher: Watcher, streamer: Streamer, db: str, topic: str) -> None:
    """Writes a heartbeat every 0.2 s until one is visible: the streamer is up, topics exist."""
    conn = env.admin(db)
    deadline = time.monotonic() + 120
    try:
        with conn.cursor() as cur:
            while True:
                cur.execute(HEARTBEAT_INSERT)
                if any(m.topic() == topic for m in watcher.poll(0.2)):
                    return
                streamer.sample()
                if time.monotonic() > deadline:
                    raise BenchError(f"no heartbeat reached {topic} within 120 s "
                                     f"(streamer log {streamer.log_path})")
    finally:
        conn.close()


def run(python: str, workdir: str, rate: int, seconds: int, warmup_s: float,
        heartbeat_rate: float = 50.0) -> Dict[str, Any]:
    db = env.create_database("bench_live_", HEARTBEAT_DDL)
    bench = Sysbench(workdir, db)
    ns = env.unique("bench")
    cfg = env.write_streamer_config(os.path.join(workdir, f"{ns}.yaml"), ns, [f"{db}.*"])
    topic = f"{ns}.{db}.heartbeat"
    decoder = Decoder(kafka_schema_source({"bootstrap.servers": env.KAFKA}, ns))
    try:
        bench.prepare()
        with Watcher(f"{ns}.{db}.") as watcher, \
                Streamer(python, cfg, os.path.join(workdir, f"{ns}.log"), []) as streamer:
            wait_until_streaming(watcher, streamer, db, topic)
            began_us = time.time() * 1e6
            beats = Latencies(began_us, began_us + warmup_s * 1e6)
            began = time.monotonic()
            steal = env.Steal()
            cpu = CpuWindow({"streamer": streamer.proc.pid, **CpuWindow.servers()})
            beat = Heartbeat(db, heartbeat_rate)
            beat.start()
            load = bench.start(rate, seconds)
            written: Optional[int] = None
            rows = 0
            drain_until = began + seconds + 60
            while written is None or len(beats.cold) < written:
                msgs = watcher.poll(0.05)
                seen_us = time.time() * 1e6
                for msg in msgs:
                    if msg.topic() != topic:
                        rows += 1
                        continue
                    if beats.add(decoder.decode(msg.value())["after"], seen_us):
                        rows += 1
                streamer.sample()
                if written is None and load.poll() is not None:
                    written = beat.stop()
                    steal.stop()
                    used = cpu.stop()
                    loaded_s = time.monotonic() - began
                    load_tps = sysbench_tps(load)
                    rows_s = rows / loaded_s
                if time.monotonic() > drain_until:
                    raise BenchError(f"only {len(beats.cold)} of {written} heartbeats arrived "
                                     f"(streamer log {streamer.log_path})")
            streamer.stop()
            rss = streamer.rss_mb
    finally:
        bench.close()
        delete_namespace(ns)
        env.drop_database(db)
    out: Dict[str, Any] = {"rows": rows, "seconds": seconds, "warmup_s": warmup_s,
                           "offered_rows_s": rate + heartbeat_rate, "sysbench_tps": load_tps,
                           "rows_s": round(rows_s, 1),
                           "rss_mb": round(rss, 1), "cpu_steal_pct": steal.pct,
                           "busy_pct": steal.busy_pct,
                           **used}
    out.update(beats.stats(beat.acked_us))
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in out.items()}
