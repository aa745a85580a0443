"""Rows changed with no row event: partition statements, and foreign keys' actions.

In row format the server logs each changed row, except where a statement moves whole storage:
a partition's rows dropped or emptied (``DROP PARTITION``, ``TRUNCATE PARTITION``), swapped with
another table's (``EXCHANGE PARTITION``), moved to or from another table (MariaDB's ``CONVERT
PARTITION ... TO TABLE`` and ``CONVERT TABLE ... TO PARTITION``), or a tablespace imported
(``IMPORT [PARTITION ...] TABLESPACE``). A replica does the same to its own copy; a consumer of the
topics can't: the rows those statements removed stay in the topic, and the rows they added never
come. Dropping old partitions is how many tables keep their retention, so this is no reason to
stop the stream, but it must not go unsaid (engine.stages.statements warns, naming the fix).

``TRUNCATE PARTITION ALL`` empties the whole table: it is published as a TRUNCATE
(source.truncate), nothing is lost.

A foreign key's ON DELETE / ON UPDATE action (CASCADE, SET NULL) is carried out by InnoDB inside
the statement on the parent, below the layer that logs rows: the binlog holds the parent's row
changes and none of the child's (seen on MariaDB 10.11 and 11.4 and MySQL 8.0; a replica repeats
the action from its own foreign keys). In the child's topic a row the action deleted stays, and a
column it set keeps its old value. So the streamer says which published tables such keys change:
at start (``cascading``, engine.start), in ``streamer check``, and when a statement adds one
(``cascade_added``, engine.stages.statements).

A server started with ``binlog_do_db`` or ``binlog_ignore_db`` logs no row of the databases they
leave out: a published table there never has a message, and the streamer's own tables there
(heartbeat, snapshot watermarks) never come back. ``left_out`` names them, at start and in
``streamer check``.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

import pymysql

from streamer.source.chunks import quote
from streamer.source.sqltext import (SHOWN_NAME, folded, name_at, table_statement,
                                     unquote_shown)

# What an ALTER TABLE does without row events, by its first two words, and where the other table
# an exchange or a move names is (counted from the first word).
_KINDS = {
    ("TRUNCATE", "PARTITION"): ("truncate", None),
    ("DROP", "PARTITION"): ("drop", None),
    ("EXCHANGE", "PARTITION"): ("exchange", 5),  # EXCHANGE PARTITION p WITH TABLE t
    ("CONVERT", "PARTITION"): ("out", 5),  # CONVERT PARTITION p TO TABLE t
    ("CONVERT", "TABLE"): ("into", 2),  # CONVERT TABLE t TO PARTITION p
}

_SAYS = {
    "drop": "dropped a partition: its rows left the table",
    "truncate": "emptied a partition: its rows left the table",
    "exchange": "swapped a partition's rows with those of {other}",
    "out": "moved a partition's rows out to the table {other}",
    "into": "moved the rows of the table {other} in as a partition",
    "import": "imported a tablespace: its rows came in",
}


class RowlessChange(NamedTuple):
    db: str
    table: str
    what: str  # the kind: truncate, drop, exchange, out, into, import
    other: Optional[Tuple[str, str]]  # the other table an exchange or a move names

    def says(self) -> str:
        other = f"{self.other[0]}.{self.other[1]}" if self.other else ""
        return _SAYS[self.what].format(other=other)


def rowless_change(query: str, default_db: str) -> Optional[RowlessChange]:
    """The ALTER TABLE ``query`` changes rows with no row event for them: what it does, else
    None (``TRUNCATE PARTITION ALL`` too, a TRUNCATE: source.truncate)."""
    found = table_statement(query, default_db)
    if found is None or found.verb != "ALTER":
        return None
    rest = found.rest
    words = [t.up for t in rest]
    for i, word in enumerate(words):
        if word == "IMPORT" and "TABLESPACE" in words[i + 1:]:
            return RowlessChange(found.db, found.table, "import", None)
        kind = _KINDS.get((word, words[i + 1] if i + 1 < len(words) else ""))
        if kind is None:
            continue
        what, at = kind
        if what == "truncate" and words[i + 2:] == ["ALL"]:
            return None  # the whole table: a TRUNCATE (source.truncate)
        other = name_at(rest, i + at, found.db) if at is not None else None
        return RowlessChange(found.db, found.table, what,
                             folded(other[0], other[1]) if other else None)
    return None


# -- foreign keys' actions ------------------------------------------------------------------------
ACTIONS = ("CASCADE", "SET NULL", "SET DEFAULT")

class Cascade(NamedTuple):
    """A foreign key of ``db.table`` whose action on ``parent`` changes rows of ``db.table``."""
    db: str
    table: str
    name: str
    parent: str  # db.table
    on_delete: str
    on_update: str

    def says(self) -> str:
        acts = [f"ON {what} {rule}" for what, rule in (("DELETE", self.on_delete),
                                                        ("UPDATE", self.on_update))
                if rule in ACTIONS]
        return f"`{self.name}` on {self.parent} ({', '.join(acts)})"


# A foreign key as SHOW CREATE TABLE writes it, with its actions.
_FOREIGN_KEY = re.compile(
    r"CONSTRAINT (" + SHOWN_NAME + r") FOREIGN KEY \(.*?\) REFERENCES ((?:" + SHOWN_NAME + r"\.)?"
    + SHOWN_NAME + r") \(.*?\)((?: ON (?:DELETE|UPDATE) (?:CASCADE|SET NULL|SET DEFAULT|RESTRICT|"
    r"NO ACTION))*)")


def cascading(conn: Any, published: Callable[[str, str], bool]) -> List[Cascade]:
    """The foreign keys whose actions change rows of published tables. KEY_COLUMN_USAGE names
    the tables with foreign keys, and SHOW CREATE TABLE their actions: MariaDB shows
    REFERENTIAL_CONSTRAINTS to a user with more than SELECT only."""
    with conn.cursor() as cur:
        cur.execute("SELECT DISTINCT TABLE_SCHEMA, TABLE_NAME FROM information_schema.KEY_COLUMN_USAGE "
                    "WHERE REFERENCED_TABLE_NAME IS NOT NULL ORDER BY TABLE_SCHEMA, TABLE_NAME")
        children = [(db, table) for db, table in cur.fetchall() if published(db, table)]
        found = []
        for db, table in children:
            try:
                cur.execute(f"SHOW CREATE TABLE {quote(db)}.{quote(table)}")
            except pymysql.err.ProgrammingError:  # dropped since: nothing to say of it
                continue
            row = cur.fetchone()
            found.extend(_actions(db, table, str(row[1]) if row else ""))
    return found


def _actions(db: str, table: str, definition: str) -> List[Cascade]:
    """The foreign keys with an action in a SHOW CREATE TABLE ``definition``."""
    out = []
    for m in _FOREIGN_KEY.finditer(definition):
        rules = dict(re.findall(r" ON (DELETE|UPDATE) (CASCADE|SET NULL|SET DEFAULT|RESTRICT|"
                                r"NO ACTION)", m.group(3)))
        if any(rule in ACTIONS for rule in rules.values()):
            parent = [unquote_shown(p) for p in re.findall(SHOWN_NAME, m.group(2))]
            out.append(Cascade(db, table, unquote_shown(m.group(1)),
                               ".".join(parent if len(parent) == 2 else [db] + parent),
                               rules.get("DELETE", "RESTRICT"), rules.get("UPDATE", "RESTRICT")))
    return out


def unlogged_actions(table: str) -> str:
    """What a consumer of ``table``'s topic misses of its foreign keys' actions, and the ways on."""
    return (f"the server logs no row event for what those actions change: the topic of {table} "
            f"keeps the rows they delete and the values they replace. Delete or update the "
            f"child rows in the statement that changes the parent, or read the table again "
            f"(streamer snapshot --tables {table})")


def cascades_said(found: List[Cascade]) -> List[Tuple[str, str]]:
    """(db.table, what to say of it) per published table that foreign keys' actions change."""
    by_table: Dict[str, List[str]] = {}
    for c in found:
        by_table.setdefault(f"{c.db}.{c.table}", []).append(c.says())
    return [(table, f"its rows are changed by foreign key actions: {'; '.join(keys)}; "
                    f"{unlogged_actions(table)}") for table, keys in by_table.items()]


