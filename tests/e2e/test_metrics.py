"""Metrics from a running streamer: SignalFx datapoints, heartbeat latency, HTTP endpoints, logging."""
import json
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import OFFSET_END, Consumer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from tests import support
from tests.signalfx_endpoint import IngestEndpoint
from tests.e2e.servers import free_port


def get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except urllib.error.URLError as e:
        return 0, str(e.reason)  # not listening (yet)


def table_with_rows(conn, n, start_id=0):
    values = ",".join(f"({start_id + i}, REPEAT('x', 40))" for i in range(n))
    support.sql(conn, f"INSERT INTO t VALUES {values}")


def test_signalfx_endpoint_receives_counts_throughput_latency_and_dimensions(db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(64))")
    start = support.master_pos(conn)
    for i in range(3):
        table_with_rows(conn, 100, i * 100)
    sink = IngestEndpoint()
    ns = support.unique("sfx")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"], environment="ci",
                               metrics={"interval_s": 0.5, "log_summary": True},
                               signalfx={"enabled": True, "ingest_endpoint": sink.url})
    try:
        with support.StreamerProcess(cfg, str(tmp_path / "s.log"), "--start-file", start[0],
                                     "--start-pos", str(start[1]),
                                     env={"SIGNALFX_TOKEN": "test-token"}) as proc:
            msgs = support.consume([f"{ns}.{name}.t"], expect=300, idle=1.0)
            support.wait_for(lambda: (sink.latest("streamer.messages") or [0, 0, 0])[2] >= 300,
                             timeout=90, what="streamer.messages = 300 at the sink")
            assert proc.stop() == 0, proc.output()
        out = proc.output()
    finally:
        sink.close()
    assert len(msgs) == 300
    assert sink.tokens == {"test-token"}
    dims = {"environment": "ci", "source": ns, "namespace": ns}
    for metric in ("streamer.messages", "streamer.rows", "streamer.bytes", "streamer.batches",
                   "streamer.errors", "streamer.reconnects"):
        path, _, _, d, kind = sink.latest(metric)
        assert (path, d, kind) == ("/v2/datapoint", dims, "CUMULATIVE_COUNTER"), metric
    assert sink.latest("streamer.messages")[2] == 300
    assert sink.latest("streamer.rows")[2] == 300
    # Bytes are exactly the keys and values that reached the topic.
    assert sink.latest("streamer.bytes")[2] == sum(len(m["raw_key"]) + len(m["raw_value"]) for m in msgs)
    assert sink.latest("streamer.errors")[2] == 0
    assert 1 <= sink.latest("streamer.batches")[2] <= 300
    assert max(sink.values("streamer.throughput.messages_per_s")) > 0
    assert max(sink.values("streamer.throughput.bytes_per_s")) > 0
    p50 = sink.values("streamer.latency_ms.p50")
    p99 = sink.values("streamer.latency_ms.p99")
    assert p50 and p99 and all(0 <= v < 60_000 for v in p50 + p99)
    # Latency from the binlog's whole seconds (no heartbeat here) says so in a dimension.
    assert sink.latest("streamer.latency_ms.max")[3] == dict(dims, latency_resolution="1s")
    assert 0 <= sink.latest("streamer.latency.over_threshold_ratio")[2] <= 1
    assert 0 < sink.latest("streamer.commit_seconds")[2] < 30
    assert sink.latest("streamer.lag_bytes")[2] >= 0
    assert sink.latest("streamer.queue_depth")[2] >= 0
    assert re.search(r"INFO streamer.ops.reporter: \d+ msg/s .* latency \(binlog times, 1 s "
                     r"resolution\) p50 .* lag ", out)


