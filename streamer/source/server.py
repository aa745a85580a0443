"""The MySQL server the binlog comes from: connections, its settings for row-based CDC, its binlog
files, and the error codes that mean a retry won't help."""
from __future__ import annotations

import io
import itertools
import logging
import re
import socket
import ssl
import time
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Tuple, Union

import pymysql

from streamer import config as config_mod
from streamer.config import Config
from streamer.errors import ConfigError, PurgedBinlog, SourceError
from streamer.position import GtidSet
from streamer.source import logins

log = logging.getLogger(__name__)

ER_MASTER_FATAL_READING_BINLOG = 1236
ER_ACCESS_DENIED = (1045, 1044, 1227, 1142, 1143)
# Wrong user or password; an account locked (MariaDB's code, MySQL's).
ER_LOGIN_REFUSED = (1045, 4151, 3118)
ER_SECURE_TRANSPORT_REQUIRED = 3159  # MySQL's require_secure_transport, met without TLS
ER_BAD_DB = 1049
ER_NO_SUCH_TABLE = 1146
ER_READ_ONLY = 1290  # the server runs with --read-only (or super_read_only)
ER_BINLOG_READ = 1220  # SHOW BINLOG EVENTS at an offset where no event starts
CR_MIN = 2000  # codes from here on are the client's: the connection, not the statement
CR_END = 3000  # ...up to here: MySQL's server codes go on from 3000, MariaDB's own from 4000
# The server's codes that end the connection, not the statement: it closes the connection after
# sending one. MariaDB's ER_CONNECTION_KILLED and MySQL's ER_SESSION_WAS_KILLED (KILL of a
# session whose statement runs), both servers' ER_SERVER_SHUTDOWN, and MySQL 8.0.24+'s
# ER_CLIENT_INTERACTION_TIMEOUT (wait_timeout; 4031 is another error on MariaDB, so its words
# tell them apart).
ER_CONNECTION_KILLED = 1927
ER_SESSION_WAS_KILLED = 3169
ER_SERVER_SHUTDOWN = 1053
ER_CLIENT_INTERACTION_TIMEOUT = 4031
# Another replica connected with this stream's server_id, and the server ended this stream for
# it: MariaDB's own code, MySQL's 1236 with this in its text (5.7's to 9.x's wording).
ER_SLAVE_SAME_ID = 4052
SAME_ID_TEXT = "same server_uuid/server_id"
ER_PARSE = 1064


# A password: a string, or one read for each connection (Password).
Secret = Union[str, Callable[[], str]]


class Password:
    """The streamer's MySQL password, read again from mysql.password_file for each connection: a
    password rotated while the stream runs (ALTER USER, and the file rewritten, as a secrets
    agent does) is taken at the next reconnect, where a copy read once at the start failed every
    reconnect ("Access denied") until a restart. From mysql.password_env, read once: a process's
    environment doesn't change. Never shown (``repr``)."""

    def __init__(self, cfg: Config) -> None:
        self._cfg = cfg
        self._last = config_mod.mysql_password(cfg)  # none at all: refused at the start

    def __call__(self) -> str:
        if self._cfg.mysql.password_file:
            self._last = config_mod.read_again(lambda: config_mod.mysql_password(self._cfg),
                                               self._last, "connecting with the password")
        return self._last

    def __repr__(self) -> str:
        return "Password(mysql.password_file)" if self._cfg.mysql.password_file else \
            "Password(mysql.password_env)"


def connection_settings(cfg: Config, password: Secret) -> Dict[str, Any]:
    """PyMySQL's settings for a connection to the source; ``password`` a string, or a Password
    read now."""
    m = cfg.mysql
    if callable(password):
        password = password()
    return dict({"host": m.host, "port": m.port, "user": m.user, "password": password,
                 "connect_timeout": m.connect_timeout_s}, **tls_options(cfg))


_TLS_CONTEXTS: Dict[Tuple, ssl.SSLContext] = {}


def tls_options(cfg: Config) -> Dict[str, Any]:
    """The pymysql options of ``mysql.tls`` (config.py), for every connection to the source.

    Beyond ``preferred`` (pymysql's own default: TLS when the server offers it, nothing
    verified), the connection refuses a server without TLS; ``verify_ca`` checks the server's
    certificate against ``ca``, and ``verify_identity`` also that it was issued to ``mysql.host``.
    One context per setting and process: building one is the cost of a connection."""
    tls = cfg.mysql.tls
    mode = tls.mode
    if mode == "disabled":
        return {"ssl_disabled": True}
    if mode == "preferred":
        return {}
    key = (mode, tls.ca, tls.cert, tls.key)
    ctx = _TLS_CONTEXTS.get(key)
    if ctx is None:
        if mode == "required":
            ctx = _unverified_tls()
        else:
            try:
                ctx = ssl.create_default_context(cafile=tls.ca)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(f"config key 'mysql.tls.ca': cannot load {tls.ca}: "
                                  f"{exc}") from None
            ctx.check_hostname = mode == "verify_identity"
            ctx.verify_flags &= ~ssl.VERIFY_X509_STRICT
        if tls.cert:
            try:
                ctx.load_cert_chain(tls.cert, tls.key)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(f"config keys 'mysql.tls.cert'/'key': cannot load "
                                  f"{tls.cert} and {tls.key}: {exc}") from None
        _TLS_CONTEXTS[key] = ctx
    return {"ssl": ctx}


