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
