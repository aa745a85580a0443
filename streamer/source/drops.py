"""Tables dropped or replaced by a statement: their rows leave with no row event.

``DROP TABLE t``, ``DROP DATABASE d`` and MariaDB's ``CREATE OR REPLACE TABLE t`` take every
row of a table away, and the server logs only the statement: the topic of ``t`` keeps the rows
the table had (a compacted topic keeps them for good), and a table created again under the name
publishes to it beside them (engine.stages.statements warns, naming the ways on; it says the
same of a table renamed away, read by source.renames). A temporary table's drop (``DROP
TEMPORARY TABLE``, as the server logs a session's) is not the table's.
"""
from __future__ import annotations

from typing import List, NamedTuple

from streamer.source.sqltext import folded, name_at, statement_tokens, table_statement


class Dropped(NamedTuple):
    how: str  # "dropped", "replaced" (CREATE OR REPLACE), "dropped database", or "renamed"
    # (a table renamed away, engine.stages.statements: source.renames reads those)
    db: str
    table: str  # "" for a database


def drops(query: str, default_db: str) -> List[Dropped]:
    """What the statement drops or replaces, in order; [] for any other statement."""
    toks = statement_tokens(query)
    if not toks:
        return []
    verb = toks[0].up
    if verb == "CREATE":
        found = table_statement(query, default_db)
        if found is not None and "REPLACE" in found.before and "TEMPORARY" not in found.before:
            return [Dropped("replaced", found.db, found.table)]
        return []
    if verb != "DROP":
        return []
    j = 1
    if j < len(toks) and toks[j].up in ("DATABASE", "SCHEMA"):
        j += 1
        if j + 1 < len(toks) and toks[j].up == "IF" and toks[j + 1].up == "EXISTS":
            j += 2
        if j < len(toks) and toks[j].kind in "wqd":
            db = folded(toks[j].text, "")[0]
            return [Dropped("dropped database", db, "")]
        return []
    if j < len(toks) and toks[j].up == "TEMPORARY":
        return []
    if j >= len(toks) or toks[j].up not in ("TABLE", "TABLES"):
        return []
    j += 1
    if j + 1 < len(toks) and toks[j].up == "IF" and toks[j + 1].up == "EXISTS":
        j += 2
    out = []
    while True:
        name = name_at(toks, j, default_db)
        if name is None:
            return out
        db, table = folded(name[0], name[1])
        out.append(Dropped("dropped", db, table))
        j = name[2]
        if j >= len(toks) or toks[j].text != ",":
            return out
        j += 1
