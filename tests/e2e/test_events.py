"""Binlog events on a real server: compressed ones read as their plain twins, and those the
streamer can't read stopping it by name, never a silent skip."""
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


def _stopped_by(conn, name, tmp_path, *session_sql):
    """Stream db.t, then run an UPDATE of it in a session set up by ``session_sql``: the exit code
    and output, and what reached the topic."""
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), n INT)",
                "INSERT INTO t VALUES (1, 'a', 10)")
    ns = support.unique("img")
    f, p = support.master_pos(conn)
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"])
    topic = f"{ns}.{name}.t"
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", f,
                                 "--start-pos", str(p)) as proc:
        support.sql(conn, "INSERT INTO t VALUES (2, 'b', 20)")
        support.consume([topic], expect=1, decode_ns=ns)
        session = support.admin(name)
        try:
            support.sql(session, *session_sql, "UPDATE t SET v = 'changed' WHERE id = 1")
        finally:
            session.close()
        code = proc.wait(timeout=60)
    msgs = support.consume([topic], expect=1, idle=2.0, decode_ns=ns)
    return code, proc.output(), msgs


def test_a_session_with_a_minimal_row_image_stops_the_streamer_naming_the_setting(db, tmp_path):
    name, conn = db
    code, out, msgs = _stopped_by(conn, name, tmp_path, "SET SESSION binlog_row_image = 'MINIMAL'")
    assert code == 3, out[-2000:]
    assert f"a rows event of {name}.t" in out and "binlog_row_image=FULL" in out
    assert "Traceback" not in out
    # Only the insert before it: the update was never published with nulls for v and n.
    assert [(m["value"]["op"], m["key"]["id"]) for m in msgs] == [("c", 2)]


def test_a_session_logging_statements_stops_the_streamer_naming_the_setting(db, tmp_path):
    name, conn = db
    code, out, msgs = _stopped_by(conn, name, tmp_path, "SET SESSION binlog_format = 'STATEMENT'")
    assert code == 3, out[-2000:]
    assert f"a statement changing {name}.t at " in out and "binlog_format=ROW" in out
    assert "Traceback" not in out
    assert [(m["value"]["op"], m["key"]["id"]) for m in msgs] == [("c", 2)]
