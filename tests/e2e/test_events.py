"""Binlog events on a real server: compressed ones read as their plain twins, and those the
streamer can't read stopping it by name, never a silent skip."""
import contextlib
import json
import subprocess
import sys

import pytest
from confluent_kafka import Consumer

from streamer.errors import SnapshotRefused
from streamer.source import chunks
from tests import support
from tests.e2e.test_types import COLUMNS


def _changes(conn, table, names, lo, hi, one_transaction):
    """Inserts of every type at its edges and as nulls, an update, a delete: in one transaction
    or statement by statement."""
    statements = [f"INSERT INTO {table} (id, {names}) VALUES (1, {lo})",
                  f"INSERT INTO {table} (id, {names}) VALUES (2, {hi}), (3, {lo})",
                  f"INSERT INTO {table} (id) VALUES (4)",
                  f"UPDATE {table} SET lt = REPEAT('b', 1048576), vc = 'updated' WHERE id = 2",
                  f"DELETE FROM {table} WHERE id IN (3, 4)"]
    if one_transaction:
        statements = ["BEGIN", *statements, "COMMIT"]
    support.sql(conn, *statements)


def test_binlog_compression_switched_on_mid_stream_changes_nothing_a_consumer_sees(db, tmp_path):
    # log_bin_compress can change at run time: plain and compressed events then interleave. The
    # same changes, made once with it off and once with it on, must reach Kafka the same.
    name, conn = db
    cols = ", ".join(f"{c} {t}" for c, t, _, _ in COLUMNS)
    names = ", ".join(c for c, _, _, _ in COLUMNS)
    lo, hi = (", ".join(col[i] for col in COLUMNS) for i in (2, 3))
    for table in ("plain", "packed"):
        support.sql(conn, f"CREATE TABLE {table} (id INT PRIMARY KEY, {cols})")
    ns = support.unique("cmp")
    f, p = support.master_pos(conn)
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"])
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", f,
                                 "--start-pos", str(p)) as proc:
        _changes(conn, "plain", names, lo, hi, one_transaction=False)
        admin = support.admin()
        try:
            support.sql(admin, "SET GLOBAL log_bin_compress_min_len = 10",
                        "SET GLOBAL log_bin_compress = ON")
            # A session reads the global setting when it starts.
            packed = support.admin(name)
            _changes(packed, "packed", names, lo, hi, one_transaction=True)
            packed.close()
        finally:
            support.sql(admin, "SET GLOBAL log_bin_compress = OFF",
                        "SET GLOBAL log_bin_compress_min_len = DEFAULT")
            admin.close()
        support.sql(conn, "INSERT INTO plain (id, vc) VALUES (9, 'plain again')",
                    "INSERT INTO packed (id, vc) VALUES (9, 'plain again')")
        got = {t: support.consume([f"{ns}.{name}.{t}"], expect=10, decode_ns=ns)
               for t in ("plain", "packed")}
        assert proc.stop() == 0, proc.output()[-3000:]
    # The second run really was compressed: its rows events, of every kind, were.
    types = {row[2] for row in support.sql(conn, f"SHOW BINLOG EVENTS IN '{f}' FROM {p}")}
    assert {"Write_rows_compressed_v1", "Update_rows_compressed_v1",
            "Delete_rows_compressed_v1"} <= types, types
    view = {t: [(m["value"]["op"] if m["value"] else "tombstone", m["key"],
                 m["value"] and m["value"]["before"], m["value"] and m["value"]["after"])
                for m in msgs] for t, msgs in got.items()}
    assert view["packed"] == view["plain"]
    assert [v[0] for v in view["packed"]] == ["c", "c", "c", "c", "u", "d", "tombstone", "d",
                                              "tombstone", "c"]
    assert len(view["packed"][4][3]["lt"]) == 1048576 and view["packed"][4][3]["vc"] == "updated"


def _stopped_by(conn, name, tmp_path, *session_sql, change="UPDATE t SET v = 'changed' WHERE id = 1",
                source=None, stops=True, include=("t",)):
    """Stream db.t (only), then ``change`` in a session set up by ``session_sql``: the exit code
    (None if it ran on: then stopped, after an insert of t in row format reached the topic) and
    output, and what reached the topic."""
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), n INT)",
                "INSERT INTO t VALUES (1, 'a', 10)")
    ns = support.unique("img")
    f, p = support.master_pos(conn)
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.{t}" for t in include],
                               server=source)
    topic = f"{ns}.{name}.t"
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", f,
                                 "--start-pos", str(p)) as proc:
        support.sql(conn, "INSERT INTO t VALUES (2, 'b', 20)")
        support.consume([topic], expect=1, decode_ns=ns)
        session = (source or support.DEFAULT).admin(name)
        try:
            support.sql(session, *session_sql, change)
        finally:
            session.close()
        if stops:
            code = proc.wait(timeout=60)
        else:
            support.sql(conn, "INSERT INTO t VALUES (3, 'c', 30)")
            support.consume([topic], expect=2, decode_ns=ns)
            code = None
            assert proc.stop() == 0, proc.output()[-3000:]
    msgs = support.consume([topic], expect=1 if stops else 2, idle=2.0, decode_ns=ns)
    return code, proc.output(), msgs


