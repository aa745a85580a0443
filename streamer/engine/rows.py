"""process_event: one binlog row event -> (topic, key, value) messages, one per row change.

This is the hot path. Everything per table was prepared in ``tables.TableVersion``; here we only
convert values in place and encode each row into an envelope whose other fields were encoded
once for the event.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from streamer.codec.avro import OP_BYTES
from streamer.engine.tracker import Tracker
from streamer.schema.versions import TableVersion

Produce = Callable[[str, bytes, Optional[bytes]], None]
OP_CREATE = OP_BYTES["c"]
OP_DELETE = OP_BYTES["d"]


def process_event(event: Any, op: str, tv: TableVersion, tracker: Tracker, produce: Produce) -> int:
    """Publish the row changes of one rows event; returns how many messages were produced."""
    rows = event.rows
    packet = event.packet
    write = tv.envelope.encode
    # Everything in the envelope but before/after, op and the row indexes, encoded once.
    mid, txid = tv.envelope.event_parts(
        event.timestamp * 1000, packet.server_id, tracker.file,
        packet.log_pos - packet.event_size, tracker.gtid, tv.db, tv.table, tracker.txid)
    op_bytes = OP_BYTES[op]
    convert = tv.convert
    topic = tv.topic
    skip = tracker.skip
    sent = 0
    for i, row in enumerate(rows):
        tracker.tx_rows += 1
        if tracker.tx_rows <= skip:
            continue
        tx_row = tracker.tx_rows - 1
        if op == "u":
            before = row["before_values"]
            after = row["after_values"]
            convert(before, row.get("before_none_sources"))
            convert(after, row.get("after_none_sources"))
            key = tv.key(after)
            if tv.key_writer is not None and any(before[n] != after[n] for n in tv.pk_names):
                # A primary-key change is a delete of the old key and a create of the new one,
                # so each key's own history stays complete and in order.
                produce(topic, write(before, None, OP_DELETE, mid, i, txid, tx_row), tv.key(before))
                produce(topic, write(None, after, OP_CREATE, mid, i, txid, tx_row), key)
                sent += 2
                continue
            value = write(before, after, op_bytes, mid, i, txid, tx_row)
        else:
            values = row["values"]
            convert(values, row.get("none_sources"))
            key = tv.key(values)
            if op == "c":
                value = write(None, values, op_bytes, mid, i, txid, tx_row)
            else:
                value = write(values, None, op_bytes, mid, i, txid, tx_row)
        produce(topic, value, key)
        sent += 1
    return sent