def cascade_added(query: str, default_db: str) -> Optional[Tuple[str, str]]:
    """(db, table) of a CREATE or ALTER TABLE ``query`` that gives it a foreign key with an
    action (ON DELETE or ON UPDATE CASCADE, SET NULL, SET DEFAULT), else None. A TEMPORARY
    table's is none of a published table's, whatever its name."""
    found = table_statement(query, default_db)
    if found is None or found.verb == "TRUNCATE" or "TEMPORARY" in found.before:
        return None
    words = " ".join(t.up or "_" for t in found.rest)  # a name or a string is no keyword
    if any(f" ON {what} {rule}" in f" {words} " for what in ("DELETE", "UPDATE")
           for rule in ("CASCADE ", "SET NULL ", "SET DEFAULT ")):
        return found.db, found.table
    return None


# -- binlog filters -------------------------------------------------------------------------------
def left_out(conn: Any, published: Callable[[str, str], bool], own: List[str]) -> Optional[str]:
    """What to say of what the server's binlog filters leave out that the streamer needs: each
    published table and each of its own databases (``own``) they cover; None when nothing."""
    from streamer.source import server

    do, ignore = server.binlog_filters(conn)
    if not do and not ignore:
        return None

    def out(db: str) -> bool:
        return db in ignore or bool(do) and db not in do
    with conn.cursor() as cur:
        cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE "
                    "TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED') "
                    "ORDER BY TABLE_SCHEMA, TABLE_NAME")
        found = [f"{db}.{table}" for db, table in cur.fetchall()
                 if out(db) and published(db, table)]
    found = [f"the streamer's own database {db}" for db in own if out(db)] + found
    if not found:
        return None
    shown = ", ".join(found[:10]) + (f" and {len(found) - 10} more" if len(found) > 10 else "")
    filters = "; ".join(f"{name}={','.join(dbs)}" for name, dbs in
                        (("binlog_do_db", do), ("binlog_ignore_db", ignore)) if dbs)
    return (f"the server's binlog leaves out {shown} ({filters}): no change there is ever "
            f"logged, so none is published (nor do heartbeats or snapshot watermarks there come "
            f"back). Remove the filter (my.cnf, a restart), or leave those tables out "
            f"(tables.exclude)")
