"""Inserts, updates and deletes arrive decoded, keyed and in order; filters and restarts hold."""
import collections
import platform
import re
import signal
import time

import pytest

from streamer.ops import gcpacing
from tests import support


def _run_and_consume(tmp_path, ns, include, topics, expect, start, exclude=None, source=None):
    extra = {"tables": {"include": include, "exclude": exclude or []}}
    cfg = support.write_config(str(tmp_path / f"{ns}.yaml"), ns, include, server=source, **extra)
    with support.StreamerProcess(cfg, str(tmp_path / f"{ns}.log"), "--start-file", start[0],
                                 "--start-pos", str(start[1])) as proc:
        msgs = support.consume(topics, expect=expect, decode_ns=ns)
        assert proc.stop() == 0, proc.output()
    return msgs, proc.output()


@pytest.mark.every_source
def test_changes_on_several_tables_arrive_with_keys_values_and_order_per_key(db, tmp_path, source):
    name, conn = db
    support.sql(conn,
                "CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(20))",
                "CREATE TABLE b (k1 INT, k2 VARCHAR(5), n INT, PRIMARY KEY (k1, k2))")
    start = support.master_pos(conn)
    support.sql(conn,
                "INSERT INTO a VALUES (1, 'one'), (2, 'two')",
                "INSERT INTO b VALUES (1, 'x', 10)",
                "UPDATE a SET v = 'uno' WHERE id = 1",
                "UPDATE b SET n = n + 1 WHERE k1 = 1",
                "DELETE FROM a WHERE id = 2",
                "BEGIN", "UPDATE a SET v = 'eins' WHERE id = 1", "INSERT INTO b VALUES (2, 'y', 0)",
                "COMMIT")
    ns = support.unique("pl")
    msgs, _ = _run_and_consume(tmp_path, ns, [f"{name}.*"],
                               [f"{ns}.{name}.a", f"{ns}.{name}.b"], 9, start,
                               source=source)
    per_key = collections.defaultdict(list)
    for m in msgs:
        v = m["value"]
        per_key[(m["topic"], tuple(sorted(m["key"].items())))].append(
            ("tombstone",) if v is None else (v["op"], v["before"], v["after"]))
    a, b = f"{ns}.{name}.a", f"{ns}.{name}.b"
    assert per_key[(a, (("id", 1),))] == [
        ("c", None, {"id": 1, "v": "one"}),
        ("u", {"id": 1, "v": "one"}, {"id": 1, "v": "uno"}),
        ("u", {"id": 1, "v": "uno"}, {"id": 1, "v": "eins"}),
    ]
    assert per_key[(a, (("id", 2),))] == [
        ("c", None, {"id": 2, "v": "two"}),
        ("d", {"id": 2, "v": "two"}, None),
        ("tombstone",),  # topics.tombstones, on by default: compaction may forget the key
    ]
    assert per_key[(b, (("k1", 1), ("k2", "x")))] == [
        ("c", None, {"k1": 1, "k2": "x", "n": 10}),
        ("u", {"k1": 1, "k2": "x", "n": 10}, {"k1": 1, "k2": "x", "n": 11}),
    ]
    assert per_key[(b, (("k1", 2), ("k2", "y")))] == [("c", None, {"k1": 2, "k2": "y", "n": 0})]
    assert len(msgs) == 9
    src = next(m for m in msgs if m["topic"] == a)["value"]["source"]
    assert src["db"] == name and src["table"] == "a" and src["row"] == 0 and src["file"] == start[0]
    assert src["gtid"] and src["txid"].startswith(start[0] + ":")
    # The two changes of the explicit transaction share its txid and count rows within it.
    tx = [m["value"]["source"] for m in msgs if m["value"] and m["value"]["after"] in (
        {"id": 1, "v": "eins"}, {"k1": 2, "k2": "y", "n": 0})]
    assert len({s["txid"] for s in tx}) == 1 and sorted(s["tx_row"] for s in tx) == [0, 1]


