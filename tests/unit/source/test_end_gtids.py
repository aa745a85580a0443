"""The executed GTID set exactly at the binlog's end on MySQL, whose binlog status reads the set
before the offset (server.settled_gtids), without a server."""
from streamer.position import GtidSet
from streamer.source import server
from tests.fakeserver import FakeConnection

U = "c0fc845d-f036-11f1-b603-02fc00000001"
END = ("b.9", 700)


def _mysql(status, owned, events=(), info="8.0.15"):
    """A MySQL whose binlog status row is ``status``, whose @@gtid_owned reads are ``owned`` in
    turn (the last kept), and whose binlog has ``events`` (offset, type, info) from the end on."""
    owned = list(owned)

    def answer(sql, args):
        if sql in ("SHOW MASTER STATUS", "SHOW BINARY LOG STATUS"):
            return [status]
        if sql == "SELECT @@GLOBAL.gtid_owned":
            return [(owned.pop(0) if len(owned) > 1 else owned[0],)]
        if sql.startswith("SHOW BINLOG EVENTS IN 'b.9' FROM 700"):
            return [("b.9", at, kind, 1, at + 10, text) for at, kind, text in events]
        if "character_set_results" in sql:
            return [("utf8mb4",)]
        raise AssertionError(sql)
    return FakeConnection(answer, info)


def test_the_end_set_is_read_again_once_the_gtids_in_flight_are_executed_less_those_after():
    # The status said u:1-9 at 700, though u:10-12 were in the binlog before 700 (written, not
    # yet executed: u:10 still owned); read again, the set has them, and u:13-14, written
    # after 700, are taken out.
    conn = _mysql(("b.9", 900, "", "", f"{U}:1-14"),
                  [f"{U}:10#41", f"{U}:10#41", f"{U}:15#44"],
                  [(700, "Gtid", f"SET @@SESSION.GTID_NEXT= '{U}:13'"),
                   (780, "Query", "BEGIN"), (790, "Xid", "COMMIT /* xid=9 */"),
                   (800, "Gtid", f"SET @@SESSION.GTID_NEXT= '{U}:14'"),
                   (900, "Gtid", f"SET @@SESSION.GTID_NEXT= '{U}:15'")])
    sleeps = []
    assert server.settled_gtids(conn, END, f"{U}:1-9", sleeps.append) == (f"{U}:1-12", True)
    assert sleeps == [0.005]  # one wait: u:10 owned at the second look, not at the third


def test_an_idle_server_gives_its_set_at_once():
    conn = _mysql(("b.9", 700, "", "", f"{U}:1-9"), [""])
    assert server.settled_gtids(conn, END, f"{U}:1-9", lambda s: None) == (f"{U}:1-9", True)
    assert not any(sql.startswith("SHOW BINLOG EVENTS") for sql in conn.ran)


def test_a_gtid_owned_too_long_a_rotation_or_too_many_events_leave_the_set_not_exact(
        monkeypatch):
    now = [0.0]

    def sleep(s):
        now[0] += s
    held = _mysql(("b.9", 900, "", "", f"{U}:1-11"), [f"{U}:10#41"])  # a long transaction
    assert server.settled_gtids(held, END, f"{U}:1-9", sleep, lambda: now[0]) == \
        (f"{U}:1-9", False)
    assert server.SETTLE_S <= now[0] < server.SETTLE_S + 0.1
    rotated = _mysql(("b.10", 4, "", "", f"{U}:1-11"), [""])
    assert server.settled_gtids(rotated, END, f"{U}:1-9", sleep) == (f"{U}:1-9", False)
    monkeypatch.setattr(server, "_BETWEEN_MOST", 3)
    busy = _mysql(("b.9", 10 ** 9, "", "", f"{U}:1-99"), [""],
                  [(700 + i, "Query", "x") for i in range(5)])
    assert server.settled_gtids(busy, END, f"{U}:1-9", sleep) == (f"{U}:1-9", False)


def test_the_status_gives_the_end_and_its_set_mariadb_no_set():
    mysql = _mysql(("b.9", 700, "", "", f"{U}:1-5,\n{U.replace('c0', 'd0')}:1-2"), [""])
    assert server.end_gtids(mysql) == (END, f"{U}:1-5,{U.replace('c0', 'd0')}:1-2")
    mariadb = _mysql(("b.9", 700, "", ""), [""], info="10.11.19-MariaDB")
    assert server.end_gtids(mariadb) == (END, None)


def test_one_transaction_is_taken_out_of_a_set():
    s = GtidSet(f"{U}:1-20:30,{U}:tag_1:1-3")
    s.discard(f"{U}:5")
    s.discard(f"{U}:30")
    s.discard(f"{U}:TAG_1:3")
    s.discard(f"{U}:99")  # not in it: nothing
    assert str(s) == f"{U}:1-4:6-20:tag_1:1-2"
    s.discard(f"{U}:tag_1:1")
    s.discard(f"{U}:tag_1:2")
    assert str(s) == f"{U}:1-4:6-20"
