"""A query event's status variables, MariaDB 11's included.

The library reads a query event's status variables one by one and raises on a code it does not
know, which stops the stream at the event. MariaDB writes codes beyond the ones it knows:
``Q_GTID_FLAGS3`` (130, whose length depends on its flags) and, from 11.x, ``Q_CHARACTER_SET_
COLLATIONS`` (131: a count, then a charset and a collation id, two bytes each, per entry), which
a ``CREATE DATABASE ... CHARACTER SET utf8mb4`` writes, and which may come before codes the
library knows. The block's length is in the event's post-header, so a code this reader does not
read is skipped with the rest of the block: the streamer reads nothing from it but the query.

A LOAD DATA logged as a statement is an Execute_load_query event (after the file's bytes, in a
Begin_load_query and Append_block events), a query event with a longer post-header, of which the
library reads the post-header only: ``load_query_init`` reads its schema and statement too.
"""
from __future__ import annotations

from typing import Any, Callable

CHARACTER_SET_COLLATIONS = 131
# The codes the library reads itself (MySQL's 0..20, MariaDB's Q_HRNOW and Q_XID).
LIBRARY_CODES = frozenset(list(range(0, 21)) + [128, 129])
_QUERY_POST_HEADER = 13  # thread id, time, schema length, error code, status block length


def read_status_var(library: Callable[[Any, int], None]) -> Callable[[Any, int], None]:
    """QueryEvent._read_status_vars_value_for_key, given the library's."""
    def _read_status_vars_value_for_key(self: Any, key: int) -> None:
        if key in LIBRARY_CODES:
            library(self, key)
        elif key == CHARACTER_SET_COLLATIONS:
            count = self.packet.read_uint8()
            self.packet.advance(4 * count)
        else:  # the rest of the block, whatever it holds
            end = self._declared_post_header_len(_QUERY_POST_HEADER) + self.status_vars_length
            self.packet.advance(end - self.packet.read_bytes)
    return _read_status_vars_value_for_key


# Execute_load_query's post-header: a query event's, then the file id, the file name's start and
# end in the statement, and the duplicate handling (4 + 4 + 4 + 1).
_LOAD_QUERY_POST_HEADER = _QUERY_POST_HEADER + 13


def load_query_init(library: Callable[..., None]) -> Callable[..., None]:
    """ExecuteLoadQueryEvent.__init__, given the library's, which reads the post-header and
    stops: the event also gets the ``schema`` and ``query`` a query event has (the LOAD DATA
    statement, the file name rewritten by the server), so that the statements stage judges it
    as it judges any statement logged as one. Its status variables are skipped whole."""
    def __init__(self: Any, from_packet: Any, event_size: int, table_map: Any,
                 ctl_connection: Any, **kwargs: Any) -> None:
        start = from_packet.read_bytes
        library(self, from_packet, event_size, table_map, ctl_connection, **kwargs)
        packet = self.packet
        read = packet.read_bytes - start
        declared = self._declared_post_header_len(_LOAD_QUERY_POST_HEADER)
        packet.advance(max(declared - read, 0) + self.status_vars_length)
        self.schema = packet.read(self.schema_length)
        packet.advance(1)
        left = event_size - (packet.read_bytes - start)
        self.query = packet.read(left).decode("utf-8", errors="backslashreplace")
    return __init__