@pytest.mark.every_source
def test_table_without_primary_key_gets_a_null_key(db, tmp_path, source):
    name, conn = db
    support.sql(conn, "CREATE TABLE logs (line VARCHAR(50))")
    start = support.master_pos(conn)
    support.sql(conn, "INSERT INTO logs VALUES ('a'), ('a')")
    ns = support.unique("nk")
    msgs, _ = _run_and_consume(tmp_path, ns, [f"{name}.logs"], [f"{ns}.{name}.logs"], 2, start,
                               source=source)
    assert [m["raw_key"] for m in msgs] == [None, None]
    assert [m["value"]["after"] for m in msgs] == [{"line": "a"}, {"line": "a"}]
    assert [m["value"]["source"]["row"] for m in msgs] == [0, 1]


@pytest.mark.every_source
def test_primary_key_change_is_a_delete_of_the_old_key_and_a_create_of_the_new(db, tmp_path, source):
    name, conn = db
    support.sql(conn, "CREATE TABLE p (id INT PRIMARY KEY, v INT)")
    start = support.master_pos(conn)
    support.sql(conn, "INSERT INTO p VALUES (1, 5)", "UPDATE p SET id = 2 WHERE id = 1")
    ns = support.unique("pk")
    msgs, _ = _run_and_consume(tmp_path, ns, [f"{name}.p"], [f"{ns}.{name}.p"], 4, start,
                               source=source)
    # The old key's delete is followed by its tombstone, as any delete is.
    assert [(m["key"], m["value"] and m["value"]["op"]) for m in msgs] == [
        ({"id": 1}, "c"), ({"id": 1}, "d"), ({"id": 1}, None), ({"id": 2}, "c")]
    assert msgs[1]["value"]["before"] == {"id": 1, "v": 5}
    assert msgs[3]["value"]["after"] == {"id": 2, "v": 5}


def test_include_and_exclude_filters_hold(db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE keep1 (id INT PRIMARY KEY)", "CREATE TABLE keep2 (id INT PRIMARY KEY)",
                "CREATE TABLE skip_me (id INT PRIMARY KEY)", "CREATE TABLE other (id INT PRIMARY KEY)")
    start = support.master_pos(conn)
    for t in ("keep1", "keep2", "skip_me", "other"):
        support.sql(conn, f"INSERT INTO {t} VALUES (1)")
    ns = support.unique("fl")
    topics = [f"{ns}.{name}.{t}" for t in ("keep1", "keep2", "skip_me", "other")]
    msgs, _ = _run_and_consume(tmp_path, ns, [f"{name}.keep*", f"{name}.skip*"], topics, 2, start,
                               exclude=[f"{name}.skip_*"])
    assert sorted(m["topic"] for m in msgs) == [f"{ns}.{name}.keep1", f"{ns}.{name}.keep2"]


