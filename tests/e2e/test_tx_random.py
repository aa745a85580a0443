"""Random transactions on every server: transactional and non-transactional tables (InnoDB,
MyISAM, MEMORY) changed by single and multi-row statements, multi-table UPDATEs and DELETEs,
INSERT ... SELECT, REPLACE, INSERT IGNORE and ON DUPLICATE KEY UPDATE, statements that fail
half-way, in transactions that nest savepoints, roll back to them, release them, and end in
COMMIT or ROLLBACK; two sessions, their statements interleaved.

No model of the server is needed to check the topics: each row's messages must chain (a
change's before image is the previous change's after image, the first change's before is
nothing), and the last after image must be what SELECT shows at the end. A rolled-back row
published, a change lost or one published twice breaks a chain or the end.

The same workload also runs while a snapshot of the tables is taken (chunks of 40 rows): each
row's snapshot read must show it as the changes published before it left it; and while the
streamer is SIGKILLed again and again, catching up in batches of 10 messages, so that it
resumes inside transactions, their rows taken back read whole again."""
import re
import threading

import pymysql
import pytest

from tests import support

TABLES = {"i1": "InnoDB", "i2": "InnoDB", "m1": "MyISAM", "h1": "MEMORY"}
IDS = 30  # rows per session: session k changes rows k * ids + 1 .. (k + 1) * ids
END = 10 ** 6  # the id of each table's last row


class _Session:
    """Random transactions on one connection, on rows of its own (no lock waits between the
    sessions, whose statements interleave); ``seen`` counts what the server did."""

    def __init__(self, conn, rng, k, seen, ids=IDS):
        self.conn, self.rng, self.seen = conn, rng, seen
        self.first, self.last = k * ids + 1, (k + 1) * ids
        # No gap locks: the other session's rows are never waited for.
        support.sql(conn, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
                    "SET SESSION innodb_lock_wait_timeout = 1")

    def steps(self):
        """A generator: each step one statement."""
        rng = self.rng
        while True:
            if rng.random() < 0.3:
                yield self.statement()
                continue
            yield self._run("BEGIN")
            savepoints = []
            for _ in range(rng.randint(1, 8)):
                r = rng.random()
                if r < 0.15:
                    savepoints.append(f"s{len(savepoints)}")
                    yield self._run(f"SAVEPOINT {savepoints[-1]}")
                elif r < 0.25 and savepoints:
                    at = rng.randrange(len(savepoints))
                    self.seen["savepoints rolled back"] += 1
                    yield self._run(f"ROLLBACK TO SAVEPOINT {savepoints[at]}")
                    del savepoints[at + 1:]
                elif r < 0.3 and savepoints:
                    yield self._run(f"RELEASE SAVEPOINT {savepoints.pop()}")
                else:
                    yield self.statement()
            end = "COMMIT" if rng.random() < 0.7 else "ROLLBACK"
            self.seen["committed" if end == "COMMIT" else "rolled back"] += 1
            yield self._run(end)

    def statement(self):
        rng = self.rng
        t, u = rng.sample(list(TABLES), 2)
        lo = rng.randint(self.first, self.last)
        hi = min(self.last, lo + rng.randint(0, 6))
        rows = ", ".join(self._row(rng.randint(self.first, self.last))
                         for _ in range(rng.randint(1, 4)))
        self._run(rng.choice([
            f"INSERT INTO {t} VALUES {rows}",
            f"INSERT IGNORE INTO {t} VALUES {rows}",
            f"REPLACE INTO {t} VALUES {rows}",
            f"INSERT INTO {t} VALUES {rows} ON DUPLICATE KEY UPDATE v = v + 1000, s = NULL",
            f"UPDATE {t} SET v = {self._v()}, s = {self._s()} WHERE id BETWEEN {lo} AND {hi}",
            f"UPDATE {t} SET v = v + 1 WHERE id BETWEEN {lo} AND {hi} ORDER BY id DESC",
            f"UPDATE {t} JOIN {u} ON {t}.id = {u}.id SET {t}.v = {self._v()}, "
            f"{u}.s = {self._s()} WHERE {t}.id BETWEEN {lo} AND {hi}",
            f"DELETE FROM {t} WHERE id BETWEEN {lo} AND {hi}",
            f"DELETE {t}, {u} FROM {t} JOIN {u} ON {t}.id = {u}.id WHERE {t}.id = {lo}",
            f"INSERT INTO {t} SELECT id, v + 7, s FROM {u} WHERE id BETWEEN {lo} AND {hi} "
            f"ON DUPLICATE KEY UPDATE s = 'copied'",
        ]))

    def _v(self):
        self.seen["values"] += 1
        return self.seen["values"]

    def _s(self):
        rng = self.rng
        return "NULL" if rng.random() < 0.1 else "'%s'" % "".join(
            rng.choice("aé😀z") for _ in range(rng.randint(0, 12)))

    def _row(self, row_id):
        return f"({row_id}, {self._v()}, {self._s()})"

    def _run(self, statement):
        try:
            support.sql(self.conn, statement)
        except pymysql.err.MySQLError as e:
            # A duplicate key half-way through a multi-row statement (a MyISAM table keeps the
            # rows before it), a lock the other session holds (a join reads its rows too), or,
            # on MySQL with GTIDs, a non-transactional table in a transaction: the statement
            # fails and the transaction goes on.
            if e.args[0] not in (1062, 1205, 1785):
                raise
            self.seen["lock waits" if e.args[0] == 1205 else "failed statements"] += 1


