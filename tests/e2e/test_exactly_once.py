"""Exactly-once for read_committed consumers, shown by killing the streamer again and again."""
import collections
import json
import random
import re
import signal
import threading
import time

import pytest

from tests import support
from tests.e2e.servers import WITHOUT_GTIDS, PrivateMariaDB, binlog_rows, free_port


class Load(threading.Thread):
    """A steady mix of multi-row inserts, single-row updates and multi-statement transactions."""

    def __init__(self, db: str, source=support.DEFAULT, seed: int = 7):
        super().__init__(daemon=True)
        self.db = db
        self.source = source
        self.conn = source.admin(db)
        self.rng = random.Random(seed)
        self.stop_flag = threading.Event()
        self.error = None
        self.statements = 0

    def run(self) -> None:
        rng = self.rng
        try:
            with self.conn.cursor() as cur:
                while not self.stop_flag.is_set():
                    r = rng.random()
                    if r < 0.35:
                        n = rng.randint(1, 40)
                        cur.execute("INSERT INTO t (k, v) VALUES " +
                                    ",".join(f"({rng.randint(1, 50)}, 'v{rng.random()}')" for _ in range(n)))
                    elif r < 0.7:
                        cur.execute("UPDATE t SET v = %s ORDER BY RAND() LIMIT 1", (f"u{rng.random()}",))
                    elif r < 0.97:
                        cur.execute("BEGIN")
                        cur.execute("INSERT INTO t (k, v) VALUES " +
                                    ",".join(f"({rng.randint(1, 50)}, 'tx')" for _ in range(rng.randint(1, 50))))
                        cur.execute("UPDATE t SET v = 'tx-upd' WHERE k = %s LIMIT 3", (rng.randint(1, 50),))
                        cur.execute("DELETE FROM t ORDER BY id LIMIT 1")
                        cur.execute("COMMIT")
                    else:
                        cur.execute(f"INSERT INTO t (k, v) SELECT seq % 50, 'bulk' "
                                    f"FROM {self.source.seq(1000)}")
                    self.statements += 1
                    time.sleep(rng.uniform(0.005, 0.03))
        except Exception as exc:  # noqa: BLE001 - surfaced by the test through self.error
            self.error = exc

    def stop(self) -> None:
        self.stop_flag.set()
        self.join()

    def changes_since(self, start):
        """Every row change of the database in the binlog from ``start`` to its end, once the
        load ran without an error (``binlog_rows``)."""
        assert self.error is None, self.error
        end = support.master_pos(self.source.admin())
        return binlog_rows(self.source.port, support.secret("admin"), start, end, self.db)


def _identities(msgs):
    return sorted((m["value"]["source"]["file"], m["value"]["source"]["pos"],
                   m["value"]["source"]["row"], m["value"]["op"], m["key"]["id"]) for m in msgs)


def _in_partition_order(msgs):
    return sorted(msgs, key=lambda m: (m["partition"], m["offset"]))


def _assert_order_per_key(msgs):
    per_key = collections.defaultdict(list)
    for m in _in_partition_order(msgs):
        s = m["value"]["source"]
        per_key[m["key"]["id"]].append((s["file"], s["pos"], s["row"]))
    for key, seq in per_key.items():
        assert seq == sorted(seq), f"key {key}: Kafka order differs from binlog order"


def _without_tombstones(msgs):
    """The row changes; asserts that each delete, and only a delete, is followed in its
    partition by one tombstone of its key."""
    ordered = _in_partition_order(msgs)
    changes = []
    for i, m in enumerate(ordered):
        if m["value"] is None:
            prev = ordered[i - 1]
            assert i and prev["value"] is not None and prev["value"]["op"] == "d" and \
                prev["raw_key"] == m["raw_key"] and prev["partition"] == m["partition"], \
                f"a tombstone not right behind its delete: {m}"
            continue
        if m["value"]["op"] == "d":
            nxt = ordered[i + 1] if i + 1 < len(ordered) else None
            assert nxt is not None and nxt["value"] is None and nxt["raw_key"] == m["raw_key"], \
                f"a delete without its tombstone: {m}"
        changes.append(m)
    return changes


