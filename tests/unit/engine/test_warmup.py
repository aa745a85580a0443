"""The JIT warm-up (engine.warmup) and the replayed stream it runs on (source.replay), without a
MySQL server or a Kafka broker: the live reader is one as a connected reader looks, and the
warm-up's publisher runs on librdkafka's in-process mock cluster, as in production."""
import itertools
import logging
import re
import socket
import threading
import time
import types

import pytest

from streamer import config
from streamer.engine import warmup
from streamer.position import Position
from streamer.source import patches, replay
from streamer.source.checksums import USE_CHECKSUM, BinlogConnection
from streamer.source.reader import BinlogReader
from streamer.source.server import Connection
from tests.unit.engine_parts import ReplayedBinlog

patches.apply()

WRITE, UPDATE, DELETE = 23, 24, 25  # the recording's rows events (MariaDB writes v1)



def run_made(warm, reader, **kwargs):
    """``warm.run`` at idle moments, 10 ms apart, until its pipeline is made (in a thread, from
    its first idle moment on) and it ran: what that run returned."""
    kwargs.setdefault("published", 0)
    while True:
        over = warm.run(reader, **kwargs)
        if over or warm.publisher is not None:
            return over
        time.sleep(0.01)

def recording():
    with open(warmup.RECORDING, "rb") as fh:
        return replay.Recording(fh.read())


def cfg_with(**over):
    environ = {"STREAMER__MYSQL__SERVER_ID": "99", "STREAMER_MYSQL_PASSWORD": "unused"}
    environ.update({f"STREAMER__{k.upper()}": str(v) for k, v in over.items()})
    return config.load(None, environ=environ)


class Live:
    """A BinlogReader as one that has connected and read looks: its library reader and both
    connections made, and a socket of its own on which nothing arrives."""

    def __init__(self, cfg):
        self.sock, self.far = socket.socketpair()
        self.ctl_sock, self.ctl_far = socket.socketpair()
        reader = BinlogReader(cfg, "", Position("mysql-bin.000007", 4))
        stream = reader.new_stream({})
        conn = BinlogConnection(defer_connect=True)  # as source.reader's _Connector makes it
        conn.stream = stream
        conn._sock, conn._rfile = self.sock, self.sock.makefile("rb")
        conn._next_seq_id, conn._closed, conn._current_timeout = 1, False, None
        control = Connection(defer_connect=True)
        control._sock, control._rfile = self.ctl_sock, self.ctl_sock.makefile("rb")
        control._closed = False
        control._get_dbms = lambda: "mysql"
        stream._stream_connection, stream._ctl_connection = conn, control
        stream.table_map[70] = "the live stream's table"
        reader._stream = stream
        self.reader = reader

    def close(self):
        for s in (self.sock, self.far, self.ctl_sock, self.ctl_far):
            s.close()


@pytest.fixture
def live():
    made = []

    def make(cfg=None):
        made.append(Live(cfg or cfg_with()))
        return made[-1].reader
    yield make
    for m in made:
        m.close()


def events_of(rec):
    """The recording's (WRITE, UPDATE, DELETE) rows events."""
    counts = {WRITE: 0, UPDATE: 0, DELETE: 0}
    for tx in rec.transactions:
        for event in tx:
            if event[4] in counts:
                counts[event[4]] += 1
    return tuple(counts[k] for k in (WRITE, UPDATE, DELETE))


def test_the_recording_holds_whole_single_row_transactions_of_its_two_tables():
    rec = recording()
    assert len(rec.transactions) == 37
    for tx in rec.transactions:
        assert tx[0][4] == replay.MARIADB_GTID and tx[-1][4] == replay.XID
        assert replay.ANNOTATE_ROWS not in [e[4] for e in tx]  # a server sends the streamer none
    # warmup.sql: in its table of common types, 19 INSERTs (one of two rows), 5 UPDATEs and 2
    # DELETEs of one row each; in its table of integers, 10 INSERTs, 1 UPDATE and 1 DELETE.
    assert events_of(rec) == (19 + 10, 5 + 1, 2 + 1)
    with pytest.raises(ValueError, match="magic"):
        replay.Recording(b"nope")


