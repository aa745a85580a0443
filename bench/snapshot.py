"""The snapshot shape: a table of the bulk shape's columns read whole by ``start.initial: snapshot``,
with nothing else running.

The table is loaded once (outside the binlog: a snapshot reads tables, not the log), then each
interpreter snapshots it into a namespace of its own. The rate is the rows the streamer reported
over the seconds between its log's "begins" and "done" lines; CPU seconds are the whole process's
(start-up included), and ``{server}_cores`` what each local server used from launch to done;
peak RSS is VmHWM, and ``rss_growth_mb`` how much RSS grew over the second
half of the snapshot (a flat line holds memory to one chunk, whatever the table's size).
"""
from __future__ import annotations

import datetime
import os
import re
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import yaml

from . import env
from .proc import BenchError, CpuWindow, Streamer
from .shapes import BULK_DDL, BULK_INSERT
from .watch import delete_namespace

FULL_ROWS = 1000000
QUICK_ROWS = 50000
_STAMP = re.compile(rb"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*snapshot of \S+ (begins|done)",
                    re.MULTILINE)
_DONE_ROWS = re.compile(rb"done: (\d+) rows in (\d+) chunks")


# The snapshot-wide shape's table: realistic rows, ~255 bytes of column data each (the snapshot
# speed issue's): a name, an email (every 10th NULL), a DATETIME(6) with random µs, a DECIMAL of
# up to ±10,000,000, 100-300 random hex characters of TEXT (200 on average, every 7th NULL).
WIDE_DDL = ("CREATE TABLE snap (id BIGINT PRIMARY KEY, name VARCHAR(64) NOT NULL, "
            "email VARCHAR(128) NULL, created DATETIME(6) NOT NULL, amount DECIMAL(12,4) NOT NULL, "
            "payload TEXT NULL) CHARACTER SET utf8mb4")
WIDE_INSERT = ("INSERT INTO snap SELECT seq, CONCAT('name-', LPAD(seq, 8, '0')), "
               "IF(seq % 10 = 0, NULL, CONCAT('user', seq, '@example.com')), "
               "TIMESTAMPADD(MICROSECOND, FLOOR(RAND(seq) * 1000000), "
               "TIMESTAMPADD(SECOND, seq, '2024-01-01 00:00:00')), "
               "ROUND((RAND(seq + 1) - 0.5) * 20000000, 4), "
               "IF(seq % 7 = 0, NULL, LEFT(CONCAT(SHA2(seq, 512), SHA2(seq + 1, 512)), "
               "100 + FLOOR(RAND(seq + 2) * 201))) FROM seq_{lo}_to_{hi}")
# The snapshot-mixed shape's table: the wide one and three columns of other kinds: a DATE (every
# 5th NULL) and a TIMESTAMP(3), which schema.textavro writes from their text, and a SET (every
# 16th row its empty set), whose value it makes the general way once per distinct text.
MIXED_DDL = WIDE_DDL.replace(
    "payload TEXT NULL)", "payload TEXT NULL, born DATE NULL, "
    "seen TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), "
    "tags SET('red', 'green', 'blue', 'gold') NOT NULL)")
MIXED_INSERT = WIDE_INSERT.replace(
    " FROM seq_", ", IF(seq % 5 = 0, NULL, DATE_ADD('1950-01-01', INTERVAL seq % 25000 DAY)), "
    "FROM_UNIXTIME(1700000000 + seq + ROUND(RAND(seq + 3), 3)), "
    "MAKE_SET(seq % 16, 'red', 'green', 'blue', 'gold') FROM seq_")
# The snapshot-binary shape's table: a row keyed by a BINARY(16) (a UUID's bytes), with a
# VARBINARY(32) digest, a name, a TIME(6) and a TIME, a YEAR and 64-192 bytes of BLOB (every 4th
# NULL), kinds schema.textavro writes from their bytes and digits.
BINARY_DDL = ("CREATE TABLE snap (uuid BINARY(16) PRIMARY KEY, digest VARBINARY(32) NOT NULL, "
              "name VARCHAR(64) NOT NULL, opened TIME(6) NOT NULL, took TIME NULL, "
              "since YEAR NOT NULL, body BLOB NULL) CHARACTER SET utf8mb4")
BINARY_INSERT = ("INSERT INTO snap SELECT UNHEX(MD5(seq)), UNHEX(SHA2(seq, 256)), "
                 "CONCAT('name-', LPAD(seq, 8, '0')), "
                 "SEC_TO_TIME(seq % 86400 + ROUND(RAND(seq), 6)), "
                 "IF(seq % 3 = 0, NULL, SEC_TO_TIME(CAST(seq % 3000000 AS SIGNED) - 1500000)), "
                 "1901 + seq % 255, IF(seq % 4 = 0, NULL, LEFT(UNHEX(CONCAT(SHA2(seq, 512), "
                 "SHA2(seq + 1, 512), SHA2(seq + 2, 512))), 64 + seq % 129)) FROM seq_{lo}_to_{hi}")
