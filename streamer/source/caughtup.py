"""What has arrived on the binlog connection and not been read yet: the caught-up check.

The server sends a heartbeat when it has nothing newer to send, but a reader that is behind
finds that heartbeat queued before changes written since, and a live transaction's end says
nothing either way: only bytes already in pymysql's buffer or in the kernel tell. The check runs
at each live transaction's end, so its cost is per transaction.

Once connected, the stream's connection reads the socket in bulk through a counting reader
(``count_reads``; source.server's ``replace_reader``).
"""
from __future__ import annotations

import select
import socket
import ssl
from typing import Any, Callable, Optional

from streamer.source.server import peek, replace_reader


class CountingSocketIO(socket.SocketIO):
    """The stream connection's raw reader, counting what it has read. Its buffered reader's
    ``tell()`` is then what pymysql has taken, so what the buffer still holds is known without
    a read, and a poll of the socket tells whether the kernel holds more.

    ``refill`` is None for a server's stream. A replayed one (source.replay, the JIT warm-up)
    sets it to what sends the next group of events when the socket holds nothing more; it
    returns False past the stream's end. The replay uses this class, not a subclass of its own:
    under PyPy the JIT's code for the stream's reads and ``more_arrived`` checks the raw
    reader's layout (its class and attributes), and a subclass made the live stream's first
    reads after a warm-up compile that code again (docs/benchmarks.md, "timed from inside")."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(sock, "rb")
        self.got = 0
        self.poller = select.poll()
        self.poller.register(sock, select.POLLIN)
        self.refill: Optional[Callable[[], bool]] = None

    def readinto(self, b: Any) -> Optional[int]:
        refill = self.refill
        if refill is not None and not self.poller.poll(0) and not refill():
            return 0  # past the end of a replayed stream: pymysql reports a lost connection
        n = super().readinto(b)
        if n:
            self.got += n
        return n

    def tell(self) -> int:
        return self.got

    def arrives_within(self, seconds: float) -> bool:
        """Whether the kernel holds more, or gets more within ``seconds`` (select, at µs
        precision: poll's milliseconds would round a wait under one up to a whole one). A
        replayed stream sends nothing more until its reader has read what it was given, so a
        wait could never see more: the answer is then what the socket holds now."""
        if self.refill is not None:
            return bool(self.poller.poll(0))
        try:
            return bool(select.select((self._sock,), (), (), seconds)[0])
        except (OSError, ValueError):  # ValueError: a descriptor past select's FD_SETSIZE
            return bool(self.poller.poll(0))


def count_reads(conn: Any) -> None:
    """Give a plain (not TLS) stream connection a counting reader of ``server.READ_BUFFER``
    bytes, once connected; if it can't have one, more_arrived peeks as before."""
    replace_reader(conn, CountingSocketIO)


def more_arrived(conn: Any) -> bool:
    """Whether more of the stream has already arrived, in the kernel or in pymysql's buffer."""
    sock = getattr(conn, "_sock", None)
    rfile = getattr(conn, "_rfile", None)
    if sock is None or rfile is None:
        return False
    raw = getattr(rfile, "raw", None)
    if isinstance(raw, CountingSocketIO):
        # A third of the peek's cost below: no switch to non-blocking and back, one syscall.
        return raw.got != rfile.tell() or bool(raw.poller.poll(0))
    try:
        return bool(peek(sock, rfile))
    except ssl.SSLWantReadError:
        return False  # TLS: no whole record has arrived yet
    except OSError:
        return True  # the next read will raise it where errors are handled


def arrives_within(conn: Any, seconds: float) -> bool:
    """Whether more of the stream has arrived, or arrives within ``seconds``. Only a plain
    connection with a counting reader waits, as that reader says (``arrives_within``); any other
    answers at once, as ``more_arrived``."""
    raw = getattr(getattr(conn, "_rfile", None), "raw", None)
    if not isinstance(raw, CountingSocketIO):
        return more_arrived(conn)
    return raw.got != conn._rfile.tell() or raw.arrives_within(seconds)