def test_a_replayed_stream_reads_like_a_live_one_and_leaves_the_live_reader_alone(live):
    reader = live()
    stream = reader._stream
    conn, table_map = stream._stream_connection, stream.table_map
    sock, rfile = conn._sock, conn._rfile
    rec = recording()
    seen = []
    with replay.replayed(reader, rec, 40, group=8) as r:
        assert r is not reader and (r.start.file, r.start.pos) == (replay.FILE, 4)
        for event in r:
            name = type(event).__name__
            if name == "RotateEvent":  # a server's first: artificial, no time, the file read
                assert (event.timestamp, event.next_binlog, event.position) == (0, replay.FILE, 4)
            elif name == "WriteRowsEvent":  # the others' times are now's: live, not a backlog
                assert abs(event.timestamp - time.time()) < 60
            if name == "XidEvent":
                seen.append(r.more_arrived())
            if name == "WriteRowsEvent" and len(seen) == 0:
                values = event.rows[0]["values"]
                assert (values["id"], values["name"], str(values["amount"])) == (1, "alice", "12.50")
    # 40 transactions, the recording's 37 and then its first 3 again, sent 8 at a time: the
    # reader is caught up after each group's last transaction, as a live reader is.
    assert len(seen) == 40
    assert [i for i, more in enumerate(seen) if not more] == [7, 15, 23, 31, 39]
    # The live reader keeps its own connection, socket, reader and table map.
    assert (stream._stream_connection, conn._sock, conn._rfile) == (conn, sock, rfile)
    assert stream.table_map is table_map and table_map == {70: "the live stream's table"}
    assert sock.fileno() >= 0 and not conn._closed


def test_a_replay_reads_its_own_checksums_while_the_live_stream_is_in_a_binlog_without(live):
    # The recording's events carry checksums; the live stream may be reading a binlog written
    # with binlog_checksum NONE. The twin connection tells its own stream, from its own format
    # description, and leaves the live one's as it was.
    reader = live()
    stream = reader._stream
    conn = stream._stream_connection
    conn.plain = True  # the live stream's binlog has no checksums
    setattr(stream, USE_CHECKSUM, False)
    with replay.replayed(reader, recording(), 8, group=8) as r:
        twin = r._stream._stream_connection
        assert twin.stream is r._stream and list(vars(twin)) == list(vars(conn))
        rows = [event.rows[0]["values"] for event in r if type(event).__name__ == "WriteRowsEvent"]
        assert twin.plain is False and getattr(r._stream, USE_CHECKSUM) is True
    assert (rows[0]["id"], rows[0]["name"], str(rows[0]["amount"])) == (1, "alice", "12.50")
    assert conn.plain is True and getattr(stream, USE_CHECKSUM) is False


def test_a_replayed_stream_never_waits_for_more(live, monkeypatch):
    # Its next group is sent only when the reader has read the last (its ``refill``), so the
    # loop's wait for more at a young batch's end (batch.gather_ms) could never see any: it
    # answers at once, as more_arrived does, and the warm-up spends no time waiting.
    from streamer.source import caughtup

    def no_wait(*args):
        raise AssertionError("a replayed stream waited for more")

    monkeypatch.setattr(caughtup.select, "select", no_wait)
    answers = []
    with replay.replayed(live(), recording(), 16, group=8) as r:
        for event in r:
            if type(event).__name__ == "XidEvent":
                answers.append((r.arrives_within(10.0), r.more_arrived()))
    assert [a for a, _ in answers] == [m for _, m in answers]
    assert [i for i, (a, _) in enumerate(answers) if not a] == [7, 15]


