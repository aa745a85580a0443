"""Row changes to messages: ``process_event`` for a rows event, ``publish_truncate`` for TRUNCATE.

This is the hot path. Everything per table was prepared in ``schema.versions.TableVersion``; here we
only convert values in place and encode each row into an envelope whose other fields were encoded
once for the event.

TRUNCATE TABLE is the one DDL statement published, as an envelope with op ``t``. Every other DDL
needs no parsing: ALTER, RENAME and CREATE show up as new columns in the next table-map event, and
DROP TABLE publishes nothing (the table's rows were not deleted one by one, and no row event
follows). A TRUNCATE is one statement with no row events, so it is recognised from the query text
(``source.truncate``). Its message has ``before`` and ``after`` null, no key, and the writer schema
of the table's current version. A table with no row event since the stream (re)started uses its
last version: the one before the reconnect, else its topic's last value schema in the schema
topic, so a TRUNCATE re-read after a crash or an aborted batch is published like the first time.
Only a table that never had a message in the namespace has its TRUNCATE logged and not published.
"""
from __future__ import annotations

import logging
import types
from typing import Any, Callable, Optional, Tuple

from pymysqlreplication.row_event import (DeleteRowsEvent, PartialUpdateRowsEvent,
                                          UpdateRowsEvent, WriteRowsEvent)

from streamer.codec.avro import OP_BYTES
from streamer.engine.tracker import Tracker
from streamer.errors import UnsupportedEvent
from streamer.schema.versions import TableCatalog, TableVersion
from streamer.source import jsondiff
from streamer.source.temporary import used_temporary
from streamer.source.truncate import truncated_table

log = logging.getLogger(__name__)

# (topic, value, key, headers): headers are None, or the message's (name, value) pairs.
Produce = Callable[[str, Optional[bytes], Optional[bytes], Any], None]
# The rows event classes and the op of their changes.
OPS = {WriteRowsEvent: "c", UpdateRowsEvent: "u", DeleteRowsEvent: "d",
       PartialUpdateRowsEvent: "u"}
OP_CREATE = OP_BYTES["c"]
OP_UPDATE = OP_BYTES["u"]
OP_DELETE = OP_BYTES["d"]


def process_event(event: Any, op: str, tv: TableVersion, tracker: Tracker, produce: Produce) -> int:
    """Publish the row changes of one rows event; returns how many messages were produced."""
    rows = event.rows
    n = len(rows)
    skip = tracker.count(n)
    if skip == n:
        return 0
    if event.__class__ is PartialUpdateRowsEvent:
        jsondiff.resolve(rows)  # MySQL's partial JSON updates: the diffs applied
    base = tracker.tx_rows - n  # the transaction's index of this event's first row change
    packet = event.packet
    write = tv.envelope.encode
    # Everything in the envelope but before/after, op and the row indexes, encoded once.
    mid, txid = tv.envelope.event_parts(
        event.timestamp * 1000, packet.server_id, tracker.file,
        packet.log_pos - packet.event_size, tracker.gtid, tv.db, tv.table, tracker.txid)
    convert = tv.convert
    topic = tv.topic
    headers = tv.headers  # by op: its messages' Kafka headers (topics.headers), or None each
    created, updated, deleted = headers["c"], headers["u"], headers["d"]
    holes = tracker.holes  # rows a ROLLBACK TO SAVEPOINT took back (stages.savepoints)
    versioning = tv.versioning  # a system-versioned table's history is no change of its own
    sent = 0
    for i in range(skip, n):
        row = rows[i]
        tx_row = base + i
        if holes is not None and in_holes(holes, tx_row):
            continue
        row_op = op
        if versioning is not None:
            row_op, row = versioning(op, row)
            if row_op is None:
                continue
        if row_op == "u":
            before = row["before_values"]
            after = row["after_values"]
            convert(before, row.get("before_none_sources"))
            convert(after, row.get("after_none_sources"))
            key = tv.key(after)
            if tv.key_writer is not None and any(before[k] != after[k] for k in tv.pk_names):
                sent += _key_change(tv, produce, before, after, key, mid, i, txid, tx_row)
                continue
            produce(topic, write(before, after, OP_UPDATE, mid, i, txid, tx_row), key, updated)
        else:
            values = row["values"]
            convert(values, row.get("none_sources"))
            key = tv.key(values)
            if row_op == "c":
                produce(topic, write(None, values, OP_CREATE, mid, i, txid, tx_row), key, created)
            else:
                produce(topic, write(values, None, OP_DELETE, mid, i, txid, tx_row), key,
                        deleted)
                if tv.tombstones:
                    # Right behind its delete, in the same transaction: compaction may then
                    # forget the key (README, "Tombstones and compaction").
                    produce(topic, None, key, deleted)
                    sent += 1
        sent += 1
    return sent


