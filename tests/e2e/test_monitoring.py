"""deploy/monitoring against a running streamer: every series the shipped dashboard and alert
rules query is in its /metrics (an instance of a hot-standby pair, taking a snapshot, with a
second server in mysql.hosts, so that the series only those expose are there too)."""
import time

from prometheus_client.parser import text_string_to_metric_families

from tests import support
from tests.e2e.servers import free_port
from tests.e2e.test_metrics import get
from tests.unit.ops.test_monitoring import used_series


def _names(text):
    names = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        names.update(s.name for s in family.samples)
    return names


def test_every_series_the_dashboard_and_rules_use_is_in_a_running_streamers_metrics(db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))",
                "INSERT INTO t SELECT seq, 'x' FROM seq_1_to_30000")
    ns = support.unique("mon")
    port = free_port()
    mysql = support.DEFAULT.mysql_config(ns)
    # A second server to fail over to, never needed: the first streams.
    mysql["hosts"] = [f"{mysql['host']}:{mysql['port']}", f"127.0.0.1:{free_port()}"]
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"], mysql=mysql,
                               metrics={"http_port": port, "interval_s": 0.5},
                               ha={"enabled": True}, start={"initial": "snapshot"},
                               snapshot={"chunk_rows": 20})
    used = used_series()
    with support.StreamerProcess(cfg, str(tmp_path / "s.log")) as proc:
        def scraped():
            code, body = get(port, "/metrics")
            if code != 200:
                return None
            names = _names(body)
            return names if used <= names else None
        deadline = time.monotonic() + 90
        names = None
        while names is None and time.monotonic() < deadline and proc.proc.poll() is None:
            names = scraped()
            time.sleep(0.3)
        last = _names(get(port, "/metrics")[1]) if names is None else names
        assert proc.proc.poll() is None, proc.output()[-3000:]
        assert names is not None, f"never exposed: {sorted(used - last)}"
        assert proc.stop() == 0, proc.output()[-3000:]
