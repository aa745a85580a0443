"""Transaction boundaries in the event stream, the resume skip, and what to checkpoint at any point.

Resume always seeks to a transaction start (never to a row event, where python-mysql-replication
would silently drop rows until the next table map) and skips the row changes of that transaction
that the previous run already published. The Tracker is the one place that counts them: every
row change of a transaction is counted here, published or not, so a checkpoint's ``rows`` means
the same whichever tables the changes belonged to.
"""
from __future__ import annotations

import logging
import re
from typing import Any, Callable, Dict, List, Optional, Tuple

from pymysqlreplication.event import (GtidEvent, MariadbGtidEvent, QueryEvent, RotateEvent,
                                      XAPrepareEvent, XidEvent)

from streamer.position import GtidSet, Position
from streamer.source.events import xa_id
from streamer.source.filestart import FileStart
from streamer.source.gtidtag import TaggedGtidEvent

log = logging.getLogger(__name__)

# What stages.savepoints.looked_ahead sets on a MariaDB group it read whole: its holes.
MariadbGtidEvent.holes = None
# What source.patches.gtid reads into each MariaDB GTID event (0 where it isn't applied).
MariadbGtidEvent.alter = 0
# MariaDB's GTID event flag for a statement that is a transaction of its own (no BEGIN follows).
FL_STANDALONE = 1
# MariaDB's GTID event flag for the group of an XA transaction's XA START ... XA PREPARE.
FL_PREPARED_XA = 0x40


# A CREATE TABLE statement (after leading comments), as MySQL logs the first part of its CTAS.
_CTAS = re.compile(r"^\s*(?:/\*.*?\*/\s*)*create\s+(?:temporary\s+)?table\b", re.I | re.S)


def _start_of(event: Any) -> int:
    return event.packet.log_pos - event.packet.event_size


