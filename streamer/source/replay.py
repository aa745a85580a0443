"""A recorded binlog replayed as a live stream, through the very code a server's stream goes through.

``replayed`` returns a ``BinlogReader`` whose library reader and connections are twins of a live
reader's (same classes, same attributes), but whose socket is one end of a socket pair: the
other end is fed the recorded transactions, a few at a time, each time the reader has taken all
it was given. So the reader finds itself caught
up after each group, as a live reader does, and the stream ends with the EOF packet a server sends
when it ends a stream. Event times are set to now, so the changes look live, not like a backlog.

Used by engine.warmup, to run the streamer's hot path under PyPy before the first real change.
Only the MariaDB recording's event types are replayed (a GTID event opens a transaction, an XID
event ends it); annotate events are dropped, as a server sends none to the streamer.
"""
from __future__ import annotations

import io
import socket
import struct
import time
import zlib
from typing import Any, Callable, List, Optional

from streamer.errors import StreamInterrupted
from streamer.position import Position
from streamer.source import caughtup
from streamer.source.reader import BinlogReader
from streamer.source.server import READ_BUFFER

HEADER = struct.Struct("<IBIIIH")  # timestamp, type, server_id, event_size, log_pos, flags
MAGIC = b"\xfebin"
ROTATE, FORMAT_DESCRIPTION, XID, ANNOTATE_ROWS, MARIADB_GTID = 4, 15, 16, 160, 162
ARTIFICIAL = 0x20
FILE = "streamer-warmup-bin.000001"
# pymysql's end of stream: 0xfe, no warnings, no status flags.
EOF_PAYLOAD = b"\xfe\x00\x00\x00\x00"
# A replayed group is always there to read: a read that waits this long is a bug, not a server.
READ_TIMEOUT_S = 10


class Recording:
    """A binlog file's format description event and its transactions, each a list of events
    (bytes): the events from a GTID event to the XID event that commits it. Transactions
    without an XID event (DDL) and annotate events are left out."""

    def __init__(self, data: bytes) -> None:
        if data[:4] != MAGIC:
            raise ValueError("not a binlog file (no magic number)")
        self.format_description: Optional[bytes] = None
        self.transactions: List[List[bytes]] = []
        self.server_id = 1
        group: Optional[List[bytes]] = None
        pos = 4
        while pos < len(data):
            _, kind, server_id, size, _, _ = HEADER.unpack_from(data, pos)
            if size < HEADER.size or pos + size > len(data):
                raise ValueError(f"a truncated event at {pos}")
            event = data[pos:pos + size]
            pos += size
            if kind == FORMAT_DESCRIPTION:
                self.format_description = event
                self.server_id = server_id
            elif kind == MARIADB_GTID:
                group = [event]
            elif group is not None and kind != ANNOTATE_ROWS:
                group.append(event)
                if kind == XID:
                    self.transactions.append(group)
                    group = None
        if self.format_description is None or not self.transactions:
            raise ValueError("no format description event or no committed transaction")


def _packet(payload: bytes, seq: int) -> bytes:
    """One MySQL protocol packet (a payload under 16 MB)."""
    return struct.pack("<I", len(payload))[:3] + bytes((seq & 0xFF,)) + payload


def _timed(event: bytes, ts: int) -> bytes:
    return struct.pack("<I", ts) + event[4:]


def _rotate(server_id: int) -> bytes:
    """The artificial rotate event a server sends first: the file and position streamed from,
    and its checksum (which tells that the events carry one, before the format description:
    source.checksums)."""
    body = struct.pack("<Q", 4) + FILE.encode()
    event = HEADER.pack(0, ROTATE, server_id, HEADER.size + len(body) + 4, 0, ARTIFICIAL) + body
    return event + struct.pack("<I", zlib.crc32(event))


class _Feed:
    """What the replayed stream still has to send: ``transactions`` of the recording, from
    ``first`` on (round robin), in groups of ``group``, then the end of the stream. Called
    (as the reader's ``refill``) when the reader has taken everything sent, it sends the next
    group to ``peer``, the socket pair's far end, from this thread (a group fits in the
    socket's buffer); False once there is nothing more. Before each group but the first, it
    asks ``stop()``: when that is true, the stream ends there. ``sent``: the transactions sent
    so far. Each group is made as it is sent, so a long stream costs nothing up front."""

    def __init__(self, recording: Recording, transactions: int, group: int, first: int,
                 peer: socket.socket, stop: Callable[[], bool] = lambda: False) -> None:
        self.recording = recording
        self.transactions = transactions
        self.group = group
        self.first = first
        self.peer = peer
        self.stop = stop
        self.sent = 0
        self.seq = 1  # the binlog dump request was packet 0
        self.ended = False

    def _next(self, payload: bytes) -> bytes:
        packet = _packet(payload, self.seq)
        self.seq += 1
        return packet

    def _group(self) -> bytes:
        rec = self.recording
        now = int(time.time())  # each group's: a long stream's changes stay live
        out = []
        if self.sent == 0:
            # The rotate event keeps its zero time: a server's first, artificial one has no other.
            out.append(self._next(b"\x00" + _rotate(rec.server_id)))
            out.append(self._next(b"\x00" + _timed(rec.format_description or b"", now)))
        txs = rec.transactions
        n = min(self.group, self.transactions - self.sent)
        for i in range(self.sent, self.sent + n):
            for event in txs[(self.first + i) % len(txs)]:
                out.append(self._next(b"\x00" + _timed(event, now)))
        self.sent += n
        return b"".join(out)

    def __call__(self) -> bool:
        if self.ended:
            return False
        if self.sent < self.transactions and (self.sent == 0 or not self.stop()):
            self.peer.sendall(self._group())
        else:
            # On its own: the last group ends caught up too, like every other.
            self.peer.sendall(self._next(EOF_PAYLOAD))
            self.ended = True
        return True