def _run_workload(conns, rng, steps, stop=None, ids=IDS):
    """``steps`` statements of the sessions, interleaved at random, or as many as come before
    ``stop`` is set; every transaction ended."""
    seen = dict.fromkeys(["committed", "rolled back", "savepoints rolled back",
                          "failed statements", "lock waits", "values"], 0)
    sessions = [_Session(conn, rng, k, seen, ids).steps() for k, conn in enumerate(conns)]
    for _ in range(steps):
        if stop is not None and stop.is_set():
            break
        next(rng.choice(sessions))
    for conn in conns:
        support.sql(conn, "COMMIT")
    return seen


def _tables(conn):
    out = {}
    for name in TABLES:
        for row in support.sql(conn, f"SELECT id, v, s FROM {name}"):
            out[(name, row[0])] = {"id": row[0], "v": row[1], "s": row[2]}
    return out


def _ended(msgs):
    """Each table's last row has arrived."""
    return len({m["topic"] for m in msgs if m["value"] and m["key"]["id"] == END}) == len(TABLES)


UNKNOWN = object()


def _broken_chains(msgs, final, known=True):
    """(table, id, why) for each row whose messages don't chain up to what SELECT shows.

    ``known``: every row began absent, else a row's first message starts its chain. A
    snapshot's read (op r) must show the row as the changes before it left it."""
    chains = {}
    for m in msgs:
        chains.setdefault((m["topic"].rsplit(".", 1)[1], m["key"]["id"]), []).append(m["value"])
    broken = []
    for key in set(chains) | set(final):
        state = None if known else UNKNOWN
        for i, value in enumerate(chains.get(key, [])):
            was = value["after"] if value["op"] == "r" else value["before"]
            if was != state and state is not UNKNOWN:
                broken.append(key + (f"change {i} ({value['op']}) found {was}, not {state}",))
            state = value["after"]
        if state is UNKNOWN:  # never published
            state = None
        if state != final.get(key):
            broken.append(key + (f"ends at {state}, SELECT shows {final.get(key)}",))
    return broken


def _create(conn, rows):
    for table, engine in TABLES.items():
        support.sql(conn, f"CREATE TABLE {table} (id INT PRIMARY KEY, v INT NOT NULL, "
                          f"s VARCHAR(20) NULL) ENGINE={engine}")
        if rows:
            support.sql(conn, f"INSERT INTO {table} VALUES " + ", ".join(
                f"({i}, {-i}, 'r')" for i in range(1, rows + 1)))


def _end_rows(conn, final):
    """A last row in each topic: everything before it has been read."""
    for table in TABLES:
        support.sql(conn, f"INSERT INTO {table} VALUES ({END}, 0, 'end')")
        final[(table, END)] = {"id": END, "v": 0, "s": "end"}


def _to_the_end(proc, ns, name):
    """The row changes published up to each table's last row (tombstones aside), after which
    ``proc`` stops cleanly; and its log, which must show no batch aborted to take rows back:
    MariaDB's groups with rows taken back are read whole first (stages.savepoints)."""
    msgs = [m for m in support.consume([f"{ns}.{name}.{t}" for t in TABLES], decode_ns=ns,
                                       until=_ended, timeout=240)
            if m["value"] is not None]
    assert proc.stop() == 0, proc.output()[-3000:]
    log = proc.output()
    assert "taking back" not in log and "aborted" not in log, log[-3000:]
    return msgs


