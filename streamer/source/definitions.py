"""What the server's table definition says and a table map does not.

A table map (binlog_row_metadata=FULL) gives each column's name, storage type and charset. Two
MariaDB features hide behind storage types the map shares with others, and one MySQL feature
adds a column the table does not show:

- **Data-type plugins.** ``UUID`` (10.7+) and ``INET6`` (10.5+) are written as ``BINARY(16)``,
  ``INET4`` (10.10+) as ``BINARY(4)``; ``SELECT`` shows them as text. ``VECTOR(n)`` (11.7+) is
  written as a ``VARBINARY(4n)`` of its n 32-bit floats (its field is a binary VARCHAR's:
  sql/sql_type_vector.h), and ``SELECT`` shows the same bytes; it is published as MySQL 9's
  VECTOR is (source.vectors), an array of floats. (No MariaDB 11.7+ runs here.)
- **System versioning.** A ``WITH SYSTEM VERSIONING`` table's rows carry their period
  (``row_start``, ``row_end``: hidden unless declared), and the binlog shows the history table
  underneath: an update writes the old row as a history row, a delete ends the row's period.
- **Sequences** (MariaDB 10.3+). ``CREATE SEQUENCE`` makes a table of one row, its state
  (``next_not_cached_value``, ``cache_size``...), and the binlog writes that row again as an
  insert at each cache refill of ``NEXTVAL``, each ``SETVAL`` and ``ALTER SEQUENCE``. Those are
  no changes of a table's rows (the rows that take the values carry them), a snapshot has no
  table to read for them (``information_schema`` types it ``SEQUENCE``), and a consumer would
  take them for inserts of one keyless row again and again: a sequence is not published, and
  says so once per version.
- **Old temporal formats** (source.oldtemporal). A DATETIME, TIME or TIMESTAMP column in its
  old format is written without its fractional digits, and its values' size depends on them.
- **Functional indexes** (MySQL 8.0.13+). Each key part of ``INDEX ((expr))`` is a hidden
  generated column, named by an MD5 in hex (8.0.15, seen here): in the table map, but in no
  rows event, nor in ``information_schema.COLUMNS`` or ``SELECT *``. It is not published (and
  its absence from a rows event is no partial row image). Later servers name it
  ``!hidden!<index>!<part>!<n>`` and leave it out of the table map (8.0.41's Table_map_log_event
  filters functional index columns out); a server between that names it so and still maps it
  is read the same way.

So a table map that could hide any of these (a binary column of 16 or 4 bytes, a VARBINARY of
a multiple of 4 bytes, a column named row_start/row_end, a key column of a period's types, a
sequence's first column, an old temporal column, a column named like a hidden one) has its
table's definition read from ``information_schema`` once per table version
(``Definitions.of``), on a connection of its own, never on the hot path (an old temporal
column's, as its table map is first parsed: source.oldtemporal). The definition is the table's
as it is when read: a stream far behind a
DDL that turns a BINARY(16) into a UUID (the same bytes in the binlog) renders the older rows by
the newer type; DDL naming the table reads it again (``forget``).
"""
from __future__ import annotations

import logging
import re
from typing import Any, Callable, Dict, NamedTuple, Optional, Sequence, Tuple

from pymysqlreplication.constants import FIELD_TYPE as T

from streamer.source.oldtemporal import OLD
from streamer.source.sqltext import SHOWN_NAME, unquote_shown

log = logging.getLogger(__name__)

PLUGIN_TYPES = ("uuid", "inet6", "inet4", "vector")
_PLUGIN_SIZES = (16, 4)
IMPLICIT_PERIOD = ("row_start", "row_end")
# The first column of a MariaDB sequence's table, whatever its integer type (11.5+ has several).
SEQUENCE_FIRST = "next_not_cached_value"
# The name MySQL gives the hidden generated column of a functional index's key part: the MD5 of
# the index's name and the part's number, in hex (8.0.15), or "!hidden!", the index's name, "!",
# the part's number, "!" and a number that makes it unique (later servers). Where such a column
# is in the table map, it is neither in information_schema.COLUMNS nor in SELECT *, nor in a
# rows event.
HIDDEN_NAME = re.compile(r"[0-9a-f]{32}|!hidden!.+![0-9]+![0-9]+", re.DOTALL)


