"""MariaDB's compressed binlog events (``log_bin_compress=ON``), read as their plain twins.

With the setting on, the server writes ``Query_compressed`` (165), ``Write/Update/Delete_rows_
compressed_v1`` (166-168) and their v2 forms (169-171) for any statement or row image longer than
``log_bin_compress_min_len``. The setting can change at run time, so plain and compressed events
interleave. python-mysql-replication knows none of these types.

The format (MariaDB's ``log_event.cc``, ``binlog_buf_uncompress``): everything up to the variable
part is as in the plain event (the query's post-header, status variables and database; the rows
event's post-header, column count and column bitmaps). The rest is one compressed record:

- one byte: bit 7 set; bits 4-6 the algorithm (0, zlib, is the only one defined); bits 0-2 the
  width (1-4) of the length that follows;
- the uncompressed length, big-endian, in that many bytes;
- the zlib stream.

Each class here takes the library's place for one type code: it inflates the record, hands the
library's own parser of the plain twin the event as the server would have written it plain, and
then becomes that twin (``__class__``), so the engine reads it exactly as a plain event. The
packet keeps the event's real size and end position, so checkpoints name the bytes in the file.
Nothing here runs for a plain event.
"""
from __future__ import annotations

import zlib
from typing import Any, Dict, Tuple, Type

from pymysql.protocol import MysqlPacket
from pymysqlreplication.event import QueryEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from streamer.errors import UnsupportedEvent

QUERY_COMPRESSED = 165
# Compressed type code -> (plain twin's code, its class, the plain post-header length).
TWINS: Dict[int, Tuple[int, Any, int]] = {
    QUERY_COMPRESSED: (2, QueryEvent, 13),
    166: (23, WriteRowsEvent, 8), 167: (24, UpdateRowsEvent, 8), 168: (25, DeleteRowsEvent, 8),
    169: (30, WriteRowsEvent, 10), 170: (31, UpdateRowsEvent, 10), 171: (32, DeleteRowsEvent, 10),
}
_HEADER = 20  # the OK byte and the 19-byte event header before the body


def inflate(record: bytes, where: str) -> bytes:
    """The bytes a compressed record holds (the format is in the module's doc)."""
    if not record:
        raise _corrupt(where, "the compressed record is empty")
    flags = record[0]
    width = flags & 0x07
    if flags & 0x80 == 0 or not 1 <= width <= 4 or len(record) < 1 + width:
        raise _corrupt(where, f"the compressed record's header byte is 0x{flags:02x}")
    algorithm = (flags >> 4) & 0x07
    if algorithm != 0:
        raise UnsupportedEvent(
            f"the compressed binlog event at {where} uses compression algorithm {algorithm}; "
            f"MariaDB defines only zlib (0). Set log_bin_compress=OFF on the server and restart "
            f"the streamer past the event once its changes are accounted for")
    size = int.from_bytes(record[1:1 + width], "big")
    try:
        plain = zlib.decompress(record[1 + width:])
    except zlib.error as exc:
        raise _corrupt(where, f"zlib refused it ({exc})") from exc
    if len(plain) != size:
        raise _corrupt(where, f"it inflates to {len(plain)} bytes, its header says {size}")
    return plain


def _corrupt(where: str, what: str) -> UnsupportedEvent:
    return UnsupportedEvent(f"the compressed binlog event at {where} can't be read: {what}. "
                            f"Nothing from this event on was published, and the checkpoint stays "
                            f"before it. Check the binlog with mysqlbinlog")


def _lenenc(body: bytes, at: int) -> Tuple[int, int]:
    """A length-encoded integer at ``at``: its value and the offset after it."""
    first = body[at]
    if first < 0xFB:
        return first, at + 1
    width = {0xFC: 2, 0xFD: 3, 0xFE: 8}[first]
    return int.from_bytes(body[at + 1:at + 1 + width], "little"), at + 1 + width


def _clear_part(code: int, body: bytes, post_header: int) -> int:
    """How many bytes of the body stay uncompressed: up to the query text, or up to the rows."""
    if code == QUERY_COMPRESSED:
        db_len = body[8]
        status_len = int.from_bytes(body[11:13], "little")
        return post_header + status_len + db_len + 1
    at = post_header
    if TWINS[code][2] == 10:  # v2: the last post-header field is the extra data's length
        at = post_header - 2 + int.from_bytes(body[post_header - 2:post_header], "little")
    width, at = _lenenc(body, at)
    bitmaps = 2 if code in (167, 170) else 1
    return at + bitmaps * ((width + 7) // 8)


def _plain(from_packet: Any, event_size: int, kwargs: Dict[str, Any]) -> int:
    """Give the library's packet wrapper the event as it reads plain, and its body's size."""
    code = from_packet.event_type
    twin_code, _, known = TWINS[code]
    lengths = kwargs.get("post_header_lengths") or ()
    post_header = lengths[code - 1] if len(lengths) >= code else known
    packet = from_packet.packet
    where = f"offset {from_packet.log_pos - from_packet.event_size}"
    header = packet.get_bytes(0, _HEADER)
    body = packet.read(event_size)
    rest = packet.read_all()  # the checksum, when the binlog has them
    try:
        clear = _clear_part(code, body, post_header)
    except (IndexError, KeyError) as exc:
        raise _corrupt(where, "its clear part is shorter than its header says") from exc
    if clear >= len(body):
        raise _corrupt(where, "it has no compressed record")
    plain = body[:clear] + inflate(body[clear:], where)
    from_packet.packet = MysqlPacket(header + plain + rest, None)
    from_packet.packet.advance(_HEADER)
    from_packet.event_type = twin_code
    return len(plain)


def _twin(twin: Any) -> Type[Any]:
    class Compressed(twin):  # type: ignore[misc, valid-type]
        def __init__(self, from_packet: Any, event_size: int, table_map: Any,
                     ctl_connection: Any, **kwargs: Any) -> None:
            size = _plain(from_packet, event_size, kwargs)
            super().__init__(from_packet, size, table_map, ctl_connection, **kwargs)
            self.__class__ = twin  # read from here on exactly as the plain event

    Compressed.__name__ = Compressed.__qualname__ = f"Compressed{twin.__name__}"
    return Compressed


CLASSES: Dict[Any, Type[Any]] = {twin: _twin(twin) for twin in
                                 (QueryEvent, WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)}
# Type code -> the class the library builds for it.
EVENT_MAP: Dict[int, Type[Any]] = {code: CLASSES[twin] for code, (_, twin, _) in TWINS.items()}
