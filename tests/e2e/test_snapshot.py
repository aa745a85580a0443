"""Snapshots against the real servers: exactly once under load and SIGKILLs, on demand, every type,
an ALTER in the middle, and one clear error for each bad request."""
import collections
import contextlib
import datetime
import decimal
import ipaddress
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

from tests import support

ROWS = int(os.environ.get("STREAMER_SNAPSHOT_TEST_ROWS", "200000"))


def snapshot_cli(cfg, *args, timeout=60):
    """`streamer snapshot -c cfg ...`: (exit code, stdout, stderr)."""
    done = subprocess.run([sys.executable, "-m", "streamer.cli", "snapshot", "-c", cfg, *args],
                          cwd=support.ROOT, capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout, done.stderr


def stream_then_snapshot(cfg, log, start, table, ns, changes, reads):
    """A streamer run from ``start`` (file, offset) until ``changes`` messages of ``table``
    (``db.t``) are in its topic, then asked for a snapshot of it: the topic's messages once its
    ``reads`` came too."""
    topic = f"{ns}.{table}"
    with support.StreamerProcess(cfg, log, "--start-file", start[0],
                                 "--start-pos", str(start[1])) as proc:
        support.consume([topic], expect=changes, decode_ns=ns)
        rc, _, err = snapshot_cli(cfg, "--tables", table)
        assert rc == 0, err
        msgs = support.consume([topic], expect=changes + reads, decode_ns=ns)
        assert proc.stop() == 0, proc.output()[-3000:]
    return msgs


def materialize(msgs):
    """The state a compacting consumer ends with: the last c/u/r per key; d and a tombstone
    remove the key."""
    state = {}
    for m in sorted(msgs, key=lambda m: (m["partition"], m["offset"])):
        v = m["value"]
        key = tuple(sorted(m["key"].items()))
        if v is None or v["op"] == "d":
            state.pop(key, None)
        elif v["op"] in ("c", "u", "r"):
            state[key] = v["after"]
    return state


def table_state(conn, table, key):
    support.sql(conn, "SET time_zone = '+00:00'")
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {table}")
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, r)) for r in cur.fetchall()]
    return {tuple(sorted((k, r[k]) for k in key)): r for r in rows}


class Load(threading.Thread):
    """Inserts, updates and deletes of random keys of the snapshotted table, touching only keys
    that are multiples of 10: every other key must come out of the snapshot exactly once."""

    def __init__(self, db, source=support.DEFAULT, rows=ROWS):
        super().__init__(daemon=True)
        self.conn = source.admin(db)
        self.rng = random.Random(3)
        self.stop_flag = threading.Event()
        self.error = None
        self.statements = 0
        self.rows = rows
        self.next_id = rows + 10

    def touched(self):
        return self.rng.randrange(1, self.rows // 10 + 200) * 10

    def run(self):
        rng = self.rng
        try:
            with self.conn.cursor() as cur:
                while not self.stop_flag.is_set():
                    r = rng.random()
                    if r < 0.4:
                        cur.execute("UPDATE t SET v = %s, n = n + 1 WHERE id = %s",
                                    (f"u{rng.random()}", self.touched()))
                    elif r < 0.6:
                        cur.execute("DELETE FROM t WHERE id = %s", (self.touched(),))
                    elif r < 0.8:
                        cur.execute("INSERT INTO t (id, k, v, d, n) VALUES (%s, 1, 'new', NOW(6), 1) "
                                    "ON DUPLICATE KEY UPDATE v = 'again'", (self.touched(),))
                    else:
                        cur.execute("BEGIN")
                        for _ in range(rng.randint(2, 6)):
                            cur.execute("UPDATE t SET k = k + 1 WHERE id = %s", (self.touched(),))
                        cur.execute("DELETE FROM t WHERE id = %s", (self.touched(),))
                        cur.execute("COMMIT")
                    self.statements += 1
                    time.sleep(rng.uniform(0.001, 0.004))
        except Exception as exc:  # noqa: BLE001 - surfaced by the test through self.error
            self.error = exc


@pytest.mark.every_source
def test_snapshot_under_load_and_sigkills_converges_to_the_table_exactly_once(db, tmp_path,
                                                                             source):
    name, conn = db
    # 12 kills in 200,000 rows on the default server, 4 in 100,000 on the others of the matrix
    # and under CPython (support.soak).
    runs = support.soak(12 if source is support.DEFAULT else 4, 12)
    rows = ROWS if runs > 4 else ROWS // 2
    support.sql(conn, "CREATE TABLE t (id BIGINT PRIMARY KEY, k INT NOT NULL, v VARCHAR(64), "
                      "d DATETIME(6), n DECIMAL(12,2))",
                f"INSERT INTO t SELECT seq, seq % 1000, CONCAT('v', seq), "
                f"'2020-01-01' + INTERVAL seq SECOND, seq / 100 FROM {source.seq(rows)}")
    ns = support.unique("sn")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.t"], server=source,
                               start={"initial": "snapshot"}, snapshot={"chunk_rows": 200},
                               batch={"max_messages": 2000, "linger_ms": 20})
    load = Load(name, source, rows)
    load.start()
    rng = random.Random(5)
    kills = 0
    try:
        # SIGKILL at random moments (some during start-up) until ``runs`` landed mid-snapshot,
        # then let the snapshot finish.
        for run in range(runs):
            with support.StreamerProcess(cfg, str(tmp_path / f"run{run}.log")) as proc:
                if rng.random() < 0.2:
                    time.sleep(rng.uniform(0.05, 1.0))
                else:
                    proc.wait_reading()
                    time.sleep(rng.uniform(0.05, 0.5))
                out = proc.output()
                assert " done: " not in out, "the snapshot ended before the kills: use more rows"
                assert proc.proc.poll() is None, out[-3000:]
                proc.proc.send_signal(signal.SIGKILL)
                proc.proc.wait()
                kills += 1
        with support.StreamerProcess(cfg, str(tmp_path / "last.log")) as proc:
            support.wait_for(lambda: " done: " in proc.output() or proc.proc.poll() is not None,
                             timeout=300, what="the snapshot to finish")
            assert proc.stop() == 0, proc.output()[-3000:]
    finally:
        load.stop_flag.set()
        load.join()
    assert load.error is None, load.error

    topic = f"{ns}.{name}.t"
    want = table_state(conn, "t", ["id"])
    with support.StreamerProcess(cfg, str(tmp_path / "final.log")) as proc:
        proc.wait_reading()
        deadline = time.monotonic() + 120
        while True:
            msgs = support.consume([topic], idle=3, decode_ns=ns)
            got = materialize(msgs)
            if got == want or time.monotonic() > deadline:
                break
        assert proc.stop() == 0, proc.output()[-3000:]
    missing = want.keys() - got.keys()
    extra = got.keys() - want.keys()
    wrong = [k for k in want.keys() & got.keys() if got[k] != want[k]]
    assert not missing and not extra and not wrong, (
        f"{len(missing)} missing, {len(extra)} extra, {len(wrong)} differ, e.g. "
        f"{sorted(missing)[:3]} {sorted(extra)[:3]} {[(got[k], want[k]) for k in wrong[:2]]}")

    tombstones = [m for m in msgs if m["value"] is None]
    msgs = [m for m in msgs if m["value"] is not None]
    assert len(tombstones) == sum(1 for m in msgs if m["value"]["op"] == "d")
    reads = collections.Counter(m["key"]["id"] for m in msgs if m["value"]["op"] == "r")
    assert max(reads.values()) == 1, [k for k, n in reads.items() if n > 1][:10]
    untouched = [i for i in range(1, rows + 1) if i % 10]
    assert all(reads[i] == 1 for i in untouched), [i for i in untouched if reads[i] != 1][:10]
    assert {m["value"]["source"]["snapshot"] for m in msgs if m["value"]["op"] == "r"} == \
        {"true", "last"}
    assert all(m["value"]["source"]["snapshot"] is None for m in msgs if m["value"]["op"] != "r")

    per_key = collections.defaultdict(list)
    for m in sorted(msgs, key=lambda m: m["offset"]):
        s = m["value"]["source"]
        per_key[m["key"]["id"]].append((s["file"], s["pos"]))
    bad = [k for k, seq in per_key.items() if seq != sorted(seq)]
    assert not bad, f"keys whose messages are out of binlog order: {bad[:5]}"
    assert sum(1 for m in msgs if m["value"]["op"] in "cud") > 100, "the load made few changes"


