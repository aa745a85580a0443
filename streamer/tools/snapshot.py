"""``streamer snapshot``: ask a streamer, running or stopped, to snapshot some tables.

The request is a row in the source's request table (``source.signals``); the streamer reads it
where the binlog has it. Everything a request could get wrong is checked here first, against the
same server, so that a bad request fails at once, on the command line, naming its fix.
"""
from __future__ import annotations

import sys
import time
from typing import Any, Callable, Dict, List, Optional

import pymysql

from streamer.config import Config
from streamer import config as config_mod
from streamer.errors import EndpointUnavailable, SnapshotRefused
from streamer.schema.versions import TableFilter
from streamer.source import chunks, server, signals
from streamer.source import condition as where


def check(conn: Any, cfg: Config, tables: List[str], condition: Optional[str]) -> None:
    """Refuse, naming the fix, a table that isn't streamed, doesn't exist or has no key to chunk
    by, and a condition that is more than a condition on each table's columns
    (source.condition) or that the server doesn't accept, in the session the streamer reads
    chunks in (UTC, backslash escapes: source.chunks.session)."""
    streamed = TableFilter.streamed(cfg)
    chunks.session(conn)
    for name in tables:
        db, dot, table = name.partition(".")
        if not dot or not db or not table:
            raise SnapshotRefused(f"{name!r} is not a table name; write it as db.table")
        if not streamed(db, table):
            raise SnapshotRefused(f"table {name} is not streamed by this config (tables.include "
                                  f"{cfg.tables.include}, tables.exclude "
                                  f"{cfg.tables.exclude}); include it, restart the "
                                  f"streamer, then ask again")
        described = chunks.describe(conn, db, table)
        if described is None:
            raise SnapshotRefused(f"table {name} does not exist on "
                                  f"{cfg.mysql.host}:{cfg.mysql.port}")
        if condition:
            try:
                where.check(condition, [c.name for c in described.columns])
            except ValueError as exc:
                raise SnapshotRefused(f"--where {condition!r} is refused for {name}: {exc}; give "
                                      f"a condition on the table's own columns") from None
            try:
                with conn.cursor() as cur:
                    cur.execute(f"SELECT 1 FROM {chunks.quote(db)}.{chunks.quote(table)} "
                                f"WHERE ({condition}) LIMIT 0")
            except pymysql.err.MySQLError as exc:
                raise SnapshotRefused(f"the server refuses --where {condition!r} on {name}: "
                                      f"{exc.args[-1]}") from None


def request(cfg: Config, tables: List[str], condition: Optional[str]) -> int:
    """Check the request and write it; the request's id."""
    conn = server.connect(server.connection_settings(cfg, config_mod.mysql_password(cfg)))
    try:
        check(conn, cfg, tables, condition)
        return signals.insert_request(conn, cfg.snapshot.database,
                                      signals.streamer_name(cfg), tables, condition, cfg.mysql.user)
    finally:
        conn.close()


def follow(cfg: Config, request_id: int, tables: int, interval: float = 2.0,
           fetch: Optional[Callable[[], Dict[str, Any]]] = None, out: Any = None) -> int:
    """Show the running streamer's snapshot progress (its /status) until the request's ``tables``
    have ended: on a terminal a progress bar per table (rows of the estimate, rate, ETA), else a
    plain line every ``interval`` seconds."""
    from streamer.ops.httpstatus import fetch_status
    from streamer.ops.metrics import snapshot_line

    out = out if out is not None else sys.stdout
    fetch = fetch if fetch is not None else (lambda: fetch_status(cfg))
    bar = Bars(out) if out.isatty() else None
    baseline: Optional[int] = None
    try:
        while True:
            try:
                snap = fetch().get("snapshot") or {"tables_done": 0, "tables_left": 0}
            except EndpointUnavailable as exc:
                print(f"streamer: {exc}", file=sys.stderr)
                return 1
            if baseline is None:
                # Tables ended before this request: the ones queued ahead of it end first.
                baseline = snap["tables_done"]
            if snap["tables_left"]:
                if bar is not None:
                    bar.show(snap)
                else:
                    print(snapshot_line(snap), file=out, flush=True)
            elif snap["tables_done"] >= baseline + tables:
                if bar is not None:
                    bar.close()
                print(f"request {request_id}: done, {snap['tables_done']} tables and "
                      f"{snap.get('rows', 0)} rows snapshotted so far", file=out, flush=True)
                return 0
            time.sleep(interval)
    finally:
        if bar is not None:
            bar.close()


class Bars:
    """One tqdm bar per table, in turn. (tqdm is imported only here: ~80 ms of a PyPy start.)"""

    def __init__(self, out: Any) -> None:
        self.out = out
        self.table: Optional[str] = None
        self.bar: Any = None

    def show(self, snap: Dict[str, Any]) -> None:
        from tqdm import tqdm

        if snap["table"] != self.table:
            self.close()
            self.table = snap["table"]
            self.bar = tqdm(total=max(snap["table_estimate"], snap["table_rows"]), unit="rows",
                            unit_scale=True, desc=self.table, file=self.out, dynamic_ncols=True,
                            postfix=f"{snap['tables_left'] - 1} tables after it")
        bar = self.bar
        if snap["table_rows"] > bar.total:  # the estimate was low: the count is what it is
            bar.total = snap["table_rows"]
        bar.update(snap["table_rows"] - bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
            self.table = None
