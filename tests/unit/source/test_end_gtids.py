"""The executed GTID set exactly at the binlog's end on MySQL, whose binlog status reads the set
before the offset (server.end_gtids), without a server."""
from streamer.position import GtidSet
from streamer.source import server
from tests.fakeserver import FakeConnection

U = "c0fc845d-f036-11f1-b603-02fc00000001"


def _mysql(statuses, owned, events=(), info="8.0.15"):
    """A MySQL whose binlog status rows are ``statuses`` in turn (the last kept), whose
    @@gtid_owned reads are ``owned`` in turn, and whose binlog has ``events`` (offset, type,
    info) from the first status's offset on."""
    statuses, owned = list(statuses), list(owned)

    def answer(sql, args):
        if sql in ("SHOW MASTER STATUS", "SHOW BINARY LOG STATUS"):
            return [statuses.pop(0) if len(statuses) > 1 else statuses[0]]
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
    conn = _mysql([("b.9", 700, "", "", f"{U}:1-9"), ("b.9", 900, "", "", f"{U}:1-14")],
                  [f"{U}:10#41", f"{U}:10#41", f"{U}:15#44"],
                  [(700, "Gtid", f"SET @@SESSION.GTID_NEXT= '{U}:13'"),
                   (780, "Query", "BEGIN"), (790, "Xid", "COMMIT /* xid=9 */"),
                   (800, "Gtid", f"SET @@SESSION.GTID_NEXT= '{U}:14'"),
                   (900, "Gtid", f"SET @@SESSION.GTID_NEXT= '{U}:15'")])
    sleeps = []
    assert server.end_gtids(conn, sleeps.append) == (("b.9", 700), f"{U}:1-12", True)
    assert sleeps == [0.005]  # one wait: u:10 owned at the second look, not at the third


def test_an_idle_server_gives_its_set_at_once():
    conn = _mysql([("b.9", 700, "", "", f"{U}:1-9")], [""])
    assert server.end_gtids(conn, lambda s: None) == (("b.9", 700), f"{U}:1-9", True)
    assert not any(sql.startswith("SHOW BINLOG EVENTS") for sql in conn.ran)


def test_a_gtid_owned_too_long_a_rotation_or_too_many_events_give_a_set_not_exact():
    now = [0.0]

    def sleep(s):
        now[0] += s
    held = _mysql([("b.9", 700, "", "", f"{U}:1-9")], [f"{U}:10#41"])  # a long transaction
    assert server.end_gtids(held, sleep, lambda: now[0]) == (("b.9", 700), f"{U}:1-9", False)
    assert server.END_SETTLE_S <= now[0] < server.END_SETTLE_S + 0.1
    rotated = _mysql([("b.9", 700, "", "", f"{U}:1-9"), ("b.10", 4, "", "", f"{U}:1-11")], [""])
    assert server.end_gtids(rotated, sleep)[2] is False
    many = [(700 + i, "Query", "x") for i in range(server._BETWEEN_MOST)]
    busy = _mysql([("b.9", 700, "", "", f"{U}:1-9"), ("b.9", 10 ** 9, "", "", f"{U}:1-99")],
                  [""], many)
    assert server.end_gtids(busy, sleep)[2] is False


def test_mariadb_and_a_mysql_without_gtids_have_no_set_here():
    mariadb = _mysql([("b.9", 700, "", "")], [""], info="10.11.19-MariaDB")
    assert server.end_gtids(mariadb) == (("b.9", 700), None, True)


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