def test_a_session_with_a_minimal_row_image_stops_the_streamer_naming_the_setting(db, tmp_path):
    name, conn = db
    code, out, msgs = _stopped_by(conn, name, tmp_path, "SET SESSION binlog_row_image = 'MINIMAL'")
    assert code == 3, out[-2000:]
    assert f"a rows event of {name}.t" in out and "binlog_row_image=FULL" in out
    assert "Traceback" not in out
    # Only the insert before it: the update was never published with nulls for v and n.
    assert [(m["value"]["op"], m["key"]["id"]) for m in msgs] == [("c", 2)]


def test_a_change_logged_as_a_statement_by_set_statement_stops_the_streamer_naming_it(db,
                                                                                       tmp_path):
    # MariaDB's per-statement settings, kept in the statement's text in the binlog: the
    # statement after them is read (a session logging statements: the tests below).
    name, conn = db
    code, out, msgs = _stopped_by(
        conn, name, tmp_path, change="SET STATEMENT binlog_format=STATEMENT, sql_mode='' FOR "
                                     "UPDATE t SET v = 'changed' WHERE id = 1")
    assert code == 3, out[-2000:]
    assert f"a statement changing {name}.t at " in out and "binlog_format=ROW" in out
    assert "Traceback" not in out
    assert [(m["value"]["op"], m["key"]["id"]) for m in msgs] == [("c", 2)]


@pytest.mark.every_source
def test_table_maps_without_column_names_stop_the_streamer_naming_the_setting(
        source, db, tmp_path):
    # binlog_row_metadata is global and dynamic: set to MINIMAL while streaming, the next table
    # map has no names. The library then asked the server for the table's names as they are now
    # (MariaDB: as bytes, and the streamer stopped on a TypeError); they are never used.
    name, conn = db
    admin = source.admin()
    try:
        code, out, msgs = _stopped_by(conn, name, tmp_path,
                                      "SET GLOBAL binlog_row_metadata = 'MINIMAL'",
                                      source=source)
    finally:
        support.sql(admin, "SET GLOBAL binlog_row_metadata = 'FULL'")
        admin.close()
    assert code == 3, out[-2000:]
    assert f"table {name}.t: the binlog carries no column names" in out
    assert "binlog_row_metadata=FULL" in out and "Traceback" not in out
    assert [(m["value"]["op"], m["key"]["id"]) for m in msgs] == [("c", 2)]


_STATEMENT = "SET SESSION binlog_format = 'STATEMENT'"
# A session's temporary table named like the published t, in its every statement-logged use.
_TEMPORARY_T = ("CREATE TEMPORARY TABLE t (id INT PRIMARY KEY, v VARCHAR(20), n INT)",
                "INSERT INTO t VALUES (9, 'temporary', 90)", "UPDATE t SET n = 91 WHERE id = 9",
                "TRUNCATE TABLE t", "INSERT INTO t VALUES (8, 'temporary', 80)",
                "DROP TEMPORARY TABLE t")


@contextlib.contextmanager
def _local_infile(source):
    """The server takes LOAD DATA LOCAL (MySQL 8.0's default is not to) while inside."""
    admin = source.admin()
    was = support.sql(admin, "SELECT @@GLOBAL.local_infile")[0][0]
    support.sql(admin, "SET GLOBAL local_infile = 1")
    try:
        yield
    finally:
        support.sql(admin, f"SET GLOBAL local_infile = {int(was)}")
        admin.close()


@pytest.mark.every_source
def test_statement_logged_changes_of_a_published_table_by_a_join_or_a_function_stop_it(
        source, db, tmp_path):
    # None names the published table first: a multi-table UPDATE of it through a join, a
    # stored function that changes it, which the server logs as SELECT db.f(...), and a
    # CREATE TABLE ... SELECT, whose rows the statement alone carries.
    name, conn = db
    support.sql(conn, "CREATE TABLE o (id INT PRIMARY KEY, w INT)", "INSERT INTO o VALUES (1, 5)")
    code, out, msgs = _stopped_by(conn, name, tmp_path, _STATEMENT, source=source,
                                  change="UPDATE o JOIN t ON t.id = o.id SET t.n = o.w")
    assert code == 3, out[-2000:]
    assert f"a statement changing {name}.t at " in out and "binlog_format=ROW" in out
    assert [(m["value"]["op"], m["key"]["id"]) for m in msgs] == [("c", 2)]

    support.sql(conn, "DROP TABLE t", "CREATE FUNCTION bump(x INT) RETURNS INT DETERMINISTIC "
                "BEGIN UPDATE t SET n = n + x WHERE id = 1; RETURN x; END")
    code, out, msgs = _stopped_by(conn, name, tmp_path, _STATEMENT, source=source,
                                  change="SELECT bump(5)")
    assert code == 3, out[-2000:]
    assert (f"a statement changing {name}.t (by the stored function {name}.bump) at " in out)
    assert "Traceback" not in out
    assert [(m["value"]["op"], m["key"]["id"]) for m in msgs] == [("c", 2)]
    if source.name.startswith("mysql"):
        return  # MySQL 8.0.15 with GTIDs refuses CREATE TABLE ... SELECT
    # A new published table filled by CREATE TABLE ... SELECT, logged as the statement alone.
    support.sql(conn, "DROP TABLE t")
    code, out, msgs = _stopped_by(conn, name, tmp_path, _STATEMENT, source=source,
                                  include=("t", "t_copy"),
                                  change="CREATE TABLE t_copy (PRIMARY KEY (id)) SELECT * FROM t")
    assert code == 3, out[-2000:]
    assert f"a statement changing {name}.t_copy at " in out


