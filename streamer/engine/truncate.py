"""The one DDL statement the streamer publishes: TRUNCATE TABLE, as an envelope with op ``t``.

Every other DDL needs no parsing: ALTER, RENAME and CREATE show up as new columns in the next
table-map event (``tables``), and DROP TABLE publishes nothing (the table's rows were not
deleted one by one, and no row event follows). A TRUNCATE is one statement with no row events, so
it is recognised from the query text. Its message has ``before`` and ``after`` null, no key, and
the writer schema of the table's current version; a table with no row event since the start of
the run has no known version yet, so its TRUNCATE is logged and not published.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Optional

from streamer.engine.tracker import Tracker
from streamer.schema.versions import TableRegistry, TableVersion
from streamer.source.truncate import truncated_table

log = logging.getLogger(__name__)


def truncated_version(event: Any, tables: TableRegistry) -> Optional[TableVersion]:
    """The current version of the table a TRUNCATE query event empties, when it is published."""
    schema = event.schema
    db = schema.decode("utf-8") if isinstance(schema, bytes) else schema
    target = truncated_table(event.query, db)
    if target is None or not tables.filter(*target):
        return None
    tv = tables.current.get(target)
    if tv is None:
        log.info("TRUNCATE of %s.%s not published: no row change of it seen since the start of "
                 "this run, so its schema is unknown", *target)
    return tv


def publish_truncate(event: Any, tv: TableVersion, tracker: Tracker,
                     produce: Callable[[str, bytes, Optional[bytes]], None]) -> int:
    """Produce the op ``t`` message; returns how many messages were produced (0 on a re-read)."""
    tracker.tx_rows += 1
    if tracker.tx_rows <= tracker.skip:
        return 0
    packet = event.packet
    gtid = tracker.gtid
    source = {"server_id": packet.server_id, "file": tracker.file,
              "pos": packet.log_pos - packet.event_size,
              "gtid": None if gtid is None else ("string", gtid),
              "db": tv.db, "table": tv.table, "row": 0, "txid": tracker.txid,
              "tx_row": tracker.tx_rows - 1}
    envelope = {"before": None, "after": None, "op": "t", "ts_ms": event.timestamp * 1000,
                "source": source}
    produce(tv.topic, tv.value_writer.encode(envelope), None)
    return 1
