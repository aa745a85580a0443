"""The per-environment configs, the service unit and the lock file the deploy relies on."""
import configparser
import importlib.metadata
import os
import re

import pytest

from streamer import config as config_mod
from streamer.kafka.settings import transactional_id
from streamer.ops import gcpacing

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENVS = ("canary", "stage", "main")


def env_config(env):
    # The site file sets host, port and credentials; here only the environment's own choices count.
    return config_mod.load(os.path.join(ROOT, "deploy", "env", env + ".yaml"), environ={})


def topics(cfg, tables):
    ns = cfg["namespace"]
    return {f"{ns}.__positions", f"{ns}.__schemas"} | {f"{ns}.{db}.{t}" for db, t in tables}


@pytest.mark.parametrize("other", ["main", "stage"])
def test_canary_can_never_write_to_the_topics_of_main_or_stage(other):
    canary, them = env_config("canary"), env_config(other)
    a, b = canary["namespace"], them["namespace"]
    # Topics are NS.DB.TABLE: two namespaces can only share a topic when they are equal or one
    # is the other plus '.', e.g. 'cdc' and 'cdc.shop' ('cdc.shop.__positions').
    assert a != b
    assert not a.startswith(b + ".") and not b.startswith(a + ".")
    tables = [("shop", "orders"), ("cdc", "__positions"), ("canary", "x"), ("x", "__schemas")]
    assert not topics(canary, tables) & topics(them, tables)


def test_canary_is_never_fenced_by_main_and_never_steals_its_replication_slot():
    cfgs = {env: env_config(env) for env in ENVS}
    txids = {transactional_id(c["namespace"], c["source"]["name"]) for c in cfgs.values()}
    assert len(txids) == len(ENVS)
    assert len({c["source"]["name"] for c in cfgs.values()}) == len(ENVS)
    # Two replicas with one server_id disconnect each other on the same MySQL source.
    assert len({c["mysql"]["server_id"] for c in cfgs.values()}) == len(ENVS)
    # One host may run all three: their status endpoints must not collide.
    assert len({c["metrics"]["http_port"] for c in cfgs.values()}) == len(ENVS)
    assert all(c["metrics"]["http_port"] for c in cfgs.values())


def test_only_the_canary_profiles_and_each_environment_reports_as_itself():
    cfgs = {env: env_config(env) for env in ENVS}
    assert cfgs["canary"]["profiler"]["enabled"] is True
    assert cfgs["main"]["profiler"]["enabled"] is False
    assert {env: c["environment"] for env, c in cfgs.items()} == {e: e for e in ENVS}


def test_systemd_unit_runs_current_under_pypy_and_outwaits_the_shutdown_flush():
    path = os.path.join(ROOT, "deploy", "systemd", "streamer@.service")
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str
    unit.read(path)
    svc = unit["Service"]
    assert svc["Restart"] == "on-failure"
    assert svc["KillSignal"] == "SIGTERM"
    longest = max([config_mod.DEFAULTS["shutdown_timeout_s"]] +
                  [env_config(e)["shutdown_timeout_s"] for e in ENVS])
    assert int(svc["TimeoutStopSec"]) > longest
    assert svc["ExecStart"].startswith("/opt/streamer/%i/current/bin/streamer run -c ")
    assert svc["EnvironmentFile"] == "/opt/streamer/etc/%i.env"
    with open(path) as fh:  # configparser keeps only the last of several Environment= lines
        environment = dict(line.strip().split("=", 2)[1:] for line in fh
                           if line.startswith("Environment="))
    assert {k: environment.get(k) for k in gcpacing.GC_ENV} == gcpacing.GC_ENV
    with open(os.path.join(ROOT, "README.md")) as fh:
        assert "systemctl kill -s USR2 streamer@canary" in fh.read()


def test_lock_file_pins_every_runtime_dependency_for_pypy():
    with open(os.path.join(ROOT, "deploy", "constraints-pypy.txt")) as fh:
        pins = {}
        for line in fh:
            name, sep, version = line.strip().partition("==")
            if sep:
                pins[name.lower().replace("_", "-")] = version
    wanted = []
    for req in importlib.metadata.requires("streamer"):
        if "extra ==" in req:
            continue
        if "platform_python_implementation" in req and '"PyPy"' not in req:
            continue
        wanted.append(re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].lower().replace("_", "-"))
    assert wanted
    missing = [name for name in wanted if name not in pins]
    assert not missing, f"run 'make constraints': not pinned: {missing}"