def _after_by_id(msgs, op):
    return {m["key"]["id"]: m for m in msgs if m["value"]["op"] == op}


def test_a_snapshot_row_is_the_binlog_row_for_every_type(db, tmp_path):
    # The rows are written from their packets (schema.textavro): the columns with no fast path
    # (a SET among them) made the general way one by one, a renamed column's by its position.
    from tests.e2e.test_types import CHARSETS, COLUMNS
    name, conn = db
    cols = [(c, t) for c, t, _, _ in COLUMNS] + [(c, f"VARCHAR(8) CHARACTER SET {cs}")
                                                for c, cs, _, _ in CHARSETS]
    # A DOUBLE(M,D) holds the double the server's rounding to D digits made, which needn't be
    # the nearest to the decimal its text shows (-0.01 is stored as -0.010000000000000009).
    extra = [("g", "POINT", "POINT({i}, 2.5)"), ("`my-col`", "INT", "{i}"),
             ("dd", "DOUBLE(10,2)", "-0.0{i}"),
             ("z", "DATE", "'0000-00-00'"), ("zt", "DATETIME(6)", "'2020-00-10 00:00:00'"),
             ("tn", "TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)",
              "'2024-01-02 03:04:05.{i}'")]
    cols += [(c, t) for c, t, _ in extra]
    support.sql(conn, "SET SESSION sql_mode = ''",
                f"CREATE TABLE types (id INT PRIMARY KEY, "
                f"{', '.join(f'{c} {t}' for c, t in cols)})")
    names = ", ".join([c for c, _, _, _ in COLUMNS + CHARSETS] + [c for c, _, _ in extra])
    ns = support.unique("st")
    f, p = support.master_pos(conn)
    for row_id, idx in ((1, 2), (2, 3)):
        values = ", ".join([col[idx] for col in COLUMNS + CHARSETS]
                           + [v.format(i=row_id) for _, _, v in extra])
        support.sql(conn, f"INSERT INTO types (id, {names}) VALUES ({row_id}, {values})")
    support.sql(conn, "INSERT INTO types (id) VALUES (3)")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"])
    topic = f"{ns}.{name}.types"
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", f,
                                 "--start-pos", str(p)) as proc:
        assert len(support.consume([topic], expect=3, decode_ns=ns)) == 3
        rc, out, err = snapshot_cli(cfg, "--tables", f"{name}.types")
        assert rc == 0, err
        msgs = support.consume([topic], expect=6, decode_ns=ns)
        assert proc.stop() == 0, proc.output()[-3000:]
    streamed, read = _after_by_id(msgs, "c"), _after_by_id(msgs, "r")
    assert sorted(read) == [1, 2, 3]
    for row_id in (1, 2, 3):
        c, r = streamed[row_id], read[row_id]
        # The same writer schema (fingerprint in the single-object header), the same values.
        assert r["raw_value"][:10] == c["raw_value"][:10], row_id
        assert r["raw_key"] == c["raw_key"]
        for col, value in c["value"]["after"].items():
            assert r["value"]["after"][col] == value, f"row {row_id} column {col}"
    assert read[3]["value"]["source"]["snapshot"] == "last"


@pytest.mark.every_source
def test_a_chunk_reads_no_value_of_an_excluded_column_but_the_key_it_follows(db, source):
    # A table keyed by a unique key: its column may be excluded, and is still read (chunks
    # follow it); the other excluded columns come as NULL, their values never sent.
    from streamer.source import chunks

    name, conn = db
    support.sql(conn, "CREATE TABLE u (code VARCHAR(12) NOT NULL, secret BLOB NOT NULL, f FLOAT, "
                      "at DATETIME(6), v INT, UNIQUE KEY (code))",
                "INSERT INTO u VALUES ('k1', 'top-secret-1', 1.5, '2024-01-02 03:04:05.5', 1), "
                "('k2', 'top-secret-2', NULL, NULL, 2), ('k3', 'top-secret-3', 2.5, NULL, 3)")
    reader = chunks.TableReader({"host": "127.0.0.1", "port": source.port, "user": "admin",
                                 "password": support.secret("admin")}, name, "test")
    try:
        d = reader.describe(name, "u")
        assert d.chunk_key == ["code"]
        reading = reader.open(d.leaving_out(["secret", "code", "f"]), ["'k1'"], None, 10)
        raw = reading.fetch(10)
        rows = [reading.unpack(r) for r in raw]
    finally:
        reader.close()
    assert reading.final and reading.last_key == ["'k3'"]
    assert not any(b"top-secret" in bytes(r) for r in raw)
    assert [(r["code"], r["secret"], r["f"], r["v"]) for r in rows] == \
        [("k2", None, None, 2), ("k3", None, None, 3)]


