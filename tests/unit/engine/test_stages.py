"""Each stage on its own, over a context of in-memory parts: what it produces, whom it tells,
what it leaves alone. (The stages together, on recorded binlogs: test_engine, test_xa,
test_snapshot, test_txmeta.)"""
from types import SimpleNamespace

import pytest
from pymysqlreplication.constants import FIELD_TYPE as T
from pymysqlreplication.event import QueryEvent, XidEvent
from pymysqlreplication.row_event import TableMapEvent, WriteRowsEvent

from streamer import config, errors
from streamer.engine.announce import Announcer
from streamer.engine.commit import CommitPolicy, Totals
from streamer.engine.context import Context
from streamer.engine.snapshot import Chunk, Snapshots
from streamer.engine.stages.heartbeat import Heartbeat
from streamer.engine.stages.rows import Rows
from streamer.engine.stages.snapshot import SnapshotStage
from streamer.engine.stages.statements import Statements
from streamer.engine.stages.tables import TableMaps
from streamer.engine.stages.txmeta import TxMeta
from streamer.engine.stages.xa import Xa
from streamer.engine.tracker import Tracker
from streamer.engine.txmeta import TransactionLog
from streamer.ops.metrics import Metrics
from streamer.position import Position
from streamer.schema.versions import TableCatalog, TableFilter
from streamer.source.reach import Reach
from streamer.source.temporary import THREAD_SPECIFIC_F
from tests.unit.engine_parts import FakeClock, InMemoryPublisher
from tests.unit.source.test_dml import _Server


@pytest.fixture
def ctx(tmp_path):
    (tmp_path / "pw").write_text("unused\n")
    path = tmp_path / "c.yaml"
    path.write_text("namespace: test\nsource: {name: src}\nmysql: {server_id: 9, password_file: pw}"
                    "\ntables: {include: ['app.*']}\n")
    cfg = config.load(str(path), environ={})
    publisher = InMemoryPublisher()
    tracker = Tracker(Position("f", 4))
    tables = TableCatalog("test", TableFilter(["app.*"], ["streamer_heartbeat.*"]))
    metrics = Metrics(cfg, heartbeat=True)
    clock = FakeClock()
    policy = CommitPolicy(cfg, publisher, tracker, None, SimpleNamespace(stop_requested=False),
                          metrics, clock, Totals())
    return Context(cfg, publisher, tracker, tables, clock, metrics,
                   Announcer(publisher, policy.open, False), policy)


def col(name, type_code, pk=False):
    return SimpleNamespace(name=name, type=type_code, unsigned=False, is_primary=pk,
                           character_set_name=None, enum_values=None, set_values=None,
                           max_length=0)


def table_map(table_id, db="app", table="t"):
    state = SimpleNamespace()
    return SimpleNamespace(__class__=TableMapEvent, schema=db, table=table, table_id=table_id,
                           columns=[col("id", T.LONG, pk=True), col("v", T.LONG)],
                           null_bitmask=b"\x02", get_table=lambda: state)


def rows_event(table_id, *ids, cls=WriteRowsEvent):
    return SimpleNamespace(__class__=cls, table_id=table_id, timestamp=1700000000,
                           packet=SimpleNamespace(log_pos=500, event_size=100, server_id=1),
                           rows=[{"values": {"id": i, "v": i * 10}} for i in ids])


def query(text, db="app", flags=0, thread=9):
    """A query event; ``flags`` 0x4: the statement used a temporary table of its session."""
    return SimpleNamespace(__class__=QueryEvent, query=text, schema=db, timestamp=1700000000,
                           slave_proxy_id=thread,
                           packet=SimpleNamespace(log_pos=300, event_size=50, server_id=1,
                                                  flags=flags))


def begin(ctx):
    ctx.tracker.begin(200, "0-1-5")


