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
import re
from typing import Any, Callable, Optional, Tuple

from .position import Tracker
from .tables import TableRegistry, TableVersion

log = logging.getLogger(__name__)

_IDENT = r"(?:`((?:[^`]|``)+)`|([^\s`.;]+))"
_TRUNCATE = re.compile(
    r"^\s*(?:/\*.*?\*/\s*)*TRUNCATE\s+(?:TABLE\s+)?" + _IDENT + r"(?:\s*\.\s*" + _IDENT + r")?"
    r"\s*;?\s*$", re.IGNORECASE | re.DOTALL)


def _ident(quoted: Optional[str], bare: Optional[str]) -> str:
    return quoted.replace("``", "`") if quoted is not None else str(bare)


def truncated_table(query: str, current_db: str) -> Optional[Tuple[str, str]]:
    """(db, table) of a TRUNCATE statement, or None for any other statement."""
    if "truncate" not in query[:200].lower():
        return None
    m = _TRUNCATE.match(query)
    if m is None:
        return None
    first = _ident(m.group(1), m.group(2))
    if m.group(3) is None and m.group(4) is None:
        return current_db, first
    return first, _ident(m.group(3), m.group(4))


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