_PREFERRED_TLS: List[ssl.SSLContext] = []


def _unverified_tls() -> ssl.SSLContext:
    """What pymysql builds for TLS with no option given, less the CA bundle it loads and, with
    verification off, never consults."""
    # The stdlib's unverified sibling of create_default_context: the same protocol and options
    # for this Python version, and no CA bundle when nothing is verified (PEP 476).
    ctx = ssl._create_unverified_context()
    ctx.verify_flags &= ~ssl.VERIFY_X509_STRICT
    ctx.options |= ssl.OP_NO_SSLv2 | ssl.OP_NO_SSLv3
    return ctx


LONGEST_WAIT_S = 31536000  # wait_timeout's maximum on both servers
NO_LIMIT = 18446744073709551615  # sql_select_limit's default: none

# What every streamer session sets over the server's defaults, which a DBA may have lowered for
# the applications' sessions. wait_timeout: a streamer connection may sit idle for days (the
# table definitions' until the next DDL, a snapshot's between requests), and a server's low one
# closed it, its next use restarting the stream. sql_select_limit: a global one cut every
# SELECT without a LIMIT, the setup checks' and the table definitions' reads among them;
# sql_big_selects: a global max_join_size refused a read that examines more rows. The time
# limit on a statement (a global max_statement_time, MySQL's max_execution_time) stopped a
# read as long as its table; a chunk's own, snapshot.chunk_timeout_s, is set per statement.
SESSION = (f"wait_timeout = {LONGEST_WAIT_S}, sql_select_limit = {NO_LIMIT}, "
           "sql_big_selects = 1, ")
NO_TIME_LIMIT = {True: "max_statement_time = 0", False: "max_execution_time = 0"}


class Connection(pymysql.connections.Connection):
    """Every connection the streamer makes to MySQL. pymysql 1.2 prefers TLS when no TLS option
    is given, and builds a new context for it on every connection, loading the system's CA bundle
    although that context verifies nothing (no CA given: CERT_NONE): ~60 ms a connection, four
    connections a start (docs/benchmarks.md, "Start-up"). Here that context is built once and
    shared, without the bundle; what is done with a server that offers TLS, and one that does
    not, is unchanged. (source.patches checks that pymysql still has the methods overridden.)

    A login by RSA (MySQL 8's caching_sha2_password without TLS) is encrypted by source.logins
    where PyMySQL has no ``cryptography`` to do it.

    Each session sets ``SESSION`` over the server's defaults (MySQL refuses an expression
    there: the values are literals); a refusal leaves the server's, logged."""

    def connect(self, sock: Any = None) -> None:
        logins.install()
        super().connect(sock)
        mariadb = "MariaDB" in (self.server_version or "")
        settings = SESSION + NO_TIME_LIMIT[mariadb]
        if self.autocommit_mode is not None:
            # The server's init_connect runs after the login's OK packet, whose status pymysql
            # took for the session's: an init_connect's 'SET autocommit=0' left a snapshot
            # request and watermark uncommitted, rolled back at close (the request's CLI said
            # it was made, and nothing came).
            settings += f", autocommit = {int(self.autocommit_mode)}"
        try:
            with self.cursor() as cur:
                cur.execute("SET SESSION " + settings)
        except pymysql.err.MySQLError as exc:
            log.warning("the session keeps the server's wait_timeout, sql_select_limit, "
                        "sql_big_selects, statement time limit and autocommit: %s", exc)

    def _create_ssl_ctx(self, sslp: Any) -> Any:
        if isinstance(sslp, dict) and not sslp:  # preferred TLS, no option given
            if not _PREFERRED_TLS:
                _PREFERRED_TLS.append(_unverified_tls())
            return _PREFERRED_TLS[0]
        return super()._create_ssl_ctx(sslp)


def connect(settings: Dict[str, Any]) -> Connection:
    return Connection(autocommit=True, **settings)


# -- a connection's reader ------------------------------------------------------------------------
# The binlog stream's connection (source.caughtup, counting what it reads) and a snapshot's chunk
# connection (source.textrows) get, once connected, a reader that asks the kernel for READ_BUFFER
# bytes at a time (pymysql's reads 8 KB): a wide snapshot's 255 MB took ~32,000 reads. Reading a
# 300,000-row SELECT of the wide table's rows (PyPy, CPU a row, medians of 5): 0.70 µs with 8 KB,
# 0.64 with 64 KB, 0.60 with 256 KB, 0.57 with 1 MB. A read returns what has arrived: nothing
# waits for the buffer to fill.
READ_BUFFER = 1 << 18  # bytes a connection's reader asks the kernel for at a time


