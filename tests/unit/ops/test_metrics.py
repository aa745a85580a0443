"""Metrics, health, the Prometheus text and the sinks' pure parts, without servers."""
import logging
import os
import re
import time

import pytest

from streamer import config
from streamer.ops.httpstatus import prometheus, status_text
from streamer.ops.metrics import LatencyWindow, Metrics
from streamer.ops.reporter import (Reporter, backlog_bytes, datapoints, signalfx_token,
                                   summary_line)
from streamer.position import Position
from tests import support
from tests.fakeserver import FakeConnection
from tests.signalfx_endpoint import IngestEndpoint


def cfg(**over):
    c = config.validate(config._merge(config.DEFAULTS, {"mysql": {"server_id": 9},
                                                        "namespace": "ns", "environment": "canary",
                                                        "source": {"name": "db1"}}))
    for section, values in over.items():
        c[section].update(values)
    return c


def test_latency_quantiles_are_within_five_percent_and_the_share_over_threshold_is_exact():
    w = LatencyWindow(threshold_ms=100)
    for ms in range(1, 1001):  # 1..1000 ms, uniform
        w.add(float(ms))
    s = w.summary()
    assert s["p50"] == pytest.approx(500, rel=0.05)
    assert s["p99"] == pytest.approx(990, rel=0.05)
    assert s["max"] == 1000.0
    assert s["over_threshold_share"] == pytest.approx(900 / 1000)
    assert s["samples"] == 1000


def test_latency_window_memory_is_bounded_and_weights_count_as_samples():
    w = LatencyWindow(threshold_ms=100)
    size = len(w.buckets)
    w.add(5.0, weight=99)
    w.add(10 ** 12, weight=1)  # absurdly late: lands in the last bucket
    w.add(0.0)
    assert len(w.buckets) == size
    s = w.summary()
    assert s["samples"] == 101 and s["p50"] == pytest.approx(5.0, rel=0.05)
    assert s["over_threshold_share"] == pytest.approx(1 / 101)


def test_commit_turns_event_times_into_row_weighted_latency_and_counts():
    m = Metrics(cfg())
    now = int(time.time())
    m.on_rows(now - 2, 3)
    m.on_rows(now - 2, 1)
    m.on_rows(now, 4)
    m.on_commit(Position("mysql-bin.000003", 1234, "0-1-9", 0), 8, 0.02, 5)
    m.roll()
    st = m.status()
    assert st["counters"]["rows_total"] == 8 and st["counters"]["messages_total"] == 8
    assert st["counters"]["batches_total"] == 1
    assert st["position"] == {"file": "mysql-bin.000003", "pos": 1234, "gtid_set": "0-1-9", "rows": 0,
                              "needs_file": "mysql-bin.000003"}
    assert st["queue_depth"] == 5 and st["commit_seconds"] == 0.02 and st["batch_size"] == 8
    lat = st["latency_ms"]
    # Half the rows are ~2 s old, half ~0 s: p99 and max near 2 s, the share over 100 ms >= half.
    assert 1900 < lat["max"] < 3100 and lat["p99"] > 1800
    assert lat["over_threshold_share"] >= 0.5
    assert (st["environment"], st["source"], st["namespace"]) == ("canary", "db1", "ns")


def test_with_heartbeat_only_the_microsecond_beats_make_the_latency():
    m = Metrics(cfg(heartbeat={"enabled": True}), heartbeat=True)
    m.on_rows(int(time.time()) - 30, 10)  # a coarse binlog timestamp: ignored for latency
    m.on_heartbeat(int((time.time() - 0.040) * 1e6))
    m.on_commit(Position("f", 4), 10, 0.01, 0)
    m.roll()
    lat = m.status()["latency_ms"]
    assert 38 <= lat["max"] < 300
    assert m.lag_seconds() < 1.0


def test_rates_come_from_the_counters_between_two_rolls():
    m = Metrics(cfg())
    m.roll()
    m.on_rows(int(time.time()), 50)
    m.bytes += 5000
    m.on_commit(Position("f", 4), 50, 0.01, 0)
    time.sleep(0.1)
    m.roll()
    rates = m.status()["throughput"]
    assert 50 / 0.5 < rates["messages_per_s"] <= 50 / 0.1
    assert rates["rows_per_s"] == rates["messages_per_s"]
    assert rates["bytes_per_s"] == pytest.approx(rates["messages_per_s"] * 100, rel=0.01)


