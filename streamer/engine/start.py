"""Where a run starts: the source's checks and the start position, read side by side with Kafka's,
and the reconnect backoff."""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Dict, Generic, List, NamedTuple, Optional, Tuple, TypeVar

import pymysql

from streamer.config import Config
from streamer.errors import SourceError
from streamer.position import Position
from streamer.source import charsets, collations, failover, rowless, server, sqltext

log = logging.getLogger(__name__)

T = TypeVar("T")


class Ahead(Generic[T]):
    """``fn()`` run in a thread started now; ``result()`` waits for it and returns its value or
    raises its exception. Start-up waits on MySQL and Kafka round trips that don't depend on
    each other; side by side they cost the longer of the two, not the sum. (Not a
    concurrent.futures executor: its threads are joined at exit, so a probe stuck connecting to
    an unreachable MySQL would hold up a streamer that is exiting on a Kafka error.)"""

    def __init__(self, fn: Callable[[], T], name: str) -> None:
        self._value: Optional[T] = None
        self._exc: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, args=(fn,), name=name, daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[[], T]) -> None:
        try:
            self._value = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller of result()
            self._exc = exc

    def done(self) -> bool:
        """Whether ``result()`` would return at once."""
        return not self._thread.is_alive()

    def result(self) -> T:
        self._thread.join()
        if self._exc is not None:
            raise self._exc
        return self._value  # type: ignore[return-value]


class SourceInfo(NamedTuple):
    """What the start position needs from MySQL, read once the settings are known to be right."""
    server_id: int
    end: Optional[Tuple[str, int]]  # SHOW MASTER STATUS, for start.initial: end
    first_file: Optional[str]  # the oldest binlog, for start.initial: beginning
    # start.initial: snapshot, the tables to snapshot (read only when there is no checkpoint)
    snapshot: Optional[Callable[[], List[Dict[str, Any]]]] = None
    # The executed GTID set at an explicit start's file and offset (None: the server can't
    # tell, or there is no such start); at ``end`` on MySQL, as its binlog status gave it with
    # the end; and ways to ask for it at any file and offset (MariaDB), and to make the
    # status's exactly the end's (MySQL, server.settled_gtids), used by a first start only.
    explicit_gtids: Optional[str] = None
    end_gtids: Optional[str] = None
    gtids_at: Optional[Callable[[str, int], Optional[str]]] = None
    settle: Optional[Callable[[Tuple[str, int], str], Tuple[str, bool]]] = None


def probe_source(cfg: Config, password: server.Secret,
                 table_filter: Optional[Callable[[str, str], bool]] = None,
                 explicit: Optional[Tuple[str, int]] = None,
                 explicit_gtid: Optional[str] = None) -> SourceInfo:
    """Check that MySQL is set up for row-based CDC and read what a start position needs;
    ``explicit`` is the file and offset of an explicit start, if one was given, and
    ``explicit_gtid`` the GTID set of one by set. What the server can't start from is refused
    here, before the start is committed as the stream's checkpoint."""
    conn = server.connect(server.connection_settings(cfg, password))
    try:
        problems = server.settings_problems(conn)
        if problems:
            raise SourceError("the MySQL source is not set up for row-based CDC: " +
                              "; ".join(problems))
        warn_without_gtids(conn, cfg)
        if table_filter is not None:
            warn_of_unlogged(server.connection_settings(cfg, password), table_filter,
                             [cfg.heartbeat.database, cfg.snapshot.database],
                             no_table_matched(cfg))
        # The charsets Python decodes otherwise than the server: by the server's tables, asked
        # of the server in use when a value first needs one (after a failover, the new one).
        charsets.configure(lambda: server.connection_settings(cfg, password), server.connect)
        collations.register(conn, server.is_mariadb(conn))
        case = server.names_case(conn)
        sqltext.FOLD_NAMES = case == "1"
        if case == "2":
            log.warning("%s (MySQL at %s:%d)", server.NAMES_CASE_2, cfg.mysql.host, cfg.mysql.port)
        initial = cfg.start.initial
        beginning = initial == "beginning"
        snapshot = None
        settings = server.connection_settings(cfg, password)
        if initial == "snapshot":
            assert table_filter is not None
            from streamer.engine.snapshot import initial_jobs
            taken = table_filter
            snapshot = _on_its_own(settings, lambda listing: initial_jobs(listing, taken))
        # (Here, where the producer's start runs alongside, not after it.)
        if explicit:
            server.check_transaction_start(conn, *explicit)
        other = failover.another_kinds(conn, explicit_gtid, f"MySQL at {cfg.mysql.host}:"
                                       f"{cfg.mysql.port}") if explicit_gtid else None
        if other is not None:
            raise SourceError(other)
        at_explicit = server.executed_gtids(conn, *explicit) if explicit else None
        gtids_at = _on_its_own(settings, server.executed_gtids)
        if beginning:
            return SourceInfo(server.server_id(conn), None, server.binlog_files(conn)[0],
                              snapshot, at_explicit, None, gtids_at)
        end, gtids = server.end_gtids(conn)
        return SourceInfo(server.server_id(conn), end, None, snapshot, at_explicit, gtids,
                          gtids_at, _on_its_own(settings, server.settled_gtids))
    finally:
        conn.close()


