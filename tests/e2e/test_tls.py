"""TLS to MySQL (mysql.tls) against a private MariaDB with a certificate this test makes: the
verifying modes stream, and a certificate that doesn't match is refused with a clear error."""
import subprocess
import sys

import pytest

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


@pytest.mark.private_servers
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


@pytest.mark.kafka_side
def test_kafka_over_tls_streams_with_the_documented_settings_and_a_wrong_ca_is_refused(db, source,
                                                                                       tmp_path):
    # The README's example (librdkafka's settings pass through kafka:), against a private broker
    # whose only other listener is plaintext on another port.
    from tests.e2e.servers import PrivateKafka, free_port
    from tests.e2e.test_failures import _consume

    name, conn = db
    (tmp_path / "pki").mkdir()
    pki = _pki(tmp_path / "pki")
    keystore = pki / "broker.pem"
    keystore.write_text((pki / "server-key.pem").read_text() + (pki / "server.pem").read_text())
    ssl_port = free_port()
    with PrivateKafka(str(tmp_path / "kafka"), env={"STREAMER_KAFKA_SSL_PORT": str(ssl_port),
                                                   "STREAMER_KAFKA_SSL_PEM": str(keystore)}):
        support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY)")
        start = support.master_pos(conn)
        support.sql(conn, "INSERT INTO t VALUES (1), (2)")
        ns = support.unique("ktls")
        tls = {"bootstrap.servers": f"127.0.0.1:{ssl_port}", "security.protocol": "SSL",
               "ssl.ca.location": str(pki / "ca.pem")}
        cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"], server=source,
                                   kafka=tls)
        with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", start[0],
                                     "--start-pos", str(start[1])) as proc:
            keys = _consume(f"127.0.0.1:{ssl_port}", f"{ns}.{name}.t", 2, timeout=120,
                            conf={k: v for k, v in tls.items() if k != "bootstrap.servers"})
            assert proc.stop() == 0, proc.output()[-3000:]
        assert len(keys) == 2
        # The checkpoint and schema reads and the producer all went over TLS: a restart resumes.
        with support.StreamerProcess(cfg, str(tmp_path / "log2")) as proc:
            proc.wait_reading()
            assert proc.stop() == 0
        # A CA that didn't sign the broker's certificate: refused, with the reason.
        bad = support.write_config(str(tmp_path / "bad.yaml"), ns + "x", [f"{name}.*"],
                                   server=source, kafka=dict(tls, **{"ssl.ca.location": str(pki / "other.pem")}),
                                   kafka_connect_timeout_s=5)
        with support.StreamerProcess(bad, str(tmp_path / "bad.log")) as proc:
            assert proc.wait(60) == 4
            out = proc.output()
        assert "certificate verify failed" in out and "did not accept" in out, out[-3000:]
