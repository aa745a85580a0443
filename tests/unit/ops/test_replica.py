"""The replica guard (ops.replica): a streamed server that starts replicating another while its
binlog does not log what it applies shows in /health, /metrics, SignalFx and the log."""
import logging
import re

from streamer import config
from streamer.ops import replica
from streamer.ops.httpstatus import prometheus
from streamer.ops.metrics import Metrics
from streamer.ops.reporter import Reporter, datapoints


class Server:
    """A MariaDB connection's answers: log_slave_updates, and whether its replication runs."""

    def __init__(self, logs="OFF", running=0):
        self.logs, self.running = logs, running
        self.asked = []

    def get_server_info(self):
        return "10.11.9-MariaDB-log"

    def cursor(self):
        return Cursor(self)


class Cursor:
    def __init__(self, server):
        self.server, self.rows = server, []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, sql, args=None):
        self.server.asked.append(sql)
        if sql.startswith("SHOW GLOBAL VARIABLES"):
            self.rows = [("log_slave_updates", self.server.logs)]
        elif sql == "SHOW GLOBAL STATUS LIKE 'Slaves_running'":
            self.rows = [("Slaves_running", str(self.server.running))]
        else:
            raise AssertionError(sql)

    def fetchall(self):
        return self.rows

    def fetchone(self):
        return self.rows[0] if self.rows else None


def test_only_replicating_without_logging_it_is_unlogged():
    assert replica.judge(("log_slave_updates", "OFF"), False)["status"] == "ok"
    assert replica.judge(("log_replica_updates", "ON"), True)["status"] == "ok"
    state = replica.judge(("log_slave_updates", "OFF"), True)
    assert state["status"] == "unlogged"
    assert state["reason"].startswith("the server replicates another now (its replication "
                                      "threads run), and log_slave_updates is OFF: what it "
                                      "applies is not in its binlog")
    assert "Set log_slave_updates=ON" in state["reason"] and "snapshot" in state["reason"]


def test_the_guard_asks_every_interval_and_reads_the_setting_once_per_connection():
    now = [100.0]
    guard = replica.ReplicaGuard(every_s=10, clock=lambda: now[0])
    server = Server(running=0)
    assert guard.poll(server)["status"] == "ok"
    assert guard.poll(server) is None  # not due
    server.running = 1  # START SLAVE
    now[0] += 10
    assert guard.poll(server)["status"] == "unlogged"
    assert sum(q.startswith("SHOW GLOBAL VARIABLES") for q in server.asked) == 1
    guard.forget()  # another connection: perhaps another server
    logged = Server(logs="ON", running=1)
    assert guard.poll(logged)["status"] == "ok"
    # A server that logs what it replicates is not asked whether it does.
    assert logged.asked == [logged.asked[0]] and logged.asked[0].startswith("SHOW GLOBAL VARIABLES")


def _cfg():
    return config.load(None, environ={"STREAMER__MYSQL__SERVER_ID": "9",
                                      "STREAMER_MYSQL_PASSWORD": "x"})


def test_the_reporter_shows_it_in_health_metrics_signalfx_and_one_error_line(caplog, monkeypatch):
    monkeypatch.setenv("STREAMER_MYSQL_PASSWORD", "x")  # (the reporter's own connection's)
    metrics = Metrics(_cfg())
    reporter = Reporter(_cfg(), metrics)
    now = [0.0]
    reporter.replica = replica.ReplicaGuard(every_s=10, clock=lambda: now[0])
    reporter._conn = server = Server(running=0)
    metrics.on_commit(type("P", (), {"file": "f", "pos": 4, "gtid_set": "", "rows": 0,
                                     "xa": None})(), 1, 0.001, 0)
    reporter.guard_replica()
    assert metrics.health()[0] == "ok"
    assert re.search(r"^streamer_unlogged_replication\{[^}]*\} 0\.0$", prometheus(metrics), re.M)
    server.running = 1
    with caplog.at_level(logging.INFO, logger="streamer.ops.reporter"):
        for _ in range(3):
            now[0] += 10
            reporter.guard_replica()
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "log_slave_updates is OFF" in errors[0].getMessage()
    status, reason = metrics.health()
    assert status == "error" and reason == metrics.replication["reason"]
    assert re.search(r"^streamer_unlogged_replication\{[^}]*\} 1\.0$", prometheus(metrics), re.M)
    gauges = {p["metric"]: p["value"] for p in datapoints(metrics)["gauges"]}
    assert gauges["streamer.unlogged_replication"] == 1
    assert metrics.status()["replication"]["status"] == "unlogged"
    server.running = 0  # STOP SLAVE: no longer missing changes (those missed stay missed)
    with caplog.at_level(logging.INFO, logger="streamer.ops.reporter"):
        now[0] += 10
        reporter.guard_replica()
    assert metrics.health()[0] == "ok"
    assert "no longer replicates another unlogged" in caplog.records[-1].getMessage()