@pytest.mark.every_source
def test_random_transactions_savepoints_and_engines_each_row_chains_to_what_select_shows(
        db, source, tmp_path):
    name, conn = db
    _create(conn, 0)
    f, p = support.master_pos(conn)
    other = source.admin(name)
    try:
        seen = _run_workload([conn, other], support.rng(f"tx {source.name}"), 1000)
    finally:
        other.close()
    final = _tables(conn)
    _end_rows(conn, final)
    ns = support.unique("tx")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"], server=source)
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", f,
                                 "--start-pos", str(p)) as proc:
        msgs = _to_the_end(proc, ns, name)  # (without the look-ahead, the chains break)
    broken = _broken_chains(msgs, final)
    assert not broken, support.seeded(f"{len(msgs)} messages, {seen}: {sorted(broken)[:5]}")
    assert min(n for what, n in seen.items() if what != "lock waits") > 5, seen


@pytest.mark.every_source
def test_a_snapshot_under_random_transactions_reads_each_row_as_its_changes_left_it(
        db, source, tmp_path):
    name, conn = db
    rows = 600
    _create(conn, 2 * rows)
    ns = support.unique("txs")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"], server=source,
                               start={"initial": "snapshot"}, snapshot={"chunk_rows": 40})
    sessions, stop, seen = [source.admin(name), source.admin(name)], threading.Event(), {}
    load = threading.Thread(target=lambda: seen.update(_run_workload(
        sessions, support.rng(f"txs {source.name}"), 10 ** 6, stop, rows)))
    with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
        load.start()
        try:
            support.wait_for(lambda: " done: " in proc.output() or proc.proc.poll() is not None,
                             timeout=240, what="the snapshot to finish")
        finally:
            stop.set()
            load.join()
        final = _tables(conn)
        _end_rows(conn, final)
        msgs = _to_the_end(proc, ns, name)
    for session in sessions:
        session.close()
    broken = _broken_chains(msgs, final, known=False)
    assert not broken, support.seeded(f"{len(msgs)} messages, {seen}: {sorted(broken)[:5]}")
    reads = sum(1 for m in msgs if m["value"]["op"] == "r")
    assert reads > len(TABLES) * rows and seen["committed"] > 20, (reads, seen)


@pytest.mark.every_source
def test_sigkills_under_random_transactions_lose_and_double_nothing(db, source, tmp_path):
    name, conn = db
    _create(conn, 0)
    f, p = support.master_pos(conn)
    rng = support.rng(f"txk {source.name}")
    sessions, stop, seen = [source.admin(name), source.admin(name)], threading.Event(), {}
    _run_workload(sessions, rng, 1000)  # a backlog: each run catches up, cutting batches
    load = threading.Thread(target=lambda: seen.update(_run_workload(
        sessions, support.rng(f"txk load {source.name}"), 10 ** 6, stop)))
    ns = support.unique("txk")
    # Batches of 10: a full one commits inside a transaction, and a kill after it resumes there.
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"], server=source,
                               batch={"max_messages": 10, "linger_ms": 20})
    positions, resumed, log = f"{ns}.__positions", [], str(tmp_path / "log")
    load.start()
    try:
        # Four runs, and more (ten at most) until one resumed inside a transaction.
        while len(resumed) < 4 or (not any(resumed) and len(resumed) < 10):
            out = support.killed_after_a_commit(cfg, log, positions, (f, p),
                                                rng.uniform(0.0, 0.5))
            start = re.search(r"reading the binlog from \S+( \+\d+ rows)?", out)
            resumed.append(start and start.group(1))
    finally:
        stop.set()
        load.join()
    for session in sessions:
        session.close()
    final = _tables(conn)
    _end_rows(conn, final)
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"], server=source)
    with support.StreamerProcess(cfg, log) as proc:  # the rest, at full pace
        msgs = _to_the_end(proc, ns, name)  # (the runs' log: none of them aborted a batch)
    broken = _broken_chains(msgs, final)
    assert not broken, support.seeded(
        f"{len(msgs)} messages, {seen}, resumed {resumed}: {sorted(broken)[:5]}")
    assert any(resumed), f"no run resumed inside a transaction (+N rows): {resumed}"
