"""A query event's status variables, MariaDB 11's included.

The library reads a query event's status variables one by one and raises on a code it does not
know, which stops the stream at the event. MariaDB writes codes beyond the ones it knows:
``Q_GTID_FLAGS3`` (130, whose length depends on its flags) and, from 11.x, ``Q_CHARACTER_SET_
COLLATIONS`` (131: a count, then a charset and a collation id, two bytes each, per entry), which
a ``CREATE DATABASE ... CHARACTER SET utf8mb4`` writes, and which may come before codes the
library knows. The block's length is in the event's post-header, so a code this reader does not
read is skipped with the rest of the block: the streamer reads nothing from it but the query.
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