@pytest.mark.every_source
def test_a_statement_logged_change_of_no_published_table_is_said_and_streaming_goes_on(
        source, db, tmp_path):
    # The table's trigger changes t, but the streamer's user is not shown triggers (it has no
    # TRIGGER privilege): it can't tell, and says so, naming what it could not see. The
    # statement comes with its context (an INSERT_ID, a RAND() seed, a user variable: events of
    # their own), which changes nothing. Before it, a LOAD DATA of another unpublished table
    # (the file's bytes in events of their own, the statement in one more), and the session's
    # own temporary table named t, filled, emptied and dropped: not the published t.
    name, conn = db
    support.sql(conn, "CREATE TABLE o (id INT AUTO_INCREMENT PRIMARY KEY, w INT, r DOUBLE)",
                "CREATE TRIGGER o_in AFTER INSERT ON o FOR EACH ROW "
                "UPDATE t SET n = NEW.w WHERE id = 1", "CREATE TABLE l (id INT PRIMARY KEY, w INT)")
    lines = tmp_path / "l.csv"
    lines.write_text("".join(f"{i},{i * 7}\n" for i in range(3000)))  # past one 16 KB block
    load = f"LOAD DATA LOCAL INFILE '{lines}' INTO TABLE l FIELDS TERMINATED BY ','"
    with _local_infile(source):
        code, out, msgs = _stopped_by(conn, name, tmp_path, _STATEMENT, *_TEMPORARY_T,
                                      "SET @w = 70", load, stops=False, source=source,
                                      change="INSERT INTO o (w, r) VALUES (@w, RAND())")
    assert code is None
    assert support.sql(conn, "SELECT COUNT(*) FROM l") == [(3000,)]
    assert f"row changes of {name}.t were logged" not in out
    assert f"row changes of {name}.l were logged as a statement" in out
    assert f"row changes of {name}.o were logged as a statement" in out
    assert f"can't see: any trigger on {name}.o, which information_schema shows only to a user " \
           "with the TRIGGER privilege" in out
    assert [(m["value"]["op"], m["key"]["id"]) for m in msgs] == [("c", 2), ("c", 3)]


@pytest.mark.on_source("mariadb-11.4")
def test_full_nodup_updates_are_published_whole_as_full_ones_are(tmp_path):
    # MariaDB 11.4's binlog_row_image FULL_NODUP logs an update's after image with the changed
    # columns only; the before image is whole. The same updates, to a table logged FULL and to
    # its twin logged FULL_NODUP, are published alike.
    source = support.SOURCES["mariadb-11.4"]
    name = support.unique("nodup")
    conn = source.admin()
    columns = ("id INT PRIMARY KEY, a INT, b VARCHAR(20), c TEXT, d JSON, "
               "e DATETIME(6), n INT NULL")
    rows = ("(1, 1, 'one', 'x', '{\"k\": 1}', '2024-01-01 00:00:01.5', NULL), "
            "(2, 2, 'same', 'y', NULL, '2024-01-02 00:00:00', 2), "
            "(3, 3, 'three', NULL, '[1]', '2024-01-03 00:00:00', 3), "
            "(4, 4, 'four', 'w', '{}', '2024-01-04 00:00:00', 4)")
    statements = ["UPDATE {t} SET a = a + 1 WHERE id = 1",
                  "UPDATE {t} SET a = 5, b = b WHERE id = 2",
                  "UPDATE {t} SET n = NULL WHERE id = 3", "UPDATE {t} SET n = 7 WHERE id = 1",
                  "UPDATE {t} SET c = REPEAT('z', 5000), d = JSON_OBJECT('k', id) WHERE id <= 3",
                  "UPDATE {t} SET id = 10 WHERE id = 4", "UPDATE {t} SET e = '2025-06-01 12:00:00.25', b = 'x'"]
    support.sql(conn, f"CREATE DATABASE {name}")
    try:
        def changes():
            session = source.admin(name)
            for table, image in (("full", "FULL"), ("nodup", "FULL_NODUP")):
                support.sql(session, f"CREATE TABLE {table} ({columns})",
                            f"INSERT INTO {table} VALUES {rows}",
                            f"SET SESSION binlog_row_image = '{image}'",
                            *[s.format(t=table) for s in statements],
                            "SET SESSION binlog_row_image = 'FULL'")

        ns = support.unique("nd")
        f, p = support.master_pos(conn)
        changes()
        cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"], server=source)
        # The server's own setting FULL_NODUP is taken at start as FULL is.
        support.sql(conn, "SET GLOBAL binlog_row_image = 'FULL_NODUP'")
        with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", f,
                                     "--start-pos", str(p)) as proc:
            try:
                proc.wait_reading()
            finally:
                support.sql(conn, "SET GLOBAL binlog_row_image = 'FULL'")
            # 4 inserts, 11 updates, the key change's delete, tombstone and insert.
            full = support.consume([f"{ns}.{name}.full"], expect=18, decode_ns=ns)
            nodup = support.consume([f"{ns}.{name}.nodup"], expect=18, decode_ns=ns)
            assert proc.stop() == 0, proc.output()[-3000:]
        kinds = {r[2] for r in support.sql(conn, f"SHOW BINLOG EVENTS IN '{f}' FROM {p}")}
    finally:
        support.sql(conn, "SET GLOBAL binlog_row_image = 'FULL'", f"DROP DATABASE {name}")

    def published(msgs):
        return [(m["key"], m["value"] and (m["value"]["op"], m["value"]["before"],
                                          m["value"]["after"])) for m in msgs]
    assert "Update_rows_v1" in kinds
    assert published(nodup) == published(full)
    assert [m["value"]["after"]["c"] for m in nodup[8:11]] == ["z" * 5000] * 3
    last = {m["key"]["id"]: m["value"]["after"] for m in nodup[-4:]}
    assert last[2]["b"] == "x" and last[2]["a"] == 5 and last[10]["n"] == 4, last


