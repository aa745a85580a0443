"""The binlog edge: a BinLogStreamReader that starts at a transaction start and never reconnects silently.

python-mysql-replication reconnects by itself after a dropped connection, resuming at the last
event it read, which can be in the middle of a transaction. We forbid that: a second stream
connection raises ``StreamInterrupted`` and the engine resumes from its last committed checkpoint.
"""
from __future__ import annotations

import copy
import logging
import os
import re
from typing import Any, Dict, Optional, Set, Tuple

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import MariadbAnnotateRowsEvent

from streamer.config import Config
from streamer.errors import (GtidsOutOfOrder, PatchTargetMissing, PurgedBinlog, ServerBehind,
                             ServerIdTaken, ServerUnreachable, SourceError, StreamInterrupted,
                             WithoutGtids)
from streamer.position import GtidSet, Position
from streamer.source import caughtup, events, failover, patches
from streamer.source.checksums import USE_CHECKSUM, BinlogConnection
from streamer.source.payload import TransactionPayloadEvent
from streamer.source.positions import ANNOTATE, Offsets, ask_for_annotations, writes_offsets
from streamer.source.server import (ER_ACCESS_DENIED, ER_MASTER_FATAL_READING_BINLOG,
                                    ER_SLAVE_SAME_ID, GTIDS_FIX, SAME_ID_TEXT, Connection, Secret,
                                    binlog_files, binlog_gtids, connect, connection_settings,
                                    is_mariadb, label, query_one, replica_with_id, server_id,
                                    server_uuid, unreachable, writes_gtids)

log = logging.getLogger(__name__)

# MySQL's refusals of a dump by GTID set for want of GTIDs (gtid_mode below ON): an anonymous
# transaction after the set (ER_CANT_REPLICATE_ANONYMOUS_WITH_AUTO_POSITION), or a mode that
# changed since the stream's start was checked.
NO_GTID_DUMP = re.compile(r"anonymous transaction when AUTO_POSITION|in AUTO_POSITION mode")
# MySQL's refusal of a transaction written under another gtid_mode than its own: an anonymous
# one once it is ON, one with a GTID once it is OFF (ER_CANT_REPLICATE_ANONYMOUS_WITH_GTID_MODE_ON,
# ER_CANT_REPLICATE_GTID_WITH_GTID_MODE_OFF), by any dump.
OTHER_MODE = re.compile(r"Cannot replicate .* when @@GLOBAL\.GTID_MODE")
# MariaDB's refusal of a dump by GTID set (in the strict mode the replication library asks
# for) that meets a higher sequence number of the domain before the set's own GTID
# (ER_GTID_START_FROM_BINLOG_HOLE): the server numbered the domain out of order.
HOLE = re.compile(r"missing the GTID \d+-\d+-\d+ requested by the slave \(even though")


class _NoLibraryReconnect(logging.Filter):
    """Drops the library's warning that it will ask for the stream again after a lost
    connection: the streamer refuses that reconnect (``_Connector``) and says so itself, in one
    line; the library's spans three, and names a reconnect that never happens."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Re-request the connection" not in str(record.msg)


logging.getLogger("pymysqlreplication").addFilter(_NoLibraryReconnect())


class _Connector:
    """The library's ``pymysql_wrapper``: the streamer's own connections, and a refusal of the
    library's silent stream reconnect."""

    def __init__(self) -> None:
        self.stream_connections = 0
        self.annotate = False  # ask for Annotate_rows events (source.positions)
        self.stream: Any = None  # the library's reader the stream connection is for

    def __call__(self, **kwargs: Any) -> Any:
        if "cursorclass" in kwargs:  # the control connection
            return Connection(**kwargs)
        self.stream_connections += 1
        if self.stream_connections > 1:
            # The library asks again only after losing the first (MySQL error 2013 or 2006).
            raise StreamInterrupted("the binlog connection was lost (the server closed it, or "
                                    "the network dropped it)")
        conn = BinlogConnection(**kwargs)
        conn.stream = self.stream
        caughtup.count_reads(conn)
        if self.annotate:
            ask_for_annotations(conn)
        return conn


