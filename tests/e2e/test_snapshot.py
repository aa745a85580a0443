"""Snapshots against the real servers: exactly once under load and SIGKILLs, on demand, every type,
an ALTER in the middle, and one clear error for each bad request."""
import collections
import os
import random
import signal
import subprocess
import sys
import threading
import time


from tests import support

ROWS = int(os.environ.get("STREAMER_SNAPSHOT_TEST_ROWS", "200000"))


def snapshot_cli(cfg, *args, timeout=60):
    """`streamer snapshot -c cfg ...`: (exit code, stdout, stderr)."""
    done = subprocess.run([sys.executable, "-m", "streamer.cli", "snapshot", "-c", cfg, *args],
                          cwd=support.ROOT, capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout, done.stderr


def materialize(msgs):
    """The state a compacting consumer ends with: the last c/u/r per key; d removes the key."""
    state = {}
    for m in sorted(msgs, key=lambda m: (m["partition"], m["offset"])):
        v = m["value"]
        key = tuple(sorted(m["key"].items()))
        if v["op"] == "d":
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

    def __init__(self, db):
        super().__init__(daemon=True)
        self.conn = support.admin(db)
        self.rng = random.Random(3)
        self.stop_flag = threading.Event()
        self.error = None
        self.statements = 0
        self.next_id = ROWS + 10

    def touched(self):
        return self.rng.randrange(1, ROWS // 10 + 200) * 10

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


def test_snapshot_under_load_and_sigkills_converges_to_the_table_exactly_once(db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id BIGINT PRIMARY KEY, k INT NOT NULL, v VARCHAR(64), "
                      "d DATETIME(6), n DECIMAL(12,2))",
                f"INSERT INTO t SELECT seq, seq % 1000, CONCAT('v', seq), "
                f"'2020-01-01' + INTERVAL seq SECOND, seq / 100 FROM seq_1_to_{ROWS}")
    ns = support.unique("sn")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.t"],
                               start={"initial": "snapshot"}, snapshot={"chunk_rows": 200},
                               batch={"max_messages": 2000, "linger_ms": 20})
    load = Load(name)
    load.start()
    rng = random.Random(5)
    kills = 0
    try:
        # SIGKILL at random moments (some during start-up) until 12 landed mid-snapshot, then
        # let the snapshot finish.
        for run in range(12):
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

    reads = collections.Counter(m["key"]["id"] for m in msgs if m["value"]["op"] == "r")
    assert max(reads.values()) == 1, [k for k, n in reads.items() if n > 1][:10]
    untouched = [i for i in range(1, ROWS + 1) if i % 10]
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