def read_in_bulk(conn: Any) -> None:
    """Give a plain (not TLS) connection a reader of READ_BUFFER bytes, once connected."""
    replace_reader(conn, lambda sock: socket.SocketIO(sock, "rb"))


def replace_reader(conn: Any, raw: Callable[[socket.socket], Any]) -> None:
    """A buffered reader of READ_BUFFER bytes over ``raw(sock)`` in place of pymysql's. The old
    reader must hold nothing by then (the server sends nothing unasked once a connection is set
    up, nor before the binlog dump); if it does, it is kept."""
    sock, old = getattr(conn, "_sock", None), getattr(conn, "_rfile", None)
    if type(sock) is not socket.socket or old is None:
        return
    try:
        if peek(sock, old):
            return
    except OSError:
        return  # a connection already failing: its next read raises where errors are handled
    old.close()  # only lets go of the socket, as the new reader holds it (socket.makefile's count)
    sock._io_refs += 1  # type: ignore[attr-defined]
    conn._rfile = io.BufferedReader(raw(sock), READ_BUFFER)


def peek(sock: socket.socket, rfile: Any) -> bytes:
    """What pymysql's reader holds or the kernel has, without waiting: the buffered bytes
    without a syscall, else a non-blocking read of the kernel's, else b"". The read timeout is
    put back; errors are the caller's."""
    timeout = sock.gettimeout()
    sock.setblocking(False)
    try:
        return rfile.peek(1)
    finally:
        sock.settimeout(timeout)


def query_one(conn: Any, sql: str) -> Optional[Tuple]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchone()


def variables(conn: Any, names: List[str]) -> Dict[str, str]:
    with conn.cursor() as cur:
        cur.execute("SHOW GLOBAL VARIABLES WHERE Variable_name IN (%s)" %
                    ",".join(["%s"] * len(names)), names)
        return {k.lower(): v for k, v in cur.fetchall()}


REQUIRED_SETTINGS = [
    ("log_bin", "ON", "start the server with --log-bin (binary logging is off)"),
    ("binlog_format", "ROW", "set binlog_format=ROW (SET GLOBAL binlog_format='ROW' and in my.cnf)"),
    ("binlog_row_image", "FULL", "set binlog_row_image=FULL (or MariaDB's FULL_NODUP) so updates "
                                 "and deletes carry every column"),
    ("binlog_row_metadata", "FULL",
     "set binlog_row_metadata=FULL (MySQL >= 8.0.14, MariaDB >= 10.5) so the binlog carries column names"),
]
# Values that do as well as the one wanted: MariaDB 11.4's FULL_NODUP leaves out of an update's
# after image the columns it didn't change, which the before image holds (rowplan.fetch_update_row).
ALSO_ACCEPTED = {"binlog_row_image": ("FULL_NODUP",)}
# Settings the streamer copes with, shown by ``streamer check`` for what they mean to it.
NOTED = [
    ("log_bin_compress", "MariaDB's compressed events are read as their plain twins"),
    ("binlog_transaction_compression", "MySQL's compressed transactions are read as the events "
                                       "they hold"),
    ("binlog_row_value_options", "PARTIAL_JSON updates are applied to the before image, which "
                                 "binlog_row_image=FULL keeps whole"),
    ("binlog_expire_logs_seconds", "the retention guard warns before the checkpoint's file "
                                   "expires (retention.warn_margin_s)"),
    ("expire_logs_days", "the retention guard's expiry when binlog_expire_logs_seconds is 0"),
    ("gtid_mode", "failover (mysql.hosts), mysql.position_mode gtid and snapshot.mode read_only "
                  "need ON; otherwise positions are binlog files and offsets"),
    ("binlog_order_commits", "snapshot.mode read_only needs ON (MySQL's default): transactions "
                             "become visible in their binlog order"),
    ("lower_case_table_names", "1: statements' table names are read in lower case, as the "
                               "server keeps them; 2: a TRUNCATE or a statement-logged change is "
                               "recognised only when it names the table in the case it was "
                               "created in"),
]


class Setting(NamedTuple):
    """One binlog setting the streamer needs, as the server has it."""
    name: str
    want: str
    have: str
    fix: str

    @property
    def ok(self) -> bool:
        return self.have.upper() in (self.want, *ALSO_ACCEPTED.get(self.name, ()))


def settings_checks(conn: Any) -> List[Setting]:
    """Every binlog setting the streamer needs: ``streamer check`` prints them all, ``streamer
    run`` refuses to start on a wrong one (settings_problems)."""
    found = variables(conn, [n for n, _, _ in REQUIRED_SETTINGS])
    # A setting whose value is empty ('' is binlog_row_value_options' default) is there.
    checks = [Setting(name, want, found[name] if name in found else "not available", fix)
              for name, want, fix in REQUIRED_SETTINGS]
    return checks + replica_checks(conn)


