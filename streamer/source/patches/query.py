"""Query events as the servers write them: their status variables (MariaDB 11's included), the
charset of their statement, and LOAD DATA's statement.

The library reads a query event's status variables one by one and raises on a code it does not
know, which stops the stream at the event. MariaDB writes codes beyond the ones it knows:
``Q_GTID_FLAGS3`` (130, whose length depends on its flags) and, from 11.x, ``Q_CHARACTER_SET_
COLLATIONS`` (131: a count, then a charset and a collation id, two bytes each, per entry), which
a ``CREATE DATABASE ... CHARACTER SET utf8mb4`` writes, and which may come before codes the
library knows. The block's length is in the event's post-header, so a code this reader does not
read is skipped with the rest of the block: the streamer reads nothing from it but the query.

A statement is written in its session's client charset (``character_set_client``, a status
variable): the library decoded every one as UTF-8, and a latin1 session's ``TRUNCATE TABLE
`café``` named a table ``caf\\xe9``, which no published table is; the TRUNCATE was lost, and a
statement-logged change of the table was taken for one of another. ``query_init`` decodes it
in its charset, with the codecs values are read with.

A LOAD DATA logged as a statement is an Execute_load_query event (after the file's bytes, in a
Begin_load_query and Append_block events), a query event with a longer post-header, of which the
library reads the post-header only: ``load_query_init`` reads its schema and statement too.
"""
from __future__ import annotations

from typing import Any, Callable

from pymysqlreplication.constants.CHARSET import charset_by_id
from pymysqlreplication.event import BinLogEvent, QueryEvent
from pymysqlreplication.exceptions import MalformedBinLogEvent
from pymysqlreplication.row_event import RowsEvent

from streamer.source import decoders

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
            self.packet.advance(self._status_end - self.packet.read_bytes)
    return _read_status_vars_value_for_key


def query_init(self: Any, from_packet: Any, event_size: int, table_map: Any,
               ctl_connection: Any, **kwargs: Any) -> None:
    """QueryEvent.__init__: the library's reading, but for the statement's charset."""
    BinLogEvent.__init__(self, from_packet, event_size, table_map, ctl_connection, **kwargs)
    packet = self.packet
    self.slave_proxy_id = packet.read_uint32()
    self.execution_time = packet.read_uint32()
    self.schema_length = packet.read_uint8()
    self.error_code = packet.read_uint16()
    self.status_vars_length = packet.read_uint16()
    post_header = self._advance_to_payload(_QUERY_POST_HEADER)
    _status_vars(self)
    self.schema = packet.read(self.schema_length)
    packet.advance(1)
    size = event_size - post_header - self.status_vars_length - self.schema_length - 1
    if size < 0:
        raise MalformedBinLogEvent(f"query event's statement length is negative ({size}) after "
                                   f"a post-header of {post_header} bytes")
    self.query = statement(self, packet.read(size))


def _status_vars(event: Any) -> None:
    """Read a query event's status variables (or an Execute_load_query's) with the query
    event's reader, the codes the library doesn't know included."""
    packet = event.packet
    end = event._status_end = packet.read_bytes + event.status_vars_length
    read = QueryEvent._read_status_vars_value_for_key
    while packet.read_bytes < end:
        read(event, packet.read_uint8())


def statement(event: Any, raw: bytes) -> str:
    """A statement's text, in its client's charset (UTF-8 when the event doesn't say)."""
    if raw.isascii():  # most statements (MySQL's BEGIN of every transaction): any charset
        return raw.decode("ascii")
    client = getattr(event, "character_set_client", None)
    charset = charset_by_id(client, event.dbms) if client is not None else None
    return decoders.decode_text(raw, charset.encoding if charset is not None else "utf8",
                                RowsEvent)


# Execute_load_query's post-header: a query event's, then the file id, the file name's start and
# end in the statement, and the duplicate handling (4 + 4 + 4 + 1).
_LOAD_QUERY_POST_HEADER = _QUERY_POST_HEADER + 13


def load_query_init(library: Callable[..., None]) -> Callable[..., None]:
    """ExecuteLoadQueryEvent.__init__, given the library's, which reads the post-header and
    stops: the event also gets the ``schema`` and ``query`` a query event has (the LOAD DATA
    statement, the file name rewritten by the server), so that the statements stage judges it
    as it judges any statement logged as one, in its client's charset."""
    def __init__(self: Any, from_packet: Any, event_size: int, table_map: Any,
                 ctl_connection: Any, **kwargs: Any) -> None:
        start = from_packet.read_bytes
        library(self, from_packet, event_size, table_map, ctl_connection, **kwargs)
        packet = self.packet
        read = packet.read_bytes - start
        packet.advance(max(self._declared_post_header_len(_LOAD_QUERY_POST_HEADER) - read, 0))
        _status_vars(self)
        self.schema = packet.read(self.schema_length)
        packet.advance(1)
        self.query = statement(self, packet.read(event_size - (packet.read_bytes - start)))
    return __init__