def _on_its_own(settings: Dict[str, Any], fn: Callable[..., T]) -> Callable[..., T]:
    """``fn(conn, *args)`` as a function of ``args`` that opens a connection of its own for each
    call: asked later, when the probe's is closed."""
    def call(*args: Any) -> T:
        conn = server.connect(settings)
        try:
            return fn(conn, *args)
        finally:
            conn.close()
    return call


def warn_without_gtids(conn: Any, cfg: Config) -> None:
    """Name what a server without GTIDs (MySQL's gtid_mode OFF) takes from the settings that
    need them: they are not refused, as the stream itself works, but they don't do what they
    say."""
    if server.writes_gtids(conn):
        return
    where = f"MySQL at {cfg.mysql.host}:{cfg.mysql.port} writes no GTIDs (gtid_mode is not ON)"
    fix = server.GTIDS_FIX
    if len(cfg.mysql.hosts) > 1:
        log.warning("mysql.hosts names %d servers, and %s: a switch to another server will be "
                    "refused, as a checkpoint without GTIDs has no place in another server's "
                    "binlog. To fail over, %s", len(cfg.mysql.hosts), where, fix)
    if cfg.mysql.position_mode == "gtid":
        log.warning("mysql.position_mode is gtid, and %s: checkpoints carry a binlog file and "
                    "offset only, and resume by them. To resume by GTID, %s", where, fix)


def no_table_matched(cfg: Config) -> str:
    """What to say when the config's table patterns take no table the server shows the
    streamer's user: a typo in them, or a missing grant, would otherwise publish nothing
    without a word."""
    return (f"tables.include {list(cfg.tables.include)} (less tables.exclude "
            f"{list(cfg.tables.exclude)}) takes no table that MySQL at {cfg.mysql.host}:"
            f"{cfg.mysql.port} shows the streamer's user now: nothing is published until such a "
            f"table is created. If that isn't meant, check the patterns (db.table globs) and the "
            f"user's SELECT grant (a table it may not read is not shown to it)")


def warn_of_unlogged(settings: Dict[str, Any], published: Callable[[str, str], bool],
                     own: List[str], none_said: str = "") -> None:
    """Name what the binlog will not show of the published tables (source.rowless): tables
    whose rows foreign keys' actions change, and tables or the streamer's own databases that
    the binlog's filters leave out; and ``none_said`` when no table is published at all. From a
    thread of its own: on a server of many tables information_schema takes its time, and the
    stream does not wait for a warning."""
    def look() -> None:
        try:
            conn = server.connect(settings)
            try:
                if none_said and not server.user_tables(conn, published):
                    log.warning(none_said)
                left_out = rowless.left_out(conn, published, own)
                if left_out:
                    log.warning(left_out)
                for table, said in rowless.cascades_said(rowless.cascading(conn, published)):
                    log.warning("%s: %s", table, said, extra={"table": table})
            finally:
                conn.close()
        except pymysql.err.MySQLError as exc:  # only a warning lost: said, and the stream goes on
            log.warning("the binlog filters and foreign keys of the published tables were not "
                        "looked up (%s): `streamer check` lists what the topics can't follow",
                        exc)
    threading.Thread(target=look, name="streamer-unlogged", daemon=True).start()


