"""Live load at a share of saturation: a shape's own row changes, offered at (by default) half the
rate the streamer reached catching up on that shape, while heartbeats measure the latency.

The saturation rate is the same run's warm catch-up rate (``warm_rows_s``) of the same shape and
interpreter, so the load follows both the code and the host's speed that day. sysbench paces one
statement per event (bench/shape_load.lua) and the server generates the statement's rows, as the
backlog loader does: a 1000-row INSERT for bulk, a CALL of 100 single-row UPDATE transactions for
oltp. Client round trips per row would cap the load far below the streamer's saturation.

Only the heartbeat topic is consumed during the load: on two cores, a consumer of every row
would take CPU from the streamer and the servers, which a real consumer on another machine does
not. The rows offered are sysbench's events times the statement's rows; a load that sysbench
could not hold (below 97 % of the offered events) is reported as such (``load_held``), and then
says what the machine can offer, not how the streamer behaves at that share.

The source's storage engine is InnoDB unless ``engine`` says otherwise. On shared cores a lighter
one separates the source's storage work, which a real source does on its own host, from the
streamer's latency (docs/benchmarks.md). MariaDB's BLACKHOLE engine stores nothing but binlogs
every inserted row as InnoDB would, so the streamer reads the same events while MariaDB spends
about half the CPU a row. It keeps no rows, so an UPDATE finds none and logs nothing: inserts
only. MEMORY keeps its rows in RAM without redo, undo or a two-phase commit with the binlog, so
it can take updates, but not a table with TEXT or BLOB columns. It is not transactional: each
statement reaches the binlog as a group of its own, ending in a COMMIT query instead of an Xid,
which the streamer publishes and checkpoints as it does a transaction.
"""
from __future__ import annotations

import os
import time
from typing import Any, Dict, Optional, Tuple

from streamer.codec.decode import Decoder
from streamer.kafka.topics import kafka_schema_source

from . import env
from .live import HEARTBEAT_DDL, Heartbeat, Latencies, Sysbench, sysbench_tps, wait_until_streaming
from .proc import JVM_SERVERS, SERVER_NAMES, BenchError, CpuWindow, Streamer
from .shapes import LiveStatement, Shape, drop
from .watch import Watcher, delete_namespace

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shape_load.lua")
HELD = 0.97  # of the offered events per second
ENGINES = ("innodb", "blackhole", "memory")
# A MEMORY table stops taking rows at max_heap_table_size (16 MB by default): room to spare.
MEMORY_TABLE_BYTES = 256 * 1024 * 1024


def cores_needed(facts: Dict[str, Any], through_rows_s: float, offered_rows_s: float) -> Optional[float]:
    """The cores the streamer and the local servers would take at the offered rate: what they
    took per row written, times the rows offered (their cost a row is taken as constant). A
    load that sysbench could not hold and that needs more than the host's cores measured the
    host's size, not the streamer; None when a process's cores are unknown."""
    used = [facts.get(f"{name}_cores") for name in ("streamer", *SERVER_NAMES)]
    if through_rows_s <= 0 or any(c is None for c in used):
        return None
    return sum(used) / through_rows_s * offered_rows_s


def events_per_second(saturation_rows_s: float, share: float, stmt: LiveStatement) -> int:
    """sysbench's --rate (whole events per second) closest to the share of the saturation."""
    return max(1, round(saturation_rows_s * share / stmt.rows))


def fits(shape: Shape, engine: str) -> bool:
    """Whether the shape's live load reaches the binlog whole with its table in ``engine``."""
    if engine == "blackhole":
        return shape.live is not None and shape.live.inserts_only
    if engine == "memory":
        return shape.live is not None and not shape.live.blobs
    return True


def check_engine(shape: Shape, engine: str) -> None:
    """Refuses an engine the shape's live load can't use, saying which it can."""
    if engine not in ENGINES:
        raise BenchError(f"unknown source engine {engine!r}; use one of {', '.join(ENGINES)}")
    if fits(shape, engine):
        return
    if engine == "blackhole":
        raise BenchError(f"the {shape.name} live load changes existing rows, and a BLACKHOLE "
                         f"table keeps none (nothing would reach the binlog); use "
                         f"--source-engine innodb or memory for it")
    raise BenchError(f"the {shape.name} table has TEXT or BLOB columns, which a MEMORY table "
                     f"can't hold; use --source-engine innodb or blackhole for it")


def _blackhole(cur: Any) -> None:
    """Loads MariaDB's BLACKHOLE engine once; the server keeps it across restarts."""
    cur.execute("SELECT SUPPORT FROM information_schema.ENGINES WHERE ENGINE = 'BLACKHOLE'")
    if cur.fetchone() is None:
        try:
            cur.execute("INSTALL SONAME 'ha_blackhole'")
        except Exception as exc:
            raise BenchError(f"MariaDB could not load its BLACKHOLE engine ({exc}); it ships in the "
                             f"mariadb-server package (ha_blackhole.so): reinstall it, or run with "
                             f"--source-engine innodb") from None