def test_on_demand_snapshots_while_running_and_while_stopped(db, tmp_path):
    name, conn = db
    support.sql(conn,
                "CREATE TABLE pair (a INT, b VARCHAR(10), v INT, PRIMARY KEY (a, b))",
                "INSERT INTO pair SELECT seq % 7, CONCAT('k', seq), seq FROM seq_1_to_300",
                "CREATE TABLE word (w VARCHAR(20) COLLATE utf8mb4_general_ci PRIMARY KEY, n INT)",
                "INSERT INTO word VALUES ('apple', 1), ('Banana', 2), ('cherry', 3), ('Äpfel', 4), "
                "('zed', 5), ('Zulu', 6), ('b', 7), ('C', 8)",
                "CREATE TABLE other (id INT PRIMARY KEY, v INT)")
    ns = support.unique("sd")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"],
                               snapshot={"chunk_rows": 3},
                               metrics={"http_port": 19000 + os.getpid() % 500})
    pair, word, other = (f"{ns}.{name}.{t}" for t in ("pair", "word", "other"))
    with support.StreamerProcess(cfg, str(tmp_path / "run1.log")) as proc:
        proc.wait_reading()
        stop = threading.Event()

        def stream_other():
            with support.admin(name) as c2:
                i = 0
                while not stop.is_set():
                    i += 1
                    support.sql(c2, f"INSERT INTO other VALUES ({i}, {i})")
                    time.sleep(0.005)
        writer = threading.Thread(target=stream_other, daemon=True)
        writer.start()
        rc, out, err = snapshot_cli(cfg, "--tables", f"{name}.pair", "--where", "a < 3 AND v > 10",
                                    "--follow")
        stop.set()
        writer.join()
        assert rc == 0, err + out
        assert "done" in out.splitlines()[-1]
        want = {(a, b): v for a, b, v in support.sql(conn, "SELECT a, b, v FROM pair "
                                                           "WHERE a < 3 AND v > 10")}
        msgs = support.consume([pair], expect=len(want), decode_ns=ns)
        got = {(m["key"]["a"], m["key"]["b"]): m["value"]["after"]["v"] for m in msgs}
        assert got == want and len(msgs) == len(want)
        assert all(m["value"]["op"] == "r" for m in msgs)
        others = support.consume([other], decode_ns=ns)
        assert len(others) >= 10 and all(m["value"]["op"] == "c" for m in others)
        assert proc.stop() == 0, proc.output()[-3000:]

    # Stopped: the request waits in the binlog for the next start.
    rc, out, err = snapshot_cli(cfg, "--tables", f"{name}.word")
    assert rc == 0 and "when it next starts" in out, err
    with support.StreamerProcess(cfg, str(tmp_path / "run2.log")) as proc:
        msgs = support.consume([word], expect=8, decode_ns=ns)
        assert proc.stop() == 0, proc.output()[-3000:]
    order = [m["key"]["w"] for m in msgs]
    # The server's collation ordered the chunks: case-insensitive, 'Äpfel' beside 'apple'.
    assert order == [r[0] for r in support.sql(conn, "SELECT w FROM word ORDER BY w")]
    assert len(set(order)) == 8


@contextlib.contextmanager
def _altered_mid_snapshot(conn, tmp_path, name, prefix, alter):
    """A streamer snapshotting ``t`` in chunks of 50 rows, ``alter`` run once its first chunk is
    published: (its namespace, the process)."""
    ns = support.unique(prefix)
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.t"],
                               start={"initial": "snapshot"}, snapshot={"chunk_rows": 50})
    with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
        # A chunk published means its high watermark was read: before the ALTER, in binlog
        # order. "begins" alone raced the first chunk (a clean-clone CI run read none before).
        support.wait_for(lambda: support.end_offsets(f"{ns}.{name}.t") > 0,
                         what="the snapshot's first chunk")
        support.sql(conn, alter)
        yield ns, proc


def test_an_alter_in_the_middle_of_a_snapshot_shapes_every_row_read_after_it(db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))",
                "INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_20000")
    with _altered_mid_snapshot(conn, tmp_path, name, "sa",
                               "ALTER TABLE t ADD COLUMN n INT NOT NULL DEFAULT 7") as (ns, proc):
        alter = support.master_pos(conn)
        support.sql(conn, "UPDATE t SET n = 8 WHERE id % 1000 = 0")
        support.wait_for(lambda: " done: " in proc.output(), timeout=120, what="the snapshot")
        msgs = support.consume([f"{ns}.{name}.t"], idle=3, decode_ns=ns)
        assert proc.stop() == 0, proc.output()[-3000:]
    reads = [m for m in msgs if m["value"]["op"] == "r"]
    before = [m for m in reads if (m["value"]["source"]["file"], m["value"]["source"]["pos"]) < alter]
    after = [m for m in reads if m not in before]
    assert before and after, "the ALTER did not fall inside the snapshot: it tested nothing"
    # A row is read with the columns the table had at its place in the binlog order: an ADD
    # COLUMN writes no row event, so rows read before it keep the old shape, as changes would.
    assert all("n" not in m["value"]["after"] for m in before)
    assert all("n" in m["value"]["after"] for m in after)
    want = table_state(conn, "t", ["id"])
    got = materialize(msgs)
    assert got.keys() == want.keys()
    assert all(got[k] == {c: want[k][c] for c in got[k]} for k in want)
    counts = collections.Counter(m["key"]["id"] for m in reads)
    assert all(counts[i] == 1 for i in range(1, 20001) if i % 1000), "a key read twice or never"


def test_each_bad_request_gets_one_clear_error(db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE keyless (v INT)", "CREATE TABLE ok (id INT PRIMARY KEY)",
                "CREATE TABLE uniq (u INT NOT NULL, UNIQUE KEY (u))",
                "INSERT INTO uniq VALUES (1), (2)")
    ns = support.unique("se")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"])
    cases = [
        (["--tables", f"{name}.keyless"], "has no primary key and no unique key of NOT NULL"),
        (["--tables", f"{name}.ok", "--where", "id >>> 3"], "the server refuses --where"),
        (["--tables", f"{name}.ok", "--where", "nope = 1"], "nope is not a column of the table"),
        # A condition, never a statement: what would read other tables, end the SELECT early
        # or stall the stream is refused before anything is written.
        (["--tables", f"{name}.ok", "--where",
          "0) UNION ALL SELECT User FROM mysql.user WHERE (1"], "closes a parenthesis"),
        (["--tables", f"{name}.ok", "--where", "id IN (SELECT 1)"], "SELECT is not allowed"),
        (["--tables", f"{name}.ok", "--where", "1=1 -- "], "comments"),
        (["--tables", f"{name}.ok", "--where", "SLEEP(1) = 0"], "SLEEP() is not allowed"),
        (["--tables", f"{name}_elsewhere.t"], "is not streamed by this config"),
        (["--tables", f"{name}.missing"], "does not exist"),
        (["--tables", "nodot"], "write it as db.table"),
    ]
    for args, expected in cases:
        rc, out, err = snapshot_cli(cfg, *args)
        assert rc == 3 and expected in err and err.count("\n") == 1, (args, rc, err)
    # A unique NOT NULL key serves when there is no primary key.
    rc, out, err = snapshot_cli(cfg, "--tables", f"{name}.uniq")
    assert rc == 0, err

    # start.initial: snapshot refuses, before reading anything, when a table can't be chunked.
    cfg2 = support.write_config(str(tmp_path / "c2.yaml"), support.unique("se"), [f"{name}.*"],
                                start={"initial": "snapshot"})
    with support.StreamerProcess(cfg2, str(tmp_path / "log2")) as proc:
        assert proc.wait(60) == 3
        assert f"{name}.keyless has no primary key" in proc.output()
        assert "tables.exclude" in proc.output() and "Traceback" not in proc.output()


def test_a_user_that_may_not_write_the_watermark_table_is_told_the_grant(db, tmp_path):
    name, conn = db
    user, password = support.unique("ro"), support.unique("pw")
    support.sql(conn, f"CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY '{password}'",
                f"GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO '{user}'@'127.0.0.1'",
                "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1)")
    try:
        (tmp_path / "pw").write_text(password)
        ns = support.unique("sp")
        cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.t"],
                                   start={"initial": "snapshot"},
                                   mysql={"user": user, "password_file": str(tmp_path / "pw"),
                                          "host": "127.0.0.1", "port": support.MYSQL_PORT,
                                          "server_id": 7123})
        with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
            assert proc.wait(60) == 3
            out = proc.output()
        assert f"the streamer's user '{user}' may not write the watermark to " \
               f"streamer_heartbeat.snapshot_watermark" in out, out[-2000:]
        assert "GRANT INSERT, UPDATE ON `streamer_heartbeat`.*" in out and "Traceback" not in out
    finally:
        support.sql(conn, f"DROP USER '{user}'@'127.0.0.1'")