def _stream_from(tmp_path, conn, source, name, table, expect, changes):
    """Run the streamer from the binlog's end, make ``changes``, consume ``expect`` messages
    (a number, or a function of no argument that says it once the changes are made)."""
    ns = support.unique("ev")
    f, p = support.master_pos(conn)
    changes()
    if callable(expect):
        expect = expect()
    cfg = support.write_config(str(tmp_path / f"{ns}.yaml"), ns, [f"{name}.*"], server=source)
    with support.StreamerProcess(cfg, str(tmp_path / f"{ns}.log"), "--start-file", f,
                                 "--start-pos", str(p)) as proc:
        msgs = support.consume([f"{ns}.{name}.{table}"], expect=expect, decode_ns=ns)
        assert proc.stop() == 0, proc.output()[-3000:]
    return msgs, proc.output()


@pytest.mark.every_source
def test_partial_json_updates_are_applied_and_equal_select(db, tmp_path, source):
    """MySQL with binlog_row_value_options=PARTIAL_JSON logs JSON_SET, JSON_REPLACE and
    JSON_REMOVE as diffs; each published after value is the whole document, as SELECT shows it.
    (MariaDB has no such option: its JSON is text, and the same statements are plain updates.)"""
    name, conn = db
    big = "JSON_OBJECT('k', REPEAT('x', 20000), 'arr', JSON_ARRAY(1, 2, 3, 4, 5))"
    support.sql(conn, "CREATE TABLE j (id INT PRIMARY KEY, doc JSON, other JSON)",
                "INSERT INTO j VALUES (1, '{\"a\": {\"b\": [1, 2, {\"c\": \"d\"}]}, \"n\": 1.5}', "
                "'[1, 2, 3]')",
                f"INSERT INTO j VALUES (2, {big}, NULL)")
    statements = [
        "UPDATE j SET doc = JSON_SET(doc, '$.a.b[2].c', 'e', '$.new', 7) WHERE id = 1",
        "UPDATE j SET doc = JSON_REPLACE(doc, '$.n', 2.25, '$.a.b[0]', 'zero') WHERE id = 1",
        "UPDATE j SET doc = JSON_REMOVE(doc, '$.a.b[1]') WHERE id = 1",
        "UPDATE j SET doc = JSON_SET(doc, '$.\"key with space\"', JSON_ARRAY(1, 'two')), "
        "other = JSON_REMOVE(other, '$[0]') WHERE id = 1",
        "UPDATE j SET doc = JSON_SET(doc, '$.arr[1]', 99, '$.arr[9]', 100) WHERE id = 2",
        "UPDATE j SET doc = JSON_REPLACE(doc, '$.k', 'short') WHERE id = 2",
    ]
    docs = []

    kinds = set()

    def changes():
        session = source.admin(name)
        f, p = support.master_pos(session)
        if source.mysql:
            support.sql(session, "SET SESSION binlog_row_value_options = 'PARTIAL_JSON'")
        for statement in statements:
            support.sql(session, statement)
            docs.append(support.sql(session, "SELECT doc, other FROM j WHERE id = "
                                             f"{1 if 'id = 1' in statement else 2}")[0])
        kinds.update(r[2] for r in support.sql(session, f"SHOW BINLOG EVENTS IN '{f}' FROM {p}"))

    msgs, _ = _stream_from(tmp_path, conn, source, name, "j", len(statements), changes)
    # On MySQL the updates were logged as diffs, not as documents.
    assert ("Update_rows_partial" in kinds) == source.mysql, kinds
    got = [(m["value"]["after"]["doc"], m["value"]["after"]["other"]) for m in msgs]
    if not source.mysql:  # MariaDB's JSON is text as written: compare as JSON
        got = [tuple(json.loads(v) if v else v for v in pair) for pair in got]
        docs = [tuple(json.loads(v) if v else v for v in pair) for pair in docs]
    assert got == docs