class StallWatch:
    """The longest time this process went unscheduled, seen from a thread that wakes every 10 ms."""

    def __init__(self):
        self.worst_ms = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self):
        last = time.monotonic()
        while not self._stop.wait(0.01):
            now = time.monotonic()
            self.worst_ms = max(self.worst_ms, (now - last - 0.01) * 1000)
            last = now

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def test_heartbeat_latency_is_sub_second_and_matches_what_a_consumer_measures(db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY, ts_us BIGINT UNSIGNED)")
    ns = support.unique("hb")
    port = free_port()
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"],
                               metrics={"http_port": port, "interval_s": 1.0},
                               heartbeat={"enabled": True, "interval_ms": 100})
    topic = f"{ns}.{name}.t"
    insert = "INSERT INTO t VALUES (%s, CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS UNSIGNED))"
    with support.StreamerProcess(cfg, str(tmp_path / "s.log")) as proc:
        support.wait_for(lambda: get(port, "/health")[0] == 200, timeout=90, what="/health ok")
        # Warm-up: the first commit to a new topic waits for its creation (~2 s), not measured.
        support.sql(conn, insert, args=(-1,))
        support.consume([topic], expect=1, idle=0.1)
        time.sleep(1.2)
        c = Consumer({"bootstrap.servers": support.KAFKA, "group.id": support.unique("t-"),
                      "isolation.level": "read_committed", "fetch.wait.max.ms": 5,
                      "auto.offset.reset": "latest", "enable.auto.commit": False})
        c.assign([TopicPartition(topic, 0, OFFSET_END)])
        dec = support.decoder(ns)

        def receive(seen, until):
            while time.time() < until:
                msg = c.poll(0.005)
                if msg is not None and not msg.error():
                    seen.append((time.time(), dec.decode(msg.value())["after"]["ts_us"]))

        windows = []
        try:
            receive([], time.time() + 0.5)  # the assignment settles
            # A starved host can stall every process for seconds. A window counts only if this
            # process saw no stall and the consumer itself got every change within a second; the
            # streamer's own figures for that window are then judged. Up to 6 windows.
            for attempt in range(6):
                seen = []
                with StallWatch() as stalls:
                    for i in range(25):  # 3 s: the last full reporting interval lies inside it
                        support.sql(conn, insert, args=(attempt * 100 + i,))
                        receive(seen, time.time() + 0.12)
                    status = json.loads(get(port, "/status")[1])
                    receive(seen, time.time() + 1.0)
                consumer = [(recv - float(ts) / 1e6) * 1000 for recv, ts in seen] or [float("inf")]
                windows.append((len(seen), statistics.median(consumer), max(consumer),
                                stalls.worst_ms, status))
                if len(seen) >= 20 and max(consumer) < 1000 and stalls.worst_ms < 250:
                    break
        finally:
            c.close()
        hb_rows = support.sql(support.admin(), "SELECT ts_us FROM streamer_heartbeat.heartbeat "
                                               "WHERE source = %s", args=(ns,))
        assert proc.stop() == 0, proc.output()
    assert hb_rows  # the heartbeat row exists on the source
    received, consumer_ms, consumer_max, stall_ms, status = windows[-1]
    lat = status["latency_ms"]
    summary = [w[:4] for w in windows]
    if all(w[3] >= 250 for w in windows):
        # Nothing here can judge latency when the test process itself went unscheduled for
        # a quarter second or more in every window; a window without such a stall is judged.
        pytest.skip(f"the host stalled this process in every window (received, median ms, "
                    f"max ms, worst stall ms): {summary}")
    assert received >= 20 and consumer_max < 1000 and stall_ms < 250, \
        ("no window without a stall where the consumer got every change within a second "
         f"(received, median ms, max ms, worst stall ms): {summary}; last status {status}")
    # µs precision: binlog timestamps alone could not give a sub-second p50 that is not a whole second.
    assert 0 < lat["p50"] < 1000 and 0 < lat["max"] < 1000, lat
    # The consumer sees a change a little after the streamer's commit returns: the two agree.
    assert abs(lat["p50"] - consumer_ms) < max(150.0, 0.5 * consumer_ms), (lat, consumer_ms)
    assert status["heartbeat"] is True
    assert status["lag_seconds"] is not None and status["lag_seconds"] < 1.0
    # The heartbeat database is never published.
    md = Consumer({"bootstrap.servers": support.KAFKA, "group.id": support.unique("t-")})
    try:
        assert not [t for t in md.list_topics(timeout=10).topics if "streamer_heartbeat" in t]
    finally:
        md.close()


