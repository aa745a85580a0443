"""The retention guard on a real server with a short binlog expiry: /health, the metric and the
log warn while the checkpoint's file is still there, and the purge comes after."""
import json
import re
import signal
import time

import pytest

from tests import support
from tests.e2e.servers import PrivateMariaDB, free_port
from tests.e2e.test_metrics import get

# A private server only (its binlog purged).
pytestmark = pytest.mark.private_servers

EXPIRY_S = 30


def _health(port):
    code, body = get(port, "/health")
    return json.loads(body)["status"] if code in (200, 503) else None


def test_the_guard_warns_before_the_server_purges_the_checkpoints_file(tmp_path):
    with PrivateMariaDB(str(tmp_path / "db")) as server:
        admin = server.admin()
        support.sql(admin, "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY)",
                    f"SET GLOBAL binlog_expire_logs_seconds = {EXPIRY_S}")
        f, p = support.master_pos(admin)
        ns, port = support.unique("ret"), free_port()
        # A warning once the file's expiry is 25 s away or nearer: 5 s after its last change.
        cfg = support.write_config(
            str(tmp_path / "c.yaml"), ns, ["app.*"],
            mysql={"hosts": [f"127.0.0.1:{server.port}"], "password_file": server.password_file()},
            metrics={"http_port": port, "interval_s": 1.0},
            # A batch commits after a minute, so the stream stays behind its last change.
            batch={"linger_ms": 60000, "min_linger_ms": 60000, "catchup_linger_ms": 60000},
            retention={"warn_margin_s": EXPIRY_S - 5, "warn_files": 0})
        with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", f,
                                     "--start-pos", str(p)) as proc:
            support.wait_for(lambda: _health(port) == "ok", timeout=30, what="the first checkpoint")
            # A change the stream holds in its batch, then a new file: the checkpoint stays in
            # the old one, which the expiry will purge at a rotation after EXPIRY_S.
            support.sql(admin, "INSERT INTO app.t VALUES (1)", "FLUSH BINARY LOGS")
            rotated = time.monotonic()
            try:
                support.wait_for(lambda: _health(port) == "warning", timeout=EXPIRY_S,
                                 what="the retention warning")
            except AssertionError:
                raise AssertionError(get(port, "/status")[1] + proc.output()[-2000:])
            code, body = get(port, "/health")
            warned = time.monotonic()
            health = json.loads(body)
            assert code == 200  # still streaming: a supervisor must not restart it
            assert f"the checkpoint's binlog file {f} is at risk of being purged" in \
                health["reason"]
            assert "retention.warn_margin_s is 25" in health["reason"]
            status = json.loads(get(port, "/status")[1])["retention"]
            assert status["status"] == "warning" and 0 < status["expires_in_s"] <= 25
            assert re.search(r"^streamer_retention_warning\{[^}]*\} 1.0$", get(port, "/metrics")[1], re.M)
            # Still there when warned; purged by the first rotation after its expiry.
            assert f in [r[0] for r in support.sql(admin, "SHOW BINARY LOGS")]
            time.sleep(max(0.0, EXPIRY_S + 2 - (time.monotonic() - rotated)))
            support.sql(admin, "FLUSH BINARY LOGS")
            assert f not in [r[0] for r in support.sql(admin, "SHOW BINARY LOGS")]
            # Killed, as a crash would end it: the checkpoint stays in the purged file (a clean
            # stop would commit the held change, and the rotation with it).
            assert proc.stop(signal.SIGKILL) == -signal.SIGKILL
            out = proc.output()
        assert out.count("is at risk of being purged") == 1, out[-3000:]
        assert "WARNING streamer.ops.reporter: the checkpoint's binlog file" in out
        assert warned - rotated < EXPIRY_S
        # What the warning was about: a restart can't resume.
        with support.StreamerProcess(cfg, str(tmp_path / "log2")) as proc:
            assert proc.wait(60) == 3
            assert f"binlog file {f} (resume position" in proc.output()
        admin.close()
