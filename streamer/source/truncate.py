"""TRUNCATE TABLE recognised from a query event's text: the one DDL statement the streamer
publishes (engine.rows says how); ``ALTER TABLE ... TRUNCATE PARTITION ALL`` empties the whole
table too, and is published the same way."""
from __future__ import annotations

import re
from typing import Optional, Tuple

_IDENT = r"(?:`((?:[^`]|``)+)`|([^\s`.;]+))"


_TRUNCATE = re.compile(
    r"^\s*(?:/\*.*?\*/\s*)*TRUNCATE\s+(?:TABLE\s+)?" + _IDENT + r"(?:\s*\.\s*" + _IDENT + r")?"
    r"\s*;?\s*$", re.IGNORECASE | re.DOTALL)

_ALL_PARTITIONS = re.compile(
    r"^\s*(?:/\*.*?\*/\s*)*ALTER\s+(?:ONLINE\s+)?(?:IGNORE\s+)?TABLE\s+" + _IDENT
    + r"(?:\s*\.\s*" + _IDENT + r")?\s+TRUNCATE\s+PARTITION\s+ALL\s*;?\s*$",
    re.IGNORECASE | re.DOTALL)


def _ident(quoted: Optional[str], bare: Optional[str]) -> str:
    return quoted.replace("``", "`") if quoted is not None else str(bare)


def truncated_table(query: str, current_db: str) -> Optional[Tuple[str, str]]:
    """(db, table) of a TRUNCATE statement, or None for any other statement."""
    head = query[:200].lower()
    if "truncate" not in head and "alter" not in head:
        return None
    m = _TRUNCATE.match(query) or _ALL_PARTITIONS.match(query)
    if m is None:
        return None
    first = _ident(m.group(1), m.group(2))
    if m.group(3) is None and m.group(4) is None:
        return current_db, first
    return first, _ident(m.group(3), m.group(4))
