"""Two-phase XA transactions on a recorded MariaDB binlog (binlogs/xa.sql): a prepared one's rows
are published at its XA COMMIT, read again from its prepare group, and never when XA ROLLBACK
follows; a restart between the two keeps it pending in the checkpoint."""
import pytest

from streamer import errors
from streamer.position import Position
from streamer.source import patches
from tests.unit.engine_parts import ReplayedBinlog
from tests.unit.engine.test_engine import FILE

patches.apply()

X1 = "X'7831',X'',1"
PREPARE_X1 = 921  # the GTID event of x1's XA START ... XA PREPARE group
BETWEEN = 1468  # the plain transaction between the two prepares
# Every change as published: x1's rows at its XA COMMIT (after "between" and x2's prepare), x2's
# never (rolled back), x3's (ONE PHASE: an ordinary transaction in MariaDB's binlog) in place.
ALL = [("c", 1), ("c", 2), ("c", 10), ("c", 11), ("u", 1), ("c", 30), ("c", 3)]


def _run(make, start, stop_at=None, **batch):
    streamer, publisher = make(batch=batch or {"max_messages": 1})
    streamer.reread = lambda pos: ReplayedBinlog("xa.binlog", pos)

    def stop(position):
        if stop_at is not None and stop_at(position):
            streamer.request_stop()

    publisher.on_commit = stop
    reader = ReplayedBinlog("xa.binlog", start, on_end=streamer.request_stop)
    with reader:
        streamer.stream(publisher, reader, start)
    return publisher


def test_a_prepared_xa_transaction_is_published_at_its_commit_and_a_rolled_back_one_never(make):
    publisher = _run(make, Position(FILE, 4))
    assert publisher.changes() == ALL
    decoder = publisher.decoder()
    xa = [decoder.decode(v) for _, _, v in publisher.messages()][2:5]
    # Each row keeps its own place in the binlog: x1's prepare group, its GTID, its txid.
    assert [(e["source"]["pos"], e["source"]["gtid"], e["source"]["txid"], e["source"]["tx_row"])
            for e in xa] == [(1107, "0-1-9", f"{FILE}:921", 0), (1107, "0-1-9", f"{FILE}:921", 1),
                             (1290, "0-1-9", f"{FILE}:921", 2)]
    assert xa[2]["before"] == {"id": 1, "v": "before"} and xa[2]["after"] == {"id": 1, "v": "by xa"}
    assert publisher.committed.xa is None  # nothing left pending


def test_a_restart_between_prepare_and_commit_publishes_the_xa_rows_once(make):
    # Stopped at a checkpoint inside "between": x1 is prepared, and pending in the checkpoint.
    first = _run(make, Position(FILE, 4), stop_at=lambda p: (p.pos, p.rows) == (BETWEEN, 1))
    checkpoint = first.committed
    assert checkpoint.xa == {X1: [FILE, PREPARE_X1, "0-1-9", f"{FILE}:921"]}
    assert first.changes() == ALL[:2]
    second = _run(make, checkpoint)
    assert first.changes() + second.changes() == ALL


def test_an_xa_commit_whose_prepare_came_before_the_start_is_refused_not_lost(make):
    with pytest.raises(errors.UnsupportedEvent, match=r"XA COMMIT of X'7831',X'',1 at "
                                                      r"mysql-bin.000002:2101: the XA PREPARE of "
                                                      r"that transaction came before"):
        _run(make, Position(FILE, BETWEEN))


def test_an_xa_rollback_whose_prepare_came_before_the_start_needs_nothing(make):
    # From x1's commit group on: x1's commit is refused; from x2's rollback on, all is well.
    publisher = _run(make, Position(FILE, 2187))
    assert publisher.changes() == ALL[-2:]


def test_with_transaction_metadata_the_xa_rows_are_framed_as_their_own_transaction(make):
    from tests.unit.engine.test_txmeta import _records
    streamer, publisher = make(topics={"transactions": True})
    streamer.reread = lambda pos: ReplayedBinlog("xa.binlog", pos)
    reader = ReplayedBinlog("xa.binlog", Position(FILE, 4), on_end=streamer.request_stop)
    with reader:
        streamer.stream(publisher, reader, Position(FILE, 4))
    records = [r for _, r in _records(publisher)]
    assert [(r["status"], r["id"], r["event_count"]) for r in records] == [
        ("BEGIN", f"{FILE}:680", None), ("END", f"{FILE}:680", 1),
        ("BEGIN", f"{FILE}:1468", None), ("END", f"{FILE}:1468", 1),
        ("BEGIN", f"{FILE}:921", None), ("END", f"{FILE}:921", 3),      # x1, at its commit
        ("BEGIN", f"{FILE}:2319", None), ("END", f"{FILE}:2319", 1),
        ("BEGIN", f"{FILE}:2567", None), ("END", f"{FILE}:2567", 1)]