class BinlogReader:
    """Iterates binlog events from a transaction start. Use as a context manager. ``start`` is
    where it reads from, once entered: on another server than the checkpoint's, its translation
    to a start by GTID set (``source.failover``)."""

    def __init__(self, cfg: Config, password: Secret, start: Position,
                 gtid_start: Optional[str] = None):
        self.cfg = cfg
        self.settings = connection_settings(cfg, password)
        # The server as the stream's errors and warnings name it.
        self.where = f"MySQL at {self.settings['host']}:{self.settings['port']}"
        self.start = start
        self.gtid_start = gtid_start
        self.server = "MySQL"  # its flavour and version, once connected (check_start)
        # On a server that doesn't write every event's offset: the offsets worked out.
        self.offsets: Optional[Offsets] = None
        self._stream: Optional[BinLogStreamReader] = None
        self._settings: Dict[str, Any] = {}

    def check_start(self) -> None:
        """Where to read on this server: a checkpoint written reading another server resumes
        here by its GTID set (``start`` becomes that translation). Refuses a start by GTID set
        that the server's binlog doesn't hold, and a start file the server no longer has,
        instead of silently skipping."""
        where = self.where
        try:
            conn = connect(self.settings)
        except pymysql.err.OperationalError as exc:
            if unreachable(exc):
                raise ServerUnreachable(f"{where} can't be connected to ({exc.args[0]}): "
                                        f"{exc.args[-1]}") from exc
            raise
        try:
            self.server = label(conn)
            self._check_id_free(conn, where)
            self.offsets = None if writes_offsets(conn) else Offsets()
            here, uuid = server_id(conn), server_uuid(conn)
            if failover.other_server(self.start, here, uuid):
                self.start = failover.translated(self.start, here, where, uuid)
                self.start.xa = failover.translated_xa(conn, self.start.xa, where)
                self.gtid_start = self.start.gtid_set
            self.start.server_uuid = uuid
            if self.gtid_start is not None and self.start.file and not self.start.by_gtid \
                    and not is_mariadb(conn) and self.start.file in binlog_files(conn):
                # On its own MySQL, a checkpoint its file places resumes by it: a dump by GTID
                # set leaves out, unsaid, any transaction without a GTID after it (written while
                # gtid_mode was below ON), where a dump by file sends it or refuses (_classify).
                # (Its file purged, the set may still place it: the server checks.)
                self.gtid_start = None
            elif self.gtid_start is not None and not writes_gtids(conn):
                self._by_file(conn, where)
            self._placed_by_file()  # also after a refusal of GTIDs (engine.supervisor.by_file)
            if self.gtid_start is not None:
                kept = failover.without_deleted_domains(conn, self.start, where)
                if kept is not self.start:
                    self.start, self.gtid_start = kept, kept.gtid_set
                if not self._behind_by_number_only(conn):
                    failover.check_contains(conn, self.gtid_start, where)
                    begun = failover.begun(self.start)
                    if begun:
                        failover.check_contains(conn, begun, where)
                    return
                self.gtid_start = None  # read by file; check_identity says why
                self._placed_by_file()
            files = binlog_files(conn)
            if self.start.file in files:
                self.start = failover.check_identity(conn, self.start, where)
        finally:
            conn.close()
        if self.start.file not in files:
            raise PurgedBinlog(
                f"binlog file {self.start.file} (resume position {self.start.describe()}) is no "
                f"longer on the server (it has {files[0] if files else 'none'} .. "
                f"{files[-1] if files else 'none'}); changes after that position are lost to "
                f"replication. Take a snapshot of the tables and restart from a new position "
                f"(streamer run --start-file/--start-pos), after raising the server's "
                f"binlog retention (expire_logs_days / binlog_expire_logs_seconds)")

    def _by_file(self, conn: Any, where: str) -> None:
        """A MySQL whose gtid_mode is not ON sends no binlog by GTID set: the stream resumes by
        its file and offset (they place it on this server), or, with none, can't."""
        row = query_one(conn, "SELECT @@GLOBAL.gtid_mode")
        mode = row[0] if row else "unknown"
        if not self.start.file:
            raise SourceError(
                f"{where} has gtid_mode {mode}: it sends its binlog by GTID set only when ON, "
                f"and the stream's position ({self.start.describe()}) has no binlog file of "
                f"this server to resume by: {GTIDS_FIX}, or start at an explicit binlog "
                f"position (streamer run --start-file/--start-pos)")
        self.gtid_start = None
        self._placed_by_file()
        log.warning("%s has gtid_mode %s: it sends its binlog by GTID set only when ON, so the "
                    "stream resumes by binlog file and offset, from %s", where, mode,
                    self.start.describe())

    def _behind_by_number_only(self, conn: Any) -> bool:
        """Whether this MariaDB's GTID position is below the start's by its numbers only: it
        logged a lower sequence number after higher ones (no gtid_strict_mode), and the start's
        file and offset are where its set was read (``failover.place_proven``). The server
        refuses a dump from a GTID position above its own, so the stream reads by file."""
        start = self.start
        if not start.file or not is_mariadb(conn) or start.file not in binlog_files(conn):
            return False
        mine = GtidSet(self.gtid_start or "")
        if not GtidSet(binlog_gtids(conn)).missing(mine):
            return False
        return failover.place_proven(conn, start.file, start.pos, mine)

    def _placed_by_file(self) -> None:
        """A start read by file whose checkpoint was read by GTID set (by_gtid) is placed by
        its file now, and says so."""
        if self.gtid_start is None and self.start.by_gtid:
            self.start = copy.copy(self.start)
            self.start.by_gtid = False

    def _check_id_free(self, conn: Any, where: str) -> None:
        """Refuses a server_id a registered replica of the server reads with: the server would
        end that replica's stream for the streamer's, and a MySQL replica stops replicating."""
        wanted = self.cfg.mysql.server_id
        replica = replica_with_id(conn, wanted)
        if replica:
            raise SourceError(
                f"replica {replica} of {where} reads its binlog as server_id {wanted}, the "
                f"streamer's mysql.server_id: connecting would end that replica's stream (a "
                f"MySQL replica stops replicating). Give the streamer a server_id of its own, "
                f"one no replica (SHOW REPLICAS) nor other streamer of this server uses")

    def __enter__(self) -> "BinlogReader":
        if not patches.applied():
            # Without them the library decodes some values wrong (negative TIME(fsp)).
            raise RuntimeError("source.patches.apply() must run before the binlog is read")
        self.check_start()
        settings = dict(self.settings)
        # A read timeout well above the heartbeat turns a silent network cut into an error.
        settings["read_timeout"] = max(10, int(self.cfg.mysql.heartbeat_s * 20))
        kwargs: Dict[str, Any] = {}
        if self.gtid_start is not None:
            kwargs["auto_position"] = self.gtid_start
            kwargs["is_mariadb"] = "-" in self.gtid_start.split(",")[0] and ":" not in self.gtid_start
        else:
            kwargs["log_file"] = self.start.file
            kwargs["log_pos"] = self.start.pos
            kwargs["resume_stream"] = True
        self._settings = settings
        self._stream = self.new_stream(settings, **kwargs)
        return self

    def new_stream(self, settings: Dict[str, Any], **kwargs: Any) -> BinLogStreamReader:
        """The library's reader of the binlog stream, as every stream of the streamer's is made
        (the warm-up's tests make one that never connects, to stand for a live reader's)."""
        read = events.READ
        connector = _Connector()
        if self.offsets is not None:  # the offsets need every event: Annotate_rows too
            read = read + [MariadbAnnotateRowsEvent]
            kwargs.update(ANNOTATE)
            connector.annotate = True
        stream = BinLogStreamReader(
            connection_settings=settings,
            server_id=self.cfg.mysql.server_id,
            blocking=True,
            only_events=read,
            filter_non_implemented_events=False,  # refused by name, never dropped
            slave_heartbeat=self.cfg.mysql.heartbeat_s,
            pymysql_wrapper=connector,
            enable_logging=False,
            **kwargs,
        )
        if not hasattr(stream, USE_CHECKSUM):
            raise PatchTargetMissing(f"BinLogStreamReader has no {USE_CHECKSUM}: source.checksums "
                                     f"can't tell it which events carry a checksum")
        connector.stream = stream
        return stream

    def __iter__(self) -> Any:
        assert self._stream is not None
        stream = self._stream if self.offsets is None else self.offsets.filled(self._stream)
        try:
            for event in stream:
                if event.__class__ is TransactionPayloadEvent:
                    yield from event.events  # a compressed transaction's own events
                    continue
                yield event
        except (pymysql.err.OperationalError, pymysql.err.InternalError) as exc:
            if not self._past_cut_off(exc):
                raise _classify(exc, self.start, self.gtid_start,
                                self.cfg.mysql.server_id) from exc
        else:
            return
        # Read on in the next binlog's stream (_past_cut_off): rare, so the loop above keeps
        # the shape PyPy compiles.
        yield from self

    def _past_cut_off(self, exc: Exception) -> bool:
        """A binlog that ends inside an event (its server stopped while writing it: a crash, a
        full disk), when a binlog follows it: read on from the next one's start, as the server
        sends a binlog that ends between events. The event cut off was never whole, nor the
        transaction it is in (the server rolled it back when it started again, and the next
        group's start takes back what the stream read of it: engine.stages.savepoints)."""
        found = cut_off(exc)
        if found is None:
            return False
        try:
            conn = connect(self.settings)
            try:
                files = binlog_files(conn)
            finally:
                conn.close()
        except pymysql.err.MySQLError:
            return False  # the server's refusal is what stops the stream, then
        later = files[files.index(found[0]) + 1:] if found[0] in files else []
        if not later:
            return False
        if found not in _SEEN_CUT_OFF:  # once: a stream read again passes it again
            _SEEN_CUT_OFF.add(found)
            log.warning("binlog %s ends inside an event, at byte %d (its server stopped while "
                        "writing it: the transaction it is in was rolled back when it started "
                        "again); reading on from the start of %s", found[0], found[1], later[0])
        self._stream.close()
        self._stream = self.new_stream(self._settings, log_file=later[0], log_pos=4,
                                       resume_stream=True)
        return True

    def more_arrived(self) -> bool:
        """Whether more of the stream has already arrived (source.caughtup says why that matters)."""
        return caughtup.more_arrived(getattr(self._stream, "_stream_connection", None))

    def arrives_within(self, seconds: float) -> bool:
        """Whether more of the stream arrives within ``seconds`` (source.caughtup)."""
        return caughtup.arrives_within(getattr(self._stream, "_stream_connection", None), seconds)

    def __exit__(self, *exc: Any) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None


