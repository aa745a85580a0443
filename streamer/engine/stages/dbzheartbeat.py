"""Debezium's heartbeats (format debezium, ``debezium.heartbeat_interval_ms``): a record in the
heartbeat topic once per interval, as Debezium's connector writes one.

Debezium's consumers watch that topic to tell a connector that has nothing to publish from one
that has stopped, and its heartbeats move the connector's offsets while the captured tables are
quiet. Here the checkpoint moves on its own (idle checkpoints); the record is for the consumers.
It is written at a transaction's end or when the reader is caught up, once the interval has
passed since the last one, in the open batch like any message, so it is exactly-once too.
"""
from __future__ import annotations

from typing import Any, Dict


class DebeziumHeartbeats:
    def __init__(self, ctx: Any, records: Any, interval_s: float) -> None:
        self.ctx = ctx
        self.records = records
        self.interval_s = interval_s
        self.last = None  # the monotonic time of the last one written
        self.announced = False
        ctx.policy.caught_up_hooks.append(self.due)

    def handlers(self) -> Dict[Any, Any]:
        return {}

    def tx_end_hooks(self) -> list:
        return [self.due]

    def due(self) -> int:
        """Write a heartbeat if the interval has passed; the messages produced."""
        ctx = self.ctx
        now = ctx.clock.monotonic()
        if self.last is not None and now - self.last < self.interval_s:
            return 0
        records = self.records
        if not self.announced:
            ctx.announce.side_topic(records.topic, records.writer, records.key_writer,
                                    "heartbeat")
            self.announced = True
        ctx.open()
        key, value = records.encode(int(ctx.clock.time() * 1000))
        ctx.produce(records.topic, value, key)
        self.last = now
        return 1