@pytest.mark.every_source
def test_read_only_mode_snapshots_with_a_user_that_may_not_write(db, tmp_path, source):
    # GTID positions frame the chunks: MariaDB's, and MySQL's with gtid_mode ON (without GTIDs
    # it is refused, tests/e2e/test_exactly_once.py).
    name, conn = db
    user, password = support.unique("ro"), support.unique("pw")
    monitor = "REPLICATION CLIENT" if source.mysql else "BINLOG MONITOR"
    support.sql(conn, f"CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY '{password}'",
                f"GRANT SELECT, REPLICATION SLAVE, {monitor} ON *.* TO '{user}'@'127.0.0.1'",
                "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
                f"INSERT INTO t SELECT seq, seq FROM {source.seq(20000)}")
    try:
        (tmp_path / "pw").write_text(password)
        ns = support.unique("sr")
        cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"],
                                   start={"initial": "snapshot"},
                                   snapshot={"chunk_rows": 500, "mode": "read_only"},
                                   mysql={"user": user, "password_file": str(tmp_path / "pw"),
                                          "host": "127.0.0.1", "port": source.port,
                                          "server_id": 7124})
        stop = threading.Event()

        def load():
            with source.admin(name) as c2:
                rng = random.Random(9)
                while not stop.is_set():
                    support.sql(c2, "UPDATE t SET v = v + 1 WHERE id = %s",
                                args=(rng.randrange(1, 2001) * 10,))
                    time.sleep(0.002)
        writer = threading.Thread(target=load, daemon=True)
        writer.start()
        with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
            support.wait_for(lambda: "t done: " in proc.output() or proc.proc.poll() is not None,
                             timeout=120, what="the snapshot of t")
            stop.set()
            writer.join()
            # A table created since, asked for by a request another user wrote (here: on the same
            # server; on a replica, on its primary), is read the same way.
            support.sql(conn, "CREATE TABLE later (id INT PRIMARY KEY)",
                        "INSERT INTO later VALUES (1), (2)")
            support.sql(conn, "INSERT INTO streamer_heartbeat.snapshot_signal (streamer, request) "
                              "VALUES (%s, %s)",
                        args=(f"{ns}/{ns}", f'{{"tables": ["{name}.later"], "where": null}}'))
            msgs = support.consume([f"{ns}.{name}.t", f"{ns}.{name}.later"], idle=3,
                                   decode_ns=ns)
            assert proc.stop() == 0, proc.output()[-3000:]
            out = proc.output()
        assert "snapshot_watermark" not in out and "Traceback" not in out
        t_msgs = [m for m in msgs if m["topic"].endswith(".t")]
        assert materialize(t_msgs) == table_state(conn, "t", ["id"])
        reads = collections.Counter(m["key"]["id"] for m in t_msgs if m["value"]["op"] == "r")
        assert max(reads.values()) == 1
        assert all(reads[i] == 1 for i in range(1, 20001) if i % 10)
        later = [(m["value"]["op"], m["key"]["id"]) for m in msgs if m["topic"].endswith(".later")]
        assert later == [("c", 1), ("c", 2), ("r", 1), ("r", 2)]
        assert all(":snapshot" in m["value"]["source"]["txid"] for m in msgs
                   if m["value"]["op"] == "r")
    finally:
        support.sql(conn, f"DROP USER '{user}'@'127.0.0.1'")


@pytest.mark.on_source("mysql-8.0")
def test_read_only_mode_is_refused_and_its_chunks_put_off_on_a_mysql_committing_out_of_order(
        tmp_path):
    # A chunk's window is placed by the binlog's order, which is the order its read sees
    # commits in only with binlog_order_commits ON (MariaDB has no such setting).
    from streamer.source import chunks

    source = support.SOURCES["mysql-8.0"]
    conn = source.admin()
    name = support.unique("t_")
    support.sql(conn, f"CREATE DATABASE {name}", f"CREATE TABLE {name}.t (id INT PRIMARY KEY)",
                f"INSERT INTO {name}.t VALUES (1)", "SET GLOBAL binlog_order_commits = OFF")
    try:
        ns = support.unique("so")
        cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"], source,
                                   start={"initial": "snapshot"}, snapshot={"mode": "read_only"})
        with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
            assert proc.wait(60) == 3
            out = proc.output()
        checked = subprocess.run([sys.executable, "-m", "streamer.cli", "check", "-c", cfg],
                                 capture_output=True, text=True, timeout=120)
        # Set OFF after a start, it puts each chunk off until it is ON again (the setting is
        # dynamic): the chunk's read refuses to run while it is OFF.
        reader = chunks.TableReader({"host": "127.0.0.1", "port": source.port, "user": "admin",
                                     "password": support.secret("admin")}, name, "test")
        try:
            d = reader.describe(name, "t")
            with pytest.raises(chunks.OutOfOrder):
                reader.read_at_position(d, None, None, 10)
            support.sql(conn, "SET GLOBAL binlog_order_commits = ON")
            rows, _, final, at = reader.read_at_position(d, None, None, 10)
        finally:
            reader.close()
        assert rows == [{"id": 1}] and final and ":" in at  # MySQL's GTID set: uuid:1-n
    finally:
        support.sql(conn, "SET GLOBAL binlog_order_commits = ON", f"DROP DATABASE {name}")
        conn.close()
    assert "this MySQL has binlog_order_commits OFF" in out, out[-2000:]
    assert "SET GLOBAL binlog_order_commits=ON" in out and "Traceback" not in out
    # streamer check says so beforehand.
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "✗ snapshot.mode read_only: snapshot.mode read_only frames each chunk by the " \
           "server's GTID positions, which needs" in checked.stdout, checked.stdout
    assert "✓ binlog_order_commits: is OFF" in checked.stdout


def test_a_table_dropped_mid_snapshot_ends_its_snapshot_with_a_warning_and_the_next_goes_on(
        db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE a (id INT PRIMARY KEY)", "CREATE TABLE b (id INT PRIMARY KEY)",
                "INSERT INTO a SELECT seq FROM seq_1_to_30000", "INSERT INTO b VALUES (1), (2)")
    ns = support.unique("sx")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"],
                               start={"initial": "snapshot"}, snapshot={"chunk_rows": 20})
    with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
        support.wait_for(lambda: f"{name}.a begins" in proc.output(), what="the snapshot of a")
        support.sql(conn, "DROP TABLE a")
        support.wait_for(lambda: f"{name}.b done" in proc.output() or proc.proc.poll() is not None,
                         timeout=120, what="the snapshot of b")
        msgs = support.consume([f"{ns}.{name}.b"], expect=2, decode_ns=ns)
        assert proc.stop() == 0, proc.output()[-3000:]
        out = proc.output()
    assert re.search(rf"WARNING .*snapshot of {name}\.a ends: the table (was dropped|no longer "
                     rf"exists) \(\d+ rows published\)", out), out[-3000:]
    assert sorted(m["key"]["id"] for m in msgs) == [1, 2]


