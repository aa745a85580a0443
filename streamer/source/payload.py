"""MySQL's compressed transactions (``binlog_transaction_compression=ON``, 8.0.20+), read as the
events they hold.

With the setting on, a transaction's events but its GTID event are written as one
``Transaction_payload`` event (type 40): a header, then the events compressed with zstd. The
header (MySQL's ``codecs/binary.cpp``, ``Transaction_payload::decode``) is a list of fields, each
a length-encoded type, a length-encoded length and a length-encoded value, ended by a type 0:
1 the compressed size, 2 the compression type (0 zstd, 255 none), 3 the uncompressed size. The
uncompressed bytes are whole binlog events one after the other, each with its 19-byte header and
no checksum.

``TransactionPayloadEvent`` takes the library's place for type 40: it inflates the payload and
decodes each event in it with the library's own packet wrapper, on the stream's table map, so
that ``events`` are the very events a plain transaction would have given; the binlog reader hands
them out in its place. An event inside a payload has no offset of its own in the file: each is
placed at the payload's offset (``source.pos``), and a change inside it is told apart by its
index in the transaction (``source.tx_row``), which the resume skip counts as for any
transaction.
"""
from __future__ import annotations

import struct
from typing import Any, Dict, Iterator, List, Tuple

from pymysql.protocol import MysqlPacket
from pymysqlreplication.event import BinLogEvent
from pymysqlreplication.packet import BinLogPacketWrapper

from streamer.errors import UnsupportedEvent
from streamer.source import lenenc

TYPE = 40
HEADER_END, PAYLOAD_SIZE, COMPRESSION, UNCOMPRESSED_SIZE = 0, 1, 2, 3
ZSTD, NONE = 0, 255
_EVENT_HEADER = struct.Struct("<IBIIIH")  # timestamp, type, server_id, event_size, log_pos, flags


def header(body: bytes) -> Tuple[Dict[int, int], int]:
    """The payload header's fields (type -> value) and where the payload starts."""
    fields: Dict[int, int] = {}
    at = 0
    while at < len(body):
        kind, at = lenenc.read(body, at)
        if kind == HEADER_END:
            return fields, at
        length, at = lenenc.read(body, at)
        if kind in (PAYLOAD_SIZE, COMPRESSION, UNCOMPRESSED_SIZE):
            fields[kind], _ = lenenc.read(body, at)
        at += length
    raise ValueError("the payload header has no end mark")


def inflate(body: bytes, where: str) -> bytes:
    """The events a payload event's body holds, uncompressed."""
    try:
        fields, at = header(body)
    except (ValueError, IndexError, KeyError) as exc:
        raise _corrupt(where, f"its header can't be read ({exc})") from exc
    compressed = body[at:at + fields.get(PAYLOAD_SIZE, len(body) - at)]
    kind = fields.get(COMPRESSION, NONE)
    if kind == NONE:
        return compressed
    if kind != ZSTD:
        raise UnsupportedEvent(f"the compressed transaction at {where} uses compression type "
                               f"{kind}; MySQL defines zstd (0) and none (255)")
    size = fields.get(UNCOMPRESSED_SIZE, 0)
    try:
        import zstandard
        plain = zstandard.ZstdDecompressor().decompress(compressed, max_output_size=size)
    except Exception as exc:  # noqa: BLE001 - zstandard's errors, named in the refusal
        raise _corrupt(where, f"zstd refused it ({exc!r})") from exc
    if size and len(plain) != size:
        raise _corrupt(where, f"it inflates to {len(plain)} bytes, its header says {size}")
    return plain


def split(plain: bytes) -> Iterator[bytes]:
    """The events, one by one, header and body."""
    at = 0
    while at < len(plain):
        size = _EVENT_HEADER.unpack_from(plain, at)[3]
        if size < _EVENT_HEADER.size or at + size > len(plain):
            raise ValueError(f"an event of {size} bytes at offset {at} of {len(plain)}")
        yield plain[at:at + size]
        at += size


def _corrupt(where: str, what: str) -> UnsupportedEvent:
    return UnsupportedEvent(f"the compressed transaction at {where} can't be read: {what}. "
                            f"Nothing from this event on was published, and the checkpoint stays "
                            f"before it. Check the binlog with mysqlbinlog")


class TransactionPayloadEvent(BinLogEvent):
    """A compressed transaction: ``events``, the events it holds, decoded."""

    def __init__(self, from_packet: Any, event_size: int, table_map: Any, ctl_connection: Any,
                 **kwargs: Any) -> None:
        super().__init__(from_packet, event_size, table_map, ctl_connection, **kwargs)
        start = from_packet.log_pos - from_packet.event_size
        where = f"offset {start}"
        plain = inflate(self.packet.read(event_size), where)
        from streamer.source import events as event_lists
        allowed = frozenset(event_lists.READ)
        self.events: List[Any] = []
        try:
            for raw in split(plain):
                inner = self._decoded(raw, start, table_map, ctl_connection, allowed, kwargs)
                if inner is not None:
                    self.events.append(inner)
        except (ValueError, IndexError, struct.error) as exc:
            raise _corrupt(where, f"its events can't be read ({exc})") from exc

    @staticmethod
    def _decoded(raw: bytes, start: int, table_map: Any, ctl_connection: Any, allowed: Any,
                 kwargs: Dict[str, Any]) -> Any:
        """One inner event, as the library decodes a stream's, placed at the payload's offset."""
        ts, kind, server, size, _, flags = _EVENT_HEADER.unpack_from(raw, 0)
        # The library reads some events (a table map's metadata) up to a checksum it assumes
        # every event ends with; an inner event has none, so it gets four unchecked bytes.
        placed = _EVENT_HEADER.pack(ts, kind, server, size + 4, start + size, flags) + \
            raw[_EVENT_HEADER.size:] + b"\x00" * 4
        wrapper = BinLogPacketWrapper(
            MysqlPacket(b"\x00" + placed, None), table_map, ctl_connection,
            kwargs.get("mysql_version"), True, allowed, kwargs.get("only_tables"),
            kwargs.get("ignored_tables"), kwargs.get("only_schemas"),
            kwargs.get("ignored_schemas"), kwargs.get("freeze_schema"),
            kwargs.get("ignore_decode_errors"), False, kwargs.get("optional_meta_data"),
            kwargs.get("enable_logging"), kwargs.get("use_column_name_cache", False),
            kwargs.get("post_header_lengths"))
        event = wrapper.event
        if event is not None and event.__class__.__name__ == "TableMapEvent":
            table_map[event.table_id] = event.get_table()
        return event


EVENT_MAP = {TYPE: TransactionPayloadEvent}