TABLES = {"bulk": (BULK_DDL.replace("TABLE bulk", "TABLE snap"),
                   BULK_INSERT.replace("INTO bulk", "INTO snap")),
          "wide": (WIDE_DDL, WIDE_INSERT), "mixed": (MIXED_DDL, MIXED_INSERT),
          "binary": (BINARY_DDL, BINARY_INSERT)}


def load(quick: bool, rows: Optional[int] = None, table: str = "bulk") -> Tuple[str, int, float]:
    """A database with the table ``snap`` of ``rows`` (FULL_ROWS, quick QUICK_ROWS) rows of
    ``table``'s columns (TABLES: the bulk shape's, WIDE_DDL's, MIXED_DDL's or BINARY_DDL's):
    (db, rows, seconds)."""
    rows = rows or (QUICK_ROWS if quick else FULL_ROWS)
    db = env.unique("bench_snap_")
    conn = env.admin()
    ddl, insert = TABLES[table]
    began = time.monotonic()
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
            cur.execute(f"USE {db}")
            cur.execute(ddl)
            for lo in range(1, rows + 1, 10000):
                cur.execute(insert.format(lo=lo, hi=min(lo + 9999, rows)))
    finally:
        conn.close()
    return db, rows, time.monotonic() - began


def _stamps(log: bytes) -> Dict[str, float]:
    out = {}
    for stamp, what in _STAMP.findall(log):
        when = datetime.datetime.strptime(stamp.decode(), "%Y-%m-%d %H:%M:%S,%f")
        out[what.decode()] = when.timestamp()
    return out


