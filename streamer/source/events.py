"""Which binlog events the streamer reads, which carry nothing it needs, and which it refuses.

python-mysql-replication drops every event whose class a reader did not ask for, and turns every
event type it does not know into ``NotImplementedEvent``, which it drops too unless asked: a
MariaDB binlog written with ``log_bin_compress=ON``, or MySQL 8's compressed transactions, would
reach Kafka as nothing at all (source.compressed and source.payload read both). So every event
type is in exactly one of three lists here:

- ``FOLLOWED``: read and acted on by the engine. MariaDB's compressed events are among them:
  ``source.compressed`` reads each as its plain twin; so are MySQL's partial JSON updates, whose
  diffs ``source.jsondiff`` applies to the before image; a binlog's format description,
  which says whether the server began that binlog at its start (source.temporary); and the GTIDs
  a binlog file begins after (MySQL's Previous_gtids, MariaDB's Gtid_list, read as
  ``source.filestart.FileStart``), which say when a stream begun by a GTID set may resume by
  file again (engine.tracker);
- ``NO_DATA``: known to carry no row change (checkpoints, annotations, and
  what a statement-logged statement is written with: its INSERT_ID, RAND() seed and user
  variables, a LOAD DATA's file, which come before the statement, which the statements stage
  judges); not asked for, so the library does not even parse them;
- refused: everything else, the event types the library does not know included. The engine stops
  at the first such event with exit 3, naming its type, its position, the setting behind it and the
  fix; the position is not moved past it, so after the fix a restart loses nothing.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Tuple

from pymysqlreplication.constants import BINLOG
from pymysqlreplication.event import (BeginLoadQueryEvent, ExecuteLoadQueryEvent,
                                      FormatDescriptionEvent, GtidEvent, HeartbeatLogEvent,
                                      IntvarEvent, MariadbAnnotateRowsEvent,
                                      MariadbBinLogCheckPointEvent, MariadbGtidEvent,
                                      MariadbStartEncryptionEvent, NotImplementedEvent,
                                      QueryEvent, RandEvent, RotateEvent, RowsQueryLogEvent,
                                      StopEvent, UserVarEvent, XAPrepareEvent, XidEvent)
from pymysqlreplication.row_event import (DeleteRowsEvent, PartialUpdateRowsEvent, TableMapEvent,
                                          UpdateRowsEvent, WriteRowsEvent)

from streamer.errors import UnsupportedEvent
from streamer.source import compressed, filestart, gtidtag, payload
from streamer.source.temporary import used_temporary

FOLLOWED: List[Any] = [WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent, PartialUpdateRowsEvent,
                       TableMapEvent, RotateEvent, GtidEvent, gtidtag.TaggedGtidEvent,
                       MariadbGtidEvent, XidEvent, QueryEvent, HeartbeatLogEvent, XAPrepareEvent,
                       ExecuteLoadQueryEvent, FormatDescriptionEvent, filestart.FileStart]
NO_DATA: List[Any] = [StopEvent, RowsQueryLogEvent, MariadbAnnotateRowsEvent,
                      MariadbBinLogCheckPointEvent, MariadbStartEncryptionEvent, IntvarEvent,
                      RandEvent, UserVarEvent, BeginLoadQueryEvent]
# Event types the library has no class for that carry no row change: MySQL's GTID event of a
# server with gtid_mode=OFF (a transaction's first event, before its BEGIN), Group Replication's
# transaction context and view change, the heartbeat of MySQL 8.0.26+ past a 4 GB offset, and
# the bytes of a file a statement-logged LOAD DATA reads (Append_block, and Delete_file when the
# statement failed), whose statement (Execute_load_query) the statements stage judges.
NO_DATA_TYPES: FrozenSet[int] = frozenset([BINLOG.ANONYMOUS_GTID_LOG_EVENT, 36, 37, 41,
                                           BINLOG.APPEND_BLOCK_EVENT, BINLOG.DELETE_FILE_EVENT])
# The server's own contract: an event with this flag may be skipped by a reader that doesn't know
# its type (LOG_EVENT_IGNORABLE_F); any other unknown type must not be.
IGNORABLE_F = 0x80

# Why a statement-logged change is refused, and what to do about it.
_STATEMENT = ("a statement logged as a statement (binlog_format STATEMENT or MIXED for that "
              "session, or a stored program's): the streamer reads row changes only. Set "
              "binlog_format=ROW globally and for every session (SET GLOBAL binlog_format='ROW'; "
              "sessions started before keep their own)")
# What the streamer asks the library for: its own events, MariaDB's compressed ones (read as
# their plain twins, which the engine follows), and those it must see to refuse (every type the
# library does not know). MySQL's compressed transactions (source.payload) are asked for too:
# the binlog reader hands out the events each holds in its place.
READ: List[Any] = (FOLLOWED + list(compressed.CLASSES.values())
                   + [NotImplementedEvent, payload.TransactionPayloadEvent])


def refuse(event: Any, file: str) -> None:
    """Stop at an event the streamer can't read, unless it is known to carry no row change."""
    cls = event.__class__
    packet = event.packet
    code = packet.event_type
    if cls is NotImplementedEvent and (code in NO_DATA_TYPES or packet.flags & IGNORABLE_F):
        return
    where = f"{file}:{packet.log_pos - packet.event_size}"
    name = "unknown" if cls is NotImplementedEvent else cls.__name__
    raise UnsupportedEvent(f"binlog event {name} (type {code}) at {where}: an event type the "
                           f"streamer does not know. Nothing from this event on was published, "
                           f"and the checkpoint stays before it. "
                           f"Events already written this way stay in the binlog: once their "
                           f"changes are accounted for, restart past them (streamer run "
                           f"--start-file/--start-pos or --start-gtid)")


