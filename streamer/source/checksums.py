"""Binlogs with and without checksums, read as the server sends each.

A binlog's events end in a CRC32 when ``binlog_checksum`` was CRC32 as it was written, and in
nothing when it was NONE; its format description event says which (its algorithm byte, which a
checksum-aware server writes with four checksum bytes after it whatever the setting). A change
of the setting starts a new binlog, so one stream can cross files of both kinds.

python-mysql-replication takes one answer for the whole stream, from the server's setting when
it connects, and with NONE:
- it doesn't tell the server it reads checksums, and the server refuses to send a binlog
  written with them ("Slave can not handle replication events with the checksum ..."): every
  start stopped at the first older file;
- a table map's optional metadata is read up to four bytes before the event's end, where it
  takes the checksum to be, and a primary key list that ends there was dropped: the rows of
  every table went out keyless, silently (seen on MariaDB 10.11, 11.4 and MySQL 8.0);
- with CRC32 set again, a NONE file's events would lose their last four bytes.

So the stream always says it reads checksums (``source.patches``), and ``BinlogConnection``
tells the library, packet by packet, whether the event it is about to read carries one: from
the last format description event (a heartbeat too: the server checksums it as the binlog it is
sending), or, for a rotate (the one a server makes up as a stream starts, before any format
description) and anything before the first format description, from the bytes themselves. An
event without one gets four zero bytes after it, where the library's readers stop short; the
event's size and offsets stay the server's.
"""
from __future__ import annotations

import zlib
from typing import Any

from pymysql.protocol import MysqlPacket

from streamer.source.server import Connection

FORMAT_DESCRIPTION = 15
ROTATE = 4
_HEADER_END = 20  # the OK byte, then the 19-byte event header
_PAD = b"\0\0\0\0"
USE_CHECKSUM = "_BinLogStreamReader__use_checksum"


def carries_checksum(data: bytes) -> bool:
    """Whether an event (after the packet's OK byte) ends in the CRC32 of the rest of it."""
    return len(data) >= _HEADER_END + 4 and \
        zlib.crc32(memoryview(data)[1:-4]) == int.from_bytes(data[-4:], "little")


class BinlogConnection(Connection):
    """The binlog stream's connection: each event packet read is told to ``stream`` (the
    library's reader) as with or without a checksum, and one without is padded."""

    stream: Any = None
    # The current binlog's events carry none (its format description said NONE); None until
    # the first format description event of the stream.
    plain: Any = None

    def _read_packet(self, packet_type: Any = MysqlPacket) -> Any:
        packet = super()._read_packet(packet_type)
        data = packet._data
        if len(data) <= _HEADER_END or data[0] != 0:
            return packet  # not an event: an EOF or an error
        kind = data[5]
        if kind == FORMAT_DESCRIPTION:
            self.plain = data[-5] == 0
            checked = True
        elif kind == ROTATE or self.plain is None:
            checked = carries_checksum(data)
        else:
            checked = not self.plain
        if not checked:
            packet._data = data + _PAD
        stream = self.stream
        if stream is not None and getattr(stream, USE_CHECKSUM) is not checked:
            setattr(stream, USE_CHECKSUM, checked)
        return packet


def always_checksum_aware(original: Any) -> Any:
    """BinLogStreamReader.__checksum_enabled: True, so that the stream says it reads checksums
    (the server then sends binlogs written with them) whatever the setting is now."""
    def checksum_enabled(self: Any) -> bool:
        return True
    return checksum_enabled
