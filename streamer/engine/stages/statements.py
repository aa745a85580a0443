"""The statements stage: query events other than BEGIN and COMMIT.

DDL needs no parsing: a changed table shows up in its next table map. Three kinds of statement
matter here: row changes that a session logged as a statement, which are refused when they
reach a published table, themselves or by the triggers and routines they run (``source.reach``,
``source.events``), and said once per table when they reach none that the streamer can see (a
session's temporary table hides the table of its name: ``source.temporary``);
TRUNCATE TABLE, the one DDL published, as op ``t`` (``engine.rows.publish_truncate``), as is
the whole-table DELETE with which MySQL empties a MEMORY table after a restart; and the ALTER
TABLEs that take rows out or put rows in with no row event (a partition dropped, emptied,
exchanged: ``source.rowless``), the RENAMEs that bring another table's rows under a
published table's name (``source.renames``), and the DROPs that take a published table's rows
away (``source.drops``), which are warned about.
MariaDB's two-phase ALTER is written twice: it is read at its COMMIT ALTER only (its START ALTER
changed nothing yet, and a ROLLBACK ALTER nothing at all).
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Dict, Optional, Set, Tuple

from pymysqlreplication.event import ExecuteLoadQueryEvent, FormatDescriptionEvent, QueryEvent

from streamer.engine.rows import publish_truncate, truncated_version
from streamer.source import dml, events
from streamer.source.drops import Dropped, drops
from streamer.source.patches.gtid import ROLLBACK_ALTER, START_ALTER
from streamer.source.reach import Reach, Reached
from streamer.source.renames import online_swap, renames
from streamer.source.rowless import (RowlessChange, cascade_added, rowless_change,
                                     unlogged_actions)
from streamer.source.temporary import TemporaryTables, used_temporary

log = logging.getLogger(__name__)


class Statements:
    """``temporary``: the temporary tables sessions logging statements made, kept across
    connections (a reconnection reads again what the last one read past its checkpoint)."""

    def __init__(self, ctx: Any, temporary: Optional[TemporaryTables] = None) -> None:
        self.ctx = ctx
        self.temporary = temporary if temporary is not None else TemporaryTables()
        self.tracker = ctx.tracker
        self.tables = ctx.tables
        definitions = getattr(ctx.tables, "definitions", None)
        self.reach = Reach(definitions.connection if definitions is not None else None)
        self.said: Set[Tuple[str, str]] = set()

    def handlers(self) -> Dict[Any, Callable[[Any], int]]:
        # A LOAD DATA logged as a statement: a query event of its own type (source.patches.query).
        return {QueryEvent: self.on_query, ExecuteLoadQueryEvent: self.on_query,
                FormatDescriptionEvent: self.on_format}

    def on_format(self, event: Any) -> int:
        if event.created:
            # A binlog the server began at its start: no temporary table outlived it. One begun
            # by a rotation says 0, as does the copy that opens a connection resuming past a
            # binlog's first event, by position or by GTID (seen on MariaDB 10.11 and MySQL 8.0).
            self.temporary.server_started()
        return 0

    def on_query(self, event: Any) -> int:
        query = event.query
        if query == "BEGIN" or query == "COMMIT":
            return 0
        tracker = self.tracker
        if tracker.alter & (START_ALTER | ROLLBACK_ALTER):
            # A two-phase ALTER started, or failed (the group's GTID event says: the tracker
            # keeps it): its table is as it was until a COMMIT ALTER of the same statement,
            # which is read like any ALTER.
            return 0
        db = _db(event)
        temporary = self.temporary
        temporary.on_statement(event, query, db)
        emptied = self._emptied(event, query, db)
        published = self.tables.filter if emptied is None else _besides(emptied, self.tables)
        reached = self.reach.of(query, db, published, temporary.of(event))
        if reached is not None:
            events.refuse_statement(event, tracker.file, published, reached.tables)
            if emptied is not None:  # published as the TRUNCATE it is; the rest was judged
                reached.tables.pop(emptied, None)
            self._unpublished(reached, event)
            if emptied is not None:
                tv = truncated_version(event, self.tables, emptied)
                return 0 if tv is None else self._truncate(event, tv)
            if not reached.ddl:
                return 0
        self.reach.forget()
        self.tables.on_statement(query)
        tv = truncated_version(event, self.tables)
        if tv is None:
            self._unlogged(event)
            return 0
        return self._truncate(event, tv)

    def _emptied(self, event: Any, query: str, db: str) -> Optional[Tuple[str, str]]:
        """The published table a whole-table DELETE logged as a statement empties, when the
        server is MySQL: MySQL before 8.0.22 logs one so when a MEMORY table is first used
        after a restart emptied it, in any binlog format (source.dml.emptied), and it is
        published as the TRUNCATE it is. Not in a MariaDB group: those are counted row by row
        for the rows a ROLLBACK TO takes back (stages.savepoints), and MariaDB logs such an
        emptying as a TRUNCATE. Not when the statement used a temporary table (its session's
        own, source.temporary, or one a trigger reads)."""
        if query[:6].upper() != "DELETE" or used_temporary(event):
            return None
        gtid = self.tracker.gtid
        if gtid is not None and ":" not in gtid:  # MariaDB's domain-server-sequence
            return None
        table = dml.emptied(query, db)
        return table if table is not None and self.tables.filter(*table) else None

    def _truncate(self, event: Any, tv: Any) -> int:
        tracker = self.tracker
        ctx = self.ctx
        # Its version's schema goes out first when no table map of this stream announced it
        # (that announcement may have been in an aborted batch).
        ctx.announce_current(tv)
        ctx.open()
        sent = publish_truncate(event, tv, tracker, ctx.everywhere)
        if ctx.published:
            sent += ctx.after_publishing(tracker, tv.topic, sent, event.timestamp * 1000)
        return sent

    def _unpublished(self, reached: Reached, event: Any) -> None:
        """Say, once per table, that a session logs row changes as statements, which reached
        no published table as far as the streamer can see."""
        new = [t for t in reached.tables if t not in self.said]
        if not new:
            return
        self.said.update(new)
        named = ", ".join(f"{db}.{table}" for db, table in new)
        unseen = "; ".join(reached.unseen) or "nothing"
        log.warning("row changes of %s were logged as a statement (at %s:%d): a session logs "
                    "with binlog_format STATEMENT or MIXED. They reach no published table as "
                    "far as the streamer can see; what it can't see: %s. A change of a "
                    "published table logged so stops the stream. Set binlog_format=ROW for "
                    "every session. Said once per table", named, self.tracker.file,
                    event.packet.log_pos - event.packet.event_size, unseen,
                    extra={"table": named})

    def _unlogged(self, event: Any) -> None:
        """Warn of a statement that changed rows, took them from a published table's name, or
        gave a table a foreign key that will change rows, with no row event (source.rowless,
        source.renames, source.drops)."""
        db = _db(event)
        pairs = renames(event.query, db)
        # (A statement that used a temporary table renamed temporary tables: source.temporary.)
        if pairs and not used_temporary(event):
            targets = {new for _, new in pairs}
            for old, new in pairs:
                if old == new:
                    continue
                if self.tables.filter(*new):
                    self._renamed(old, new, event)
                if old not in targets and not online_swap(old, new):
                    # Its rows left the name, as in a drop (one taking its place: above).
                    self._dropped(Dropped("renamed", *old), event, to=new)
        # (Not told by the event's flag: MariaDB sets it on a DROP TABLE of a session with a
        # temporary table open, of whatever table; a temporary table's drop is logged TEMPORARY.)
        for drop in drops(event.query, db):
            self._dropped(drop, event)
        change = rowless_change(event.query, db)
        if change is not None:
            self._rowless(change, event)
            return
        added = cascade_added(event.query, db)
        if added is not None and self.tables.filter(*added):
            table = "%s.%s" % added
            log.warning("%s has a foreign key with an ON DELETE or ON UPDATE action now (the "
                        "statement at %s:%d): %s", table, self.tracker.file,
                        event.packet.log_pos - event.packet.event_size, unlogged_actions(table),
                        extra={"table": table})

    def _renamed(self, old: Tuple[str, str], new: Tuple[str, str], event: Any) -> None:
        """Say that a table was renamed onto a published table's name: its rows changed with
        no row event, unless the rename was an online schema change tool's swap."""
        packet = event.packet
        at = f"{self.tracker.file}:{packet.log_pos - packet.event_size}"
        table, was = "%s.%s" % new, "%s.%s" % old
        if online_swap(old, new):
            log.info("the statement at %s renamed %s to %s: an online schema change's swap "
                     "(gh-ost, pt-online-schema-change), whose copy the tool kept equal to the "
                     "table with row changes of its own; nothing to read again", at, was, table,
                     extra={"table": table})
            return
        log.warning("the statement at %s renamed %s to %s, a published table, and the server "
                    "logs no row event for the rows that came under that name: the topic of %s "
                    "never gets them, and keeps the rows a table of that name had before, if "
                    "any. If consumers must follow, read the table again (streamer snapshot "
                    "--tables %s: it publishes the rows there now; rows gone stay in the topic)",
                    at, was, table, table, table, extra={"table": table})

    def _dropped(self, drop: Dropped, event: Any, to: Optional[Tuple[str, str]] = None) -> None:
        """Say that a statement dropped, replaced or renamed (``to``) a published table whose
        topic had messages, or dropped a database with such tables: the topics keep the rows."""
        tables = self.tables
        if drop.table:
            if not (tables.filter(drop.db, drop.table) and
                    tables.had_messages(drop.db, drop.table)):
                return
            what = f"{drop.how} {drop.db}.{drop.table}" + \
                (f" (to {to[0]}.{to[1]})" if to else "") + ", a published table"
            topics = [tables.topics.of(drop.db, drop.table)]
        else:
            topics = tables.database_topics(drop.db)
            if not topics:
                return
            what = f"dropped database {drop.db}, with published tables"
        packet = event.packet
        named = ", ".join(topics)
        log.warning("the statement at %s:%d %s, and the server logs no row event for the rows "
                    "that left with it: %s keep%s them (a compacted topic for good), and a table "
                    "created again under a name they had publishes there beside them. If "
                    "consumers must follow, publish those rows' deletes yourself (tombstones, "
                    "for a compacted topic)", self.tracker.file,
                    packet.log_pos - packet.event_size, what, named,
                    "" if len(topics) > 1 else "s",
                    extra={"table": f"{drop.db}.{drop.table}" if drop.table else drop.db})

    def _rowless(self, change: RowlessChange, event: Any) -> None:
        """Say that a statement took rows out of published tables, or put rows in, that no
        message will show. A system-versioned table's partitions that can be dropped or
        emptied hold its history only, which is never published."""
        tables = self.tables
        if change.what in ("drop", "truncate"):
            tv = tables.last_version(change.db, change.table)
            if getattr(tv, "versioning", None) is not None:
                return
        named = [(change.db, change.table)] + ([change.other] if change.other else [])
        published = [f"{db}.{table}" for db, table in named if tables.filter(db, table)]
        if not published:
            return
        packet = event.packet
        log.warning("the statement at %s:%d on %s.%s %s, and the server logs no row event for "
                    "such rows: the topics of %s keep the rows it took out and never get those "
                    "it put in. If consumers must follow, publish those rows' deletes yourself, "
                    "or read the table again (streamer snapshot --tables %s: it publishes the "
                    "rows there now; rows taken out stay in the topic)", self.tracker.file,
                    packet.log_pos - packet.event_size, change.db, change.table, change.says(),
                    " and ".join(published), ",".join(published),
                    extra={"table": published[0]})


def _besides(table: Tuple[str, str], tables: Any) -> Callable[[str, str], bool]:
    """Whether a table other than ``table`` is published."""
    def published(db: str, name: str) -> bool:
        return (db, name) != table and tables.filter(db, name)
    return published


def _db(event: Any) -> str:
    """The statement's default database."""
    schema = event.schema
    return schema.decode("utf-8", "replace") if isinstance(schema, bytes) else schema or ""
