"""The binlog the bench writes: room for it before a run, and its files purged after one.

Every backlog and live load goes through the local MariaDB's binlog, and once nothing removed
it: a day of benchmarks and experiments left 73 GB, which filled the disk. The local server now
expires files after a day (deploy/local/mysql.sh), but a day of runs can still fill a disk. So
the suite checks for room first, and after the run purges every binlog file but a fresh one
(``--keep-binlogs`` keeps them) and those the local streamer (``make run``'s config,
.local/streamer.yaml) still needs: its checkpoint's file and every one after it, so that
``make run`` resumes where it stopped after ``make test`` or ``make bench``.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

import pymysql

from . import env

GB = 1 << 30

# Free space asked of the binlog's disk before a run. A full `make bench` wrote 1.1 GB of binlog
# (its backlogs, warm-ups and live loads, at fd8f1fa) and the broker holds the same rows until
# the run deletes its topics; 4 GB leaves room for a faster host's larger live loads. A quick
# run writes a few MB.
FULL_NEED_GB = 4.0
QUICK_NEED_GB = 0.5


def need_bytes(quick: bool) -> int:
    return int((QUICK_NEED_GB if quick else FULL_NEED_GB) * GB)


def free_bytes(path: str) -> Optional[int]:
    """Bytes an unprivileged writer may still use on path's filesystem; None if not found here."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def binlog_dir(conn: Any) -> Optional[str]:
    with conn.cursor() as cur:
        cur.execute("SELECT @@log_bin_basename")
        row = cur.fetchone()
    return os.path.dirname(row[0]) if row and row[0] else None


def room_error(path: Optional[str], free: Optional[int], need: int) -> Optional[str]:
    """The refusal for a disk without room for a run, or None when there is room or no reading."""
    if path is None or free is None or free >= need:
        return None
    return (f"only {free / GB:.1f} GB free on the disk holding the binlog ({path}); this run "
            f"needs ~{need / GB:.0f} GB for its backlogs and loads. Free some space (purging old "
            f"binlog files: PURGE BINARY LOGS TO the newest), or run with --quick")


def check_room(conn: Any, quick: bool) -> Optional[str]:
    path = binlog_dir(conn)
    return room_error(path, free_bytes(path) if path else None, need_bytes(quick))


def _files(conn: Any) -> List[Tuple[str, int]]:
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return [(row[0], int(row[1])) for row in cur.fetchall()]


@dataclass
class Purged:
    files: int
    bytes: int
    kept: str
    error: Optional[str] = None

    def describe(self) -> str:
        done = f"purged {self.files} binlog files ({self.bytes / GB:.2f} GB)"
        if self.error:
            return (f"bench: {done}, not all of them: {self.error}. Purge the rest with "
                    f"PURGE BINARY LOGS TO '{self.kept}' once nothing reads them")
        return (f"bench: {done}, everything written before {self.kept}, which stays with the "
                f"files after it (the newest, or the oldest the local streamer's checkpoint "
                f"needs; --keep-binlogs keeps them all)")


def local_needs(config_path: Optional[str] = None) -> Optional[str]:
    """The oldest binlog file the local streamer's committed checkpoint needs (None: it has no
    checkpoint, or there is no local config). A checkpoint that can't be read keeps every file:
    ``ValueError`` says so."""
    path = config_path or os.path.join(env.LOCAL, "streamer.yaml")
    if not os.path.exists(path):
        return None
    from streamer import config
    from streamer.kafka.settings import client_settings
    from streamer.kafka.topics import read_topic_tail
    from streamer.ops.metrics import needed_file
    from streamer.position import Position

    cfg = config.load(path, environ={})
    topic = f"{cfg['namespace']}.__positions"
    try:
        records, _ = read_topic_tail(client_settings(cfg["kafka"]), topic, timeout=30,
                                     tail=None, settle=True)
    except Exception as exc:  # noqa: BLE001 - any failure keeps the files; said by the caller
        raise ValueError(f"the local streamer's checkpoint ({topic}) could not be read: "
                         f"{exc}") from exc
    key = cfg["source"]["name"].encode()
    found = None
    for k, value in records:
        if k == key and value is not None:
            found = Position.from_json(value)
    return needed_file(found) if found is not None else None


def oldest(*names: Optional[str]) -> Optional[str]:
    """The oldest of binlog file ``names`` (None where a checkpoint needs none)."""
    known = [n for n in names if n is not None]
    return min(known, key=_order) if known else None


def _order(name: str) -> Tuple[str, int]:
    base, _, number = name.rpartition(".")
    return (base, int(number)) if number.isdigit() else (name, 0)


def purge(conn: Any, attempts: int = 10, pause_s: float = 1.0,
          keep_from: Optional[str] = None) -> Purged:
    """Rotate to a fresh binlog file and purge every older one, but ``keep_from`` and the files
    after it (a checkpoint's: ``local_needs``).

    The server keeps, without an error, a file a connected replica is still on, and every file
    after it. A reader that has just exited may hold one for a second or so, until its dump thread
    notices, so a purge that left files is tried again ``attempts`` times; what stays after that
    is named in ``error``."""
    before = _files(conn)
    error: Optional[str] = None
    with conn.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
        kept = env.master_pos(conn)[0]
        # A file already gone can't be kept (the server refuses a PURGE TO it): the checkpoint
        # that needs it can't resume whatever stays, so the purge goes on as without one.
        if keep_from is not None and keep_from in {name for name, _ in before} \
                and _order(keep_from) < _order(kept):
            kept = keep_from
        for attempt in range(attempts):
            if attempt:
                time.sleep(pause_s)
            try:
                cur.execute("PURGE BINARY LOGS TO %s", (kept,))
            except pymysql.err.MySQLError as exc:
                error = str(exc)
                break
            left = [name for name, _ in _files(conn) if _order(name) < _order(kept)]
            if not left:
                break
    left = [name for name, _ in _files(conn) if _order(name) < _order(kept)]
    if left and error is None:
        error = (f"{left[0]} .. {left[-1]} stay, as a connected reader is still on "
                 f"{left[0]}")
    now = {name for name, _ in _files(conn)}
    gone = [(name, size) for name, size in before if name not in now]
    return Purged(len(gone), sum(size for _, size in gone), kept, error)
