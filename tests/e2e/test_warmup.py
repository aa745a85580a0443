"""The JIT warm-up (engine.warmup) in a real streamer: under PyPy it runs while the stream is
idle, before and after real changes, and publishes nothing to the real Kafka; every change is
published once and in order all the same. CPython never warms up."""
import platform
import time

import pytest
from confluent_kafka.admin import AdminClient

from tests import support

PYPY = platform.python_implementation() == "PyPy"


def test_changes_arriving_during_the_warm_up_are_all_published_and_the_warm_up_stays_local(
        db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
    ns = support.unique("warm")
    cfg = support.write_config(str(tmp_path / "s.yaml"), ns, [f"{name}.*"],
                               warmup={"transactions": 2000})
    with support.StreamerProcess(cfg, str(tmp_path / "s.log")) as proc:
        proc.wait_reading()
        # Changes while the warm-up is under way: it waits while they flow, and goes on once
        # they have stopped.
        for i in range(1, 201):
            support.sql(conn, f"INSERT INTO t VALUES ({i}, 'v{i}')")
            time.sleep(0.005)
        msgs = support.consume([f"{ns}.{name}.t"], expect=200, decode_ns=ns)
        if PYPY:
            support.wait_for(lambda: "JIT warm-up:" in proc.output(), timeout=120,
                             what="the warm-up to finish")
        support.sql(conn, "INSERT INTO t VALUES (201, 'after')")
        msgs += support.consume([f"{ns}.{name}.t"], expect=201, decode_ns=ns)[200:]
        assert proc.stop() == 0, proc.output()[-3000:]
        out = proc.output()
    assert [m["key"]["id"] for m in msgs] == list(range(1, 202))
    assert [m["value"]["op"] for m in msgs] == ["c"] * 201
    if PYPY:
        assert "JIT warm-up: 2000 transactions" in out, out[-3000:]
    else:
        assert "JIT warm-up" not in out
    assert "Traceback" not in out and "WARNING streamer.engine.warmup" not in out
    # Nothing of the warm-up's namespace or table reached the real Kafka.
    topics = AdminClient({"bootstrap.servers": support.KAFKA}).list_topics(timeout=10).topics
    assert not [t for t in topics if t.startswith(f"{ns}-warmup") or "streamer_warmup" in t]
    assert sorted(t for t in topics if t.startswith(f"{ns}.")) == sorted(
        [f"{ns}.__positions", f"{ns}.__schemas", f"{ns}.{name}.t"])


@pytest.mark.skipif(not PYPY, reason="only PyPy warms up")
def test_a_stop_during_the_warm_up_is_prompt(db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY)")
    ns = support.unique("warmstop")
    cfg = support.write_config(str(tmp_path / "s.yaml"), ns, [f"{name}.*"],
                               warmup={"transactions": 10 ** 7})  # minutes of it
    with support.StreamerProcess(cfg, str(tmp_path / "s.log")) as proc:
        proc.wait_reading()
        time.sleep(2)  # idle: warming up
        # Within the stop's wait, not after the hour the whole warm-up would take.
        assert proc.stop(timeout=30) == 0, proc.output()[-3000:]
        out = proc.output()
    assert "stopped after 0 messages" in out and "JIT warm-up:" not in out
