"""The Tracker's checkpoint before the transaction a resume skips into has begun again."""
import json
from types import SimpleNamespace

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


def test_several_transactions_awaited_by_gtid_ride_in_every_checkpoint_until_they_begin():
    # Resumed by GTID set inside 0-1-8 (3 rows published, its BEGIN out): other domains'
    # transactions come first, and a restart by GTID set inside one of them adds its own skip.
    progress = {"id": "mysql-bin.000002:1234", "gtid": "0-1-8", "ts_ms": 5, "counts": {"t": 3}}
    tracker = Tracker(Position("", 4, "0-1-7", rows=3, server_id=2, tx_gtid="0-1-8",
                               transaction=progress))
    tracker.begin(400, "1-1-3")
    assert tracker.count(2) == 0
    inside = Position.from_json(tracker.position().to_json())
    assert (inside.pos, inside.rows, inside.tx_gtid) == (400, 2, "1-1-3")
    assert inside.awaited == {"0-1-8": {"rows": 3, "transaction": progress}}
    assert "and rows of 1 more transaction, by GTID" in inside.describe()

    tracker = Tracker(inside, by_gtid=True)
    resumed = []
    tracker.on_resumed = resumed.append
    tracker.begin(100, "2-1-1")  # a third domain's, first again
    assert tracker.count(4) == 0
    assert tracker.position().awaited == {"1-1-3": {"rows": 2},
                                          "0-1-8": {"rows": 3, "transaction": progress}}
    tracker.end(200)
    between = Position.from_json(tracker.position().to_json())
    # Between transactions: a start by GTID set, the first awaited said as one always was.
    assert (between.file, between.gtid_set, between.rows, between.tx_gtid) == (
        "", "0-1-7,2-1-1", 3, "0-1-8")
    assert between.transaction == progress and between.awaited == {"1-1-3": {"rows": 2}}

    tracker = Tracker(between)
    tracker.on_resumed = resumed.append
    tracker.begin(300, "0-1-8")
    assert tracker.count(5) == 3 and tracker.txid == progress["id"] and resumed == [progress]
    assert tracker.position().awaited == {"1-1-3": {"rows": 2}}
    tracker.end(350)
    tracker.begin(350, "1-1-3")
    assert tracker.count(4) == 2 and resumed == [progress]  # no metadata counts: none told
    assert tracker.position().awaited is None
    tracker.end(390)
    at = tracker.position()
    assert (at.rows, at.awaited, at.gtid_set) == (0, None, "0-1-8,1-1-3,2-1-1")


def test_an_awaited_transaction_of_unknown_gtid_is_not_the_one_a_start_by_file_is_inside():
    # A checkpoint that didn't keep its transaction's GTID awaits "the first that comes"; after
    # a stop inside another transaction, a start by file there skips that one's own rows first.
    tracker = Tracker(Position("mysql-bin.000107", 400, "0-1-7", rows=2, server_id=2,
                               tx_gtid="1-1-3", awaited={"": {"rows": 3}}))
    tracker.begin(400, "1-1-3")
    assert tracker.count(5) == 2 and tracker.position().awaited == {"": {"rows": 3}}
    tracker.end(450)
    tracker.begin(450, "0-1-8")
    assert tracker.count(5) == 3 and tracker.position().awaited is None


def test_a_stream_begun_by_a_gtid_set_goes_on_resuming_by_it():
    # After a failover (a start by GTID set alone) the new server may hold a transaction of the
    # set after the place the stream reads (another domain's came first there): a resume by
    # file from that place would read it again, a dump by the set leaves it out. So every
    # checkpoint of such a stream says to resume by the set, and so do the next run's.
    from pymysqlreplication.event import RotateEvent

    from streamer.engine.start import gtid_for

    file_mode = SimpleNamespace(mysql=SimpleNamespace(position_mode="file"))
    tracker = Tracker(Position("", 4, "0-1-7", server_id=2))
    tracker.on_event(_rotate("mysql-bin.000009", 4, 0), RotateEvent)
    tracker.begin(500, "1-2-1")  # the other domain's, first on this server
    assert tracker.count(3) == 0
    inside = Position.from_json(tracker.position().to_json())
    tracker.end(900)
    after = Position.from_json(tracker.position().to_json())
    assert (after.file, after.pos, after.gtid_set, after.by_gtid) == \
        ("mysql-bin.000009", 900, "0-1-7,1-2-1", True)
    assert inside.by_gtid and inside.rows == 3 and inside.tx_gtid == "1-2-1"
    assert after.describe() == \
        "mysql-bin.000009:900 gtid=0-1-7,1-2-1 (resumed by the GTID set)"
    for checkpoint in (inside, after):
        assert gtid_for(file_mode, checkpoint) == checkpoint.gtid_set
        again = Tracker(checkpoint, by_gtid=True)
        assert again.position().by_gtid
    # A start by file (the operator's --start-file, or no GTIDs): by file, as always.
    by_file = Tracker(Position("mysql-bin.000009", 900, "0-1-7,1-2-1", server_id=2))
    by_file.begin(900, "0-1-8")
    by_file.end(1000)
    assert not by_file.position().by_gtid
    assert by_file.position().describe() == "mysql-bin.000009:1000 gtid=0-1-8,1-2-1"
    assert gtid_for(file_mode, by_file.position()) is None
    assert "by_gtid" not in json.loads(by_file.position().to_json())