def test_rows_of_a_published_table_become_messages_and_the_hooks_hear_of_them(ctx):
    rows, told, changed = Rows(ctx), [], []
    TableMaps(ctx, rows).on_event(table_map(7))
    ctx.published.append(lambda tracker, topic, n, ts: told.append((topic, n, ts)) or 1)
    ctx.changes.append(lambda tv, event, op: changed.append((tv.table, op)))
    begin(ctx)
    assert rows.on_rows(rows_event(7, 1, 2), "c") == 3  # two rows and the hook's message
    ctx.policy.commit()
    assert ctx.publisher.changes() == [("c", 1), ("c", 2)]
    assert told == [("test.app.t", 2, 1700000000000)] and changed == [("t", "c")]
    assert ctx.tracker.tx_rows == 2


def test_an_event_of_one_row_is_published_by_the_copies_pypy_compiles_on_their_own(ctx, monkeypatch):
    # engine.rows.process_one_row_event: the same code as process_event, kept out of the binlog
    # loop's trace (cli._tune_jit); events of many rows stay with process_event.
    from streamer.engine.stages import rows as stage

    from streamer.schema.versions import OneRowVersion

    taken = []
    for name in ("process_event", "process_one_row_event"):
        real = getattr(stage, name)
        monkeypatch.setattr(stage, name, lambda e, o, tv, *a, _n=name, _f=real:
                            taken.append((_n, type(tv).__name__)) or _f(e, o, tv, *a))
    rows = Rows(ctx)
    TableMaps(ctx, rows).on_event(table_map(7))
    begin(ctx)
    assert rows.on_rows(rows_event(7, 1), "c") == 1
    assert rows.on_rows(rows_event(7, 2, 3), "c") == 2
    ctx.policy.commit()
    # The one-row copy writes with the version's second compile of its writers.
    assert taken == [("process_one_row_event", OneRowVersion.__name__),
                     ("process_event", "TableVersion")]
    assert ctx.publisher.changes() == [("c", 1), ("c", 2), ("c", 3)]


def test_rows_of_a_claimed_table_go_to_its_stage_with_the_rows_to_skip(ctx):
    rows, seen = Rows(ctx), []
    tables = TableMaps(ctx, rows)
    tables.claim("streamer_heartbeat", "marks", lambda event, skip: seen.append(skip) or 0)
    tables.on_event(table_map(8, "streamer_heartbeat", "marks"))
    ctx.tracker.skip = 1  # a resume inside this transaction: its first row went out before
    begin(ctx)
    ctx.tracker.skip = 1
    assert rows.on_rows(rows_event(8, 1, 2), "c") == 0
    assert seen == [1] and ctx.publisher.messages(all_topics=True) == []


def test_a_table_map_announces_a_new_version_once(ctx):
    tables = TableMaps(ctx, Rows(ctx))
    tables.on_event(table_map(7))
    tables.on_event(table_map(7))
    assert [r["kind"] for r in ctx.publisher.read_schema_records()] == []  # not committed yet
    ctx.policy.commit()
    assert [r["kind"] for r in ctx.publisher.read_schema_records()] == ["value", "key"]


def test_statements_refuse_a_published_tables_row_change_logged_as_a_statement(ctx):
    stage = Statements(ctx)
    assert stage.on_query(query("BEGIN")) == 0
    assert stage.on_query(query("CREATE TABLE app.x (id INT)")) == 0
    with pytest.raises(errors.UnsupportedEvent, match="app.t .* was logged as a statement"):
        stage.on_query(query("INSERT INTO t VALUES (1)"))
    assert stage.on_query(query("INSERT INTO other.t VALUES (1)", db="other")) == 0