def _own_code(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``fn`` under a code object of its own, the same bytecode: PyPy's JIT keys what it compiles,
    and its hints, by code object."""
    return types.FunctionType(fn.__code__.replace(co_name=name), fn.__globals__, name,
                              fn.__defaults__, fn.__closure__)


# process_event for the events of one row change (an OLTP stream's, a live load's), which the JIT
# compiles on its own (cli._tune_jit), not inlined into the binlog loop: a row change is
# published by code of its table's own (its converters and generated Avro writers), and a table
# the warm-up never saw failed a guard there. Inlined, its bridge held the rest of the loop's
# iteration, compiled while the first changes after a restart waited; here it ends where the
# function returns. Events of many rows (a bulk catch-up's) keep process_event inlined: compiled
# on its own, it cost their rows 6-12 % in the engine bench (docs/benchmarks.md, "A table's own
# code compiled apart from the loop"). Its table version is ``TableVersion.one_row()``, whose
# writers are compiled on their own too (schema.versions.OneRowVersion).
process_one_row_event = _own_code(process_event, "process_one_row_event")


def _key_change(tv: TableVersion, produce: Produce, before: Any, after: Any, key: Any,
                mid: Any, i: int, txid: Any, tx_row: int) -> int:
    """A primary-key change: a delete of the old key (and its tombstone) and a create of the
    new one, so each key's own history stays complete and in order. Returns the messages."""
    write = tv.envelope.encode
    headers = tv.headers
    old = tv.key(before)
    produce(tv.topic, write(before, None, OP_DELETE, mid, i, txid, tx_row), old, headers["d"])
    sent = 2
    if tv.tombstones:
        produce(tv.topic, None, old, headers["d"])
        sent += 1
    produce(tv.topic, write(None, after, OP_CREATE, mid, i, txid, tx_row), key, headers["c"])
    return sent


def in_holes(holes: Any, tx_row: int) -> bool:
    for start, end in holes:
        if start <= tx_row < end:
            return True
    return False


def truncated_version(event: Any, tables: TableCatalog,
                      target: Optional[Tuple[str, str]] = None) -> Optional[Any]:
    """The version to publish the TRUNCATE a query event makes with (or the table ``target``
    it empties otherwise, source.dml.emptied): the table's current one, else its last
    (``TableCatalog.last_version``); None when it isn't published."""
    if target is None:
        schema = event.schema
        target = truncated_table(event.query,
                                 schema.decode("utf-8") if isinstance(schema, bytes) else schema)
    # A TRUNCATE that used a temporary table of its session (a statement-logging session's,
    # source.temporary) emptied that one: it names no other.
    if target is None or used_temporary(event) or not tables.filter(*target):
        return None
    tv = tables.last_version(*target)
    if tv is None:
        # No message of the table was ever published in this namespace: no consumer holds a
        # row of it to remove.
        log.info("TRUNCATE of %s.%s not published: the table never had a message in this "
                 "namespace (no schema of its topic), so there is nothing to remove", *target,
                 extra={"table": "%s.%s" % target})
    return tv


def publish_truncate(event: Any, tv: TableVersion, tracker: Tracker,
                     produce_everywhere: Callable[[str, bytes, Any], int]) -> int:
    """Produce the op ``t`` message, once in each of the topic's partitions (keyless, it would
    land in one, and consumers of the others would apply it after later inserts); returns how
    many messages were produced (0 on a re-read)."""
    if tv.compacted:
        raise UnsupportedEvent(
            f"TRUNCATE of {tv.db}.{tv.table} at {tracker.file}:"
            f"{event.packet.log_pos - event.packet.event_size} can't be published to its "
            f"compacted topic {tv.topic}: Kafka refuses keyless records there, and a tombstone "
            f"needs each deleted key, which a TRUNCATE doesn't name. Nothing after it was "
            f"published. Either set topics.compact: false and change the topic's cleanup.policy "
            f"to delete (kafka-configs --alter), then restart: the TRUNCATE is published as op "
            f"t; or re-create the topic from a snapshot and restart from after the TRUNCATE "
            f"(start.file/start.pos)")
    if tracker.count(1):
        return 0
    packet = event.packet
    return produce_everywhere(tv.topic, tv.truncate_value(
        event.timestamp * 1000, packet.server_id, tracker.file,
        packet.log_pos - packet.event_size, tracker.gtid, tv.db, tv.table, tracker.txid,
        tracker.tx_rows - 1), tv.headers["t"])
