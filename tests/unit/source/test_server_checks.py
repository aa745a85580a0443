"""The server checks that need a replica to be seen whole, without a server."""
import pymysql
import pytest

from streamer.errors import SourceError
from streamer.source import server
from tests.fakeserver import FakeConnection


def _replica(running, log_updates, info="10.11.19-MariaDB", refuse=None,
             names=("log_slave_updates",)):
    """A server whose replication threads run (``running``), with ``names`` among its
    variables, each ``log_updates``."""
    def answer(sql, args):
        if refuse is not None and ("Slaves_running" in sql or "replication_applier_status" in sql):
            raise refuse
        if "Slaves_running" in sql:
            return [("Slaves_running", str(running))]
        if "replication_applier_status" in sql:
            return [(running,)]
        if sql.startswith("SHOW GLOBAL VARIABLES"):
            return [(name, log_updates) for name in args if name in names]
        raise AssertionError(sql)
    return FakeConnection(answer, info)


@pytest.mark.parametrize("info", ["10.11.19-MariaDB", "8.0.15"])
def test_a_running_replica_must_log_what_it_applies(info):
    [check] = server.replica_checks(_replica(1, "OFF", info))
    assert (check.name, check.ok, check.have) == ("log_slave_updates", False, "OFF")
    assert "this server replicates another" in check.fix
    assert server.replica_checks(_replica(1, "ON", info))[0].ok
    assert server.replica_checks(_replica(0, "OFF", info)) == []  # a primary: nothing asked


def test_mysqls_new_name_is_the_one_shown_where_both_are():
    conn = _replica(1, "OFF", "8.0.36", names=("log_slave_updates", "log_replica_updates"))
    assert server.replica_checks(conn)[0].name == "log_replica_updates"


def test_a_server_that_wont_say_is_taken_for_a_primary_and_a_lost_connection_raises():
    denied = pymysql.err.OperationalError(1227, "Access denied; you need the PROCESS privilege")
    assert server.replica_checks(_replica(1, "OFF", refuse=denied)) == []
    lost = pymysql.err.OperationalError(2013, "Lost connection to MySQL server during query")
    with pytest.raises(pymysql.err.OperationalError):
        server.replica_checks(_replica(1, "OFF", refuse=lost))


def _replicas(rows, old=False, refuse=None):
    """A server listing ``rows`` (Server_id, Host, Port, ...) as its registered replicas: by
    SHOW REPLICAS, or by SHOW SLAVE HOSTS only (``old``: before MySQL 8.0.22); ``refuse`` raised
    for either (MariaDB without REPLICATION MASTER ADMIN)."""
    def answer(sql, args):
        if refuse is not None:
            raise refuse
        if sql == "SHOW REPLICAS" and old:
            raise pymysql.err.ProgrammingError(1064, "You have an error in your SQL syntax")
        if sql in ("SHOW REPLICAS", "SHOW SLAVE HOSTS"):
            return rows
        raise AssertionError(sql)
    return FakeConnection(answer, "8.0.15")


@pytest.mark.parametrize("old", [False, True])
def test_the_replica_registered_with_a_server_id_is_named(old):
    rows = [(12, "replica-a", 3306, 1, "uuid-a"), (99, "", 3307, 1, "uuid-b")]
    assert server.replica_with_id(_replicas(rows, old), 12) == "replica-a:3306"
    assert server.replica_with_id(_replicas(rows, old), 99) == "(its report_host unset):3307"
    assert server.replica_with_id(_replicas(rows, old), 7) == ""
    assert server.replica_with_id(_replicas([], old), 7) == ""


def test_a_server_that_wont_list_its_replicas_leaves_it_unknown_and_other_errors_raise():
    denied = pymysql.err.OperationalError(1227, "Access denied; you need (at least one of) the "
                                                "REPLICATION MASTER ADMIN privilege(s)")
    assert server.replica_with_id(_replicas([], refuse=denied), 7) is None
    with pytest.raises(pymysql.err.OperationalError):
        server.replica_with_id(_replicas([], refuse=pymysql.err.OperationalError(
            2013, "Lost connection to server during query")), 7)


