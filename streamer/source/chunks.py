"""A table's existing rows, read in chunks ordered by its key, shaped as the binlog reader shapes them.

A snapshot (``engine.snapshot``) reads a table with ``WHERE key > last ORDER BY key LIMIT n``: the
server compares and orders, so collations and composite keys are right. The columns come from
``information_schema`` as binlog-like column descriptions (``Column``), from which ``schema``
builds the same Avro schema a table-map event of the table gives (tests/e2e/test_snapshot.py
compares the two for every type). Values arrive over the text protocol and are turned into what
the binlog reader hands back for the same column (``shape``), so the same converters apply.

Some columns can't be read faithfully as text, so they are selected as something else: FLOAT and
DOUBLE(M,D) as ``col + 0e0`` (the text form has six digits, or D, the stored value more), and
TIMESTAMP in a session whose time zone is UTC (the binlog carries the instant, the text form the
session's wall clock).
A column left out of Kafka (tables.columns.exclude) is selected as NULL (``Described.leaving_out``).
"""
from __future__ import annotations

import re
from typing import (Any, Callable, Dict, FrozenSet, Iterable, List, NamedTuple, Optional,
                    Sequence, Tuple)

from pymysqlreplication.constants import FIELD_TYPE as T

from streamer.errors import SnapshotRefused, UnsupportedColumn
from streamer.source import definitions
from streamer.source.definitions import NONE, Definition
from streamer.source.rowplan import INVALID
from streamer.source.textrows import readable
from streamer.source.vectors import VECTOR

# information_schema DATA_TYPE -> the field type a table-map event gives for it (MariaDB, with
# mysql56_temporal_format on, its default).
_TYPES = {
    "tinyint": T.TINY, "smallint": T.SHORT, "mediumint": T.INT24, "int": T.LONG,
    "bigint": T.LONGLONG, "float": T.FLOAT, "double": T.DOUBLE, "decimal": T.NEWDECIMAL,
    "date": T.DATE, "datetime": T.DATETIME2, "timestamp": T.TIMESTAMP2, "time": T.TIME2,
    "year": T.YEAR, "char": T.STRING, "varchar": T.VARCHAR, "binary": T.STRING,
    "varbinary": T.VARCHAR, "enum": T.ENUM, "set": T.SET, "bit": T.BIT,
    **{t: T.BLOB for t in ("tinytext", "text", "mediumtext", "longtext", "tinyblob", "blob",
                           "mediumblob", "longblob")},
    # MySQL's binary JSON (MariaDB's JSON is a LONGTEXT, and says so).
    "json": T.JSON,
    **{t: T.GEOMETRY for t in ("geometry", "point", "linestring", "polygon", "multipoint",
                               "multilinestring", "multipolygon", "geometrycollection")},
}

# MariaDB's data-type plugins: stored as fixed binary strings (source.definitions).
_PLUGIN_SIZES = {"uuid": 16, "inet6": 16, "inet4": 4}

_QUOTED = re.compile(r"'((?:[^']|'')*)'")


def members(column_type: str) -> Tuple[str, ...]:
    """The members of an ``enum('a','b''c')`` or ``set(...)`` COLUMN_TYPE, unquoted."""
    inner = column_type[column_type.index("(") + 1:column_type.rindex(")")]
    return tuple(m.replace("''", "'") for m in _QUOTED.findall(inner))


class Column:
    """A column as a table-map event describes it, with the attributes ``schema`` reads."""

    __slots__ = ("name", "type", "unsigned", "is_primary", "nullable", "character_set_name",
                 "precision", "decimals", "fsp", "bits", "bytes", "max_length", "enum_values",
                 "set_values", "two_digits")

    def __init__(self, name: str, type_code: int, **attrs: Any) -> None:
        self.name = name
        self.type = type_code
        for slot in self.__slots__[2:]:
            setattr(self, slot, attrs.get(slot))


