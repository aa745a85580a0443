"""The engine's loop, driven without servers: a recorded binlog replayed through the library's own
packet layer (binlogs/engine.sql says what it holds), an in-memory publisher and a test clock."""
import logging
import os

import pymysql
import pytest

from streamer.position import Position
from streamer.source import patches
from tests.unit.engine_parts import FakeClock, ReplayedBinlog

patches.apply()  # as `streamer run` does before reading

# ``make`` (tests/unit/conftest.py): a Streamer on an in-memory publisher and a test clock.
FILE = "mysql-bin.000002"
# Every row change of the recording, as published: (op, key). Transaction 2 holds seven row
# changes, one of them to the unpublished other.skip, and its primary-key change is a delete and
# a create; the heartbeat and other.skip's own transaction publish nothing.
ALL = [("c", 1), ("c", 2), ("c", 3),
       ("c", 4), ("u", 2), ("c", 5), ("c", 6), ("d", 1), ("tombstone", 1), ("d", 6),
       ("tombstone", 6), ("c", 7), ("c", 8), ("t", None), ("c", 9)]
# Binlog offsets of transaction starts (their GTID events) in the recording.
TX2 = 1234  # transaction 2
TX4 = 2652  # the transaction that only writes other.skip
ALTER = 2878


def replay(streamer, publisher, start=Position(FILE, 4), binlog="engine.binlog", **kwargs):
    """Stream the recording from ``start`` to its end, then stop as a SIGTERM would."""
    reader = ReplayedBinlog(binlog, start, on_end=streamer.request_stop, **kwargs)
    with reader:
        streamer.stream(publisher, reader, start)
    return reader


def test_catching_up_batches_are_cut_at_max_messages_and_every_change_is_published_once(make):
    streamer, publisher = make(batch={"max_messages": 3})
    replay(streamer, publisher)
    assert publisher.changes() == ALL
    sizes = [sum(1 for m in msgs if m[0].startswith("test.app")) for msgs, _ in publisher.log]
    # Cut after the rows event that reached 3 (tx 2's two-row insert makes 4; its key change
    # is two messages; a delete and its tombstone are two), never by time: the backlog's events
    # are years older than the clock.
    assert sizes == [3, 4, 5, 3, 0]  # the last: the checkpoint of the stop at the end
    # A cut inside transaction 2 checkpoints its start and the row changes done, the
    # unpublished one counted: 4, skip, 2, 5 and 6; then 1 and 6->7, before its XID.
    assert (publisher.log[1][1].pos, publisher.log[1][1].rows) == (TX2, 5)
    assert (publisher.log[2][1].pos, publisher.log[2][1].rows) == (TX2, 7)
    assert not publisher.in_tx and publisher.aborts == 0


def test_live_a_batch_commits_as_soon_as_the_reader_is_caught_up(make):
    clock = FakeClock(step=0.0001)
    streamer, publisher = make(batch={"linger_ms": 10000, "min_linger_ms": 0}, clock=clock)
    first = next(e for e in ReplayedBinlog("engine.binlog", Position(FILE, 4))
                 if getattr(e, "rows", None))
    clock.wall = first.timestamp + 0.5  # a live reader: changes under CATCHUP_LAG_S old
    replay(streamer, publisher, live=True)
    assert publisher.changes() == ALL
    # Each transaction with changes is its own batch, committed at its end, far inside the
    # linger: whole transactions only, so every checkpoint is a transaction's end.
    published = [msgs for msgs, _ in publisher.log if any(m[0].startswith("test.app") for m in msgs)]
    assert len(published) == 5  # transactions 1 and 2, the ALTER's row, TRUNCATE, the last row
    assert all(pos.rows == 0 for _, pos in publisher.log)


def stopped_inside_transaction_2(make, start=Position(FILE, 4)):
    """A run in batches of 2, stopped once a checkpoint inside transaction 2 is committed: its
    publisher, changes published and that checkpoint."""
    streamer, publisher = make(batch={"max_messages": 2})

    def stop_inside_transaction_2(position):
        if position.pos == TX2 and position.rows:
            streamer.request_stop()

    publisher.on_commit = stop_inside_transaction_2
    replay(streamer, publisher, start=start)
    first = publisher.changes()
    checkpoint = publisher.committed
    assert checkpoint.pos == TX2 and 0 < checkpoint.rows < 7
    assert first == ALL[:len(first)] and len(first) < len(ALL)
    return publisher, first, checkpoint


def test_resume_in_the_middle_of_a_multi_batch_transaction_publishes_the_rest_once(make):
    publisher, first, checkpoint = stopped_inside_transaction_2(make)

    again, resumed = make(batch={"max_messages": 2})
    replay(again, resumed, start=checkpoint)
    assert first + resumed.changes() == ALL
    # The rows of transaction 2 keep the indexes they had: the skip counted, not restarted.
    decoder = resumed.decoder()
    tx_rows = [decoder.decode(v)["source"]["tx_row"] for _, _, v in resumed.messages()[:3]]
    assert tx_rows[0] == checkpoint.rows