_CUT_OFF = "binlog truncated in the middle of event"
_SEEN_CUT_OFF: Set[Tuple[str, int]] = set()  # (file, offset): said in this process's log
_LAST_READ = re.compile(r"last event read from '([^']+)' at (\d+)")


def cut_off(exc: Exception) -> Optional[Tuple[str, int]]:
    """The binlog file that ends inside an event, and the offset where that event begins, for
    the server's refusal to send such a binlog (ER_MASTER_FATAL_READING_BINLOG); None for any
    other error."""
    code = exc.args[0] if exc.args else None
    msg = str(exc.args[1]) if len(exc.args) > 1 else ""
    if code != ER_MASTER_FATAL_READING_BINLOG or _CUT_OFF not in msg:
        return None
    m = _LAST_READ.search(msg)
    return (os.path.basename(m.group(1)), int(m.group(2))) if m else None


def _classify(exc: Exception, start: Position, gtid_start: Optional[str] = None,
              own_id: Optional[int] = None) -> Exception:
    code = exc.args[0] if exc.args else None
    msg = exc.args[1] if len(exc.args) > 1 else str(exc)
    if code == ER_SLAVE_SAME_ID or (code == ER_MASTER_FATAL_READING_BINLOG and
                                    SAME_ID_TEXT in str(msg)):
        return ServerIdTaken(
            f"another client connected to read the binlog as server_id {own_id} "
            f"(mysql.server_id), and the server ended this stream for it ({code}: {msg}). "
            f"Every replica and streamer of a server needs a server_id of its own: give this "
            f"streamer one that no replica (SELECT @@server_id on each) nor other streamer uses. "
            f"Until then the two take the stream from each other, and this one waits longer "
            f"each time")
    found = cut_off(exc)
    if found is not None:  # and no binlog after it (BinlogReader._past_cut_off)
        return PurgedBinlog(
            f"binlog {found[0]} ends inside an event, at byte {found[1]}, and no binlog follows "
            f"it: the server stopped while writing it (a crash, a full disk), and hasn't started "
            f"a new one. Start the server again (with room on its disk): the stream then reads "
            f"on from its next binlog")
    if code == ER_MASTER_FATAL_READING_BINLOG and OTHER_MODE.search(str(msg)):
        return SourceError(
            f"MySQL refuses to send the binlog after {start.describe()}: {msg}. Its binlog "
            f"holds transactions written under another gtid_mode than its own now, which it "
            f"sends no replica: the stream had not read them when gtid_mode was changed "
            f"(MySQL's steps between OFF and ON wait for every replica to read them). Set "
            f"gtid_mode back one step (to ON_PERMISSIVE from ON, OFF_PERMISSIVE from OFF) until "
            f"the stream has read past them; if that can't be, take a snapshot of the tables "
            f"and restart from a new position")
    if code == ER_MASTER_FATAL_READING_BINLOG and gtid_start and NO_GTID_DUMP.search(str(msg)):
        return WithoutGtids(
            f"MySQL stopped sending the binlog by GTID set {gtid_start}: {msg}. Transactions "
            f"without a GTID (written while its gtid_mode was below ON) follow the stream's "
            f"place: it resumes by binlog file and offset")
    if code == ER_MASTER_FATAL_READING_BINLOG and gtid_start and start.file and \
            HOLE.search(str(msg)):
        return GtidsOutOfOrder(
            f"MariaDB refuses to send the binlog after GTID set {gtid_start}: {msg}. Its binlog "
            f"numbers a GTID domain's transactions out of order (a lower sequence number logged "
            f"after higher ones, as it allows without gtid_strict_mode), which a dump by GTID "
            f"set can't pass: the stream resumes by binlog file and offset at its own place "
            f"{start.file}:{start.pos}, checked against the server's binlog first")
    if code == ER_MASTER_FATAL_READING_BINLOG and gtid_start:
        # A dump by GTID set the server refuses: its binlog doesn't hold the set's transactions
        # as this set names them (purged, or a history that went another way): the next server
        # of mysql.hosts may.
        return ServerBehind(
            f"the server refuses to send the binlog after GTID set {gtid_start}: {msg}. Its "
            f"binlog lacks transactions the stream already published (purged, or a replica "
            f"promoted while they were missing). Point mysql.hosts at a server that has them; "
            f"if they are lost for good, take a snapshot and restart from a new position")
    if code == ER_MASTER_FATAL_READING_BINLOG:
        return PurgedBinlog(
            f"the server cannot send the binlog from {start.describe()}: {msg}. If the file was "
            f"purged, take a snapshot of the tables and restart from a new position")
    if code in ER_ACCESS_DENIED:
        return SourceError(f"MySQL refused the streamer's user: {msg}. Grant it SELECT, "
                           f"REPLICATION SLAVE, REPLICATION CLIENT ON *.*")
    return StreamInterrupted(f"binlog connection failed ({code}): {msg}")