class Period(NamedTuple):
    """A system-versioned table's period columns, and whether the server hides them."""
    start: str
    end: str
    hidden: bool


class Definition(NamedTuple):
    """What the table map lacks: (column, plugin type) pairs, the versioning period, the
    columns the server hides (MySQL's functional indexes), whether the table is a sequence, and
    the fractional digits of its temporal columns in an old format (source.oldtemporal)."""
    types: Tuple[Tuple[str, str], ...]
    period: Optional[Period]
    hidden: Tuple[str, ...] = ()
    sequence: bool = False
    fractions: Tuple[Tuple[str, int], ...] = ()

    def type_of(self, column: str) -> Optional[str]:
        for name, kind in self.types:
            if name == column:
                return kind
        return None

    def fraction_of(self, column: str) -> int:
        """An old temporal column's fractional digits; UNKNOWN_DIGITS when its table's
        definition doesn't have the column (the table was dropped or changed since)."""
        for name, digits in self.fractions:
            if name == column:
                return digits
        return 0


NONE = Definition((), None)


def worth_asking(columns: Any) -> bool:
    """Whether a table map's columns could hide a plugin type (a VECTOR too), a versioning
    period, a sequence or an old temporal column's fractional digits."""
    for c in columns:
        if c.type in OLD:
            return True
        if c.type == T.STRING and getattr(c, "character_set_name", None) in (None, "binary") \
                and getattr(c, "max_length", None) in _PLUGIN_SIZES:
            return True
        if c.type == T.VARCHAR and getattr(c, "character_set_name", None) in (None, "binary") \
                and (getattr(c, "max_length", None) or 1) % 4 == 0:
            return True  # MariaDB's VECTOR: a VARBINARY of whole floats
        if c.name in IMPLICIT_PERIOD or c.name == SEQUENCE_FIRST:
            return True
        if c.is_primary and (c.type == T.TIMESTAMP2 or (c.type == T.LONGLONG and c.unsigned)):
            return True
        if c.name and HIDDEN_NAME.fullmatch(c.name):
            return True
    return False


