"""The table-map stage: each table map maps a table id to its table version.

A published table's version is announced (its topic, its writer schemas) whenever its current
version changes. A table some other stage speaks through (the heartbeat, the snapshot's tables)
is handed to that stage's rows handler by name (``Rows.claim``).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Tuple

from pymysqlreplication.row_event import TableMapEvent


class TableMaps:
    def __init__(self, ctx: Any, rows: Any) -> None:
        self.ctx = ctx
        self.rows = rows
        self.on_table_map = ctx.tables.on_table_map
        # (db, table) -> the rows handler of the stage that speaks through that table.
        self.claims: Dict[Tuple[str, str], Callable[[Any, int], int]] = {}

    def handlers(self) -> Dict[Any, Callable[[Any], int]]:
        return {TableMapEvent: self.on_event}

    def claim(self, db: str, table: str, handler: Callable[[Any, int], int]) -> None:
        self.claims[(db, table)] = handler

    def on_event(self, event: Any) -> int:
        tv = self.on_table_map(event)
        if tv is not None:
            self.ctx.announce.table(tv)
        if self.claims:
            handler = self.claims.get((event.schema, event.table))
            if handler is not None:
                self.rows.claim(event.schema, event.table, event.table_id, handler)
        return 0
