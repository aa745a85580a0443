"""Logins whose last step PyMySQL leaves to packages the streamer doesn't install
(source.logins): MySQL 8's caching_sha2_password without TLS, MariaDB's ed25519."""
import pytest

from tests import support
from tests.e2e.test_tls import _check


def _streams(tmp_path, source, user, password, mysql=None, port=None):
    """``streamer check`` passes for ``user`` and a row streams; a wrong password is refused
    by the server, in one clear line."""
    conn = source.admin()
    support.sql(conn, "CREATE DATABASE IF NOT EXISTS lg", "CREATE TABLE IF NOT EXISTS lg.t (id INT PRIMARY KEY)")
    try:
        (tmp_path / "pw").write_text(password)
        ns = support.unique("lg")
        cfg = support.write_config(str(tmp_path / "c.yaml"), ns, ["lg.t"], server=source,
                                   mysql=dict(source.mysql_config(ns), user=user,
                                              password_file=str(tmp_path / "pw"), **(mysql or {})))
        rc, text = _check(cfg)
        assert rc == 0 and f"MySQL login {user}@127.0.0.1" in text, text[-2000:]
        with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
            proc.wait_reading()
            support.sql(conn, "INSERT INTO lg.t VALUES (1)")
            msgs = support.consume([f"{ns}.lg.t"], expect=1, decode_ns=ns)
            assert proc.stop() == 0, proc.output()[-3000:]
        assert [m["key"]["id"] for m in msgs] == [1]
        (tmp_path / "pw").write_text("wrong")
        rc, text = _check(cfg)
        assert rc != 0 and "Access denied" in text and "Traceback" not in text, text[-2000:]
    finally:
        support.sql(conn, "DROP DATABASE IF EXISTS lg")


@pytest.mark.on_source("mysql-8.0")
def test_mysql_8s_own_login_without_tls_streams(tmp_path):
    # caching_sha2_password, MySQL 8's default (8.4's only one enabled by default), sends the
    # password RSA-encrypted when there is no TLS and the server has no cached hash of it: a
    # new account, or any account after a restart or FLUSH PRIVILEGES.
    source = support.SOURCES["mysql-8.0"]
    conn = source.admin()
    user, password = support.unique("sha"), support.unique("pw")
    support.sql(conn, f"CREATE USER '{user}'@'127.0.0.1' IDENTIFIED WITH caching_sha2_password "
                      f"BY '{password}'",
                f"GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '{user}'@'127.0.0.1'",
                "FLUSH PRIVILEGES")
    try:
        _streams(tmp_path, source, user, password, mysql={"tls": {"mode": "disabled"}})
    finally:
        support.sql(conn, f"DROP USER '{user}'@'127.0.0.1'")


def test_mariadbs_ed25519_login_streams(tmp_path):
    # MariaDB's ed25519 plugin (auth_ed25519, installed by the operator) signs the login's
    # nonce with a key made from the password, over TLS or not.
    source = support.DEFAULT
    conn = source.admin()
    user, password = support.unique("ed"), support.unique("pw")
    if not support.sql(conn, "SELECT 1 FROM information_schema.PLUGINS "
                             "WHERE PLUGIN_NAME = 'ed25519'"):
        support.sql(conn, "INSTALL SONAME 'auth_ed25519'")
    support.sql(conn, f"CREATE USER '{user}'@'127.0.0.1' IDENTIFIED VIA ed25519 "
                      f"USING PASSWORD('{password}')",
                f"GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO '{user}'@'127.0.0.1'")
    try:
        _streams(tmp_path, source, user, password)
    finally:
        support.sql(conn, f"DROP USER '{user}'@'127.0.0.1'")
