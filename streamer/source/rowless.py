"""ALTER TABLE statements that take rows out of a table, or put rows in, with no row event.

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
"""
from __future__ import annotations

import re
from typing import NamedTuple, Optional, Tuple

_NAME = r"(`(?:[^`]|``)+`|[\w$]+)"
_TABLE = _NAME + r"(?:\s*\.\s*" + _NAME + r")?"

_ALTER = re.compile(
    r"^\s*(?:/\*.*?\*/\s*)*alter\s+(?:online\s+)?(?:ignore\s+)?table\s+(?:if\s+exists\s+)?"
    + _TABLE + r"\s+(.*)$", re.IGNORECASE | re.DOTALL)

_PART = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_I = re.IGNORECASE | re.DOTALL
# What an ALTER TABLE does without row events; the groups of those that name another table.
_KINDS = (
    ("truncate", re.compile(r"\btruncate\s+partition\b(?!\s+all\s*;?\s*$)", _I)),
    ("drop", re.compile(r"\bdrop\s+partition\b", _I)),
    ("exchange", re.compile(r"\bexchange\s+partition\s+" + _PART + r"\s+with\s+table\s+"
                            + _TABLE, _I)),
    ("out", re.compile(r"\bconvert\s+partition\s+" + _PART + r"\s+to\s+table\s+" + _TABLE, _I)),
    ("into", re.compile(r"\bconvert\s+table\s+" + _TABLE + r"\s+to\s+partition\b", _I)),
    ("import", re.compile(r"\bimport\s+(?:partition\s+.*?\s+)?tablespace\b", _I)),
)

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


def _name(part: str) -> str:
    return part[1:-1].replace("``", "`") if part.startswith("`") else part


def _table(first: Optional[str], second: Optional[str], default_db: str) -> Tuple[str, str]:
    if second is None:
        return default_db, _name(str(first))
    return _name(str(first)), _name(second)


def rowless_change(query: str, default_db: str) -> Optional[RowlessChange]:
    """The ALTER TABLE ``query`` changes rows with no row event for them: what it does, else
    None (``TRUNCATE PARTITION ALL`` too, a TRUNCATE: source.truncate)."""
    m = _ALTER.match(query)
    if m is None:
        return None
    db, table = _table(m.group(1), m.group(2), default_db)
    rest = m.group(3)
    for what, pattern in _KINDS:
        found = pattern.search(rest)
        if found is not None:
            other = _table(found.group(1), found.group(2), db) if found.groups() else None
            return RowlessChange(db, table, what, other)
    return None
