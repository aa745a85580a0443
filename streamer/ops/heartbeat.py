"""The heartbeat writer: a µs timestamp written into a small table on the source every N ms.

When the row comes back through the binlog the pipeline measures the true commit-to-publish latency
from it (binlog event timestamps have one-second resolution), and it keeps the lag metric alive
while the published tables are idle. The heartbeat database is never published.

The value is ``UNIX_TIMESTAMP(NOW(6))`` in µs, so the server's time zone does not matter; the
source's and the streamer's clocks must agree (NTP) for the latency to be true.
"""
from __future__ import annotations

import logging
import os
import threading
from typing import Any, Callable, Dict, Optional

import pymysql

from streamer.config import Config
from streamer import config as config_mod
from streamer.errors import SourceError
from streamer.source import server
from streamer.source.server import connect

log = logging.getLogger(__name__)

TABLE = "heartbeat"
COLUMN = "ts_us"


def table_sql(database: str) -> str:
    return (f"CREATE TABLE IF NOT EXISTS `{database}`.`{TABLE}` (source VARCHAR(64) PRIMARY KEY, "
            f"{COLUMN} BIGINT UNSIGNED NOT NULL)")


def credentials(cfg: Config, environ: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """Connection settings for the writer; the password comes from a file or the environment."""
    environ = os.environ if environ is None else environ
    hb = cfg.heartbeat
    if hb.user is None:
        user, password = cfg.mysql.user, config_mod.mysql_password(cfg, environ)
    else:
        user = hb.user
        if hb.password_file:
            password = config_mod.read_secret_file("heartbeat.password_file", hb.password_file)
        elif hb.password_env and hb.password_env in environ:
            password = environ[hb.password_env]
        else:
            raise config_mod.ConfigError(
                f"no password for heartbeat.user {user!r}: set heartbeat.password_file or the "
                f"environment variable named by heartbeat.password_env ({hb.password_env})")
    return dict(server.connection_settings(cfg, password), user=user)


class HeartbeatWriter:
    """Background thread writing the heartbeat row. Use as a context manager."""

    def __init__(self, cfg: Config, active: Callable[[], bool] = lambda: True):
        hb = cfg.heartbeat
        self.cfg = cfg
        # Only the instance that streams writes: a hot standby's writes would make the active
        # one measure its latency against another host's clock and writes.
        self.active = active
        self.settings = credentials(cfg)
        self.interval = hb.interval_s
        self.database = hb.database
        self.source = cfg.source.name
        self.sql = (f"INSERT INTO `{self.database}`.`{TABLE}` (source, {COLUMN}) VALUES "
                    f"(%s, CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS UNSIGNED)) "
                    f"ON DUPLICATE KEY UPDATE {COLUMN} = VALUES({COLUMN})")
        self.writes = 0
        self._conn: Any = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="streamer-heartbeat", daemon=True)

    def __enter__(self) -> "HeartbeatWriter":
        # The first write is synchronous so a missing table or grant fails the start, clearly.
        try:
            self._write()
        except pymysql.err.MySQLError as exc:
            raise self._explain(exc) from None
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        self._close()

    def _explain(self, exc: Exception) -> SourceError:
        code = exc.args[0] if exc.args else None
        user = self.settings["user"]
        if code in (server.ER_NO_SUCH_TABLE, server.ER_BAD_DB):
            return SourceError(
                f"heartbeat table {self.database}.{TABLE} does not exist: as an admin run "
                f"CREATE DATABASE IF NOT EXISTS `{self.database}`; {table_sql(self.database)}; "
                f"or set heartbeat.enabled: false")
        if code in server.ER_ACCESS_DENIED:
            return SourceError(
                f"the heartbeat user {user!r} may not write {self.database}.{TABLE}: "
                f"GRANT INSERT, UPDATE ON `{self.database}`.* TO that user ({exc.args[-1]})")
        return SourceError(f"heartbeat write failed ({code}): {exc.args[-1]}")

    def _write(self) -> None:
        if self._conn is None:
            # On the server in use when it connects (source.failover), with the password as
            # its file has it now: one rotated since is taken (source.server.Password).
            m = self.cfg.mysql
            self.settings = config_mod.read_again(lambda: credentials(self.cfg), self.settings,
                                                  "connecting with the password")
            self._conn = connect(dict(self.settings, host=m.host, port=m.port))
        with self._conn.cursor() as cur:
            cur.execute(self.sql, (self.source,))
        self.writes += 1

    def _close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except pymysql.err.Error:
                log.debug("closing the heartbeat connection failed", exc_info=True)
            self._conn = None

    def _run(self) -> None:
        failing = False
        while not self._stop.wait(self.interval):
            if not self.active():
                continue
            try:
                self._write()
                if failing:
                    log.info("heartbeat writes work again")
                failing = False
            except pymysql.err.MySQLError as exc:
                if not failing:
                    log.warning("heartbeat write failed, retrying every %.1f s: %s",
                                self.interval, self._explain(exc))
                failing = True
                self._close()