@pytest.mark.every_source
def test_partition_statements_that_move_rows_without_row_events_are_warned_about(db, tmp_path,
                                                                                 source):
    """Dropping, emptying, exchanging or converting a partition moves its rows with no row
    event, as does renaming a table onto a published one's name: the stream goes on, and a
    WARNING names each statement and the tables whose topics no longer follow them. Emptying
    every partition is a TRUNCATE, published as one. Comments in them (an application's tag
    after one) change nothing."""
    name, conn = db
    support.sql(conn, "CREATE TABLE p (id INT PRIMARY KEY) PARTITION BY RANGE (id) ("
                      "PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN (20), "
                      "PARTITION p2 VALUES LESS THAN (30), PARTITION p3 VALUES LESS THAN MAXVALUE)",
                "CREATE TABLE px (id INT PRIMARY KEY)", "INSERT INTO px VALUES (25)")

    def changes():
        support.sql(conn, "INSERT INTO p VALUES (1), (11), (21), (31)",
                    "ALTER /* retention */ TABLE p DROP PARTITION p0",
                    "ALTER TABLE p TRUNCATE PARTITION p1",
                    "ALTER TABLE p EXCHANGE PARTITION p2 WITH TABLE px")
        if not source.mysql:  # MariaDB 10.7 and later
            support.sql(conn, "ALTER TABLE p CONVERT PARTITION p2 TO TABLE pout")
        support.sql(conn, "INSERT INTO p VALUES (32)",
                    "ALTER TABLE p TRUNCATE PARTITION ALL /*controller='nightly'*/",
                    "INSERT INTO p VALUES (33)")
        # A table rebuilt aside and swapped in: p's rows change with no row event too.
        support.sql(conn, "CREATE TABLE p_new (id INT PRIMARY KEY)", "INSERT INTO p_new VALUES (40)",
                    "RENAME TABLE p TO p_old, p_new TO p", "INSERT INTO p VALUES (41)")

    msgs, out = _stream_from(tmp_path, conn, source, name, "p", 8, changes)
    assert [(m["value"]["op"], (m["value"]["after"] or {}).get("id")) for m in msgs] == [
        ("c", 1), ("c", 11), ("c", 21), ("c", 31), ("c", 32), ("t", None), ("c", 33), ("c", 41)]
    renamed = [ln for ln in out.splitlines() if "a published table, and the server logs" in ln]
    assert len(renamed) == 3 and all("WARNING" in ln for ln in renamed), renamed
    assert f"renamed {name}.p to {name}.p_old, a published" in renamed[0]
    assert f"renamed {name}.p_new to {name}.p, a published" in renamed[1]
    # p_new's own topic keeps the row it had, under a name no table has now.
    assert f"renamed {name}.p_new (to {name}.p), a published table" in renamed[2]
    said = [ln for ln in out.splitlines() if "logs no row event for such rows" in ln]
    want = [f"on {name}.p dropped a partition: its rows left the table",
            f"on {name}.p emptied a partition: its rows left the table",
            f"on {name}.p swapped a partition's rows with those of {name}.px"]
    if not source.mysql:
        want.append(f"on {name}.p moved a partition's rows out to the table {name}.pout")
    assert len(said) == len(want) and all(w in ln and "WARNING" in ln for w, ln in zip(want, said)), \
        said
    assert f"the topics of {name}.p and {name}.px keep" in said[2]


@pytest.mark.every_source
def test_a_published_table_dropped_replaced_or_renamed_away_is_warned_about(db, tmp_path, source):
    """DROP TABLE, DROP DATABASE, MariaDB's CREATE OR REPLACE TABLE and a RENAME away take a
    table's rows from its name with no row event: the stream goes on, and a WARNING names each
    statement and the topics that keep the rows. A table whose topic never had a message, or a
    session's temporary table (one open while a table is dropped), is not said."""
    name, conn = db
    gone = f"{name}_gone"
    support.sql(conn, "CREATE TABLE d (id INT PRIMARY KEY)", "CREATE TABLE quiet (id INT)",
                "CREATE TABLE r (id INT PRIMARY KEY)",
                f"CREATE DATABASE {gone}", f"CREATE TABLE {gone}.g (id INT PRIMARY KEY)")
    ns = support.unique("dr")
    f, p = support.master_pos(conn)
    try:
        support.sql(conn, "INSERT INTO d VALUES (1), (2)", f"INSERT INTO {gone}.g VALUES (1)",
                    "INSERT INTO r VALUES (1)", "CREATE TEMPORARY TABLE tmp (id INT)",
                    "CREATE TEMPORARY TABLE d (id INT)", "DROP TEMPORARY TABLE d",
                    "DROP TABLE d, quiet", "RENAME TABLE r TO r_old",
                    "CREATE TABLE d (id INT PRIMARY KEY)", "INSERT INTO d VALUES (3)")
        if not source.mysql:
            support.sql(conn, "CREATE OR REPLACE TABLE d (id INT PRIMARY KEY)",
                        "INSERT INTO d VALUES (4)")
        support.sql(conn, f"DROP DATABASE {gone}", "INSERT INTO d VALUES (5)")
    except BaseException:
        support.sql(conn, f"DROP DATABASE IF EXISTS {gone}")
        raise
    cfg = support.write_config(str(tmp_path / f"{ns}.yaml"), ns, [f"{name}.*", f"{gone}.*"],
                               server=source)
    with support.StreamerProcess(cfg, str(tmp_path / f"{ns}.log"), "--start-file", f,
                                 "--start-pos", str(p)) as proc:
        ids = [3, 4, 5] if not source.mysql else [3, 5]
        msgs = support.consume([f"{ns}.{name}.d"], expect=2 + len(ids), decode_ns=ns)
        assert proc.stop() == 0, proc.output()[-3000:]
    assert [m["value"]["after"]["id"] for m in msgs] == [1, 2] + ids
    said = [ln for ln in proc.output().splitlines() if "the rows that left with it" in ln]
    want = [f"dropped {name}.d, a published table, and the server logs no row event for the "
            f"rows that left with it: {ns}.{name}.d keeps them",
            f"renamed {name}.r (to {name}.r_old), a published table, and the server logs no row "
            f"event for the rows that left with it: {ns}.{name}.r keeps them"]
    if not source.mysql:
        want.append(f"replaced {name}.d, a published table")
    want.append(f"dropped database {gone}, with published tables, and the server logs no row "
                f"event for the rows that left with it: {ns}.{gone}.g keeps them")
    assert len(said) == len(want) and all(w in ln and "WARNING" in ln for w, ln in zip(want, said)), \
        said
    assert "quiet" not in proc.output()


