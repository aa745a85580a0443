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
