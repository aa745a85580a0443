"""Random DDL between random row changes, on every server: columns added (first, after another,
last), dropped and added again with another type, widened and moved, renamed, between inserts,
updates and deletes. Each message's before and after images are what SELECT showed of the row
just before and just after its change, whatever the table's shape was then; and the same while
a snapshot runs and the streamer is killed again and again."""
import collections
import datetime
import decimal
import signal
import threading
import time

import pytest

from tests import support

# A column type, and what a widening ALTER makes of it.
TYPES = {"INT": "BIGINT", "SMALLINT": "INT", "TINYINT UNSIGNED": "SMALLINT",
         "INT NOT NULL DEFAULT 42": "BIGINT NULL", "VARCHAR(20)": "VARCHAR(200)",
         "VARCHAR(30) CHARACTER SET latin1": "VARCHAR(30) CHARACTER SET utf8mb4",
         "TEXT": "MEDIUMTEXT", "VARBINARY(8)": "VARBINARY(64)", "ENUM('p','q')": "ENUM('p','q','r')",
         "DECIMAL(10,2)": "DECIMAL(20,4)", "DATE": "DATETIME", "DATETIME(3)": "DATETIME(6)",
         "TIMESTAMP(6) NULL": None, "DOUBLE": None}


def _value(sql_type, rng):
    if "latin1" in sql_type:
        return "".join(rng.choice("aéxü ") for _ in range(rng.randint(0, 20))).strip()
    kind = sql_type.split("(")[0].split(" ")[0]
    moment = datetime.datetime(2024, 1, 1) + datetime.timedelta(seconds=rng.randint(0, 10 ** 8))
    return {
        "INT": lambda: rng.randint(-30000, 30000), "BIGINT": lambda: rng.randint(-2 ** 63, 2 ** 63 - 1),
        "SMALLINT": lambda: rng.randint(-30000, 30000), "TINYINT": lambda: rng.randint(0, 255),
        "VARCHAR": lambda: "".join(rng.choice("aé😀x ") for _ in range(rng.randint(0, 20))).strip(),
        "VARBINARY": lambda: rng.randbytes(rng.randint(0, 8)), "ENUM": lambda: rng.choice("pq"),
        "DECIMAL": lambda: decimal.Decimal(rng.randint(-10 ** 9, 10 ** 9)).scaleb(-2),
        "DATE": lambda: moment.date(), "DOUBLE": lambda: rng.uniform(-1e6, 1e6),
        "DATETIME": lambda: moment.replace(microsecond=rng.randrange(1000) * 1000),
        "TIMESTAMP": lambda: moment.replace(microsecond=rng.randrange(10 ** 6)),
    }.get(kind, lambda: "".join(rng.choice("aé😀x") for _ in range(rng.randint(0, 40))))()


