"""The tables a statement changes, and the routines it calls, read from its text.

For row changes a session logged as statements (``binlog_format`` STATEMENT or MIXED in that
session): the streamer reads row events only, so such a change of a published table would be
lost (source.events refuses it), and so would the changes of the triggers and stored routines it
runs, which a statement-logged change carries out on the replica, not in the binlog
(source.reach reads their bodies with this module too).

Not a SQL parser: its tokens (source.sqltext), statement starts found wherever a row change can start (after a
CTE list, inside a routine's BEGIN ... END), and the shapes that name what they change:
``INSERT/REPLACE [INTO] t``, ``LOAD DATA ... INTO TABLE t``, ``UPDATE refs SET a.c = ...`` (the
tables its assignments qualify, or all of ``refs`` when one doesn't), ``DELETE FROM t``,
``DELETE t1, t2 FROM refs`` and ``DELETE FROM t1, t2 USING refs`` (aliases resolved through
``refs``). Where the text leaves a doubt, every table it names in those places is counted: a
change is never missed for an unusual spelling, at worst a table it only reads is named.
"""
from __future__ import annotations

from typing import List, NamedTuple, Optional, Set, Tuple

from streamer.source.sqltext import (Token, folded, is_name, name_at, settings_end,
                                     statement_tokens, table_statement, tokens)

Table = Tuple[str, str]


class Changes(NamedTuple):
    tables: Set[Table]           # the tables the text's row changes may change
    calls: Set[Tuple[str, str]]  # (db, name) of what it calls: stored routines, or built-ins


# Where a row change can start; what before one makes it no statement (ON DUPLICATE KEY UPDATE,
# FOR UPDATE, ON DELETE in DDL, GRANT UPDATE, ... ).
_STARTS = {"INSERT", "REPLACE", "UPDATE", "DELETE", "LOAD"}
_FUNCTIONS = {"INSERT", "REPLACE"}  # INSERT(str, ...) and REPLACE(str, ...) are functions too
_NOT_AFTER = {"KEY", "FOR", "ON", "GRANT", "REVOKE", ",", "(", "."}
FIRST_WORDS = _STARTS | {"WITH", "SELECT", "DO"}  # a logged statement that may change rows
_JOIN = {"JOIN", "INNER", "CROSS", "LEFT", "RIGHT", "NATURAL", "OUTER", "STRAIGHT_JOIN", "FULL"}
_NOT_ALIAS = _JOIN | {"SET", "WHERE", "ON", "USING", "USE", "FORCE", "IGNORE", "ORDER", "LIMIT",
                      "PARTITION", "RETURNING", "FROM", "AS", "VALUES", "VALUE", "SELECT", "WITH",
                      "DEFAULT", "FOR", "GROUP", "HAVING", "WINDOW", "UNION", "LOCK", "INTO"}
_SUBQUERY = {"SELECT", "WITH", "VALUES", "TABLE"}
# Words a parenthesis follows that call nothing (a call's name is looked up: source.reach).
_NOT_CALLED = _NOT_ALIAS | {"IN", "EXISTS", "AND", "OR", "NOT", "ANY", "ALL", "SOME", "OVER",
                            "INDEX", "KEY", "CHAR", "VARCHAR", "DECIMAL", "BINARY", "ROW"} | _STARTS


def created_by_select(sql: str, default_db: str) -> Optional[Table]:
    """The table a ``CREATE TABLE ... [AS] SELECT`` fills, as a statement: its rows are in no
    row event (logged in row format, the statement is written without its SELECT, and the rows
    follow). None for any other statement, and for a TEMPORARY table (never in a table map)."""
    found = table_statement(sql, default_db)
    if found is None or found.verb != "CREATE" or "TEMPORARY" in found.before:
        return None
    depth = 0
    for tok in found.rest:
        if tok.kind == "p":
            depth += (tok.text == "(") - (tok.text == ")")
        elif tok.up in ("SELECT", "WITH") and depth <= 1:
            return found.db, found.table
    return None


def emptied(sql: str, default_db: str) -> Optional[Table]:
    """The table a ``DELETE FROM t`` with nothing after the name empties (every row, as a
    TRUNCATE does); None for any other statement. MySQL before 8.0.22 logs one, as a statement
    whatever the binlog format, when a MEMORY table is first used after a restart emptied it
    (seen on 8.0.15: ``DELETE FROM `db`.`t```; 8.0.22 and MariaDB log a TRUNCATE TABLE)."""
    toks = statement_tokens(sql)
    if not toks or toks[0].up != "DELETE":
        return None
    j = 1
    while j < len(toks) and toks[j].up in ("LOW_PRIORITY", "QUICK", "IGNORE"):
        j += 1
    name = name_at(toks, j + 1, default_db) if j < len(toks) and toks[j].up == "FROM" else None
    if name is None or name[2] != len(toks):
        return None
    return folded(name[0], name[1])


