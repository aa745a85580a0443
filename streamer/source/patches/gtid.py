"""MariaDB's GTID event, with the extra flags that tell the phases of a two-phase ALTER apart.

With ``binlog_alter_two_phase`` (MariaDB 10.8+), an ALTER is written twice, each time as a query
event of its own GTID with the same statement: once when it starts (START ALTER), so replicas can
run it alongside, then when it ends, committed (COMMIT ALTER) or failed (ROLLBACK ALTER). Only the
GTID event's ``flags_extra`` byte tells the three apart; the library reads the event's first 13
bytes (sequence number, domain, flags) and not that byte. ``gtid_init`` reads it into the
event's ``alter``: 0, or one of ``START_ALTER``, ``COMMIT_ALTER``, ``ROLLBACK_ALTER``.

The event's layout after the flags (MariaDB's ``Gtid_log_event``): the group commit id (8 bytes)
when ``FL_GROUP_COMMIT_ID`` is set; an XA transaction's id (format id 4 bytes, the two lengths
1 byte each, then the id's bytes) when ``FL_PREPARED_XA`` or ``FL_COMPLETED_XA`` is; then, when
bytes are left, ``flags_extra``. An event with neither is padded to 19 bytes with zeros, which
read as no extra flag.
"""
from __future__ import annotations

from typing import Any, Callable

FL_GROUP_COMMIT_ID = 2
FL_XA = 64 | 128  # FL_PREPARED_XA, FL_COMPLETED_XA
START_ALTER = 2  # FL_START_ALTER_E1
COMMIT_ALTER = 4  # FL_COMMIT_ALTER_E1
ROLLBACK_ALTER = 8  # FL_ROLLBACK_ALTER_E1
_PHASES = START_ALTER | COMMIT_ALTER | ROLLBACK_ALTER
_LIBRARY_READ = 13  # sequence number, domain id, flags


def gtid_init(library: Callable[..., None]) -> Callable[..., None]:
    """MariadbGtidEvent.__init__, given the library's: the event also gets ``alter``."""
    def __init__(self: Any, from_packet: Any, event_size: int, table_map: Any,
                 ctl_connection: Any, **kwargs: Any) -> None:
        library(self, from_packet, event_size, table_map, ctl_connection, **kwargs)
        self.alter = 0
        flags = self.flags
        at = _LIBRARY_READ
        packet = self.packet
        if flags & FL_GROUP_COMMIT_ID:
            packet.advance(8)
            at += 8
        if flags & FL_XA:
            packet.advance(4)
            lengths = packet.read(2)
            packet.advance(lengths[0] + lengths[1])
            at += 6 + lengths[0] + lengths[1]
        if at < event_size:
            self.alter = packet.read(1)[0] & _PHASES
    return __init__
