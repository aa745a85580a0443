"""The loop over one binlog connection: each event to its stage, then to the commit policy.

Every stage registers a handler per event class (``handlers()``) and may act at a transaction's
end (``tx_end_hooks()``). A rows event goes to the rows stage first, in a branch of its own: it
is most of the stream, and PyPy's JIT specialises a branch that always calls the same function.
Any other event goes to its class's handlers; an event class no stage registered is refused
(``source.events.refuse``: it stops the stream, naming the event, unless the event carries no
change). The tracker then follows it, and the commit policy decides whether the batch commits.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List

from streamer.engine.commit import StoppedInsideEvent
from streamer.engine.rows import OPS
from streamer.engine.stages.savepoints import looked_ahead
from streamer.source import events

Handler = Callable[[Any], int]


def _ignore(event: Any) -> int:
    return 0


def _chain(fns: List[Handler]) -> Handler:
    if len(fns) == 1:
        return fns[0]

    def chained(event: Any) -> int:
        sent = 0
        for fn in fns:
            sent += fn(event)
        return sent
    return chained


class Pipeline:
    """``rows`` is the rows stage; ``stages`` the others, in the order their handlers run."""

    def __init__(self, ctx: Any, rows: Any, stages: List[Any]) -> None:
        self.ctx = ctx
        self.rows = rows
        self.stages = stages
        self.tracker = ctx.tracker
        self.policy = ctx.policy
        by_class: Dict[Any, List[Handler]] = {cls: [_ignore] for cls in events.FOLLOWED
                                              if cls not in OPS}
        tx_end: List[Callable[[], int]] = []
        for stage in stages:
            for cls, fn in stage.handlers().items():
                found = by_class.setdefault(cls, [])
                if found == [_ignore]:
                    found.clear()
                found.append(fn)
            tx_end.extend(getattr(stage, "tx_end_hooks", list)())
        self.handlers = {cls: _chain(fns) for cls, fns in by_class.items()}
        self.tx_end = tx_end
        self.refuse = self._refuse

    def _refuse(self, event: Any) -> int:
        events.refuse(event, self.tracker.file)  # raises, unless the event carries no change
        return 0

    def stream(self, reader: Any) -> None:
        """Publish what ``reader`` yields until the commit policy says stop (or it ends)."""
        try:
            self._loop(looked_ahead(reader))
        except StoppedInsideEvent:
            pass  # a stop at a batch cut inside an event; its checkpoint says where

    def _loop(self, reader: Any) -> None:
        ops = OPS
        on_rows = self.rows.on_rows
        handlers = self.handlers
        refuse = self.refuse
        follow = self.tracker.on_event
        policy = self.policy
        after = policy.after
        for event in reader:
            cls = event.__class__
            op = ops.get(cls)
            if op is not None:
                policy.last_ts = event.timestamp
                if after(cls, on_rows(event, op), False):
                    return
                continue
            sent = handlers.get(cls, refuse)(event)
            tx_end = follow(event, cls)
            if tx_end:
                sent += self.end_transaction(event)
            if after(cls, sent, tx_end):
                return

    def end_transaction(self, event: Any) -> int:
        """A transaction ended with ``event``: the stages' hooks; the messages they produced."""
        ctx = self.ctx
        sent = ctx.transaction_ended(self.tracker.txid, event.timestamp * 1000) \
            if ctx.ended else 0
        for hook in self.tx_end:
            sent += hook()
        return sent
