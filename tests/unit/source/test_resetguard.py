"""The binlog reset guard (source.resetguard): what says a server's binlog is no longer the one
the stream reads, and the stop it makes."""
import types

import pymysql
import pytest

from streamer.errors import SourceError
from streamer.source import resetguard
from streamer.source.resetguard import ResetGuard, reset_seen
from tests.fakeserver import FakeConnection

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
FILES = [("mysql-bin.000136", 1000), ("mysql-bin.000137", 5000)]


@pytest.mark.parametrize("files, file, pos, mine, have", [
    (FILES, "mysql-bin.000137", 5000, "0-1-7", "0-1-7"),          # caught up
    (FILES, "mysql-bin.000137", 100, "0-1-7", "0-1-9"),           # behind
    (FILES + [("mysql-bin.000138", 4)], "mysql-bin.000137", 5000, "0-1-7", "0-1-7"),
    ([("mysql-bin.000137", 5000)], "mysql-bin.000137", 5000, "", ""),  # older ones purged
    ([("mysql-bin.000140", 400)], "mysql-bin.000137", 5000, "", ""),   # read on from a purged one
    (FILES, None, 0, f"{UUID}:1-7", f"{UUID}:1-9"),               # not placed yet
    (FILES, "mysql-bin.000137", 5000, f"{UUID}:1-7", f"{UUID}:1-7,{UUID[:-1]}0:1-3"),
])
def test_a_binlog_that_grew_on_is_the_streams(files, file, pos, mine, have):
    assert reset_seen(files, file, pos, mine, have) is None


@pytest.mark.parametrize("files, file, pos, mine, have, said", [
    # A reset's new first file, shorter than the place read in the old one of its name.
    ([("mysql-bin.000001", 540)], "mysql-bin.000001", 1947, "0-1-7", "0-1-1",
     "its binlog mysql-bin.000001 is 540 bytes long now, where the stream has read it to byte "
     "1947"),
    # The new files all number before the one read.
    ([("mysql-bin.000001", 9000)], "mysql-bin.000137", 5000, "", "",
     "its binlog files are mysql-bin.000001 .. mysql-bin.000001 now, none of them "
     "mysql-bin.000137, which the stream reads, nor any after it"),
    # The new first file grown past the place: the GTID set begun anew says it (MySQL, MariaDB).
    ([("mysql-bin.000001", 90000)], "mysql-bin.000001", 2238, f"{UUID}:1-7", f"{UUID}:1-3",
     f"its binlog's GTID set ({UUID}:1-3) lacks transactions the stream has read ({UUID}:4-7)"),
    ([("mysql-bin.000001", 90000)], "mysql-bin.000001", 2238, "0-1-7", "",
     "its binlog's GTID set (empty) lacks transactions the stream has read"),
    # Not yet placed by an event: the set still tells.
    (FILES, None, 0, "0-1-7", "0-1-2", "its binlog's GTID set (0-1-2) lacks transactions"),
    # A domain gone, unless the guard found it deleted (below): with the other domain going
    # on, behind, or with none of the stream's left.
    (FILES, "mysql-bin.000137", 5000, "0-1-7,1-1-1", "0-1-7",
     "its binlog's GTID set (0-1-7) lacks transactions the stream has read (domain 1: every "
     "transaction up to 1-1-1)"),
    (FILES, "mysql-bin.000137", 5000, "0-1-7,1-1-1", "0-1-5",
     "its binlog's GTID set (0-1-5) lacks transactions the stream has read (domain 0: seq 6..7"),
    (FILES, "mysql-bin.000137", 5000, "0-1-7,1-1-1", "2-1-3",
     "its binlog's GTID set (2-1-3) lacks transactions the stream has read (domain 0: every"),
])
def test_a_reset_binlog_is_said_by_what_shows_it(files, file, pos, mine, have, said):
    found = reset_seen(files, file, pos, mine, have)
    assert found is not None and found.startswith(said)


def _server(files, gtids, state, opens="0-1-7"):
    """A server answering SHOW BINARY LOGS, its GTID set (MariaDB's), the Gtid_list each of
    its files opens with (``opens``) and BINLOG_GTID_POS (``state["there"]``, NULL unless
    given); ``state["fail"]`` makes it lose the connection instead."""
    def answer(sql, args):
        if state.get("fail"):
            raise pymysql.err.OperationalError(2013, "Lost connection")
        if sql.startswith("SHOW BINLOG EVENTS IN "):
            name = sql.split("'")[1]
            return [(name, 4, "Format_desc", 1, 256, "Server ver: 10.11.19-MariaDB-log"),
                    (name, 256, "Gtid_list", 1, 285, f"[{opens}]")]
        if sql.startswith("SELECT BINLOG_GTID_POS("):
            state["there_asked"] = state.get("there_asked", 0) + 1
            return [(state.get("there"),)]
        if sql.startswith("SET "):
            return []
        if "character_set_results" in sql:
            return [("utf8mb4",)]
        return files if sql == "SHOW BINARY LOGS" else [(gtids,)]
    conn = FakeConnection(answer)
    conn.close = lambda: state.update(closed=True)
    return conn