def test_a_sessions_temporary_table_named_like_a_published_one_is_not_that_table(ctx, caplog):
    # A session logging statements (MariaDB's MIXED, or STATEMENT) has its temporary tables'
    # statements logged; the server flags (0x4) those that used one of its temporary tables.
    TableMaps(ctx, Rows(ctx)).on_event(table_map(7))
    stage = Statements(ctx)
    used = THREAD_SPECIFIC_F
    assert stage.on_query(query("CREATE TEMPORARY TABLE t (id INT)", flags=used)) == 0
    begin(ctx)
    assert stage.on_query(query("INSERT INTO t VALUES (1)", flags=used)) == 0
    assert stage.on_query(query("UPDATE app.t SET id = 2", flags=used)) == 0
    assert stage.on_query(query("TRUNCATE TABLE t", flags=used)) == 0
    assert "logged as a statement" not in caplog.text  # not even said: no table of the server's
    # The same statement of a session that has no such temporary table changes the table.
    with pytest.raises(errors.UnsupportedEvent, match="app.t .* was logged as a statement"):
        stage.on_query(query("INSERT INTO t VALUES (1)", flags=used, thread=10))
    # Flagged, an INSERT may read a temporary table and change a real one.
    stage.on_query(query("CREATE TEMPORARY TABLE tmp (id INT)", flags=used, thread=11))
    with pytest.raises(errors.UnsupportedEvent, match="app.t .* was logged as a statement.* "
                       r"used a temporary table of its session \(thread 11\): if that was "
                       "app.t, its CREATE TEMPORARY TABLE came before what this streamer read"):
        stage.on_query(query("INSERT INTO t SELECT * FROM tmp", flags=used, thread=11))
    # Dropped, the name is the real table's again.
    stage.on_query(query("DROP TEMPORARY TABLE IF EXISTS t", flags=used))
    with pytest.raises(errors.UnsupportedEvent, match="app.t .* was logged as a statement"):
        stage.on_query(query("INSERT INTO t VALUES (1)", flags=used))
    ctx.policy.commit()
    assert ctx.publisher.changes() == []  # no TRUNCATE of app.t published


def test_mysqls_emptying_of_a_memory_table_logged_as_a_delete_is_published_as_a_truncate(ctx):
    # MySQL before 8.0.22 empties a MEMORY table at its first use after a restart and logs
    # BEGIN, DELETE FROM `db`.`t`, COMMIT (seen on 8.0.15), whatever the binlog format.
    TableMaps(ctx, Rows(ctx)).on_event(table_map(7))
    stage = Statements(ctx)
    ctx.tracker.begin(200, "3e11fa47-71ca-11e1-9e33-c80aa9429562:5")
    assert stage.on_query(query("DELETE FROM `app`.`t`")) == 1
    ctx.policy.commit()
    assert ctx.publisher.changes() == [("t", None)]
    # Any other DELETE logged as a statement is refused, as are a MariaDB group's (counted row
    # by row for its savepoints; MariaDB logs such an emptying as a TRUNCATE) and one that used
    # a temporary table.
    for text, gtid, flags in (("DELETE FROM t WHERE id = 1", None, 0),
                              ("DELETE FROM t", "0-1-5", 0),
                              ("DELETE FROM t", None, THREAD_SPECIFIC_F)):
        ctx.tracker.begin(300, gtid)
        with pytest.raises(errors.UnsupportedEvent, match="app.t .* was logged as a statement"):
            stage.on_query(query(text, flags=flags))


def test_a_whole_table_delete_whose_trigger_changes_another_published_table_is_refused(ctx):
    stage = Statements(ctx)
    server = _Server({(True, "app", "t"): [("app", "t_del", "UPDATE app.u SET n = 0")]})
    stage.reach = Reach(lambda: server)
    ctx.tracker.begin(200, None)
    with pytest.raises(errors.UnsupportedEvent, match=r"app.u \(by the trigger app.t_del on "
                                                      r"app.t\) at .* was logged as a statement"):
        stage.on_query(query("DELETE FROM t"))


def test_a_binlog_the_server_began_at_its_start_ends_every_temporary_table(ctx):
    stage = Statements(ctx)
    stage.on_query(query("CREATE TEMPORARY TABLE t (id INT)", flags=THREAD_SPECIFIC_F))
    stage.on_format(SimpleNamespace(created=0))  # a rotation, or a connection's first events
    assert stage.temporary.of(query("", flags=THREAD_SPECIFIC_F)) == {("app", "t")}
    stage.on_format(SimpleNamespace(created=1796518907))
    assert stage.temporary.of(query("", flags=THREAD_SPECIFIC_F)) == frozenset()


