"""A streamed server that starts replicating another while its binlog does not log what it
applies.

`streamer run` refuses such a server at start (``source.server.replica_checks``): with
log_slave_updates (log_replica_updates) OFF, a replica's binlog holds its own writes only, and a
stream of it misses every change it replicates. A replica whose replication threads are stopped
at the streamer's start (a maintenance window, ``skip-slave-start``) passes that check, and once
its threads start, what it applies reaches neither its binlog nor Kafka, with nothing to show it.

This guard sees the threads start. The reporter's poll (its own connection, never the hot loop)
asks every ``every_s`` whether the server replicates now; the setting, which can't change while
the server runs, is read once per connection. While it replicates without logging, ``/health``
is "error" (503) naming the fix, ``streamer_unlogged_replication`` is 1 (an alert fires) and one
ERROR line says so; a restart is refused, as at start, until the fix is made.

The way out: set the setting ON (my.cnf, a restart of the server) or stream the primary; then
take a snapshot of the tables (``streamer snapshot``) for the changes the binlog did not hold.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, Optional, Tuple

from streamer.source import server


def judge(setting: Tuple[str, str], replicating: bool) -> Dict[str, Any]:
    """The guard's state: "unlogged" while the server replicates and ``setting`` (name, value)
    is not ON, else "ok"."""
    name, value = setting
    if not replicating or value.upper() == "ON":
        return {"status": "ok", "reason": None}
    return {"status": "unlogged", "reason": (
        f"the server replicates another now (its replication threads run), and {name} is "
        f"{value}: what it applies is not in its binlog, so no change of it is published. Set "
        f"{name}=ON (my.cnf; the server must restart) or stream the primary, then take a "
        f"snapshot of the tables (streamer snapshot) for the changes missed")}


class ReplicaGuard:
    """Asks, every ``every_s`` of ``clock``, whether the server replicates another without
    logging it (``judge``); ``forget`` after a new connection (another server, perhaps)."""

    def __init__(self, every_s: float = 10.0, clock: Callable[[], float] = time.monotonic):
        self.every_s = every_s
        self.clock = clock
        self._setting: Optional[Tuple[str, str]] = None
        self._next = 0.0

    def forget(self) -> None:
        self._setting = None
        self._next = 0.0

    def poll(self, conn: Any) -> Optional[Dict[str, Any]]:
        """The state when a check was due (a MySQL error is raised), else None."""
        now = self.clock()
        if now < self._next:
            return None
        self._next = now + self.every_s
        if self._setting is None:
            self._setting = server.logs_replicated(conn)
        if self._setting[1].upper() == "ON":
            return judge(self._setting, False)
        return judge(self._setting, server.replicating(conn))
