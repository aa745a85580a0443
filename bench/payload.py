"""What MySQL's compressed transactions cost per row: ``python -m bench.payload``.

No server here writes ``Transaction_payload`` events (MySQL 8.0.20+), so the bench makes them:
it loads the bulk and the OLTP shape's rows into the local MariaDB, takes the binlog file they
went to, and writes a copy of it with each transaction's events in a zstd payload, as MySQL
lays one out (tests/unit/engine_parts.compressed, the unit tests' writer). Both files are then
streamed by the engine from memory into an in-memory publisher (no server, no Kafka: the cost of
reading, decoding and encoding only), alternating plain and compressed, and the CPU time per row
change of each is compared. Run it under the interpreter to measure (PyPy in production); the
line is appended to the results file like the suite's.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Dict, List, Tuple

from . import env, results
from .binlogs import binlog_dir
from .shapes import drop

FILE = "mysql-bin.000002"  # the replay's name for the file, whatever the server called it


def _record(rows: int, oltp: int) -> Tuple[bytes, int]:
    """A binlog file holding ``rows`` bulk rows (1000-row INSERTs) and ``oltp`` single-row
    UPDATE transactions; (its bytes, row changes)."""
    db = env.unique("payload")
    conn = env.admin()
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {db}")
            cur.execute(f"USE {db}")  # the sequence engine's seq_ tables are per database
            cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL, "
                        "note VARCHAR(64) NULL, at DATETIME(6) NOT NULL, "
                        "amount DECIMAL(12,4) NOT NULL, body TEXT)")
            cur.execute("FLUSH BINARY LOGS")
            cur.execute("SHOW MASTER STATUS")
            name = cur.fetchone()[0]
            for lo in range(0, rows, 1000):
                cur.execute(f"INSERT INTO {db}.t SELECT seq, CONCAT('name-', seq), "
                            f"IF(seq % 10 = 0, NULL, 'note'), NOW(6), seq * 1.5, "
                            f"REPEAT('x', 100) FROM seq_{lo + 1}_to_{lo + 1000}")
            for i in range(oltp):
                cur.execute(f"UPDATE {db}.t SET amount = amount + 1 WHERE id = {i % rows + 1}")
            cur.execute("FLUSH BINARY LOGS")
        where = binlog_dir(conn)
        assert where is not None, "the local server's binlog is not on this machine"
        with open(os.path.join(where, name), "rb") as fh:
            return fh.read(), rows + oltp
    finally:
        conn.close()
        drop(db)


def _replay(data: bytes, workdir: str) -> Tuple[float, int]:
    """(CPU seconds, messages) of one stream of ``data`` through the engine."""
    from streamer import config
    from streamer.engine.supervisor import Supervisor
    from streamer.ops.metrics import Metrics
    from streamer.position import Position
    from tests.unit.engine_parts import FakeClock, InMemoryPublisher, ReplayedBinlog

    path = os.path.join(workdir, "c.yaml")
    with open(os.path.join(workdir, "pw"), "w") as fh:
        fh.write("unused\n")
    with open(path, "w") as fh:
        fh.write("namespace: bench\nsource: {name: b}\nmysql: {server_id: 9, password_file: pw}\n"
                 "tables: {include: ['payload*.*']}\nwarmup: {transactions: 0}\n")
    cfg = config.load(path, environ={})
    publisher = InMemoryPublisher()
    supervisor = Supervisor(cfg, metrics=Metrics(cfg), publisher=lambda _: publisher,
                            clock=FakeClock())
    streamer = supervisor.streamer
    start = Position(FILE, 4)
    reader = ReplayedBinlog("unused", start, on_end=streamer.request_stop, file=FILE, data=data)
    began = time.process_time()
    with reader:
        streamer.stream(publisher, reader, start)
    return time.process_time() - began, len(publisher.messages())


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=100000, help="bulk rows (1000 per INSERT)")
    p.add_argument("--oltp", type=int, default=20000, help="single-row UPDATE transactions")
    p.add_argument("--repeat", type=int, default=5, help="runs of each, alternating")
    p.add_argument("--results", default=env.RESULTS)
    args = p.parse_args(argv)
    from streamer.source import patches
    from tests.unit.engine_parts import compressed
    patches.apply()
    plain, changes = _record(args.rows, args.oltp)
    packed = compressed(plain)
    samples: Dict[str, List[float]] = {"plain": [], "compressed": []}
    with tempfile.TemporaryDirectory(prefix="streamer-payload-") as workdir:
        for _ in range(args.repeat):
            for kind, data in (("plain", plain), ("compressed", packed)):
                cpu, messages = _replay(data, workdir)
                assert messages >= changes, (kind, messages, changes)
                samples[kind].append(cpu / changes * 1e6)
    plain_us, packed_us = (statistics.median(samples[k]) for k in ("plain", "compressed"))
    rec: Dict[str, Any] = dict(results.run_header(False, args.repeat), shape="payload",
                               interpreter=sys.implementation.name, rows=changes,
                               binlog_bytes=len(plain), compressed_bytes=len(packed),
                               plain_us_per_row=round(plain_us, 3),
                               compressed_us_per_row=round(packed_us, 3),
                               payload_overhead_pct=round((packed_us / plain_us - 1) * 100, 1))
    results.emit(rec, args.results)
    print(f"payload: {changes} row changes, binlog {len(plain) / 1e6:.1f} MB, compressed "
          f"{len(packed) / 1e6:.1f} MB: {plain_us:.2f} µs/row plain, {packed_us:.2f} compressed "
          f"({rec['payload_overhead_pct']:+.1f} %), medians of {args.repeat}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