# A replica logs what it applies only with this on (MySQL 8.0.26 and later call it
# log_replica_updates, and keep the old name as an alias until 8.4).
_LOG_UPDATES = ("log_slave_updates", "log_replica_updates")


def replica_checks(conn: Any) -> List[Setting]:
    """On a server that replicates another: that its binlog holds what it applies. Without
    log_slave_updates its binlog has its own writes only, and a stream of it would miss every
    change it replicates, silently."""
    if not replicating(conn):
        return []
    name, value = logs_replicated(conn)
    return [Setting(name, "ON", value,
                    f"this server replicates another, and its binlog holds what it replicates "
                    f"only with {name}=ON (not dynamic: set it in my.cnf and restart); or read "
                    f"the primary")]


def logs_replicated(conn: Any) -> Tuple[str, str]:
    """(name, value) of the setting that makes a replica log what it applies: ON or OFF, or
    "not available"."""
    found = variables(conn, list(_LOG_UPDATES))
    name = next((n for n in reversed(_LOG_UPDATES) if n in found), _LOG_UPDATES[0])
    return name, found.get(name, "not available")


def connection_lost(exc: BaseException) -> bool:
    """Whether a MySQL error is the connection's (a client code, a code the server closes the
    connection after, or PyMySQL's InterfaceError(0, '') for a statement on a connection that
    already broke), not the server's answer to the statement: retried like a dropped stream."""
    code = exc.args[0] if exc.args else None
    return not isinstance(code, int) or isinstance(exc, pymysql.err.InterfaceError) or \
        _of_the_connection(code, exc.args[-1])


def _of_the_connection(code: int, message: Any) -> bool:
    """A client code, or a server's that it closes the connection after. (MySQL's codes from
    3000, such as 3024 for a statement's MAX_EXECUTION_TIME, are a statement's: taken for the
    client's, a chunk's timeout restarted the stream and met the timeout again, for ever.)"""
    return CR_MIN <= code < CR_END or code in (ER_CONNECTION_KILLED, ER_SESSION_WAS_KILLED,
                                               ER_SERVER_SHUTDOWN) or (
        code == ER_CLIENT_INTERACTION_TIMEOUT and "inactivity" in str(message))


ER_SERVER_OFFLINE_MODE = 3032  # MySQL's offline_mode: it takes no connections but admins'


def unreachable(exc: BaseException) -> bool:
    """Whether a connection's refusal means the server can't be reached now: the client's own
    codes (refused, timed out, lost), or MySQL in offline mode. A login refused (a locked
    account, TLS required) is no server down: another of mysql.hosts would meet it too."""
    code = exc.args[0] if exc.args else None
    return isinstance(code, int) and (CR_MIN <= code < CR_END or code == ER_SERVER_OFFLINE_MODE)


def said(exc: BaseException) -> str:
    """A MySQL error in words, for a log line: PyMySQL shows its (code, message) tuple."""
    args = exc.args if isinstance(exc, pymysql.err.MySQLError) else ()
    if len(args) != 2 or not isinstance(args[0], int):
        return str(exc)
    code, message = args
    if code == 0:  # PyMySQL's own, for a statement on a connection that had already broken
        return "a MySQL connection was lost earlier and not yet opened again"
    if _of_the_connection(code, message):
        return f"a MySQL connection was lost ({code}: {message})"
    if code in ER_LOGIN_REFUSED:  # a reconnect's, once the start has passed
        return f"MySQL refused the streamer's login ({code}: {message})"
    return f"MySQL refused a statement ({code}: {message})"


def replicating(conn: Any) -> bool:
    """Whether the server applies another's changes now: a replica whose threads run."""
    try:
        if is_mariadb(conn):
            row = query_one(conn, "SHOW GLOBAL STATUS LIKE 'Slaves_running'")
            return bool(row) and int(row[1] or 0) > 0
        row = query_one(conn, "SELECT COUNT(*) FROM performance_schema.replication_applier_status "
                              "WHERE SERVICE_STATE = 'ON'")
        return bool(row) and int(row[0] or 0) > 0
    except pymysql.err.MySQLError as exc:
        if connection_lost(exc):
            raise  # the connection, not the question
        return False  # not allowed to ask (performance_schema off, or no grant): unknown


def settings_noted(conn: Any) -> List[Tuple[str, str, str]]:
    """(name, value, what it means) of each setting in NOTED the server has."""
    found = variables(conn, [n for n, _ in NOTED])
    return [(name, found[name], meaning) for name, meaning in NOTED if name in found]


def settings_problems(conn: Any) -> List[str]:
    """One message per binlog setting that keeps the streamer from working, naming the fix."""
    return [f"{s.name} is {s.have}, must be {s.want}: {s.fix}" for s in settings_checks(conn)
            if not s.ok]


def binlog_sizes(conn: Any) -> List[Tuple[str, int]]:
    """The server's binlog files, oldest first, with their sizes in bytes."""
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return [(row[0], int(row[1])) for row in cur.fetchall()]