def changes(sql: str, default_db: str) -> Changes:
    """What ``sql`` (a statement, or a trigger's or routine's body) changes and calls; names
    without a database are ``default_db``'s."""
    toks = tokens(sql)
    tables: Set[Table] = set()
    calls: Set[Tuple[str, str]] = set()
    # Statements run with MariaDB's per-statement settings: the word after their FOR.
    set_for = {settings_end(toks, i) for i, tok in enumerate(toks) if tok.up == "SET"}
    for i, tok in enumerate(toks):
        if tok.up in _STARTS and (i in set_for or _starts_statement(toks, i)):
            tables.update(_Statement(toks, i, default_db).targets())
        elif tok.text == "(" and tok.kind == "p" and i and is_name(toks[i - 1]):
            if i >= 3 and toks[i - 2].text == "." and is_name(toks[i - 3]):
                calls.add((toks[i - 3].text, toks[i - 1].text))
            elif toks[i - 1].kind == "q" or toks[i - 1].up not in _NOT_CALLED:
                calls.add((default_db, toks[i - 1].text))
    return Changes({folded(*t) for t in tables}, {folded(*c) for c in calls})


def _starts_statement(toks: List[Token], i: int) -> bool:
    nxt = toks[i + 1] if i + 1 < len(toks) else None
    if nxt is None or nxt.text == "." or (nxt.text == "(" and toks[i].up in _FUNCTIONS):
        return False
    if nxt.up == "INTO" and i + 2 < len(toks) and toks[i + 2].up == "TABLE":
        return False  # LOAD DATA ... REPLACE INTO TABLE t: the LOAD's own word
    prev = toks[i - 1] if i else None
    return prev is None or (prev.up or prev.text) not in _NOT_AFTER


class _Factor(NamedTuple):
    db: str
    table: str
    alias: Optional[str]