def test_a_truncate_is_published_with_the_tables_current_version(ctx):
    TableMaps(ctx, Rows(ctx)).on_event(table_map(7))
    begin(ctx)
    assert Statements(ctx).on_query(query("TRUNCATE TABLE t")) == 1
    ctx.policy.commit()
    assert ctx.publisher.committed is not None
    assert ctx.publisher.changes() == [("t", None)]


def test_rows_a_partition_statement_moves_without_row_events_are_warned_about(ctx, caplog):
    stage = Statements(ctx)
    assert stage.on_query(query("ALTER TABLE t DROP PARTITION p0")) == 0
    assert "the statement at f:250 on app.t dropped a partition: its rows left the table, " \
        "and the server logs no row event for such rows: the topics of app.t keep" in caplog.text
    assert "streamer snapshot --tables app.t" in caplog.text
    caplog.clear()
    # An exchange with a table of another database: each published one is named.
    stage.on_query(query("ALTER TABLE other.t EXCHANGE PARTITION p0 WITH TABLE app.old"))
    assert "on other.t swapped a partition's rows with those of app.old" in caplog.text
    assert "the topics of app.old keep" in caplog.text
    caplog.clear()
    stage.on_query(query("ALTER TABLE t EXCHANGE PARTITION p0 WITH TABLE old"))
    assert "the topics of app.t and app.old keep" in caplog.text
    assert "streamer snapshot --tables app.t,app.old" in caplog.text
    caplog.clear()
    # Tables not published, and partitions' rows that stay: nothing said, nothing published.
    for text in ("ALTER TABLE other.t DROP PARTITION p0", "ALTER TABLE t ADD PARTITION "
                 "(PARTITION p9 VALUES LESS THAN (9))", "ALTER TABLE t REORGANIZE PARTITION p0 "
                 "INTO (PARTITION p1 VALUES LESS THAN (5))"):
        assert stage.on_query(query(text)) == 0
    assert caplog.text == "" and ctx.publisher.open == []


def test_a_table_renamed_onto_a_published_tables_name_is_warned_about(ctx, caplog):
    caplog.set_level("INFO")
    stage = Statements(ctx)
    assert stage.on_query(query("RENAME TABLE t TO other.t_old, other.t_new TO t")) == 0
    said = [r for r in caplog.records if "renamed" in r.getMessage()]
    assert len(said) == 1 and said[0].levelname == "WARNING"
    assert said[0].getMessage().startswith(
        "the statement at f:250 renamed other.t_new to app.t, a published table, and the server "
        "logs no row event for the rows that came under that name: the topic of app.t never "
        "gets them, and keeps the rows a table of that name had before, if any.")
    assert "streamer snapshot --tables app.t:" in said[0].getMessage()
    caplog.clear()
    # An online schema change's swap (app.* published: the table set aside too): its copy
    # holds the table's rows.
    stage.on_query(query("RENAME TABLE `t` TO `_t_del`, `_t_gho` TO `t`"))
    assert [(r.levelname, r.getMessage()[:75]) for r in caplog.records] == [
        ("INFO", "the statement at f:250 renamed app.t to app._t_del: an online schema change"),
        ("INFO", "the statement at f:250 renamed app._t_gho to app.t: an online schema change")]
    caplog.clear()
    # Onto no published name, a temporary table's (a statement that used one), or its own.
    for text, flags in (("RENAME TABLE t TO other.t", 0), ("ALTER TABLE t RENAME TO other.u", 0),
                        ("ALTER TABLE tmp RENAME TO t", THREAD_SPECIFIC_F),
                        ("ALTER TABLE t RENAME TO t", 0)):
        stage.on_query(query(text, flags=flags))
    assert caplog.text == ""


def test_a_statement_giving_a_published_table_a_foreign_key_action_is_warned_about(ctx, caplog):
    stage = Statements(ctx)
    stage.on_query(query("ALTER TABLE other.c ADD FOREIGN KEY (p) REFERENCES app.t (id) "
                         "ON DELETE CASCADE", db="other"))
    assert caplog.text == ""  # not published
    stage.on_query(query("CREATE TABLE c (id INT, p INT REFERENCES t (id) ON DELETE CASCADE)"))
    assert "app.c has a foreign key with an ON DELETE or ON UPDATE action now (the statement " \
        "at f:250): the server logs no row event for what those actions change: the topic of " \
        "app.c keeps the rows they delete" in caplog.text


