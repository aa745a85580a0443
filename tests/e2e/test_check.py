"""`streamer check` names each problem and its fix; `run` refuses a source it can't stream."""
import contextlib
import os
import re
import socket
import subprocess
import sys

import pytest

from tests import support


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _streamer(*args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "streamer.cli", *args], cwd=support.ROOT,
                          capture_output=True, text=True, timeout=120, env=e)


@pytest.fixture(scope="module")
def statement_server(tmp_path_factory):
    """A second, private MariaDB started without the ROW/FULL binlog settings, its binlog
    leaving out the database x_ignored."""
    base = str(tmp_path_factory.mktemp("stmt-mariadb"))
    port = _free_port()
    env = dict(os.environ, STREAMER_MYSQL_DIR=base, STREAMER_MYSQL_PORT=str(port),
               STREAMER_MYSQL_EXTRA_ARGS="--binlog-format=STATEMENT --binlog-row-metadata=MINIMAL "
                                         "--binlog-ignore-db=x_ignored")
    script = os.path.join(support.ROOT, "deploy/local/mysql.sh")
    subprocess.run([script, "up"], env=env, check=True, capture_output=True)
    yield base, port
    subprocess.run([script, "down"], env=env, check=True, capture_output=True)


@pytest.mark.every_source
def test_check_passes_on_the_local_setup(tmp_path, source):
    cfg = support.write_config(str(tmp_path / "c.yaml"), support.unique("ck"), ["x.*"],
                               server=source, snapshot={"mode": "read_only"})
    out = _streamer("check", "-c", cfg)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "✓ snapshot.mode read_only: the server's GTID positions frame each chunk" in out.stdout
    assert "✗" not in out.stdout and out.stdout.count("✓") >= 7
    assert "✓ binlog_format = ROW" in out.stdout
    # Settings it copes with, and what each means to it: each flavour's own.
    if source.mysql:
        # 8.0.15 has binlog_row_value_options ('' by default: there, not "not available").
        assert "✓ binlog_row_value_options: is '': PARTIAL_JSON updates are applied" in out.stdout
        assert "✓ gtid_mode: is ON: failover (mysql.hosts), " in out.stdout
        assert re.search(r"✓ server_id \d+ \(mysql.server_id\): no replica of the server "
                         r"reads as it", out.stdout)
    else:
        assert "✓ log_bin_compress: is OFF: MariaDB's compressed events are read" in out.stdout
        assert "binlog_row_value_options" not in out.stdout and "gtid_mode" not in out.stdout
        assert re.search(r"✓ server_id \d+ \(mysql.server_id\): can't tell: MariaDB lists its "
                         r"replicas only to REPLICATION MASTER ADMIN", out.stdout)
    assert "✓ binlog_expire_logs_seconds: is " in out.stdout
    assert "✓ per-session settings: binlog_format and binlog_row_image" in out.stdout
    # Its pattern (x.*) takes no table: said, not failed (the tables may come later).
    assert "✓ published tables: tables.include ['x.*'] (less tables.exclude []) takes no table " \
           f"that MySQL at 127.0.0.1:{source.port} shows the streamer's user now" in out.stdout


def test_check_names_two_tables_that_would_meet_in_one_topic(db, tmp_path):
    name, conn = db
    other = f"{name}_x"
    support.sql(conn, "CREATE TABLE x_y (id INT PRIMARY KEY)", f"CREATE DATABASE {other}",
                f"CREATE TABLE {other}.y (id INT PRIMARY KEY)", "CREATE TABLE z (id INT PRIMARY KEY)")
    try:
        ns = support.unique("ck")
        include = [f"{name}.*", f"{other}.*"]
        cfg = support.write_config(str(tmp_path / "c.yaml"), ns, include)
        out = _streamer("check", "-c", cfg)
        assert out.returncode == 1, out.stdout + out.stderr
        assert (f"✗ topic names: table `{other}`.`y` would publish to topic {ns}.{other}.y, which "
                f"Kafka takes as {ns}.{name}.x_y") in out.stdout, out.stdout
        cfg = support.write_config(str(tmp_path / "c.yaml"), ns, include,
                                   topics={"names": {f"{other}.y": f"{ns}-y"}})
        out = _streamer("check", "-c", cfg)
        assert "✓ topic names: each of the 3 published tables has a topic of its own" in out.stdout, \
            out.stdout
    finally:
        support.sql(conn, f"DROP DATABASE {other}")