class ReplayedReader:
    """A context manager around the replayed ``BinlogReader`` (``reader``) that closes the
    socket pair's far end too. ``sent()``: how many transactions the stream has sent."""

    def __init__(self, reader: BinlogReader, peer: socket.socket, feed: _Feed) -> None:
        self.reader = reader
        self.peer = peer
        self.feed = feed

    def sent(self) -> int:
        return self.feed.sent

    def __enter__(self) -> BinlogReader:
        return self.reader

    def __exit__(self, *exc: Any) -> None:
        try:
            self.reader.__exit__(*exc)
        finally:
            self.peer.close()


def _no_connection(**settings: Any) -> Any:
    raise StreamInterrupted("a replayed binlog stream does not connect to a server")


def _twin(obj: Any, **values: Any) -> Any:
    """A new object of ``obj``'s class with its attributes, added in the same order, and
    ``values`` for some of them: under PyPy the same layout (map) as ``obj``'s, so the JIT's
    code for one serves the other."""
    twin = object.__new__(type(obj))
    attrs = dict(obj.__dict__)
    missing = set(values) - set(attrs)
    if missing:
        raise ValueError(f"{type(obj).__name__} has no attribute {sorted(missing)}")
    attrs.update(values)
    twin.__dict__.update(attrs)
    return twin


def replayed(like: BinlogReader, recording: Recording, transactions: int, group: int = 8,
             first: int = 0, stop: Callable[[], bool] = lambda: False) -> ReplayedReader:
    """A reader of ``transactions`` of ``recording`` (from its ``first``), sent ``group`` at a
    time; iterating it ends after the last one, or after the first group at which ``stop()``
    is true (asked before each group but the first). Its ``start`` is where the stream starts.

    Its reader, library reader and connections are twins of those of ``like``, a reader of a
    live server that has read events: the same classes with the same attributes, so that the
    code PyPy compiles for one serves the other. ``like`` itself is not touched: the twins get
    a socket, a table map and a position of their own."""
    live = like._stream
    if live is None or getattr(live, "_stream_connection", None) is None or \
            getattr(live, "_ctl_connection", None) is None:
        raise ValueError("the live reader has not connected yet")
    sock, peer = socket.socketpair()
    try:
        for s in (sock, peer):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
        sock.settimeout(READ_TIMEOUT_S)
        raw = caughtup.CountingSocketIO(sock)  # the live reader's class: see its docstring
        feed = _Feed(recording, transactions, group, first, peer, stop)
        raw.refill = feed
        rfile = io.BufferedReader(raw, READ_BUFFER)  # as server.replace_reader's
    except BaseException:
        sock.close()
        peer.close()
        raise
    # The live connection's socket and reader are replaced as the twin is made: pymysql closes
    # a connection's socket when the object goes (__del__), so a twin must never hold the live one.
    conn = _twin(live._stream_connection, _sock=sock, _rfile=rfile, _next_seq_id=1,
                 _closed=False, _read_timeout=READ_TIMEOUT_S, _current_timeout=READ_TIMEOUT_S)
    stream = _twin(live, _stream_connection=conn, table_map={}, log_file=FILE, log_pos=4,
                   dbms="mariadb",  # the recording's server, whatever the live one is
                   pymysql_wrapper=_no_connection)
    # The control connection is only asked which server it is: the stream's (cached) answer.
    stream._ctl_connection = _twin(live._ctl_connection, _sock=None, _rfile=None,
                                   _get_dbms=stream._BinLogStreamReader__get_dbms)
    # The twin connection tells its own stream which events carry a checksum, from its own
    # format description (source.checksums), never the live one's: the live stream may be in a
    # binlog without checksums.
    if "stream" in conn.__dict__:
        conn.stream = stream
    if "plain" in conn.__dict__:
        conn.plain = None
    # The recording's events carry checksums and full metadata, whatever the live server's do.
    for name in ("connected_stream", "connected_ctl", "use_checksum", "optional_meta_data"):
        setattr(stream, "_BinLogStreamReader__" + name, True)
    return ReplayedReader(_twin(like, _stream=stream, start=Position(FILE, 4)), peer, feed)
