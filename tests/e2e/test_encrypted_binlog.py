"""A server that encrypts its binlog at rest (MariaDB's ``encrypt_binlog``, keys from the
file_key_management plugin the distribution ships): the server decrypts what it sends a
replica, so the stream, its rotations and a resume from the checkpoint read as on any other."""
import pytest

from tests import support
from tests.e2e.servers import PrivateMariaDB

pytestmark = pytest.mark.private_servers


def test_an_encrypted_binlog_streams_and_resumes_each_change_once(tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_text("1;" + "5e" * 32 + "\n")  # key 1, AES-256
    args = (f"--plugin-load-add=file_key_management --file-key-management-filename={keys} "
            "--encrypt-binlog=ON")
    with PrivateMariaDB(str(tmp_path / "m"), extra_args=args) as mdb:
        conn = mdb.admin()
        assert support.sql(conn, "SELECT @@GLOBAL.encrypt_binlog") == [(1,)]
        support.sql(conn, "CREATE DATABASE e", "CREATE TABLE e.t (id INT PRIMARY KEY, v TEXT)")
        start = support.master_pos(conn)
        ns = support.unique("enc")
        cfg = support.write_config(str(tmp_path / "c.yaml"), ns, ["e.*"], mysql={
            "port": mdb.port, "password_file": mdb.password_file()})
        topic = f"{ns}.e.t"
        support.sql(conn, "INSERT INTO e.t VALUES (1, 'plain text'), (2, REPEAT('x', 5000))",
                    "FLUSH BINARY LOGS", "UPDATE e.t SET v = 'y' WHERE id = 2")
        with support.StreamerProcess(cfg, str(tmp_path / "log1"), "--start-file", start[0],
                                     "--start-pos", str(start[1])) as proc:
            support.consume([topic], expect=3, decode_ns=ns)
            assert proc.stop() == 0, proc.output()[-3000:]
        # Stopped mid-file: the resume starts at the checkpoint's offset in an encrypted file.
        support.sql(conn, "INSERT INTO e.t VALUES (3, 'z')", "FLUSH BINARY LOGS",
                    "DELETE FROM e.t WHERE id = 1")
        with support.StreamerProcess(cfg, str(tmp_path / "log2")) as proc:
            msgs = support.consume([topic], expect=5, decode_ns=ns)
            assert proc.stop() == 0, proc.output()[-3000:]
    got = [(m["value"]["op"], m["key"]["id"],
            (m["value"]["after"] or {}).get("v", "")[:10]) for m in msgs if m["value"]]
    assert got == [("c", 1, "plain text"), ("c", 2, "x" * 10), ("u", 2, "y"), ("c", 3, "z"),
                   ("d", 1, "")]
