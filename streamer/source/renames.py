"""Tables renamed onto a published table's name: its rows change with no row event.

``RENAME TABLE t TO t_old, t_new TO t`` (a table rebuilt aside and swapped in) changes every
row of ``t`` at once, and the server logs only the statement: the topic of ``t`` keeps the rows
the table had, and never gets those ``t_new`` brought (engine.stages.statements warns, naming
the fix). An online schema change's swap (gh-ost's ``_t_gho``, pt-online-schema-change's
``_t_new``, each with the table set aside as ``_t_del`` or ``_t_old``) brings a copy the tool
kept equal to the table: said, not warned about.
"""
from __future__ import annotations

import re
from typing import List, Optional, Tuple

from streamer.source.sqltext import (Token, first_word, folded, name_at, statement_tokens,
                                     table_statement)

Table = Tuple[str, str]


def renames(query: str, default_db: str) -> List[Tuple[Table, Table]]:
    """(old name, new name) of each table ``RENAME TABLE`` or ``ALTER TABLE ... RENAME``
    renames, in order; [] for any other statement."""
    word = first_word(query)
    if word == "RENAME":
        return _pairs(statement_tokens(query), 1, default_db)
    if word == "ALTER":
        found = table_statement(query, default_db)
        if found is not None and found.verb == "ALTER":
            new = _alter_rename(found.rest, found.db)
            if new is not None:
                return [((found.db, found.table), new)]
    return []


def online_swap(old: Table, new: Table) -> bool:
    """Whether the rename is half of an online schema change tool's swap: its copy of a table
    taking the table's name (``_t_gho``, ``_t_new`` to ``t``), or the table set aside (``t`` to
    ``_t_del``, ``_t_old``)."""
    return old[0] == new[0] and (
        re.fullmatch(r"_+" + re.escape(new[1]) + r"_(?:gho|new)", old[1]) is not None
        or re.fullmatch(r"_+" + re.escape(old[1]) + r"_(?:del|old)", new[1]) is not None)


def _pairs(toks: List[Token], j: int, db: str) -> List[Tuple[Table, Table]]:
    """``TABLE[S] [IF EXISTS] a [WAIT n | NOWAIT] TO b [, c TO d ...]`` from ``toks[j]``."""
    def up(k: int) -> str:
        return toks[k].up if k < len(toks) else ""
    if up(j) not in ("TABLE", "TABLES"):
        return []
    j += 1
    if up(j) == "IF" and up(j + 1) == "EXISTS":
        j += 2
    out = []
    while True:
        old = name_at(toks, j, db)
        if old is None:
            return out
        j = old[2]
        if up(j) == "WAIT":
            j += 2
        elif up(j) == "NOWAIT":
            j += 1
        new = name_at(toks, j + 1, db) if up(j) == "TO" else None
        if new is None:
            return out
        out.append((folded(old[0], old[1]), folded(new[0], new[1])))
        j = new[2]
        if j >= len(toks) or toks[j].text != ",":
            return out
        j += 1


def _alter_rename(rest: List[Token], db: str) -> Optional[Table]:
    """The new name an ALTER TABLE's ``RENAME [TO | AS] b`` clause gives (not a column's or an
    index's RENAME), from what follows the table's name."""
    for i, tok in enumerate(rest):
        if tok.up != "RENAME" or i and rest[i - 1].text != ",":
            continue
        k = i + 1
        if k < len(rest) and rest[k].up in ("COLUMN", "INDEX", "KEY"):
            continue
        if k < len(rest) and rest[k].up in ("TO", "AS"):
            k += 1
        new = name_at(rest, k, db)
        if new is not None:
            return folded(new[0], new[1])
    return None