def test_counting_produce_counts_key_and_value_bytes():
    m = Metrics(cfg())
    sent = []
    produce = m.counting(lambda t, v, k, h: sent.append((t, v, k, h)))
    produce("t", b"12345", b"ab")
    produce("t", b"123", None, (("op", b"c"),))
    assert m.bytes == 10 and sent[1] == ("t", b"123", None, (("op", b"c"),))


def test_health_is_starting_then_ok_then_stalled_and_error_names_the_reason():
    m = Metrics(cfg(metrics={"stall_after_s": 0.2}))
    m.stall_after_s = 0.2
    assert m.health()[0] == "starting"
    m.on_commit(Position("f", 4), 1, 0.01, 0)
    assert m.health() == ("ok", "advancing")
    m.on_idle()
    assert m.health() == ("ok", "caught up")
    m.last_commit_mono = m.last_idle_mono = time.monotonic() - 1.0
    status, reason = m.health()
    assert status == "stalled" and "no batch committed" in reason and "stall_after_s" in reason
    m.on_error(ConnectionError("binlog connection failed (2013)"), reconnect=True)
    assert m.health() == ("error", "binlog connection failed (2013)")
    assert m.errors == 1 and m.reconnects == 1
    m.on_commit(Position("f", 8), 1, 0.01, 0)
    assert m.health()[0] == "ok"
    m.on_error(ConnectionError("dropped"), reconnect=True)
    m.on_idle()  # reconnected, and the source has nothing more to send
    assert m.health() == ("ok", "caught up")


def test_lag_is_zero_when_caught_up_without_heartbeat_and_grows_with_event_age_when_behind():
    m = Metrics(cfg())
    assert m.lag_seconds() is None
    m.on_rows(int(time.time()) - 5, 1)
    m.on_commit(Position("f", 4), 1, 0.01, 0)
    assert 4 <= m.lag_seconds() < 7
    m.on_idle()
    assert m.lag_seconds() == 0.0


def test_prometheus_text_has_every_contract_metric_with_the_three_labels():
    from prometheus_client.parser import text_string_to_metric_families
    m = Metrics(cfg())
    m.on_rows(int(time.time()), 2)
    m.on_commit(Position("f", 4), 2, 0.01, 0)
    m.lag_bytes = 77
    m.roll()
    text = prometheus(m)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    dims = {"environment": "canary", "source": "db1", "namespace": "ns"}
    for name, kind in (("streamer_messages", "counter"), ("streamer_rows", "counter"),
                       ("streamer_bytes", "counter"), ("streamer_batches", "counter"),
                       ("streamer_errors", "counter"), ("streamer_reconnects", "counter"),
                       ("streamer_lag_seconds", "gauge"), ("streamer_lag_bytes", "gauge"),
                       ("streamer_queue_depth", "gauge"), ("streamer_commit_seconds", "gauge"),
                       ("streamer_latency_over_threshold_ratio", "gauge"),
                       ("streamer_latency_seconds", "histogram"),
                       ("streamer_latency_stage_seconds", "histogram")):
        assert families[name].type == kind, name
        assert families[name].samples, name
        for sample in families[name].samples:
            assert {k: sample.labels[k] for k in dims} == dims, (name, sample)
    values = {s.name: s.value for f in families.values() for s in f.samples if not s.labels.get("le")}
    assert values["streamer_lag_bytes"] == 77.0 and values["streamer_messages_total"] == 2.0
    assert values["streamer_latency_seconds_count"] == 2.0
    stages = {s.labels["stage"] for s in families["streamer_latency_stage_seconds"].samples}
    assert stages == {"source", "streamer", "kafka"}
    quantiles = {s.labels["quantile"] for s in families["streamer_latency_interval_seconds"].samples}
    assert quantiles == {"0.5", "0.99", "1"}