def test_check_fails_on_a_server_without_row_binlog_and_full_metadata(statement_server, tmp_path):
    base, port = statement_server
    cfg = support.write_config(
        str(tmp_path / "c.yaml"), support.unique("ck"), ["x.*"],
        mysql={"port": port, "password_file": os.path.join(base, "secrets", "streamer.password")})
    out = _streamer("check", "-c", cfg)
    assert out.returncode == 1
    assert "✗ binlog_format = ROW: is STATEMENT: set binlog_format=ROW" in out.stdout
    assert "✗ binlog_row_metadata = FULL: is MINIMAL: set binlog_row_metadata=FULL" in out.stdout
    assert "✓ binlog_row_image = FULL" in out.stdout

    run = _streamer("run", "-c", cfg)
    assert run.returncode == 3, run.stdout + run.stderr
    assert "binlog_format is STATEMENT, must be ROW" in run.stderr
    assert "binlog_row_metadata is MINIMAL, must be FULL" in run.stderr
    assert "✓ binlog filters: binlog_do_db and binlog_ignore_db leave out no published" in \
        out.stdout  # x_ignored is not published here

    # A published table in a database the binlog leaves out: none of its changes would come.
    conn = support.admin(port=port, base=base)
    support.sql(conn, "CREATE DATABASE IF NOT EXISTS x_ignored",
                "CREATE TABLE IF NOT EXISTS x_ignored.t (id INT PRIMARY KEY)")
    cfg = support.write_config(
        str(tmp_path / "i.yaml"), support.unique("ck"), ["x.*", "x_ignored.*"],
        mysql={"port": port, "password_file": os.path.join(base, "secrets", "streamer.password")})
    out = _streamer("check", "-c", cfg)
    assert "✗ binlog filters: the server's binlog leaves out x_ignored.t (binlog_ignore_db=" \
           "x_ignored): no change there is ever logged" in out.stdout, out.stdout


def test_check_fails_for_a_user_without_replication_slave(tmp_path):
    user = support.unique("norepl")
    pw_file = tmp_path / "pw"
    pw_file.write_text("pw-" + user)
    conn = support.admin()
    support.sql(conn, f"CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY 'pw-{user}'",
                f"GRANT SELECT, REPLICATION CLIENT ON *.* TO '{user}'@'127.0.0.1'")
    try:
        cfg = support.write_config(str(tmp_path / "c.yaml"), support.unique("ck"), ["x.*"],
                                   mysql={"user": user, "password_file": str(pw_file)})
        out = _streamer("check", "-c", cfg)
        assert out.returncode == 1
        assert "✗ privilege REPLICATION SLAVE: missing (to read the binlog): GRANT REPLICATION SLAVE" in out.stdout
        assert "✓ privilege REPLICATION CLIENT" in out.stdout
        assert "pw-" + user not in out.stdout + out.stderr
    finally:
        support.sql(conn, f"DROP USER '{user}'@'127.0.0.1'")


def test_check_names_an_unreachable_server_and_the_fix(tmp_path):
    cfg = support.write_config(str(tmp_path / "c.yaml"), support.unique("ck"), ["x.*"],
                               mysql={"port": _free_port()}, kafka={"bootstrap.servers": f"127.0.0.1:{_free_port()}"})
    out = _streamer("check", "-c", cfg)
    assert out.returncode == 1
    assert "✗ MySQL login" in out.stdout and "check mysql.host/port/user" in out.stdout
    assert "✗ Kafka" in out.stdout and "check kafka.bootstrap.servers" in out.stdout


