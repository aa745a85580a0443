"""A first position carries the server's whole executed GTID set, so a resume by GTID on any server
is not sent again what came before the start; a server without GTIDs is said to be so by the
settings that need them."""
import logging

import pytest

from streamer import config
from streamer.engine.start import (SourceInfo, explicit_start, initial_position,
                                   warn_without_gtids)
from streamer.engine.tracker import Tracker
from streamer.position import Position
from tests.fakeserver import FakeConnection


def _cfg(**start):
    return config.validate(config._merge(config.DEFAULTS, {"mysql": {"server_id": 9},
                                                          "start": start}))


def test_a_start_at_the_end_carries_the_executed_set_there():
    asked = []

    def gtids_at(file, pos):  # MariaDB: asked for the end's offset, by a first start only
        asked.append((file, pos))
        return "0-1-120,5-2-7"

    source = SourceInfo(1, ("mysql-bin.000003", 400), None, None, None, None, gtids_at)
    pos = initial_position(_cfg(), None, source, None, None)
    assert (pos.file, pos.pos, pos.gtid_set) == ("mysql-bin.000003", 400, "0-1-120,5-2-7")
    assert asked == [("mysql-bin.000003", 400)]
    # MySQL: the set its binlog status gave, made exactly the end's (server.settled_gtids) ...
    settled = []

    def settle(end, given):
        settled.append((end, given))
        return "uuid:1-12", True
    mysql = SourceInfo(1, ("b.9", 700), None, None, None, "uuid:1-9", None, settle)
    at = initial_position(_cfg(), None, mysql, None, None)
    assert (at.file, at.pos, at.gtid_set) == ("b.9", 700, "uuid:1-12")
    assert settled == [(("b.9", 700), "uuid:1-9")]
    # ... or, when it could not be told exactly, the set alone: the server sends every
    # transaction not in it.
    mysql = SourceInfo(1, ("b.9", 700), None, None, None, "uuid:1-9", None,
                       lambda end, given: (given, False))
    at = initial_position(_cfg(), None, mysql, None, None)
    assert (at.file, at.gtid_set) == ("", "uuid:1-9")
    # The beginning: the set at the oldest file's start.
    first = SourceInfo(1, None, "b.1", None, None, None, lambda f, p: f"0-1-{p}")
    assert initial_position(_cfg(), None, first, None, None).gtid_set == "0-1-4"
    # The tracker goes on from it: the first checkpoint after a transaction has all domains.
    t = Tracker(pos)
    t.begin(400, "0-1-121")
    t.end(600)
    assert t.position().gtid_set == "0-1-121,5-2-7"


def test_an_explicit_file_start_carries_the_set_the_server_has_at_that_offset():
    source = SourceInfo(1, ("mysql-bin.000003", 400), None, None, "0-1-40", None,
                        lambda f, p: "not asked: the probe read it")
    pos = initial_position(_cfg(), None, source, Position("mysql-bin.000002", 4), None)
    assert pos.gtid_set == "0-1-40"
    # A server that can't tell (MySQL has no BINLOG_GTID_POS) leaves it to the GTIDs read.
    source = SourceInfo(1, ("b.1", 4), None, None, None, None, None)
    assert initial_position(_cfg(), None, source, Position("b.1", 4), None).gtid_set == ""
    # The probe is told which offset to ask for: argv's, else the config's.
    assert explicit_start(_cfg(), Position("b.2", 8)) == ("b.2", 8)
    assert explicit_start(_cfg(file="b.3", pos=12), None) == ("b.3", 12)
    assert explicit_start(_cfg(), None) is None


def test_a_checkpoint_is_resumed_as_it_is():
    checkpoint = Position("mysql-bin.000003", 900, "0-1-130")
    source = SourceInfo(1, ("mysql-bin.000004", 4), None, None, None, "0-1-999",
                        lambda f, p: "never asked", lambda e, g: "never asked")
    assert initial_position(_cfg(), checkpoint, source, None, None) is checkpoint


