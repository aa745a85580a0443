"""The heartbeat stage: the heartbeat table's rows measure latency and are never published.

The heartbeat writer (ops.heartbeat) writes a µs timestamp into its table every few hundred ms.
When the row comes back through the binlog, the metrics take the true commit-to-read latency from
it, and the batch that holds it commits within the linger like a change, so the latency measured
is the one a change would see, and the lag stays alive while published tables are idle.
"""
from __future__ import annotations

from typing import Any

from streamer.ops.heartbeat import COLUMN, TABLE


class Heartbeat:
    def __init__(self, ctx: Any, tables: Any) -> None:
        self.metrics = ctx.metrics
        self.policy = ctx.policy
        tables.claim(ctx.metrics.heartbeat_db, TABLE, self.on_rows)

    def handlers(self) -> dict:
        return {}

    def on_rows(self, event: Any, skip: int) -> int:
        self.metrics.on_heartbeat(beat_of(event))
        self.policy.heartbeat()
        return 0


def beat_of(event: Any) -> int:
    """The µs timestamp a heartbeat rows event carries (its last row)."""
    row = event.rows[-1]
    return int((row.get("after_values") or row["values"])[COLUMN])