def test_a_checkpoint_before_the_skip_is_passed_still_says_every_row_published():
    # Resumed inside a transaction whose first 5 rows were published: a commit after 3 of them
    # were read (and left out) again says 5, not 3.
    tracker = Tracker(Position("mysql-bin.000009", 500, "0-1-7", rows=5, server_id=1,
                               tx_gtid="0-1-8"))
    tracker.begin(500, "0-1-8")
    assert tracker.count(3) == 3
    assert tracker.position().rows == 5
    assert tracker.count(3) == 2
    assert tracker.position().rows == 6


def _file_start(mariadb):
    """A MariaDB file's Gtid_list: (domain, server id) -> its last sequence number."""
    from streamer.source.filestart import FileStart

    event = FileStart.__new__(FileStart)
    event.mysql, event.mariadb = None, mariadb
    return event


def test_a_stream_begun_by_a_gtid_set_resumes_by_file_once_a_file_begins_after_all_it_published():
    # Once a file the stream rotated into begins after every transaction the stream published,
    # none of them can come later in this server's binlog: a resume by file is safe again. The
    # file-start GTIDs a dump sends of its own (MariaDB's, of the set asked for) don't count.
    from pymysqlreplication.event import RotateEvent

    from streamer.source.filestart import FileStart

    file_start = _file_start
    tracker = Tracker(Position("", 4, "0-1-7,1-2-3", server_id=2))
    tracker.on_event(_rotate("mysql-bin.000009", 4, 0), RotateEvent)
    tracker.on_event(file_start({(0, 1): 7, (1, 2): 3}), FileStart)  # the dump's own
    tracker.begin(500, "1-2-4")
    tracker.end(900)
    assert tracker.position().by_gtid
    # The next file begins before 1-2-4: a resume by file could still meet a published one.
    tracker.on_event(_rotate("mysql-bin.000010", 4, 1200), RotateEvent)
    tracker.on_event(file_start({(0, 1): 7, (1, 2): 3}), FileStart)
    assert tracker.position().by_gtid
    # The one after begins after all of them (0-1-7 by its own server id).
    tracker.on_event(_rotate("mysql-bin.000011", 4, 1300), RotateEvent)
    tracker.on_event(file_start({(0, 1): 7, (0, 3): 9, (1, 2): 4}), FileStart)
    at = tracker.position()
    assert not at.by_gtid and (at.file, at.pos, at.gtid_set) == ("mysql-bin.000011", 4,
                                                                  "0-1-7,1-2-4")


def test_the_domains_a_file_the_stream_rotated_into_begins_without_leave_its_position(caplog):
    # MariaDB's FLUSH BINARY LOGS DELETE_DOMAIN_ID = (1): the file it begins has no domain 1 in
    # its Gtid_list, domain 0 going on; a checkpoint keeping the domain would be no place in the
    # server's binlog. A dump's own file start (no real rotate) and a file that lost every
    # domain the stream read (a reset's) leave the position as it is.
    from pymysqlreplication.event import RotateEvent

    from streamer.source.filestart import FileStart

    tracker = Tracker(Position("mysql-bin.000009", 4, "0-1-7,1-1-1", server_id=1))
    tracker.on_event(_rotate("mysql-bin.000009", 4, 0), RotateEvent)
    tracker.on_event(_file_start({(0, 1): 7}), FileStart)  # the dump's own
    assert tracker.position().gtid_set == "0-1-7,1-1-1"
    tracker.on_event(_rotate("mysql-bin.000010", 4, 900), RotateEvent)
    tracker.on_event(_file_start({}), FileStart)
    assert tracker.position().gtid_set == "0-1-7,1-1-1"
    tracker.on_event(_rotate("mysql-bin.000011", 4, 900), RotateEvent)
    tracker.on_event(_file_start({(0, 1): 6, (0, 2): 7}), FileStart)
    at = tracker.position()
    assert (at.file, at.pos, at.gtid_set) == ("mysql-bin.000011", 4, "0-1-7")
    assert "the server's binlog has no GTID domain 1 from mysql-bin.000011 on (FLUSH BINARY " \
           "LOGS DELETE_DOMAIN_ID); the stream had read it up to 1-1-1" in caplog.text