@pytest.mark.every_source
def test_tables_foreign_key_actions_change_are_named_at_start_in_check_and_when_added(
        db, tmp_path, source):
    """InnoDB carries out ON DELETE CASCADE and ON UPDATE SET NULL below the binlog: the
    parent's change is logged, the child's not. The streamer names each published table such a
    key changes: at start, in `streamer check` (a failed check), and when DDL adds one."""
    name, conn = db
    support.sql(conn, "CREATE TABLE p (id INT PRIMARY KEY)",
                "CREATE TABLE c (id INT PRIMARY KEY, pid INT, CONSTRAINT c_p FOREIGN KEY (pid) "
                "REFERENCES p (id) ON DELETE CASCADE ON UPDATE SET NULL)",
                "CREATE TABLE r (id INT PRIMARY KEY, pid INT, FOREIGN KEY (pid) REFERENCES p (id))",
                "CREATE TABLE later (id INT PRIMARY KEY, pid INT)",
                "INSERT INTO p VALUES (1), (2)", "INSERT INTO c VALUES (10, 1), (20, 2)")
    f, p = support.master_pos(conn)
    support.sql(conn, "DELETE FROM p WHERE id = 1", "UPDATE p SET id = 3 WHERE id = 2")
    # The fact behind it all: the binlog has the parent's rows events and none of the child's.
    kinds = [(e[2], e[5]) for e in support.sql(conn, f"SHOW BINLOG EVENTS IN '{f}' FROM {p}")]
    assert len([k for k, _ in kinds if k.startswith(("Delete_rows", "Update_rows"))]) == 2, kinds
    assert [tuple(r) for r in support.sql(conn, "SELECT id, pid FROM c")] == [(20, None)]
    ns = support.unique("fk")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"], server=source)
    with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
        support.wait_for(lambda: "its rows are changed by foreign key actions" in proc.output(),
                         what="the start's warning")
        # The warning comes before the start takes the binlog's end: a change made before that
        # is behind it (a CI run under load read nothing).
        proc.wait_reading()
        support.sql(conn, "ALTER TABLE later ADD CONSTRAINT l_p FOREIGN KEY (pid) REFERENCES p (id) "
                          "ON DELETE SET NULL", "INSERT INTO p VALUES (9)")
        support.consume([f"{ns}.{name}.p"], expect=1, decode_ns=ns)
        assert proc.stop() == 0, proc.output()[-3000:]
    out = proc.output()
    warned = [ln for ln in out.splitlines() if "WARNING" in ln and "foreign key" in ln]
    assert len(warned) == 2, warned
    assert f"{name}.c: its rows are changed by foreign key actions: `c_p` on {name}.p (ON DELETE " \
           f"CASCADE, ON UPDATE SET NULL); the server logs no row event" in warned[0]
    assert f"{name}.later has a foreign key with an ON DELETE or ON UPDATE action now" in warned[1]
    assert f"{name}.r" not in out  # a key without an action changes nothing
    checked = subprocess.run([sys.executable, "-m", "streamer.cli", "check", "-c", cfg],
                             cwd=support.ROOT, capture_output=True, text=True, timeout=120)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    failed = [ln for ln in checked.stdout.splitlines() if ln.startswith("✗")]
    assert [ln.split(":")[0] for ln in failed] == [f"✗ foreign key actions on {name}.c",
                                                   f"✗ foreign key actions on {name}.later"]


def test_rows_a_rollback_to_savepoint_took_back_are_not_published(db, tmp_path):
    """MariaDB writes a rolled-back savepoint's rows when the transaction also touched a
    non-transactional table, then ROLLBACK TO for a replica: the topic must hold what the table
    holds. (MySQL drops them from the binlog itself.)"""
    name, conn = db
    support.sql(conn, "CREATE TABLE m (id INT PRIMARY KEY) ENGINE=MyISAM",
                "CREATE TABLE i (id INT PRIMARY KEY)")

    def changes():
        support.sql(conn, "BEGIN", "INSERT INTO i VALUES (1)", "INSERT INTO m VALUES (1)",
                    "SAVEPOINT s", "INSERT INTO i VALUES (2), (3)", "ROLLBACK TO SAVEPOINT s",
                    "INSERT INTO i VALUES (4)", "COMMIT", "INSERT INTO i VALUES (5)")

    msgs, log = _stream_from(tmp_path, conn, support.DEFAULT, name, "i", 3, changes)
    assert [m["key"]["id"] for m in msgs] == [1, 4, 5]
    assert [r[0] for r in support.sql(conn, "SELECT id FROM i ORDER BY id")] == [1, 4, 5]
    # Its group was read whole before its rows were handled: no batch aborted for them.
    assert "taking back" not in log and "aborted" not in log


