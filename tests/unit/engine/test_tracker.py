"""The Tracker's checkpoint before the transaction a resume skips into has begun again."""
from streamer.engine.tracker import Tracker
from streamer.position import Position


def _start():
    return Position("mysql-bin.000026", 39905263, "0-1-50642,7-1-2", 860, 1,
                    transaction={"id": "mysql-bin.000026:39905263", "rows": 860},
                    tx_gtid="0-1-50643")


def test_a_checkpoint_before_the_resumed_transaction_begins_keeps_the_start_and_its_skip():
    # A clean stop right after a start commits before the first event: its checkpoint must
    # still skip the rows the previous run published, or the next run publishes them again.
    tracker = Tracker(_start())
    for at in (tracker.position(), tracker.position()):
        assert (at.file, at.pos, at.gtid_set, at.rows, at.tx_gtid, at.transaction) == (
            "mysql-bin.000026", 39905263, "0-1-50642,7-1-2", 860, "0-1-50643",
            {"id": "mysql-bin.000026:39905263", "rows": 860})
    # Once it begins again, the rows counted are the checkpoint's; once it ends, the next.
    tracker.begin(39905263, "0-1-50643")
    assert tracker.count(900) == 860
    assert (tracker.position().pos, tracker.position().rows) == (39905263, 900)
    tracker.end(39999999)
    assert (tracker.position().pos, tracker.position().rows) == (39999999, 0)


def test_a_start_between_transactions_checkpoints_as_before():
    tracker = Tracker(Position("mysql-bin.000026", 400, "0-1-5", 0, 1))
    at = tracker.position()
    assert (at.file, at.pos, at.rows) == ("mysql-bin.000026", 400, 0)


def _rotate(file, pos, log_pos):
    """A rotate event: the server's artificial one opening a dump has log_pos 0."""
    from types import SimpleNamespace
    return SimpleNamespace(next_binlog=file, position=pos, packet=SimpleNamespace(log_pos=log_pos))


def test_a_start_by_gtid_set_is_not_placed_by_the_dumps_artificial_rotate():
    # A dump by GTID set opens with a rotate to (file, 4), then leaves out the set's
    # transactions: a checkpoint of (file, 4) with the set would, resumed by file, publish them
    # again. The position stays the start until a transaction begins.
    from pymysqlreplication.event import RotateEvent

    uuid = "c0fc845d-f036-11f1-b603-02fc00000001"
    tracker = Tracker(Position("", 4, f"{uuid}:1-90", 0, 1))
    tracker.on_event(_rotate("mysql-bin.000008", 4, 0), RotateEvent)
    at = tracker.position()
    assert (at.file, at.pos, at.gtid_set) == ("", 4, f"{uuid}:1-90")
    tracker.begin(70000, f"{uuid}:91")
    at = tracker.position()
    assert (at.file, at.pos, at.gtid_set) == ("mysql-bin.000008", 70000, f"{uuid}:1-90")
    tracker.end(70500)
    at = tracker.position()
    assert (at.file, at.pos, at.gtid_set) == ("mysql-bin.000008", 70500, f"{uuid}:1-91")
    # By GTID set from a checkpoint's file (mysql.position_mode gtid): its file and offset stay.
    tracker = Tracker(Position("mysql-bin.000007", 900, f"{uuid}:1-90", 0, 1), by_gtid=True)
    tracker.on_event(_rotate("mysql-bin.000007", 4, 0), RotateEvent)
    assert (tracker.position().file, tracker.position().pos) == ("mysql-bin.000007", 900)
    # A real rotate, a file's end: everything before it was sent or is in the set.
    tracker.on_event(_rotate("mysql-bin.000008", 4, 5000), RotateEvent)
    at = tracker.position()
    assert (at.file, at.pos, at.gtid_set) == ("mysql-bin.000008", 4, f"{uuid}:1-90")


def test_a_start_by_file_is_placed_by_its_rotate_as_before():
    from pymysqlreplication.event import RotateEvent

    tracker = Tracker(Position("mysql-bin.000007", 900, "0-1-5", 0, 1))
    tracker.on_event(_rotate("mysql-bin.000007", 900, 0), RotateEvent)
    assert (tracker.position().file, tracker.position().pos) == ("mysql-bin.000007", 900)