def test_backlog_counts_the_rest_of_the_current_file_and_all_later_files():
    logs = [("mysql-bin.000001", 1000), ("mysql-bin.000002", 500), ("mysql-bin.000003", 300)]
    assert backlog_bytes(logs, "mysql-bin.000002", 200) == 300 + 300
    assert backlog_bytes(logs, "mysql-bin.000003", 300) == 0
    assert backlog_bytes(logs, "mysql-bin.000000", 4) is None  # purged: unknown, not zero
    assert backlog_bytes(logs, None, None) is None


def test_signalfx_datapoints_carry_dimensions_and_skip_unknown_values():
    m = Metrics(cfg())
    m.on_rows(int(time.time()), 3)
    m.on_commit(Position("f", 4), 3, 0.01, 0)
    m.roll()
    dp = datapoints(m)
    counters = {d["metric"]: d["value"] for d in dp["cumulative_counters"]}
    assert counters["streamer.messages"] == 3 and counters["streamer.rows"] == 3
    gauges = {d["metric"] for d in dp["gauges"]}
    assert {"streamer.latency_ms.p50", "streamer.throughput.messages_per_s",
            "streamer.commit_seconds"} <= gauges
    assert "streamer.lag_bytes" not in gauges  # never polled yet: not sent as a fake zero
    dims = {"environment": "canary", "source": "db1", "namespace": "ns"}
    for d in dp["gauges"] + dp["cumulative_counters"]:
        if d["metric"].startswith("streamer.latency_ms."):
            assert d["dimensions"] == dict(dims, latency_resolution="1s")
        else:
            assert d["dimensions"] == dims


def test_signalfx_token_comes_from_env_or_file_and_its_absence_is_explained(tmp_path):
    c = cfg(signalfx={"enabled": True})
    assert signalfx_token(c, {"SIGNALFX_TOKEN": "t0k"}) == "t0k"
    f = tmp_path / "tok"
    f.write_text("fromfile\n")
    c["signalfx"]["token_file"] = str(f)
    assert signalfx_token(c, {}) == "fromfile"
    c["signalfx"]["token_file"] = None
    with pytest.raises(config.ConfigError, match="SIGNALFX_TOKEN.*token_file"):
        signalfx_token(c, {})


def test_a_signalfx_token_rotated_in_its_file_is_sent_from_the_next_report(tmp_path, caplog,
                                                                           monkeypatch):
    # Against a local ingest endpoint that decodes the documented protocol, as the e2e test's.
    monkeypatch.setenv("STREAMER_MYSQL_PASSWORD", "x")  # (the reporter's own connection's)
    endpoint = IngestEndpoint()
    token = tmp_path / "token"
    token.write_text("tok-first\n")
    c = cfg(signalfx={"enabled": True, "ingest_endpoint": endpoint.url,
                      "token_file": str(token)}, metrics={"log_summary": False})
    reporter = Reporter(c, Metrics(c))
    try:
        reporter.report()
        support.wait_for(lambda: endpoint.tokens, timeout=10, what="the first report")
        token.write_text("tok-second\n")  # rotated by its agent
        reporter.report()
        support.wait_for(lambda: "tok-second" in endpoint.tokens, timeout=10,
                         what="a report with the new token")
        token.unlink()  # mid-rotation: the one read before is sent, and that is said
        reporter.report()
    finally:
        reporter.__exit__(None, None, None)  # a last report, and what is queued flushed
        endpoint.close()
    assert endpoint.tokens == {"tok-first", "tok-second"}
    assert endpoint.values("streamer.messages") == [0, 0, 0, 0]  # each report, none lost
    assert "config key 'signalfx.token_file': cannot read" in caplog.text and \
        "sending SignalFx the token read before" in caplog.text and "tok-" not in caplog.text


def test_status_text_and_summary_line_show_position_lag_throughput_and_percentiles():
    m = Metrics(cfg())
    m.on_rows(int(time.time()), 3)
    m.on_commit(Position("mysql-bin.000007", 99), 3, 0.01, 0)
    m.roll()
    text = status_text(m.status())
    assert "mysql-bin.000007:99" in text and "p50" in text and "p99" in text and "msg/s" in text
    assert "db1" in text and "canary" in text
    line = summary_line(m)
    assert "\n" not in line and "msg/s" in line and "mysql-bin.000007:99" in line
    assert "WARNING" not in text and "invalid" not in text