@pytest.mark.every_source
def test_a_system_versioned_tables_current_rows_are_published_not_its_history(db, tmp_path,
                                                                              source):
    """MariaDB's WITH SYSTEM VERSIONING: the binlog holds the history rows an update writes and
    the period an update or delete ends; the topic holds the changes of the current rows, with
    the same key and columns as SELECT and as a snapshot of the table."""
    if source.mysql:
        pytest.skip("MySQL has no system-versioned tables")
    name, conn = db
    support.sql(conn, "CREATE TABLE sv (id INT PRIMARY KEY, v INT) WITH SYSTEM VERSIONING",
                "CREATE TABLE svx (id INT PRIMARY KEY, v INT, "
                "s TIMESTAMP(6) GENERATED ALWAYS AS ROW START, "
                "e TIMESTAMP(6) GENERATED ALWAYS AS ROW END, PERIOD FOR SYSTEM_TIME(s, e)) "
                "WITH SYSTEM VERSIONING")

    def changes():
        for t in ("sv", "svx"):
            support.sql(conn, f"INSERT INTO {t} (id, v) VALUES (1, 10), (2, 20)",
                        f"UPDATE {t} SET v = 11 WHERE id = 1", f"DELETE FROM {t} WHERE id = 2")

    msgs, _ = _stream_from(tmp_path, conn, source, name, "sv", 5, changes)
    assert [(m["value"]["op"] if m["value"] else None, m["key"]) for m in msgs] == [
        ("c", {"id": 1}), ("c", {"id": 2}), ("u", {"id": 1}), ("d", {"id": 2}), (None, {"id": 2})]
    assert msgs[2]["value"]["after"] == {"id": 1, "v": 11}  # row_start/row_end: hidden
    ns = support.unique("svs")
    cfg = support.write_config(str(tmp_path / "s.yaml"), ns, [f"{name}.*"], server=source,
                               start={"initial": "snapshot"})
    with support.StreamerProcess(cfg, str(tmp_path / "s.log")) as proc:
        snapped = support.consume([f"{ns}.{name}.sv", f"{ns}.{name}.svx"], expect=2,
                                  decode_ns=ns)
        assert proc.stop() == 0, proc.output()[-3000:]
    by_topic = {m["topic"].rsplit(".", 1)[1]: m for m in snapped}
    assert by_topic["sv"]["key"] == {"id": 1} and by_topic["sv"]["value"]["after"] == \
        {"id": 1, "v": 11}
    assert by_topic["svx"]["key"] == {"id": 1}  # the period's end is not in the key
    assert set(by_topic["svx"]["value"]["after"]) == {"id", "v", "s", "e"}


@pytest.mark.every_source
def test_a_sequence_is_not_published_and_the_log_says_so(db, tmp_path, source):
    """MariaDB's CREATE SEQUENCE: the binlog writes the sequence's one row of state again, as an
    insert, at each NEXTVAL cache refill, SETVAL and ALTER SEQUENCE. The rows that take its
    values are published; the sequence is not, in the stream or a snapshot, and the log says so."""
    if source.mysql:
        pytest.skip("MySQL has no sequences")
    name, conn = db
    support.sql(conn, "CREATE SEQUENCE s START WITH 100 CACHE 2",
                "CREATE TABLE t (id BIGINT PRIMARY KEY, v INT)")
    f, p = support.master_pos(conn)

    def changes():
        support.sql(conn, *[f"INSERT INTO t VALUES (NEXTVAL(s), {i})" for i in range(5)],
                    "SELECT SETVAL(s, 500)", "ALTER SEQUENCE s RESTART WITH 1000",
                    "INSERT INTO t VALUES (NEXTVAL(s), 5)")

    msgs, out = _stream_from(tmp_path, conn, source, name, "t", 6, changes)
    written = [r for r in support.sql(conn, f"SHOW BINLOG EVENTS IN '{f}' FROM {p}")
               if r[2].startswith("Write_rows")]
    assert len(written) > 6  # the sequence's own inserts are in the binlog
    assert [m["key"]["id"] for m in msgs] == [100, 101, 102, 103, 104, 1000]
    assert f"table {name}.s: a sequence (CREATE SEQUENCE)" in out
    # A snapshot of the database reads the table and leaves the sequence out; asked for by name,
    # the sequence is refused, naming why.
    ns = support.unique("sq")
    cfg = support.write_config(str(tmp_path / "s.yaml"), ns, [f"{name}.*"], server=source,
                               start={"initial": "snapshot"})
    with support.StreamerProcess(cfg, str(tmp_path / "s.log")) as proc:
        snapped = support.consume([f"{ns}.{name}.t"], expect=6, decode_ns=ns)
        assert proc.stop() == 0, proc.output()[-3000:]
    assert [m["value"]["after"] for m in snapped] == [
        {"id": i, "v": v} for v, i in enumerate([100, 101, 102, 103, 104, 1000])]
    admin = Consumer({"bootstrap.servers": support.KAFKA, "group.id": support.unique("test-")})
    try:
        topics = list(admin.list_topics(timeout=10).topics)
    finally:
        admin.close()
    assert [t for t in topics if t.endswith(f".{name}.t")] and \
        not [t for t in topics if t.endswith(f".{name}.s")], topics
    with pytest.raises(SnapshotRefused, match=f"{name}.s is a sequence"):
        chunks.describe(conn, name, "s")


