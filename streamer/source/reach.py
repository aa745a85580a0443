"""The tables a statement-logged row change reaches: its own, and its triggers' and routines'.

A session that logs its row changes as statements logs only the statement: the triggers it
fires and the stored functions it calls (a call that changes rows is logged as
``SELECT db.f(...)``) do their changes on each replica again, so none of those is in the binlog
as rows either. Which tables they change is in their bodies, in ``information_schema.TRIGGERS``
and ``ROUTINES``, read with source.dml the same way the statement is, routine by routine (a
body's own calls and the triggers of what it changes too), and kept until the next DDL. A
``CREATE TABLE ... SELECT`` logged as a statement fills its new table with no row event either.

What can't be seen is said, not guessed: ``information_schema`` shows a table's triggers only to
a user with the TRIGGER privilege on it (the streamer's grants don't have it), and a routine's
body only to its definer or a user with global SELECT (MySQL: or SHOW_ROUTINE).
"""
from __future__ import annotations

from typing import AbstractSet, Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Set, Tuple

from streamer.source import dml, sqltext

Table = Tuple[str, str]
_MOST_BODIES = 64  # routines calling routines: a bound, well past any real chain

_TRIGGERS = ("SELECT TRIGGER_SCHEMA, TRIGGER_NAME, ACTION_STATEMENT FROM "
             "information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = %s AND "
             "EVENT_OBJECT_TABLE = %s")
_ROUTINES = ("SELECT ROUTINE_SCHEMA, ROUTINE_NAME, ROUTINE_TYPE, ROUTINE_DEFINITION FROM "
             "information_schema.ROUTINES WHERE ROUTINE_SCHEMA = %s AND ROUTINE_NAME = %s")


class Reached(NamedTuple):
    tables: Dict[Table, str]  # each table changed, and by what: "" for the statement itself
    unseen: List[str]         # what might change more, and couldn't be read
    ddl: bool = False         # a CREATE TABLE ... SELECT: DDL as well


class _Body(NamedTuple):
    db: str
    sql: Optional[str]  # None: not shown to the streamer's user
    by: str             # "the trigger db.name", "the stored function db.name", ...


class Reach:
    """``of(query, db)``: what a statement-logged change reaches. ``connection`` gives a
    connection to the server in use (None: only the statement itself is read)."""

    def __init__(self, connection: Optional[Callable[[], Any]]) -> None:
        self.connection = connection
        self._triggers: Dict[Table, List[_Body]] = {}
        self._routines: Dict[Tuple[str, str], Optional[_Body]] = {}

    def forget(self) -> None:
        """A DDL statement: triggers and routines may have changed."""
        self._triggers.clear()
        self._routines.clear()

    def of(self, query: str, db: str,
           published: Callable[[str, str], bool] = lambda db, table: False,
           temporary: AbstractSet[Table] = frozenset()) -> Optional[Reached]:
        """What ``query``, logged as a statement in ``db``, changes, up to the first table that
        is ``published``; None when it is no row change (DDL and the like). A name in
        ``temporary`` is a temporary table of the statement's session (source.temporary),
        which hides the table of that name from the statement and what it runs."""
        word = sqltext.first_word(query)
        created = dml.created_by_select(query, db) if word == "CREATE" else None
        if word not in dml.FIRST_WORDS and created is None:
            return None
        tables: Dict[Table, str] = {}
        unseen: List[str] = []
        todo = [_Body(db, query, "")]
        read: Set[Tuple[str, str]] = set()
        if created is not None:
            tables[created] = ""
            if published(*created):
                return Reached(tables, unseen, True)
        while todo:
            body = todo.pop()
            if body.sql is None:
                unseen.append(f"{body.by}, whose body the streamer's user is not shown")
                continue
            found = dml.changes(body.sql, body.db)
            for table in sorted(found.tables):
                if table not in tables and table not in temporary:
                    tables[table] = body.by
                    if published(*table):
                        return Reached(tables, unseen, created is not None)
                    todo.extend(self._bodies([("trigger", table)], read, unseen))
            todo.extend(self._bodies((("routine", c) for c in sorted(found.calls)), read, unseen))
        if self.connection is not None:
            unseen.extend(f"any trigger on {t[0]}.{t[1]}, which information_schema shows "
                          f"only to a user with the TRIGGER privilege on the table"
                          for t in tables if not self._triggers.get(t))
        return Reached(tables, unseen, created is not None)

    def _bodies(self, wanted: Iterable[Tuple[str, Table]], read: Set[Tuple[str, str]],
                unseen: List[str]) -> List[_Body]:
        out: List[_Body] = []
        if self.connection is None:
            return out
        for kind, key in wanted:
            if (kind + key[0], key[1]) in read:
                continue
            if len(read) >= _MOST_BODIES:
                unseen.append(f"more than {_MOST_BODIES} triggers and routines, not all read")
                return out
            read.add((kind + key[0], key[1]))
            if kind == "trigger":
                out.extend(self._triggers_on(key))
            else:
                routine = self._routine(key)
                if routine is not None:
                    out.append(routine)
        return out

    def _triggers_on(self, table: Table) -> List[_Body]:
        found = self._triggers.get(table)
        if found is None:
            rows = self._query(_TRIGGERS, table)
            found = [_Body(db, sql, f"the trigger {db}.{name} on {table[0]}.{table[1]}")
                     for db, name, sql in rows]
            self._triggers[table] = found
        return found

    def _routine(self, name: Tuple[str, str]) -> Optional[_Body]:
        if name not in self._routines:
            rows = self._query(_ROUTINES, name)
            self._routines[name] = (_Body(rows[0][0], rows[0][3], f"the stored "
                                          f"{str(rows[0][2]).lower()} {rows[0][0]}.{rows[0][1]}")
                                    if rows else None)
        return self._routines[name]

    def _query(self, sql: str, args: Table) -> List[Tuple[Any, ...]]:
        assert self.connection is not None
        with self.connection().cursor() as cur:
            cur.execute(sql, args)
            return [tuple(_text(v) for v in row) for row in cur.fetchall()]


def _text(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, (bytes, bytearray)) else value
