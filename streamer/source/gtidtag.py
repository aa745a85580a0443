"""MySQL 8.4's tagged GTID event (``Gtid_tagged_log_event``, type 42), read as a GTID event.

A transaction whose GTID carries a tag (``uuid:tag:N``, written when a session sets
``gtid_next`` to ``AUTOMATIC:tag`` or ``uuid:tag:N``) starts with this event instead of the
plain ``Gtid`` (type 33). Its body is not a fixed layout but a message of MySQL's serialization
library, as its documentation (``PageLibsMysqlSerialization``) describes it:

- one byte, the serialization version; then the message: its size (a variable-length integer
  that counts the whole message, version byte included), the last non-ignorable field id, and
  the fields, each a field id followed by its data;
- a variable-length integer takes 1 to 9 bytes, little-endian: the number of trailing one bits
  of the first byte, plus one, is its length in bytes, and the value follows them (9 bytes: a
  first byte 0xff, then the whole 64-bit value). A signed one is zig-zag encoded: ``x << 1`` for
  x >= 0, ``(-(x + 1) << 1) | 1`` below;
- a string is its length, then its bytes; a fixed array (the uuid), each element in turn.

The fields of the GTID event, by id (MySQL's ``Gtid_event``): 0 flags, 1 the source uuid (16
unsigned bytes), 2 the transaction number (signed), 3 the tag, 4 last_committed and
5 sequence_number (signed), 6 and 7 the immediate and original commit timestamps (µs),
8 the transaction length, 9 and 10 the immediate and original server versions, 11 the group
commit ticket. Only the first four say which transaction this is; a later field this reader
does not know ends the read, and one that is marked non-ignorable is refused.

``TaggedGtidEvent`` takes the library's place for type 42 (source.patches) and offers what the
engine reads of a ``GtidEvent``: ``gtid`` (``uuid:tag:N``, as ``gtid_executed`` writes it),
``sid``, ``gno``, ``tag``, ``last_committed`` and ``sequence_number``.
"""
from __future__ import annotations

import uuid as uuid_mod
from typing import Any, Dict, Tuple

from pymysqlreplication.event import BinLogEvent

from streamer.errors import UnsupportedEvent

TYPE = 42
VERSION = 2  # the serialization version MySQL 8.4 writes
FLAGS, SID, GNO, TAG, LAST_COMMITTED, SEQUENCE_NUMBER = 0, 1, 2, 3, 4, 5
IMMEDIATE_TS, ORIGINAL_TS, TX_LENGTH, IMMEDIATE_VERSION, ORIGINAL_VERSION, TICKET = range(6, 12)
_SIGNED = frozenset([GNO, LAST_COMMITTED, SEQUENCE_NUMBER])
_UNSIGNED = frozenset([FLAGS, IMMEDIATE_TS, ORIGINAL_TS, TX_LENGTH, IMMEDIATE_VERSION,
                       ORIGINAL_VERSION, TICKET])


def read_uint(data: bytes, at: int) -> Tuple[int, int]:
    """A variable-length unsigned integer at ``at``: (value, offset after it)."""
    first = data[at]
    size = 1
    while size < 9 and first & (1 << (size - 1)):
        size += 1
    if at + size > len(data):
        raise ValueError(f"a {size}-byte integer at offset {at} runs past the end")
    if size == 9:
        return int.from_bytes(data[at + 1:at + 9], "little"), at + 9
    return int.from_bytes(data[at:at + size], "little") >> size, at + size


def read_int(data: bytes, at: int) -> Tuple[int, int]:
    """A variable-length signed (zig-zag) integer at ``at``: (value, offset after it)."""
    raw, at = read_uint(data, at)
    return (-(raw >> 1) - 1 if raw & 1 else raw >> 1), at


def parse(body: bytes) -> Dict[int, Any]:
    """The fields of a tagged GTID event's body (field id -> value)."""
    if not body:
        raise ValueError("the event is empty")
    if body[0] != VERSION:
        raise ValueError(f"serialization version {body[0]}, where MySQL 8.4 writes {VERSION}")
    size, at = read_uint(body, 1)
    last_needed, at = read_uint(body, at)
    end = min(size, len(body))
    fields: Dict[int, Any] = {}
    while at < end:
        field, at = read_uint(body, at)
        if field == SID:
            raw = bytearray()
            for _ in range(16):
                byte, at = read_uint(body, at)
                raw.append(byte)
            fields[SID] = bytes(raw)
        elif field == TAG:
            length, at = read_uint(body, at)
            fields[TAG] = body[at:at + length].decode("ascii")
            at += length
        elif field in _SIGNED:
            fields[field], at = read_int(body, at)
        elif field in _UNSIGNED:
            fields[field], at = read_uint(body, at)
        elif field <= last_needed:
            raise ValueError(f"field {field}, which this reader does not know, is marked as "
                             f"needed (the last needed is {last_needed})")
        else:
            break  # a newer server's optional field: what follows can't be told apart
    for needed in (SID, GNO, TAG):
        if needed not in fields:
            raise ValueError(f"field {needed} (uuid, number, tag) is missing")
    return fields


class TaggedGtidEvent(BinLogEvent):
    """A transaction's tagged GTID (``uuid:tag:N``)."""

    def __init__(self, from_packet: Any, event_size: int, table_map: Any, ctl_connection: Any,
                 **kwargs: Any) -> None:
        super().__init__(from_packet, event_size, table_map, ctl_connection, **kwargs)
        start = from_packet.log_pos - from_packet.event_size
        try:
            fields = parse(self.packet.read(event_size))
        except (ValueError, IndexError, UnicodeDecodeError) as exc:
            raise UnsupportedEvent(
                f"the tagged GTID event (type 42) at offset {start} can't be read: {exc}. "
                f"Nothing from this event on was published, and the checkpoint stays before "
                f"it. Check the binlog with mysqlbinlog") from exc
        self.sid = fields[SID]
        self.gno = fields[GNO]
        self.tag = fields[TAG].lower()  # tags compare without case; the server shows them so
        self.commit_flag = bool(fields.get(FLAGS, 0) & 1)
        self.last_committed = fields.get(LAST_COMMITTED, 0)
        self.sequence_number = fields.get(SEQUENCE_NUMBER, 0)

    @property
    def gtid(self) -> str:
        return f"{uuid_mod.UUID(bytes=self.sid)}:{self.tag}:{self.gno}"


EVENT_MAP = {TYPE: TaggedGtidEvent}