def test_bad_config_is_one_clear_error(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("mysql: {server_id: 0}\n")
    out = _streamer("run", "-c", str(p))
    assert out.returncode == 2
    assert "mysql.server_id" in out.stderr and "never random" in out.stderr
    assert "Traceback" not in out.stderr


def test_run_with_a_refused_login_is_one_clear_error(tmp_path):
    pw_file = tmp_path / "pw"
    pw_file.write_text("not-the-password")
    cfg = support.write_config(str(tmp_path / "c.yaml"), support.unique("ck"), ["x.*"],
                               mysql={"password_file": str(pw_file)})
    out = _streamer("run", "-c", cfg)
    assert out.returncode == 3, out.stderr[-2000:]
    assert "refused the streamer's user 'streamer'" in out.stderr
    assert "Check mysql.user and mysql.password_file" in out.stderr
    assert "Traceback" not in out.stderr and "not-the-password" not in out.stdout + out.stderr


@contextlib.contextmanager
def _account(tmp_path, source, clause, **mysql):
    """An account of its own on ``source``, created with ``clause`` (ACCOUNT LOCK, REQUIRE SSL),
    and dropped after: (its name, a config that logs in as it with ``mysql`` settings)."""
    user = support.unique("acct")
    (tmp_path / "pw").write_text("pw-" + user)
    conn = source.admin()
    support.sql(conn, f"CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY 'pw-{user}' {clause}")
    try:
        yield user, support.write_config(
            str(tmp_path / "c.yaml"), support.unique("ck"), ["x.*"], server=source,
            mysql=dict(mysql, user=user, password_file=str(tmp_path / "pw")))
    finally:
        support.sql(conn, f"DROP USER '{user}'@'127.0.0.1'")
        conn.close()


@pytest.mark.every_source
def test_run_as_a_locked_account_is_one_clear_error_not_a_wait(tmp_path, source):
    # MariaDB refuses a locked account with 4151, MySQL with 3118: MySQL's was taken for an
    # unreachable server, and retried for ever.
    with _account(tmp_path, source, "ACCOUNT LOCK") as (user, cfg):
        out = _streamer("run", "-c", cfg)
    assert out.returncode == 3, out.stderr[-2000:]
    assert f"refused the streamer's user '{user}'" in out.stderr and "locked" in out.stderr
    assert "unreachable" not in out.stderr and "Traceback" not in out.stderr


@pytest.mark.every_source
def test_an_account_that_requires_tls_refused_without_it_is_said_as_a_possible_cause(tmp_path,
                                                                                     source):
    # The server words it as a wrong password ("Access denied"), and the error said only that:
    # with mysql.tls.mode disabled, REQUIRE SSL is the other cause, named with its fix.
    with _account(tmp_path, source, "REQUIRE SSL", tls={"mode": "disabled"}) as (_, cfg):
        run, check = _streamer("run", "-c", cfg), _streamer("check", "-c", cfg)
    assert run.returncode == 3 and check.returncode != 0, (run.stderr[-2000:], check.stdout)
    fix = ("with mysql.tls.mode disabled, also that it doesn't require TLS (REQUIRE SSL or X509 "
           "in SHOW CREATE USER): if it does, set mysql.tls.mode to required, verify_ca or "
           "verify_identity")
    assert "Access denied" in run.stderr and fix in run.stderr, run.stderr[-2000:]
    assert "Access denied" in check.stdout and fix in check.stdout, check.stdout[-2000:]
    assert "Traceback" not in run.stderr + check.stderr


@pytest.mark.on_source("mysql-8.0")
def test_run_without_tls_on_a_server_that_requires_it_is_one_clear_error_not_a_wait(tmp_path):
    # require_secure_transport=ON refuses a connection without TLS (3159): it was taken for an
    # unreachable server, and retried for ever.
    source = support.SOURCES["mysql-8.0"]
    conn = source.admin()
    cfg = support.write_config(str(tmp_path / "c.yaml"), support.unique("ck"), ["x.*"],
                               server=source, mysql={"tls": {"mode": "disabled"}})
    support.sql(conn, "SET GLOBAL require_secure_transport = ON")
    try:
        out = _streamer("run", "-c", cfg)
    finally:
        support.sql(conn, "SET GLOBAL require_secure_transport = OFF")
    assert out.returncode == 3, out.stderr[-2000:]
    assert "takes only connections over TLS (require_secure_transport is ON), and " \
           "mysql.tls.mode is disabled" in out.stderr
    assert "Set mysql.tls.mode to required, verify_ca or verify_identity" in out.stderr
    assert "unreachable" not in out.stderr and "Traceback" not in out.stderr


def test_run_gives_up_on_an_unreachable_server_after_the_set_attempts(tmp_path):
    port = _free_port()
    cfg = support.write_config(str(tmp_path / "c.yaml"), support.unique("ck"), ["x.*"],
                               mysql={"port": port, "reconnect_backoff_s": 0.1,
                                      "reconnect_max_attempts": 2})
    out = _streamer("run", "-c", cfg)
    assert out.returncode == 3, out.stderr[-2000:]
    # Each retry is a warning naming the server and the fix; the last word is one clear error.
    assert out.stderr.count(f"MySQL at 127.0.0.1:{port} unreachable") == 3
    assert f"streamer: error: MySQL at 127.0.0.1:{port} unreachable, gave up after 2 reconnect " \
           f"attempts" in out.stderr
    assert "Check mysql.host/mysql.port and that the server is running" in out.stderr
    assert "Traceback" not in out.stderr