def test_a_mysql_error_is_said_in_words_not_as_pymysqls_tuple():
    assert server.said(pymysql.err.OperationalError(2006, "MySQL server has gone away")) == \
        "a MySQL connection was lost (2006: MySQL server has gone away)"
    assert server.said(pymysql.err.InterfaceError(0, "")) == \
        "a MySQL connection was lost earlier and not yet opened again"
    assert server.said(pymysql.err.OperationalError(1290, "--read-only option")) == \
        "MySQL refused a statement (1290: --read-only option)"
    # A reconnect's login refused: a password rotated, say, which the next try reads again.
    assert server.said(pymysql.err.OperationalError(1045, "Access denied for user 's'")) == \
        "MySQL refused the streamer's login (1045: Access denied for user 's')"
    assert server.said(ValueError("other")) == "other"


@pytest.mark.parametrize("info,have,in_order", [
    ("8.0.15", [("binlog_order_commits", "ON")], True),
    ("8.0.15", [("binlog_order_commits", "OFF")], False),
    ("8.0.15", [], True),  # a server without the setting has nothing to turn off
    ("10.11.19-MariaDB", None, True),  # MariaDB isn't asked: its group commit keeps the order
])
def test_mysql_commits_in_binlog_order_unless_binlog_order_commits_is_off(info, have, in_order):
    def answer(sql, args):
        assert have is not None and sql.startswith("SHOW GLOBAL VARIABLES") and \
            args == ["binlog_order_commits"], sql
        return have
    assert server.commits_in_binlog_order(FakeConnection(answer, info)) is in_order


@pytest.mark.parametrize("error, lost", [
    (pymysql.err.OperationalError(2013, "Lost connection to MySQL server during query"), True),
    (pymysql.err.InterfaceError(0, ""), True),
    # The server's codes it closes the connection after: a KILL of a running statement
    # (MariaDB), a shutdown, MySQL 8.0.24+'s wait_timeout farewell.
    (pymysql.err.OperationalError(1927, "Connection was killed"), True),
    (pymysql.err.OperationalError(1053, "Server shutdown in progress"), True),
    (pymysql.err.OperationalError(4031, "The client was disconnected by the server because of "
                                        "inactivity. See wait_timeout and interactive_timeout "
                                        "for configuring this behavior."), True),
    # MariaDB's 4031 is a statement's error; KILL QUERY and a lock wait are the statement's.
    (pymysql.err.OperationalError(4031, "Referenced trigger 'tr' for the given action time and "
                                        "event type does not exist"), False),
    (pymysql.err.OperationalError(3169, "Session was killed"), True),
    (pymysql.err.OperationalError(1317, "Query execution was interrupted"), False),
    (pymysql.err.OperationalError(3024, "Query execution was interrupted, maximum statement "
                                        "execution time exceeded"), False),
    (pymysql.err.OperationalError(4078, "Illegal parameter data types"), False),
    (pymysql.err.OperationalError(1205, "Lock wait timeout exceeded"), False),
])
def test_the_connections_errors_are_told_from_the_statements(error, lost):
    assert server.connection_lost(error) is lost
    assert server.said(error).startswith("a MySQL connection was lost") is lost
    # Asking whether the server replicates: the connection's error raises, the statement's
    # is a server that won't say.
    if lost:
        with pytest.raises(type(error)):
            server.replicating(_replica(1, "OFF", refuse=error))
    else:
        assert server.replicating(_replica(1, "OFF", refuse=error)) is False


@pytest.mark.parametrize("file,pos,error", [
    ("mysql-bin.00002", 4, "the explicit start's binlog file mysql-bin.00002 is not on the server "
                           r"\(it has mysql-bin.000001 .. mysql-bin.000002\): check the name"),
    ("mysql-bin.000002", 501, r"the explicit start mysql-bin.000002:501 is past the end of "
                              r"mysql-bin.000002 \(500 bytes\)"),
])
def test_an_explicit_start_the_server_cant_send_from_is_refused_before_any_event_is_read(
        file, pos, error):
    # A typo in --start-file was committed as the stream's checkpoint, and each restart after it
    # was told its binlog was purged; an offset past a file's end had the file scanned to its
    # end (minutes for 1 GB) for the nearest transaction starts.
    def answer(sql, args):
        if sql == "SHOW BINARY LOGS":  # MySQL's has a third column, Encrypted
            return [("mysql-bin.000001", 1000, "No"), ("mysql-bin.000002", 500, "No")]
        raise AssertionError(sql)
    conn = FakeConnection(answer, "8.0.15")
    with pytest.raises(SourceError, match=error):
        server.check_transaction_start(conn, file, pos)
    assert conn.ran == ["SHOW BINARY LOGS"]