def load_table(conn):
    """The table Load writes, with a first row; returns the binlog position before the load."""
    support.sql(conn, "CREATE TABLE t (id BIGINT AUTO_INCREMENT PRIMARY KEY, k INT, v VARCHAR(100))",
                "INSERT INTO t (k, v) VALUES (1, 'seed')")
    return support.master_pos(conn)


def assert_matches_binlog(msgs, truth):
    """The topic holds every row change of the binlog (``binlog_rows``) once, each delete with its
    tombstone right behind it, in binlog order per key; returns the row changes."""
    deletes = sum(1 for r in truth if r[3] == "d")
    assert len(msgs) == len(truth) + deletes, f"{len(msgs)} messages, {len(truth)} row changes"
    msgs = _without_tombstones(msgs)
    got = _identities(msgs)
    assert len(got) == len(set(got)), "duplicates in the topic"
    assert got == sorted(truth), f"{len(got)} messages for {len(truth)} binlog row changes"
    _assert_order_per_key(msgs)
    return msgs


# 20 and 10 runs in `make soak`, 8 and 4 in `make test` (3 and 2 under CPython: support.soak).
@pytest.mark.parametrize("partitions,runs", [(1, support.soak(8, 20)), (4, support.soak(4, 10))])
def test_sigkill_at_random_moments_under_load_loses_and_doubles_nothing(db, tmp_path, partitions,
                                                                         runs):
    name, conn = db
    start = load_table(conn)
    ns = support.unique("eo")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.t"],
                               batch={"max_messages": 300, "linger_ms": 20},
                               topics={"partitions": partitions, "replication_factor": 1})
    load = Load(name)
    load.start()
    rng = random.Random(11)
    positions = f"{ns}.__positions"
    kills = waited_resumes = 0
    try:
        for i in range(runs):
            # Until a first checkpoint is committed, an operator would restart with the same
            # explicit position; after that, restarts resume from the checkpoint.
            before = support.last_committed(positions)
            args = () if before >= 0 else ("--start-file", start[0], "--start-pos", str(start[1]))
            with support.StreamerProcess(cfg, str(tmp_path / "log"), *args) as proc:
                if i % 2:
                    # Half the kills land while batches are published: after this run's first
                    # commit, however long start-up took.
                    support.wait_for(lambda: proc.proc.poll() is not None or
                                     support.last_committed(positions) > before, timeout=120,
                                     what="a commit by this run")
                    time.sleep(rng.uniform(0.0, 1.0))
                    waited_resumes += not args
                else:
                    # The rest at a random moment from spawn: many in start-up (~1-1.5 s).
                    time.sleep(rng.uniform(0.3, 3.5))
                assert proc.proc.poll() is None, proc.output()[-3000:]
                proc.stop(signal.SIGKILL)
                kills += 1
    finally:
        load.stop()
    truth = load.changes_since(start)
    assert kills == runs and load.statements > 25 and len(truth) > 1000
    deletes = sum(1 for r in truth if r[3] == "d")
    with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
        msgs = support.consume([f"{ns}.{name}.t"], expect=len(truth) + deletes, decode_ns=ns,
                               timeout=240)
        assert proc.stop() == 0
    log = proc.output()
    # Runs that lived to commit and had a checkpoint resumed from it, and so did the last one;
    # runs killed early in start-up may have died before saying so.
    assert waited_resumes >= runs // 2 - 1
    assert log.count("resuming from committed checkpoint") >= waited_resumes + 1
    assert len({m["partition"] for m in msgs}) == partitions
    assert deletes > 10
    assert_matches_binlog(msgs, truth)
    # Batches were cut inside MySQL transactions, so checkpoints inside them were committed.
    checkpoints = [json.loads(m["raw_value"]) for m in support.consume([f"{ns}.__positions"])]
    assert any(c["rows"] > 0 for c in checkpoints), "no checkpoint inside a transaction"


