"""The statements stage: query events other than BEGIN and COMMIT.

DDL needs no parsing: a changed table shows up in its next table map. Two kinds of statement
matter here: row changes that a session logged as a statement, in a published table, which are
refused (``source.events``), and TRUNCATE TABLE, the one DDL published, as op ``t``
(``engine.rows.publish_truncate``).
"""
from __future__ import annotations

from typing import Any, Callable, Dict

from pymysqlreplication.event import QueryEvent

from streamer.engine.rows import publish_truncate, truncated_version
from streamer.source import events


class Statements:
    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.tracker = ctx.tracker
        self.tables = ctx.tables

    def handlers(self) -> Dict[Any, Callable[[Any], int]]:
        return {QueryEvent: self.on_query}

    def on_query(self, event: Any) -> int:
        query = event.query
        if query == "BEGIN" or query == "COMMIT":
            return 0
        tracker = self.tracker
        events.refuse_statement(event, tracker.file, self.tables.filter)
        self.tables.on_statement(query)
        tv = truncated_version(event, self.tables)
        if tv is None:
            return 0
        ctx = self.ctx
        # Its version's schema goes out first when no table map of this stream announced it
        # (that announcement may have been in an aborted batch).
        ctx.announce_current(tv)
        ctx.open()
        sent = publish_truncate(event, tv, tracker, ctx.everywhere)
        if ctx.published:
            sent += ctx.after_publishing(tracker, tv.topic, sent, event.timestamp * 1000)
        return sent