def test_a_resume_by_gtid_inside_a_transaction_publishes_the_rest_once(make):
    # mysql.position_mode: gtid resumes by the checkpoint's GTID set. The server then sends the
    # checkpoint's transaction first, but its first (artificial) rotate carries offset 4, not
    # the transaction's: the skip must follow the transaction's GTID, not its offset.
    publisher, first, checkpoint = stopped_inside_transaction_2(make)
    assert checkpoint.gtid_set and checkpoint.tx_gtid
    again, resumed = make(batch={"max_messages": 2})
    again.cfg["mysql"]["position_mode"] = "gtid"
    reader = ReplayedBinlog("engine.binlog", checkpoint, on_end=again.request_stop, rotate_pos=4)
    with reader:
        again.stream(resumed, reader, checkpoint)
    assert first + resumed.changes() == ALL


def test_an_idle_checkpoint_moves_the_position_past_changes_nothing_publishes(make):
    clock = FakeClock(step=0.5)  # every event is half a second later: idle_checkpoint_ms is 1000
    streamer, publisher = make(clock=clock)
    replay(streamer, publisher, start=Position(FILE, TX4))
    # Nothing to publish until the row after the ALTER; the position still moved, in a commit of
    # its own with no message, to the end of other.skip's transaction (where the ALTER starts).
    empty = [pos for msgs, pos in publisher.log if not msgs]
    assert (empty[0].pos, empty[0].rows) == (ALTER, 0)
    assert publisher.changes() == ALL[-3:]


def test_heartbeat_rows_are_measured_and_committed_but_never_published(make):
    streamer, publisher = make(heartbeat=True)
    replay(streamer, publisher, live=True)
    # Its µs timestamp, not the binlog's whole seconds, is what the latency is measured from.
    assert streamer.metrics.last_event_ts == pytest.approx(1700000000.123456)
    topics = {m[0] for m in publisher.messages(all_topics=True)}
    assert not any("heartbeat" in t for t in topics)
    assert publisher.changes() == ALL
    # The heartbeat's own transaction commits (it measures the latency a change would see).
    beat_tx = [pos for msgs, pos in publisher.log if not msgs and pos.gtid_set.endswith("0-1-10")]
    assert len(beat_tx) == 1


def test_truncate_is_published_with_op_t_and_the_tables_current_schema(make):
    streamer, publisher = make()
    replay(streamer, publisher)
    decoder = publisher.decoder()
    truncate = [decoder.decode(v) for _, k, v in publisher.messages() if k is None]
    assert len(truncate) == 1
    env = truncate[0]
    assert env["op"] == "t" and env["before"] is None and env["after"] is None
    assert (env["source"]["db"], env["source"]["table"]) == ("app", "t")
    # Written with the version after the ALTER: its writer schema has column n.
    schema = decoder.schema_of([v for _, k, v in publisher.messages() if k is None][0])
    row = schema["fields"][0]["type"][1]
    assert [f["name"] for f in row["fields"]] == ["id", "v", "n"]


def test_a_ddl_between_batches_announces_the_new_version_before_its_first_row(make):
    streamer, publisher = make()
    replay(streamer, publisher, live=True)
    schemas, first_new = None, None
    for msgs, _ in publisher.log:
        topics = [m[0] for m in msgs]
        if "test.app.t" in topics and schemas is None:
            schemas = topics
        decoded = [publisher.decoder().decode(m[2]) for m in msgs if m[0] == "test.app.t"]
        if any(d and d["after"] and d["after"].get("n") == 80 for d in decoded):
            first_new = topics
    # The first batch announces version 1 before its rows; the batch with the ALTER's first row
    # announces version 2 (value schema, then key schema) before it, in the same transaction.
    assert schemas[:2] == ["test.__schemas", "test.__schemas"]
    assert first_new[:3] == ["test.__schemas", "test.__schemas", "test.app.t"]
    records = publisher.read_schema_records()
    assert [r["kind"] for r in records] == ["value", "key", "value", "key"]
    assert records[0]["fingerprint"] != records[2]["fingerprint"]


def test_shutdown_in_the_middle_of_a_transaction_reads_to_its_end_commits_and_stops_there(make):
    # A batch that committed part of a transaction could not take its rows back should its
    # group end in ROLLBACK (stages.savepoints): the stop waits for the transaction's end.
    streamer, publisher = make(batch={"linger_ms": 100000, "catchup_linger_ms": 100000})
    # other.skip's row in transaction 2, after the first insert: its batch is open (the events
    # counted from the rotate, the format description and the file's GTID list on).
    stop_at = 19

    def stop(n):
        if n == stop_at:
            streamer.request_stop()

    reader = ReplayedBinlog("engine.binlog", Position(FILE, 4), on_event=stop)
    with reader:
        streamer.stream(publisher, reader, Position(FILE, 4))
    assert reader.handed_out == 28  # transaction 2's XID, and nothing after it
    assert len(publisher.log) == 1 and not publisher.in_tx
    checkpoint = publisher.committed
    assert checkpoint.pos == 2289 and checkpoint.rows == 0  # where transaction 3 begins
    assert publisher.changes() == ALL[:12]
    again, resumed = make()
    replay(again, resumed, start=checkpoint)
    assert publisher.changes() + resumed.changes() == ALL


