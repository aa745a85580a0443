"""The temporary tables of statement-logging sessions: which names they shadow, and for whom."""
from types import SimpleNamespace

from streamer.source.temporary import THREAD_SPECIFIC_F, TemporaryTables, used_temporary


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
