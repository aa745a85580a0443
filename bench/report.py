"""The printed tables: catch-up per shape × interpreter, and live latency per interpreter."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple


def _num(value: Optional[float], digits: int = 0) -> str:
    if value is None:
        return "-"
    if digits == 0 and abs(value) >= 1000:
        return f"{value / 1000:.1f}k"
    return f"{value:.{digits}f}"


def _table(header: Sequence[str], rows: List[Sequence[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    line = lambda cells: "  ".join(str(c).rjust(w) for c, w in zip(cells, widths))  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


CATCHUP: List[Tuple[str, str, int]] = [
    ("bare cold", "bare_rows_s", 0), ("bare warm", "bare_warm_rows_s", 0),
    ("e2e+start", "e2e_rows_s", 0), ("catch-up cold", "catchup_rows_s", 0),
    ("warm", "warm_rows_s", 0), ("e2e/bare", "ratio", 2), ("start s", "start_s", 1),
    ("RSS MB", "rss_mb", 0), ("RSS +2nd half", "rss_growth_mb", 1),
    ("CPU us/row", "cpu_us_per_row", 1), ("steal %", "cpu_steal_pct", 0),
    ("PyPy/CPy cold", "pypy_over_cpython", 2), ("PyPy/CPy warm", "pypy_over_cpython_warm", 2),
]

# Cores' worth of time each process was ready to run and found no CPU free (bench.proc.CpuWindow).
RUNQ: List[Tuple[str, str, int]] = [
    ("streamer runq", "streamer_runq", 2), ("MariaDB runq", "mariadb_runq", 2),
    ("Kafka runq", "kafka_runq", 2),
]
# The warm latency split at MariaDB's acknowledgement of each heartbeat INSERT (bench.live.split_stats).
SPLIT: List[Tuple[str, str, int]] = [
    ("source p50", "source_p50_ms", 1), ("source p99", "source_p99_ms", 1),
    ("after p50", "after_source_p50_ms", 1), ("after p99", "after_source_p99_ms", 1),
]
# Of the Kafka cores, those the broker's JIT compilers took (bench.proc.JIT_THREADS).
KAFKA_JIT: Tuple[str, str, int] = ("Kafka JIT cores", "kafka_jit_cores", 2)
LIVE: List[Tuple[str, str, int]] = [
    ("offered/s", "offered_rows_s", 0), ("rows/s", "rows_s", 0), ("p50 ms", "p50_ms", 1),
    ("p99 ms", "p99_ms", 1), ("max ms", "max_ms", 1), (">100ms %", "over_100ms_pct", 2),
    ("cold p99", "cold_p99_ms", 1), ("cold max", "cold_max_ms", 1), *SPLIT,
    ("streamer cores", "streamer_cores", 2), ("MariaDB cores", "mariadb_cores", 2),
    ("Kafka cores", "kafka_cores", 2), KAFKA_JIT, *RUNQ, ("RSS MB", "rss_mb", 0),
    ("steal %", "cpu_steal_pct", 0),
]

SHARE_LIVE: List[Tuple[str, str, int]] = [
    ("saturation/s", "saturation_rows_s", 0), ("share", "saturation_share", 2),
    ("offered/s", "offered_rows_s", 0), ("rows/s", "rows_s", 0), ("p50 ms", "p50_ms", 1),
    ("p99 ms", "p99_ms", 1), ("max ms", "max_ms", 1), (">100ms %", "over_100ms_pct", 2), *SPLIT,
    ("host busy %", "busy_pct", 0), ("streamer cores", "streamer_cores", 2),
    ("MariaDB cores", "mariadb_cores", 2), ("Kafka cores", "kafka_cores", 2), KAFKA_JIT,
    ("cores needed", "cores_needed", 2), *RUNQ, ("RSS MB", "rss_mb", 0), ("steal %", "cpu_steal_pct", 0),
]

# Fixed-rate single-row transactions (bench.latency) and the floor (bench.floor), client stamps.
LATENCY: List[Tuple[str, str, int]] = [
    ("offered/s", "offered_rows_s", 0), ("rows/s", "rows_s", 0), ("p50 ms", "p50_ms", 1),
    ("p90 ms", "p90_ms", 1), ("p99 ms", "p99_ms", 1), ("p99.9 ms", "p999_ms", 1),
    ("max ms", "max_ms", 1), (">50ms %", "over_50ms_pct", 2), (">100ms %", "over_100ms_pct", 2),
    ("cold p50", "cold_p50_ms", 1), ("cold p99", "cold_p99_ms", 1), ("cold max", "cold_max_ms", 1),
    ("streamer cores", "streamer_cores", 2), ("Kafka cores", "kafka_cores", 2),
    ("MariaDB cores", "mariadb_cores", 2), ("steal %", "cpu_steal_pct", 0),
]

TXN: List[Tuple[str, str, int]] = [
    ("commits/s", "commits_s", 0), ("CPU ms/commit", "cpu_ms_per_commit", 2),
    ("rdk:main ms/commit", "rdk_main_ms_per_commit", 2), ("commit p50 ms", "commit_p50_ms", 1),
    ("commit p99 ms", "commit_p99_ms", 1),
]

SNAPSHOT: List[Tuple[str, str, int]] = [
    ("rows", "rows", 0), ("rows a chunk", "rows_per_chunk", 0), ("rows/s", "rows_s", 0),
    ("launch to done", "launch_rows_s", 0),
    ("s", "snapshot_s", 1), ("CPU s", "cpu_s", 1), ("CPU us/row", "cpu_us_per_row", 1),
    ("RSS MB", "rss_mb", 0), ("RSS +2nd half", "rss_growth_mb", 1),
]

SNAPSHOT_LIVE: List[Tuple[str, str, int]] = [
    ("p50 without", "without_p50_ms", 1), ("p99 without", "without_p99_ms", 1),
    ("max without", "without_max_ms", 1), ("p50 during", "p50_ms", 1),
    ("p99 during", "p99_ms", 1), ("max during", "max_ms", 1),
]

STARTUP: List[Tuple[str, str, int]] = [
    ("first start", "fresh_start_s", 2), ("restart", "restart_s", 2), ("runs", "runs", 0),
]


def render(records: List[Dict[str, Any]]) -> str:
    """The tables for one run's records (rows/s unless named otherwise)."""
    parts = []
    catchup = [r for r in records if "e2e_rows_s" in r]
    if catchup:
        rows = [[r["shape"], r["interpreter"], _num(r.get("rows"))] +
                [_num(r.get(key), d) for _, key, d in CATCHUP] for r in catchup]
        parts.append("catch-up (rows/s; cold = whole run of a fresh process, warm = its second half)\n"
                     + _table(["shape", "python", "rows"] + [h for h, _, _ in CATCHUP], rows))
    snaps = [r for r in records if "launch_rows_s" in r]  # bench.snapshot.run's, any table
    if snaps:
        rows = [[r["shape"], r["interpreter"]] + [_num(r.get(key), d) for _, key, d in SNAPSHOT]
                for r in snaps]
        parts.append("snapshots (start.initial: snapshot) of a table with the bulk shape's columns "
                     "(snapshot), realistic rows (snapshot-wide), and those with a DATE, a "
                     "TIMESTAMP and a SET (snapshot-mixed); rows/s between the log's begins and "
                     "done lines, and from launch to done\n" +
                     _table(["shape", "python"] + [h for h, _, _ in SNAPSHOT], rows))
    costs = [r for r in records if r["shape"] == "snapshot-live"]
    if costs:
        rows = [[r["interpreter"]] + [_num(r.get(key), d) for _, key, d in SNAPSHOT_LIVE]
                for r in costs]
        parts.append("a live stream's latency (heartbeat rows, ms) without and during a snapshot "
                     "of that table\n" + _table(["python"] + [h for h, _, _ in SNAPSHOT_LIVE], rows))
    starts = [r for r in records if r["shape"] == "startup"]
    if starts:
        rows = [[r["interpreter"]] + [_num(r.get(key), d) for _, key, d in STARTUP] for r in starts]
        parts.append("start-up (s from spawn to reading the binlog; medians)\n" +
                     _table(["python"] + [h for h, _, _ in STARTUP], rows))
    txns = [r for r in records if r["shape"] in ("txn", "txn-system", "txn-batch")]
    if txns:
        rows = [[r["shape"], r["interpreter"], f"{r.get('librdkafka', '?')} {r.get('library', '?')}"] +
                [_num(r.get(key), d) for _, key, d in TXN] for r in txns]
        parts.append("Kafka transactions back to back, one message and the checkpoint each "
                     "(txn: the library the streamer loads; txn-system: the system's; txn-batch: "
                     "the streamer's, each transaction open for a live batch's linger, the line's "
                     "batch_ms, before its commit)\n" +
                     _table(["shape", "python", "librdkafka"] + [h for h, _, _ in TXN], rows))
    live = [r for r in records if r["shape"] == "live"]
    if live:
        rows = [[r["interpreter"]] + [_num(r.get(key), d) for _, key, d in LIVE] for r in live]
        parts.append("live load (latency = MySQL commit -> visible to a read_committed consumer; "
                     "warm unless marked cold; source = stamp -> MariaDB acknowledged the INSERT, "
                     "after = acknowledged -> visible)\n" + _table(["python"] + [h for h, _, _ in LIVE], rows))
    lat = [r for r in records if r["shape"] in ("latency", "floor")]
    if lat:
        rows = [[r["shape"], r["interpreter"]] + [_num(r.get(key), d) for _, key, d in LATENCY]
                for r in lat]
        parts.append("live latency at a fixed rate of single-row transactions (client stamp -> "
                     "visible to a read_committed consumer in its own process; warm after the "
                     "first warmup_s, cold before; floor: no MySQL and no streamer, a Kafka "
                     "transaction per message back to back at offered 0, else every message due "
                     "in each transaction, stamped when due)\n" +
                     _table(["shape", "python"] + [h for h, _, _ in LATENCY], rows))
    shared = [r for r in records if "saturation_share" in r]
    if shared:
        rows = [[r["shape"], r["interpreter"], r.get("source_engine", "innodb"),
                 "yes" if r.get("load_held") else "NO"] +
                [_num(r.get(key), d) for _, key, d in SHARE_LIVE] for r in shared]
        parts.append("live load at a share of the warm catch-up rate (the shape's own rows; "
                     "latency as above; 'held' = sysbench kept the offered rate; 'source' = the "
                     "engine of the load's table)\n" +
                     _table(["shape", "python", "source", "held"] + [h for h, _, _ in SHARE_LIVE],
                            rows))
    return "\n\n".join(parts)