def test_health_status_metrics_and_the_status_command_answer_while_running(db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(64))")
    ns = support.unique("http")
    port = free_port()
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"], environment="stage",
                               metrics={"http_port": port, "interval_s": 0.5})
    with support.StreamerProcess(cfg, str(tmp_path / "s.log")) as proc:
        code, body = support.wait_for(lambda: (lambda r: r if r[0] == 200 else None)(
            get(port, "/health")), timeout=90, what="/health 200")
        assert json.loads(body)["status"] == "ok"
        table_with_rows(conn, 50)
        master = support.master_pos(conn)

        def busy():
            """/status and /metrics of an interval in which the rows were committed."""
            st = json.loads(get(port, "/status")[1])
            return (st, get(port, "/metrics")) if st["latency_ms"]["samples"] else None
        busy_status, (metrics_code, metrics) = support.wait_for(busy, timeout=30, interval=0.05,
                                                                what="an interval with changes")
        support.consume([f"{ns}.{name}.t"], expect=50, idle=0.5)
        time.sleep(1.2)  # a reporting interval with nothing in it
        status = json.loads(get(port, "/status")[1])
        missing_code, _ = get(port, "/nope")
        human = subprocess.run([sys.executable, "-m", "streamer.cli", "status", "-c", cfg],
                               capture_output=True, text=True, cwd=support.ROOT, check=True)
        js = subprocess.run([sys.executable, "-m", "streamer.cli", "status", "-c", cfg, "--json"],
                            capture_output=True, text=True, cwd=support.ROOT, check=True)
        assert proc.stop() == 0, proc.output()
    assert (status["environment"], status["source"], status["namespace"]) == ("stage", ns, ns)
    assert status["counters"]["messages_total"] == 50 and status["counters"]["rows_total"] == 50
    assert status["counters"]["errors_total"] == 0
    assert status["position"]["file"] == master[0] and status["position"]["pos"] >= master[1]
    assert status["lag_bytes"] is not None and status["lag_bytes"] >= 0
    assert set(status["throughput"]) == {"messages_per_s", "rows_per_s", "bytes_per_s"}
    assert set(status["latency_ms"]) == {"p50", "p99", "max", "over_threshold_share", "threshold_ms",
                                         "samples", "resolution"}
    assert busy_status["latency_ms"]["resolution"] == "1s" and status["uptime_s"] > 0
    assert busy_status["latency_ms"]["p50"] is not None
    # The interval after the burst was idle: no latency, not the burst's again.
    assert status["latency_ms"]["p50"] is None and status["latency_ms"]["samples"] == 0
    assert metrics_code == 200 and missing_code == 404
    families = {f.name: f for f in text_string_to_metric_families(metrics)}
    dims = {"environment": "stage", "source": ns, "namespace": ns}

    def sample(name, **labels):
        found = [s for f in families.values() for s in f.samples if s.name == name and
                 all(s.labels.get(k) == v for k, v in dict(dims, **labels).items())]
        assert found, name
        return found[0].value
    assert sample("streamer_messages_total") == 50.0
    for metric in ("streamer_lag_seconds", "streamer_lag_bytes", "streamer_queue_depth",
                   "streamer_commit_seconds", "streamer_latency_over_threshold_ratio"):
        sample(metric)
    # The latency histogram of the busy interval: every change counted, in its buckets.
    assert sample("streamer_latency_seconds_count", resolution="1s") >= 50
    assert sample("streamer_latency_seconds_bucket", le="+Inf", resolution="1s") >= 50
    assert families["process_resident_memory_bytes"].samples[0].value > 10e6
    assert f"position   {master[0]}:" in human.stdout and "latency    idle" in human.stdout
    assert "msg/s" in human.stdout and "50 messages" in human.stdout
    assert json.loads(js.stdout)["counters"]["messages_total"] == 50
    # With the streamer gone, status says so instead of printing stale numbers.
    gone = subprocess.run([sys.executable, "-m", "streamer.cli", "status", "-c", cfg],
                          capture_output=True, text=True, cwd=support.ROOT)
    assert gone.returncode == 1 and "no streamer answered" in gone.stderr


def test_sighup_toggles_debug_logging_and_the_hot_path_logs_nothing_at_info(db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(64))")
    ns = support.unique("log")
    port = free_port()
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"],
                               metrics={"http_port": port, "log_summary": False})
    topic = f"{ns}.{name}.t"
    with support.StreamerProcess(cfg, str(tmp_path / "s.log")) as proc:
        support.wait_for(lambda: get(port, "/health")[0] == 200, timeout=90, what="/health ok")
        table_with_rows(conn, 10, 0)
        support.consume([topic], expect=10, idle=0.3)  # also creates the topic: its log line
        before = proc.output()
        for i in range(5):
            table_with_rows(conn, 20, 100 + i * 20)
        support.wait_for(lambda: json.loads(get(port, "/status")[1])["counters"]["messages_total"]
                         == 110, timeout=90, what="110 messages")
        assert proc.output() == before  # 100 changes in several batches: not one log line

        proc.proc.send_signal(signal.SIGHUP)
        support.wait_for(lambda: "debug logging on" in proc.output(), timeout=60)
        table_with_rows(conn, 5, 500)
        support.wait_for(lambda: re.search(r"DEBUG streamer.ops.metrics: committed 5 messages",
                                           proc.output()), timeout=60, what="a DEBUG batch line")

        proc.proc.send_signal(signal.SIGHUP)
        support.wait_for(lambda: "debug logging off" in proc.output(), timeout=60)
        off = proc.output()
        table_with_rows(conn, 5, 600)
        support.wait_for(lambda: json.loads(get(port, "/status")[1])["counters"]["messages_total"]
                         == 120, timeout=90, what="120 messages")
        assert " DEBUG " not in proc.output()[len(off):]
        assert proc.stop() == 0, proc.output()