def test_a_system_versioned_tables_dropped_history_partition_is_no_change(ctx, caplog):
    TableMaps(ctx, Rows(ctx)).on_event(table_map(7))
    ctx.tables.current[("app", "t")].versioning = object()  # its period's end: history rows
    assert Statements(ctx).on_query(query("ALTER TABLE t DROP PARTITION p_hist")) == 0
    assert caplog.text == ""


def test_truncating_every_partition_is_published_as_a_truncate(ctx):
    TableMaps(ctx, Rows(ctx)).on_event(table_map(7))
    begin(ctx)
    assert Statements(ctx).on_query(query("ALTER TABLE t TRUNCATE PARTITION ALL")) == 1
    ctx.policy.commit()
    assert ctx.publisher.changes() == [("t", None)]


def test_a_heartbeat_opens_the_batch_marks_it_and_publishes_nothing(ctx):
    rows = Rows(ctx)
    tables = TableMaps(ctx, rows)
    Heartbeat(ctx, tables)
    tables.on_event(table_map(9, "streamer_heartbeat", "heartbeat"))
    beat = rows_event(9, 1)
    beat.rows = [{"values": {"source": "s", "ts_us": 1700000000123456}}]
    assert rows.on_rows(beat, "u") == 0
    assert ctx.policy.beat and ctx.publisher.in_tx and ctx.publisher.open == []


def test_transaction_metadata_frames_a_transactions_messages(ctx):
    log = TransactionLog("test")
    stage = TxMeta(ctx, log)
    rows = Rows(ctx)
    TableMaps(ctx, rows).on_event(table_map(7))
    begin(ctx)
    rows.on_rows(rows_event(7, 1), "c")
    rows.on_rows(rows_event(7, 2), "c")
    position = Position("f", 200)
    stage.checkpoint(position)
    assert position.transaction["counts"] == {"test.app.t": 2}
    assert ctx.transaction_ended(ctx.tracker.txid, 5) == 1
    statuses = [m[0] for m in ctx.publisher.open if m[0] == "test.__transactions"]
    assert len(statuses) == 2  # BEGIN with the first rows, END at the end


def test_the_snapshot_window_listens_to_changes_only_while_it_is_open(ctx, tmp_path):
    snaps = Snapshots(ctx.cfg, "pw", TableFilter(["app.*"], []), tables=lambda: None)
    stage = SnapshotStage(ctx, snaps, TableMaps(ctx, Rows(ctx)), Position("f", 4))
    assert ctx.changes == []
    tv = SimpleNamespace(db="app", table="t", topic="ns.app.t", compacted=True,
                         convert=lambda values: None)
    chunk = Chunk({"table": "app.t"}, "L", "H", tv, ["id"], None, False)
    chunk.add([{"id": 1}, {"id": 2}])
    snaps.chunk = chunk
    mark = SimpleNamespace(__class__=WriteRowsEvent, rows=[
        {"values": {"streamer": snaps.name, "mark": "L"}}])
    stage.on_watermarks(mark, 0)
    assert ctx.changes == [stage.on_change]
    ctx.changes[0](SimpleNamespace(db="app", table="t"), rows_event(7, 1), "d")
    assert chunk.kept() == [(2,)]
    snaps.window = snaps.chunk = None
    stage._follow_window()
    assert ctx.changes == []


def test_an_xa_rollback_forgets_its_prepared_transaction_and_an_unknown_commit_is_refused(ctx):
    xa = Xa(ctx, Rows(ctx), reread=lambda position: pytest.fail("nothing to read again"))
    ctx.tracker.xa_pending["X'61',X'',1"] = ["f", 100, "0-1-3", "f:100"]
    assert xa.on_query(query("XA ROLLBACK X'61',X'',1")) == 0
    assert ctx.tracker.xa_pending == {}
    with pytest.raises(errors.UnsupportedEvent, match="XA PREPARE of that transaction came before"):
        xa.on_query(query("XA COMMIT X'62',X'',1"))
    assert xa.on_query(query("XA END X'62',X'',1")) == 0