def test_a_batch_past_its_linger_commits_at_the_transaction_end_unless_full(make):
    # Catching up, a batch past its linger commits at the next transaction end, never between
    # two rows of one; a full batch (max_messages) still commits where it is.
    for max_messages, inside in ((10000, False), (3, True)):
        streamer, publisher = make(batch={"linger_ms": 0, "min_linger_ms": 0,
                                          "catchup_linger_ms": 0, "max_messages": max_messages})
        replay(streamer, publisher)
        assert publisher.changes() == ALL
        assert any(p.rows for _, p in publisher.log) is inside, publisher.log


def _stream_class(opened, events):
    """A stand-in for the binlog reader (Supervisor.new_reader): each one made is appended to
    ``opened``, and iterating it gives what ``events()`` returns (or raises)."""
    class Stream:
        def __init__(self, *args):
            opened.append(self)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

        def __iter__(self):
            return iter(events())

        def more_arrived(self):
            return False
    return Stream


def _supervised(make, monkeypatch, **kwargs):
    """A supervised streamer on a stand-in source at (FILE, 4): (it, its publisher, the waits
    it slept)."""
    from streamer.engine import start as start_mod

    supervisor, publisher = make(supervised=True, **kwargs)
    monkeypatch.setattr(start_mod, "probe_source",
                        lambda *args: start_mod.SourceInfo(1, (FILE, 4), None))
    sleeps = []
    monkeypatch.setattr(supervisor, "_sleep", sleeps.append)
    return supervisor, publisher, sleeps


def test_a_stream_the_server_ends_is_a_lost_connection_and_is_read_again(make, monkeypatch):
    streamer, publisher, _ = _supervised(make, monkeypatch)
    opened = []

    def ending():
        """A binlog stream that ends at once, as on the server's EOF packet; the second one
        asks the streamer to stop as it ends."""
        if len(opened) == 2:
            streamer.request_stop()
        return ()

    streamer.new_reader = _stream_class(opened, ending)
    assert streamer.run() == 0
    assert len(opened) == 2 and streamer.reconnects == 1


@pytest.mark.parametrize("explicit", [False, True])
def test_an_unreadable_newest_checkpoint_stops_a_resume_but_not_an_explicit_start(
        make, monkeypatch, explicit):
    # A checkpoint record the streamer can't read (another version's, or another writer's)
    # stopped every start: also the explicit one its error names as the way on.
    from streamer.errors import UnreadableCheckpoint

    start = {"start": {"file": FILE, "pos": 4}} if explicit else {}
    streamer, publisher, _ = _supervised(make, monkeypatch, sections=start)

    def unreadable():
        raise UnreadableCheckpoint("the newest checkpoint of source 'src' can't be read")
    monkeypatch.setattr(publisher, "read_checkpoint", unreadable)
    opened = []

    def stopping():
        streamer.request_stop()
        return ()
    streamer.new_reader = _stream_class(opened, stopping)
    if not explicit:
        with pytest.raises(UnreadableCheckpoint):
            streamer.run()
        assert opened == [] and publisher.committed is None
        return
    assert streamer.run() == 0
    assert len(opened) == 1
    assert (publisher.committed.file, publisher.committed.pos) == (FILE, 4)


def test_a_truncate_read_first_after_a_restart_is_published_with_the_topics_last_schema(make):
    # The stream stops right after the commit of the transaction before the TRUNCATE, so the
    # next run's first event of app.t is the TRUNCATE: no row of it was read in that run.
    events = list(ReplayedBinlog("engine.binlog", Position(FILE, 4)))
    at = next(i for i, e in enumerate(events) if "TRUNCATE" in (getattr(e, "query", "") or ""))
    tx_start = next(e.packet.log_pos for e in reversed(events[:at])
                    if e.__class__.__name__ == "XidEvent")
    streamer, publisher = make()

    def stop_before_the_truncate(position):
        if position.pos == tx_start and not position.rows:
            streamer.request_stop()

    publisher.on_commit = stop_before_the_truncate
    replay(streamer, publisher, live=True)
    assert publisher.committed.pos == tx_start and publisher.changes()[-1] == ("c", 8)
    again, resumed = make()
    resumed.log = list(publisher.log)  # the same Kafka: the schema topic of the first run
    first = len(resumed.log)
    replay(again, resumed, start=publisher.committed)
    later = [m for messages, _ in resumed.log[first:] for m in messages]
    dec = resumed.decoder()
    ops = [dec.decode(v)["op"] for t, _, v in later if t == "test.app.t"]
    assert ops == ["t", "c"]  # the TRUNCATE once, then INSERT 9
    # Its schema was announced again, before it, in the same transaction.
    topics = [t for t, _, _ in later]
    assert topics.index("test.__schemas") < topics.index("test.app.t")


class FramingRegistry:
    """A schema registry that gives each subject the next id (schema_registry.frame's job)."""

    def __init__(self):
        self.ids = {}

    def frame(self, topic, value_writer, key_writer):
        from streamer.codec import avro
        for subject, writer in ((f"{topic}-value", value_writer), (f"{topic}-key", key_writer)):
            if writer is not None:
                writer.header = avro.confluent_header(self.ids.setdefault(subject, len(self.ids) + 1))


