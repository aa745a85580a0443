"""Two-phase XA transactions on a recorded MariaDB binlog (binlogs/xa.sql): a prepared one's rows
are published at its XA COMMIT, read again from its prepare group, and never when XA ROLLBACK
follows; a restart between the two keeps it pending in the checkpoint."""
import pytest

from streamer import errors
from streamer.position import Position
from streamer.source import patches
from tests.unit.engine_parts import ReplayedBinlog
from tests.unit.test_engine import FILE

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
    from tests.unit.test_txmeta import _records
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
