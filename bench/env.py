"""Where the bench runs: the repo, the local servers, the commit and the host.

Paths derive from the repo root; the servers are the ones deploy/local/up.sh starts (ports can be
moved with the same environment variables the deploy scripts honour). Passwords stay in their
files: children get the file's path, never the password in argv.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import uuid
import zlib
from typing import Any, Dict, List, Optional, Tuple

import pymysql
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOCAL = os.path.join(ROOT, ".local")
SECRETS = os.path.join(LOCAL, "secrets")
MYSQL_PORT = int(os.environ.get("STREAMER_MYSQL_PORT", "13306"))
KAFKA = f"127.0.0.1:{os.environ.get('STREAMER_KAFKA_PORT', '9092')}"
REGISTRY = (f"http://127.0.0.1:{os.environ.get('STREAMER_REGISTRY_PORT', '8081')}"
            "/apis/ccompat/v7")
# The message formats a run can measure (bench.suite --format): config sections each streamer of
# the run gets. debezium-avro needs the local registry (deploy/local/registry.sh up).
FORMATS: Dict[str, Dict[str, Any]] = {
    "streamer": {},
    "json": {"format": "json"},
    "debezium-json": {"format": "debezium"},
    "debezium-avro": {"format": "debezium", "debezium": {"encoding": "avro"},
                      "schema_registry": {"url": REGISTRY}},
}
# The sections of this run's format (set once, by use_format).
FORMAT: Dict[str, Any] = {}
FORMAT_NAME = "streamer"


def use_format(name: str, start: bool = True) -> None:
    """Every streamer of this run publishes in the message format ``name`` (FORMATS), from now
    on; ``start``: debezium-avro's registry is started if it isn't."""
    global FORMAT_NAME
    FORMAT.clear()
    FORMAT.update(FORMATS[name])
    FORMAT_NAME = name
    if start and "schema_registry" in FORMAT:
        subprocess.run([os.path.join(ROOT, "deploy", "local", "registry.sh"), "up"], check=True)


RESULTS = os.path.join(ROOT, "bench", "results.jsonl")


def password_file(user: str) -> str:
    return os.path.join(SECRETS, f"{user}.password")


def read_password(user: str) -> str:
    with open(password_file(user), encoding="utf-8") as fh:
        return fh.read().strip()


def admin(db: Optional[str] = None, multi: bool = False) -> Any:
    """A connection as the local admin user; ``multi`` allows several statements per call."""
    flags = pymysql.constants.CLIENT.MULTI_STATEMENTS if multi else 0
    return pymysql.connect(host="127.0.0.1", port=MYSQL_PORT, user="admin",
                           password=read_password("admin"), database=db, autocommit=True,
                           charset="utf8mb4", client_flag=flags)


def master_pos(conn: Any) -> Tuple[str, int]:
    with conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        row = cur.fetchone()
    return row[0], int(row[1])


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def server_id(name: str) -> int:
    """A fixed replica id per bench run (never random per connection; unique per name)."""
    return 700000 + zlib.crc32(name.encode()) % 100000


def create_database(prefix: str, *ddl: str) -> str:
    """A new database named ``prefix`` plus a unique suffix, with ``ddl`` run in it: its name."""
    db = unique(prefix)
    conn = admin()
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
            cur.execute(f"USE {db}")
            for statement in ddl:
                cur.execute(statement)
    finally:
        conn.close()
    return db


def drop_database(db: str) -> None:
    conn = admin()
    try:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {db}")
    finally:
        conn.close()


def write_streamer_config(path: str, namespace: str, include: List[str],
                          extra: Optional[Dict[str, Any]] = None) -> str:
    """A production-like streamer config: the default batch settings, the bench's namespace;
    ``extra``: more top-level sections."""
    cfg: Dict[str, Any] = {
        "namespace": namespace,
        "source": {"name": namespace},
        "mysql": {"host": "127.0.0.1", "port": MYSQL_PORT, "user": "streamer",
                  "password_file": password_file("streamer"), "server_id": server_id(namespace)},
        "kafka": {"bootstrap.servers": KAFKA},
        "tables": {"include": include},
        "start": {"initial": "end"},
        **FORMAT,
        **(extra or {}),
    }
    with open(path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(cfg, fh)
    return path


def _git(*args: str) -> str:
    out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True)
    return out.stdout.strip()


MEASURED = ("streamer", "setup.py")


def commit() -> Tuple[str, bool, str]:
    """HEAD, whether the measured code has uncommitted changes, and a digest of those changes.

    The digest (of the diff and the untracked files) tells two dirty runs on the same HEAD apart.
    """
    head = _git("rev-parse", "HEAD")
    digest = hashlib.sha1(_git("diff", "HEAD", "--", *MEASURED).encode())
    untracked = _git("ls-files", "--others", "--exclude-standard", "--", *MEASURED).split()
    for name in sorted(untracked):
        with open(os.path.join(ROOT, name), "rb") as fh:
            digest.update(name.encode() + b"\0" + fh.read())
    dirty = bool(_git("status", "--porcelain", "--", *MEASURED))
    return head, dirty, digest.hexdigest()[:12] if dirty else ""


class Steal:
    """The share of CPU time the hypervisor gave to other guests while this was open (%), and
    the share this machine's own processes used (``busy_pct``).

    On a shared virtual machine, rates of the same commit swing with steal: a run measured while
    the host took a third of the CPU is not a regression. On two cores shared by the load, the
    servers and the streamer, ``busy_pct`` says how close the machine itself was to its limit.
    Read from /proc/stat (all CPUs).
    """

    def __init__(self, path: str = "/proc/stat") -> None:
        self.path = path
        self.pct: Optional[float] = None
        self.busy_pct: Optional[float] = None
        self._start = self._read()

    def _read(self) -> Optional[Tuple[int, int, int]]:
        try:
            with open(self.path, encoding="ascii") as fh:
                fields = [int(v) for v in fh.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        # user nice system idle iowait irq softirq steal [guest guest_nice, already in user/nice]
        fields += [0] * (8 - len(fields))
        busy = fields[0] + fields[1] + fields[2] + fields[5] + fields[6]
        return fields[7], busy, sum(fields[:8])

    def stop(self) -> Optional[float]:
        end = self._read()
        if self._start is not None and end is not None and end[2] > self._start[2]:
            total = end[2] - self._start[2]
            self.pct = round(100.0 * (end[0] - self._start[0]) / total, 1)
            self.busy_pct = round(100.0 * (end[1] - self._start[1]) / total, 1)
        return self.pct