def test_restart_resumes_from_a_position_given_on_the_command_line(db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE r (id INT PRIMARY KEY)")
    first = support.master_pos(conn)
    support.sql(conn, "INSERT INTO r VALUES (1)", "INSERT INTO r VALUES (2)")
    second = support.master_pos(conn)
    support.sql(conn, "INSERT INTO r VALUES (3)")
    ns1, ns2 = support.unique("ra"), support.unique("rb")
    msgs, _ = _run_and_consume(tmp_path, ns1, [f"{name}.r"], [f"{ns1}.{name}.r"], 3, first)
    assert [m["key"]["id"] for m in msgs] == [1, 2, 3]
    msgs, log = _run_and_consume(tmp_path, ns2, [f"{name}.r"], [f"{ns2}.{name}.r"], 1, second)
    assert [m["key"]["id"] for m in msgs] == [3]
    assert "OVERRIDES the committed checkpoint" in log


def test_catching_up_commits_by_batch_size_not_by_linger(db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
    start = support.master_pos(conn)
    for chunk in range(20):
        values = ", ".join(f"({chunk * 1000 + i}, 'v')" for i in range(1000))
        support.sql(conn, f"INSERT INTO t VALUES {values}")
    time.sleep(2.5)  # the backlog is now older than CATCHUP_LAG_S
    ns = support.unique("pl")
    # The 1 ms idle checkpoint applies only with nothing pending: it used to cut a batch after
    # each transaction once reading took longer than it, as it does on a starved host.
    batch = {"max_messages": 5000, "linger_ms": 1, "catchup_linger_ms": 60000,
             "idle_checkpoint_ms": 1}
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.t"], batch=batch)
    with support.StreamerProcess(cfg, str(tmp_path / "s.log"), "--start-file", start[0],
                                 "--start-pos", str(start[1])) as proc:
        msgs = support.consume([f"{ns}.{name}.t"], expect=20000, decode_ns=ns)
        assert proc.stop() == 0, proc.output()
    assert sorted(m["key"]["id"] for m in msgs) == list(range(20000))
    batches = int(re.search(r"stopped after \d+ messages in (\d+) batches", proc.output()).group(1))
    # A 1 ms linger would have cut a batch after (almost) every 1000-row event; catching up, only
    # max_messages cuts (4 batches), plus the start position's commit and any caught-up commit.
    assert batches <= 8, proc.output()


def test_heartbeats_queued_behind_a_backlog_do_not_cut_a_batch_per_transaction(db, tmp_path):
    """A reader that fell behind finds the server's idle heartbeats queued between changes.

    Each one used to be taken as "caught up" and cost a synchronous commit: a streamer behind
    single-row transactions spaced over the heartbeat period committed one Kafka transaction
    per row and could not catch up (~35 rows/s on a busy machine).
    """
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY)")
    ns = support.unique("hb")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.t"],
                               mysql={"heartbeat_s": 0.02}, batch={"linger_ms": 600000})
    topic = f"{ns}.{name}.t"
    with support.StreamerProcess(cfg, str(tmp_path / "s.log")) as proc:
        support.wait_for(lambda: "starting at the end" in proc.output() or proc.proc.poll() is not None,
                         what="the streamer to start reading")
        support.sql(conn, "INSERT INTO t VALUES (0)")
        assert len(support.consume([topic], expect=1, decode_ns=ns)) == 1
        proc.proc.send_signal(signal.SIGSTOP)
        try:
            for i in range(1, 41):
                support.sql(conn, f"INSERT INTO t VALUES ({i})")
                time.sleep(0.06)  # > heartbeat_s: the server sends a heartbeat in every gap
        finally:
            proc.proc.send_signal(signal.SIGCONT)
        msgs = support.consume([topic], expect=41, decode_ns=ns)
        assert proc.stop() == 0, proc.output()
    assert sorted(m["key"]["id"] for m in msgs) == list(range(41))
    batches = int(re.search(r"stopped after \d+ messages in (\d+) batches", proc.output()).group(1))
    # The linger is longer than the whole test, so only an idle heartbeat cuts a batch: one for
    # the start position, one for the first row, one for the 40 queued rows, and at most one
    # idle checkpoint. Taking each queued heartbeat for idle would make 40 or more.
    assert batches <= 5, proc.output()


def test_live_changes_commit_when_the_reader_is_caught_up_not_after_the_linger(db, tmp_path):
    """Live, a batch commits at a transaction's end once the reader has read all there is.

    The linger (10 min) and the server's idle heartbeat (2 min) are both longer than the test:
    only the caught-up commit can make these rows visible. A min_linger as long as the linger
    then holds a caught-up batch back.
    """
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY)")
    for min_linger, rows in ((0, list(range(5))), (600000, [100])):
        ns = support.unique("cu")
        topic = f"{ns}.{name}.t"
        cfg = support.write_config(str(tmp_path / f"{ns}.yaml"), ns, [f"{name}.t"],
                                   mysql={"heartbeat_s": 120},
                                   batch={"linger_ms": 600000, "min_linger_ms": min_linger})
        with support.StreamerProcess(cfg, str(tmp_path / f"{ns}.log")) as proc:
            proc.wait_reading()
            for i in rows:
                support.sql(conn, f"INSERT INTO t VALUES ({i})")
                time.sleep(0.3)
            deadline = time.monotonic() + 60
            # Held back, nothing comes: 8 s is long for a caught-up commit, which comes within
            # milliseconds of the row's read.
            window = 8 if min_linger else 30
            while True:  # patient on a stalled host, without a long idle read after the last row
                seen = support.consume([topic], expect=len(rows), idle=2.0, timeout=window,
                                       decode_ns=ns)
                if min_linger or len(seen) >= len(rows) or time.monotonic() > deadline:
                    break
            proc.proc.send_signal(signal.SIGTERM)
            support.sql(conn, "INSERT INTO t VALUES (1000)")  # wakes the reader to stop
            assert proc.wait() == 0, proc.output()
            support.sql(conn, "DELETE FROM t WHERE id = 1000")
        if min_linger:
            assert seen == [], proc.output()
        else:
            assert sorted(m["key"]["id"] for m in seen) == rows, proc.output()
        # Nothing held back is lost: the stop commits it.
        final = support.consume([topic], expect=len(rows), idle=1.0, decode_ns=ns)
        assert sorted(m["key"]["id"] for m in final if m["key"]["id"] < 1000) == rows


