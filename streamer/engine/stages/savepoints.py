"""The savepoints stage: rows a ROLLBACK TO SAVEPOINT took back are never published.

In a pure InnoDB transaction the server drops a rolled-back savepoint's rows from the binlog
cache, and the binlog never holds them. When the transaction also touched a non-transactional
table (MyISAM, Aria, MEMORY), MariaDB can't: it writes the rows, then a ``ROLLBACK TO `s```
statement for a replica to undo them (MySQL 8.0 drops them in both cases: seen on both servers,
tests/e2e/test_events.py). Those rows are not in the table, so they must not be in the topics.

A ``SAVEPOINT `s``` statement marks how many row changes of the transaction came before it. At
``ROLLBACK TO `s``` the changes since are a hole in the transaction: it is remembered (by the
transaction's id, for this process: ``Streamer.holes``), the open batch, which holds the rows
already published, is aborted, and the stream is read again from the last checkpoint
(``RolledBackRows``); the rows in a hole are then counted and left out (``Tracker.holes``), and
the batch commits at that transaction's end, so that each one costs one reading again. A batch
commits inside a transaction only when full (engine.commit), and a batch committed between the
savepoint and the rollback (a cut at batch.max_messages) can't be taken back: that case is
refused, naming the transaction.

Such a transaction rolled back whole is logged too: its rows, then ``ROLLBACK``. In row format
the servers log a non-transactional table's rows in a group of their own, ended by ``COMMIT``,
so the rows of a group that ends in ``ROLLBACK`` are all a transactional table's, and none is in
the table (seen on MariaDB 10.11 and 11.4: tests/e2e/test_tx_random.py). The whole transaction
is then a hole, taken back as above.

Reading again costs a reconnect and the batch: a stream with such transactions every few
hundred ms fell behind for good, and a snapshot in flight never finished a chunk. So MariaDB's
groups that can hold rows taken back are read whole before their first event is handled
(``looked_ahead``): only a group whose GTID event lacks FL_TRANSACTIONAL ("can be safely rolled
back") can, as a transaction that touched a non-transactional table lacks it (a pure InnoDB
one, rolled back to a savepoint or not, carries it: seen on 10.11 and 11.4). Its statements and
its end give its holes, set on its GTID event for the tracker, and its rows are left out as
they come: nothing aborted, nothing read again. A group of more than ``LOOK_AHEAD`` events is
handed on as it comes, and taken back the way above if it must be.

A group that never ended (its binlog cut off inside it: ``UNENDED``) is found when the next
group begins, and taken back whole the same way.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from pymysqlreplication.event import (GtidEvent, HeartbeatLogEvent, MariadbGtidEvent,
                                      QueryEvent, RotateEvent, XAPrepareEvent, XidEvent)

from streamer.engine.rows import OPS
from streamer.engine.tracker import FL_PREPARED_XA, FL_STANDALONE
from streamer.errors import RolledBackRows, UnsupportedEvent
from streamer.source import rowcount
from streamer.source.gtidtag import TaggedGtidEvent

_SAVEPOINT = re.compile(r"^\s*SAVEPOINT\s+(`(?:[^`]|``)+`|\w+)\s*$", re.I)
_ROLLBACK_TO = re.compile(r"^\s*ROLLBACK\s+(?:WORK\s+)?TO\s+(?:SAVEPOINT\s+)?(`(?:[^`]|``)+`|\w+)"
                          r"\s*$", re.I)

Holes = Dict[str, List[Tuple[int, int]]]


FL_TRANSACTIONAL = 4  # MariaDB's GTID event: a group that can be safely rolled back
FL_COMPLETED_XA = 0x80  # an XA COMMIT or XA ROLLBACK (stages.xa)
# None of these groups is looked ahead: their rows can't be taken back.
_WHOLE = FL_STANDALONE | FL_TRANSACTIONAL | FL_PREPARED_XA | FL_COMPLETED_XA
LOOK_AHEAD = 2000  # events of a group read before any is handed on, at most (~16 MB)
# Transactions whose holes are kept for reading them again (``Streamer.holes``), the latest: one
# dropped would only be found again the same way, and read once more.
HOLES_KEPT = 256
_OUTSIDE = (MariadbGtidEvent, GtidEvent, HeartbeatLogEvent, RotateEvent)  # never in a group


def _name(text: str) -> str:
    return text[1:-1].replace("``", "`") if text.startswith("`") else text


def statement_of(query: str) -> Optional[Tuple[str, str]]:
    """("SAVEPOINT", name), ("ROLLBACK TO", name) or ("ROLLBACK", "") for a statement that marks
    or takes back rows of its transaction; None for any other."""
    if query == "ROLLBACK":
        return "ROLLBACK", ""
    m = _SAVEPOINT.match(query)
    if m is not None:
        return "SAVEPOINT", _name(m.group(1))
    m = _ROLLBACK_TO.match(query)
    if m is not None:
        return "ROLLBACK TO", _name(m.group(1))
    return None


def looked_ahead(events: Iterable[Any]) -> Iterator[Any]:
    """``events``, with each MariaDB group that may hold rows taken back read to its end first
    and its holes set on its GTID event (``holes``: None when it has none)."""
    it = iter(events)
    for event in it:
        while event is not None and event.__class__ is MariadbGtidEvent and \
                not event.flags & _WHOLE:
            group, event = _group(event, it)
            yield from group
        if event is not None:
            yield event


def _group(gtid: Any, it: Iterator[Any]) -> Tuple[List[Any], Any]:
    """The group ``gtid`` begins, read to its end (as the tracker ends one) or ``LOOK_AHEAD``
    events; and an event read after it that can't be in it (a group that ended without an end
    the tracker knows), else None: nothing is read past a group's end, which may come long
    before the next event."""
    group = [gtid]
    gtid.holes = None
    for event in it:
        cls = event.__class__
        if cls in _OUTSIDE:
            return group, event
        if cls in OPS:
            # The library keeps one table map per table id, the last it read: the next
            # statement's map, read ahead, would be what this event's rows are decoded by,
            # without the plan the stream gives its own map (source.rowplan). Its own is kept.
            event.table_map = {event.table_id: event.table_map[event.table_id]}
        group.append(event)
        if cls is XidEvent or cls is XAPrepareEvent or (
                cls is QueryEvent and event.query in ("COMMIT", "ROLLBACK")):
            gtid.holes = holes_of(group)
            break
        if len(group) > LOOK_AHEAD:
            break
    return group, None


def holes_of(group: List[Any]) -> Optional[List[Tuple[int, int]]]:
    """The ranges of a whole group's row changes that its ROLLBACK TO statements and a ROLLBACK
    at its end took back, counted as the tracker counts them; None when it has none, or when a
    rows event can't be counted without decoding it. Its rows are never decoded here: their
    table's plan is made when the stream reaches its table map (source.rowplan), and rows read
    before would be read the library's way, and kept. Such a group is taken back as it comes."""
    rows, marks, holes = 0, {}, []
    for event in group:
        if event.__class__ in OPS:
            n = rowcount.count(event)
            if n is None:
                return None
            rows += n
        elif event.__class__ is QueryEvent:
            found = statement_of(event.query)
            if found is None:
                continue
            kind, name = found
            if kind == "SAVEPOINT":
                marks[name] = rows
            elif kind == "ROLLBACK":
                if rows:
                    holes.append((0, rows))
            elif marks.get(name, rows) < rows:
                holes.append((marks[name], rows))
    return holes or None