class _Statement:
    """One row change's targets, from its first word at ``toks[i]``."""

    def __init__(self, toks: List[Token], i: int, default_db: str) -> None:
        self.toks, self.i, self.db = toks, i, default_db

    def up(self, j: int) -> str:
        return self.toks[j].up if j < len(self.toks) else ""

    def text(self, j: int) -> str:
        return self.toks[j].text if j < len(self.toks) else ""

    def targets(self) -> List[Table]:
        word, j = self.up(self.i), self.i + 1
        if word in ("INSERT", "REPLACE"):
            j = self._skip(j, ("LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE", "INTO"))
            name = name_at(self.toks, j, self.db)
            return [name[:2]] if name else []
        if word == "LOAD":
            while j + 2 < len(self.toks) and not (self.up(j) == "INTO" and self.up(j + 1) == "TABLE"):
                j += 1
            name = name_at(self.toks, j + 2, self.db)
            return [name[:2]] if name else []
        if word == "UPDATE":
            factors, j = self._references(self._skip(j, ("LOW_PRIORITY", "IGNORE")), {"SET"})
            if self.up(j) == "SET" and len(factors) > 1:
                return self._assigned(factors, j + 1)
            return [(f.db, f.table) for f in factors]
        return self._deleted(self._skip(j, ("LOW_PRIORITY", "QUICK", "IGNORE")))

    def _skip(self, j: int, words: Tuple[str, ...]) -> int:
        while self.up(j) in words:
            j += 1
        return j

    def _deleted(self, j: int) -> List[Table]:
        if self.up(j) == "HISTORY":  # MariaDB's DELETE HISTORY: history rows, never published
            return []
        stops = {"WHERE", "ORDER", "LIMIT", "RETURNING"}
        if self.up(j) == "FROM":
            named, j = self._name_list(j + 1)
            if self.up(j) != "USING":  # DELETE FROM t [AS a] [WHERE ...]: one table
                return [self._resolve([], *named[0])] if named else []
            factors, _ = self._references(j + 1, stops)
        else:
            named, j = self._name_list(j)
            factors, _ = self._references(j + 1, stops) if self.up(j) == "FROM" else ([], j)
        return [self._resolve(factors, db, name) for db, name in named]

    def _name_list(self, j: int) -> Tuple[List[Tuple[Optional[str], str]], int]:
        """``t1[.*], db.t2[.*] ...``: each (db or None, name), and the index after the list."""
        named: List[Tuple[Optional[str], str]] = []
        while j < len(self.toks) and is_name(self.toks[j]):
            if self.text(j + 1) == "." and self.text(j + 2) != "*":
                named.append((self.text(j), self.text(j + 2)))
                j += 3
            else:
                named.append((None, self.text(j)))
                j += 1
            if self.text(j) == "." and self.text(j + 1) == "*":
                j += 2
            if self.text(j) != ",":
                break
            j += 1
        return named, j

    def _resolve(self, factors: List[_Factor], db: Optional[str], name: str) -> Table:
        """A multi-table DELETE's target: an alias of ``factors``, or a table's name."""
        if db is None:
            for f in factors:
                if f.alias == name:
                    return f.db, f.table
            for f in factors:
                if f.alias is None and f.table == name:
                    return f.db, f.table
        return (self.db if db is None else db), name

    def _references(self, j: int, stops: Set[str]) -> Tuple[List[_Factor], int]:
        """The tables of a table-references clause from ``j`` (joins, nested joins, derived
        tables left out), and the index of the word that ends it (one of ``stops``)."""
        factors: List[_Factor] = []
        toks, depth = self.toks, 0
        while j < len(toks):
            tok = toks[j]
            if depth == 0 and (tok.up in stops or tok.text == ";"):
                break
            if tok.kind == "p" and tok.text == "(":
                if self.up(j + 1) in _SUBQUERY:  # a derived table: read, never changed
                    j = self._alias(self._balanced(j))[1]
                else:
                    depth, j = depth + 1, j + 1
            elif tok.kind == "p" and tok.text == ")":
                if depth == 0:
                    break
                depth, j = depth - 1, j + 1
            elif tok.up == "ON":
                j = self._condition(j + 1, stops)
            elif tok.up == "USING":
                j = self._balanced(j + 1)
            elif tok.up in _JOIN or tok.text == ",":
                j += 1
            elif is_name(tok) and tok.up not in _NOT_ALIAS:
                db, table, j = name_at(self.toks, j, self.db)
                if self.up(j) == "PARTITION":
                    j = self._balanced(j + 1)
                alias, j = self._alias(j)
                while self.up(j) in ("USE", "FORCE", "IGNORE"):  # index hints
                    while j < len(toks) and self.text(j) != "(":
                        j += 1
                    j = self._balanced(j)
                factors.append(_Factor(db, table, alias))
            else:
                j += 1
        return factors, j

    def _alias(self, j: int) -> Tuple[Optional[str], int]:
        if self.up(j) == "AS":
            return self.text(j + 1), j + 2
        if j < len(self.toks) and is_name(self.toks[j]) and self.up(j) not in _NOT_ALIAS:
            return self.text(j), j + 1
        return None, j

    def _balanced(self, j: int) -> int:
        """The index after the parenthesised group opening at ``j`` (``j`` if none opens)."""
        if self.text(j) != "(":
            return j
        depth = 0
        while j < len(self.toks):
            tok = self.toks[j]
            if tok.kind == "p":
                depth += (tok.text == "(") - (tok.text == ")")
                if depth == 0:
                    return j + 1
            j += 1
        return j

    def _condition(self, j: int, stops: Set[str]) -> int:
        """The index after a join's ON condition: at a join, a comma, a stop word, or the
        parenthesis that closes the nested join it is in."""
        while j < len(self.toks):
            tok = self.toks[j]
            if tok.up in _JOIN or tok.up in stops or tok.text in (",", ";", ")"):
                return j
            j = self._balanced(j) if tok.text == "(" else j + 1
        return j

    def _assigned(self, factors: List[_Factor], j: int) -> List[Table]:
        """The tables a multi-table UPDATE's SET assigns to; all of them when an assignment
        names a column alone, or a table the references don't."""
        out: List[Table] = []
        while j < len(self.toks):
            parts = [self.text(j)]
            j += 1
            while self.text(j) == "." and j + 1 < len(self.toks):
                parts.append(self.text(j + 1))
                j += 2
            found = self._owner(factors, parts[:-1])
            if found is None:
                return [(f.db, f.table) for f in factors]
            out.append(found)
            while j < len(self.toks) and self.text(j) != "," and self.up(j) not in (
                    "WHERE", "ORDER", "LIMIT") and self.text(j) != ";":
                j = self._balanced(j) if self.text(j) == "(" else j + 1
            if self.text(j) != ",":
                break
            j += 1
        return out

    def _owner(self, factors: List[_Factor], qualifier: List[str]) -> Optional[Table]:
        if len(qualifier) == 2:
            return qualifier[0], qualifier[1]
        if len(qualifier) == 1:
            for f in factors:
                if f.alias == qualifier[0] or (f.alias is None and f.table == qualifier[0]):
                    return f.db, f.table
        return None
