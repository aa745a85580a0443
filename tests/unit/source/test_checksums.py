"""source.checksums: each event packet told to the library as with or without a checksum."""
import struct
import types
import zlib

import pymysql
from pymysql.protocol import MysqlPacket

from streamer.source import checksums
from streamer.source.checksums import USE_CHECKSUM, BinlogConnection, carries_checksum


def _event(kind, body, crc):
    """An event packet as the server sends it: the OK byte, the header, the body, its CRC32."""
    size = 19 + len(body) + (4 if crc else 0)
    event = struct.pack("<IBIIIH", 0, kind, 1, size, 1000, 0) + body
    if crc:
        event += struct.pack("<I", zlib.crc32(event))
    return b"\x00" + event


def _fde(algorithm):
    # A checksum-aware server's: the algorithm byte, then four checksum bytes, NONE or not.
    body = struct.pack("<H", 4) + b"8.0.15".ljust(50, b"\0") + struct.pack("<I", 0) + b"\x13" + \
        bytes(40) + bytes([algorithm])
    return _event(checksums.FORMAT_DESCRIPTION, body, crc=True)


def _read(monkeypatch, packets):
    """What BinlogConnection makes of ``packets``: (each packet's data, what the stream was
    told before the library read it)."""
    queue = [MysqlPacket(p, "utf8") for p in packets]
    monkeypatch.setattr(pymysql.connections.Connection, "_read_packet",
                        lambda self, packet_type=MysqlPacket: queue.pop(0))
    conn = BinlogConnection.__new__(BinlogConnection)
    conn.stream = types.SimpleNamespace(**{USE_CHECKSUM: True})
    seen = []
    for _ in packets:
        packet = conn._read_packet()
        seen.append((packet._data, getattr(conn.stream, USE_CHECKSUM)))
    return seen


def test_an_event_carries_a_checksum_when_its_last_four_bytes_are_its_crc32():
    assert carries_checksum(_event(checksums.ROTATE, b"x" * 12, crc=True))
    assert not carries_checksum(_event(checksums.ROTATE, b"x" * 12, crc=False))
    assert not carries_checksum(b"\x00" * 10)


def test_each_binlogs_events_are_read_as_its_format_description_says(monkeypatch):
    rotate = struct.pack("<Q", 4) + b"mysql-bin.000002"
    rows, query = b"r" * 30, b"q" * 25
    packets = [
        _event(checksums.ROTATE, rotate, crc=False),  # made up by the server: told by its bytes
        _fde(0),                                       # a binlog written with NONE
        _event(30, rows, crc=False),
        _event(27, b"mysql-bin.000002", crc=False),   # a heartbeat: as its binlog's events
        _event(checksums.ROTATE, rotate, crc=True),
        _fde(1),                                       # then one written with CRC32
        _event(2, query, crc=True),
        b"\xfe\x00\x00\x02\x00",                       # an EOF packet: left as it is
    ]
    seen = _read(monkeypatch, packets)
    told = [checked for _, checked in seen[:-1]]
    assert told == [False, True, False, False, True, True, True]
    # An event without a checksum gets four zero bytes where the library takes it to be; its
    # header (its size, its offset) stays the server's.
    for (data, checked), sent in zip(seen, packets):
        assert data == (sent if checked else sent + b"\0\0\0\0")
    assert seen[-1][0] == packets[-1]


def test_the_stream_is_told_only_when_it_changes(monkeypatch):
    writes = []

    class Stream:
        def __setattr__(self, name, value):
            writes.append(value)
            object.__setattr__(self, name, value)
    stream = Stream()
    object.__setattr__(stream, USE_CHECKSUM, True)
    queue = [MysqlPacket(p, "utf8") for p in
             [_fde(1), _event(2, b"q", crc=True), _event(2, b"q", crc=True), _fde(0),
              _event(2, b"q", crc=False)]]
    monkeypatch.setattr(pymysql.connections.Connection, "_read_packet",
                        lambda self, packet_type=MysqlPacket: queue.pop(0))
    conn = BinlogConnection.__new__(BinlogConnection)
    conn.stream = stream
    for _ in range(5):
        conn._read_packet()
    assert writes == [False]