def explicit_start(cfg: Config, override: Optional[Position]) -> Optional[Tuple[str, int]]:
    """The binlog file and offset of an explicit start (argv, else start.file), if any."""
    if override is not None and override.file:
        return override.file, override.pos
    if cfg.start.file:
        return cfg.start.file, cfg.start.pos
    return None


def explicit_gtid(cfg: Config, override: Optional[Position],
                  override_gtid: Optional[str]) -> Optional[str]:
    """The GTID set of an explicit start by set (argv, else start.gtid), if any: as
    ``initial_position`` takes it, a start file (argv or start.file) comes first."""
    if override_gtid is not None:
        return override_gtid
    if override is None and not cfg.start.file:
        return cfg.start.gtid
    return None


def is_explicit(cfg: Config, override: Optional[Position],
                override_gtid: Optional[str]) -> bool:
    """Whether a start position was given (argv, or start.file/start.gtid in the config)."""
    return bool(override is not None or override_gtid is not None or cfg.start.file
                or cfg.start.gtid)


def initial_position(cfg: Config, checkpoint: Optional[Position], source: SourceInfo,
                     override: Optional[Position], override_gtid: Optional[str]) -> Position:
    """The explicit start position if one was given (it overrides the checkpoint, loudly), else
    the committed checkpoint, else the end or the beginning of the binlog (start.initial)."""
    start_cfg = cfg.start
    if is_explicit(cfg, override, override_gtid):
        pos = override
        if pos is None and start_cfg.file:
            pos = Position(start_cfg.file, start_cfg.pos)
        gtid = explicit_gtid(cfg, override, override_gtid)
        if gtid is not None:
            pos = Position("", 4, gtid_set=gtid)
        assert pos is not None
        if pos.file and not pos.gtid_set and source.explicit_gtids:
            pos.gtid_set = source.explicit_gtids
        log.warning("!!! explicit start position %s OVERRIDES the committed checkpoint %s !!!",
                    pos.describe(), checkpoint.describe() if checkpoint else "(none)",
                    extra={"position": pos.describe()})
        pos.server_id = source.server_id
        if checkpoint is not None and checkpoint.snapshot is not None:
            # Snapshots don't depend on the binlog position: the ones under way go on from
            # their last committed chunk.
            pos.snapshot = checkpoint.snapshot
        return pos
    if checkpoint is not None:
        log.info("resuming from committed checkpoint %s", checkpoint.describe(),
                 extra={"position": checkpoint.describe()})
        return checkpoint
    # The first checkpoint carries the server's whole executed set at that point, not only the
    # GTIDs read after it: a resume by GTID (another server after a failover) must not be sent
    # again what came before the start.
    if source.first_file is not None:
        pos = Position(source.first_file, 4)
    else:
        assert source.end is not None
        gtids, exact = source.end_gtids, True
        if gtids is not None and source.settle is not None:
            gtids, exact = source.settle(source.end, gtids)
        # MySQL, when the set at the end's offset could not be told exactly: the set alone, as
        # MySQL's replicas start. The server sends every transaction not in it (reading its
        # binlog file up to them first); the file and offset come with the first events. The
        # offset with a set lacking transactions before it would never read them, yet a resume
        # by GTID would be sent them then.
        pos = Position(*source.end, gtid_set=gtids or "") if exact or not gtids else \
            Position("", 4, gtid_set=gtids)
    if not pos.gtid_set and source.gtids_at is not None:
        pos.gtid_set = source.gtids_at(pos.file, pos.pos) or ""
    pos.server_id = source.server_id
    if source.snapshot is not None:
        jobs = source.snapshot()
        pos.snapshot = {"queue": jobs, "done": 0, "rows": 0}
        log.info("no checkpoint for source %s: snapshotting %d tables, then streaming from the "
                 "end of the binlog, %s", cfg.source.name, len(jobs), pos.describe(),
                 extra={"position": pos.describe()})
        return pos
    log.info("no checkpoint for source %s: starting at the %s of the binlog, %s",
             cfg.source.name, start_cfg.initial, pos.describe(),
             extra={"position": pos.describe()})
    return pos