def column_of(row: Dict[str, Any], primary: Sequence[str], where: str,
              mysql_vectors: bool = False) -> Column:
    """A ``Column`` from one information_schema.COLUMNS row (upper-case keys). ``mysql_vectors``:
    the server's VECTOR is MySQL 9's (type 242 in its binlog: source.vectors), not MariaDB's
    (11.7+: a VARBINARY in its binlog, made a VECTOR by the table's definition, as its
    data-type plugins are: source.definitions)."""
    name = row["COLUMN_NAME"]
    data_type = row["DATA_TYPE"].lower()
    if data_type == "vector":  # MySQL 9's type; MariaDB's, a VARBINARY (its definition says)
        return Column(name, VECTOR if mysql_vectors else T.VARCHAR, unsigned=False,
                      is_primary=name in primary, nullable=row["IS_NULLABLE"] == "YES",
                      character_set_name="binary", max_length=row["CHARACTER_OCTET_LENGTH"])
    if data_type in _PLUGIN_SIZES:  # its text, as SELECT gives it, is what is published
        size = _PLUGIN_SIZES[data_type]
        return Column(name, T.STRING, unsigned=False, is_primary=name in primary,
                      nullable=row["IS_NULLABLE"] == "YES", character_set_name="binary",
                      max_length=size)
    code = _TYPES.get(data_type)
    if code is None:
        raise UnsupportedColumn(f"table {where}: column '{name}' has type {data_type}, which a "
                                f"snapshot can't read; exclude the table with 'tables.exclude'")
    column_type = row["COLUMN_TYPE"].lower()
    charset = row["CHARACTER_SET_NAME"]
    attrs: Dict[str, Any] = {
        "unsigned": "unsigned" in column_type,
        "is_primary": name in primary,
        "nullable": row["IS_NULLABLE"] == "YES",
        "character_set_name": charset if charset is not None else (
            "binary" if code in (T.STRING, T.VARCHAR, T.BLOB) else None),
        "precision": row["NUMERIC_PRECISION"],
        "decimals": row["NUMERIC_SCALE"],
        "fsp": row["DATETIME_PRECISION"],
        "max_length": row["CHARACTER_OCTET_LENGTH"],
    }
    if code == T.BIT:
        attrs["bits"] = int(row["NUMERIC_PRECISION"])
        attrs["bytes"] = (attrs["bits"] + 7) // 8
    elif code == T.ENUM:
        attrs["enum_values"] = members(row["COLUMN_TYPE"])
    elif code == T.SET:
        attrs["set_values"] = members(row["COLUMN_TYPE"])
    elif code == T.YEAR and column_type == "year(2)":
        attrs["two_digits"] = True  # MariaDB's YEAR(2) (``as_read``)
    return Column(name, code, **attrs)