@pytest.mark.parametrize("fmt", [None, {"format": "debezium", "debezium": {"encoding": "avro"}}])
def test_under_a_registry_a_truncate_read_first_after_a_restart_is_framed_by_it(make, fmt):
    # A table known only by its topic's last schema (TopicSchema) is announced like a version:
    # its writer registered and framed, so its TRUNCATE is in the Confluent wire format too.
    events = list(ReplayedBinlog("engine.binlog", Position(FILE, 4)))
    at = next(i for i, e in enumerate(events) if "TRUNCATE" in (getattr(e, "query", "") or ""))
    tx_start = next(e.packet.log_pos for e in reversed(events[:at])
                    if e.__class__.__name__ == "XidEvent")
    streamer, publisher = make(sections=fmt)
    streamer.schema_registry = FramingRegistry()

    def stop_before_the_truncate(position):
        if position.pos == tx_start and not position.rows:
            streamer.request_stop()

    publisher.on_commit = stop_before_the_truncate
    replay(streamer, publisher, live=True)
    again, resumed = make(sections=fmt)
    again.schema_registry = registry = FramingRegistry()
    resumed.log = list(publisher.log)
    first = len(resumed.log)
    replay(again, resumed, start=publisher.committed)
    values = [v for messages, _ in resumed.log[first:] for t, _, v in messages
              if t == "test.app.t"]
    assert len(values) == 2  # the TRUNCATE, then INSERT 9
    truncate_id = registry.ids["test.app.t-value"]
    assert values[0][:5] == b"\x00" + truncate_id.to_bytes(4, "big"), values[0][:8]


def _rolled_back_group():
    # binlogs/rollback.sql: 60 rows in 8 rows events (the group at 1070), its COMMIT rewritten
    # into the ROLLBACK a server writes when a transaction that touched a non-transactional
    # table too is rolled back (in row format those rows are a group of their own: these 60 are
    # all a transactional table's, and none is in the table).
    from tests.unit.engine_parts import query_rewritten
    return query_rewritten("rollback.binlog", 61944, b"COMMIT", b"ROLLBACK")


def _taken_back(make, monkeypatch, binlog, look_ahead, data=None, **kwargs):
    """Run ``binlog`` supervised; (reads made, sleeps, the publisher). With ``look_ahead`` 0,
    no group is read whole first: rows taken back are found as they are, and read again."""
    from streamer.engine.stages import savepoints
    monkeypatch.setattr(savepoints, "LOOK_AHEAD", look_ahead)
    supervisor, publisher, sleeps = _supervised(make, monkeypatch, **kwargs)
    reads = []

    def reader(cfg, password, start, gtid):
        reads.append(start)
        return ReplayedBinlog(binlog, start, on_end=supervisor.request_stop, data=data)

    supervisor.new_reader = reader
    assert supervisor.run() == 0
    return len(reads), sleeps, publisher


@pytest.mark.parametrize("look_ahead", [10000, 0])
def test_a_group_that_ends_in_rollback_publishes_none_of_its_rows(make, monkeypatch, look_ahead):
    reads, sleeps, publisher = _taken_back(make, monkeypatch, "rollback.binlog", look_ahead,
                                           data=_rolled_back_group())
    assert publisher.changes() == [("c", 1), ("c", 2), ("c", 3)]
    if look_ahead:  # read whole first: its rows were never published
        assert (reads, sleeps, publisher.aborts) == (1, [], 0)
    else:  # in the open batch: aborted (drained first), read again at once without them
        assert reads == 2 and sleeps == [0.0] and publisher.drained == 1


def test_a_rolled_back_group_a_batch_cut_committed_rows_of_is_refused_by_name(make, monkeypatch):
    from streamer.engine.stages import savepoints
    from streamer.errors import UnsupportedEvent
    from tests.unit.engine_parts import HEADER
    data = _rolled_back_group()
    monkeypatch.setattr(savepoints, "LOOK_AHEAD", 0)  # too long a group to be read whole
    for start in (Position(FILE, 4), Position(FILE, 1070, rows=20)):  # and resumed inside it
        streamer, publisher = make(batch={"max_messages": 10})
        reader = ReplayedBinlog("rollback.binlog", start, on_end=streamer.request_stop, data=data)
        with reader, pytest.raises(UnsupportedEvent) as e:
            streamer.stream(publisher, reader, start)
        # The way on: from the end of its ROLLBACK, where the next transaction begins.
        end = 61944 + HEADER.unpack_from(data, 61944)[3]
        assert f"the transaction {FILE}:1070 was rolled back after some of its rows were " \
               f"committed" in str(e.value) and \
               f"restart once from where the next transaction begins: streamer run --start-file " \
               f"{FILE} --start-pos {end};" in str(e.value), str(e.value)
        if not start.rows:  # the cut this run made is inside it
            assert (publisher.committed.pos, publisher.committed.rows) == (1070, 60)
    streamer, publisher = make(batch={"max_messages": 10})
    replay(streamer, publisher, Position(FILE, end), data=data, binlog="rollback.binlog")
    assert publisher.changes() == [("c", 2), ("c", 3)]
    # Read whole first, the same group is left out before a batch could fill with it.
    monkeypatch.setattr(savepoints, "LOOK_AHEAD", 10000)
    streamer, publisher = make(batch={"max_messages": 10})
    replay(streamer, publisher, data=data, binlog="rollback.binlog")
    assert publisher.changes() == [("c", 1), ("c", 2), ("c", 3)]


