"""The series names the streamer's /metrics exposes, every optional one included (a hot standby,
a snapshot under way), read from the real collector over a Metrics object."""
import re

from streamer import config
from streamer.ops.httpstatus import prometheus
from streamer.ops.metrics import Metrics


class Lease:
    role = "active"
    takeovers = 1
    since = 0.0
    group = "streamer.t.s.lease"
    lost = False


class Servers:
    current = "db2:3306"
    switches = 1
    behind = {"db1:3306": "lacks 0-1-9"}

    def found_behind(self):
        return sorted(self.behind)


def metrics_with_everything():
    cfg = config.load(None, environ={"STREAMER__MYSQL__SERVER_ID": "9",
                                     "STREAMER_MYSQL_PASSWORD": "x"})
    m = Metrics(cfg, heartbeat=True)
    m.ha = Lease()
    m.servers = Servers()
    m.snapshot_status = lambda: {"tables_left": 1, "tables_done": 0, "rows": 10, "chunks": 1,
                                 "rows_per_s": 5.0, "eta_s": 2.0, "table": "a.b",
                                 "table_rows": 10, "table_estimate": 20}
    m.retention = {"status": "ok", "reason": "", "files_before": 1, "expires_in_s": 100.0,
                   "expiry_s": 86400.0}
    m.replication = {"status": "ok", "reason": None}
    m.on_heartbeat(1700000000000000)
    m.lag_bytes = 4096
    m.on_commit(type("P", (), {"file": "f", "pos": 4, "gtid_set": "", "rows": 0, "xa": None})(),
                1, 0.001, 0)
    return m


def names_in(text):
    """Series names in a text exposition, with each histogram's and counter's family name too."""
    names = set()
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0)
            names.add(name)
            for suffix in ("_bucket", "_sum", "_count", "_total", "_created"):
                if name.endswith(suffix):
                    names.add(name[:-len(suffix)])
    return names


def exposed_names():
    return names_in(prometheus(metrics_with_everything()))