def test_a_replayed_stream_ends_after_the_group_at_which_it_is_told_to_stop(live, monkeypatch):
    # The warm-up streams all it has left in one replayed stream, asking before each group
    # whether the live stream has more; the end it then sends follows the packets already
    # sent in sequence (pymysql checks each packet's number), and each group is timed when
    # sent, so that a long stream's changes stay live ones, never a backlog.
    clock = itertools.count(1_800_000_000, 100)  # a second time a hundred seconds later
    monkeypatch.setattr(replay, "time", types.SimpleNamespace(time=lambda: next(clock)))
    asked = []

    def stop():
        asked.append(True)
        return len(asked) == 2  # before the third group

    replaying = replay.replayed(live(), recording(), 40, group=8, stop=stop)
    xids, times = 0, set()
    with replaying as r:
        for event in r:
            if type(event).__name__ == "XidEvent":
                xids += 1
            elif type(event).__name__ == "WriteRowsEvent":
                times.add(event.timestamp)
    assert (xids, replaying.sent(), len(asked)) == (16, 16, 2)
    assert len(times) == 2  # one time a group


def test_a_replayed_stream_reads_through_the_live_readers_own_class_and_layout(live):
    # The JIT's code for the stream's reads checks the raw reader's class and attributes: a
    # replay reader of another class (or with attributes of its own) made the live stream's
    # first reads after the warm-up compile that code again.
    from streamer.source import caughtup

    reader = live()
    caughtup.count_reads(reader._stream._stream_connection)
    live_raw = reader._stream._stream_connection._rfile.raw
    with replay.replayed(reader, recording(), 8, group=8) as r:
        raw = r._stream._stream_connection._rfile.raw
        assert type(raw) is type(live_raw) is caughtup.CountingSocketIO
        assert list(vars(raw)) == list(vars(live_raw))
        assert live_raw.refill is None and raw.refill is not None
        assert sum(1 for event in r if type(event).__name__ == "XidEvent") == 8
    assert not raw.refill()  # all sent: past the stream's end


def test_twins_have_the_attributes_of_the_original_in_its_order(live):
    reader = live()
    conn = reader._stream._stream_connection
    twin = replay._twin(conn, _next_seq_id=5)
    assert type(twin) is type(conn) and list(vars(twin)) == list(vars(conn))
    assert twin._next_seq_id == 5 and conn._next_seq_id == 1
    with pytest.raises(ValueError, match="no attribute"):
        replay._twin(conn, not_an_attribute=1)


def test_the_warm_up_streams_the_recording_through_the_real_loop_into_the_mock_cluster(live,
                                                                                       caplog):
    cfg = cfg_with(warmup__transactions=100)
    warm = warmup.Warmup(cfg)
    assert warm.streamer is None and warm.publisher is None  # made when first run, not at start
    caplog.set_level(logging.INFO)
    reader = live(cfg)
    assert not warm.run(reader, published=0)  # its first idle moment starts making it, apart
    assert warm.publisher is None and warm.runs == 0
    assert run_made(warm, reader)
    assert warm.runs == 1  # idle all along: one replayed stream
    # Two passes over the recording's 37 transactions, then its first 26. A pass: 30 rows
    # inserted, 6 updated and 3 deleted, each delete followed by its tombstone
    # (topics.tombstones); its first 26 transactions publish a message each, and a tombstone
    # after the one delete among them.
    assert warm.messages == 2 * (30 + 6 + 3 * 2) + (26 + 1)
    assert warm.done and warm.publisher is None and warm.streamer is None  # all let go
    text = caplog.text
    assert "JIT warm-up: 100 transactions" in text
    assert "streamer_warmup." not in text  # its tables are not the user's
    assert "Mock cluster enabled" not in text  # librdkafka's notice, below its log level


