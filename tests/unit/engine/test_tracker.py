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
