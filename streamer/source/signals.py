"""The two small tables through which a snapshot speaks to the binlog: watermarks and requests.

Both live in ``snapshot.database`` (by default the heartbeat's database, so the same grant covers
them), which is never published. A *watermark* is a write of a fresh mark to the streamer's row
of ``snapshot_watermark``; it comes back through the binlog at its place among the changes. A
*request* is a row inserted into ``snapshot_signal`` by ``streamer snapshot``: the streamer reads
it where the binlog has it, so it is ordered with the changes, survives restarts, and is carried
out once.
"""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from streamer.config import Config
from streamer.errors import SourceError
from streamer.source import condition, server

WATERMARK = "snapshot_watermark"
SIGNAL = "snapshot_signal"


def tables_sql(database: str) -> List[str]:
    return [
        f"CREATE TABLE IF NOT EXISTS `{database}`.`{WATERMARK}` (streamer VARCHAR(191) PRIMARY KEY, "
        f"mark VARCHAR(64) NOT NULL)",
        f"CREATE TABLE IF NOT EXISTS `{database}`.`{SIGNAL}` (id BIGINT AUTO_INCREMENT PRIMARY KEY, "
        f"streamer VARCHAR(191) NOT NULL, request TEXT NOT NULL, "
        f"requested_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))",
    ]


def streamer_name(cfg: Config) -> str:
    """Which streamer a watermark or request belongs to: several may share a source."""
    return f"{cfg.namespace}/{cfg.source.name}"


# The refusals ``explain`` names a fix for: a person must act on them.
FIXES_NAMED = frozenset((server.ER_NO_SUCH_TABLE, server.ER_BAD_DB, server.ER_READ_ONLY)
                        + server.ER_ACCESS_DENIED)


def explain(exc: Exception, database: str, table: str, user: str, what: str) -> SourceError:
    """The error for a failed watermark or request write, naming the fix."""
    code = exc.args[0] if exc.args else None
    if code in (server.ER_NO_SUCH_TABLE, server.ER_BAD_DB):
        return SourceError(
            f"the snapshot table {database}.{table} does not exist: as an admin run "
            f"CREATE DATABASE IF NOT EXISTS `{database}`; " + "; ".join(tables_sql(database)))
    if code in server.ER_ACCESS_DENIED:
        return SourceError(
            f"the streamer's user {user!r} may not {what} {database}.{table}: as an admin run "
            f"GRANT INSERT, UPDATE ON `{database}`.* TO that user ({exc.args[-1]})")
    if code == server.ER_READ_ONLY:
        return SourceError(
            f"the server is read-only, so the streamer can't {what} {database}.{table}: "
            f"set snapshot.mode: read_only, which needs no writes ({exc.args[-1]})")
    return SourceError(f"{what} {database}.{table} failed ({code}): {exc.args[-1]}")


def write_watermark(conn: Any, database: str, name: str, mark: str, user: str) -> None:
    import pymysql

    try:
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO `{database}`.`{WATERMARK}` (streamer, mark) VALUES (%s, %s) "
                        f"ON DUPLICATE KEY UPDATE mark = VALUES(mark)", (name, mark))
    except pymysql.err.MySQLError as exc:
        if server.connection_lost(exc) or exc.args[0] not in FIXES_NAMED:
            # The connection (retried like a dropped stream), or an answer that may pass: a
            # lock wait (FLUSH TABLES WITH READ LOCK, a backup's) is read again later.
            raise
        raise explain(exc, database, WATERMARK, user, "write the watermark to") from None


def request(tables: List[str], condition: Optional[str]) -> str:
    return json.dumps({"tables": tables, "where": condition}, sort_keys=True)


def parse_request(text: str) -> Dict[str, Any]:
    """A request row's ``request`` column: {"tables": [...], "where": ...}. ValueError, saying
    what is wrong, for anything else: a row anyone with INSERT on the table can write must never
    stop the stream."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the request is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"the request must be a JSON object with 'tables' and 'where', got "
                         f"{type(data).__name__} {text[:80]!r}")
    tables = data.get("tables")
    if not isinstance(tables, list) or not all(isinstance(t, str) and "." in t for t in tables):
        raise ValueError(f"'tables' must be a list of 'db.table' names, got {tables!r}")
    where = data.get("where")
    if where is not None and not isinstance(where, str):
        raise ValueError(f"'where' must be SQL text or null, got {where!r}")
    if where is not None:
        condition.check(where)  # its names are checked against each table's columns later
    return {"tables": tables, "where": where}


def insert_request(conn: Any, database: str, name: str, tables: List[str],
                   condition: Optional[str], user: str) -> int:
    """Write a request row; its id."""
    import pymysql

    try:
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO `{database}`.`{SIGNAL}` (streamer, request) VALUES (%s, %s)",
                        (name, request(tables, condition)))
            return int(cur.lastrowid)
    except pymysql.err.MySQLError as exc:
        raise explain(exc, database, SIGNAL, user, "write a request to") from None