def test_a_chunk_key_whose_order_changes_mid_snapshot_starts_the_snapshot_again(db, tmp_path):
    """The chunks follow the key's order: a key column of another collation (or type) orders the
    rows another way, and the next chunk after the last key would skip rows. Here the lowercase
    keys sort after every uppercase one by bytes, before every one case-insensitively."""
    name, conn = db
    support.sql(conn, "CREATE TABLE t (w VARCHAR(20) COLLATE utf8mb4_bin PRIMARY KEY, n INT)",
                "INSERT INTO t SELECT CONCAT('K', LPAD(seq, 5, '0')), seq FROM seq_1_to_15000",
                "INSERT INTO t SELECT CONCAT('a', LPAD(seq, 5, '0')), seq FROM seq_1_to_15000")
    with _altered_mid_snapshot(conn, tmp_path, name, "so", "ALTER TABLE t MODIFY w VARCHAR(20) "
                               "COLLATE utf8mb4_general_ci") as (ns, proc):
        support.wait_for(lambda: " done: " in proc.output(), timeout=120, what="the snapshot")
        msgs = support.consume([f"{ns}.{name}.t"], idle=3, decode_ns=ns)
        assert proc.stop() == 0, proc.output()[-3000:]
        out = proc.output()
    read = collections.Counter(m["key"]["w"] for m in msgs if m["value"]["op"] == "r")
    want = {r[0] for r in support.sql(conn, "SELECT w FROM t")}
    assert not want - set(read), f"{len(want - set(read))} rows never read"
    assert re.search(rf"WARNING .*snapshot of {name}\.t: its chunk key \(w\) changed its order "
                     rf"\(.*utf8mb4_bin.* to .*utf8mb4_general_ci.*\) after \d+ rows; it starts "
                     rf"again from the first row", out), out[-3000:]
    assert max(read.values()) == 2 and len(read) == 30000, "read again from the first row once"


def _key_value(sql_type, rng):
    """A random value of a chunk key column, edges often: case, accents, trailing spaces, quotes
    and backslashes, zero bytes, signs, the ends of ranges."""
    kind = sql_type.split("(")[0].split(" ")[0]
    text = "aAéE e'\\\"😀z"
    moment = datetime.datetime(1970, 1, 2) + datetime.timedelta(seconds=rng.randint(0, 2 ** 31 - 3 * 86400))
    return {
        "VARCHAR": lambda: "".join(rng.choice(text) for _ in range(rng.randint(0, 6))),
        "CHAR": lambda: "".join(rng.choice("aAb ' é") for _ in range(rng.randint(0, 4))),
        "VARBINARY": lambda: bytes(rng.choice(b"\x00\\'a\xff ") for _ in range(rng.randint(0, 5))),
        "INT": lambda: rng.choice([-2 ** 31, 2 ** 31 - 1, rng.randint(-50, 50)]),
        "BIGINT": lambda: rng.choice([0, 2 ** 64 - 1, 2 ** 63, rng.randint(0, 2 ** 64 - 1)]),
        "DECIMAL": lambda: decimal.Decimal(rng.randint(-10 ** 6, 10 ** 6)).scaleb(-3),
        "DOUBLE": lambda: rng.choice([0.1, -0.0, 1e300, rng.uniform(-1, 1)]),
        "FLOAT": lambda: rng.choice([1.2345671, 1.2345678, -3.4e38, rng.uniform(-1, 1)]),
        "DATETIME": lambda: moment.replace(microsecond=rng.randrange(10 ** 6)),
        "TIMESTAMP": lambda: moment.replace(microsecond=rng.randrange(1000) * 1000),
        "DATE": lambda: moment.date(),
        "TIME": lambda: datetime.timedelta(seconds=rng.randint(-838 * 3600, 838 * 3600),
                                           microseconds=rng.randrange(100) * 10000),
        "YEAR": lambda: rng.randint(1901, 2155),
        "ENUM": lambda: rng.choice("zam"),
        "SET": lambda: ",".join(rng.sample("xyz", rng.randint(0, 3))),
        "BIT": lambda: rng.randrange(1024),
        # MariaDB's own: a UUID of each version the server sorts its own way (1 by its time,
        # the rest by their bytes), addresses with runs of zero words, and mapped IPv4 ones.
        "UUID": lambda: str(uuid.UUID(int=rng.getrandbits(128) & ~(0xF << 76) & ~(0xC << 60)
                                      | rng.choice([1, 4, 7]) << 76 | 0x8 << 60)),
        "INET6": lambda: str(ipaddress.IPv6Address(rng.choice(
            [rng.getrandbits(128), (0xFFFF << 32) | rng.getrandbits(32),
             int.from_bytes(b"".join(b"\0\0" if rng.random() < 0.5 else rng.randbytes(2)
                                     for _ in range(8)), "big")]))),
        "INET4": lambda: str(ipaddress.IPv4Address(rng.choice([0, 2 ** 32 - 1,
                                                               rng.getrandbits(32)]))),
        "YEAR(2)": lambda: rng.choice(["0000", 0, 1970, 1999, 2024, 2069, rng.randint(1970, 2069)]),
    }[kind if sql_type != "YEAR(2)" else sql_type]()


KEY_TYPES = ["VARCHAR(8) COLLATE utf8mb4_general_ci", "VARCHAR(8) COLLATE utf8mb4_bin",
             "CHAR(4) CHARACTER SET latin1", "VARBINARY(6)", "INT", "BIGINT UNSIGNED",
             "DECIMAL(10,3)", "DOUBLE", "FLOAT", "DATETIME(6)", "TIMESTAMP(3)", "DATE", "TIME(2)",
             "YEAR", "ENUM('z','a','m')", "SET('x','y','z')", "BIT(10)"]
MARIADB_KEY_TYPES = ["UUID", "INET6", "INET4", "YEAR(2)"]


class _KeyLoad(threading.Thread):
    """Changes to the key-kinds tables while they are snapshotted, mostly to the one being
    snapshotted (``log()`` says which): each step adds 1 to ``v`` of each of its rows (the
    chunk in flight then has all its rows changed in its window), deletes a random row, or
    inserts a random one."""

    def __init__(self, source, db, key_types, rng, log):
        super().__init__(daemon=True)
        self.conn, self.key_types, self.rng, self.log = source.admin(db), key_types, rng, log
        self.stop_flag, self.error, self.steps = threading.Event(), None, 0

    def run(self):
        rng, names, current = self.rng, list(self.key_types), None
        try:
            support.sql(self.conn, "SET time_zone = '+00:00'")
            with self.conn.cursor() as cur:
                while not self.stop_flag.is_set():
                    if self.steps % 10 == 0:
                        begun = re.findall(r"snapshot of \w+\.(k\d+c?) begins", self.log())
                        current = begun[-1] if begun else None
                    t = current if current and rng.random() < 0.8 else rng.choice(names)
                    r = rng.random()
                    if r < 0.5:
                        cur.execute(f"UPDATE {t} SET v = v + 1")
                    elif r < 0.75:
                        cur.execute(f"DELETE FROM {t} ORDER BY RAND() LIMIT 1")
                    else:
                        cur.execute(f"INSERT IGNORE INTO {t} VALUES (%s, %s, 0)",
                                    (_key_value(self.key_types[t], rng), rng.randint(0, 3)))
                    self.steps += 1
                    time.sleep(0.005)
        except Exception as exc:  # noqa: BLE001 - surfaced by the test through self.error
            self.error = exc