def _restart_in_a_200k_row_transaction(db, tmp_path, source, mode):
    name, conn = db
    support.sql(conn, "CREATE TABLE big (id INT PRIMARY KEY, v VARCHAR(20))")
    start = support.master_pos(conn)
    support.sql(conn, f"INSERT INTO big SELECT seq, 'row' FROM {source.seq(200000)}")
    end = support.master_pos(conn)
    ns = support.unique("bg")
    mysql = dict(source.mysql_config(ns), position_mode=mode)
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.big"], mysql=mysql,
                               batch={"max_messages": 5000})
    topic = f"{ns}.{name}.big"
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", start[0],
                                 "--start-pos", str(start[1])) as proc, \
            support.EndOffset(topic) as end_offset:
        # Kill once checkpoints inside the transaction are committed, well before its end: the
        # whole transaction takes the streamer about a second, so the watch must be quick.
        support.wait_for(lambda: end_offset() > 20000, timeout=120, interval=0.01,
                         what="part of the big transaction published")
        proc.stop(signal.SIGKILL)
    assert support.end_offsets(topic) < 200000, "the kill came after the whole transaction"
    with support.StreamerProcess(cfg, str(tmp_path / "log2")) as proc:
        msgs = support.consume([topic], expect=200000, timeout=300)
        rss_kb = _peak_rss_kb(proc.proc.pid)
        assert proc.stop() == 0
    assert "rows" in proc.output() and "resuming from committed checkpoint" in proc.output()
    resumed = [line for line in proc.output().splitlines() if "resuming from" in line][0]
    assert " +" in resumed, f"resume point was not inside the transaction: {resumed}"
    dec = support.decoder(ns)
    ids = [dec.decode(m["raw_key"])["id"] for m in msgs]
    assert len(ids) == 200000 and sorted(ids) == list(range(1, 200001))
    assert ids == sorted(ids), "rows out of binlog order"
    assert end > start
    # Bounded memory: the whole transaction (~200k rows) is never held at once.
    assert rss_kb < 400 * 1024, f"peak RSS {rss_kb} kB"


def test_restart_in_the_middle_of_a_200k_row_transaction(db, tmp_path, source):
    _restart_in_a_200k_row_transaction(db, tmp_path, source, "file")


@pytest.mark.every_source
def test_restart_in_the_middle_of_a_200k_row_transaction_resuming_by_gtid(db, tmp_path, source):
    # mysql.position_mode gtid: the dump's first rotate says offset 4, and the rows the killed
    # run published must still be skipped (by the transaction's GTID).
    _restart_in_a_200k_row_transaction(db, tmp_path, source, "gtid")


@pytest.mark.every_source
@pytest.mark.parametrize("mode", ["file", "gtid"])
def test_sigkills_under_load_lose_and_double_nothing_on_every_server(db, tmp_path, source, mode):
    """The kill loop, shorter, against each server of the matrix, resuming by file and offset
    and by GTID set (the long one above runs on the default server)."""
    name, conn = db
    start = load_table(conn)
    ns = support.unique("es")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.t"], server=source,
                               mysql=dict(source.mysql_config(ns), position_mode=mode),
                               batch={"max_messages": 300, "linger_ms": 20})
    load = Load(name, source)
    load.start()
    rng = random.Random(5)
    positions = f"{ns}.__positions"
    try:
        for i in range(6):
            support.killed_after_a_commit(cfg, str(tmp_path / "log"), positions, start,
                                          rng.uniform(0.0, 1.0))
    finally:
        load.stop()
    truth = load.changes_since(start)
    deletes = sum(1 for r in truth if r[3] == "d")
    with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
        msgs = support.consume([f"{ns}.{name}.t"], expect=len(truth) + deletes, decode_ns=ns,
                               timeout=240)
        assert proc.stop() == 0
    assert len(truth) > 200 and deletes > 3
    assert_matches_binlog(msgs, truth)