def binlog_files(conn: Any) -> List[str]:
    return [name for name, _ in binlog_sizes(conn)]


def version(conn: Any) -> Tuple[int, ...]:
    """The server's version numbers (MariaDB's, past the "5.5.5-" some of its versions put
    before them for old clients)."""
    text = conn.get_server_info()
    if text.startswith("5.5.5-"):
        text = text[len("5.5.5-"):]
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", text)
    return tuple(int(x) for x in m.groups()) if m else (0, 0, 0)


def label(conn: Any) -> str:
    """The server's flavour and version, as a log line names it: "MariaDB 10.11.19"."""
    return ("MariaDB " if is_mariadb(conn) else "MySQL ") + ".".join(map(str, version(conn)))


def binlog_status_statement(conn: Any) -> str:
    """The statement that shows the binlog's end: SHOW BINARY LOG STATUS from MySQL 8.2 on
    (8.4 and 9.x removed SHOW MASTER STATUS), SHOW MASTER STATUS before it and on MariaDB."""
    if not is_mariadb(conn) and version(conn) >= (8, 2, 0):
        return "SHOW BINARY LOG STATUS"
    return "SHOW MASTER STATUS"


def binlog_status(conn: Any) -> Tuple:
    """The binlog status row: file, position, ... (MySQL: the executed GTID set last)."""
    statement = binlog_status_statement(conn)
    row = query_one(conn, statement)
    if row is None:
        raise SourceError(f"{statement} returned nothing: binary logging is off; start the "
                          f"server with --log-bin")
    return row


def user_tables(conn: Any, taken: Callable[[str, str], bool]) -> List[Tuple[str, str]]:
    """The (db, table) of each table ``taken`` takes, in name order, the server's own schemas
    aside. A system-versioned table (MariaDB) is a table like any other: its current rows."""
    with conn.cursor() as cur:
        cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
                    "WHERE TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED') AND TABLE_SCHEMA NOT IN "
                    "('mysql', 'information_schema', 'performance_schema', 'sys') ORDER BY 1, 2")
        return [(db, t) for db, t in cur.fetchall() if taken(db, t)]


def binlog_filters(conn: Any) -> Tuple[List[str], List[str]]:
    """The databases the server's binlog is limited to (binlog_do_db) and those it leaves out
    (binlog_ignore_db), as its binlog status shows them."""
    row = binlog_status(conn)

    def names(value: Any) -> List[str]:
        return [d for d in str(value or "").split(",") if d]
    return (names(row[2]), names(row[3])) if len(row) > 3 else ([], [])


def master_status(conn: Any) -> Tuple[str, int]:
    row = binlog_status(conn)
    return row[0], int(row[1])


def executed_gtids(conn: Any, file: str, pos: int) -> Optional[str]:
    """The server's executed GTID set at a binlog file and offset: MariaDB's BINLOG_GTID_POS
    (from the file's GTID list and the transactions before the offset); on MySQL, which has no
    such function, the file's Previous_gtids and the GTIDs of its transactions before the offset,
    read page by page. None when the file is not there, or has no GTIDs (gtid_mode=OFF)."""
    if is_mariadb(conn):
        row = query_one(conn, f"SELECT BINLOG_GTID_POS({conn.escape(file)}, {int(pos)})")
        return None if row is None or row[0] is None else str(row[0])
    if file not in binlog_files(conn):
        return None
    found = GtidSet(file_gtids(conn, file) or "")
    any_gtid = bool(found.mysql)
    for row in binlog_events(conn, file):
        if int(row[1]) >= pos:
            break
        gtid = _gtid_of(row)
        if gtid:
            found.add(gtid)
            any_gtid = True
    return str(found) if any_gtid else None


def show_events(conn: Any, file: str, more: str = "") -> List[Tuple]:
    """SHOW BINLOG EVENTS IN ``file`` (then ``more``: FROM, LIMIT), its text decoded here, as
    UTF-8 with the bytes that aren't replaced: an Info column holds statements as they were
    sent, binary values and all (MariaDB's Annotate_rows of an INSERT of a VARBINARY), which
    PyMySQL's own decoding refuses with a UnicodeDecodeError. So the session's results come
    undecoded (character_set_results binary) for the statement, and the setting back after."""
    with conn.cursor() as cur:
        cur.execute("SELECT @@SESSION.character_set_results")
        prior = cur.fetchone()[0]
        cur.execute("SET SESSION character_set_results = binary")
        try:
            cur.execute(f"SHOW BINLOG EVENTS IN {conn.escape(file)} {more}")
            rows = cur.fetchall()
        finally:
            cur.execute("SET SESSION character_set_results = %s" % (
                "NULL" if prior is None else conn.escape(prior)))
    return [tuple(v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in row)
            for row in rows]


_EVENTS_PAGE = 20000