class _Table:
    """The table ``t`` as this test changed it: its columns in order, their types, and each row
    change's (before, after), as SELECT showed the row around it."""

    def __init__(self, conn, rng, rows=0):
        self.conn, self.rng = conn, rng
        self.types = {"a": "INT", "b": "VARCHAR(20)"}
        self.order = ["a", "b"]
        self.changes = {i: [] for i in range(1, rows + 1)}  # rows there before (no changes)
        self.ddl = []
        self.names = 0
        support.sql(conn, "SET time_zone = '+00:00'",
                    "CREATE TABLE t (id INT PRIMARY KEY, a INT, b VARCHAR(20))")
        for first in range(1, rows + 1, 500):
            support.sql(conn, "INSERT INTO t VALUES " + ", ".join(
                f"({i}, {rng.randint(-9, 9)}, 'b{i}')" for i in range(first, min(rows, first + 499) + 1)))

    def step(self):
        rng, r = self.rng, self.rng.random()
        if r < 0.12 and len(self.order) < 12:
            self._add(self._name(), rng.choice(list(TYPES)), self._where())
        elif r < 0.18 and len(self.order) > 1:
            gone = rng.choice(self.order)
            self._alter(f"DROP COLUMN {gone}")
            self.order.remove(gone)
            if rng.random() < 0.5:  # the same name again, of another type
                self._add(gone, rng.choice(list(TYPES)), "")
        elif r < 0.26:
            col = rng.choice(self.order)
            if TYPES.get(self.types[col]):
                self.order.remove(col)
                where = self._where()
                self._alter(f"MODIFY COLUMN {col} {TYPES[self.types[col]]}{where}")
                self._place(col, TYPES[self.types[col]], where)
        elif r < 0.32:
            col, new = rng.choice(self.order), self._name()
            self._alter(f"RENAME COLUMN {col} TO {new}")
            self.order[self.order.index(col)] = new
            self.types[new] = self.types.pop(col)
        else:
            self._change_a_row()

    def _name(self):
        self.names += 1
        return f"c{self.names}"

    def _where(self):
        return self.rng.choice(["", " FIRST", f" AFTER {self.rng.choice(['id'] + self.order)}"])

    def _alter(self, change):
        support.sql(self.conn, f"ALTER TABLE t {change}")
        self.ddl.append(change)
        self.altered()

    def altered(self):
        """After each DDL statement (a hook)."""

    def changed(self, row, before, after):
        """Each row change, as SELECT showed the row just before and just after it."""
        self.changes.setdefault(row, []).append((before, after))

    def _add(self, col, sql_type, where):
        self._alter(f"ADD COLUMN {col} {sql_type}{where}")
        self._place(col, sql_type, where)

    def _place(self, col, sql_type, where):
        after = where.split()[-1] if where.startswith(" AFTER") else None
        at = (0 if where == " FIRST" or after == "id" else
              self.order.index(after) + 1 if after else len(self.order))
        self.order.insert(at, col)
        self.types[col] = sql_type

    def _change_a_row(self):
        rng, ids = self.rng, [i for i, c in self.changes.items() if not c or c[-1][1] is not None]
        if rng.random() < 0.5 or not ids:
            row = max(self.changes, default=0) + 1
            cols = [c for c in self.order if rng.random() < 0.8]
            statement = (f"INSERT INTO t (id{''.join(', ' + c for c in cols)}) "
                         f"VALUES (%s{', %s' * len(cols)})")
            args = [row] + [_value(self.types[c], rng) for c in cols]
        elif rng.random() < 0.8:
            row, cols = rng.choice(ids), [c for c in self.order if rng.random() < 0.5]
            cols = cols or self.order[:1]
            statement = f"UPDATE t SET {', '.join(c + ' = %s' for c in cols)} WHERE id = %s"
            args = [None if rng.random() < 0.1 and "NOT NULL" not in self.types[c]
                    else _value(self.types[c], rng) for c in cols] + [row]
        else:
            row = rng.choice(ids)
            statement, args = "DELETE FROM t WHERE id = %s", [row]
        before = self._select(row)
        with self.conn.cursor() as cur:
            if cur.execute(statement, args):  # a row changed: the binlog has it
                self.changed(row, before, self._select(row))

    def _select(self, row):
        with self.conn.cursor() as cur:
            cur.execute("SELECT * FROM t WHERE id = %s", (row,))
            found = cur.fetchone()
            return dict(zip([d[0] for d in cur.description], found)) if found else None


def _as_selected(image):
    """A decoded image in SELECT's terms: a TIMESTAMP's instant as UTC wall clock."""
    if image is None:
        return None
    return {k: v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
            if isinstance(v, datetime.datetime) and v.tzinfo else v for k, v in image.items()}


