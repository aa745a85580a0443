"""process_event: one binlog row event -> (topic, key, value) messages, one per row change.

This is the hot path. Everything per table was prepared in ``tables.TableVersion``; here we only
convert values in place, fill two reused dicts and encode.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from .position import Tracker
from .tables import TableVersion

Produce = Callable[[str, bytes, Optional[bytes]], None]


def process_event(event: Any, op: str, tv: TableVersion, tracker: Tracker, produce: Produce) -> int:
    """Publish the row changes of one rows event; returns how many messages were produced."""
    rows = event.rows
    packet = event.packet
    gtid = tracker.gtid
    source = {"server_id": packet.server_id, "file": tracker.file,
              "pos": packet.log_pos - packet.event_size,
              "gtid": None if gtid is None else ("string", gtid),
              "db": tv.db, "table": tv.table, "row": 0, "txid": tracker.txid, "tx_row": 0}
    envelope = {"before": None, "after": None, "op": op, "ts_ms": event.timestamp * 1000,
                "source": source}
    encode = tv.value_writer.encode
    convert = tv.convert
    row_name = tv.row_name
    topic = tv.topic
    skip = tracker.skip
    sent = 0
    for i, row in enumerate(rows):
        tracker.tx_rows += 1
        if tracker.tx_rows <= skip:
            continue
        source["row"] = i
        source["tx_row"] = tracker.tx_rows - 1
        if op == "u":
            before = row["before_values"]
            after = row["after_values"]
            convert(before, row.get("before_none_sources"))
            convert(after, row.get("after_none_sources"))
            key = tv.key(after)
            if tv.key_writer is not None and any(before[n] != after[n] for n in tv.pk_names):
                # A primary-key change is a delete of the old key and a create of the new one,
                # so each key's own history stays complete and in order.
                envelope["op"] = "d"
                envelope["before"] = (row_name, before)
                envelope["after"] = None
                produce(topic, encode(envelope), tv.key(before))
                envelope["op"] = "c"
                envelope["before"] = None
                envelope["after"] = (row_name, after)
                produce(topic, encode(envelope), key)
                envelope["op"] = op
                sent += 2
                continue
            envelope["before"] = (row_name, before)
            envelope["after"] = (row_name, after)
        else:
            values = row["values"]
            convert(values, row.get("none_sources"))
            key = tv.key(values)
            if op == "c":
                envelope["after"] = (row_name, values)
            else:
                envelope["before"] = (row_name, values)
        produce(topic, encode(envelope), key)
        sent += 1
    return sent
