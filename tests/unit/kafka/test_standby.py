"""Hot standby's parts without servers: its config, and what a standby shows in /health,
/status, the Prometheus text, `streamer status` and the canary verdict. The lease itself runs
on a real broker in tests/e2e/test_standby.py."""
import re
import threading

import pytest

from streamer import config
from streamer.deploy.verify import Limits, judge
from streamer.errors import ConfigError
from streamer.ops.httpstatus import prometheus, status_text
from streamer.ops.metrics import Metrics
from tests.deploy.test_deploy_verdict import status, window
from tests.unit.ops.test_metrics import cfg


class FakeLease:
    """What Metrics reads of a kafka.lease.Lease."""

    def __init__(self, held, lost=False):
        self.held = threading.Event()
        if held:
            self.held.set()
        self.lost = lost
        self.takeovers = 1 if held else 0
        self.since = 1.5
        self.group = "streamer.ns.db1.lease"

    @property
    def role(self):
        return "active" if self.held.is_set() and not self.lost else "standby"


def test_ha_config_is_checked_and_off_by_default():
    assert cfg()["ha"] == {"enabled": False, "session_timeout_ms": 6000,
                           "heartbeat_interval_ms": 500}
    base = {"mysql": {"server_id": 9}}
    for bad, key in (({"enabled": "yes"}, "ha.enabled"), ({"session_timeout_ms": 0},
                                                          "ha.session_timeout_ms"),
                     ({"session_timeout_ms": 1200}, "ha.heartbeat_interval_ms")):
        with pytest.raises(ConfigError, match=re.escape(key)):
            config.validate(config._merge(config.DEFAULTS, dict(base, ha=bad)))


def test_a_standby_is_healthy_and_says_it_waits_and_an_active_one_says_so_too():
    m = Metrics(cfg())
    assert m.status()["ha"] is None and "streamer_active" not in prometheus(m)
    m.ha = FakeLease(held=False)
    assert m.health() == ("ok", "standby: another instance holds the lease; this one takes over")
    st = m.status()
    assert st["ha"] == {"role": "standby", "takeovers": 0, "since": 1.5,
                        "group": "streamer.ns.db1.lease"}
    assert "role       standby (hot standby group streamer.ns.db1.lease; took the lease 0 times)" \
        in status_text(st)
    assert re.search(r"^streamer_active\{.*\} 0\.0$", prometheus(m), re.M)
    m.ha = FakeLease(held=True)
    assert m.health()[0] == "starting"  # active: judged by its stream like any instance
    assert re.search(r"^streamer_active\{.*\} 1\.0$", prometheus(m), re.M)
    assert re.search(r"^streamer_takeovers_total\{.*\} 1\.0$", prometheus(m), re.M)


def test_the_canary_verdict_passes_a_standby_that_publishes_nothing_unless_it_errs():
    def standby(errors=0):
        body = status(1000, lag_bytes=5000, lag_s=None, errors=errors)
        body["ha"] = {"role": "standby", "takeovers": 0, "group": "streamer.ns.db1.lease"}
        return body
    ok, reasons = judge(window(standby(), standby()), None, Limits())
    assert ok and "standby: publishes nothing" in reasons[0][1]
    ok, reasons = judge(window(standby(), standby(errors=2)), None, Limits())
    assert not ok and "errors_total rose from 0 to 2" in reasons[1][1]
    # The same numbers from an active instance are a stuck stream.
    assert not judge(window(status(1000, lag_bytes=5000, lag_s=None),
                            status(1000, lag_bytes=5000, lag_s=None)), None, Limits())[0]


def test_dotted_namespaces_and_sources_never_share_a_transactional_id_or_lease_group():
    from streamer.kafka.lease import lease_names
    from streamer.kafka.settings import transactional_id

    assert transactional_id("a.b", "c") != transactional_id("a", "b.c")
    assert transactional_id("local", "db1") == "streamer.local.db1"  # unchanged without a dot

    def names(ns, source):
        return lease_names(config.build({"namespace": ns, "source": {"name": source},
                                         "mysql": {"server_id": 9}}))["group"]
    assert names("a.b", "c") != names("a", "b.c")


def test_the_lease_consumer_gets_every_client_setting_the_other_clients_get():
    from streamer.kafka.lease import Lease

    cfg = config.build({
        "namespace": "ns", "source": {"name": "s"}, "mysql": {"server_id": 9},
        "kafka": {"bootstrap.servers": "b:1", "security.protocol": "SSL",
                  "enable.ssl.certificate.verification": False, "https.ca.location": "/ca",
                  "socket.keepalive.enable": True, "broker.address.family": "v4",
                  "linger.ms": 5}})
    lease = Lease(cfg, lambda: None)
    for key in ("security.protocol", "enable.ssl.certificate.verification",
                "https.ca.location", "socket.keepalive.enable", "broker.address.family"):
        assert lease.conf[key] == cfg["kafka"][key] and lease.client[key] == cfg["kafka"][key]
    assert "linger.ms" not in lease.conf  # a producer's own setting