def test_the_warm_up_stops_while_the_live_stream_has_more_and_goes_on_later(live, monkeypatch):
    cfg = cfg_with(warmup__transactions=3 * warmup.SLICE)
    warm = warmup.Warmup(cfg)
    reader = live(cfg)
    monkeypatch.setattr(type(reader), "more_arrived", lambda self: True)
    assert not run_made(warm, reader)
    assert warm.runs == 1 and warm.left == 2 * warmup.SLICE and not warm.done
    assert not warm.run(reader, published=0)
    assert warm.run(reader, published=0)  # the last slice: over, whatever arrived
    assert warm.runs == 3 and warm.done


def test_a_warm_up_overtaken_by_real_changes_says_how_far_it_got(live, monkeypatch, caplog):
    # A restart into a live load: the load's changes warm the JIT before the warm-up is done.
    warm = warmup.Warmup(cfg_with(warmup__transactions=3 * warmup.SLICE))
    reader = live()
    monkeypatch.setattr(type(reader), "more_arrived", lambda self: True)
    caplog.set_level(logging.INFO)
    assert not run_made(warm, reader)  # one slice, then the live stream had more
    assert warm.run(reader, published=3 * warmup.SLICE + 2)
    assert warm.done and warm.runs == 1
    n = warmup.SLICE
    assert re.search(rf"JIT warm-up over after {n} of {3 * n} transactions \(streamed in \d+ ms, "
                     rf"in 1 runs\): the stream has published {3 * n + 2} changes of its own",
                     caplog.text)
    assert "not needed" not in caplog.text


def test_quiet_means_nothing_published_for_its_interval():
    now = [100.0]  # (steps of binary fractions: exact sums)
    quiet = warmup.Quiet(0.25, clock=lambda: now[0])
    assert quiet(0)  # nothing published since the process began
    assert not quiet(5)  # the real stream has just published
    now[0] += 0.125
    assert not quiet(5)
    now[0] += 0.125
    assert quiet(5)
    assert not quiet(6)  # published again: another interval to wait
    now[0] += 0.25
    assert quiet(6)


def test_while_real_changes_flow_the_warm_up_replays_nothing_and_goes_on_once_they_stop(live):
    # Measured at 5k rows/s after a restart: a slice ran at almost every idle moment between
    # the load's transactions, 15-40 ms each while the JIT compiled, and the load waited.
    now = [0.0]
    warm = warmup.Warmup(cfg_with(warmup__transactions=3 * warmup.SLICE),
                         quiet=warmup.Quiet(0.25, clock=lambda: now[0]))
    reader = live()
    assert not run_made(warm, reader, published=1)  # made, but the stream has just published
    assert warm.publisher is not None and warm.runs == 0 and warm.left == 3 * warmup.SLICE
    now[0] += 0.125
    assert not warm.run(reader, published=2)
    now[0] += 0.125
    assert not warm.run(reader, published=2)  # quiet for 0.125 s: not yet
    assert warm.runs == 0 and warm.left == 3 * warmup.SLICE
    now[0] += 0.125
    assert warm.run(reader, published=2)  # quiet for 0.25 s: all of it, in one replayed stream
    assert warm.runs == 1 and warm.left == 0 and warm.done


def test_a_stop_interrupts_the_warm_up_between_slices(live):
    warm = warmup.Warmup(cfg_with(warmup__transactions=3 * warmup.SLICE))
    assert not run_made(warm, live(), stopping=lambda: True)
    assert warm.runs == 1 and not warm.done
    warm.close()  # as the engine does when it stops: the mock cluster is gone when it returns
    assert warm.done and warm.publisher is None and warm.closing is None


def test_a_stop_while_the_warm_up_is_being_made_closes_what_it_made(live):
    warm = warmup.Warmup(cfg_with(warmup__transactions=3 * warmup.SLICE))
    assert not warm.run(live(), published=0)
    making = warm.making
    warm.close()
    assert making.done() and warm.done and warm.closing is None