def binlog_events(conn: Any, file: str, start: int = 4) -> Iterator[Tuple]:
    """The rows SHOW BINLOG EVENTS shows of ``file``, read a page at a time, each page from the
    offset of the last event the one before showed (FROM it, less the rows already shown): a
    page by LIMIT offset would make the server read the file again from its start for each,
    minutes for a file of 1 GB. (Not from an End_log_pos: MariaDB 11.4 shows 0 there for the
    events inside a transaction. Several rows share an offset: the events inside a MySQL
    Transaction_payload.) From offset ``start``, an event's: by default the file's first, after
    the magic number."""
    at, shown = start, 0  # rows at ``at`` already shown
    while True:
        rows = show_events(conn, file, f"FROM {at} LIMIT {shown + _EVENTS_PAGE}")[shown:]
        yield from rows
        if len(rows) < _EVENTS_PAGE:
            return
        last = int(rows[-1][1])
        if last != at:
            at, shown = last, 0
        shown += sum(1 for _ in itertools.takewhile(lambda r: int(r[1]) == last, reversed(rows)))


def end_gtids(conn: Any) -> Tuple[Tuple[str, int], Optional[str]]:
    """The binlog status's file and offset (binlog_status), and MySQL's executed GTID set as the
    same row gives it: not exactly the set at that offset (``settled_gtids``). None on MariaDB,
    where ``executed_gtids`` of the offset tells it at any later time, and without GTIDs."""
    row = binlog_status(conn)
    end = (row[0], int(row[1]))
    if is_mariadb(conn) or len(row) < 5 or not (row[4] or writes_gtids(conn)):
        return end, None
    return end, "".join(str(row[4] or "").split())  # MySQL splits long sets over lines


# A first start at the binlog's end on MySQL waits at most this long for the transactions in
# flight there to be executed (``settled_gtids``); past it, it starts by the executed set alone.
SETTLE_S = 2.0
# The most events between the end and the set's second read that ``settled_gtids`` reads.
_BETWEEN_MOST = 1_000_000


def settled_gtids(conn: Any, end: Tuple[str, int], given: str,
                  sleep: Callable[[float], None] = time.sleep,
                  clock: Callable[[], float] = time.monotonic) -> Tuple[str, bool]:
    """MySQL's executed GTID set exactly at ``end``, which its binlog status gave with ``given``,
    and whether it is exactly that (else ``given``).

    The binlog status reads the executed set and then the offset, and a transaction is in the
    binlog before it is executed: ``given`` may lack the last transactions before the offset
    (seen in 14 of 40 reads under 4 writers). So the set is read again: once none of the GTIDs
    owned now (``@@gtid_owned``: given to a transaction, not yet executed) still is, every
    transaction before the end is in it; the GTIDs the binlog holds from the end up to that read
    are taken out. A GTID still owned after SETTLE_S (a replica's transaction held open), a
    rotation since the end, or more than _BETWEEN_MOST events since leave it not exact:
    engine.start.initial_position then starts by the set alone."""
    owned = _owned(conn)
    deadline = clock() + SETTLE_S
    while owned and owned & _owned(conn):
        if clock() >= deadline:
            return given, False
        sleep(0.005)
    row = binlog_status(conn)  # the set, then the offset: all the set has is before the offset
    between = _gtids_between(conn, end[0], end[1], int(row[1])) if row[0] == end[0] else None
    if between is None:
        return given, False
    exact = GtidSet(str(row[4] or ""))
    for gtid in between:
        exact.discard(gtid)
    return str(exact), True


def _owned(conn: Any) -> frozenset:
    """The GTIDs given to transactions not yet executed (``@@gtid_owned``: ``uuid:n#thread``)."""
    row = query_one(conn, "SELECT @@GLOBAL.gtid_owned")
    text = str(row[0] or "") if row else ""
    return frozenset(re.sub(r"#\d+", "", g).strip().lower() for g in text.split(",") if g.strip())


def _gtids_between(conn: Any, file: str, start: int, stop: int) -> Optional[List[str]]:
    """The GTIDs of the transactions of ``file`` from offset ``start`` (an event's) up to
    ``stop``; None past _BETWEEN_MOST events."""
    found: List[str] = []
    if stop <= start:
        return found
    for n, row in enumerate(binlog_events(conn, file, start)):
        if int(row[1]) >= stop:
            return found
        if n >= _BETWEEN_MOST:
            return None
        gtid = _gtid_of(row)
        if gtid:
            found.append(gtid)
    return found


def _gtid_of(row: Tuple) -> Optional[str]:
    """The MySQL GTID a SHOW BINLOG EVENTS row gives, if it is a GTID event."""
    if not str(row[2]).startswith("Gtid"):
        return None
    m = _GTID_IN_INFO.search(str(row[5] or ""))
    return m.group(2) if m is not None and m.group(2) else None