def _cut_off_group():
    # The same group without its closing COMMIT: the binlog was cut off inside it (its server
    # stopped while writing it), and the next group begins where its end would have been.
    from tests.unit.engine_parts import BINLOGS, HEADER, _rewritten
    with open(os.path.join(BINLOGS, "rollback.binlog"), "rb") as fh:
        length = HEADER.unpack_from(fh.read(), 61944)[3]
    return _rewritten("rollback.binlog", 61944, length, b"")


@pytest.mark.parametrize("look_ahead", [10000, 0])
def test_a_group_cut_off_before_its_end_publishes_none_of_its_rows(make, monkeypatch, look_ahead,
                                                                   caplog):
    reads, sleeps, publisher = _taken_back(make, monkeypatch, "rollback.binlog", look_ahead,
                                           data=_cut_off_group())
    assert publisher.changes() == [("c", 1), ("c", 2), ("c", 3)]
    # Found at the next group's start, with its 60 rows in the open batch: read again without.
    assert reads == 2 and sleeps == [0.0] and publisher.drained == 1
    said = [r.getMessage() for r in caplog.records if "never ended" in r.getMessage()]
    assert len(said) == 1 and f"the transaction {FILE}:1070 never ended" in said[0] and \
        "row changes 0..59" in said[0], said


@pytest.mark.parametrize("look_ahead", [10000, 0])
@pytest.mark.parametrize("group", ["rolled back", "cut off"])
def test_a_group_taken_back_whole_gets_no_transaction_records(make, monkeypatch, look_ahead,
                                                               group):
    from tests.unit.engine.test_txmeta import _records
    data = _rolled_back_group() if group == "rolled back" else _cut_off_group()
    _, _, publisher = _taken_back(make, monkeypatch, "rollback.binlog", look_ahead, data=data,
                                  topics={"transactions": True})
    records = [(r["status"], r["id"], r["event_count"]) for _, r in _records(publisher)]
    assert [(status, count) for status, _, count in records] == [
        ("BEGIN", None), ("END", 1), ("BEGIN", None), ("END", 2)]
    assert f"{FILE}:1070" not in {i for _, i, _ in records}


def test_a_cut_off_group_a_batch_cut_committed_rows_of_is_refused_by_name(make, monkeypatch):
    from streamer.errors import UnsupportedEvent
    start = Position(FILE, 4)
    streamer, publisher = make(batch={"max_messages": 10})
    reader = ReplayedBinlog("rollback.binlog", start, on_end=streamer.request_stop,
                            data=_cut_off_group())
    with reader, pytest.raises(UnsupportedEvent) as e:
        streamer.stream(publisher, reader, start)
    assert f"the transaction {FILE}:1070 never ended" in str(e.value) and \
        f"--start-file {FILE} --start-pos 61944;" in str(e.value), str(e.value)
    # Resumed inside it (the checkpoint of the cut), it is refused again; from there, it goes on.
    assert (publisher.committed.pos, publisher.committed.rows) == (1070, 60)
    for start, refused in ((publisher.committed, True), (Position(FILE, 61944), False)):
        streamer, publisher = make(batch={"max_messages": 10})
        if refused:
            with pytest.raises(UnsupportedEvent, match="never ended"):
                replay(streamer, publisher, start, data=_cut_off_group(), binlog="rollback.binlog")
        else:
            replay(streamer, publisher, start, data=_cut_off_group(), binlog="rollback.binlog")
            assert publisher.changes() == [("c", 2), ("c", 3)]


def test_a_cut_off_group_is_refused_as_well_when_the_next_binlog_begins_before_the_next_group(
        make):
    # As the server sends it: the old binlog ends inside the group, then come the rotate to the
    # next file (and its start), then the next group. A batch cut inside the group is still
    # inside it, whichever file the stream has moved on to.
    import struct

    from pymysqlreplication.constants.BINLOG import ROTATE_EVENT

    from streamer.errors import UnsupportedEvent
    from tests.unit.engine_parts import BINLOGS, HEADER, _rewritten
    with open(os.path.join(BINLOGS, "rollback.binlog"), "rb") as fh:
        length = HEADER.unpack_from(fh.read(), 61944)[3]
    body = struct.pack("<Q", 4) + b"mysql-bin.000003"
    size = HEADER.size + len(body) + 4
    rotate = HEADER.pack(0, ROTATE_EVENT, 1, size, 61944 + size, 0) + body + b"\0" * 4
    start = Position(FILE, 4)
    streamer, publisher = make(batch={"max_messages": 10})
    reader = ReplayedBinlog("rollback.binlog", start, on_end=streamer.request_stop,
                            data=_rewritten("rollback.binlog", 61944, length, rotate))
    with reader, pytest.raises(UnsupportedEvent) as e:
        streamer.stream(publisher, reader, start)
    assert f"the transaction {FILE}:1070 never ended" in str(e.value) and \
        "after some of its rows were committed" in str(e.value) and \
        f"--start-file mysql-bin.000003 --start-pos {61944 + size};" in str(e.value), str(e.value)


