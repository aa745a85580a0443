"""Reading the committed checkpoint back from a real Kafka, the way a start does."""
import os
import threading
import time

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from streamer import config as config_mod
from streamer.errors import OpenTransaction
from streamer.kafka import checkpoints as checkpoints_mod
from streamer.kafka import publisher as publisher_mod
from streamer.kafka.publisher import Publisher
from streamer.kafka.topics import read_topic_tail
from streamer.position import Position
from tests import support


def _cfg(tmp_path, namespace: str, source: str):
    path = support.write_config(os.path.join(str(tmp_path), f"{source}.yaml"), namespace, ["x.*"],
                                source={"name": source})
    return config_mod.load(path, {})


def _commit_many(cfg, count: int, start_pos: int) -> Position:
    last = None
    with Publisher(cfg) as pub:
        for i in range(count):
            last = Position("mysql-bin.000001", start_pos + i)
            pub.commit(last)
    return last


def test_checkpoint_is_found_in_the_tail_and_behind_other_sources(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoints_mod, "TAIL", 40)
    ns = support.unique("ckpt")
    a, b = _cfg(tmp_path, ns, "alpha"), _cfg(tmp_path, ns, "beta")
    a_last = _commit_many(a, 5, 100)
    # beta's checkpoints push alpha's far out of the last 40 offsets (a record and a commit
    # marker per transaction).
    b_last = _commit_many(b, 60, 1000)

    with Publisher(b) as pub:
        found = pub.read_checkpoint()
        assert (found.file, found.pos) == (b_last.file, b_last.pos)
        assert 0 < pub.checkpoint_records_read <= 40

    with Publisher(a) as pub:
        found = pub.read_checkpoint()
        assert (found.file, found.pos) == (a_last.file, a_last.pos)
        # Not in the tail: the whole topic was read.
        assert pub.checkpoint_records_read == 65

    with Publisher(_cfg(tmp_path, ns, "gamma")) as pub:
        assert pub.read_checkpoint() is None


def test_positions_topic_rolls_segments_so_compaction_can_run(tmp_path):
    ns = support.unique("ckpt")
    cfg = _cfg(tmp_path, ns, "alpha")
    with Publisher(cfg) as pub:
        pub.prepare()  # entering creates nothing: the streamer prepares once MySQL answered
    admin = AdminClient({"bootstrap.servers": support.KAFKA})
    for topic in (f"{ns}.__positions", f"{ns}.__schemas"):
        res = ConfigResource(ConfigResource.Type.TOPIC, topic)
        conf = admin.describe_configs([res])[res].result(timeout=30)
        assert conf["cleanup.policy"].value == "compact"
        assert int(conf["segment.ms"].value) == publisher_mod.COMPACTED_SEGMENT_MS


def test_a_tail_that_reaches_back_to_the_first_offset_is_read_once(tmp_path, monkeypatch):
    ns = support.unique("ckpt")
    _commit_many(_cfg(tmp_path, ns, "alpha"), 3, 100)
    reads = []
    real = checkpoints_mod.read_topic_tail

    def counting(*args, **kwargs):
        records, whole = real(*args, **kwargs)
        reads.append((kwargs.get("tail"), len(records), whole))
        return records, whole

    monkeypatch.setattr(checkpoints_mod, "read_topic_tail", counting)
    # beta has no checkpoint, and alpha's three are all the topic holds: one read settles it.
    with Publisher(_cfg(tmp_path, ns, "beta")) as pub:
        assert pub.read_checkpoint() is None
    assert reads == [(checkpoints_mod.TAIL, 3, True)]

    # A tail shorter than the topic is not the whole of it: the full read follows.
    reads.clear()
    monkeypatch.setattr(checkpoints_mod, "TAIL", 2)
    with Publisher(_cfg(tmp_path, ns, "beta")) as pub:
        assert pub.read_checkpoint() is None
    assert [(tail, whole) for tail, _, whole in reads] == [(2, False), (None, True)]
    assert reads[1][1] == 3


def _open_checkpoint(cfg) -> Publisher:
    """A publisher whose checkpoint is written but not committed: a source caught mid-commit."""
    pub = Publisher(cfg).__enter__()
    pub.begin()
    pub.produce(pub.positions_topic, Position("mysql-bin.000009", 9).to_json(), pub.source.encode())
    pub.producer.flush(10)
    return pub


def test_another_sources_open_commit_does_not_hide_a_newer_checkpoint(tmp_path, caplog):
    """A read_committed read ends where a transaction is still open, so alpha's commit in flight
    hid beta's newer checkpoint behind it: beta resumed from its older one and published its
    changes twice. The read now waits for that transaction to end."""
    ns = support.unique("ckpt")
    alpha, beta = _cfg(tmp_path, ns, "alpha"), _cfg(tmp_path, ns, "beta")
    _commit_many(beta, 1, 100)
    stuck = _open_checkpoint(alpha)
    newest = _commit_many(beta, 1, 200)
    ends = threading.Timer(2.0, stuck.abort)  # alpha restarts, or the broker times it out
    ends.start()
    try:
        with Publisher(beta) as pub:
            found = pub.read_checkpoint()
    finally:
        ends.join()
        stuck.__exit__(None, None, None)
    assert (found.file, found.pos) == (newest.file, newest.pos)
    assert "another producer's transaction is open" in caplog.text