@pytest.mark.every_source
def test_random_ddl_between_random_row_changes_each_image_is_what_select_showed(db, source,
                                                                                tmp_path):
    name, conn = db
    table = _Table(conn, support.rng(f"ddl {source.name}"))
    f, p = support.master_pos(conn)
    for _ in range(150):
        table.step()
    expect = sum(len(c) for c in table.changes.values())
    wrong, n = _misread(table.changes, expect, name, source, (f, p), tmp_path, "c")
    assert not wrong, support.seeded(f"{n} of {expect} messages; {wrong[:3]}; DDL: {table.ddl}")
    assert len(table.ddl) > 20 and {c.split()[0] for c in table.ddl} == {
        "ADD", "DROP", "MODIFY", "RENAME"}
    # Again, with b and the even-numbered columns left out of Kafka (a rename moves a column in
    # or out of that): the reader steps over their values in every shape the table took.
    def kept(image):
        return image and {k: v for k, v in image.items()
                          if not (k == "b" or k[0] == "c" and k[-1] in "02468")}
    want = {row: [(kept(b), kept(a)) for b, a in changes] for row, changes in table.changes.items()}
    wrong, n = _misread(want, expect, name, source, (f, p), tmp_path, "x",
                        {"exclude": ["*.*.b", "*.*.c*[02468]"]})
    assert not wrong, support.seeded(f"left out: {n} of {expect}; {wrong[:3]}; DDL: {table.ddl}")


def _misread(want, expect, name, source, start, tmp_path, label, columns=None):
    """Stream table t from ``start`` (with ``columns`` rules, if any): the rows whose (before,
    after) images differ from ``want``'s, and how many messages came (tombstones aside)."""
    ns = support.unique("dr")
    cfg = support.write_config(str(tmp_path / f"{label}.yaml"), ns, [f"{name}.*"], server=source,
                               tables={"include": [f"{name}.*"], "columns": columns or {}})
    with support.StreamerProcess(cfg, str(tmp_path / f"{label}.log"), "--start-file", start[0],
                                 "--start-pos", str(start[1])) as proc:
        msgs = [m for m in support.consume([f"{ns}.{name}.t"], expect=expect, decode_ns=ns)
                if m["value"] is not None]  # tombstones aside
        assert proc.stop() == 0, proc.output()[-3000:]
    got = {}
    for m in msgs:
        got.setdefault(m["key"]["id"], []).append(
            (_as_selected(m["value"]["before"]), _as_selected(m["value"]["after"])))
    return [(row, got.get(row), want.get(row)) for row in set(got) | set(want)
            if got.get(row) != want.get(row)], len(msgs)


class _Watched(_Table):
    """The table with each state each row was in, numbered in the order they came: the image
    after each of its changes (``at``: their numbers), and every row's after each DDL statement
    (a column added, dropped, moved, widened or renamed changes every row's image)."""

    def __init__(self, conn, rng, rows):
        super().__init__(conn, rng, rows)
        self.seq, self.states, self.at = 0, {}, {}
        self.altered()

    def altered(self):
        self.seq += 1
        with self.conn.cursor() as cur:
            cur.execute("SELECT * FROM t")
            names = [d[0] for d in cur.description]
            for image in (dict(zip(names, r)) for r in cur.fetchall()):
                self.states.setdefault(image["id"], []).append((self.seq, image))

    def changed(self, row, before, after):
        super().changed(row, before, after)
        self.seq += 1
        self.at.setdefault(row, []).append(self.seq)
        self.states.setdefault(row, []).append((self.seq, after))

    def misread(self, row, values):
        """What of a row's messages (``values``, in order) is not what it should be: each change
        must be the row's next one, and a snapshot read a state the row was in between the
        changes published around it."""
        changes, at, done = self.changes.get(row, []), self.at.get(row, []), 0
        for v in values:
            image = (_as_selected(v["before"]), _as_selected(v["after"]))
            if v["op"] != "r":
                if done == len(changes) or image != changes[done]:
                    return "a change", image, changes[done:done + 1]
                done += 1
                continue
            lo, hi = at[done - 1] if done else 0, at[done] if done < len(at) else float("inf")
            held = [state for seq, state in self.states.get(row, ()) if lo <= seq < hi]
            if image[1] not in held:
                return "a read", image[1], held[-2:]
        return ("changes missing", changes[done:]) if done < len(changes) else None


