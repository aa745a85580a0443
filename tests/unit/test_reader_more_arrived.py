"""BinlogReader.more_arrived: is more of the stream already here, without waiting for it?"""
import socket
import ssl
import subprocess
import threading
import time
import types

import pytest

from streamer.reader import BinlogReader


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
    try:
        check(reader, conn, server["s"].sendall)
    finally:
        client.close()
        server["s"].close()
