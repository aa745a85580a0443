"""The temporary tables of sessions that log statements: a name they shadow is not the table's.

A session logging its changes as statements (binlog_format STATEMENT, or MariaDB's MIXED) has
its temporary tables' statements logged too: ``CREATE TEMPORARY TABLE t1``, then
``INSERT INTO t1 ...`` or ``TRUNCATE t1``, where ``t1`` may also be a published table's name.
The server flags each query event that used a temporary table of its session
(``THREAD_SPECIFIC_F``, as replicas read it); which of the statement's names was the temporary
one, the flag doesn't say: ``INSERT INTO t1 SELECT * FROM tmp`` changes the real ``t1``.

So the names each session (server id, thread id) made temporary are kept, from its logged
``CREATE TEMPORARY TABLE`` to its ``DROP TEMPORARY TABLE`` (which the server also logs when the
session ends), and until the server restarts (a binlog's format description with a creation
time, which makes replicas drop every temporary table too). A name is taken for a temporary
table only in a flagged statement of the session that created it. Every doubt forgets a name
(a RENAME, too many sessions, the streamer's own restart): at worst a temporary table's change
is then taken for the published table's, which stops the stream, naming it; never the other
way round.
"""
from __future__ import annotations

from typing import Any, Dict, FrozenSet, List, Set, Tuple

from streamer.source.sqltext import (Token, first_word, folded, name_at, table_statement,
                                     tokens)

Table = Tuple[str, str]
Session = Tuple[int, int]  # (server id, thread id)

THREAD_SPECIFIC_F = 0x4  # LOG_EVENT_THREAD_SPECIFIC_F: the statement used a temporary table
_MOST_SESSIONS = 10_000  # past it, the oldest session's names are forgotten
_NONE: FrozenSet[Table] = frozenset()


def used_temporary(event: Any) -> bool:
    """Whether the query event's statement used a temporary table of its session."""
    return bool(event.packet.flags & THREAD_SPECIFIC_F)


class TemporaryTables:
    """``on_statement`` follows what flagged query events create and drop; ``of`` gives the
    temporary tables an event's statement may mean by their names."""

    def __init__(self, most: int = _MOST_SESSIONS) -> None:
        self.most = most
        self.sessions: Dict[Session, Set[Table]] = {}

    def of(self, event: Any) -> FrozenSet[Table]:
        if not used_temporary(event):
            return _NONE
        found = self.sessions.get(_session(event))
        return frozenset(found) if found else _NONE

    def server_started(self) -> None:
        """A binlog the server began at its start: every temporary table is gone."""
        self.sessions.clear()

    def on_statement(self, event: Any, query: str, db: str) -> None:
        if not used_temporary(event):
            return
        word = first_word(query)
        if word == "CREATE":
            found = table_statement(query, db)
            if found is not None and "TEMPORARY" in found.before:
                self._add(_session(event), (found.db, found.table))
        elif word in ("DROP", "ALTER", "RENAME"):
            session = _session(event)
            names = self.sessions.get(session)
            if not names:
                return
            toks = tokens(query)
            if word != "ALTER" or any(t.up == "RENAME" for t in toks):
                names.difference_update(_named(toks, db))
                if not names:
                    del self.sessions[session]

    def _add(self, session: Session, table: Table) -> None:
        names = self.sessions.get(session)
        if names is None:
            if len(self.sessions) >= self.most:
                del self.sessions[next(iter(self.sessions))]
            names = self.sessions[session] = set()
        names.add(table)


def _session(event: Any) -> Session:
    return event.packet.server_id, event.slave_proxy_id


def _named(toks: List[Token], db: str) -> Set[Table]:
    """Every table name the statement may hold (``DROP TABLE a, b``, ``RENAME TABLE a TO b``,
    ``ALTER TABLE a RENAME TO b``...): a name read here is no longer taken for a temporary
    table's, which only a stop can cost."""
    out: Set[Table] = set()
    for j in range(1, len(toks)):
        name = name_at(toks, j, db)
        if name is not None:
            out.add(folded(name[0], name[1]))
    return out
