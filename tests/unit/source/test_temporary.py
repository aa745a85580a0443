"""The temporary tables of statement-logging sessions: which names they shadow, and for whom.

binlogs/temporary.binlog was recorded on MariaDB 10.11 (binlogs/temporary.sql): a session
logging statements fills, updates, truncates and drops a temporary table named like the published
app.t, between row changes of the real app.t, then changes the real app.t by a statement that
reads another temporary table (flagged as having used one, like the others). The servers' flag,
per statement, was seen on MySQL 8.0 too; its e2e test is test_events.py's statement-logged one.
"""
from types import SimpleNamespace

import pytest

from streamer.engine.stages import statements
from streamer.errors import UnsupportedEvent
from streamer.position import Position
from streamer.source.reach import Reach
from streamer.source.temporary import THREAD_SPECIFIC_F, TemporaryTables, used_temporary
from tests.unit.engine_parts import ReplayedBinlog

FILE = "mysql-bin.000002"


def query(thread=9, used=True, server=1):
    """A query event of session ``thread`` on ``server``; ``used``: the server flagged it as
    having used a temporary table of that session (as the servers do, seen on MariaDB 10.11 and
    MySQL 8.0: per statement, not per session)."""
    return SimpleNamespace(slave_proxy_id=thread, packet=SimpleNamespace(
        server_id=server, flags=THREAD_SPECIFIC_F if used else 0))


def follow(temp, *statements, db="app", **event):
    for sql in statements:
        temp.on_statement(query(**event), sql, db)


def test_a_created_temporary_table_shadows_its_name_in_its_sessions_flagged_statements():
    temp = TemporaryTables()
    follow(temp, "CREATE TEMPORARY TABLE t (id INT)",
           "create temporary table if not exists `Other`.`x y` like app.t")
    assert temp.of(query()) == {("app", "t"), ("Other", "x y")}
    assert used_temporary(query()) and not used_temporary(query(used=False))
    # A statement that used no temporary table means the real tables by every name.
    assert temp.of(query(used=False)) == frozenset()
    # Another session's temporary tables, or a session of the same id on another server: none.
    assert temp.of(query(thread=10)) == frozenset()
    assert temp.of(query(server=2)) == frozenset()


def test_only_a_flagged_temporary_create_counts():
    temp = TemporaryTables()
    follow(temp, "CREATE TABLE t (id INT)", "CREATE TABLE t2 LIKE tmp")  # real tables
    follow(temp, "CREATE TEMPORARY TABLE t3 (id INT)", used=False)  # no such event is written
    assert temp.of(query()) == frozenset()


def test_a_drop_forgets_the_names_it_holds_and_the_session_when_none_is_left():
    temp = TemporaryTables()
    follow(temp, "CREATE TEMPORARY TABLE t (id INT)", "CREATE TEMPORARY TABLE u (id INT)",
           "CREATE TEMPORARY TABLE w (id INT)")
    follow(temp, "DROP TEMPORARY TABLE t")
    assert temp.of(query()) == {("app", "u"), ("app", "w")}
    # As the server writes it when the session ends.
    follow(temp, "DROP /*!40005 TEMPORARY */ TABLE IF EXISTS `u`,`w`")
    assert temp.of(query()) == frozenset() and temp.sessions == {}


def test_a_rename_forgets_every_name_it_holds_and_other_alters_forget_none():
    temp = TemporaryTables()
    follow(temp, "CREATE TEMPORARY TABLE t (id INT)", "CREATE TEMPORARY TABLE u (id INT)")
    follow(temp, "ALTER TABLE t ADD COLUMN v INT")
    assert temp.of(query()) == {("app", "t"), ("app", "u")}
    # Renamed, ``t`` may be the real table again: the name is no longer taken for a temporary
    # one (at worst a temporary table's change then stops the stream, never the reverse).
    follow(temp, "ALTER TABLE t RENAME TO t_old")
    assert temp.of(query()) == {("app", "u")}
    follow(temp, "RENAME TABLE u TO u2")
    assert temp.of(query()) == frozenset()


def test_a_server_start_forgets_every_session():
    temp = TemporaryTables()
    follow(temp, "CREATE TEMPORARY TABLE t (id INT)")
    follow(temp, "CREATE TEMPORARY TABLE t (id INT)", thread=3)
    temp.server_started()
    assert temp.of(query()) == frozenset() and temp.of(query(thread=3)) == frozenset()


def test_past_its_bound_the_oldest_sessions_names_are_forgotten():
    temp = TemporaryTables(most=2)
    for thread in (1, 2, 3):
        follow(temp, "CREATE TEMPORARY TABLE t (id INT)", thread=thread)
    assert temp.of(query(thread=1)) == frozenset()
    assert temp.of(query(thread=2)) == temp.of(query(thread=3)) == {("app", "t")}


def _streamed(make, monkeypatch, start):
    monkeypatch.setattr(statements, "Reach", lambda connection: Reach(None))
    streamer, publisher = make(batch={"max_messages": 1},
                               sections={"tables": {"include": ["app.t"]}})
    reader = ReplayedBinlog("temporary.binlog", start, on_end=streamer.request_stop)
    with reader, pytest.raises(UnsupportedEvent) as refused:
        streamer.stream(publisher, reader, start)
    return str(refused.value), publisher


def test_a_sessions_temporary_table_is_followed_and_the_real_tables_change_refused(make,
                                                                                   monkeypatch):
    refused, publisher = _streamed(make, monkeypatch, Position(FILE, 4))
    # Its temporary t's INSERT, UPDATE and TRUNCATE were no change of app.t (the TRUNCATE was
    # published as app.t's op t before); its drop, logged while the session logged rows, ended
    # it, so the last INSERT ... SELECT changed the real app.t: refused, naming it. (The row 2
    # went to the temporary t: binlogs/temporary.sql.)
    assert refused.startswith(f"a statement changing app.t at {FILE}:2631 was logged as a "
                              f"statement"), refused
    assert "a temporary table of its session (thread 8): if that was app.t" in refused
    assert publisher.changes() == [("c", 1), ("c", 3)]


def test_a_temporary_table_created_before_the_start_stops_the_stream_saying_so(make,
                                                                              monkeypatch):
    # From after its CREATE TEMPORARY TABLE: the session's INSERT into its t can't be told
    # from one into app.t.
    refused, publisher = _streamed(make, monkeypatch, Position(FILE, 1068))
    assert refused.startswith(f"a statement changing app.t at {FILE}:1110 "), refused
    assert "used a temporary table of its session (thread 8): if that was app.t, its CREATE " \
           "TEMPORARY TABLE came before what this streamer read" in refused
    assert publisher.changes() == []