@pytest.mark.on_source("mysql-8.0")
def test_mysql_without_gtids_sigkills_lose_and_double_nothing(tmp_path):
    """MySQL 8.0 as it comes (gtid_mode OFF): its transactions are anonymous, and everything is
    placed by binlog file and offset. The settings that need GTIDs say they can't have them."""
    with PrivateMariaDB(str(tmp_path / "m"), flavour="mysql-8.0", extra_args=WITHOUT_GTIDS) as mdb:
        support.sql(mdb.admin(), "CREATE DATABASE p")
        conn = mdb.admin("p")
        start = load_table(conn)
        ns = support.unique("ng")
        mysql = {"port": mdb.port, "password_file": mdb.password_file(), "position_mode": "gtid",
                 "hosts": [f"127.0.0.1:{mdb.port}", f"127.0.0.1:{free_port()}"]}
        cfg = support.write_config(str(tmp_path / "c.yaml"), ns, ["p.t"], mysql=mysql,
                                   batch={"max_messages": 300, "linger_ms": 20},
                                   topics={"transactions": True})
        load = Load("p", mdb)
        load.start()
        rng = random.Random(3)
        try:
            logs = [support.killed_after_a_commit(cfg, str(tmp_path / "log"), f"{ns}.__positions",
                                                  start, rng.uniform(0.0, 1.0)) for _ in range(4)]
        finally:
            load.stop_flag.set()
            load.join()
        assert load.error is None, load.error
        truth = binlog_rows(mdb.port, support.secret("admin", mdb.base), start,
                            support.master_pos(conn), "p")
        deletes = sum(1 for r in truth if r[3] == "d")
        with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
            msgs = support.consume([f"{ns}.p.t"], expect=len(truth) + deletes, decode_ns=ns,
                                   timeout=240)
            txs = support.consume([f"{ns}.__transactions"], idle=3, decode_ns=ns)
            assert proc.stop() == 0
        out = proc.output()
        # Read-only snapshots need GTIDs too: refused at start, naming the way on.
        ro = support.write_config(str(tmp_path / "ro.yaml"), ns, ["p.t"], mysql=mysql,
                                  snapshot={"mode": "read_only"})
        with support.StreamerProcess(ro, str(tmp_path / "ro.log")) as refused:
            assert refused.wait() == 3
    assert len(truth) > 200 and deletes > 3
    msgs = assert_matches_binlog(msgs, truth)
    assert "resuming from committed checkpoint" in "".join(logs) + out
    for warning in ("mysql.hosts names 2 servers, and MySQL at 127.0.0.1",
                    "mysql.position_mode is gtid, and MySQL at"):
        assert out.count(warning) == len(logs) + 1, out[-3000:]  # once by each start
    assert "writes no GTIDs" in refused.output() and "snapshot.mode: watermark" in \
        refused.output(), refused.output()[-2000:]
    # Each transaction is named by where it begins, once, and counts the messages of its rows
    # (a delete's tombstone too).
    ends = [(t["value"]["id"], t["value"]["event_count"]) for t in txs
            if t["value"]["status"] == "END"]
    assert all(t["value"]["gtid"] is None for t in txs)
    assert all(re.fullmatch(r"mysql-bin\.\d{6}:\d+", i) for i, _ in ends)
    assert dict(ends) == collections.Counter(m["value"]["source"]["txid"] for m in msgs
                                             for _ in range(1 + (m["value"]["op"] == "d")))
    assert len(dict(ends)) == len(ends) == len(txs) // 2


def _peak_rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    pytest.fail("no VmHWM for the streamer process")