@pytest.mark.every_source
def test_chunks_follow_every_kind_of_key_under_changes_each_row_once_and_current(db, source,
                                                                                tmp_path):
    """Chunks of 2 rows follow keys of each type, alone and before another column, with the
    values that sort differently as text or bytes, while rows are changed, deleted and
    inserted: no row is read twice, and a compacting consumer ends with the tables' rows. A
    chunk's window finds a changed row by its key as the binlog gives it, beside the chunk's
    as read: were they to differ, the row read before its change would be published after
    it (stale), or a row deleted in the window would come back."""
    name, conn = db
    rng = support.rng(f"keys {source.name}")
    support.sql(conn, "SET time_zone = '+00:00'")
    key_types = {}
    for i, key_type in enumerate(KEY_TYPES + ([] if source.mysql else MARIADB_KEY_TYPES)):
        for composite in (False, True):
            t = f"k{i}{'c' if composite else ''}"
            key_types[t] = key_type
            support.sql(conn, f"CREATE TABLE {t} (k {key_type} NOT NULL, n INT NOT NULL, "
                              f"v INT NOT NULL, PRIMARY KEY ({'k, n' if composite else 'k'}))")
            with conn.cursor() as cur:
                for _ in range(24):
                    cur.execute(f"INSERT IGNORE INTO {t} VALUES (%s, %s, 0)",
                                (_key_value(key_type, rng), rng.randint(0, 3)))
    support.sql(conn, "CREATE TABLE fin (id INT PRIMARY KEY)")
    ns = support.unique("sk")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"], server=source,
                               start={"initial": "snapshot"}, snapshot={"chunk_rows": 2})
    topics = [f"{ns}.{name}.{t}" for t in key_types]
    with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
        load = _KeyLoad(source, name, key_types, random.Random(f"load {source.name}"), proc.output)
        support.wait_for(lambda: " begins: " in proc.output(), what="the snapshot")
        load.start()
        try:
            support.wait_for(lambda: proc.output().count(" done: ") >= len(key_types) + 1,
                             timeout=180, what="every table's snapshot")
        finally:
            load.stop_flag.set()
            load.join()
        assert load.error is None, load.error
        support.sql(conn, "INSERT INTO fin VALUES (1)")
        # fin is the binlog's last change: once it is read, all before it was committed.
        msgs = support.consume(topics + [f"{ns}.{name}.fin"], decode_ns=ns, timeout=180, idle=1,
                               until=lambda out: any(m["topic"].endswith(".fin") for m in out))
        assert proc.stop() == 0, proc.output()[-3000:]
    wrong = {}
    for t, key_type in key_types.items():
        mine = [m for m in msgs if m["topic"].endswith(f".{t}") and m["value"] is not None]
        reads = collections.Counter(m["raw_key"] for m in mine if m["value"]["op"] == "r")
        state = {}
        for m in mine:
            v = m["value"]
            if v["op"] == "d":
                state.pop(m["raw_key"], None)
            else:
                state[m["raw_key"]] = (v["after"]["n"], v["after"]["v"])
        want = sorted(support.sql(conn, f"SELECT n, v FROM {t}"))
        if max(reads.values(), default=0) > 1 or sorted(state.values()) != want:
            wrong[t] = (key_type, max(reads.values(), default=0), len(state), len(want))
    assert not wrong, support.seeded(str(wrong))
    # The load ran through the snapshots.
    assert load.steps > 200, load.steps
    assert sum(1 for m in msgs if m["value"] and m["value"]["op"] == "u") > 1000


@pytest.mark.every_source
def test_the_servers_sql_modes_that_change_values_read_are_left_out_of_a_snapshot(db, source,
                                                                                  tmp_path):
    # A server whose sql_mode pads CHAR values to their length in what SELECT gives (and, on
    # MariaDB, takes '' for NULL): the snapshot reads CHARs as the binlog holds them, and a
    # chunk after the key '' goes on to the next rows. (ANSI_QUOTES too: the streamer's SQL
    # quotes no string in double quotes.)
    name, conn = db
    modes = "PAD_CHAR_TO_FULL_LENGTH,ANSI_QUOTES" + ("" if source.mysql else ",EMPTY_STRING_IS_NULL")
    support.sql(conn, "CREATE TABLE pc (k VARCHAR(10) NOT NULL PRIMARY KEY, c CHAR(5))")
    f, p = support.master_pos(conn)
    support.sql(conn, "INSERT INTO pc VALUES ('', 'a'), ('b', ''), ('c', 'cc'), ('d', NULL)")
    ns = support.unique("pc")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.pc"], server=source,
                               snapshot={"chunk_rows": 1})
    was = support.sql(conn, "SELECT @@GLOBAL.sql_mode")[0][0]
    support.sql(conn, f"SET GLOBAL sql_mode = CONCAT(@@GLOBAL.sql_mode, ',{modes}')")
    try:
        msgs = stream_then_snapshot(cfg, str(tmp_path / "log"), (f, p), f"{name}.pc", ns, 4, 4)
    finally:
        support.sql(conn, f"SET GLOBAL sql_mode = '{was}'")
    want = [{"k": "", "c": "a"}, {"k": "b", "c": ""}, {"k": "c", "c": "cc"}, {"k": "d", "c": None}]
    for op in ("c", "r"):
        assert [m["value"]["after"] for m in msgs if m["value"]["op"] == op] == want, op


@pytest.mark.every_source
def test_a_change_not_yet_committed_is_not_read_by_a_snapshot_whatever_the_servers_isolation(
        db, source, tmp_path):
    # A server whose default isolation is READ UNCOMMITTED: a chunk's SELECT read a change a
    # session had not committed, and published it though it was rolled back after.
    name, conn = db
    support.sql(conn, "CREATE TABLE ru (k INT PRIMARY KEY, c VARCHAR(10))",
                "INSERT INTO ru VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    ns = support.unique("ru")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.ru"], server=source,
                               snapshot={"chunk_rows": 1})
    variable = "transaction_isolation" if source.mysql else "tx_isolation"
    was = support.sql(conn, f"SELECT @@GLOBAL.{variable}")[0][0]
    writer = source.admin(name)
    support.sql(conn, "SET GLOBAL TRANSACTION ISOLATION LEVEL READ UNCOMMITTED")
    try:
        with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
            support.wait_for(lambda: "reading the binlog" in proc.output(), what="the stream")
            support.sql(writer, "BEGIN", "UPDATE ru SET c = 'never' WHERE k = 2")
            rc, _, err = snapshot_cli(cfg, "--tables", f"{name}.ru")
            assert rc == 0, err
            support.wait_for(lambda: " done: " in proc.output(), what="the snapshot")
            support.sql(writer, "ROLLBACK")
            support.sql(conn, "INSERT INTO ru VALUES (4, 'd')")
            msgs = support.consume([f"{ns}.{name}.ru"], expect=4, decode_ns=ns)
            assert proc.stop() == 0, proc.output()[-3000:]
    finally:
        support.sql(conn, f"SET GLOBAL {variable} = '{was}'")
    assert [(m["value"]["op"], m["value"]["after"]["c"]) for m in msgs] == [
        ("r", "a"), ("r", "b"), ("r", "c"), ("c", "d")]


