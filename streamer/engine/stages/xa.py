"""The XA stage: a prepared XA transaction's rows are published at its XA COMMIT, never at a rollback.

A two-phase XA transaction is written to the binlog when it is prepared (its rows, in a group
that ends with an XA_prepare event), and its outcome comes later, in a group of its own, with
other transactions in between. Its rows take effect at the XA COMMIT, so that is where they go in
the topics' order: the prepare group is read again from the binlog (``reread``) and its rows are
published through the rows stage, with their own places in the binlog, their own GTID and txid.
Until then the tracker keeps the group's place in the checkpoint (``Position.xa``).

A large XA transaction is published over several batches, like any large transaction: the
checkpoint between them keeps how many of its row changes are out (the entry's fifth field), and
a restart skips them. MySQL's ``XA COMMIT ... ONE PHASE`` is an XA group whose XA_prepare event
says one_phase: published at once.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Dict, List

from pymysqlreplication.event import QueryEvent, XAPrepareEvent
from pymysqlreplication.row_event import TableMapEvent

from streamer.engine.rows import OPS
from streamer.engine.tracker import Tracker
from streamer.errors import UnsupportedEvent
from streamer.position import Position
from streamer.source import events, rowcount

log = logging.getLogger(__name__)


class Xa:
    def __init__(self, ctx: Any, rows: Any, reread: Callable[[Position], Any]) -> None:
        self.ctx = ctx
        self.rows = rows
        self.tracker = ctx.tracker
        self.reread = reread

    def handlers(self) -> Dict[Any, Callable[[Any], int]]:
        return {XAPrepareEvent: self.on_prepare, QueryEvent: self.on_query}

    def on_prepare(self, event: Any) -> int:
        tracker = self.tracker
        if not (event.one_phase and tracker.xa):  # a prepare: the tracker keeps it pending
            return 0
        # MySQL's XA COMMIT ... ONE PHASE: committed with its prepare group, published now. Its
        # entry is pending while it is, so that a batch cut inside it is resumed, not repeated.
        xid = events.xa_id(event.xid_format_id, event.xid_gtrid, event.xid_bqual)
        entry = tracker.xa_pending.setdefault(
            xid, [tracker.file, tracker.tx_start, tracker.gtid or "", tracker.txid])
        sent = self.publish(entry, event.timestamp * 1000)
        del tracker.xa_pending[xid]
        return sent

    def on_query(self, event: Any) -> int:
        query = event.query
        if query[:3] != "XA " and query[:3] != "xa ":
            return 0
        outcome = events.xa_outcome(query)
        if outcome is None:
            return 0
        kind, xid = outcome
        tracker = self.tracker
        if kind == "ROLLBACK":
            tracker.xa_pending.pop(xid, None)
            return 0
        entry = tracker.xa_pending.get(xid)
        if entry is None:
            packet = event.packet
            raise UnsupportedEvent(
                f"XA COMMIT of {xid} at {tracker.file}:{packet.log_pos - packet.event_size}: the "
                f"XA PREPARE of that transaction came before the position this stream started "
                f"from, so its rows were never read, and publishing nothing would lose them. "
                f"Restart once from a position before its XA PREPARE (streamer run --start-file/"
                f"--start-pos); the transactions between that position and this one are then "
                f"published again")
        sent = self.publish(entry, event.timestamp * 1000)
        # Out: a checkpoint from here on no longer carries it.
        tracker.xa_pending.pop(xid, None)
        return sent

    def publish(self, entry: List[Any], ts_ms: int) -> int:
        """Publish the rows of the prepared XA transaction whose group ``entry`` names (file,
        offset, GTID, txid and, after a restart, the row changes already published), read
        again from there; the messages produced since the last cut."""
        file, pos, gtid, txid = entry[:4]
        done = int(entry[4]) if len(entry) > 4 else 0
        sub = Tracker(Position(file, pos, rows=done))
        sub.begin(pos, gtid or None)
        sub.txid = txid
        ctx = self.ctx
        policy = ctx.policy
        by_id = ctx.tables.by_id
        sent = 0
        ctx.open()
        with self.reread(Position(file, pos)) as reader:
            for event in reader:
                cls = event.__class__
                op = OPS.get(cls)
                if op is not None:
                    tv = by_id.get(event.table_id)
                    if tv is None:
                        sub.count(rowcount.rows_in(event))
                        continue
                    sent += self.rows.publish(event, op, tv, sub)
                    if policy.full(sent):
                        # A batch cut inside the XA transaction: the checkpoint says how many
                        # of its row changes are out.
                        entry[4:] = [sub.tx_rows]
                        policy.cut(sent)
                        sent = 0
                        ctx.open()
                elif cls is TableMapEvent:
                    tv = ctx.tables.on_table_map(event)
                    if tv is not None:
                        ctx.announce.table(tv)
                elif cls is XAPrepareEvent:
                    break
        sent += ctx.transaction_ended(txid, ts_ms)
        log.info("XA transaction of the group at %s:%d committed: %d row changes published",
                 file, pos, sub.tx_rows - done)
        return sent
