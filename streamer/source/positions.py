"""Event offsets on servers that don't write them: MariaDB 11.4+ with ``binlog_legacy_event_pos``
OFF (its default).

Such a server writes a real end offset (``log_pos``) on each transaction's GTID event and on the
event that ends it, and 0 on every event in between: table maps, rows, annotations. The offset of
an event is what a message's ``source.pos`` names and what tells one row event from another in
the same transaction, so a reader of such a server works them out: the events of a transaction
lie one after the other in the file, so an event with no offset of its own starts where the one
before it ended. That holds only if the reader sees every event of the transaction, which the
server keeps to itself unless asked: the ``Annotate_rows`` events (the statement behind each
rows event) are sent only to a reader that asks for them, with a flag of its dump command
(``ask_for_annotations``; the library sets it only in a dump by GTID), so the streamer asks, on
such a server only, and drops them here.

At the event that ends the transaction, whose offset the server does write, the sum is checked:
a difference means an event went unseen, and the offsets worked out inside that transaction
were wrong. That is logged as an error naming the transaction; the rows themselves are right.
"""
from __future__ import annotations

import logging
import struct
from typing import Any, Iterable, Iterator, Optional

from pymysqlreplication.event import (FormatDescriptionEvent, HeartbeatLogEvent,
                                      MariadbAnnotateRowsEvent, RotateEvent)

from streamer.source.filestart import FileStart

log = logging.getLogger(__name__)

# The reader's library argument that makes the server send its Annotate_rows events in a dump by
# GTID; a dump by file and offset gets the flag from ask_for_annotations.
ANNOTATE = {"annotate_rows_event": True}
COM_BINLOG_DUMP = 0x12
BINLOG_SEND_ANNOTATE_ROWS_EVENT = 0x02
_FLAGS_AT = 4 + 1 + 4  # packet header, command, binlog offset


def ask_for_annotations(conn: Any) -> None:
    """Make the dump command that ``conn`` (a stream connection) sends ask for MariaDB's
    Annotate_rows events: its flags (after the packet header, the command and the offset) get
    BINLOG_SEND_ANNOTATE_ROWS_EVENT."""
    write = conn._write_bytes

    def _write_bytes(data: bytes) -> None:
        if len(data) > _FLAGS_AT + 2 and data[4] == COM_BINLOG_DUMP:
            flags = struct.unpack_from("<H", data, _FLAGS_AT)[0] | BINLOG_SEND_ANNOTATE_ROWS_EVENT
            data = data[:_FLAGS_AT] + struct.pack("<H", flags) + data[_FLAGS_AT + 2:]
        write(data)
    conn._write_bytes = _write_bytes


def writes_offsets(conn: Any) -> bool:
    """Whether the server writes every event's end offset: all but MariaDB 11.4+ with
    binlog_legacy_event_pos OFF."""
    with conn.cursor() as cur:
        cur.execute("SHOW GLOBAL VARIABLES LIKE 'binlog_legacy_event_pos'")
        row = cur.fetchone()
    return row is None or str(row[1]).upper() in ("ON", "1")


# The events at a file's head, outside any transaction: a dump that starts inside the file
# sends its format description with no offset (it lies at the file's start, not where the
# dump reads), and they are never among a transaction's events to work out.
_FILE_HEAD = (FormatDescriptionEvent, FileStart)


class Offsets:
    """Fills in the end offset (``packet.log_pos``) of each event the server sent without one.
    ``filled(events)`` yields the events as they come, Annotate_rows events left out."""

    def __init__(self) -> None:
        self.next: Optional[int] = None  # where the next event starts, when known
        self.guessed = 0  # events of the current transaction whose offset was worked out
        self.mismatches = 0

    def filled(self, events: Iterable[Any]) -> Iterator[Any]:
        for event in events:
            cls = event.__class__
            packet = event.packet
            if cls is RotateEvent:  # the next event is the named file's, at the named offset
                self.next = event.position
                self.guessed = 0
            elif cls is not HeartbeatLogEvent and (packet.log_pos or cls not in _FILE_HEAD):
                self._place(packet)
            if cls is not MariadbAnnotateRowsEvent:
                yield event

    def _place(self, packet: Any) -> None:
        if packet.log_pos:
            start = packet.log_pos - packet.event_size
            if self.guessed and self.next is not None and start != self.next:
                self.mismatches += 1
                log.error("the offsets worked out for the %d events before the one ending at "
                          "%d were wrong by %d bytes (an event of the transaction was not "
                          "sent to the streamer): their messages' source.pos are off; the "
                          "rows themselves are right", self.guessed, packet.log_pos,
                          start - self.next)
            self.next = packet.log_pos
            self.guessed = 0
        elif self.next is not None:
            self.next += packet.event_size
            packet.log_pos = self.next
            self.guessed += 1