def test_mysql_84_tagged_gtids_are_parsed_kept_and_compared_like_untagged_ones():
    from streamer.position import GtidSet

    uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    s = GtidSet(f"{uuid.upper()}:1-5:Domain_1:1-3:11:47-49, {uuid}:domain_2:8-17")
    assert str(s) == f"{uuid}:1-5:domain_1:1-3:11:47-49:domain_2:8-17"
    assert GtidSet(str(s)).mysql == s.mysql  # round-trips through a checkpoint
    s.add(f"{uuid}:domain_1:4")
    assert s.contains(GtidSet(f"{uuid}:domain_1:1-4")) and \
        not s.contains(GtidSet(f"{uuid}:domain_1:5"))
    assert not s.contains(GtidSet(f"{uuid}:other:1"))  # a tag's numbers are its own
    assert GtidSet(f"{uuid}:1-5").missing(s) == [f"{uuid}:domain_1:1-4", f"{uuid}:domain_1:11",
                                                  f"{uuid}:domain_1:47-49", f"{uuid}:domain_2:8-17"]


def test_the_binlog_end_comes_from_show_binary_log_status_on_mysql_84_and_later():
    from streamer.source import server

    def answer(sql, args):
        if sql == "SHOW MASTER STATUS" and conn.server_info.startswith(("8.4", "9.")):
            raise AssertionError("removed in MySQL 8.4")
        return [("binlog.000003", 157, "", "", "")]

    for version, statement in (("8.4.3", "SHOW BINARY LOG STATUS"),
                               ("9.1.0", "SHOW BINARY LOG STATUS"),
                               ("8.0.15", "SHOW MASTER STATUS"),
                               ("5.5.5-10.11.19-MariaDB-log", "SHOW MASTER STATUS"),
                               ("11.4.5-MariaDB-log", "SHOW MASTER STATUS")):
        conn = FakeConnection(answer, version)
        assert server.master_status(conn) == ("binlog.000003", 157)
        assert conn.ran == [statement], version


def test_settings_that_need_gtids_are_named_when_the_server_writes_none(caplog):
    def mysql(mode):
        def answer(sql, args):
            assert sql == "SELECT @@GLOBAL.gtid_mode", sql
            return [(mode,)]
        return FakeConnection(answer, server_info="8.0.15")

    def said(conn, **mysql_cfg):
        cfg = config.validate(config._merge(config.DEFAULTS, {"mysql": dict(server_id=9,
                                                                              **mysql_cfg)}))
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="streamer.engine.start"):
            warn_without_gtids(conn, cfg)
        return [r.getMessage() for r in caplog.records]

    failover = dict(hosts=["db1:3306", "db2:3306"], position_mode="gtid")
    both = said(mysql("OFF"), **failover)
    assert len(both) == 2
    assert "mysql.hosts names 2 servers, and MySQL at db1:3306 writes no GTIDs" in both[0]
    assert "switch to another server will be refused" in both[0]
    assert "mysql.position_mode is gtid" in both[1] and "resume by them" in both[1]
    assert all("set gtid_mode=ON on the source" in m for m in both)
    # A mix of anonymous and GTID transactions is no place to fail over from either.
    assert len(said(mysql("ON_PERMISSIVE"), **failover)) == 2
    assert said(mysql("OFF")) == []  # one server, by file: nothing needs GTIDs
    assert said(mysql("ON"), **failover) == []
    mariadb = FakeConnection(lambda sql, args: pytest.fail(f"asked {sql}"))
    assert said(mariadb, **failover) == []


def test_what_a_first_start_asks_later_opens_a_connection_of_its_own_each_time(monkeypatch):
    from streamer.engine import start as start_mod

    opened = []

    class Conn:
        def __init__(self, settings):
            self.settings, self.closed = settings, False
            opened.append(self)

        def close(self):
            self.closed = True
    monkeypatch.setattr(start_mod.server, "connect", Conn)
    asked = start_mod._on_its_own({"host": "h"}, lambda conn, f, p: (conn.settings, f, p))
    assert asked("b.1", 4) == ({"host": "h"}, "b.1", 4)
    failing = start_mod._on_its_own({}, lambda conn: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failing()
    assert len(opened) == 2 and all(c.closed for c in opened)