_TOUCHED = "which the server logged because it touched a non-transactional table too"
ROLLED_BACK = ("was rolled back", _TOUCHED)
TO_SAVEPOINT = ("rolled back to a savepoint", _TOUCHED)
# A group cut off before its end: the server stopped while writing it (a crash, a full disk),
# and its binlog ends inside it; the next group (the next binlog, after the restart) begins
# without it. The server's crash recovery rolls back a transaction its binlog doesn't hold whole
# (MySQL also trims the cut-off part; a binlog that kept it reads so), and a replica rolls back
# what it applied of it: its rows are in no table.
UNENDED = ("never ended (the next transaction began before its COMMIT: the server stopped "
           "while writing it, and rolled it back when it started again)",
           "which the binlog holds up to where it was cut off")


class Savepoints:
    def __init__(self, ctx: Any, holes: Holes) -> None:
        self.ctx = ctx
        self.tracker = ctx.tracker
        self.holes = holes
        self.txid = ""
        self.marks: Dict[str, Tuple[int, Tuple[str, int, int]]] = {}

    def handlers(self) -> Dict[Any, Callable[[Any], int]]:
        begins = self.on_group_start
        return {QueryEvent: self.on_query, GtidEvent: begins, TaggedGtidEvent: begins,
                MariadbGtidEvent: begins}

    def tx_end_hooks(self) -> List[Callable[[], int]]:
        return [self.on_tx_end]

    def on_tx_end(self) -> int:
        """A transaction read again without its holes ended: commit now, so that the next one
        taken back is read again from here, not from before this one."""
        if self.tracker.txid in self.holes:
            self.ctx.policy.request_commit()
        return 0

    def on_group_start(self, event: Any) -> int:
        """A group begins (its GTID event; a BEGIN on MySQL without GTIDs): the one before it
        must have ended. One that did not was cut off (``UNENDED``), and its rows are taken back
        whole."""
        tracker = self.tracker
        if tracker.in_tx and tracker.explicit and tracker.tx_rows:
            packet = event.packet
            self._take_back((0, tracker.tx_rows), self._committed_inside(), UNENDED,
                            (tracker.file, packet.log_pos - packet.event_size))
        return 0

    def on_query(self, event: Any) -> int:
        query = event.query
        first = query[:4].upper()
        if first != "SAVE" and first != "ROLL":
            if query == "BEGIN":
                return self.on_group_start(event)
            return 0
        tracker = self.tracker
        if tracker.txid != self.txid:
            self.txid, self.marks = tracker.txid, {}
        found = statement_of(query)
        if found is None:
            return 0
        kind, name = found
        if kind == "SAVEPOINT":
            self.marks[name] = (tracker.tx_rows, self.ctx.policy.committed_at)
        elif kind == "ROLLBACK":
            if tracker.in_tx:
                self._take_back((0, tracker.tx_rows), self._committed_inside(), ROLLED_BACK,
                                (tracker.file, event.packet.log_pos))
        elif name in self.marks:
            at, committed_then = self.marks[name]
            self._take_back((at, tracker.tx_rows), self.ctx.policy.committed_at != committed_then,
                            TO_SAVEPOINT)
        return 0

    def _committed_inside(self) -> bool:
        """Whether rows of the open transaction are in a committed batch: one cut inside it, by
        this run or (the resume's skip) by an earlier one."""
        tracker = self.tracker
        file, start, rows = self.ctx.policy.committed_at
        return tracker.skip > 0 or (rows > 0 and file == tracker.tx_file and
                                    start == tracker.tx_start)

    def _take_back(self, hole: Tuple[int, int], committed: bool, what: Tuple[str, str],
                   end: Optional[Tuple[str, int]] = None) -> None:
        """Leave out the row changes ``hole`` of the open transaction: raises to read it again.
        ``what``: what happened to the transaction, and why the server logged its rows; ``end``:
        where the next transaction begins, when all of this one is taken back."""
        txid = self.tracker.txid
        if hole[0] == hole[1] or hole in self.holes.get(txid, ()) or \
                hole in (self.tracker.holes or ()):  # known from the start (looked_ahead)
            return
        if committed:
            head = (f"the transaction {txid} {what[0]} after some of its rows were committed to "
                    f"Kafka (a batch cut at batch.max_messages came inside it): row changes "
                    f"{hole[0]}..{hole[1] - 1} of it are in the topics but not in the table")
            if end is None:
                raise UnsupportedEvent(
                    f"{head}. Raise batch.max_messages above the transaction's size and restart: "
                    f"the transaction is then read again and published without them")
            # The checkpoint is inside it: a restart from there would stop here again.
            raise UnsupportedEvent(
                f"{head}, and can't be taken out. To go on, restart once from where the next "
                f"transaction begins: streamer run --start-file {end[0]} --start-pos {end[1]}; "
                f"and raise batch.max_messages above such a transaction's size, so that the next "
                f"one is left out whole")
        if txid not in self.holes and len(self.holes) >= HOLES_KEPT:
            del self.holes[next(iter(self.holes))]  # the oldest: long since committed past
        self.holes.setdefault(txid, []).append(hole)
        raise RolledBackRows(
            f"the transaction {txid} {what[0]}, taking back its row changes "
            f"{hole[0]}..{hole[1] - 1}, {what[1]}: the open batch is aborted and read again "
            f"without them")
