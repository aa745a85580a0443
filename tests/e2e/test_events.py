"""Binlog events the streamer can't read stop it by name, on a real server: never a silent skip."""
from tests import support


def test_switching_on_binlog_compression_stops_the_streamer_at_the_first_compressed_event(db, tmp_path):
    # log_bin_compress can change at run time: plain and compressed events then interleave. The
    # library knows no compressed event; without the refusal their rows reached Kafka as nothing.
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(200))")
    ns = support.unique("cmp")
    f, p = support.master_pos(conn)
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"])
    topic = f"{ns}.{name}.t"
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", f,
                                 "--start-pos", str(p)) as proc:
        support.sql(conn, "INSERT INTO t VALUES (1, 'plain')")
        support.consume([topic], expect=1, decode_ns=ns)
        admin = support.admin()
        try:
            support.sql(admin, "SET GLOBAL log_bin_compress_min_len = 10",
                        "SET GLOBAL log_bin_compress = ON")
            support.sql(conn, f"INSERT INTO t VALUES (2, '{'compressed ' * 10}')")
        finally:
            support.sql(admin, "SET GLOBAL log_bin_compress = OFF",
                        "SET GLOBAL log_bin_compress_min_len = DEFAULT")
            admin.close()
        support.sql(conn, "INSERT INTO t VALUES (3, 'plain again')")
        code = proc.wait(timeout=60)
    out = proc.output()
    assert code == 3, out
    assert "Write_rows_compressed" in out and "log_bin_compress=OFF" in out, out
    assert out.count("streamer: error: binlog event") == 1 and "Traceback" not in out
    # Row 1 only: nothing at or after the compressed event was published.
    msgs = support.consume([topic], expect=1, idle=2.0, decode_ns=ns)
    assert [m["key"] for m in msgs] == [{"id": 1}]


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