class Described(NamedTuple):
    """A table as a snapshot reads it: its columns, in order, and the key its chunks follow."""
    schema: str
    table: str
    columns: List[Column]
    chunk_key: List[str]      # the primary key, or a unique key of NOT NULL columns
    estimate: int             # information_schema's row estimate
    definition: Definition = NONE  # MariaDB's plugin types and system versioning
    row_bytes: int = 0        # information_schema's average row length (0: none given)
    unread: FrozenSet[str] = frozenset()  # columns selected as NULL (``leaving_out``)
    # How the chunk key sorts: each key column's type and collation (an ENUM's type names its
    # members). Chunks go on after the last key only while this is unchanged.
    key_order: Tuple[str, ...] = ()

    def leaving_out(self, excluded: Iterable[str]) -> "Described":
        """The table read without the values of the ``excluded`` columns (tables.columns.exclude):
        each is selected as NULL, so its values never leave the server and the row keeps the
        table's layout. A column of the chunk key is still read: chunks follow it, and a chunk's
        rows are matched with the binlog's changes by it."""
        return self._replace(unread=frozenset(excluded) - set(self.chunk_key))

    @property
    def null_bitmask(self) -> bytes:
        """The nullability bits, as a table-map event carries them."""
        bits = bytearray((len(self.columns) + 7) // 8)
        for i, c in enumerate(self.columns):
            if c.nullable:
                bits[i >> 3] |= 1 << (i & 7)
        return bytes(bits)


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def describe(conn: Any, db: str, table: str) -> Optional[Described]:
    """The table's columns and chunk key; None when the table doesn't exist. Refuses a table with
    neither a primary key nor a unique key of NOT NULL columns, naming the fix."""
    where = f"{db}.{table}"
    with conn.cursor() as cur:
        cur.execute("SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, CHARACTER_SET_NAME, "
                    "NUMERIC_PRECISION, NUMERIC_SCALE, DATETIME_PRECISION, CHARACTER_OCTET_LENGTH, "
                    "COLLATION_NAME "
                    "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
                    "ORDER BY ORDINAL_POSITION", (db, table))
        names = [d[0].upper() for d in cur.description]
        rows = [dict(zip(names, r)) for r in cur.fetchall()]
        if not rows:
            return None
        cur.execute("SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS "
                    "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND NON_UNIQUE = 0 "
                    "ORDER BY INDEX_NAME = 'PRIMARY' DESC, INDEX_NAME, SEQ_IN_INDEX", (db, table))
        indexes: Dict[str, List[str]] = {}
        for index, column in cur.fetchall():
            indexes.setdefault(index, []).append(column)
        cur.execute("SELECT TABLE_ROWS, TABLE_TYPE, AVG_ROW_LENGTH FROM information_schema.TABLES "
                    "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s", (db, table))
        found = cur.fetchone()
    if found is None:
        return None  # dropped between the queries: its keys may have been read as none
    estimate = int(found[0] or 0)
    mysql_vectors = False
    if any(r["DATA_TYPE"].lower() == "vector" for r in rows):
        from streamer.source import server
        mysql_vectors = not server.is_mariadb(conn)
    # MariaDB's data-type plugins, and its VECTOR, which its binlog writes as a VARBINARY.
    types = tuple(sorted((r["COLUMN_NAME"], r["DATA_TYPE"].lower()) for r in rows
                         if r["DATA_TYPE"].lower() in _PLUGIN_SIZES
                         or (r["DATA_TYPE"].lower() == "vector" and not mysql_vectors)))
    period = definitions.period_of(conn, db, table) \
        if str(found[1]).upper() == "SYSTEM VERSIONED" else None
    if period is not None:
        # A system-versioned table's key holds its period's end: the current rows' key is the
        # rest (the binlog's side drops it too: schema.versions).
        indexes = {k: [c for c in cols if c != period.end] for k, cols in indexes.items()}
    if str(found[1]).upper() == "SEQUENCE":
        raise SnapshotRefused(
            f"{where} is a sequence (CREATE SEQUENCE), whose one row is its state, not a table's "
            f"rows: the stream does not publish it either; leave it out of the snapshot")
    primary = indexes.get("PRIMARY", [])
    not_null = {r["COLUMN_NAME"] for r in rows if r["IS_NULLABLE"] == "NO"}
    key = primary or next((cols for cols in indexes.values() if set(cols) <= not_null), [])
    if not key:
        raise SnapshotRefused(
            f"table {where} has no primary key and no unique key of NOT NULL columns, so its "
            f"rows can't be read in chunks exactly once; add one (ALTER TABLE ... ADD PRIMARY KEY), "
            f"or leave the table out of the snapshot")
    by_name = {r["COLUMN_NAME"]: r for r in rows}
    order = tuple(" ".join(filter(None, (by_name.get(k, {}).get("COLUMN_TYPE"),
                                         by_name.get(k, {}).get("COLLATION_NAME")))) for k in key)
    return Described(db, table, [column_of(r, primary, where, mysql_vectors) for r in rows], key,
                     estimate, Definition(types, period), int(found[2] or 0), key_order=order)


# -- values: text protocol -> what the binlog reader hands back -------------------------------------

def _none_unless(kind: type, db: str, table: str, column: str) -> Callable[[Any], Any]:
    """Zero, partly-zero and invalid dates come back as text, which the binlog reader gives as
    None; all but the all-zero one are counted and logged as it does (rowplan.INVALID)."""
    def shape(value: Any) -> Any:
        if isinstance(value, kind):
            return value
        if value.strip("0-: ."):
            INVALID.note(db, table, column, f"{kind.__name__.upper()} '{value}'", "snapshot")
        return None
    return shape


def _zero_timestamp(value: Any) -> Any:
    return 0 if isinstance(value, str) else value


def _set_members(value: str) -> Any:
    return set(value.split(",")) if value else set()


def _bits(value: bytes) -> str:
    return format(int.from_bytes(value, "big"), "b")


def shapers(columns: Sequence[Column], db: str = "", table: str = ""
            ) -> List[Tuple[int, Callable[[Any], Any]]]:
    """(index, shaper) for each column whose text-protocol value differs from the binlog's."""
    import datetime

    out: List[Tuple[int, Callable[[Any], Any]]] = []
    for i, c in enumerate(columns):
        if c.type == T.DATE:
            out.append((i, _none_unless(datetime.date, db, table, c.name)))
        elif c.type == T.DATETIME2:
            out.append((i, _none_unless(datetime.datetime, db, table, c.name)))
        elif c.type == T.TIMESTAMP2:
            out.append((i, _zero_timestamp))
        elif c.type == T.SET:
            out.append((i, _set_members))
        elif c.type == T.BIT:
            out.append((i, _bits))
    return out


def select_list(columns: Sequence[Column], unread: FrozenSet[str] = frozenset()) -> str:
    return ", ".join("NULL" if c.name in unread else
                     quote(c.name) + " + 0e0" if _inexact_text(c) else as_read(c)
                     for c in columns)


def as_read(c: Column) -> str:
    """The column as a chunk reads and compares it. MariaDB's YEAR(2) shows two digits (24 for
    2024), where the binlog holds the year, and its comparisons with a constant, each way, are
    not in the year's order (10.11 and 11.4: ``y > 1970`` finds 1999, not 2000), so a key holding
    one is compared as ``YEAR(y)``: in its index's order, at the cost of the index's range."""
    return f"YEAR({quote(c.name)})" if c.two_digits else quote(c.name)


def _inexact_text(c: Column) -> bool:
    """A FLOAT's text has six digits; a DOUBLE(M,D)'s has D, and the double the server's
    rounding to D digits stored needn't be the one nearest to them (-0.01 is stored as
    -0.010000000000000009). ``col + 0e0`` has the stored value's shortest exact text."""
    return c.type == T.FLOAT or (c.type == T.DOUBLE and getattr(c, "decimals", None) is not None)


def after_key(key: Sequence[str], literals: Sequence[str]) -> str:
    """``(k1, k2) > (v1, v2)`` spelt as ``k1 > v1 OR (k1 = v1 AND k2 > v2)``, which every
    server's range optimizer turns into one index range. ``key``: the key columns as read
    (``as_read``)."""
    terms = []
    for i, name in enumerate(key):
        eq = [f"{key[j]} = {literals[j]}" for j in range(i)]
        terms.append(" AND ".join(eq + [f"{name} > {literals[i]}"]))
    return " OR ".join(f"({t})" for t in terms)


def chunk_sql(d: Described, last: Optional[Sequence[str]], condition: Optional[str],
              limit: int, hint: str = "") -> str:
    """The SELECT of the chunk after the key ``last`` (SQL literals; None: from the start).
    ``condition`` was checked to be a condition on the table's columns (source.condition).
    ``hint``: MySQL's optimizer hints, such as the statement's time limit."""
    where = []
    if last is not None:
        by_name = {c.name: c for c in d.columns}
        where.append(f"({after_key([as_read(by_name[k]) for k in d.chunk_key], last)})")
    if condition:
        where.append(f"({condition})")
    columns = select_list(d.columns, d.unread)
    return (f"SELECT {hint}{columns} FROM {quote(d.schema)}.{quote(d.table)}"
            + (f" WHERE {' AND '.join(where)}" if where else "")
            + f" ORDER BY {', '.join(quote(k) for k in d.chunk_key)} LIMIT {int(limit)}")


def time_limited(sql: str, seconds: float, mariadb: bool) -> str:
    """``sql`` (a SELECT) stopped by the server after ``seconds``: MariaDB's SET STATEMENT
    max_statement_time, MySQL's MAX_EXECUTION_TIME optimizer hint (milliseconds)."""
    if seconds <= 0:
        return sql
    if mariadb:
        return f"SET STATEMENT max_statement_time={float(seconds):g} FOR {sql}"
    return "SELECT /*+ MAX_EXECUTION_TIME(" + str(int(seconds * 1000)) + ") */ " + sql[7:]


# A chunk's SELECT ran past snapshot.chunk_timeout_s (MariaDB's and MySQL's codes).
ER_STATEMENT_TIMEOUT = (1969, 3024)


def key_literal(conn: Any, column: Column, value: Any) -> str:
    """The SQL literal of a chunk key's value, compared as ORDER BY sorts: ENUM and SET columns
    sort by their number (the member's index, the members' bits) and BIT columns by their value,
    not by their text, so those are compared as numbers; the rest as the server gave them."""
    if column.type == T.ENUM:
        members = list(column.enum_values or ())
        return str(members.index(value) + 1 if value in members else 0)
    if column.type == T.SET:
        members = list(column.set_values or ())
        return str(sum(1 << members.index(m) for m in value.split(",") if m in members))
    if column.type == T.BIT:
        return str(int.from_bytes(value, "big"))
    return conn.escape(value)


# The server's SQL modes a snapshot connection leaves out of the one it is given (the global's):
# the key literals' backslash escapes, CHAR values as the binlog holds them (not padded to their
# length), and '' as itself (MariaDB's EMPTY_STRING_IS_NULL).
_MODES_LEFT_OUT = ("NO_BACKSLASH_ESCAPES", "PAD_CHAR_TO_FULL_LENGTH", "EMPTY_STRING_IS_NULL")


# How long (s) a snapshot's statement waits for a lock on a table (LOCK TABLES ... WRITE, a DDL's
# metadata lock, or one queued behind it) or on the server (FLUSH TABLES WITH READ LOCK): the
# stream waits with it, so it fails soon and its chunk is read again later (engine.snapshot).
# The servers' default is a year.
LOCK_WAIT_S = 1


def session(conn: Any) -> None:
    """What a snapshot connection needs: UTC, so TIMESTAMP text is the instant, none of
    ``_MODES_LEFT_OUT``, and REPEATABLE READ whatever the server's default: each chunk's SELECT
    runs in autocommit mode, one consistent, non-locking read of its own, which READ
    UNCOMMITTED would make a read of changes not yet committed (a row rolled back later was
    published as it never was), and read-only mode's consistent-snapshot transaction is one
    only in REPEATABLE READ (the server ignores WITH CONSISTENT SNAPSHOT in the others). And
    lock waits of LOCK_WAIT_S at most."""
    mode = "@@SESSION.sql_mode"
    for left_out in _MODES_LEFT_OUT:
        mode = f"REPLACE({mode}, '{left_out}', '')"
    with conn.cursor() as cur:
        cur.execute(f"SET SESSION time_zone = '+00:00', sql_mode = {mode}")
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cur.execute(f"SET SESSION lock_wait_timeout = {LOCK_WAIT_S}")


def read_chunk(conn: Any, d: Described, last: Optional[Sequence[str]], condition: Optional[str],
               limit: int, timeout_s: float = 0.0
               ) -> Tuple[List[Dict[str, Any]], Optional[List[str]], bool]:
    """Up to ``limit`` rows after ``last``, as binlog-shaped dicts by column name; the SQL literals
    of the last row's key; and whether this was the table's last chunk. The server stops a
    SELECT that runs longer than ``timeout_s`` (0: never)."""
    names = [c.name for c in d.columns]
    key_at = [names.index(k) for k in d.chunk_key]
    sql = chunk_sql(d, last, condition, limit + 1)
    if timeout_s:
        from streamer.source import server
        sql = time_limited(sql, timeout_s, server.is_mariadb(conn))
    with conn.cursor() as cur:
        cur.execute(sql)
        raw = cur.fetchall()
        result = cur._result
    for i, sent in getattr(result, "unreadable", {}).items():  # made readable (textrows)
        if i in key_at:
            raise key_refused(d, i, result.converters[i][0], sent)
    final = len(raw) <= limit
    if not final:
        raw = raw[:limit]
    rows = _shaped(raw, names, shapers(d.columns, d.schema, d.table))
    new_last = [key_literal(conn, d.columns[i], raw[-1][i]) for i in key_at] if raw else (
        list(last) if last is not None else None)
    return rows, new_last, final


Fixes = List[Tuple[int, Callable[[Any], Any]]]


def _shaped(raw: Sequence[tuple], names: List[str], fix: Fixes) -> List[Dict[str, Any]]:
    return [_shaped_row(r, names, fix) for r in raw]


def _shaped_row(row: tuple, names: List[str], fix: Fixes) -> Dict[str, Any]:
    values = list(row)
    for i, shape in fix:
        if values[i] is not None:
            values[i] = shape(values[i])
    return dict(zip(names, values))


def key_refused(d: Described, i: int, encoding: str, sent: bytes) -> SnapshotRefused:
    """Why a chunk whose key column ``i`` holds bytes ``encoding`` can't read is refused: the
    text made readable (``textrows.readable``) would not say where the next chunk starts."""
    return SnapshotRefused(
        f"chunk key column {d.columns[i].name} of {d.schema}.{d.table} holds bytes that are not "
        f"{encoding} text (as the server sent them: {sent[:64].hex()}), so where the next chunk "
        f"starts can't be said; correct the value on the server, or leave the table out of the "
        f"snapshot")


class OutOfOrder(Exception):
    """MySQL commits out of its binlog order (binlog_order_commits OFF) as a read-only chunk is
    about to be read: the chunk's GTID positions would not frame its rows."""


class ListRead:
    """A chunk read already, handed out ``fetch(n)`` rows at a time: read-only mode reads a chunk
    whole, inside one consistent-snapshot transaction (``TableReader.read_at_position``), and the
    engine's tests hand out what they hold. ``ServerRead`` says what the attributes mean; a
    chunk read whole has no keys as read, so it is published whole too. Its rows are dicts
    already (``unpack`` None)."""

    keys = None
    literals = None
    unpack = None
    d = None  # its rows were read: no SELECT is left to meet a changed table
    given = bytes_read = 0  # its rows came as dicts: no length measured (engine.snapshot.ChunkSize)

    def __init__(self, rows: List[Dict[str, Any]], last_key: Optional[List[str]],
                 final: bool) -> None:
        self.rows = rows
        self.at = 0
        self.last_key = last_key
        self.final = final
        self.done = not rows

    def fetch(self, n: int) -> List[Dict[str, Any]]:
        out = self.rows[self.at:self.at + n]
        self.at += len(out)
        self.done = self.at >= len(self.rows)
        return out

    def close(self) -> None:
        self.rows = []


class ServerRead:
    """A chunk's SELECT whose rows are read from the server as they are asked for (an unbuffered
    result), so that reading a chunk never holds the binlog's stream for more than ``fetch(n)``
    rows at a time. ``done`` once the chunk's last row was handed out; then ``last_key`` holds the
    SQL literals of that row's key (or the previous chunk's, for an empty one) and ``final``
    whether it was the table's last chunk. The server takes the SELECT's consistent read when it
    starts: whatever pace the rows are read at, they are the table as it was then.

    ``fetch`` hands out the rows as the server sent them, with their chunk keys read (``keys``),
    and ``unpack`` makes one a binlog-shaped dict: a chunk holds its rows until its high mark, and
    a row held as its one packet, not as a dict of values, is one object for the garbage collector
    to copy out of the nursery instead of a dozen (docs/benchmarks.md, "Rows held as read")."""

    def __init__(self, conn: Any, d: Described, last: Optional[Sequence[str]],
                 condition: Optional[str], limit: int, timeout_s: float = 0.0,
                 max_bytes: int = 0) -> None:
        self.conn = conn
        self.d = d
        self.limit = limit
        self.max_bytes = max_bytes  # the chunk ends once its rows came to this (0: no bound)
        self.names = [c.name for c in d.columns]
        self.key_at = [self.names.index(k) for k in d.chunk_key]
        self.fix = shapers(d.columns, d.schema, d.table)
        fixes = dict(self.fix)
        # What _shaped does to each chunk key column's value (engine.chunk keys rows by it).
        self.key_shapers = [fixes.get(i) for i in self.key_at]
        sql = chunk_sql(d, last, condition, limit + 1)
        if timeout_s:
            from streamer.source import server
            sql = time_limited(sql, timeout_s, server.is_mariadb(conn))
        self.result = conn.unbuffered(sql)  # source.textrows
        self.read = self.result.reader()
        self.read_key = self.result.key_reader(self.key_at)
        # PyMySQL's (encoding, converter) of each field: how a packet's values read
        # (schema.textavro writes messages from the packets by it).
        self.plan = getattr(self.result, "converters", None)
        self.keys: List[tuple] = []  # the chunk key's values, as read, of the last fetch's rows
        self.last_read: Optional[tuple] = None
        self.given = 0
        self.bytes_read = 0  # of the rows handed out, as the server sent them
        self.last_key = list(last) if last is not None else None
        self.final = False
        self.done = False

    def fetch(self, n: int) -> List[Any]:
        # The SELECT asks for one row more than the chunk: that row, if it comes, says more
        # chunks follow, and is not handed out.
        want = min(n, self.limit - self.given + 1)
        raw = self.result.read_payloads(want)
        if len(raw) < want:
            self.done = self.final = True
        if self.given + len(raw) > self.limit:
            raw = raw[:self.limit - self.given]
            self.done, self.final = True, False
        self.given += len(raw)
        self.bytes_read += sum(map(len, raw))
        if self.max_bytes and self.bytes_read >= self.max_bytes and not self.done:
            # Rows far longer than the chunk's size was asked by: it ends at the last row read,
            # the next starts after it (the rest of this SELECT is read and dropped).
            self.done, self.final = True, False
        read_key = self.read_key
        try:
            self.keys = [read_key(r) for r in raw]
        except UnicodeDecodeError as exc:
            raise self._unreadable_key(raw) from exc
        if raw:
            self.last_read = self.keys[-1]
        if self.done:
            self.close()
            if self.last_read is not None:
                self.last_key = self.literals(self.last_read)
        return raw

    def _unreadable_key(self, raw: List[Any]) -> SnapshotRefused:
        """Why a chunk whose rows' keys can't all be read as text is refused (``key_refused``)."""
        plan = self.plan or []
        for data in raw:
            for i, sent, _ in readable(plan, data)[1]:
                if i in self.key_at:
                    return key_refused(self.d, i, plan[i][0], sent)
        return SnapshotRefused(f"a chunk key of {self.d.schema}.{self.d.table} can't be read "
                               f"as text")

    def readable(self, payload: Any) -> Any:
        """A row ``fetch`` handed out whose text can't be read, made readable and noted
        (``textrows.FastResult.readable``)."""
        return self.result.readable(payload)

    def unpack(self, payload: Any) -> Dict[str, Any]:
        """A row ``fetch`` handed out, as the binlog reader shapes it: a dict by column name."""
        return _shaped_row(self.read(payload), self.names, self.fix)

    def literals(self, key: tuple) -> List[str]:
        """The SQL literals of a row's chunk key, as ``keys`` holds it: where a chunk after that
        row starts."""
        columns = self.d.columns
        return [key_literal(self.conn, columns[i], v) for i, v in zip(self.key_at, key)]

    def close(self) -> None:
        """Let the result go: what the server still sends of it is read and dropped."""
        import pymysql

        try:
            self.result.close()
        except pymysql.err.Error:
            pass  # the connection broke: the next statement on it says so


def _end_quietly(cur: Any) -> None:
    """Ends a read's transaction that an error stopped. The error is the one said: on a
    connection that broke, the COMMIT's own (PyMySQL's InterfaceError(0, '')) took its place,
    and a lost connection read as a refused SELECT ended the snapshot without its rows."""
    import pymysql

    try:
        cur.execute("COMMIT")
    except pymysql.err.Error:
        pass  # the connection broke: the server ended the transaction with it


class TableReader:
    """A snapshot's own connection to the source: it describes tables, writes watermarks and
    reads chunks. (The engine's tests put an in-memory one in its place.)"""

    def __init__(self, settings: Dict[str, Any], database: str, name: str,
                 timeout_s: float = 0.0) -> None:
        self.settings = settings
        self.database = database
        self.name = name
        self.timeout_s = timeout_s
        self.conn: Any = None

    def _connection(self) -> Any:
        if self.conn is None:
            from streamer.source.textrows import RowsConnection

            # Its results' rows are read faster than PyMySQL's own way, to the same values.
            self.conn = RowsConnection(autocommit=True, **self.settings)
            session(self.conn)
        return self.conn

    def describe(self, db: str, table: str) -> Optional[Described]:
        return describe(self._connection(), db, table)

    def watermark(self, mark: str) -> None:
        from streamer.source import signals

        signals.write_watermark(self._connection(), self.database, self.name, mark,
                                self.settings["user"])

    def open(self, d: Described, last: Optional[Sequence[str]], condition: Optional[str],
             limit: int, max_bytes: int = 0) -> ServerRead:
        """The next chunk's SELECT, its rows read as they are asked for, up to ``limit`` rows or
        ``max_bytes`` of them."""
        return ServerRead(self._connection(), d, last, condition, limit, self.timeout_s,
                          max_bytes)

    def read_at_position(self, d: Described, last: Optional[Sequence[str]],
                         condition: Optional[str], limit: int
                         ) -> Tuple[List[Dict[str, Any]], Optional[List[str]], bool, str]:
        """``read``, and the GTID position of the binlog that the SELECT's consistent read saw:
        every transaction in it is visible to the SELECT (read-only mode's low watermark).

        MariaDB writes a transaction's GTID to its binlog state before the transaction is
        visible in InnoDB, so a position read before the SELECT could name a commit the SELECT
        does not see: there, the position is the one MariaDB gives for the read view itself
        (``binlog_snapshot_file``/``_position`` in the same consistent-snapshot transaction).
        MySQL adds a GTID to gtid_executed once its transaction is committed in the engine, so
        the set read just before the read view opens is inside it."""
        from streamer.source import server

        conn = self._connection()
        mariadb = server.is_mariadb(conn)
        # Checked at each chunk: the setting is dynamic, and the start checked it once.
        if not mariadb and not server.commits_in_binlog_order(conn):
            raise OutOfOrder()
        before = "" if mariadb else self.gtid_position()
        with conn.cursor() as cur:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            try:
                if mariadb:
                    cur.execute("SHOW STATUS WHERE Variable_name IN ('binlog_snapshot_file', "
                                "'binlog_snapshot_position')")
                    status = {k.lower(): v for k, v in cur.fetchall()}
                rows, new_last, final = read_chunk(conn, d, last, condition, limit,
                                                   self.timeout_s)
            except BaseException:
                _end_quietly(cur)
                raise
            cur.execute("COMMIT")
            if not mariadb:
                return rows, new_last, final, before
            cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (status["binlog_snapshot_file"],
                                                           int(status["binlog_snapshot_position"])))
            found = cur.fetchone()
        return rows, new_last, final, str(found[0] or "") if found else ""

    def gtid_position(self) -> str:
        """The server's GTID position now: read-only mode's watermark (snapshot.mode)."""
        from streamer.source import server

        conn = self._connection()
        name = "gtid_binlog_pos" if server.is_mariadb(conn) else "gtid_executed"
        row = server.query_one(conn, f"SELECT @@GLOBAL.{name}")
        return str(row[0] or "") if row else ""

    def writes_gtids(self) -> bool:
        from streamer.source import server

        return server.writes_gtids(self._connection())

    def commits_in_binlog_order(self) -> bool:
        from streamer.source import server

        return server.commits_in_binlog_order(self._connection())

    def is_mariadb(self) -> bool:
        from streamer.source import server

        return server.is_mariadb(self._connection())

    def gtid_at(self, file: str, pos: int) -> Optional[str]:
        """The GTID position at a binlog file and offset (MariaDB's BINLOG_GTID_POS), or None
        where the server can't tell."""
        from streamer.source import server

        conn = self._connection()
        if not server.is_mariadb(conn):
            return None
        with conn.cursor() as cur:
            cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
            row = cur.fetchone()
        return None if row is None or row[0] is None else str(row[0])

    def close(self) -> None:
        import pymysql

        if self.conn is not None:
            try:
                self.conn.close()
            except pymysql.err.Error:
                pass  # closing a connection that already broke
            self.conn = None
