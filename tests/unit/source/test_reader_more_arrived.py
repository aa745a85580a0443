"""BinlogReader.more_arrived: is more of the stream already here, without waiting for it?"""
import select
import socket
import ssl
import struct
import subprocess
import threading
import time
import types

import pytest

from streamer.source.caughtup import CountingSocketIO, count_reads
from streamer.source.server import READ_BUFFER, read_in_bulk
from streamer.source.reader import BinlogReader


def reader_over(sock):
    """A BinlogReader whose stream connection reads from ``sock`` the way pymysql does."""
    conn = types.SimpleNamespace(_sock=sock, _rfile=sock.makefile("rb"))
    reader = BinlogReader.__new__(BinlogReader)
    reader._stream = types.SimpleNamespace(_stream_connection=conn)
    return reader, conn


def eventually(predicate, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def check(reader, conn, send):
    """Nothing sent: no. Sent: yes, from the kernel, then from the read buffer. Read: no."""
    assert not reader.more_arrived()
    assert conn._sock.gettimeout() == 5.0  # the read timeout is put back
    send(b"0123456789")
    assert eventually(reader.more_arrived)
    assert conn._rfile.read(4) == b"0123"
    assert reader.more_arrived()  # the rest waits in the read buffer
    assert conn._rfile.read(6) == b"456789"
    assert not reader.more_arrived()
    assert conn._sock.gettimeout() == 5.0


def test_plain_socket():
    a, b = socket.socketpair()
    a.settimeout(5.0)
    reader, conn = reader_over(a)
    try:
        check(reader, conn, b.sendall)
    finally:
        a.close()
        b.close()


def test_plain_stream_connection_counts_its_reads_and_answers_the_same():
    a, b = socket.socketpair()
    a.settimeout(5.0)
    reader, conn = reader_over(a)
    old = conn._rfile  # held, so that only count_reads can close it
    count_reads(conn)
    assert isinstance(conn._rfile.raw, CountingSocketIO) and old.closed
    try:
        check(reader, conn, b.sendall)
        # A read longer than the buffer goes past it to the socket, and is counted too.
        threading.Thread(target=b.sendall, args=(bytes(READ_BUFFER + 20000),)).start()
        assert conn._rfile.read(READ_BUFFER + 20000) == bytes(READ_BUFFER + 20000)
        assert not reader.more_arrived()
    finally:
        conn._rfile.close()  # as pymysql closes a connection: its reader, then its socket
        a.close()
        b.close()
    assert a.fileno() == -1  # the socket really closed: the old reader had let go of it


def test_a_connection_read_in_bulk_takes_what_arrived_past_pymysqls_8_kb_in_one_read():
    a, b = socket.socketpair()
    a.settimeout(5.0)
    conn = types.SimpleNamespace(_sock=a, _rfile=a.makefile("rb"))
    old = conn._rfile
    read_in_bulk(conn)
    assert conn._rfile is not old and old.closed
    try:
        data = bytes(range(256)) * 200  # 50 KB, all in the kernel before the first read
        b.sendall(data)
        assert conn._rfile.read(4) == data[:4]
        assert len(conn._rfile.peek(1)) == len(data) - 4  # the rest came with it
        assert conn._rfile.read(len(data) - 4) == data[4:]
        b.sendall(b"more")  # and a read returns what has arrived, not waiting for a full buffer
        assert conn._rfile.read(4) == b"more"
    finally:
        conn._rfile.close()
        a.close()
        b.close()
    assert a.fileno() == -1


def test_a_reader_that_already_holds_bytes_is_kept():
    a, b = socket.socketpair()
    a.settimeout(5.0)
    reader, conn = reader_over(a)
    old = conn._rfile
    try:
        b.sendall(b"early")
        assert eventually(lambda: old.peek(1) == b"early")
        count_reads(conn)
        assert conn._rfile is old and a.gettimeout() == 5.0
        assert reader.more_arrived() and old.read(5) == b"early"
        assert not reader.more_arrived()
    finally:
        a.close()
        b.close()


@pytest.fixture
def cert(tmp_path):
    key, crt = str(tmp_path / "k.pem"), str(tmp_path / "c.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", crt, "-days", "1", "-subj", "/CN=localhost"],
                   check=True, capture_output=True)
    return crt, key


def test_tls_socket_waiting_for_a_record_is_not_more(cert):
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(*cert)
    client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_ctx.check_hostname = False
    client_ctx.verify_mode = ssl.CERT_NONE
    a, b = socket.socketpair()
    server = {}
    t = threading.Thread(target=lambda: server.update(s=server_ctx.wrap_socket(b, server_side=True)))
    t.start()
    client = client_ctx.wrap_socket(a, server_hostname="localhost")
    t.join()
    client.settimeout(5.0)
    reader, conn = reader_over(client)
    count_reads(conn)  # TLS keeps the library's reader: a partial record is not more
    assert not isinstance(conn._rfile.raw, CountingSocketIO)
    try:
        check(reader, conn, server["s"].sendall)
    finally:
        client.close()
        server["s"].close()


def test_a_connection_reset_before_the_binlog_dump_keeps_its_reader_and_raises_nothing():
    listener = socket.create_server(("127.0.0.1", 0))
    a = socket.create_connection(listener.getsockname())
    b, _ = listener.accept()
    a.settimeout(5.0)
    reader, conn = reader_over(a)
    old = conn._rfile
    try:
        b.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        b.close()  # linger 0: the peer resets the connection
        assert eventually(lambda: select.select([a], [], [], 0)[0])
        count_reads(conn)  # meets the reset, and leaves the connection as it found it
        assert conn._rfile is old and a.gettimeout() == 5.0
        assert old.read(1) == b""  # where pymysql reads next: a lost connection, handled there
    finally:
        a.close()
        listener.close()


def test_arrives_within_waits_for_what_comes_and_answers_at_once_for_what_is_here():
    a, b = socket.socketpair()
    a.settimeout(5.0)
    reader, conn = reader_over(a)
    count_reads(conn)
    try:
        assert not reader.arrives_within(0.0005)  # nothing comes
        sender = threading.Timer(0.05, b.sendall, (b"0123",))
        sender.start()
        # Sent 50 ms into a wait of up to 10 s: seen when it comes, not at the wait's end.
        began = time.monotonic()
        assert reader.arrives_within(10.0)
        assert time.monotonic() - began < 5.0
        sender.join()
        assert conn._rfile.read(2) == b"01"
        assert reader.arrives_within(0.0)  # the rest is in the read buffer
        assert conn._rfile.read(2) == b"23"
        assert not reader.arrives_within(0.0)
        assert a.gettimeout() == 5.0
    finally:
        conn._rfile.close()
        a.close()
        b.close()


def test_arrives_within_does_not_wait_without_a_counting_reader(monkeypatch):
    # A TLS connection (and any reader count_reads left alone) answers as more_arrived does,
    # at once: bytes on its socket may be a partial record, which is not more of the stream.
    from streamer.source import caughtup

    def no_wait(*args):
        raise AssertionError("waited on a connection without a counting reader")

    a, b = socket.socketpair()
    a.settimeout(5.0)
    reader, conn = reader_over(a)
    monkeypatch.setattr(caughtup.select, "select", no_wait)
    try:
        assert not reader.arrives_within(10.0)
        b.sendall(b"0123")
        assert eventually(lambda: reader.arrives_within(10.0))
        assert a.gettimeout() == 5.0
    finally:
        a.close()
        b.close()
