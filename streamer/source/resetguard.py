"""A binlog reset under a running stream (``RESET MASTER``, MySQL 8.4's ``RESET BINARY LOGS
AND GTIDS``). The server deletes its binlog files and writes on in new ones from the first
number, its GTID state begun anew, while the stream's dump thread goes on reading the old file,
unlinked but open to it, which no write reaches any more: the stream sat caught up, its lag 0,
and published nothing again, unsaid (MariaDB 10.11 and MySQL 8.0 alike). A restart is refused
(source.failover.check_identity); a running stream never restarts by itself.

So, while the stream is caught up with nothing open, at most every ``CHECK_S``, the guard asks
the server for its binlog files and GTID set and compares them with where the stream is
(``reset_seen``); a reset found stops the stream (exit 3), naming the ways on.
"""
from __future__ import annotations

import logging
import re
from typing import Any, Callable, List, Optional, Sequence, Tuple

import pymysql

from streamer.errors import SourceError
from streamer.position import GtidSet
from streamer.source import failover, server
from streamer.source.filestart import deleted_domains, last_seqs

log = logging.getLogger(__name__)

CHECK_S = 5.0

_NUMBERED = re.compile(r"^(.*)\.(\d+)$")


def _number(file: str) -> Tuple[str, int]:
    m = _NUMBERED.match(file)
    return (m.group(1), int(m.group(2))) if m else (file, -1)


def reset_seen(files: Sequence[Tuple[str, int]], file: Optional[str], pos: int,
               stream_gtids: str, server_gtids: str) -> Optional[str]:
    """Why the server's binlog, as ``files`` (SHOW BINARY LOGS: name, size) and its GTID set
    ``server_gtids`` say, can't be the one the stream reads (at ``pos`` of ``file``, None when
    no event has placed it there yet, having read ``stream_gtids``); None when it can. Files
    only grow, a purge keeps the file being written, and the set only grows."""
    sizes = dict(files)
    if file is not None and file in sizes and sizes[file] < pos:
        return (f"its binlog {file} is {sizes[file]} bytes long now, where the stream has read "
                f"it to byte {pos}")
    base, number = _number(file or "")
    if file is not None and file not in sizes and files and all(
            _number(name)[0] == base and _number(name)[1] < number for name, _ in files):
        return (f"its binlog files are {files[0][0]} .. {files[-1][0]} now, none of them "
                f"{file}, which the stream reads, nor any after it")
    if stream_gtids:
        lacks = GtidSet(server_gtids).missing(GtidSet(stream_gtids))
        if lacks:
            return (f"its binlog's GTID set ({server_gtids or 'empty'}) lacks transactions the "
                    f"stream has read ({'; '.join(lacks)})")
    return None


class ResetGuard:
    """Checks, from the stream's idle moments, that the server's binlog is still the one the
    stream reads. ``connect()`` opens a connection to the server in use; ``monotonic()`` tells
    the time."""

    def __init__(self, connect: Callable[[], Any], monotonic: Callable[[], float]) -> None:
        self.connect = connect
        self.monotonic = monotonic
        self.conn: Any = None
        self.next_at = 0.0
        self._proven: Tuple[str, ...] = ()  # the shortfall last proven no reset

    def hook(self, tracker: Any, where: str) -> Callable[[], bool]:
        """The policy's idle hook for one connection's ``tracker`` (file, next_pos, gtids;
        placed once an event of the server's places it: a dump by GTID set opens elsewhere),
        on the server ``where``; it stays (returns False). A new connection's server may be
        another (source.failover): the guard connects to it anew."""
        self.close()

        def idle() -> bool:
            now = self.monotonic()
            if now >= self.next_at:
                self.next_at = now + CHECK_S
                self.check(tracker.file if tracker.placed else None, tracker.next_pos,
                           str(tracker.gtids), where, tracker.forget_domains)
            return False
        return idle

    def check(self, file: Optional[str], pos: int, gtids: str, where: str,
              forget: Callable[[List[int]], None]) -> None:
        """Stop the stream if the server's binlog was reset under it; MariaDB GTID domains the
        server deleted from its binlog instead (``_deleted``) are left out of its position
        (``forget``)."""
        if not file and not gtids:
            return
        try:
            if self.conn is None:
                self.conn = self.connect()
            with self.conn.cursor() as cur:
                cur.execute("SHOW BINARY LOGS")
                files: List[Tuple[str, int]] = [(r[0], int(r[1])) for r in cur.fetchall()]
            have = server.binlog_gtids(self.conn) if gtids else ""
            gone = self._deleted(gtids, have, file)
            if gone:
                left = GtidSet(gtids)
                left.drop_domains(gone)
                gtids = str(left)
            why = reset_seen(files, file, pos, gtids, have)
            if why is not None and self._numbered_out_of_order(file, pos, gtids, have, where):
                why = None
        except pymysql.err.MySQLError as exc:
            # A lost connection says nothing of the binlog: the stream's own will tell.
            log.debug("the binlog reset check could not read the server: %s", exc)
            self.close()
            return
        if gone:
            forget(gone)
        if why is not None:
            first = files[0][0] if files else "its first binlog"
            raise SourceError(
                f"the binlog of {where} was reset under the stream (RESET MASTER, or a restore): "
                f"{why}. The server writes its changes in new files, which this stream's reader "
                f"does not follow. If the stream had read the old binlog to its end (the "
                f"published tables' changes before the reset are in their topics), restart from "
                f"the new binlog's start (streamer run --start-file {first} --start-pos 4); "
                f"otherwise take a snapshot of the tables and restart from a new position")

    def _numbered_out_of_order(self, file: Optional[str], pos: int, gtids: str, have: str,
                               where: str) -> bool:
        """Whether the server's GTID set is below the stream's by its numbers only: MariaDB
        without gtid_strict_mode logged a lower sequence number after ones the stream read, and
        the stream's place is where its set was read (``failover.place_proven``). Proven once
        for each shortfall: while the same domains stay behind by the same numbers, no query
        reads the file again."""
        mine = GtidSet(gtids)
        behind = tuple(GtidSet(have).missing(mine))
        if not behind or file is None:
            return False
        if behind == self._proven:
            return True
        if not failover.place_proven(self.conn, file, pos, mine):
            return False
        self._proven = behind
        log.warning("%s numbers a GTID domain's transactions out of order (a lower sequence "
                    "number logged after ones the stream read, as it allows without "
                    "gtid_strict_mode): %s. The stream's place %s:%d is where it read its GTID "
                    "position (BINLOG_GTID_POS): no reset; the stream goes on", where,
                    "; ".join(behind), file, pos)
        return True

    def _deleted(self, gtids: str, have: str, file: Optional[str]) -> List[int]:
        """The MariaDB GTID domains the stream read that the server deleted from its binlog
        (FLUSH BINARY LOGS DELETE_DOMAIN_ID, source.failover.deletion_proven): no reset. The
        stream reading by file leaves them out as it reads the file the deletion begins
        (engine.tracker); one reading by GTID set, whose files may be another server's older
        ones, only once the server's own set confirms it, here."""
        mine = GtidSet(gtids)
        gone = deleted_domains(mine, last_seqs(GtidSet(have))) if mine.mariadb else []
        if gone and failover.deletion_proven(self.conn, mine, gone, file):
            return gone
        return []

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:  # noqa: BLE001 - a broken connection is closed already
                pass
            self.conn = None
