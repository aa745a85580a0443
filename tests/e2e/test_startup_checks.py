"""Start-up checks both ends before it leaves anything behind, and a Kafka that isn't there is
reported within kafka_connect_timeout_s, not after a minute."""
import time

from confluent_kafka.admin import AdminClient

from tests import support


def _topics():
    return set(AdminClient({"bootstrap.servers": support.KAFKA}).list_topics(timeout=10).topics)


def test_a_wrong_mysql_password_creates_nothing_in_kafka(tmp_path):
    ns = support.unique("nopw")
    (tmp_path / "pw").write_text("not-the-password")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, ["demo.*"],
                               mysql={"host": "127.0.0.1", "port": support.MYSQL_PORT,
                                      "user": "streamer", "password_file": str(tmp_path / "pw"),
                                      "server_id": 7301})
    with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
        assert proc.wait(60) == 3
        out = proc.output()
    assert "refused the streamer's user 'streamer'" in out and "Traceback" not in out
    assert not {t for t in _topics() if t.startswith(ns + ".")}


def test_an_unreachable_kafka_is_reported_within_the_connect_timeout(tmp_path):
    ns = support.unique("nokafka")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, ["demo.*"],
                               kafka={"bootstrap.servers": "127.0.0.1:1"},
                               kafka_connect_timeout_s=5)
    began = time.monotonic()
    with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
        assert proc.wait(60) == 4
        out = proc.output()
    took = time.monotonic() - began
    assert "Kafka at 127.0.0.1:1 did not accept the transactional producer" in out, out[-2000:]
    assert "kafka_connect_timeout_s is 5" in out and "Traceback" not in out
    assert took < 30, f"took {took:.0f} s to report an unreachable Kafka"
    # librdkafka's own lines come through logging, at the level of what they mean, never raw.
    assert "WARNING streamer.kafka.librdkafka: FAIL: " in out and "Connection refused" in out
    assert not [line for line in out.splitlines() if line.startswith("%")]


def test_an_explicit_start_inside_a_transaction_is_refused_naming_the_nearest_starts(db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY)")
    f, p = support.master_pos(conn)
    support.sql(conn, "INSERT INTO t VALUES (1)", "INSERT INTO t VALUES (2)")
    events = support.sql(conn, f"SHOW BINLOG EVENTS IN '{f}' FROM {p}")
    starts = [int(e[1]) for e in events if e[2] == "Gtid"]
    table_map = next(int(e[1]) for e in events if e[2] == "Table_map")
    assert len(starts) == 2 and starts[0] < table_map < starts[1]
    ns = support.unique("badpos")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"])
    for pos, what in ((table_map, "the event there is a Table_map inside a transaction"),
                      (table_map + 1, "no event starts there")):
        with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", f,
                                     "--start-pos", str(pos)) as proc:
            assert proc.wait(60) == 3
            out = proc.output()
        assert f"the explicit start {f}:{pos} is not a transaction start ({what})" in out, out
        assert f"nearest transaction starts: {f}:{starts[0]} and {f}:{starts[1]}" in out
        assert "Traceback" not in out
    assert not {t for t in _topics() if t.startswith(ns + ".")}
    # A start it names is taken: the second row, alone.
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", f,
                                 "--start-pos", str(starts[1])) as proc:
        msgs = support.consume([f"{ns}.{name}.t"], expect=1, decode_ns=ns)
        assert proc.stop() == 0
    assert [m["key"] for m in msgs] == [{"id": 2}]
