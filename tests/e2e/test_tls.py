"""TLS to MySQL (mysql.tls) against a private MariaDB with a certificate this test makes: the
verifying modes stream, and a certificate that doesn't match is refused with a clear error."""
import subprocess
import sys

from tests import support
from tests.e2e.servers import PrivateMariaDB


def _pki(d):
    """A CA, and a server certificate it signed for 127.0.0.1 (an IP SAN, as verify_identity checks)."""
    def run(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=d)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca-key.pem", "-out", "ca.pem",
        "-days", "2", "-subj", "/CN=streamer test CA")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server-key.pem", "-out", "server.csr",
        "-subj", "/CN=127.0.0.1")
    (d / "san.ext").write_text("subjectAltName = IP:127.0.0.1\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem",
        "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "san.ext")
    # A CA that signed nothing here: verify_ca with it must refuse the server.
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "other-key.pem", "-out",
        "other.pem", "-days", "2", "-subj", "/CN=another CA")
    return d


def _check(cfg):
    out = subprocess.run([sys.executable, "-m", "streamer.cli", "check", "-c", cfg],
                         capture_output=True, text=True, cwd=support.ROOT, timeout=120)
    return out.returncode, out.stdout + out.stderr


def test_verify_identity_streams_over_tls_only_and_a_wrong_ca_or_name_is_refused(tmp_path):
    (tmp_path / "pki").mkdir()
    pki = _pki(tmp_path / "pki")
    tls_args = (f"--ssl-ca={pki / 'ca.pem'} --ssl-cert={pki / 'server.pem'} "
                f"--ssl-key={pki / 'server-key.pem'}")
    with PrivateMariaDB(str(tmp_path / "mdb"), extra_args=tls_args) as mdb:
        conn = mdb.admin()
        # The server refuses the streamer's user without TLS: if it streams, every one of its
        # connections (binlog, checks, heartbeat, which uses the same user) was encrypted.
        support.sql(conn, "ALTER USER 'streamer'@'127.0.0.1' REQUIRE SSL",
                    "CREATE DATABASE s", "CREATE TABLE s.t (id INT PRIMARY KEY)")
        start = support.master_pos(conn)
        support.sql(conn, "INSERT INTO s.t VALUES (1), (2)")
        ns = support.unique("tls")

        def config(name, host="127.0.0.1", **tls):
            return support.write_config(
                str(tmp_path / f"{name}.yaml"), ns, ["s.*"], heartbeat={"enabled": True},
                mysql={"host": host, "port": mdb.port, "password_file": mdb.password_file(),
                       "tls": tls, "reconnect_max_attempts": 1, "server_id": 7711})

        good = config("good", mode="verify_identity", ca=str(pki / "ca.pem"))
        with support.StreamerProcess(good, str(tmp_path / "good.log"), "--start-file", start[0],
                                     "--start-pos", str(start[1])) as proc:
            msgs = support.consume([f"{ns}.s.t"], expect=2, decode_ns=ns)
            assert proc.stop() == 0, proc.output()[-3000:]
        assert sorted(m["key"]["id"] for m in msgs) == [1, 2]
        assert "heartbeat off" not in proc.output()
        conn.close()

        rc, text = _check(config("plain", mode="disabled"))
        assert rc != 0 and "Access denied" in text, text[-2000:]
        rc, text = _check(config("wrong-ca", mode="verify_ca", ca=str(pki / "other.pem")))
        assert rc != 0 and "certificate verify failed" in text, text[-2000:]
        # The certificate is for 127.0.0.1; asked for by another name, it is refused.
        rc, text = _check(config("wrong-name", host="localhost", mode="verify_identity",
                                 ca=str(pki / "ca.pem")))
        assert rc != 0 and "localhost" in text and "mismatch" in text.lower(), text[-2000:]
        for t in (text,):
            assert "Traceback" not in t
