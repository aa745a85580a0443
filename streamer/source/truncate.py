"""TRUNCATE TABLE recognised from a query event's text: the one DDL statement the streamer
publishes (engine.rows says how); ``ALTER TABLE ... TRUNCATE PARTITION ALL`` empties the whole
table too, and is published the same way. Read as tokens (source.sqltext), so that a comment
anywhere in it, an application's tag after it included, hides no TRUNCATE."""
from __future__ import annotations

import re
from typing import Optional, Tuple

from streamer.source.sqltext import table_statement

# Every TRUNCATE has the word: other query events are not tokenized.
_WORD = re.compile("truncate", re.IGNORECASE)
_ALL_PARTITIONS = ["TRUNCATE", "PARTITION", "ALL"]


def truncated_table(query: str, current_db: str) -> Optional[Tuple[str, str]]:
    """(db, table) of a TRUNCATE statement, or None for any other statement."""
    if _WORD.search(query) is None:
        return None
    found = table_statement(query, current_db)
    if found is None:
        return None
    if found.verb == "TRUNCATE" and not found.rest or \
            found.verb == "ALTER" and [t.up for t in found.rest] == _ALL_PARTITIONS:
        return found.db, found.table
    return None