def test_the_retention_warning_shows_in_health_status_and_prometheus():
    from streamer.ops import retention
    m = Metrics(cfg())
    m.on_rows(int(time.time()), 1)
    m.on_commit(Position("b.000001", 99), 1, 0.01, 0)
    m.tick()  # caught up and idle: ok
    assert m.health()[0] == "ok"
    m.retention = retention.judge(["b.000001", "b.000002"], "b.000001", 3600, 3500, 1, 600)
    state, reason = m.health()
    assert state == "warning" and "b.000001 is at risk of being purged" in reason
    assert "WARNING    the checkpoint's binlog file b.000001" in status_text(m.status())
    text = prometheus(m)
    assert re.search(r"^streamer_retention_warning\{[^}]*\} 1\.0$", text, re.M)
    assert re.search(r"^streamer_binlog_expires_in_seconds\{[^}]*\} 100\.0$", text, re.M)


def test_debug_toggle_switches_the_root_level_only_when_the_loop_polls():
    import signal

    from streamer.ops.observe import DebugToggle

    m = Metrics(cfg())
    root = logging.getLogger()
    before = root.level
    root.setLevel(logging.INFO)
    try:
        with DebugToggle(m):
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(0.05)
            assert root.level == logging.INFO  # the handler only set a flag
            m.tick()
            assert root.level == logging.DEBUG
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(0.05)
            m.tick()
            assert root.level == logging.INFO
    finally:
        root.setLevel(before)


def test_observability_config_defaults_and_errors_name_key_value_and_fix(tmp_path):
    c = cfg()
    assert c["metrics"] == {"http_host": "127.0.0.1", "http_port": 0, "interval_s": 10.0,
                            "latency_threshold_ms": 100, "log_summary": True, "stall_after_s": 30.0}
    assert c["signalfx"]["enabled"] is False and c["profiler"]["keep"] == 5
    assert c["heartbeat"]["interval_ms"] == 500 and c["heartbeat"]["database"] == "streamer_heartbeat"
    p = tmp_path / "c.yaml"
    p.write_text("mysql: {server_id: 7}\nmetrics: {http_port: 70000}\n")
    with pytest.raises(config.ConfigError, match=r"metrics.http_port.*70000.*0 \(endpoint off\)"):
        config.load(str(p), environ={})
    p.write_text("mysql: {server_id: 7}\nprofiler: {auto: true}\n")
    with pytest.raises(config.ConfigError, match="profiler.auto.*profiler.enabled"):
        config.load(str(p), environ={})
    p.write_text("mysql: {server_id: 7}\nheartbeat: {database: 'x;drop'}\n")
    with pytest.raises(config.ConfigError, match="heartbeat.database"):
        config.load(str(p), environ={})
    p.write_text("mysql: {server_id: 7}\nprofiler: {dir: profs}\n")
    assert config.load(str(p), environ={})["profiler"]["dir"] == str(tmp_path / "profs")


def test_heartbeat_credentials_reuse_the_streamer_user_or_need_their_own_password(tmp_path):
    from streamer.ops.heartbeat import credentials

    c = cfg()
    s = credentials(c, {"STREAMER_MYSQL_PASSWORD": "pw"})
    assert (s["user"], s["password"]) == ("streamer", "pw")
    c["heartbeat"]["user"] = "beat"
    with pytest.raises(config.ConfigError, match="heartbeat.password_file.*STREAMER_HEARTBEAT_PASSWORD"):
        credentials(c, {"STREAMER_MYSQL_PASSWORD": "pw"})
    assert credentials(c, {"STREAMER_HEARTBEAT_PASSWORD": "b"})["password"] == "b"


def test_the_heartbeat_writer_reconnects_with_the_password_its_file_has_now(tmp_path,
                                                                           monkeypatch, caplog):
    from streamer.ops import heartbeat

    pw = tmp_path / "pw"
    pw.write_text("old")
    passwords = []
    monkeypatch.setattr(heartbeat, "connect", lambda s: passwords.append(s["password"]) or
                        FakeConnection(lambda sql, args: []))
    writer = heartbeat.HeartbeatWriter(cfg(mysql={"server_id": 9, "password_file": str(pw)}))
    writer._write()
    pw.write_text("new")  # rotated while it runs
    writer._write()  # the connection still works: nothing read
    writer._conn = None  # lost
    writer._write()
    pw.unlink()  # mid-rotation: the one read before is used, and that is said
    writer._conn = None
    writer._write()
    assert passwords == ["old", "new", "new"]
    assert "config key 'mysql.password_file': cannot read" in caplog.text and \
        "connecting with the password read before" in caplog.text and "new" not in caplog.text