def check_unused(cfg: Config, records: List[Dict[str, Any]],
                 table_filter: Callable[[str, str], bool]) -> None:
    """With no checkpoint of this source, a start at the binlog's end is refused when the
    namespace's schema topic shows its tables were published already: the checkpoint is missing
    (a read that failed, a topic recreated), and starting at the end would skip every change
    since it, silently. A first start of a source finds none of its tables there."""
    ns = cfg.namespace
    published = set()
    for rec in records:
        topic = str(rec.get("topic") or "")
        if rec.get("kind") == "value" and topic.startswith(ns + "."):
            db, _, table = topic[len(ns) + 1:].partition(".")
            if table and table_filter(db, table):
                published.add(f"{db}.{table}")
    if not published:
        return
    names = ", ".join(sorted(published)[:5]) + (" ..." if len(published) > 5 else "")
    raise SourceError(
        f"no checkpoint of source {cfg.source.name!r} was found in {ns}.__positions, but "
        f"namespace {ns!r} has published its tables already ({names}): the checkpoint is "
        f"missing, and starting at the binlog's end (start.initial: end) would skip every "
        f"change since it. Start once at an explicit position: the source.file and source.pos "
        f"(or source.gtid) of the last message in those topics (streamer run --start-file/"
        f"--start-pos or --start-gtid), or set start.initial: snapshot to read the tables anew")


def gtid_for(cfg: Config, position: Position) -> Optional[str]:
    """The GTID set to resume by, or None to resume by file/offset."""
    if position.gtid_set and (not position.file or position.by_gtid or
                              cfg.mysql.position_mode == "gtid"):
        return position.gtid_set
    return None


# A wrong user or password, or no TLS for an account that requires it: the server words the two
# alike ("Access denied for user").
ER_ACCESS_DENIED_ERROR = 1045


def refusal(exc: Any, mysql: Any) -> Optional[SourceError]:
    """The error that ends a start at once for a MySQL error no retry will fix, or None."""
    code = exc.args[0] if exc.args else None
    where = f"MySQL at {mysql.host}:{mysql.port}"
    if code in server.ER_LOGIN_REFUSED:
        # An account created or altered with REQUIRE SSL (or X509...) is refused without TLS
        # as a wrong password is: the server says only "Access denied".
        tls = (f"; with mysql.tls.mode {mysql.tls.mode}, also that it doesn't require TLS "
               f"(REQUIRE SSL or X509 in SHOW CREATE USER): if it does, set mysql.tls.mode to "
               f"required, verify_ca or verify_identity"
               if code == ER_ACCESS_DENIED_ERROR and mysql.tls.mode == "disabled" else "")
        return SourceError(f"{where} refused the streamer's user {mysql.user!r}: "
                           f"{exc.args[-1]}. Check mysql.user and mysql.password_file, "
                           f"and that the account exists and is not locked{tls}")
    if code == server.ER_SECURE_TRANSPORT_REQUIRED:
        return SourceError(f"{where} takes only connections over TLS (require_secure_transport "
                           f"is ON), and mysql.tls.mode is {mysql.tls.mode}: {exc.args[-1]}. Set "
                           f"mysql.tls.mode to required, verify_ca or verify_identity")
    if code in server.ER_ACCESS_DENIED:
        return SourceError(f"{where}: the streamer's user {mysql.user!r} lacks a "
                           f"privilege: {exc.args[-1]}. Grant it SELECT, REPLICATION "
                           f"SLAVE, REPLICATION CLIENT ON *.*")
    return None