def test_every_stage_registers_only_handlers_of_event_classes(ctx):
    rows = Rows(ctx)
    tables = TableMaps(ctx, rows)
    for stage in (tables, Statements(ctx), Xa(ctx, rows, reread=None)):
        assert all(isinstance(cls, type) for cls in stage.handlers())
    assert XidEvent not in tables.handlers()


def test_a_published_table_dropped_replaced_or_renamed_away_is_warned_about_if_it_had_messages(
        ctx, caplog):
    stage = Statements(ctx)
    stage.on_query(query("DROP TABLE t"))
    assert caplog.text == ""  # its topic never had a message: nothing left in it
    TableMaps(ctx, Rows(ctx)).on_event(table_map(7))
    ctx.tables._schemas["test.app.u"] = ({}, True)  # a table of an earlier run's messages
    assert stage.on_query(query("DROP TABLE `t`, other.x, u, v /* generated by server */")) == 0
    said = [r for r in caplog.records if r.levelname == "WARNING"]
    assert [r.getMessage()[:60] for r in said] == [
        "the statement at f:250 dropped app.t, a published table, and",
        "the statement at f:250 dropped app.u, a published table, and"]
    assert said[0].getMessage() == (
        "the statement at f:250 dropped app.t, a published table, and the server logs no row "
        "event for the rows that left with it: test.app.t keeps them (a compacted topic for "
        "good), and a table created again under a name they had publishes there beside them. "
        "If consumers must follow, publish those rows' deletes yourself (tombstones, for a "
        "compacted topic)")
    caplog.clear()
    stage.on_query(query("CREATE OR REPLACE TABLE t (id INT PRIMARY KEY)"))
    assert "statement at f:250 replaced app.t, a published table" in caplog.text
    caplog.clear()
    ctx.tables._schemas["test.other.y"] = ({}, True)  # not published by these patterns
    stage.on_query(query("DROP DATABASE app", db=""))
    assert "statement at f:250 dropped database app, with published tables, and the server " \
        "logs no row event for the rows that left with it: test.app.t, test.app.u keep them" \
        in caplog.text
    caplog.clear()
    # A session's temporary table (the server logs its drop so), another database.
    for text in ("DROP TEMPORARY TABLE t", "DROP /*!40005 TEMPORARY */ TABLE IF EXISTS `t`",
                 "DROP DATABASE other", "DROP DATABASE apps"):
        assert stage.on_query(query(text, flags=THREAD_SPECIFIC_F)) == 0
    assert caplog.text == "" and ctx.publisher.changes() == []
    # MariaDB flags a DROP TABLE of a session with a temporary table open, of any table.
    stage.on_query(query("DROP TABLE t", flags=THREAD_SPECIFIC_F))
    assert "statement at f:250 dropped app.t, a published table" in caplog.text
    caplog.clear()
    # Renamed away, its rows leave the name too; not when another table takes its place (that
    # one's rows are said of), nor in an online schema change's swap.
    for text in ("RENAME TABLE t TO t_old, t_new TO t", "RENAME TABLE t TO _t_del, _t_gho TO t",
                 "RENAME TABLE t TO _t_old"):
        stage.on_query(query(text))
    assert "test.app.t keeps them" not in caplog.text
    caplog.clear()
    stage.on_query(query("RENAME TABLE t TO other.t_archive"))
    assert caplog.messages == [
        "the statement at f:250 renamed app.t (to other.t_archive), a published table, and the "
        "server logs no row event for the rows that left with it: test.app.t keeps them (a "
        "compacted topic for good), and a table created again under a name they had publishes "
        "there beside them. If consumers must follow, publish those rows' deletes yourself "
        "(tombstones, for a compacted topic)"]