def binlog_gtids(conn: Any) -> str:
    """The GTID set the server's binlog holds now: what a resume by GTID can be served from
    (MariaDB gtid_binlog_pos, MySQL gtid_executed)."""
    name = "@@GLOBAL.gtid_binlog_pos" if is_mariadb(conn) else "@@GLOBAL.gtid_executed"
    row = query_one(conn, f"SELECT {name}")
    return "".join(str(row[0] or "").split()) if row else ""


def binlog_state(conn: Any) -> str:
    """MariaDB's ``@@gtid_binlog_state``: the last GTID of each domain and server id in the
    binlog ("" on MySQL)."""
    if not is_mariadb(conn):
        return ""
    row = query_one(conn, "SELECT @@GLOBAL.gtid_binlog_state")
    return "".join(str(row[0] or "").split()) if row else ""


# A GTID event as SHOW BINLOG EVENTS shows it: MariaDB's "BEGIN GTID 0-1-9" (or "XA START ...
# GTID 0-1-9"), MySQL's "SET @@SESSION.GTID_NEXT= 'uuid:9'".
_GTID_IN_INFO = re.compile(r"GTID\s+(\d+-\d+-\d+)|GTID_NEXT\s*=\s*'([^']+)'")


def locate_gtid(conn: Any, gtid: str) -> Optional[Tuple[str, int]]:
    """The binlog file and offset of the transaction ``gtid`` (its GTID event), or None when
    the server's binlog doesn't hold it. The file is the last whose opening GTID set (its
    Gtid_list or Previous_gtids) lacks it; that file's events are then read page by page."""
    files = binlog_files(conn)
    one = GtidSet(gtid)
    candidate = None
    for name in files:
        opening = GtidSet(file_gtids(conn, name) or "")
        if opening.contains(one):
            break
        candidate = name
    if candidate is None:
        return None
    for row in binlog_events(conn, candidate):
        if str(row[2]).startswith("Gtid"):
            m = _GTID_IN_INFO.search(str(row[5] or ""))
            if m is not None and (m.group(1) or m.group(2)).lower() == gtid.lower():
                return candidate, int(row[1])
    return None


def is_mariadb(conn: Any) -> bool:
    return "mariadb" in conn.get_server_info().lower()


# What makes a MySQL write GTIDs, said by each setting that needs them.
GTIDS_FIX = "set gtid_mode=ON on the source (with enforce_gtid_consistency=ON)"


def writes_gtids(conn: Any) -> bool:
    """Whether every transaction the server writes to its binlog has a GTID: always on MariaDB;
    on MySQL with gtid_mode ON only (OFF is 8.0's default, and its transactions are anonymous;
    the PERMISSIVE steps between mix both kinds)."""
    if is_mariadb(conn):
        return True
    row = query_one(conn, "SELECT @@GLOBAL.gtid_mode")
    return bool(row) and str(row[0]).upper() == "ON"


# What makes a MySQL commit in its binlog order, said where read-only snapshots need it.
ORDER_FIX = "SET GLOBAL binlog_order_commits=ON (and in my.cnf; ON is MySQL's default)"


def commits_in_binlog_order(conn: Any) -> bool:
    """Whether transactions become visible in the order the binlog has them: always on
    MariaDB, whose group commit keeps the binlog's order in the engine; on MySQL with
    binlog_order_commits ON only (OFF lets each transaction commit in the engine by itself)."""
    if is_mariadb(conn):
        return True
    value = variables(conn, ["binlog_order_commits"]).get("binlog_order_commits", "ON")
    return value.upper() != "OFF"


def read_only_refusal(writes: bool, in_order: bool, database: str) -> Optional[str]:
    """Why snapshot.mode read_only can't frame chunks on a server that ``writes`` GTIDs (or
    not) and commits ``in_order`` of its binlog (or not), naming the fixes; None when it can.
    ``database``: snapshot.database, which watermark mode writes to."""
    if writes and in_order:
        return None
    watermark = (f"or set snapshot.mode: watermark, which needs the streamer's user to write "
                 f"{database}")
    if not writes:
        return (f"snapshot.mode read_only frames each chunk by the server's GTID positions, and "
                f"this MySQL writes no GTIDs (gtid_mode is not ON): {GTIDS_FIX}, {watermark}")
    return (f"snapshot.mode read_only frames each chunk by the server's GTID positions, which "
            f"needs transactions to become visible in their binlog order, and this MySQL has "
            f"binlog_order_commits OFF: a chunk could miss a change the stream read before its "
            f"window, and publish a row older than that change. {ORDER_FIX}, {watermark}")


def names_case(conn: Any) -> str:
    """The server's lower_case_table_names: 0, names as written and compared so; 1, kept in lower
    case (as its table maps give them), whatever case a statement writes them in; 2, kept as
    created (as table maps give them) and compared in lower case."""
    row = query_one(conn, "SELECT @@GLOBAL.lower_case_table_names")
    return "0" if row is None else str(row[0])


