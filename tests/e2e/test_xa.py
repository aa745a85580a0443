"""Two-phase XA transactions on a real MariaDB, with the streamer SIGKILLed between an XA PREPARE
and its XA COMMIT, and again after it: the committed one's rows arrive once, at its commit; the
rolled-back one's never."""
import signal

import pymysql
import pytest

from tests import support


def _prepare(source, name, xid, rows):
    """XA START ... XA PREPARE in a session that then disconnects: the prepared transaction is
    left detached, as a transaction manager leaves it."""
    session = source.admin(name)
    try:
        support.sql(session, f"XA START '{xid}'",
                    *[f"INSERT INTO t VALUES ({i}, '{xid}')" for i in rows],
                    f"XA END '{xid}'", f"XA PREPARE '{xid}'")
    finally:
        session.close()


def _finish_leftovers(source):
    admin = source.admin()
    try:
        for row in support.sql(admin, "XA RECOVER"):
            support.sql(admin, f"XA ROLLBACK '{row[3]}'")
    except pymysql.err.MySQLError:
        pass
    finally:
        admin.close()


@pytest.mark.every_source
def test_xa_rows_arrive_once_at_commit_across_kills_and_never_after_rollback(db, tmp_path, source):
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
    ns = support.unique("xa")
    f, p = support.master_pos(conn)
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"], server=source)
    topic = f"{ns}.{name}.t"
    try:
        with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", f,
                                     "--start-pos", str(p)) as proc:
            support.sql(conn, "INSERT INTO t VALUES (1, 'before')")
            _prepare(source, name, "k1", [10, 11, 12])
            support.sql(conn, "INSERT INTO t VALUES (2, 'between')")
            support.consume([topic], expect=2, decode_ns=ns)
            # Killed with k1 prepared: the checkpoint carries it as pending.
            assert proc.stop(signal.SIGKILL) == -signal.SIGKILL
        _prepare(source, name, "k2", [20])
        with support.StreamerProcess(cfg, str(tmp_path / "log2")) as proc:
            proc.wait_reading()
            admin = source.admin()
            support.sql(admin, "XA COMMIT 'k1'", "XA ROLLBACK 'k2'")
            admin.close()
            support.sql(conn, "INSERT INTO t VALUES (3, 'after')")
            support.consume([topic], expect=6, decode_ns=ns)
            # Killed again after the commit was published: nothing is published twice.
            assert proc.stop(signal.SIGKILL) == -signal.SIGKILL
        with support.StreamerProcess(cfg, str(tmp_path / "log3")) as proc:
            proc.wait_reading()
            support.sql(conn, "INSERT INTO t VALUES (4, 'last')")
            msgs = support.consume([topic], expect=7, decode_ns=ns)
            assert proc.stop() == 0, proc.output()[-3000:]
    finally:
        _finish_leftovers(source)
    assert [(m["value"]["op"], m["key"]["id"]) for m in msgs] == [
        ("c", 1), ("c", 2), ("c", 10), ("c", 11), ("c", 12), ("c", 3), ("c", 4)]
    xa = [m["value"]["source"] for m in msgs[2:5]]
    assert len({s["txid"] for s in xa}) == 1 and [s["tx_row"] for s in xa] == [0, 1, 2]
