"""The transaction-metadata stage (``topics.transactions``): BEGIN and END records per source
transaction, written by ``engine.txmeta.TransactionLog``.

It listens: after messages of a source transaction were published (the ``published`` hook) it
writes the transaction's BEGIN with its first ones and counts them; when the transaction's
messages are all out (the ``ended`` hook: its commit event, or a prepared XA transaction's rows
at its XA COMMIT) it writes the END. Its counts ride in the checkpoint (``Position.transaction``).
"""
from __future__ import annotations

from typing import Any, Dict

from streamer.position import Position


class TxMeta:
    def __init__(self, ctx: Any, log: Any) -> None:
        self.ctx = ctx
        self.log = log
        # A checkpoint carries the open transaction's counts only from inside it (and those of
        # any it awaits: Position.awaited). The tracker hands them back as the transaction
        # begins again, by file or wherever a resume by GTID set finds it, with the id its
        # BEGIN went out with.
        log.reset(None)
        ctx.tracker.on_resumed = log.resume
        log.announce = lambda: ctx.announce.transactions(log.topic, log.writer,
                                                         log.records.key_writer)
        ctx.published.append(self.on_published)
        ctx.ended.append(self.on_ended)
        ctx.policy.checkpoint_parts.append(self.checkpoint)

    def handlers(self) -> Dict[Any, Any]:
        return {}

    def on_published(self, tracker: Any, topic: str, n: int, ts_ms: int) -> int:
        return self.log.on_published(tracker, topic, n, ts_ms, self.ctx.produce)

    def on_ended(self, txid: str, ts_ms: int) -> int:
        if self.log.open is None:
            return 0
        self.ctx.open()  # a batch may have been cut right after the transaction's last rows
        return self.log.on_end(txid, ts_ms, self.ctx.produce)

    def checkpoint(self, position: Position) -> None:
        if self.ctx.tracker.in_tx:
            position.transaction = self.log.progress()