def _check_snapshot(table, msgs, rows, log):
    """The topic against ``table``'s record (``_Watched.misread``); rows never changed read once,
    none twice."""
    by_row = {}
    for m in msgs:
        if m["value"] is not None:  # tombstones aside
            by_row.setdefault(m["key"]["id"], []).append(m["value"])
    wrong = {row: table.misread(row, values) for row, values in by_row.items()}
    wrong = {row: why for row, why in wrong.items() if why}
    wrong.update({row: "no message" for row, c in table.changes.items() if c and row not in by_row})
    assert not wrong, support.seeded(f"{len(wrong)} rows: {sorted(wrong.items())[:3]}; DDL: {table.ddl}")
    reads = collections.Counter(m["key"]["id"] for m in msgs if m["value"] and
                                m["value"]["op"] == "r")
    # A row changed while its chunk's window was open is left out of the chunk, its change
    # published instead: only a row never changed must be read.
    off = [(row, reads[row]) for row in set(reads) | set(range(1, rows + 1))
           if reads[row] > 1 or not reads[row] and not table.changes[row]]
    lines = log.splitlines()
    # What ended a table's snapshot early, if anything: its ERROR and the traceback after it.
    ended = next((lines[i:i + 40] for i, ln in enumerate(lines)
                  if " ERROR " in ln and "ends without its remaining rows" in ln), [])
    assert not off, support.seeded(str((len(off), sorted(off)[:10], [
        ln for ln in lines if " snapshot" in ln][-20:], ended)))


@pytest.mark.every_source
def test_sigkills_and_random_ddl_during_a_snapshot_lose_and_double_nothing(db, source, tmp_path):
    """A snapshot in chunks of 10 rows while columns are added, dropped, moved, widened and
    renamed between row changes, and the streamer is SIGKILLed again and again, then left to
    finish: every change is published once, in order, with the images SELECT showed around it;
    every row is read at most once, as it was at some moment between the changes published
    before and after its read, in the shape the table had then, and a row never changed is."""
    name, conn = db
    rows, last = 600, 10 ** 6
    rng = support.rng(f"ddlk {source.name}")
    table = _Watched(conn, rng, rows)
    ns = support.unique("dk")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"], server=source,
                               start={"initial": "snapshot"}, snapshot={"chunk_rows": 10},
                               batch={"max_messages": 10, "linger_ms": 20})
    positions, log, stop = f"{ns}.__positions", str(tmp_path / "log"), threading.Event()
    failed = []

    def load():
        try:
            while not stop.is_set():
                table.step()
        except Exception as exc:  # noqa: BLE001 - said by the test, not lost with the thread
            failed.append(exc)

    worker = threading.Thread(target=load)
    try:
        # The first run fixes where the stream starts: the changes from then on are published.
        with support.StreamerProcess(cfg, log) as proc:
            support.wait_for(lambda: " begins: " in proc.output(), what="the snapshot")
            worker.start()
            support.wait_for(lambda: proc.proc.poll() is not None or support.end_offsets(
                positions) > 0, what="a commit by the first run")
            proc.stop(signal.SIGKILL)
        for _ in range(support.soak(3, 12)):
            support.killed_after_a_commit(cfg, log, positions, None, rng.uniform(0.2, 1.5))
        with support.StreamerProcess(cfg, log) as proc:  # the rest, the statements going on
            # for 8 s at most: each in a chunk's window has the chunk read again
            finished = lambda: " done: " in proc.output() or proc.proc.poll() is not None  # noqa: E731
            until = time.monotonic() + 8
            while time.monotonic() < until and not finished():
                time.sleep(0.2)
            stop.set()
            worker.join()
            support.wait_for(finished, timeout=120, what="the snapshot to finish")
            support.sql(conn, f"INSERT INTO t (id) VALUES ({last})")
            table.changed(last, None, table._select(last))
            msgs = support.consume([f"{ns}.{name}.t"], decode_ns=ns, timeout=180, until=lambda out: any(
                m["key"]["id"] == last for m in out))
            assert proc.stop() == 0, proc.output()[-3000:]
    finally:
        stop.set()
        if worker.is_alive():
            worker.join()
    assert not failed, support.seeded(str(failed))
    with open(log) as fh:
        out = fh.read()
    _check_snapshot(table, msgs, rows, out)
    assert len(table.ddl) > 20, (len(table.ddl), out[-2000:])