def read(conn: Any, db: str, table: str, names: Sequence[str] = ()) -> Definition:
    """The table's definition as ``information_schema`` has it now; ``names``, the table map's
    columns, those of them the server hides."""
    with conn.cursor() as cur:
        cur.execute("SELECT TABLE_TYPE FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
                    "AND TABLE_NAME = %s", (db, table))
        found = cur.fetchone()
        if found is None:
            return NONE
        cur.execute("SELECT COLUMN_NAME, DATA_TYPE, EXTRA, DATETIME_PRECISION "
                    "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                    (db, table))
        rows = cur.fetchall()
    types = tuple(sorted((name, str(kind).lower()) for name, kind, _, _ in rows
                         if str(kind).lower() in PLUGIN_TYPES))
    table_type = str(found[0]).upper()
    period = period_of(conn, db, table) if table_type == "SYSTEM VERSIONED" else None
    listed = {name for name, _, _, _ in rows}
    hidden = tuple(n for n in names if HIDDEN_NAME.fullmatch(n) and n not in listed)
    fractions = tuple(sorted((name, int(digits or 0)) for name, kind, _, digits in rows
                             if str(kind).lower() in _TEMPORAL))
    return Definition(types, period, hidden, table_type == "SEQUENCE", fractions)


_TEMPORAL = ("datetime", "time", "timestamp")
UNKNOWN_DIGITS = -1  # an old temporal column its table's definition no longer has


_PERIOD = re.compile(r"PERIOD FOR SYSTEM_TIME\s*\(\s*(" + SHOWN_NAME + r")\s*,\s*(" + SHOWN_NAME
                     + r")\s*\)", re.IGNORECASE)


def period_of(conn: Any, db: str, table: str) -> Period:
    """A system-versioned table's period: the columns its CREATE TABLE declares (information_schema
    lists them as plain generated columns), else the implicit, hidden row_start and row_end."""
    with conn.cursor() as cur:
        cur.execute(f"SHOW CREATE TABLE `{db.replace('`', '``')}`.`{table.replace('`', '``')}`")
        row = cur.fetchone()
    m = _PERIOD.search(str(row[1]) if row else "")
    if m is None:
        return Period(IMPLICIT_PERIOD[0], IMPLICIT_PERIOD[1], True)
    return Period(unquote_shown(m.group(1)), unquote_shown(m.group(2)), False)


class Definitions:
    """Table definitions read on demand, by (db, table), from the server in use
    (``connect()`` gives a connection to it)."""

    def __init__(self, connect: Callable[[], Any], mariadb: Callable[[Any], bool]) -> None:
        self.connect = connect
        self.mariadb = mariadb
        self.conn: Any = None
        self.cache: Dict[Tuple[str, str], Definition] = {}

    def of(self, db: str, table: str, columns: Any) -> Definition:
        if not worth_asking(columns) or not all(c.name for c in columns):
            return NONE  # a map without names is refused by its version (MissingColumnNames)
        key = (db, table)
        found = self.cache.get(key)
        if found is None:
            conn = self.connection()
            names = [c.name for c in columns]
            # MySQL has neither plugin types nor versioning: only a hidden column is worth a read.
            asked = self.mariadb(conn) or any(n and HIDDEN_NAME.fullmatch(n) for n in names)
            found = read(conn, db, table, names) if asked else NONE
            old = [c.name for c in columns if c.type in OLD]
            if asked and old:  # only an old temporal column's digits are missing from the map
                digits = dict(found.fractions)
                found = found._replace(fractions=tuple(
                    (name, digits.get(name, UNKNOWN_DIGITS)) for name in old))
            self.cache[key] = found
            said = describe(found)
            if said:
                log.info("table %s.%s: %s", db, table, said)
        return found

    def connection(self) -> Any:
        """The connection definitions are read on, opened at first use (source.reach reads
        triggers and routines on it too)."""
        if self.conn is None:
            self.conn = self.connect()
        return self.conn

    def forget(self, db: str, table: str) -> None:
        """A statement named the table: its definition is read again at its next table map."""
        self.cache.pop((db, table), None)

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            finally:
                self.conn = None


def describe(d: Definition) -> str:
    if d.sequence:
        return ("a sequence (CREATE SEQUENCE): the writes of its one row of state (NEXTVAL's "
                "cache refills, SETVAL, ALTER SEQUENCE) are no changes of a table's rows, and are "
                "not published; the rows that take its values carry them")
    parts = [f"column {name} is {kind.upper()}" for name, kind in d.types]
    parts += [f"column {name} keeps an old temporal format, with {digits} fractional digits"
              for name, digits in d.fractions if digits > 0]
    parts += [f"column {name} keeps an old temporal format, and the table's definition no longer "
              f"has it (the table was dropped or changed since): its values' layout is unknown, "
              f"so its rows are counted by their sizes, and a published table's stop the stream, "
              f"naming the way out" for name, digits in d.fractions if digits == UNKNOWN_DIGITS]
    parts += [f"column {name} is hidden (a functional index's): not published" for name in d.hidden]
    if d.period is not None:
        parts.append(f"system-versioned (period {d.period.start}..{d.period.end}"
                     f"{', hidden' if d.period.hidden else ''}): its current rows are "
                     f"published, not its history")
    return "; ".join(parts)