@pytest.mark.every_source
def test_a_connection_idle_past_the_servers_wait_timeout_does_not_restart_the_stream(
        db, source, tmp_path):
    # A server that closes idle sessions after 2 s: the streamer's own connections (a
    # snapshot's, between two requests; on MariaDB the table definitions', between two new
    # tables) keep theirs, where their next use lost the connection and restarted the stream.
    name, conn = db
    ns = support.unique("wt")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"], server=source)
    was = support.sql(conn, "SELECT @@GLOBAL.wait_timeout")[0][0]
    kind = "BINARY(16)" if source.mysql else "UUID"
    support.sql(conn, "SET GLOBAL wait_timeout = 2")
    try:
        with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
            support.wait_for(lambda: "reading the binlog" in proc.output(), what="the stream")
            for table in ("a", "b"):
                support.sql(conn, f"CREATE TABLE {table} (id INT PRIMARY KEY, u {kind})",
                            f"INSERT INTO {table} VALUES (1, NULL)")
                rc, _, err = snapshot_cli(cfg, "--tables", f"{name}.{table}")
                assert rc == 0, err
                support.wait_for(lambda: proc.output().count(" done: ") == 1 + (table == "b"),
                                 what=f"the snapshot of {table}")
                time.sleep(4)
            support.sql(conn, "INSERT INTO a VALUES (2, NULL)")
            msgs = support.consume([f"{ns}.{name}.a", f"{ns}.{name}.b"], expect=5, decode_ns=ns)
            assert proc.stop() == 0, proc.output()[-3000:]
    finally:
        support.sql(conn, f"SET GLOBAL wait_timeout = {int(was)}")
    assert sorted((m["topic"][-1], m["value"]["op"], m["value"]["after"]["id"]) for m in msgs) == [
        ("a", "c", 1), ("a", "c", 2), ("a", "r", 1), ("b", "c", 1), ("b", "r", 1)]
    assert "connection was lost" not in proc.output(), proc.output()[-3000:]


@pytest.mark.every_source
def test_the_servers_settings_for_applications_sessions_are_lifted_from_the_streamers(
        db, source, tmp_path):
    # A server whose global settings cut every SELECT to one row, refuse a read that examines
    # more, and stop a statement after a millisecond: the setup checks, the table definitions
    # and the chunks read all they ask for, where the stream never started (MariaDB) or restarted
    # its connection over and over, its table filters unread (MySQL). And whose init_connect
    # turns autocommit off: the snapshot request is committed, where it was rolled back unseen.
    name, conn = db
    support.sql(conn, "CREATE TABLE lim (k INT PRIMARY KEY, a INT, b VARCHAR(9), c INT, KEY (a))")
    f, p = support.master_pos(conn)
    support.sql(conn, "INSERT INTO lim VALUES " + ",".join(
        f"({i}, {i % 3}, 'v{i}', {i * 7})" for i in range(1, 9)))
    ns = support.unique("lim")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.lim"], server=source)
    limits = {"sql_select_limit": "1", "max_join_size": "1"}
    limits.update({"max_execution_time": "1"} if source.mysql  # milliseconds
                  else {"max_statement_time": "0.001"})  # seconds
    limits["init_connect"] = "'SET autocommit = 0'"  # run for users without SUPER only
    was = {v: support.sql(conn, f"SELECT @@GLOBAL.{v}")[0][0] for v in limits}
    support.sql(conn, "SET GLOBAL " + ", ".join(f"{v} = {n}" for v, n in limits.items()))
    try:
        msgs = stream_then_snapshot(cfg, str(tmp_path / "log"), (f, p), f"{name}.lim", ns, 8, 8)
    finally:
        support.sql(conn, "SET GLOBAL " + ", ".join(f"{v} = %s" for v in was),
                    args=tuple(was.values()))
    want = [{"k": i, "a": i % 3, "b": f"v{i}", "c": i * 7} for i in range(1, 9)]
    for op in ("c", "r"):
        assert sorted((m["value"]["after"] for m in msgs if m["value"]["op"] == op),
                      key=lambda r: r["k"]) == want, op
    with open(tmp_path / "log") as log:
        # The server's settings' own: not Kafka's (streamer.kafka.librdkafka), whose transient
        # metadata lines have nothing to do with them.
        warned = [line for line in log if " WARNING " in line and "OVERRIDES" not in line
                  and " WARNING streamer.kafka." not in line]
    assert not warned, warned


# The matrix's servers other than the default, for tests of a database of their own on each.
NEWER = [pytest.param(n, marks=pytest.mark.on_source(n)) for n in ("mariadb-11.4", "mysql-8.0")]


@contextlib.contextmanager
def database_on(server, prefix):
    """A database of its own on ``server`` (a name of the matrix), dropped after: (the source,
    the database's name, an admin connection in it)."""
    source = support.SOURCES[server]
    name = support.unique(prefix)
    conn = source.admin()
    support.sql(conn, f"CREATE DATABASE {name}")
    try:
        conn.select_db(name)
        yield source, name, conn
    finally:
        support.sql(conn, f"DROP DATABASE {name}")


@pytest.mark.parametrize("server", NEWER)
def test_a_table_locked_under_its_snapshot_holds_neither_the_stream_nor_its_rows(tmp_path,
                                                                                server):
    # LOCK TABLES ... WRITE (by hand, or a maintenance tool's) made the chunk's SELECT wait for
    # lock_wait_timeout, a year by default, and the whole stream with it. Given a shorter one,
    # the SELECT failed (1205) and the table's snapshot ended without its remaining rows. Now
    # the chunk waits a second at most, the stream goes on, and the chunk is read again later.
    with database_on(server, "lk") as (source, name, conn):
        support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))",
                    "CREATE TABLE u (id INT PRIMARY KEY)",
                    f"INSERT INTO t SELECT seq, CONCAT('v', seq) FROM {source.seq(3000)}")
        ns = support.unique("lk")
        cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.t", f"{name}.u"],
                                   server=source, start={"initial": "snapshot"},
                                   snapshot={"chunk_rows": 500})
        # Closed, and its lock gone, before the database is dropped, whatever happens.
        with contextlib.closing(source.admin(name)) as locker:
            support.sql(locker, "LOCK TABLES t WRITE")
            with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
                failed = "the chunk's SELECT failed (1205: "
                support.wait_for(lambda: proc.output().count(failed) >= 2, timeout=90,
                                 what="the locked chunk's SELECT to fail twice")
                # The stream goes on while the table is locked: another table's change comes.
                support.sql(conn, "INSERT INTO u VALUES (1)")
                assert len(support.consume([f"{ns}.{name}.u"], expect=1, decode_ns=ns)) == 1
                support.sql(locker, "UNLOCK TABLES")
                msgs = support.consume([f"{ns}.{name}.t"], expect=3000, decode_ns=ns, timeout=120)
                support.wait_for(lambda: f"snapshot of {name}.t done: 3000 rows" in proc.output(),
                                 what="the snapshot's end")
                assert proc.stop() == 0, proc.output()[-3000:]
        out = proc.output()
    rows = sorted((m["key"]["id"], m["value"]["after"]["v"]) for m in msgs)
    assert rows == [(i, f"v{i}") for i in range(1, 3001)]  # each once
    assert {m["value"]["op"] for m in msgs} == {"r"}
    assert "the table or the server is locked: it waits for the lock to go" in out
    assert "without its remaining rows" not in out


