"""A MySQL whose gtid_mode changes under the stream, as a migration between OFF and ON (and
back) takes it through OFF_PERMISSIVE and ON_PERMISSIVE. The server sends its binlog by GTID set
only when ON, and no transaction of another mode than its own by any dump: the stream reads on
by file where it can, and where it can't, stops naming the step back."""
import pytest

from tests import support
from tests.e2e.servers import PrivateMariaDB

pytestmark = pytest.mark.private_servers


def test_a_stream_by_gtid_set_goes_on_by_file_through_the_steps_of_gtid_mode(tmp_path):
    with PrivateMariaDB(str(tmp_path / "m"), flavour="mysql-8.0") as mdb:
        conn = mdb.admin()
        assert support.sql(conn, "SELECT @@GLOBAL.gtid_mode") == [("ON",)]
        support.sql(conn, "CREATE DATABASE g", "CREATE TABLE g.t (id INT PRIMARY KEY)")
        ns = support.unique("gm")
        topic = f"{ns}.g.t"
        cfg = support.write_config(str(tmp_path / "c.yaml"), ns, ["g.*"], mysql={
            "port": mdb.port, "password_file": mdb.password_file(), "position_mode": "gtid"})
        rows = []

        def insert(n=3):
            for _ in range(n):
                rows.append(len(rows) + 1)
                support.sql(conn, f"INSERT INTO g.t VALUES ({rows[-1]})")

        def mode(*steps):
            for step in steps:
                support.sql(conn, f"SET GLOBAL gtid_mode = {step}")

        def run(log, *args):
            return support.StreamerProcess(cfg, str(tmp_path / log), *args)

        # Begun by a GTID set (so resumed by it), stopped, and the mode stepped down meanwhile.
        with run("log1", "--start-gtid", mdb.gtid_position()) as proc:
            proc.wait_reading()
            insert()
            support.consume([topic], expect=len(rows), decode_ns=ns)
            assert proc.stop() == 0, proc.output()[-3000:]
        mode("ON_PERMISSIVE", "OFF_PERMISSIVE")
        insert()  # anonymous
        # The server sends no binlog by GTID set now: by file, where the set was refused (the
        # stream stopped, exit 3, advising another server or a snapshot).
        with run("log2") as proc:
            support.consume([topic], expect=len(rows), decode_ns=ns)
            assert "has gtid_mode OFF_PERMISSIVE: it sends its binlog by GTID set only when " \
                   "ON, so the stream resumes by binlog file and offset" in proc.output()
            assert proc.stop() == 0, proc.output()[-3000:]
        # A GTID set alone has no place to read from by file: refused, naming the ways on.
        with run("log3", "--start-gtid", mdb.gtid_position()) as proc:
            assert proc.wait() == 3, proc.output()[-3000:]
            assert "has no binlog file of this server to resume by: set gtid_mode=ON" in \
                proc.output()
        # Anonymous transactions come while it reads by GTID set: the server ends that dump,
        # and the stream reads on by file.
        mode("ON_PERMISSIVE", "ON")
        with run("log4", "--start-gtid", mdb.gtid_position()) as proc:
            proc.wait_reading()
            insert()
            support.consume([topic], expect=len(rows), decode_ns=ns)
            mode("ON_PERMISSIVE", "OFF_PERMISSIVE")
            insert()
            support.consume([topic], expect=len(rows), decode_ns=ns)
            assert "MySQL stopped sending the binlog by GTID set" in proc.output()
            assert proc.stop() == 0, proc.output()[-3000:]
        # Turned ON before the stream read the last anonymous ones: by file (the checkpoint's
        # own server), where a dump by the set left them out unsaid; and no dump sends them now.
        insert()
        mode("ON_PERMISSIVE", "ON")
        with run("log5") as proc:
            assert proc.wait() == 3, proc.output()[-3000:]
            assert "Set gtid_mode back one step (to ON_PERMISSIVE from ON" in proc.output()
        # The step back named: read past them, and on once ON again.
        mode("ON_PERMISSIVE")
        with run("log6") as proc:
            support.consume([topic], expect=len(rows), decode_ns=ns)
            mode("ON")
            insert()
            msgs = support.consume([topic], expect=len(rows), decode_ns=ns)
            assert proc.stop() == 0, proc.output()[-3000:]
    assert [m["key"]["id"] for m in msgs] == rows