def write_config(path: str, ns: str, db: str, chunk_rows: Optional[int] = None,
                 exclude: Sequence[str] = ()) -> str:
    """The config of a snapshot of ``db``.snap at start-up, into namespace ``ns``."""
    cfg_path = env.write_streamer_config(path, ns, [f"{db}.snap"])
    with open(cfg_path, encoding="utf-8") as fh:
        cfg = yaml.safe_load(fh)
    cfg["start"] = {"initial": "snapshot"}
    if chunk_rows:
        cfg["snapshot"] = {"chunk_rows": chunk_rows}
    if exclude:
        cfg["tables"]["columns"] = {"exclude": [f"{db}.snap.{c}" for c in exclude]}
    with open(cfg_path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(cfg, fh)
    return cfg_path


def run(python: str, db: str, rows: int, workdir: str, chunk_rows: Optional[int] = None,
        exclude: Sequence[str] = ()) -> Dict[str, Any]:
    """One snapshot of ``db``.snap by ``python``; ``exclude``: columns of it kept out of Kafka
    (tables.columns.exclude)."""
    ns = env.unique("snap")
    cfg_path = write_config(os.path.join(workdir, f"{ns}.yaml"), ns, db, chunk_rows, exclude)
    log_path = os.path.join(workdir, f"{ns}.log")
    samples: List[Tuple[float, float]] = []
    launched = time.time()
    servers = CpuWindow(CpuWindow.servers())
    used: Dict[str, Optional[float]] = {}
    try:
        with Streamer(python, cfg_path, log_path, []) as streamer:
            deadline = time.monotonic() + 1800
            while True:
                streamer.sample()
                rss = streamer.rss_now_mb()
                if rss is not None:
                    samples.append((time.monotonic(), rss))
                with open(log_path, "rb") as fh:
                    log = fh.read()
                if b" done: " in log:
                    used = servers.stop()
                    break
                if time.monotonic() > deadline:
                    raise BenchError(f"the snapshot did not finish in 30 min (log {log_path})")
                time.sleep(0.25)
            streamer.stop()
    finally:
        delete_namespace(ns)
    stamps = _stamps(log)
    done = _DONE_ROWS.search(log)
    if "begins" not in stamps or "done" not in stamps or done is None:
        raise BenchError(f"no snapshot begins/done lines in {log_path}")
    published, chunks = int(done.group(1)), int(done.group(2))
    if published != rows:
        raise BenchError(f"the snapshot published {published} rows of {rows} (log {log_path})")
    seconds = max(stamps["done"] - stamps["begins"], 0.001)
    # Launch to the done line, which is logged once the last chunk was published: what a user
    # waits, start-up and the first chunk's SELECT included (the log's stamps are whole ms).
    launch_s = max(stamps["done"] - launched, 0.001)
    mid = samples[0][0] + (samples[-1][0] - samples[0][0]) / 2 if samples else 0.0
    first = [r for t, r in samples if t <= mid]
    second = [r for t, r in samples if t > mid]
    cpu = streamer.cpu_s
    return {"rows": rows, "chunks": chunks, "snapshot_s": round(seconds, 2),
            "rows_s": round(rows / seconds, 0), "launch_rows_s": round(rows / launch_s, 0),
            "cpu_s": None if cpu is None else round(cpu, 2),
            "cpu_us_per_row": None if cpu is None else round(cpu / rows * 1e6, 2),
            "rss_mb": round(streamer.rss_mb, 1),
            "rss_growth_mb": round(max(second) - max(first), 1) if first and second else None,
            # The configured cap (None: the default, chunks by snapshot.chunk_bytes), and what
            # the chunks held.
            "chunk_rows": chunk_rows, "rows_per_chunk": round(rows / max(chunks, 1)),
            # What the servers took of the two cores from launch to done: what the streamer
            # could not have had (the snapshot's SELECTs and Kafka's appends).
            **{k: v for k, v in used.items() if k.endswith("_cores") and v is not None}}


def _set_chunk_rows(cfg_path: str, chunk_rows: int) -> None:
    with open(cfg_path, encoding="utf-8") as fh:
        cfg = yaml.safe_load(fh)
    cfg.setdefault("snapshot", {})["chunk_rows"] = chunk_rows
    with open(cfg_path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(cfg, fh)


def live_cost(python: str, db: str, workdir: str, seconds: float = 10.0,
              rate: float = 50.0, chunk_rows: Optional[int] = None) -> Dict[str, Any]:
    """What a snapshot costs a live stream: the latency of µs-stamped heartbeat rows (bench.live)
    for ``seconds`` with nothing else running, then while an on-demand snapshot reads the table.
    The streamer runs warm for ``seconds`` first, uncounted."""
    from streamer.codec.decode import Decoder
    from streamer.kafka.topics import kafka_schema_source
    from streamer.source import signals

    from .live import HEARTBEAT_DDL, Heartbeat, latency_stats
    from .watch import Watcher

    hb_db = env.unique("bench_snaplive_")
    conn = env.admin()
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {hb_db}")
        cur.execute(f"CREATE TABLE {hb_db}.{HEARTBEAT_DDL[len('CREATE TABLE '):]}")
    ns = env.unique("snaplive")
    cfg = env.write_streamer_config(os.path.join(workdir, f"{ns}.yaml"), ns,
                                    [f"{db}.snap", f"{hb_db}.heartbeat"])
    if chunk_rows:
        _set_chunk_rows(cfg, chunk_rows)
    topic = f"{ns}.{hb_db}.heartbeat"
    decoder = Decoder(kafka_schema_source({"bootstrap.servers": env.KAFKA}, ns))
    log_path = os.path.join(workdir, f"{ns}.log")
    phases: Dict[str, List[float]] = {"warmup": [], "without": [], "with": []}
    try:
        with Watcher(f"{ns}.{hb_db}.") as watcher, \
                Streamer(python, cfg, log_path, []) as streamer:
            phase = "warmup"
            beat = Heartbeat(hb_db, rate)
            beat.start()
            began = time.monotonic()
            asked = False
            busy: Any = None
            quiet_busy: Optional[float] = None
            used: Dict[str, Optional[float]] = {}
            while True:
                for msg in watcher.poll(0.05):
                    if msg.topic() == topic:
                        row = decoder.decode(msg.value())["after"]
                        phases[phase].append(time.time() * 1000 - row["ts_us"] / 1000)
                streamer.sample()
                now = time.monotonic() - began
                if phase == "warmup" and now >= seconds:
                    phase = "without"
                elif phase == "warmup":
                    continue
                if phase == "without" and busy is None:
                    busy = env.Steal()
                elif phase == "without" and now >= 2 * seconds and not asked:
                    with conn.cursor() as cur:
                        cur.execute(f"INSERT INTO streamer_heartbeat.{signals.SIGNAL} (streamer, "
                                    f"request) VALUES (%s, %s)",
                                    (f"{ns}/{ns}", signals.request([f"{db}.snap"], None)))
                    asked = True
                    phase = "with"
                    busy.stop()
                    quiet_busy = busy.busy_pct
                    busy = env.Steal()
                    cpu = CpuWindow({"streamer": streamer.proc.pid, **CpuWindow.servers()})
                elif asked:
                    with open(log_path, "rb") as fh:
                        if b" done: " in fh.read():
                            busy.stop()
                            used = cpu.stop()
                            break
                    if now > 2 * seconds + 1800:
                        raise BenchError(f"the snapshot did not finish (log {log_path})")
            beat.stop()
            streamer.stop()
    finally:
        delete_namespace(ns)
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {hb_db}")
        conn.close()
    without, during = latency_stats(phases["without"]), latency_stats(phases["with"])
    for stats in (without, during):
        for key, value in stats.items():
            stats[key] = None if value is None else round(value, 1)
    return {"heartbeat_rows_s": rate, "seconds": seconds,
            "p50_ms": during["p50_ms"], "p99_ms": during["p99_ms"], "max_ms": during["max_ms"],
            "without_p50_ms": without["p50_ms"], "without_p99_ms": without["p99_ms"],
            "without_max_ms": without["max_ms"], "beats_during": len(phases["with"]),
            "without_busy_pct": quiet_busy, "busy_pct": busy.busy_pct, **used}