def test_snapshot_progress_reaches_status_prometheus_signalfx_and_the_log_line():
    m = Metrics(cfg())
    assert m.status()["snapshot"] is None and "snapshot" not in prometheus(m)
    m.snapshot_status = lambda: {"tables_left": 2, "tables_done": 1, "rows": 1500, "chunks": 3,
                                 "rows_per_s": 500.0, "eta_s": 4.0, "table": "db.t",
                                 "table_rows": 500, "table_estimate": 2500}
    m.roll()
    text = prometheus(m)
    assert re.search(r"^streamer_snapshot_rows_total\{.*\} 1500\.0$", text, re.M)
    assert "# TYPE streamer_snapshot_chunks_total counter" in text
    assert re.search(r"^streamer_snapshot_eta_s\{.*\} 4\.0$", text, re.M)
    assert re.search(r"^streamer_snapshot_tables_left\{.*\} 2\.0$", text, re.M)
    dp = datapoints(m)
    counters = {d["metric"]: d["value"] for d in dp["cumulative_counters"]}
    gauges = {d["metric"]: d["value"] for d in dp["gauges"]}
    assert counters["streamer.snapshot.rows"] == 1500 and gauges["streamer.snapshot.eta_s"] == 4.0
    assert "snapshot   db.t 500/~2500 rows, 2 tables left, 500 rows/s, ETA 4 s" in \
        status_text(m.status())
    assert summary_line(m).endswith("; db.t 500/~2500 rows, 2 tables left, 500 rows/s, ETA 4 s")


def test_an_idle_interval_reports_no_latency_and_says_it_is_idle():
    m = Metrics(cfg())
    m.on_rows(int(time.time()), 3)
    m.on_commit(Position("f", 4), 3, 0.01, 0)
    m.roll()
    assert m.status()["latency_ms"]["p50"] is not None
    assert "latency (binlog times, 1 s resolution) p50" in summary_line(m)
    m.roll()  # nothing committed since: idle, not the last burst's figures again
    lat = m.status()["latency_ms"]
    assert lat["p50"] is None and lat["p99"] is None and lat["samples"] == 0
    assert "latency idle (no change in the interval)" in summary_line(m)
    assert "None" not in summary_line(m)
    assert "latency    idle: no change in the last interval" in status_text(m.status())
    assert not any(d["metric"].startswith("streamer.latency_ms") for d in datapoints(m)["gauges"])
    assert not re.search(r"^streamer_latency_seconds\{", prometheus(m), re.M)


def test_heartbeat_latency_is_labelled_with_its_microsecond_resolution():
    m = Metrics(cfg(), heartbeat=True)
    m.on_heartbeat(int(time.time() * 1e6) - 5000)
    m.on_commit(Position("f", 4), 0, 0.01, 0)
    m.roll()
    assert m.status()["latency_ms"]["resolution"] == "1us"
    assert summary_line(m).split("; ")[1].startswith("latency p50 ")
    assert 'resolution="1us"' in prometheus(m)


@pytest.mark.parametrize("body", [b"<html>502 Bad Gateway</html>", b"[]", b'{"status": "ok"}'])
def test_streamer_status_against_something_else_on_its_port_names_it(body):
    # A service other than the streamer on metrics.http_port: its page was a JSONDecodeError
    # with a traceback.
    import http.server
    import threading

    from streamer.errors import EndpointUnavailable
    from streamer.ops.httpstatus import fetch_status

    class Other(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the http.server interface
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Other)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        cfg = config.build({"mysql": {"server_id": 7},
                            "metrics": {"http_port": server.server_address[1]}})
        with pytest.raises(EndpointUnavailable, match="something answered at http://127.0.0.1:"
                                                      r"\d+/status, but not a streamer's /status"):
            fetch_status(cfg)
    finally:
        server.shutdown()
        server.server_close()