def test_a_settled_read_names_a_transaction_that_stays_open(tmp_path):
    ns = support.unique("ckpt")
    alpha = _cfg(tmp_path, ns, "alpha")
    stuck = _open_checkpoint(alpha)
    try:
        conf = {"bootstrap.servers": support.KAFKA}
        records, _ = read_topic_tail(conf, stuck.positions_topic, timeout=10)
        assert records == []  # the open transaction's record is not read
        opened = []
        with pytest.raises(OpenTransaction, match=r"a transaction on .*__positions stayed open for 2 s"):
            read_topic_tail(conf, stuck.positions_topic, timeout=2, settle=True,
                            on_open=lambda *at: opened.append(at))
        assert opened == [(0, 0, 1)]
    finally:
        stuck.abort()
        stuck.__exit__(None, None, None)


def test_a_batch_repeats_the_last_checkpoint_first_and_the_new_one_is_read_back(tmp_path):
    """The positions topic joins a batch's transaction at its start, with the last checkpoint
    again, not at its commit; the new checkpoint comes last and is the one a start reads."""
    ns = support.unique("ckpt")
    cfg = _cfg(tmp_path, ns, "alpha")
    topic = f"{ns}.x.t"
    first, second = Position("mysql-bin.000001", 100), Position("mysql-bin.000001", 200)
    with Publisher(cfg) as pub:
        pub.ensure_topic(topic)
        pub.commit(first)  # a checkpoint alone: nothing before it to repeat
        pub.begin()
        pub.produce(topic, b"row", b"1")
        pub.commit(second)
        pub.begin()
        pub.produce(topic, b"lost", b"2")
        # Delivered first, as the batch of a streamer that aborts after a failure is: an abort
        # right after the produce can race librdkafka's registration of the partitions and fail
        # as fatal INVALID_TXN_STATE (librdkafka issue 4849; seen once in CI here).
        pub.producer.flush(10)
        pub.abort()
    records = support.consume([f"{ns}.__positions"], expect=3, idle=1.0)
    assert [(m["raw_key"], Position.from_json(m["raw_value"]).pos) for m in records] == \
        [(b"alpha", 100), (b"alpha", 100), (b"alpha", 200)]
    assert [m["raw_value"] for m in support.consume([topic], expect=1, idle=1.0)] == [b"row"]
    with Publisher(cfg) as pub:
        found = pub.read_checkpoint()
        assert (found.file, found.pos) == (second.file, second.pos)
        # A publisher that read the checkpoint repeats it at the start of its first batch too.
        pub.begin()
        pub.commit(Position("mysql-bin.000001", 300))
    tail = support.consume([f"{ns}.__positions"], expect=5, idle=1.0)[3:]
    assert [Position.from_json(m["raw_value"]).pos for m in tail] == [200, 300]


def test_a_first_start_checkpoints_the_servers_whole_executed_gtid_set(db, tmp_path):
    import json

    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1)")
    # A second domain with no transaction after the start: only the server can name it.
    support.sql(conn, "SET SESSION gtid_domain_id = 7", "INSERT INTO t VALUES (2)",
                "SET SESSION gtid_domain_id = 0")
    before = support.sql(conn, "SELECT @@GLOBAL.gtid_binlog_pos")[0][0]
    ns = support.unique("gs")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.t"])
    with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
        proc.wait_reading()
        support.sql(conn, "INSERT INTO t VALUES (3)")
        support.consume([f"{ns}.{name}.t"], expect=1)
        assert proc.stop() == 0, proc.output()[-3000:]
    checkpoints = [json.loads(m["raw_value"]) for m in support.consume([f"{ns}.__positions"])]
    first, last = checkpoints[0], checkpoints[-1]

    def domains(text):
        return sorted(text.split(","))

    assert domains(first["gtid_set"]) == domains(before) and "7-" in first["gtid_set"]
    assert domains(last["gtid_set"]) == domains(
        support.sql(conn, "SELECT @@GLOBAL.gtid_binlog_pos")[0][0])


@pytest.mark.every_source
def test_first_starts_under_commits_checkpoint_the_executed_set_at_each_offset(db, tmp_path,
                                                                                source):
    # MySQL's binlog status reads its executed set and its offset one after the other: under
    # commits, the set a start at that offset took lacked the last transactions before it, and
    # so did every checkpoint after (a resume by GTID is sent them again; seen in about one
    # start in three here). Each checkpoint's set must be the server's at its file and offset.
    from streamer.position import GtidSet
    from streamer.source import server

    name, conn = db
    # A new file: the server's set at an offset is read by scanning its file up to it.
    support.sql(conn, "FLUSH BINARY LOGS", "CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY)")
    placed = []
    for run in range(3):
        stop = threading.Event()

        def load():
            with source.admin(name) as c:
                while not stop.is_set():
                    support.sql(c, "INSERT INTO t VALUES ()")
        writers = [threading.Thread(target=load, daemon=True) for _ in range(4)]
        for w in writers:
            w.start()
        ns = support.unique("gx")
        cfg = support.write_config(str(tmp_path / f"{run}.yaml"), ns, [f"{name}.t"],
                                   server=source)
        try:
            with support.StreamerProcess(cfg, str(tmp_path / f"{run}.log")) as proc:
                proc.wait_reading()  # its start position is taken, under the writers' commits
                time.sleep(0.5)
                stop.set()
                for w in writers:
                    w.join()
                support.consume([f"{ns}.{name}.t"], expect=100)
                assert proc.stop() == 0, proc.output()[-3000:]
        finally:
            stop.set()
        ours = [Position.from_json(m["raw_value"])
                for m in support.consume([f"{ns}.__positions"], idle=1.0)]
        # The start itself is at a file and offset: by the set alone, MySQL would read its whole
        # binlog file first (server.end_gtids).
        assert ours and ours[0].file, (run, ours[:1])
        placed += [ours[0], ours[-1]]
    for p in placed:
        at = server.executed_gtids(conn, p.file, p.pos)
        assert at is not None and str(GtidSet(p.gtid_set)) == str(GtidSet(at)), (p.describe(), at)