def _tracker(file="mysql-bin.000001", pos=1947, gtids="0-1-7", placed=True, forgot=None):
    return types.SimpleNamespace(file=file, next_pos=pos, gtids=gtids, placed=placed,
                                 forget_domains=lambda domains: forgot.extend(domains))


def test_a_domain_the_server_deleted_leaves_the_position_and_is_no_reset():
    # FLUSH BINARY LOGS DELETE_DOMAIN_ID = (1), once no file held a transaction of domain 1:
    # the oldest file kept opens with the domain as far as the stream read it. A stream read by
    # GTID set has it still in its position (engine.tracker leaves it to the guard).
    forgot = []
    conn = _server(FILES, "0-1-9", {}, opens="0-1-7,1-2-3,1-1-1")
    idle = ResetGuard(lambda: conn, lambda: 0.0).hook(
        _tracker("mysql-bin.000137", 5000, "0-1-7,1-1-1", forgot=forgot), "MySQL at db1:3306")
    assert idle() is False and forgot == [1]
    assert "SHOW BINLOG EVENTS IN 'mysql-bin.000136' LIMIT 4" in conn.ran


@pytest.mark.parametrize("opens", ["0-1-7", "0-1-7,1-1-0", ""])
def test_a_domain_gone_that_no_file_shows_the_server_had_is_a_reset(opens):
    forgot = []
    conn = _server(FILES, "0-1-9", {}, opens=opens)
    idle = ResetGuard(lambda: conn, lambda: 0.0).hook(
        _tracker("mysql-bin.000137", 5000, "0-1-7,1-1-1", forgot=forgot), "MySQL at db1:3306")
    with pytest.raises(SourceError, match=r"lacks transactions the stream has read \(domain 1"):
        idle()
    assert forgot == []


def test_a_reset_found_at_an_idle_moment_stops_the_stream_naming_the_new_binlogs_start():
    conn = _server([("mysql-bin.000001", 540)], "0-1-1", {})
    guard = ResetGuard(lambda: conn, lambda: 0.0)
    idle = guard.hook(_tracker(), "MySQL at db1:3306")
    with pytest.raises(SourceError) as raised:
        idle()
    said = str(raised.value)
    assert said.startswith("the binlog of MySQL at db1:3306 was reset under the stream "
                           "(RESET MASTER, or a restore): its binlog mysql-bin.000001 is 540 "
                           "bytes long now") and \
        "restart from the new binlog's start (streamer run --start-file mysql-bin.000001 " \
        "--start-pos 4); otherwise take a snapshot" in said


def test_the_check_runs_once_in_its_interval_and_a_lost_connection_says_nothing():
    state = {}
    conn = _server([("mysql-bin.000001", 5000)], "0-1-7", state)
    made = []
    now = [100.0]
    guard = ResetGuard(lambda: made.append(1) or conn, lambda: now[0])
    idle = guard.hook(_tracker(), "MySQL at db1:3306")
    assert idle() is False and conn.ran == ["SHOW BINARY LOGS", "SELECT @@GLOBAL.gtid_binlog_pos"]
    now[0] += resetguard.CHECK_S - 0.1
    assert idle() is False and len(conn.ran) == 2
    now[0] += 0.2
    state["fail"] = True
    assert idle() is False and state["closed"]  # not a reset: the stream's own connection tells
    now[0] += resetguard.CHECK_S
    state["fail"] = False
    assert idle() is False and len(made) == 2 and len(conn.ran) == 4  # connected anew
    # A new connection of the stream (maybe to another server) connects anew too.
    guard.hook(_tracker(), "MySQL at db2:3306")
    assert guard.conn is None


def test_a_lower_sequence_number_logged_after_the_streams_is_no_reset_proven_once(caplog):
    # MariaDB without gtid_strict_mode: SET gtid_seq_no = 3 (a replayed mysqlbinlog dump) after
    # the stream read 0-1-7. The server's position names 0-1-3; at the stream's place its
    # BINLOG_GTID_POS is the stream's position.
    state = {"there": "0-1-7"}
    conn = _server(FILES, "0-1-3", state)
    now = [0.0]
    idle = ResetGuard(lambda: conn, lambda: now[0]).hook(
        _tracker("mysql-bin.000137", 5000, "0-1-7"), "MySQL at db1:3306")
    assert idle() is False and state["there_asked"] == 1
    assert "MySQL at db1:3306 numbers a GTID domain's transactions out of order" in caplog.text
    now[0] += resetguard.CHECK_S
    assert idle() is False and state["there_asked"] == 1  # the same shortfall: proven already
    # Another history at the stream's place (a reset's binlog grown past it): a reset.
    conn2 = _server(FILES, "0-1-2", {"there": "0-1-2"})
    idle = ResetGuard(lambda: conn2, lambda: 0.0).hook(
        _tracker("mysql-bin.000137", 5000, "0-1-7"), "MySQL at db1:3306")
    with pytest.raises(SourceError, match=r"lacks transactions the stream has read \(domain 0"):
        idle()