@pytest.mark.skipif(platform.python_implementation() != "PyPy", reason="PyPy's GC only")
def test_run_under_pypy_sets_its_gc_settings_in_the_same_process_unless_they_are_set(db, tmp_path):
    name, _ = db
    step = gcpacing.GC_MARKING_STEP
    # "" is unset for PyPy as for the streamer: the machine's cache size would decide.
    for nursery, given_step, shown in (("", "", "8.0 MiB"), ("4MB", "", "4.0 MiB"),
                                       ("4MB", "2MB", "4.0 MiB")):
        ns = support.unique("gc")
        cfg = support.write_config(str(tmp_path / f"{ns}.yaml"), ns, [f"{name}.*"])
        with support.StreamerProcess(cfg, str(tmp_path / f"{ns}.log"),
                                     env={"PYPY_GC_NURSERY": nursery,
                                          "PYPY_GC_INCREMENT_STEP": given_step}) as proc:
            proc.wait_reading()
            want_step = given_step or step
            assert f"PyPy GC nursery {shown} (PYPY_GC_NURSERY), marking step {want_step} " \
                in proc.output()
            # The child started here is the one streaming: run exec'd itself, it did not fork.
            with open(f"/proc/{proc.proc.pid}/environ", "rb") as fh:
                environ = fh.read().split(b"\0")
            assert f"PYPY_GC_NURSERY={nursery or '8MB'}".encode() in environ
            assert f"PYPY_GC_INCREMENT_STEP={want_step}".encode() in environ
            assert proc.stop() == 0


@pytest.mark.parametrize("engine", ["MyISAM", "Aria", "MEMORY"])
def test_changes_to_a_non_transactional_table_arrive_once_across_a_restart(db, tmp_path, engine):
    # Such a table's statements reach the binlog as groups of their own that end in a COMMIT
    # query, not an Xid: each must be published, and checkpointed, like a transaction.
    name, conn = db
    support.sql(conn, f"CREATE TABLE n (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE={engine}")
    start = support.master_pos(conn)
    support.sql(conn, "INSERT INTO n VALUES (1, 'one'), (2, 'two')", "UPDATE n SET v = 'uno' WHERE id = 1")
    ns = support.unique("nt")
    topic = f"{ns}.{name}.n"
    msgs, _ = _run_and_consume(tmp_path, ns, [f"{name}.n"], [topic], 3, start)
    assert [(m["value"]["op"], m["key"]["id"]) for m in msgs] == [("c", 1), ("c", 2), ("u", 1)]
    assert msgs[2]["value"]["after"] == {"id": 1, "v": "uno"}
    txids = [m["value"]["source"]["txid"] for m in msgs]
    assert txids[0] == txids[1] != txids[2]
    support.sql(conn, "DELETE FROM n WHERE id = 2", "INSERT INTO n VALUES (3, 'three')")
    # No start position this time: the run resumes from its checkpoint, after the UPDATE.
    cfg = support.write_config(str(tmp_path / f"{ns}.yaml"), ns, [f"{name}.n"])
    with support.StreamerProcess(cfg, str(tmp_path / f"{ns}-2.log")) as proc:
        msgs = support.consume([topic], expect=6, decode_ns=ns)
        assert proc.stop() == 0, proc.output()
    assert [(m["value"]["op"] if m["value"] else None, m["key"]["id"]) for m in msgs] == [
        ("c", 1), ("c", 2), ("u", 1), ("d", 2), (None, 2), ("c", 3)]
