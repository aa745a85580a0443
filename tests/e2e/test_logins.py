"""Logins whose last step PyMySQL leaves to packages the streamer doesn't install
(source.logins): MySQL 8's caching_sha2_password without TLS, MariaDB's ed25519; and a password
rotated while the stream runs (source.server.Password)."""
import os

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


@pytest.mark.parametrize("server", [pytest.param(n, marks=pytest.mark.on_source(n))
                                    for n in ("mariadb-11.4", "mysql-8.0")])
def test_a_password_rotated_while_streaming_is_taken_at_the_next_reconnect(tmp_path, server):
    # ALTER USER ... IDENTIFIED BY, and the password file rewritten (as a secrets agent does):
    # the password read once at the start failed every reconnect after, "Access denied", until
    # a restart.
    source = support.SOURCES[server]
    conn = source.admin()
    user, old, new = support.unique("rot"), support.unique("pw"), support.unique("pw")
    name = support.unique("rot")
    support.sql(conn, f"CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY '{old}'",
                f"GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '{user}'@'127.0.0.1'",
                f"CREATE DATABASE {name}", f"CREATE TABLE {name}.t (id INT PRIMARY KEY)")
    pw = tmp_path / "pw"
    try:
        pw.write_text(old)
        ns = support.unique("rot")
        cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.t"], server=source,
                                   mysql={"user": user, "password_file": str(pw),
                                          "reconnect_backoff_max_s": 1.0})
        with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
            proc.wait_reading()
            support.sql(conn, f"INSERT INTO {name}.t VALUES (1)")
            support.consume([f"{ns}.{name}.t"], expect=1, decode_ns=ns)
            support.sql(conn, f"ALTER USER '{user}'@'127.0.0.1' IDENTIFIED BY '{new}'")
            (tmp_path / "pw.new").write_text(new)
            os.replace(str(tmp_path / "pw.new"), str(pw))
            # Its connections end (a restart of the server, a failover, a KILL): it reconnects.
            for (conn_id,) in support.sql(conn, "SELECT id FROM information_schema.PROCESSLIST "
                                                "WHERE user = %s", args=(user,)):
                support.sql(conn, f"KILL {int(conn_id)}")
            support.sql(conn, f"INSERT INTO {name}.t VALUES (2)")
            msgs = support.consume([f"{ns}.{name}.t"], expect=2, decode_ns=ns, timeout=60)
            assert proc.stop() == 0, proc.output()[-3000:]
        out = proc.output()
    finally:
        support.sql(conn, f"DROP USER '{user}'@'127.0.0.1'", f"DROP DATABASE {name}")
    assert [m["key"]["id"] for m in msgs] == [1, 2], out[-3000:]
    assert "Access denied" not in out and old not in out and new not in out, out[-3000:]
