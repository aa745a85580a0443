"""The rows stage: a rows event of a published table becomes one message per row change.

This is the pipeline's first and hottest branch. A published table's rows are decoded through its
version's plan and published (``engine.rows.process_event``); every other table's rows are only
counted (``source.rowcount``), so that a resume inside a transaction skips the right ones. A few
unpublished tables speak to the streamer (the heartbeat, the snapshot's watermarks and requests):
their stage claims them by name (``claim``), and their rows go to it, decoded.

The rows of an XA transaction's prepare group are counted and held back: they are published at
its XA COMMIT (``stages.xa``), through ``publish`` here, like any other rows.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Tuple

from streamer.engine.rows import process_event, process_one_row_event
from streamer.source import rowcount

# (rows event, rows of it already published by the previous run) -> messages produced
Claimant = Callable[[Any, int], int]


class Rows:
    __slots__ = ("ctx", "by_id", "tracker", "produce", "on_metrics", "claimed", "claimed_ids")

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.by_id = ctx.tables.by_id
        self.tracker = ctx.tracker
        self.produce = ctx.produce
        self.on_metrics = ctx.metrics.on_rows
        # Claimed tables: table id -> its stage's handler, and (db, table) -> the id in use.
        self.claimed: Dict[int, Claimant] = {}
        self.claimed_ids: Dict[Tuple[str, str], int] = {}

    def on_rows(self, event: Any, op: str) -> int:
        """A rows event read from the stream; the messages it produced."""
        tv = self.by_id.get(event.table_id)
        if tv is not None and not self.tracker.xa:
            sent = self.publish(event, op, tv, self.tracker)
            self.on_metrics(event.timestamp, len(event.rows))
            return sent
        handler = self.claimed.get(event.table_id)
        if handler is None:
            # An unpublished table's rows are counted, never decoded (source.rowcount); so are a
            # prepared XA transaction's, published at its XA COMMIT.
            self.tracker.count(rowcount.rows_in(event))
            return 0
        return handler(event, self.tracker.count(len(event.rows)))

    def publish(self, event: Any, op: str, tv: Any, tracker: Any) -> int:
        """Publish a rows event of table version ``tv`` as ``tracker`` places it; the messages
        produced, those of the ``published`` hooks included."""
        ctx = self.ctx
        ctx.open()
        if len(event.rows) == 1:
            sent = process_one_row_event(event, op, tv.one_row(), tracker, self.produce)
        else:
            sent = process_event(event, op, tv, tracker, self.produce)
        if ctx.published:
            sent += ctx.after_publishing(tracker, tv.topic, sent, event.timestamp * 1000)
        for hook in ctx.changes:
            hook(tv, event, op)
        return sent

    def claim(self, db: str, table: str, table_id: int, handler: Claimant) -> None:
        """Rows of table id ``table_id`` (the table ``db.table``) go to ``handler``. The server
        gives a table a new id when it reopens it: only the latest is kept."""
        old = self.claimed_ids.get((db, table))
        if old == table_id:
            return
        if old is not None:
            del self.claimed[old]
        self.claimed_ids[(db, table)] = table_id
        self.claimed[table_id] = handler
