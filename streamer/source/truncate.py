"""TRUNCATE TABLE recognised from a query event's text: the one DDL statement the streamer
publishes (engine.rows says how)."""
from __future__ import annotations

import re
from typing import Optional, Tuple

_IDENT = r"(?:`((?:[^`]|``)+)`|([^\s`.;]+))"


_TRUNCATE = re.compile(
    r"^\s*(?:/\*.*?\*/\s*)*TRUNCATE\s+(?:TABLE\s+)?" + _IDENT + r"(?:\s*\.\s*" + _IDENT + r")?"
    r"\s*;?\s*$", re.IGNORECASE | re.DOTALL)


def _ident(quoted: Optional[str], bare: Optional[str]) -> str:
    return quoted.replace("``", "`") if quoted is not None else str(bare)


def truncated_table(query: str, current_db: str) -> Optional[Tuple[str, str]]:
    """(db, table) of a TRUNCATE statement, or None for any other statement."""
    if "truncate" not in query[:200].lower():
        return None
    m = _TRUNCATE.match(query)
    if m is None:
        return None
    first = _ident(m.group(1), m.group(2))
    if m.group(3) is None and m.group(4) is None:
        return current_db, first
    return first, _ident(m.group(3), m.group(4))