class Tracker:
    """Follows transaction boundaries in the event stream and says what to checkpoint."""

    __slots__ = ("file", "next_pos", "gtids", "gtid", "tx_file", "tx_start", "tx_rows", "in_tx",
                 "server_id", "txid", "skip", "explicit", "awaited", "on_resumed", "server_uuid",
                 "xa", "xa_pending", "hole_map", "holes", "start", "placed", "alter", "by_gtid",
                 "rotated")

    def __init__(self, start: Position, by_gtid: bool = False,
                 holes: Optional[Dict[str, List[Tuple[int, int]]]] = None):
        self.file = start.file
        self.next_pos = start.pos
        self.gtids = GtidSet(start.gtid_set)
        self.gtid: Optional[str] = None
        # Where the open transaction began, or the next will: a binlog cut off inside one goes
        # on in the next file (stages.savepoints.UNENDED), and the group is still in this one.
        self.tx_file = start.file
        self.tx_start = start.pos
        self.tx_rows = 0
        self.in_tx = False
        self.server_id = start.server_id
        self.server_uuid = start.server_uuid
        self.start = start  # where to resume until the transaction it is inside begins again
        # Whether the file and offset say where the stream is. A dump by GTID set opens with the
        # server's artificial rotate to the file it reads, at offset 4, and then leaves out the
        # set's transactions: (file, 4) with the set would be a place before them, and a resume
        # by file from it would publish them again. Until a transaction begins, or a real rotate
        # (the end of a file) comes, the position stays the start.
        self.placed = bool(start.file) and not by_gtid
        # Begun by a GTID set, the stream goes on so (``Position.by_gtid``): the set may hold
        # transactions this server wrote after the place the stream reads (another domain's
        # first, as out-of-order parallel or multi-source replication leaves a binlog), which
        # a dump by the set leaves out and a resume by offset reads again. Until a file the
        # stream rotated into begins after all it published (source.filestart).
        self.by_gtid = bool(start.gtid_set) and (by_gtid or not start.file)
        self.rotated = False
        self.txid = ""
        # Row changes of the first transaction that the previous run already published.
        self.skip = start.rows
        # A start by GTID set (``by_gtid``: mysql.position_mode gtid; or with no file, another
        # server after a failover: source.failover) inside a transaction: the server sends its
        # first rotate with offset 4, not the transaction's, and on another server the offsets
        # mean nothing, so the skip waits for the transaction's GTID ("" when the checkpoint
        # didn't keep it: the first one that comes, which a dump by GTID set sends first).
        # Another domain's transactions may come first, and a checkpoint inside one of them
        # keeps the skips still awaited (``Position.awaited``): GTID -> (rows, the metadata
        # counts its BEGIN went out with, or None).
        self.awaited: Dict[str, Tuple[int, Optional[Dict[str, Any]]]] = {
            gtid: (int(entry["rows"]), entry.get("transaction"))
            for gtid, entry in (start.awaited or {}).items()}
        if (by_gtid or not start.file) and start.rows:
            self.awaited[start.tx_gtid] = (start.rows, start.transaction)
            self.skip = 0
        # Told the metadata counts of a transaction an earlier run published rows of when it
        # begins again: the one a start by file is inside, or an awaited one (stages.txmeta).
        self.on_resumed: Optional[Callable[[Dict[str, Any]], None]] = None
        # True once the transaction has an explicit BEGIN; a statement outside one ends itself.
        self.explicit = False
        # In the group of an XA transaction being prepared: its rows wait for its XA COMMIT.
        self.xa = False
        # MariaDB: the phase of a two-phase ALTER the group is (source.patches.gtid), else 0.
        self.alter = 0
        # The prepared XA transactions not yet committed or rolled back (Position.xa).
        self.xa_pending: Dict[str, List[Any]] = {k: list(v) for k, v in (start.xa or {}).items()}
        # Ranges of the current transaction's row changes a ROLLBACK TO SAVEPOINT took back
        # (engine.stages.savepoints), by transaction id; those of this transaction, or None.
        self.hole_map = holes
        self.holes: Optional[List[Tuple[int, int]]] = None

    def count(self, n: int) -> int:
        """Count ``n`` row changes of the current transaction, in binlog order; returns how many
        of them, from the first, the previous run already published (0 but on a resume)."""
        done = self.tx_rows
        self.tx_rows = done + n
        if done >= self.skip:
            return 0
        return min(self.skip - done, n)

    def on_event(self, event: Any, cls: Any) -> bool:
        """Follow a non-row event; True when it ended a transaction (an XID, or a statement that
        is a transaction of its own, such as DDL)."""
        if cls is XidEvent:
            self.end(event.packet.log_pos)
            return True
        if cls is XAPrepareEvent:
            # The end of an XA transaction's prepare group. Unless it was committed in one phase
            # (published at once, by the loop), it is pending until its XA COMMIT/ROLLBACK.
            if self.xa and not event.one_phase:
                xid = xa_id(event.xid_format_id, event.xid_gtrid, event.xid_bqual)
                self.xa_pending[xid] = [self.file, self.tx_start, self.gtid or "", self.txid]
            self.end(event.packet.log_pos)
            return True
        if cls is QueryEvent:
            query = event.query
            if query == "BEGIN":
                if not self.in_tx:
                    self.begin(_start_of(event), None)
                self.explicit = True
                return False
            # Two statements open a transaction that a later event ends:
            # - MySQL's XA START, for the group of an XA transaction being prepared (MariaDB
            #   flags its GTID event instead); XA END doesn't end it, its XA_prepare event does;
            # - MySQL 8.0.21+'s CREATE TABLE ... SELECT, written as one transaction: the CREATE
            #   TABLE marked "START TRANSACTION" (with or without a BEGIN before it), the rows,
            #   then the XID.
            xa_start = query[:9].upper() == "XA START "
            if xa_start or (query[-17:].upper() == "START TRANSACTION" and _CTAS.match(query)):
                if not self.in_tx:
                    self.begin(_start_of(event), None)
                self.explicit = True
                if xa_start:
                    self.xa = True
                return False
            # A transaction that touched a non-transactional table is logged even when rolled
            # back: its group ends in ROLLBACK (its rows are left out: stages.savepoints).
            if query == "COMMIT" or query == "ROLLBACK" or not self.explicit or not self.in_tx:
                self.end(event.packet.log_pos)
                return True
            return False
        if cls is MariadbGtidEvent:
            self.begin(_start_of(event), event.gtid)
            self.explicit = not (event.flags & FL_STANDALONE)
            self.xa = bool(event.flags & FL_PREPARED_XA)
            self.alter = event.alter
            if event.holes is not None:  # a group read whole first (stages.savepoints)
                self.holes = event.holes
        elif cls is GtidEvent or cls is TaggedGtidEvent:
            self.begin(_start_of(event), event.gtid)
            self.explicit = False
        elif cls is RotateEvent:
            self._rotate(event)
        elif cls is FileStart:
            self._file_start(event)
        return False

    def _file_start(self, event: FileStart) -> None:
        """The GTIDs the file begins after; only a file the stream rotated into counts (a
        dump's start may send one of its own making, of the set asked for)."""
        if self.rotated:
            if not self.by_gtid:
                self.forget_domains(event.domains_gone(self.gtids))
            elif event.holds(self.gtids):
                self.by_gtid = False
        self.rotated = False

    def forget_domains(self, domains: List[int]) -> None:
        """MariaDB GTID domains the file the stream rotated into begins without, the others
        going on: FLUSH BINARY LOGS DELETE_DOMAIN_ID deleted them (none of their transactions
        is in the binlog any more). The position leaves them out, as the server's does: a
        checkpoint keeping them would be refused as no place in its binlog (source.failover),
        and a dump by GTID set asks for a domain the server has none of. Only a stream read by
        file: one begun by a GTID set, on another server, may read files that server wrote
        before a domain's first transaction reached it (``by_gtid``); the reset guard leaves
        them out of its position once the server's own set confirms it (source.resetguard)."""
        domains = [d for d in domains if d in self.gtids.mariadb]
        if not domains:
            return
        gone = [f"{d}-{self.gtids.mariadb[d][0]}-{self.gtids.mariadb[d][1]}" for d in domains]
        self.gtids.drop_domains(domains)
        log.warning("the server's binlog has no GTID domain %s from %s on (FLUSH BINARY LOGS "
                    "DELETE_DOMAIN_ID); the stream had read it up to %s, and its position "
                    "leaves it out from here", ", ".join(map(str, domains)), self.file,
                    ", ".join(gone))

    def _rotate(self, event: Any) -> None:
        self.file = event.next_binlog
        if event.packet.log_pos:  # a real one, at the end of a file: every event before it
            self.placed = True   # was sent or is in the set
            self.rotated = True
        if not self.in_tx and self.placed:
            self.next_pos = event.position
            self.tx_file = self.file
            self.tx_start = event.position

    def begin(self, start_pos: int, gtid: Optional[str]) -> None:
        txid = f"{self.file}:{start_pos}"
        # The transaction a start by file is inside, its skip kept since the start.
        inside = self.skip and not self.in_tx and start_pos == self.tx_start
        awaited = self._awaited_now(gtid, inside) if self.awaited else None
        if awaited is not None:
            self.skip, progress = awaited
        elif inside:
            progress = self.start.transaction
        else:
            # Not the transaction the checkpoint is inside: a group that ended without an end
            # this tracker knows must not pass its skip on to the next one.
            self.skip, progress = 0, None
        if progress is not None:
            # Rows of it were published by an earlier run: its transaction-metadata id is the
            # one its BEGIN went out with (on another server, perhaps), and its counts go on.
            txid = progress["id"]
            if self.on_resumed is not None:
                self.on_resumed(progress)
        self.in_tx = True
        self.placed = True
        self.tx_file = self.file
        self.tx_start = start_pos
        self.tx_rows = 0
        self.gtid = gtid
        self.txid = txid
        self.xa = False
        self.holes = self.hole_map.get(txid) if self.hole_map else None

    def _awaited_now(self, gtid: Optional[str], inside: bool
                     ) -> Optional[Tuple[int, Optional[Dict[str, Any]]]]:
        """The skip of the awaited transaction ``gtid`` begins, taken out; None when it is not
        one. An awaited "" (a checkpoint that didn't keep its GTID) is the first that comes,
        but for the one a start by file is ``inside``, which has its own skip."""
        found = self.awaited.pop(gtid or "", None)
        if found is None and not inside and "" in self.awaited:
            found = self.awaited.pop("")
        return found

    def end(self, next_pos: int) -> None:
        if self.gtid is not None:
            self.gtids.add(self.gtid)
        self.in_tx = False
        self.xa = False
        self.gtid = None
        self.tx_rows = 0
        self.skip = 0
        self.next_pos = next_pos
        self.tx_file = self.file
        self.tx_start = next_pos

    def mark(self) -> Tuple[str, int, int]:
        """Where the stream is, cheaply: equal marks, equal checkpoints."""
        return self.tx_file, self.tx_start, self.tx_rows

    def position(self) -> Position:
        if self.skip and not self.in_tx:
            # Resumed by file inside a transaction that has not begun again yet: nothing was
            # read since the start, which is still where to resume, its skip included. (A
            # checkpoint here, a clean stop right after a start, once said rows 0 and the next
            # run published the skipped rows again.)
            s = self.start
            return Position(s.file, s.pos, s.gtid_set, s.rows, s.server_id,
                            transaction=s.transaction, tx_gtid=s.tx_gtid,
                            server_uuid=s.server_uuid, xa=self._xa(), awaited=s.awaited,
                            by_gtid=self.by_gtid)
        if self.awaited and not self.in_tx:
            # A transaction to skip into has not come yet (another domain's came first): a
            # restart must resume by GTID set again and still skip into it. The first awaited
            # is said as a single one always was; any others ride in ``awaited``.
            (gtid, (rows, progress)), *others = self.awaited.items()
            return Position("", 4, str(self.gtids), rows, self.server_id, transaction=progress,
                            tx_gtid=gtid, server_uuid=self.server_uuid, xa=self._xa(),
                            awaited=_awaited(others), by_gtid=self.by_gtid)
        if not self.placed:  # only the artificial rotate of a dump by GTID set since the start
            s = self.start
            return Position(s.file, s.pos, str(self.gtids), 0, self.server_id,
                            server_uuid=self.server_uuid, xa=self._xa(), by_gtid=self.by_gtid)
        if self.in_tx:
            # Inside another domain's transaction, the ones to skip into still ride along. Not
            # yet past the rows an earlier run published of this one, the checkpoint still
            # says all of them: a commit there (with nothing of it published yet) must not
            # hand the next run a smaller skip.
            rows = self.tx_rows if self.tx_rows >= self.skip else self.skip
            return Position(self.tx_file, self.tx_start, str(self.gtids), rows, self.server_id,
                            tx_gtid=self.gtid or "", server_uuid=self.server_uuid, xa=self._xa(),
                            awaited=_awaited(self.awaited.items()) if self.awaited else None,
                            by_gtid=self.by_gtid)
        return Position(self.file, self.next_pos, str(self.gtids), 0, self.server_id,
                        server_uuid=self.server_uuid, xa=self._xa(), by_gtid=self.by_gtid)

    def _xa(self) -> Optional[Dict[str, List[Any]]]:
        return {k: list(v) for k, v in self.xa_pending.items()} if self.xa_pending else None


def _awaited(entries: Any) -> Optional[Dict[str, Dict[str, Any]]]:
    """``Position.awaited`` of the tracker's awaited (GTID, (rows, progress)) pairs."""
    out: Dict[str, Dict[str, Any]] = {}
    for gtid, (rows, progress) in entries:
        out[gtid] = {"rows": rows} if progress is None else {"rows": rows, "transaction": progress}
    return out or None