def test_only_a_group_with_rows_and_no_end_is_taken_back():
    from types import SimpleNamespace

    from streamer.engine.stages import savepoints
    from streamer.engine.tracker import Tracker
    from streamer.errors import RolledBackRows
    tracker = Tracker(Position(FILE, 4))
    policy = SimpleNamespace(committed_at=(FILE, 4, 0))
    stage = savepoints.Savepoints(SimpleNamespace(tracker=tracker, policy=policy), {})
    gtid = SimpleNamespace(query="BEGIN", packet=SimpleNamespace(log_pos=130, event_size=30))
    # Between groups; a group with no rows yet (a GTID's BEGIN); a statement that is a group of
    # its own (not explicit): nothing to take back.
    for in_tx, explicit, rows in ((False, True, 5), (True, True, 0), (True, False, 5)):
        tracker.in_tx, tracker.explicit, tracker.tx_rows = in_tx, explicit, rows
        assert stage.on_group_start(gtid) == 0 and stage.on_query(gtid) == 0
    tracker.in_tx, tracker.explicit, tracker.tx_rows, tracker.txid = True, True, 5, "f:9"
    for begins in (stage.on_group_start, stage.on_query):  # a GTID event; MySQL's BEGIN
        stage.holes.clear()
        with pytest.raises(RolledBackRows, match="f:9 never ended"):
            begins(gtid)
        assert stage.holes == {"f:9": [(0, 5)]}
    assert stage.on_group_start(gtid) == 0  # read again: known, read on without them


class ArrivingSoon(ReplayedBinlog):
    """A live recording in which the next transaction arrives during the first wait the loop
    makes for more (``arrives_within``): so no heartbeat comes between those two. Each wait
    asked for is noted, with the batch's age when it was asked."""

    def __init__(self, *args, batch_age=None, **kwargs):
        super().__init__(*args, live=True, **kwargs)
        self.batch_age = batch_age
        self.waits = []
        self._skip_heartbeat = False

    def arrives_within(self, seconds):
        self.waits.append((seconds, self.batch_age()))
        self._skip_heartbeat = len(self.waits) == 1
        return self._skip_heartbeat

    def __iter__(self):
        for event in super().__iter__():
            if self._skip_heartbeat and event.__class__.__name__ == "HeartbeatLogEvent":
                self._skip_heartbeat = False
                continue
            yield event


@pytest.mark.parametrize("gather_ms", [0.8, 0])
def test_live_a_caught_up_batch_waits_for_more_until_its_partitions_register(make, gather_ms,
                                                                              monkeypatch):
    # batch.gather_ms: a caught-up batch younger than that waits up to the rest of it for more
    # changes before it commits; what arrives meanwhile goes in the same batch. 0: no wait.
    clock = FakeClock(step=0.00001)
    streamer, publisher = make(batch={"linger_ms": 10000, "min_linger_ms": 0,
                                      "gather_ms": gather_ms}, clock=clock)
    first = next(e for e in ReplayedBinlog("engine.binlog", Position(FILE, 4))
                 if getattr(e, "rows", None))
    clock.wall = first.timestamp + 0.5
    start = Position(FILE, 4)
    batches = []
    reader = ArrivingSoon("engine.binlog", start, on_end=streamer.request_stop,
                          batch_age=lambda: clock.now - batches[-1].started)
    from streamer.engine import commit, streamer as engine_streamer

    class Noted(commit.CommitPolicy):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            batches.append(self)

    monkeypatch.setattr(engine_streamer, "CommitPolicy", Noted)
    with reader:
        streamer.stream(publisher, reader, start)
    assert publisher.changes() == ALL
    published = [msgs for msgs, _ in publisher.log if any(m[0].startswith("test.app") for m in msgs)]
    if not gather_ms:
        assert reader.waits == [] and len(published) == 5  # as without the wait
        return
    # Transactions 1 and 2 in one batch: the second "arrived" during the first's wait. Every
    # other transaction waited, saw nothing come, and committed alone.
    assert len(published) == 4 and len(reader.waits) == 5
    assert sum(1 for m in published[0] if m[0] == "test.app.t") == len(ALL[:12])  # 3 + 9
    # Each wait is what was left of the batch's 0.8 ms, counted from its start.
    for seconds, age in reader.waits:
        assert 0 < seconds <= 0.0008 and seconds + age == pytest.approx(0.0008, abs=0.00003)
    assert all(pos.rows == 0 for _, pos in publisher.log)


@pytest.mark.parametrize("look_ahead", [10000, 0])
def test_rows_a_rollback_to_savepoint_took_back_are_never_published(make, monkeypatch,
                                                                     look_ahead):
    # binlogs/savepoint.sql: MariaDB writes rows 3 and 4, then ROLLBACK TO `s`, because the
    # transaction touched a MyISAM table. Its group is read whole first and the two left out;
    # read as it comes, the batch holding them is aborted and the transaction read again from
    # the checkpoint without them. Either way their places in it are kept.
    reads, sleeps, publisher = _taken_back(make, monkeypatch, "savepoint.binlog", look_ahead)
    assert publisher.changes() == [("c", 1), ("c", 1), ("c", 2), ("c", 5), ("c", 6)]
    decoder = publisher.decoder()
    five = [decoder.decode(v) for t, _, v in publisher.messages() if t == "test.app.t"][2]
    assert five["after"] == {"id": 5} and five["source"]["tx_row"] == 3  # 2, 3, 4, then 5
    if look_ahead:
        assert (reads, sleeps, publisher.aborts) == (1, [], 0)
    else:  # no failure: read again at once (no reconnect backoff), drained before the abort
        assert reads == 2 and sleeps == [0.0] and publisher.drained == 1


