"""The character set of each collation id a table map names, as the server in use defines it.

A table map gives each text column's collation id, and the replication library finds the
charset by it in a table of its own; for an id it doesn't know it assumes UTF-8. MariaDB 10.10+
has some 900 collations more than that table (the ``uca1400`` ones, ids from 2048, of utf8mb3,
utf8mb4, ucs2, utf16 and utf32; the defaults of new columns from MariaDB 11.5 on), so a ucs2,
utf16 or utf32 column with one was read as UTF-8: its text published wrong, in silence.

``register`` reads every collation of the server (``information_schema``, one query at start)
and adds to the library's table each id it lacks or names another charset for (MySQL's utf8 and
utf8mb3 are one), for the server's kind (the library keeps MySQL's and MariaDB's apart).
"""
from __future__ import annotations

import logging
from typing import Any, List

import pymysql
from pymysqlreplication.constants import CHARSET

log = logging.getLogger(__name__)

# MariaDB 10.10+ lists each full collation (utf16_uca1400_ai_ci) with its id here; COLLATIONS
# shows the uca1400 ones by their short names without an id.
_FULL = ("SELECT ID, CHARACTER_SET_NAME, FULL_COLLATION_NAME FROM "
         "information_schema.COLLATION_CHARACTER_SET_APPLICABILITY WHERE ID IS NOT NULL")
_SHORT = "SELECT ID, CHARACTER_SET_NAME, COLLATION_NAME FROM information_schema.COLLATIONS"
_SAME = {"utf8": "utf8mb3"}


def _rows(conn: Any) -> List[Any]:
    with conn.cursor() as cur:
        try:
            cur.execute(_FULL)
        except (pymysql.err.OperationalError, pymysql.err.ProgrammingError):
            cur.execute(_SHORT)  # MySQL, and MariaDB before 10.10: no ID column there
        return list(cur.fetchall())


def register(conn: Any, mariadb: bool) -> List[int]:
    """Add the server's collations the library doesn't know (or knows as another charset) to
    its table; their ids."""
    dbms = "mariadb" if mariadb else "mysql"
    added = []
    for number, charset, collation in _rows(conn):
        if number is None or charset is None:
            continue
        charset = _text(charset)
        known = CHARSET.charset_by_id(int(number), dbms)
        if known is not None and _SAME.get(known.name, known.name) == _SAME.get(charset, charset):
            continue
        CHARSET.charsets.add(CHARSET.Charset(int(number), charset, _text(collation), False, dbms))
        added.append(int(number))
    if added:
        log.info("%d collations of the server that the replication library doesn't know (ids "
                 "%d to %d) are read by their charsets as the server defines them", len(added),
                 min(added), max(added))
    return added


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value)