def _kill_a_chunk_select(conn, name, kind):
    """``KILL <kind>`` the thread that runs a chunk's SELECT of ``name``.t: True once done."""
    for pid, info in support.sql(conn, "SELECT ID, INFO FROM information_schema.PROCESSLIST "
                                       "WHERE INFO LIKE %s AND ID <> CONNECTION_ID()",
                                 args=(f"%{name}%",)):
        if f"FROM `{name}`.`t`" in info and "ORDER BY" in info:  # not the start's own checks
            support.sql(conn, f"KILL {kind} {pid}")
            return True
    return False


@pytest.mark.parametrize("kind", ["QUERY", "CONNECTION"])
@pytest.mark.parametrize("server", NEWER)
def test_a_chunk_select_killed_by_a_dba_or_pt_kill_is_read_again(tmp_path, server, kind):
    # pt-kill, or a DBA, ends long queries with KILL QUERY or KILL (CONNECTION, pt-kill's
    # default): a chunk's SELECT of a big table is one. Its rows are read again and come once.
    # A killed connection crashed the streamer (AttributeError, exit 1): the stream's restart
    # gave the chunk up, and letting its result go read from the closed connection.
    rows = 200000
    with database_on(server, "kl") as (source, name, conn):
        # Rows of 200 bytes: a chunk's rows (8 MB) are more than the socket's buffers hold, so
        # its SELECT runs until the streamer has read most of them, and the KILL meets it.
        support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(200))",
                    f"INSERT INTO t SELECT seq, CONCAT(REPEAT('v', 190), seq) "
                    f"FROM {source.seq(rows)}")
        ns = support.unique("kl")
        cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.t"],
                                   server=source, start={"initial": "snapshot"},
                                   snapshot={"chunk_rows": 50000})
        with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
            support.wait_for(lambda: _kill_a_chunk_select(conn, name, kind), timeout=60,
                             interval=0.01, what="a chunk's SELECT to kill")
            msgs = support.consume([f"{ns}.{name}.t"], expect=rows, decode_ns=ns, timeout=120)
            support.wait_for(lambda: f"snapshot of {name}.t done: {rows} rows" in proc.output(),
                             what="the snapshot's end")
            assert proc.stop() == 0, proc.output()[-3000:]
        out = proc.output()
    got = sorted(m["key"]["id"] for m in msgs)
    assert got == list(range(1, rows + 1))  # each once
    assert "without its remaining rows" not in out and "Traceback" not in out, out[-3000:]
    if kind == "QUERY":  # the chunk alone is read again
        assert "the chunk's SELECT was interrupted (KILL QUERY" in out, out[-3000:]
    else:  # the stream restarts from its checkpoint, and the chunk is read on a new connection
        assert "a MySQL connection was lost (" in out, out[-3000:]


@pytest.mark.parametrize("server", NEWER)
def test_a_chunk_past_its_timeout_ends_its_snapshot_saying_so_and_the_stream_goes_on(tmp_path,
                                                                                     server):
    # snapshot.chunk_timeout_s stops a chunk's SELECT that runs longer: MariaDB says 1969, MySQL
    # 3024. MySQL's was taken for a client code (>= 2000), a lost connection: the stream
    # restarted, read the chunk again and met the timeout again, for ever, and never said why.
    with database_on(server, "to") as (source, name, conn):
        support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))",
                    "CREATE TABLE u (id INT PRIMARY KEY)",
                    f"INSERT INTO t SELECT seq, CONCAT('v', seq) FROM {source.seq(300000)}")
        ns = support.unique("to")
        cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.t", f"{name}.u"],
                                   server=source, snapshot={"chunk_timeout_s": 0.01})
        with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
            support.wait_for(lambda: "reading the binlog" in proc.output(), what="the stream")
            # No index serves the condition: the SELECT reads the whole table for its rows.
            rc, _, err = snapshot_cli(cfg, "--tables", f"{name}.t", "--where", "CRC32(v) = 7")
            assert rc == 0, err
            support.wait_for(lambda: "without its remaining rows" in proc.output(),
                             what="the snapshot's end")
            support.sql(conn, "INSERT INTO u VALUES (1)")
            assert len(support.consume([f"{ns}.{name}.u"], expect=1, decode_ns=ns)) == 1
            assert proc.stop() == 0, proc.output()[-3000:]
        out = proc.output()
    assert f"snapshot of {name}.t ends without its remaining rows: the chunk's SELECT ran " \
           f"longer than snapshot.chunk_timeout_s (" in out, out[-3000:]
    assert "its condition 'CRC32(v) = 7' may need an index" in out, out[-3000:]
    assert "connection was lost" not in out, out[-3000:]


@pytest.mark.parametrize("server", NEWER)
def test_an_online_schema_changes_swap_mid_snapshot_leaves_each_row_once_and_current(tmp_path,
                                                                                     server):
    # pt-online-schema-change and gh-ost copy a table aside with its new columns, then swap it
    # in (RENAME TABLE t TO _t_old, _t_new TO t) while a snapshot of t may be reading it.
    rows = 60000
    with database_on(server, "osc") as (source, name, conn):
        support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))",
                    f"INSERT INTO t SELECT seq, CONCAT('v', seq) FROM {source.seq(rows)}",
                    "CREATE TABLE _t_new LIKE t", "ALTER TABLE _t_new ADD COLUMN w INT NOT NULL "
                    "DEFAULT 7", "INSERT INTO _t_new (id, v) SELECT id, v FROM t")
        ns = support.unique("osc")
        topic = f"{ns}.{name}.t"
        cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.t"], server=source,
                                   snapshot={"chunk_rows": 500})
        with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
            support.wait_for(lambda: "reading the binlog" in proc.output(), what="the stream")
            rc, _, err = snapshot_cli(cfg, "--tables", f"{name}.t")
            assert rc == 0, err
            support.wait_for(lambda: support.end_offsets(topic) >= 2000, interval=0.02,
                             what="the snapshot's first chunks")
            support.sql(conn, "RENAME TABLE t TO _t_old, _t_new TO t")
            swapped_at = support.end_offsets(topic)
            support.sql(conn, "UPDATE t SET v = 'after' WHERE id IN (1, %d)" % rows)
            msgs = support.consume([topic], expect=rows + 2, decode_ns=ns, timeout=120)
            assert proc.stop() == 0, proc.output()[-3000:]
        out = proc.output()
        assert swapped_at < rows, "the snapshot was done before the swap: the test saw nothing"
        reads = [m["value"]["after"]["id"] for m in msgs if m["value"]["op"] == "r"]
        assert sorted(reads) == list(range(1, rows + 1)), (len(reads), len(set(reads)))
        # The swap itself is no row change: rows read before it keep the old table's columns (the
        # INFO line says the copy was kept equal), those read after it have the new one.
        got = {k: (r["v"], r.get("w")) for k, r in materialize(msgs).items()}
        want = {k: (r["v"], r["w"]) for k, r in table_state(conn, "t", ["id"]).items()}
        assert {k: v for k, v in got.items() if v[1] is not None} == \
            {k: v for k, v in want.items() if k in got and got[k][1] is not None}
        assert {k: v[0] for k, v in got.items()} == {k: v[0] for k, v in want.items()}
        # Read before it: those published by then, and at most the chunk (500 rows) read and
        # waiting for its high watermark, which the binlog has before the swap.
        assert sum(1 for v in got.values() if v[1] is None) <= swapped_at + 500 < rows
    assert "online schema change" in out, out[-3000:]
    assert "Traceback" not in out and "without its remaining rows" not in out, out[-3000:]