@pytest.mark.parametrize("one_phase", [False, True])
def test_mysqls_xa_group_opens_with_its_xa_start_and_ends_at_its_prepare(one_phase):
    # MySQL's group: Gtid, Query XA START, rows, Query XA END, XA_prepare (one_phase for XA
    # COMMIT ... ONE PHASE). Its rows are held back (tracker.xa) either way; prepared, it waits.
    from types import SimpleNamespace

    from pymysqlreplication.event import GtidEvent, QueryEvent, XAPrepareEvent

    from streamer.engine.tracker import Tracker

    def ev(start, end, **kw):
        return SimpleNamespace(packet=SimpleNamespace(log_pos=end, event_size=end - start), **kw)

    uuid = "c8ec3a3b-ce8d-11eb-a313-8c8caaa4a076"
    t = Tracker(Position("binlog.000001", 100))
    assert t.on_event(ev(100, 179, gtid=f"{uuid}:7", flags=0), GtidEvent) is False
    assert t.on_event(ev(179, 260, query="XA START X'6d31',X'',1"), QueryEvent) is False
    assert t.xa and t.in_tx
    t.count(2)
    assert t.on_event(ev(400, 480, query="XA END X'6d31',X'',1"), QueryEvent) is False
    prepare = ev(480, 520, one_phase=one_phase, xid_format_id=1, xid_gtrid=b"m1", xid_bqual=b"")
    assert t.on_event(prepare, XAPrepareEvent) is True and not t.xa and not t.in_tx
    pending = {} if one_phase else {"X'6d31',X'',1": ["binlog.000001", 100, f"{uuid}:7",
                                                      "binlog.000001:100"]}
    assert t.xa_pending == pending and t.position().pos == 520


def test_an_xa_committed_in_one_phase_is_published_at_its_prepare_event(make):
    # MySQL writes XA COMMIT ... ONE PHASE as an XA group whose XA_prepare event says one_phase.
    # Here x1's prepare event says so (and its later outcome is a rollback that finds nothing).
    from tests.unit.engine_parts import query_rewritten
    data = bytearray(query_rewritten("xa.binlog", 2101, b"XA COMMIT X'7831',X'',1",
                                     b"XA ROLLBACK X'7831',X'',1"))
    assert data[1430 + 4] == 38  # the XA_prepare event: its type, then its body after the header
    data[1430 + 19] = 1  # one_phase
    streamer, publisher = make(batch={"max_messages": 1})
    streamer.reread = lambda pos: ReplayedBinlog("xa.binlog", pos, data=bytes(data))
    reader = ReplayedBinlog("xa.binlog", Position(FILE, 4), on_end=streamer.request_stop,
                            data=bytes(data))
    with reader:
        streamer.stream(publisher, reader, Position(FILE, 4))
    assert publisher.changes() == [("c", 1), ("c", 10), ("c", 11), ("u", 1), ("c", 2), ("c", 30),
                                   ("c", 3)]


def test_an_xa_commits_rows_leave_an_open_snapshot_window_like_any_change(make):
    # A chunk of app.t read before x1's XA COMMIT holds the rows as they were; x1's rows, published
    # at its commit inside the chunk's window, are newer: their keys must leave the chunk, or its
    # older copies would land after them and win.
    from streamer.engine.snapshot import Chunk

    streamer, publisher = make(batch={"max_messages": 1})
    streamer.reread = lambda pos: ReplayedBinlog("xa.binlog", pos)
    start = Position(FILE, 680)  # the first transaction, after the CREATE TABLE
    reader = ReplayedBinlog("xa.binlog", start, on_end=streamer.request_stop)
    pipeline = streamer.pipeline(publisher, reader, start)
    stage = next(s for s in pipeline.stages if s.__class__.__name__ == "SnapshotStage")
    from types import SimpleNamespace

    tv = SimpleNamespace(db="app", table="t", topic="ns.app.t", compacted=True,
                         convert=lambda values: None)
    snaps = streamer.snapshots
    snaps.chunk = snaps.window = chunk = Chunk({"table": "app.t"}, "L", "H", tv, ["id"], None,
                                               False)
    chunk.add([{"id": k, "v": "old"} for k in (10, 11, 20)])
    stage._follow_window()
    with reader:
        pipeline.stream(reader)
    # x1's rows (10, 11) left it at its commit; x2's (20) were rolled back: never changed.
    assert chunk.kept() == [(20,)]
    assert publisher.changes() == ALL


def test_a_large_xa_transaction_is_cut_into_batches_and_a_restart_inside_it_loses_and_doubles_nothing(
        make):
    # x1's three row changes at its XA COMMIT, one per batch: the checkpoint between them keeps
    # how many are out, and a restart from it publishes the rest once.
    def inside_x1(position):
        entry = (position.xa or {}).get(X1)
        return entry is not None and len(entry) > 4 and entry[4] == 2

    first = _run(make, Position(FILE, 4), stop_at=inside_x1)
    checkpoint = first.committed  # the stop came at that cut, inside the XA COMMIT
    assert checkpoint.xa[X1][4] == 2 and first.changes() == ALL[:4]
    second = _run(make, checkpoint)
    assert first.changes() + second.changes() == ALL