@pytest.mark.every_source
def test_each_change_names_its_rows_events_offset_as_the_server_shows_it(db, tmp_path, source):
    """source.file and source.pos are the rows event's, as SHOW BINLOG EVENTS shows it, on every
    server: MariaDB 11.4 writes no offset inside a transaction (binlog_legacy_event_pos=OFF),
    so the streamer works them out. A DDL naming a character set (MariaDB 11 logs it with a
    status variable of its own) passes on the way."""
    name, conn = db
    support.sql(conn, "CREATE TABLE o (id INT PRIMARY KEY, v VARCHAR(300))")
    shown = []

    def changes():
        session = source.admin(name)
        f, p = support.master_pos(session)
        support.sql(session, "BEGIN", "INSERT INTO o VALUES (1, REPEAT('a', 300))",
                    "INSERT INTO o VALUES (2, 'b'), (3, 'c')", "UPDATE o SET v = 'x' WHERE id = 1",
                    "COMMIT",
                    "CREATE TABLE o2 (id INT PRIMARY KEY) CHARACTER SET utf8mb4",
                    f"CREATE DATABASE {name}_cs CHARACTER SET utf8mb4",
                    "INSERT INTO o VALUES (4, 'd')")
        for row in support.sql(session, f"SHOW BINLOG EVENTS IN '{f}' FROM {p}"):
            if row[2].endswith("_rows_v1") or row[2] in ("Write_rows", "Update_rows"):
                shown.append((row[0], int(row[1])))
        support.sql(session, f"DROP DATABASE {name}_cs")

    msgs, _ = _stream_from(tmp_path, conn, source, name, "o", 5, changes)
    got = [(m["value"]["source"]["file"], m["value"]["source"]["pos"]) for m in msgs]
    # Rows events: the first insert, the two-row insert (two changes), the update, the last insert.
    assert got == [shown[0], shown[1], shown[1], shown[2], shown[3]], (got, shown)


def _snapshotted(tmp_path, source, name, table):
    """The after values a snapshot of ``name``.``table`` publishes (start.initial: snapshot)."""
    ns = support.unique("sn")
    cfg = support.write_config(str(tmp_path / f"{ns}.yaml"), ns, [f"{name}.{table}"],
                               server=source, start={"initial": "snapshot"})
    with support.StreamerProcess(cfg, str(tmp_path / f"{ns}.log")) as proc:
        snapped = support.consume([f"{ns}.{name}.{table}"], expect=1, decode_ns=ns)
        assert proc.stop() == 0, proc.output()[-3000:]
    return [m["value"]["after"] for m in snapped]


@pytest.mark.every_source
def test_generated_columns_virtual_and_stored_are_published_as_select_shows_them(
        db, tmp_path, source):
    # A VIRTUAL column is computed on read, not stored: each server still logs its value in a
    # full row image, and the binlog's rows equal what a snapshot's SELECT reads.
    name, conn = db
    support.sql(conn, "CREATE TABLE g (id INT PRIMARY KEY, a INT, b INT, v INT AS (a + b) "
                "VIRTUAL, s INT AS (a * b) STORED, t VARCHAR(20) AS (CONCAT('x', a)) VIRTUAL)")

    def changes():
        support.sql(conn, "INSERT INTO g (id, a, b) VALUES (1, 2, 3)",
                    "UPDATE g SET a = 5 WHERE id = 1")
    msgs, _ = _stream_from(tmp_path, conn, source, name, "g", 2, changes)
    first = {"id": 1, "a": 2, "b": 3, "v": 5, "s": 6, "t": "x2"}
    now = {"id": 1, "a": 5, "b": 3, "v": 8, "s": 15, "t": "x5"}
    assert [(m["value"]["before"], m["value"]["after"]) for m in msgs] == \
        [(None, first), (first, now)]
    assert _snapshotted(tmp_path, source, name, "g") == [now]


@pytest.mark.every_source
def test_columns_the_server_hides_are_published_as_select_star_shows_the_table(
        db, tmp_path, source):
    # MySQL: a functional index's key part is a hidden generated column, in the table map but in
    # no rows event: the streamer took its absence for a partial row image and stopped (exit
    # 3), so a table with a functional index could not be streamed. MariaDB: an INVISIBLE
    # column is in the rows events and in information_schema, and is published.
    name, conn = db
    if source.mysql:
        support.sql(conn, "CREATE TABLE g (id INT PRIMARY KEY, a VARCHAR(20), "
                    "INDEX up ((UPPER(a))), INDEX two ((id + 1), a))")
        first, now = {"id": 1, "a": "x"}, {"id": 1, "a": "y"}
    else:
        support.sql(conn, "CREATE TABLE g (id INT PRIMARY KEY, a VARCHAR(20), "
                    "h INT INVISIBLE DEFAULT 7)")
        first, now = {"id": 1, "a": "x", "h": 7}, {"id": 1, "a": "y", "h": 7}

    def changes():
        support.sql(conn, "INSERT INTO g (id, a) VALUES (1, 'x')",
                    "UPDATE g SET a = 'y' WHERE id = 1")
    msgs, out = _stream_from(tmp_path, conn, source, name, "g", 2, changes)
    assert [(m["value"]["before"], m["value"]["after"]) for m in msgs] == \
        [(None, first), (first, now)]
    if source.mysql:
        assert "is hidden (a functional index's): not published" in out, out[-3000:]
    assert _snapshotted(tmp_path, source, name, "g") == [now]