def test_topics_headers_put_op_db_table_and_schema_id_on_every_table_message(make):
    streamer, publisher = make(topics={"headers": True})
    replay(streamer, publisher)
    table_messages = [(t, k, v) for t, k, v in publisher.messages() if t.startswith("test.app.")]
    assert [t for t, _ in publisher.headers] == [t for t, _, _ in table_messages]
    decoder = publisher.decoder()
    ops = []
    for (topic, key, value), (_, headers) in zip(table_messages, publisher.headers):
        h = dict(headers)
        assert (h["db"], h["table"]) == (b"app", topic.rsplit(".", 1)[1].encode())
        if value is None:  # a tombstone carries its delete's headers
            ops.append(("tombstone", h["op"]))
            continue
        env = decoder.decode(value)
        ops.append((env["op"], h["op"]))
        # The single-object frame's schema fingerprint, as the value names it.
        assert h["schema_id"] == value[2:10].hex().encode()
    assert [op for op, _ in ops] == [op for op, _ in ALL]
    assert all(h == (b"d" if op == "tombstone" else op.encode()) for op, h in ops)


def test_without_topics_headers_no_message_has_any(make):
    streamer, publisher = make()
    replay(streamer, publisher)
    assert publisher.messages() and publisher.headers == []


def _fake(cls, **attrs):
    """An event of the library's class ``cls`` with only ``attrs`` set."""
    e = cls.__new__(cls)
    e.__dict__.update(attrs)
    return e


def _served(events, pulled):
    """``events`` as a server sends them, each noted in ``pulled`` as it is read."""
    for e in events:
        pulled.append(e)
        yield e


def test_only_a_group_that_may_take_rows_back_is_read_whole_before_it_is_handed_on():
    from pymysqlreplication.event import MariadbGtidEvent, XidEvent
    from streamer.engine.stages.savepoints import looked_ahead

    xid = _fake(XidEvent)
    group = [_fake(MariadbGtidEvent, flags=4 | 8), xid,  # FL_TRANSACTIONAL: InnoDB alone
             _fake(MariadbGtidEvent, flags=8), xid]  # a non-transactional table was touched
    pulled = []
    events = looked_ahead(_served(group, pulled))
    assert next(events) is group[0] and len(pulled) == 1  # handed on as it came
    assert next(events) is xid
    assert next(events) is group[2] and len(pulled) == 4 and group[2].holes is None


def test_a_group_read_whole_that_ends_unknown_is_handed_on_when_the_next_begins():
    from pymysqlreplication.event import MariadbGtidEvent, QueryEvent
    from streamer.engine.stages.savepoints import looked_ahead

    stray = _fake(QueryEvent, query="DO 1")  # no end the tracker knows
    group = [_fake(MariadbGtidEvent, flags=8), stray, _fake(MariadbGtidEvent, flags=8),
             _fake(QueryEvent, query="ROLLBACK")]
    pulled = []
    events = looked_ahead(_served(group, pulled))
    assert next(events) is group[0] and len(pulled) == 3  # read up to the next group's start
    assert next(events) is stray
    assert next(events) is group[2] and len(pulled) == 4  # itself read whole, then
    assert group[2].holes is None and next(events) is group[3]  # (no rows to take back)
    assert next(events, None) is None


def test_a_group_read_whole_never_decodes_its_rows_to_count_them(monkeypatch):
    # Read before the stream reaches their table map, rows would be decoded without their
    # table's plan, and kept so: a row that can't be counted undecoded leaves the group's holes
    # to be found as it comes.
    from pymysqlreplication.event import MariadbGtidEvent, QueryEvent
    from pymysqlreplication.row_event import WriteRowsEvent
    from streamer.engine.stages import savepoints

    rows = _fake(WriteRowsEvent)  # nothing set: reading its rows would raise
    group = [_fake(MariadbGtidEvent, flags=8), _fake(QueryEvent, query="SAVEPOINT `s`"), rows,
             _fake(QueryEvent, query="ROLLBACK TO `s`"), _fake(QueryEvent, query="COMMIT")]
    monkeypatch.setattr(savepoints.rowcount, "count", lambda event: None)
    assert savepoints.holes_of(group) is None
    monkeypatch.setattr(savepoints.rowcount, "count", lambda event: 2)
    assert savepoints.holes_of(group) == [(0, 2)]


def test_a_group_read_whole_decodes_each_rows_event_by_its_own_table_map():
    # The library keeps the last table map read for each table id; read ahead, a rows event
    # would be decoded by the next statement's map, which has no plan attached yet.
    from pymysqlreplication.event import MariadbGtidEvent, XidEvent
    from pymysqlreplication.row_event import TableMapEvent, WriteRowsEvent
    from streamer.engine.stages.savepoints import looked_ahead

    from types import SimpleNamespace

    library = {}
    # The Table objects of two maps of table 7 (no columns: the rows go uncounted).
    first, second = SimpleNamespace(columns=[]), SimpleNamespace(columns=[])
    maps = [_fake(TableMapEvent, table_id=7, table=t) for t in (first, second)]
    rows = [_fake(WriteRowsEvent, table_id=7, table_map=library, number_of_columns=1)
            for _ in maps]

    def server():
        for e in [_fake(MariadbGtidEvent, flags=8), maps[0], rows[0], maps[1], rows[1],
                  _fake(XidEvent)]:
            if e.__class__ is TableMapEvent:
                library[7] = e.table  # as the library does when it reads one
            yield e

    assert len(list(looked_ahead(server()))) == 6 and library[7] is second
    assert rows[0].table_map[7] is first and rows[1].table_map[7] is second