def test_no_warm_up_once_the_live_stream_has_streamed_as_many_changes(live, caplog):
    warm = warmup.Warmup(cfg_with(warmup__transactions=50))
    caplog.set_level(logging.INFO)
    assert warm.run(live(), published=50)
    assert warm.runs == 0 and warm.done
    assert "JIT warm-up not needed: 50 changes already streamed" in caplog.text


def test_a_warm_up_overtaken_by_the_live_stream_does_not_wait_for_its_mock_cluster_to_close(
        live, monkeypatch):
    # Measured at 5k rows/s after a restart: the live stream stood still ~0.2 s, the close.
    warm = warmup.Warmup(cfg_with(warmup__transactions=3 * warmup.SLICE))
    reader = live()
    monkeypatch.setattr(type(reader), "more_arrived", lambda self: True)
    assert not run_made(warm, reader)  # made, one slice run, the stream has more
    publisher = warm.publisher
    closing = threading.Event()
    real_close = type(publisher).close

    def slow_close(self, *args, **kwargs):
        closing.wait(10)
        return real_close(self, *args, **kwargs)

    monkeypatch.setattr(type(publisher), "close", slow_close)
    assert warm.run(reader, published=3 * warmup.SLICE)  # over, and back at once
    assert warm.done and warm.publisher is None and warm.closing.is_alive()
    closing.set()
    warm.closing.join(10)
    assert not warm.closing.is_alive()


def test_a_failing_warm_up_is_a_warning_and_streaming_goes_on(caplog):
    warm = warmup.Warmup(cfg_with())
    unconnected = BinlogReader(cfg_with(), "", Position("mysql-bin.000001", 4))
    assert run_made(warm, unconnected)  # over: never tried again
    assert warm.done and warm.publisher is None
    assert "JIT warm-up stopped after 0 of 8000 transactions" in caplog.text
    assert "has not connected yet" in caplog.text


def test_only_pypy_warms_up_and_zero_turns_it_off(monkeypatch):
    monkeypatch.setattr(warmup.platform, "python_implementation", lambda: "PyPy")
    assert warmup.wanted(cfg_with())
    assert not warmup.wanted(cfg_with(warmup__transactions=0))
    monkeypatch.setattr(warmup.platform, "python_implementation", lambda: "CPython")
    assert not warmup.wanted(cfg_with())
    with pytest.raises(config.ConfigError, match="warmup.transactions"):
        cfg_with(warmup__transactions=-1)


class Recorder:
    """Stands in for the warm-up: what the loop gave it, and when."""

    def __init__(self, runs_left):
        self.calls = []
        self.runs_left = runs_left

    def run(self, reader, published, stopping):
        self.calls.append((reader, published, self.publisher.in_tx))
        self.runs_left -= 1
        return self.runs_left == 0


def test_the_loop_warms_up_only_when_caught_up_with_nothing_open_and_until_done(make):
    from tests.unit.engine.test_engine import FILE, replay as replay_engine
    from tests.unit.engine_parts import FakeClock
    clock = FakeClock(step=0.0001)
    streamer, publisher = make(batch={"linger_ms": 10000, "min_linger_ms": 0}, clock=clock)
    first = next(e for e in ReplayedBinlog("engine.binlog", Position(FILE, 4))
                 if getattr(e, "rows", None))
    clock.wall = first.timestamp + 0.5  # live
    rec = Recorder(runs_left=6)
    streamer.idle_hooks.append(rec.run)
    rec.publisher = publisher
    reader = replay_engine(streamer, publisher, live=True)
    # At each idle heartbeat (the recording's DDL before transaction 1 makes four), and right
    # after the caught-up commit of transaction 1's three rows and at the heartbeat after it:
    # never with a transaction open, always with the live reader and the messages published so
    # far. Then it was done, and the loop let go of it.
    assert [published for _, published, _ in rec.calls] == [0, 0, 0, 0, 3, 3]
    assert all(r is reader and not in_tx for r, _, in_tx in rec.calls)
    assert streamer.idle_hooks == [] and publisher.changes()[-1] == ("c", 9)