def _setup(shape: Shape, engine: str = "innodb") -> str:
    check_engine(shape, engine)
    db = env.unique(f"bench_{shape.name}_live_")
    conn = env.admin()
    try:
        with conn.cursor() as cur:
            if engine == "blackhole":
                _blackhole(cur)
            cur.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
            cur.execute(f"USE {db}")
            cur.execute(HEARTBEAT_DDL)
            # The full row count: oltp's live statement updates ids across all OLTP_ROWS rows.
            shape.setup(cur, shape.full_rows)
            # Only the load's table: the heartbeat table stays InnoDB, like the source's own.
            if engine == "blackhole":
                cur.execute(f"ALTER TABLE {shape.name} ENGINE=BLACKHOLE")
            elif engine == "memory":
                cur.execute(f"SET SESSION max_heap_table_size = {MEMORY_TABLE_BYTES}")
                cur.execute(f"ALTER TABLE {shape.name} ENGINE=MEMORY")
    finally:
        conn.close()
    return db


def _measure(watcher: Watcher, streamer: Streamer, decoder: Decoder, db: str, load: Any,
             seconds: int, warmup_s: float) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """The heartbeats' latency fields while ``load`` runs, and what the load and host did."""
    began_us = time.time() * 1e6
    warm_from_us = began_us + warmup_s * 1e6
    beats = Latencies(began_us, warm_from_us)
    began = time.monotonic()
    beat = Heartbeat(db, 50.0)
    beat.start()
    written: Optional[int] = None
    host: Optional[env.Steal] = None
    cpu: Optional[CpuWindow] = None
    facts: Dict[str, Any] = {}
    while written is None or len(beats.cold) < written:
        msgs = watcher.poll(0.05)
        seen_us = time.time() * 1e6
        for msg in msgs:
            beats.add(decoder.decode(msg.value())["after"], seen_us)
        streamer.sample()
        if host is None and seen_us >= warm_from_us:
            # The host's busy share, the streamer's and the servers' cores over the warm part only.
            host = env.Steal()
            cpu = CpuWindow({"streamer": streamer.proc.pid, **CpuWindow.servers()})
        if written is None and load.poll() is not None:
            written = beat.stop()
            ended = time.monotonic()
            facts["load_s"] = ended - began
            facts["sysbench_tps"] = sysbench_tps(load)
            if host is not None and cpu is not None:
                host.stop()
                facts.update(cpu.stop())
                facts["busy_pct"] = host.busy_pct
                facts["cpu_steal_pct"] = host.pct
        if written is None and time.monotonic() > began + seconds + 60:
            raise BenchError(f"sysbench ran {seconds + 60}s past its --time={seconds}")
        if written is not None and time.monotonic() > began + facts["load_s"] + 60:
            raise BenchError(f"only {len(beats.cold)} of {written} heartbeats arrived within 60 s of the "
                             f"load's end (streamer log {streamer.log_path})")
    # Heartbeats drain after the load's end; the writer stopped then, so its record is whole.
    return beats.stats(beat.acked_us), facts


def run(python: str, workdir: str, shape: Shape, saturation_rows_s: float, share: float,
        seconds: int, warmup_s: float, engine: str = "innodb") -> Dict[str, Any]:
    stmt = shape.live
    if stmt is None:
        raise BenchError(f"shape {shape.name} has no live statement")
    rate = events_per_second(saturation_rows_s, share, stmt)
    db = _setup(shape, engine)
    ns = env.unique("bench")
    topic = f"{ns}.{db}.heartbeat"
    load: Optional[Sysbench] = None
    running: Any = None
    try:
        cfg = env.write_streamer_config(os.path.join(workdir, f"{ns}.yaml"), ns, [f"{db}.*"])
        load = Sysbench(workdir, db, SCRIPT, test_options=(),
                        script_args=[f"--statement={stmt.sql}", f"--rows_per_event={stmt.rows}"])
        with Watcher(topic) as watcher, \
                Streamer(python, cfg, os.path.join(workdir, f"{ns}.log"), []) as streamer:
            wait_until_streaming(watcher, streamer, db, topic)
            decoder = Decoder(kafka_schema_source({"bootstrap.servers": env.KAFKA}, ns))
            running = load.start(rate, seconds)
            latency, facts = _measure(watcher, streamer, decoder, db, running, seconds, warmup_s)
            streamer.stop()
            rss = streamer.rss_mb
    finally:
        if running is not None and running.poll() is None:
            running.kill()  # a run that failed mid-load: the load must not outlive it
            running.wait()
        if load is not None:
            load.close()
        delete_namespace(ns)
        drop(db)
    offered = rate * stmt.rows
    through = facts["sysbench_tps"] * stmt.rows
    out: Dict[str, Any] = {
        "seconds": seconds, "warmup_s": warmup_s, "saturation_rows_s": saturation_rows_s,
        "saturation_share": share, "rows_per_event": stmt.rows, "source_engine": engine,
        "offered_rows_s": offered, "rows_s": round(through, 1),
        "load_held": facts["sysbench_tps"] >= HELD * rate,
        "cores_needed": cores_needed(facts, through, offered),
        "busy_pct": facts.get("busy_pct"), "cpu_steal_pct": facts.get("cpu_steal_pct"),
        "rss_mb": round(rss, 1),
        **{f"{name}_{what}": facts.get(f"{name}_{what}")
           for name in ("streamer", *SERVER_NAMES) for what in ("cores", "runq")},
        **{f"{name}_jit_cores": facts.get(f"{name}_jit_cores") for name in JVM_SERVERS}}
    out.update(latency)
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in out.items()}
