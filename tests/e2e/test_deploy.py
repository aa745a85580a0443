"""Deploys against the real MariaDB and Kafka: canary and main side by side, rollback, verdict.

The tests share one deployment (module fixture) to stay lean: release A is built once and runs
as canary and main under a private supervisord; the tests then run in order.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import pymysql
import pytest
from confluent_kafka.admin import AdminClient

from streamer.deploy import release, service, verify
from streamer.kafka import bundle
from tests import support
from tests.e2e.servers import free_port

DEPLOY = os.path.join(support.ROOT, "deploy", "deploy.sh")
# The dependency layer is keyed by the lock file: built once per machine, shared by test runs.
DEPS = os.path.join(support.LOCAL, "deploy-deps")


class Site:
    def __init__(self, base, db, admin):
        self.prefix = os.path.join(base, "opt")
        self.db = db
        self.admin = admin
        self.tag = support.unique("d")
        self.ns = {env: f"{self.tag}-{env}" for env in ("canary", "main")}
        self.ports = {env: free_port() for env in ("canary", "main")}
        os.makedirs(os.path.join(self.prefix, "etc"))
        # The canary gets its own MySQL user, so a test can lock it out without touching main.
        self.canary_user = self.tag + "c"
        self.canary_pw = os.path.join(base, "canary.password")
        with open(os.open(self.canary_pw, os.O_WRONLY | os.O_CREAT, 0o600), "w") as fh:
            fh.write(self.tag + "pw\n")
        support.sql(admin, f"CREATE USER '{self.canary_user}'@'%' IDENTIFIED BY '{self.tag}pw'",
                    f"GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO '{self.canary_user}'@'%'")
        for env, user, pw in (("canary", self.canary_user, self.canary_pw),
                              ("main", "streamer", os.path.join(support.LOCAL, "secrets",
                                                                "streamer.password"))):
            self.write_env(env, user, pw)

    def write_env(self, env, user, pw):
        lines = {"STREAMER__NAMESPACE": self.ns[env], "STREAMER__MYSQL__HOST": "127.0.0.1",
                 "STREAMER__MYSQL__PORT": str(support.MYSQL_PORT), "STREAMER__MYSQL__USER": user,
                 "STREAMER__MYSQL__PASSWORD_FILE": pw,
                 "STREAMER__MYSQL__SERVER_ID": str(6000 + free_port() % 50000),
                 "STREAMER__KAFKA__BOOTSTRAP_SERVERS": support.KAFKA,
                 "STREAMER__TABLES__INCLUDE": f'["{self.db}.*"]',
                 "STREAMER__BATCH__LINGER_MS": "50",
                 "STREAMER__METRICS__HTTP_PORT": str(self.ports[env]),
                 "STREAMER__METRICS__INTERVAL_S": "1"}
        path = os.path.join(self.prefix, "etc", env + ".env")
        with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as fh:
            fh.write("".join(f"{k}={v}\n" for k, v in lines.items()))

    def env(self):
        # PYTHONDONTWRITEBYTECODE as CI and many build hosts set it: a release must hold its
        # bytecode all the same (test_the_release_holds_the_projects_bytecode).
        return dict(os.environ, STREAMER_PREFIX=self.prefix, STREAMER_SUPERVISOR="supervisord",
                    STREAMER_DEPLOY_PYTHON=sys.executable, STREAMER_DEPS_DIR=DEPS,
                    PYTHONDONTWRITEBYTECODE="1")

    def deploy(self, *args):
        return subprocess.run([DEPLOY, *args], env=self.env(), capture_output=True, text=True,
                              timeout=600)

    def current(self, env):
        return os.path.basename(os.path.realpath(os.path.join(self.prefix, env, "current")))

    def topic(self, env):
        return f"{self.ns[env]}.{self.db}.t"


def insert(conn, ids):
    for i in ids:
        support.sql(conn, f"INSERT INTO t VALUES ({i}, 'v{i}')")


def ids_in(site, env, expect):
    msgs = support.consume([site.topic(env)], expect=expect, idle=2.0, timeout=60,
                           decode_ns=site.ns[env])
    return [m["value"]["after"]["id"] for m in msgs]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    name = support.unique("t_")
    admin = support.admin()
    support.sql(admin, f"CREATE DATABASE {name}")
    admin.select_db(name)
    support.sql(admin, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
    s = Site(str(tmp_path_factory.mktemp("deploy")), name, admin)
    try:
        started = time.monotonic()
        for env in ("canary", "main"):
            proc = s.deploy(env, "A", "--health-timeout", "60")
            assert proc.returncode == 0, proc.stdout + proc.stderr
        s.deploy_a_s = time.monotonic() - started
        yield s
    finally:
        supervisor = service.Supervisord(s.prefix)
        if supervisor.running():
            supervisor.shutdown()
        support.sql(admin, f"DROP USER IF EXISTS '{s.canary_user}'@'%'", f"DROP DATABASE {name}")
        admin.close()


def test_canary_and_main_from_one_release_both_stream_into_disjoint_topics(site):
    assert site.current("canary") == site.current("main") == "A"
    with open(os.path.join(site.prefix, "releases", "A", release.MARKER)) as fh:
        print(f"deploying A to canary and main took {site.deploy_a_s:.1f}s; release: {fh.read()}")
    insert(site.admin, range(1, 21))
    for env in ("canary", "main"):
        assert sorted(ids_in(site, env, 20)) == list(range(1, 21))
    names = AdminClient({"bootstrap.servers": support.KAFKA}).list_topics(timeout=10).topics
    canary = {t for t in names if t.startswith(site.ns["canary"] + ".")}
    main = {t for t in names if t.startswith(site.ns["main"] + ".")}
    assert site.topic("canary") in canary and f"{site.ns['main']}.__positions" in main
    assert not canary & main


def test_the_release_holds_the_projects_bytecode(site):
    # Without it, every start of the service compiles the package again (45-66 ms of a PyPy
    # start): its user can't, as a rule, write into the release.
    release_dir = os.path.join(site.prefix, "releases", "A")
    code = ("import importlib.util, json, os, pathlib, streamer; "
            "pkg = pathlib.Path(streamer.__file__).parent; "
            "print(json.dumps([str(pkg), sorted(str(p.relative_to(pkg)) for p in pkg.rglob('*.py') "
            "if not os.path.exists(importlib.util.cache_from_source(str(p))))]))")
    out = subprocess.run([os.path.join(release_dir, "bin", "python"), "-I", "-c", code],
                         capture_output=True, text=True, check=True, cwd=site.prefix)
    package, missing = json.loads(out.stdout)
    assert os.path.realpath(package).startswith(os.path.realpath(release_dir) + os.sep)
    assert missing == []


def test_the_service_runs_on_the_releases_own_librdkafka(site):
    # The release carries deploy/librdkafka.sh's library (upstream's 2.16.0), and the running
    # service loaded that one file only: the producer and confluent-kafka-pypy's consumers alike.
    bundled = os.path.join(site.prefix, "releases", "A", bundle.BUNDLED_RELPATH)
    assert os.path.isfile(bundled)
    pid = service.Supervisord(site.prefix).ctl("pid", "streamer-main").stdout.strip()
    with open(f"/proc/{int(pid)}/maps") as fh:
        mapped = {line.split()[-1] for line in fh if "librdkafka" in line}
    assert mapped == {os.path.realpath(bundled)}


def test_the_running_service_and_the_release_say_which_release_they_are(site):
    import urllib.request

    import streamer

    tool = os.path.join(site.prefix, "releases", "A", "bin", "streamer")
    out = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith(
        f"streamer {streamer.__version__} (release A) on PyPy "), out.stdout + out.stderr
    url = f"http://127.0.0.1:{site.ports['canary']}/status"
    with urllib.request.urlopen(url, timeout=10) as resp:
        build = json.loads(resp.read())["build"]
    assert (build["version"], build["release"]) == (streamer.__version__, "A")
    with urllib.request.urlopen(url.replace("/status", "/metrics"), timeout=10) as resp:
        assert 'release="A"' in next(line for line in resp.read().decode().splitlines()
                                     if line.startswith("streamer_build_info{"))


def broken_source(base):
    """A copy of this source whose console entry point does not exist: it fails on start."""
    src = os.path.join(base, "src-broken")
    shutil.copytree(support.ROOT, src, ignore=release._SKIP)
    with open(os.path.join(src, "setup.py")) as fh:
        text = fh.read()
    assert "streamer.cli:main" in text
    with open(os.path.join(src, "setup.py"), "w") as fh:
        fh.write(text.replace("streamer.cli:main", "streamer.cli:no_such_entry_point"))
    return src


def test_broken_release_rolls_back_and_the_old_one_loses_nothing(site, tmp_path):
    src = broken_source(str(tmp_path))
    stop = threading.Event()
    written = []
    conn = support.admin(site.db)

    def writer():
        i = 1000
        while not stop.is_set():
            insert(conn, [i])
            written.append(i)
            i += 1
            time.sleep(0.02)

    t = threading.Thread(target=writer)
    t.start()
    try:
        started = time.monotonic()
        proc = site.deploy("main", "B", "--source", src, "--health-timeout", "20")
        took = time.monotonic() - started
        time.sleep(1.0)
    finally:
        stop.set()
        t.join()
        conn.close()
    print(f"broken deploy + rollback took {took:.1f}s; {len(written)} rows written meanwhile")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    # The broken release exits at start. Supervisord reports that as a failed restart, unless the
    # exit came after its startsecs (a starved host): then the health wait is what fails.
    assert re.search(r"B on main failed: (restart failed|not healthy within)", proc.stderr), \
        proc.stderr
    assert "rolled main back to A: healthy" in proc.stderr
    assert site.current("main") == "A" and site.current("canary") == "A"
    got = [i for i in ids_in(site, "main", 20 + len(written)) if i >= 1000]
    assert len(got) == len(set(got)), "a row arrived twice"
    assert sorted(got) == written


class Writer(threading.Thread):
    """Single-row inserts every 20 ms until stopped: a steady load over a whole verify window."""

    def __init__(self, site, start):
        super().__init__()
        self.site, self.next = site, start
        self.done = threading.Event()

    def run(self):
        conn = support.admin(self.site.db)
        try:
            while not self.done.is_set():
                insert(conn, [self.next])
                self.next += 1
                time.sleep(0.02)
        finally:
            conn.close()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.join()


def caught_up(site, env, timeout=60):
    """Wait until ENV has committed all the binlog written so far, so what it does next is about now."""
    url = f"http://127.0.0.1:{site.ports[env]}/status"
    end = support.master_pos(site.admin)

    def there():
        pos = verify.fetch(url)[1]["position"]
        return pos.get("file") is not None and (pos["file"], pos["pos"]) >= end

    support.wait_for(there, timeout=timeout, what=f"{env} to commit up to {end}")


def test_healthy_canary_passes_the_verdict_against_main(site):
    # On a starved host a healthy canary can stall for a whole window; a failing verify fails
    # every one of three.
    outputs = []
    with Writer(site, 5000):
        for _ in range(3):
            proc = site.deploy("verify", "canary", "--main", "main", "--window", "8")
            outputs.append(proc.stdout + proc.stderr)
            if proc.returncode == 0:
                break
    print(proc.stdout)
    assert proc.returncode == 0, "\n".join(outputs)
    assert "✓ advancing" in proc.stdout and "verdict: PASS" in proc.stdout
    assert "throughput" in proc.stdout and "vs main" in proc.stdout
    assert re.search(r"canary runs streamer \S+ \(release A\) on PyPy .*; main runs streamer "
                     r"\S+ \(release A\) on PyPy", proc.stdout), proc.stdout


def test_canary_locked_out_of_mysql_fails_the_verdict_with_the_reason(site):
    # A canary still behind would go on advancing through changes it had been sent before the
    # lock, for longer than the window on a busy machine.
    caught_up(site, "canary")
    support.sql(site.admin, f"ALTER USER '{site.canary_user}'@'%' ACCOUNT LOCK")
    # Kill until none is left: a connection being opened as the lock came in would be missed
    # by a single pass, and the canary would go on streaming through it.
    for _ in range(100):
        pids = support.sql(site.admin, "SELECT id FROM information_schema.processlist "
                                       f"WHERE user = '{site.canary_user}'")
        if not pids:
            break
        for (pid,) in pids:
            try:
                support.sql(site.admin, f"KILL {pid}")
            except pymysql.err.MySQLError:
                pass  # it ended by itself meanwhile
        time.sleep(0.2)
    else:
        raise AssertionError(f"the locked-out canary still has connections: {pids}")
    env = site.env()
    with open(os.path.join(site.prefix, "etc", "canary.env")) as fh:
        env.update(line.strip().split("=", 1) for line in fh)
    cfg = os.path.join(site.prefix, "canary", "current", "env", "canary.yaml")
    with Writer(site, 9000):
        proc = subprocess.run([sys.executable, "-m", "streamer.cli", "verify", "-c", cfg,
                               "--window", "5"], env=env, capture_output=True, text=True, timeout=60)
    print(proc.stdout)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "verdict: FAIL" in proc.stdout
    # The lock-out is named, however the window falls between the canary's reconnect attempts.
    assert "✗ last error, still unrecovered:" in proc.stdout and "account is locked" in proc.stdout