def refuse_statement(event: Any, file: str, published: Callable[[str, str], bool],
                     reached: Dict[Tuple[str, str], str]) -> None:
    """Stop at row changes logged as a statement that reach a published table (``reached``:
    each table changed, and by what, source.reach): the streamer reads row events only, so
    they would be lost."""
    for (db, table), by in reached.items():
        if not published(db, table):
            continue
        packet = event.packet
        how = f" (by {by})" if by else ""
        raise UnsupportedEvent(f"a statement changing {db}.{table}{how} at "
                               f"{file}:{packet.log_pos - packet.event_size} was logged as a "
                               f"statement, not as row events: {_STATEMENT}. Nothing from this "
                               f"event on was published, and the checkpoint stays before it; "
                               f"once its changes are accounted for, restart past it (streamer "
                               f"run --start-file/--start-pos or --start-gtid)"
                               f"{_temporary(event, db, table)}")


def _temporary(event: Any, db: str, table: str) -> str:
    if not used_temporary(event):
        return ""
    return (f". The statement used a temporary table of its session (thread "
            f"{event.slave_proxy_id}): if that was {db}.{table}, its CREATE TEMPORARY TABLE came "
            f"before what this streamer read (before its start, or in a row-logged moment of "
            f"the session), and no change of the published table is lost by restarting past it")


# XA COMMIT / XA ROLLBACK as the server logs them: the xid as X'gtrid',X'bqual',formatID.
_XA_OUTCOME = re.compile(r"^\s*XA\s+(COMMIT|ROLLBACK)\s+X'([0-9a-f]*)'\s*,\s*X'([0-9a-f]*)'"
                         r"\s*,\s*(\d+)", re.IGNORECASE)


def xa_id(format_id: int, gtrid: bytes, bqual: bytes) -> str:
    """An XA transaction's xid, spelt as the server logs it in XA COMMIT and XA ROLLBACK."""
    return f"X'{gtrid.hex()}',X'{bqual.hex()}',{format_id}"


def xa_outcome(query: str) -> Optional[Tuple[str, str]]:
    """("COMMIT" or "ROLLBACK", xid) of an XA COMMIT/ROLLBACK statement, else None."""
    m = _XA_OUTCOME.match(query)
    if m is None:
        return None
    return m.group(1).upper(), f"X'{m.group(2).lower()}',X'{m.group(3).lower()}',{int(m.group(4))}"
