"""heartbeat.enabled: auto turns the heartbeat on where its table can be written, and off with a
warning naming the grant where it can't; streaming goes on either way."""
from tests import support


def _run(tmp_path, name, ns, **over):
    cfg = support.write_config(str(tmp_path / f"{ns}.yaml"), ns, [f"{name}.t"],
                               heartbeat={"enabled": "auto", "interval_ms": 100}, **over)
    conn = support.admin(name)
    with support.StreamerProcess(cfg, str(tmp_path / f"{ns}.log")) as proc:
        proc.wait_reading()
        support.sql(conn, "INSERT INTO t VALUES (1)")
        msgs = support.consume([f"{ns}.{name}.t"], expect=1, decode_ns=ns)
        assert proc.stop() == 0, proc.output()[-3000:]
        out = proc.output()
    support.sql(conn, "DELETE FROM t")
    conn.close()
    assert [m["key"]["id"] for m in msgs] == [1]
    return out


def test_auto_heartbeat_is_on_where_its_table_can_be_written(db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY)")
    out = _run(tmp_path, name, support.unique("hba"))
    assert "heartbeat off" not in out and "1 s resolution" not in out


def test_auto_heartbeat_is_off_with_a_warning_where_it_can_not_be_written(db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY)")
    user, password = support.unique("hb"), support.unique("pw")
    support.sql(conn, f"CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY '{password}'",
                f"GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO '{user}'@'127.0.0.1'")
    try:
        (tmp_path / "pw").write_text(password)
        out = _run(tmp_path, name, support.unique("hbo"),
                   mysql={"user": user, "password_file": str(tmp_path / "pw"), "host": "127.0.0.1",
                          "port": support.MYSQL_PORT, "server_id": 7401})
    finally:
        support.sql(conn, f"DROP USER '{user}'@'127.0.0.1'")
    assert "WARNING streamer.ops.observe: heartbeat off:" in out
    assert "GRANT INSERT, UPDATE ON `streamer_heartbeat`.*" in out and "Traceback" not in out
    assert "measured from the binlog's event times, whole seconds" in out