def test_the_holes_kept_for_reading_transactions_again_are_the_latest_few(monkeypatch):
    from types import SimpleNamespace

    from streamer.engine.stages import savepoints
    from streamer.errors import RolledBackRows
    monkeypatch.setattr(savepoints, "HOLES_KEPT", 3)
    tracker = SimpleNamespace(txid="", holes=None)
    stage = savepoints.Savepoints(SimpleNamespace(tracker=tracker), {})
    for n in range(5):
        tracker.txid = f"{FILE}:{n}"
        for hole in ((0, 2), (4, 6)):
            with pytest.raises(RolledBackRows):
                stage._take_back(hole, False, savepoints.TO_SAVEPOINT)
    # A long-lived process doesn't keep every one; a transaction's own holes stay together.
    assert stage.holes == {f"{FILE}:{n}": [(0, 2), (4, 6)] for n in (2, 3, 4)}
    stage._take_back((4, 6), False, savepoints.TO_SAVEPOINT)  # known: read on without it


@pytest.mark.parametrize("error, waits, drained", [
    # A connection that lasted (here: longer than the longest wait) and dropped is a blip: the
    # wait starts from the first delay again each time.
    ("StreamInterrupted", [0.5, 0.5, 0.5, 0.5], 4),
    # Ended for another reader of its server_id, however long it lasted: the wait keeps
    # growing, so two readers of one id don't take the stream from each other every second.
    ("ServerIdTaken", [0.5, 1.0, 2.0, 4.0], 4),
    # The source's failures have the open batch delivered before its abort (Kafka is well);
    # Kafka's own (the batch already aborted) do not wait for messages that may never go.
    ("BatchAborted", [0.5, 0.5, 0.5, 0.5], 0),
])
def test_a_stream_taken_by_another_reader_of_its_server_id_waits_longer_each_time(
        make, monkeypatch, error, waits, drained):
    from streamer import errors

    clock = FakeClock()
    supervisor, publisher, sleeps = _supervised(make, monkeypatch, clock=clock)
    opened = []

    def taken():
        if len(opened) > len(waits):
            supervisor.request_stop()
            return ()
        clock.now += 60.0  # the connection read for a minute before it was ended
        raise getattr(errors, error)("ended")

    supervisor.new_reader = _stream_class(opened, taken)
    assert supervisor.run() == 0
    assert sleeps == waits and publisher.drained == drained


def test_a_registry_that_can_t_serve_is_waited_for_from_the_checkpoint_with_the_backoff(
        make, monkeypatch, caplog):
    from streamer.errors import RegistryUnavailable

    supervisor, publisher, sleeps = _supervised(make, monkeypatch)
    opened = []

    def down():
        if len(opened) == 5:
            supervisor.request_stop()
            return ()
        raise RegistryUnavailable("schema registry at http://r:8081 is not reachable (refused)")

    supervisor.new_reader = _stream_class(opened, down)
    with caplog.at_level(logging.WARNING):
        assert supervisor.run() == 0
    # No commit between the attempts: the wait grows as for a server that stays down, and the
    # open batch (Kafka is well) is delivered before it is dropped.
    assert sleeps == [0.5, 1.0, 2.0, 4.0] and publisher.drained == 4
    assert caplog.text.count("schema registry at http://r:8081 is not reachable (refused); "
                             "resuming from") == 4


def test_a_registry_waited_for_past_the_attempts_exits_as_the_registry_s_error(make, monkeypatch):
    from streamer.errors import EXIT_REGISTRY, RegistryError, RegistryUnavailable

    supervisor, _, sleeps = _supervised(make, monkeypatch)
    supervisor.cfg["mysql"]["reconnect_max_attempts"] = 2

    def down():
        raise RegistryUnavailable("schema registry at http://r:8081 answered 503: busy")

    supervisor.new_reader = _stream_class([], down)
    with pytest.raises(RegistryError, match="gave up after 2 reconnect attempts: schema "
                                            "registry at http://r:8081 answered 503") as raised:
        supervisor.run()
    assert raised.value.exit_code == EXIT_REGISTRY and sleeps == [0.5, 1.0]


@pytest.mark.parametrize("error, said", [
    # A snapshot's statement on a connection that had already broken: it stopped the streamer.
    (pymysql.err.InterfaceError(0, ""),
     "a MySQL connection was lost earlier and not yet opened again; resuming from"),
    (pymysql.err.OperationalError(2013, "Lost connection to MySQL server during query"),
     "a MySQL connection was lost (2013: Lost connection to MySQL server during query); "
     "resuming from"),
])
def test_a_mysql_connection_lost_is_retried_and_said_in_words(make, monkeypatch, caplog, error,
                                                             said):
    supervisor, publisher, _ = _supervised(make, monkeypatch)
    opened = []

    def lost():
        if len(opened) == 2:
            supervisor.request_stop()
            return ()
        raise error

    supervisor.new_reader = _stream_class(opened, lost)
    with caplog.at_level(logging.WARNING):
        assert supervisor.run() == 0
    assert len(opened) == 2 and said in caplog.text