NAMES_CASE_2 = ("lower_case_table_names is 2: the server keeps table names as created and "
                "compares them in lower case, and the streamer recognises a TRUNCATE or a "
                "statement-logged change only when it names a published table in the case the "
                "table was created in")


def server_id(conn: Any) -> int:
    row = query_one(conn, "SELECT @@server_id")
    assert row is not None
    return int(row[0])


def replica_with_id(conn: Any, wanted: int) -> Optional[str]:
    """"host:port" of the replica registered on this server with server_id ``wanted`` (SHOW
    REPLICAS, or SHOW SLAVE HOSTS before MySQL 8.0.22), "" when none is, None when the server
    won't say: MariaDB shows them only to REPLICATION MASTER ADMIN, which the streamer is not
    granted. The streamer doesn't register itself, so it is never listed."""
    for statement in ("SHOW REPLICAS", "SHOW SLAVE HOSTS"):
        try:
            with conn.cursor() as cur:
                cur.execute(statement)
                rows = cur.fetchall()
        except pymysql.err.MySQLError as exc:
            if exc.args and exc.args[0] == ER_PARSE:
                continue  # the older spelling
            if exc.args and exc.args[0] in ER_ACCESS_DENIED:
                return None
            raise
        for row in rows:  # Server_id, Host, Port, ...
            if int(row[0]) == wanted:
                return f"{row[1] or '(its report_host unset)'}:{row[2]}"
        return ""
    return None


def server_uuid(conn: Any) -> str:
    """MySQL's server_uuid ("" on MariaDB, which has none)."""
    if is_mariadb(conn):
        return ""
    row = query_one(conn, "SELECT @@server_uuid")
    return str(row[0]) if row and row[0] else ""


def file_gtids(conn: Any, file: str) -> Optional[str]:
    """The GTID set the binlog ``file`` opens with (its Gtid_list on MariaDB, its Previous_gtids
    on MySQL): every transaction before the file. None when the file has neither."""
    for row in show_events(conn, file, "LIMIT 4"):
        if row[2] in ("Gtid_list", "Previous_gtids"):
            return "".join(str(row[5] or "").strip("[]").split())
    return None


# Events a reader can start at: a transaction's first event (its GTID, anonymous on MySQL with
# gtid_mode=OFF), or one between transactions. A start anywhere else reads a transaction from its
# middle: the library drops rows events until the next table map, without a word.
TRANSACTION_STARTS = frozenset(["Gtid", "Anonymous_Gtid", "Format_desc", "Rotate", "Gtid_list",
                                "Binlog_checkpoint", "Previous_gtids", "Start_encryption", "Stop"])


def check_transaction_start(conn: Any, file: str, pos: int) -> None:
    """Refuse an explicit start (file, offset) the server can't send a whole transaction from,
    before it is committed as the stream's checkpoint (a restart would meet it again): a file
    the server doesn't have, an offset past the file's end, or one that is not a transaction
    start (naming the nearest ones)."""
    sizes = dict(binlog_sizes(conn))
    if file not in sizes:
        names = list(sizes) or ["none"]
        raise PurgedBinlog(
            f"the explicit start's binlog file {file} is not on the server (it has {names[0]} "
            f".. {names[-1]}): check the name (SHOW BINARY LOGS). If it was purged, the "
            f"changes after it are lost to replication: take a snapshot of the tables and start "
            f"at a file the server has")
    if pos > sizes[file]:
        raise SourceError(
            f"the explicit start {file}:{pos} is past the end of {file} ({sizes[file]} bytes): "
            f"start at a transaction start inside it (SHOW BINLOG EVENTS IN '{file}' lists its "
            f"events)")
    try:
        rows = show_events(conn, file, f"FROM {int(pos)} LIMIT 1")
    except pymysql.err.Error as exc:
        if not exc.args or exc.args[0] != ER_BINLOG_READ:
            raise  # a missing privilege, say: the start's own refusal names it
        what = "no event starts there"
    else:
        if not rows or rows[0][2] in TRANSACTION_STARTS:
            return  # the file's end, or a start
        what = f"the event there is a {rows[0][2]} inside a transaction"
    before, after = nearest_transaction_starts(conn, file, pos)
    near = " and ".join(f"{file}:{p}" for p in (before, after) if p is not None) or "none found"
    raise SourceError(f"the explicit start {file}:{pos} is not a transaction start ({what}): "
                      f"reading from it would drop the rest of that transaction's rows. The "
                      f"nearest transaction starts: {near}. Start at one of them "
                      f"(--start-file/--start-pos, or start.file/start.pos)")


def nearest_transaction_starts(conn: Any, file: str, pos: int) -> Tuple[Optional[int],
                                                                        Optional[int]]:
    """The last transaction start before ``pos`` in ``file`` and the first after it, read from
    the file's events page by page from its start (the server can't read backwards)."""
    before: Optional[int] = None
    for row in binlog_events(conn, file):
        at = int(row[1])
        if row[2] in TRANSACTION_STARTS:
            if at > pos:
                return before, at
            before = at
    return before, None
