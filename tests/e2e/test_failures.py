"""Server restarts, a second instance and a purged binlog: no loss, no duplicate, clear errors."""
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from bench import binlogs
from streamer.source import resetguard
from tests import support
from tests.e2e.servers import WITHOUT_GTIDS, PrivateKafka, PrivateMariaDB, binlog_rows


def _restartable(tmp_path, mdb, ns, include, **mysql):
    """A config streaming ``include`` from the private server ``mdb``, reconnecting within a
    second of its restart."""
    return support.write_config(str(tmp_path / "c.yaml"), ns, include,
                                mysql={"port": mdb.port, "password_file": mdb.password_file(),
                                       "reconnect_backoff_s": 0.2, "reconnect_backoff_max_s": 1.0,
                                       **mysql})


def _identities(msgs):
    return sorted((m["value"]["source"]["file"], m["value"]["source"]["pos"],
                   m["value"]["source"]["row"], m["value"]["op"], m["key"]["id"]) for m in msgs)


class Writer(threading.Thread):
    """Inserts batches of rows, riding out a server restart by reconnecting."""

    def __init__(self, connect, table: str):
        super().__init__(daemon=True)
        self.connect = connect
        self.table = table
        self.stop_flag = threading.Event()
        self.done = 0

    def run(self) -> None:
        conn = None
        while not self.stop_flag.is_set():
            try:
                if conn is None:
                    conn = self.connect()
                with conn.cursor() as cur:
                    cur.execute(f"INSERT INTO {self.table} (v) VALUES " + ",".join(["('x')"] * 20))
                self.done += 1
            except Exception:  # noqa: BLE001 - the server is restarting; reconnect and go on
                conn = None
                time.sleep(0.1)
            time.sleep(0.01)


@pytest.mark.private_servers
def test_mariadb_restart_mid_stream_loses_and_doubles_nothing(tmp_path):
    with PrivateMariaDB(str(tmp_path / "mdb")) as mdb:
        conn = mdb.admin()
        support.sql(conn, "CREATE DATABASE r", "CREATE TABLE r.t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(5))")
        start = support.master_pos(conn)
        ns = support.unique("mr")
        cfg = _restartable(tmp_path, mdb, ns, ["r.*"])
        writer = Writer(lambda: mdb.admin("r"), "t")
        with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", start[0],
                                     "--start-pos", str(start[1])) as proc:
            # Mid-stream: on a starved host the restart otherwise came during start-up.
            proc.wait_reading()
            writer.start()
            time.sleep(2)
            mdb.down()
            time.sleep(1)
            mdb.up()
            time.sleep(2)
            writer.stop_flag.set()
            writer.join()
            conn = mdb.admin()
            end = support.master_pos(conn)
            truth = binlog_rows(mdb.port, support.secret("admin", mdb.base), start, end, "r")
            msgs = support.consume([f"{ns}.r.t"], expect=len(truth), decode_ns=ns, timeout=120)
            assert proc.proc.poll() is None, "the streamer exited instead of reconnecting:\n" + \
                proc.output()[-3000:]
            assert proc.stop() == 0
        # An INSERT in flight as the server stopped may have committed even though the writer
        # saw the connection drop: the binlog then holds one statement more than it counted.
        assert writer.done > 50 and len(truth) in (writer.done * 20, (writer.done + 1) * 20)
        assert "resuming from" in proc.output()
        got = _identities(msgs)
        assert got == sorted(truth) and len(set(got)) == len(got)


@pytest.mark.private_servers
def test_after_a_restart_of_the_server_table_definitions_are_read_on_a_new_connection(tmp_path):
    # A UUID column's definition is read from the server on a connection of its own: the one
    # opened before the restart is dead after it, and a table seen only after it must still be
    # read (on the server in use, which a failover may have changed too).
    with PrivateMariaDB(str(tmp_path / "mdb")) as mdb:
        conn = mdb.admin()
        support.sql(conn, "CREATE DATABASE r", "CREATE TABLE r.a (id INT PRIMARY KEY, u UUID)")
        start = support.master_pos(conn)
        ns = support.unique("rd")
        cfg = _restartable(tmp_path, mdb, ns, ["r.*"], reconnect_max_attempts=5)
        uuid = "123e4567-e89b-12d3-a456-426614174000"
        with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", start[0],
                                     "--start-pos", str(start[1])) as proc:
            support.sql(conn, f"INSERT INTO r.a VALUES (1, '{uuid}')")
            first = support.consume([f"{ns}.r.a"], expect=1, decode_ns=ns)
            assert str(first[0]["value"]["after"]["u"]) == uuid
            mdb.down()
            mdb.up()
            support.sql(mdb.admin(), "CREATE TABLE r.b (id INT PRIMARY KEY, u UUID)",
                        f"INSERT INTO r.b VALUES (2, '{uuid}')")
            msgs = support.consume([f"{ns}.r.b"], expect=1, decode_ns=ns, timeout=60)
            assert proc.proc.poll() is None, proc.output()[-3000:]
            assert proc.stop() == 0
        assert [(m["key"]["id"], str(m["value"]["after"]["u"])) for m in msgs] == [(2, uuid)]


# A binlog of each family (MariaDB 11.4's is 10.11's).
_FAMILIES = [s.name for s in support.enabled_sources() if s.name in ("mariadb-10.11", "mysql-8.0")]


def _cut_off(tmp_path, mdb, stop, extra):
    """Rows 1 (a transaction), 2 and 3 (one more), then the server stopped (``stop``), its
    binlog cut ``extra`` bytes into the second one's XID event, started again, and row 4: what a
    streamer reading from the start publishes, and its log."""
    conn = mdb.admin()
    support.sql(conn, "CREATE DATABASE r", "CREATE TABLE r.t (id INT PRIMARY KEY, v VARCHAR(5))")
    start = support.master_pos(conn)
    support.sql(conn, "INSERT INTO r.t VALUES (1, 'a')", "BEGIN",
                "INSERT INTO r.t VALUES (2, 'cut')", "INSERT INTO r.t VALUES (3, 'cut')", "COMMIT")
    events = support.sql(conn, f"SHOW BINLOG EVENTS IN '{start[0]}'")
    cut = [e[1] for e in events if e[2] == "Xid"][-1] + extra
    conn.close()
    stop()
    with open(os.path.join(mdb.base, "binlog", start[0]), "r+b") as fh:
        fh.truncate(cut)
    mdb.up()
    support.sql(mdb.admin(), "INSERT INTO r.t VALUES (4, 'after')")
    ns = support.unique("cut")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, ["r.*"],
                               mysql={"port": mdb.port, "password_file": mdb.password_file()})
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", start[0],
                                 "--start-pos", str(start[1])) as proc:
        msgs = support.consume([f"{ns}.r.t"], expect=2, decode_ns=ns)
        assert proc.stop() == 0, proc.output()[-3000:]
    assert [(m["value"]["op"], m["key"]["id"]) for m in msgs] == [("c", 1), ("c", 4)]
    said = [line for line in proc.output().splitlines() if "never ended" in line]
    assert len(said) == 1 and f"the transaction {start[0]}:" in said[0] and \
        "row changes 0..1" in said[0], said
    return start, cut, proc.output()


@pytest.mark.private_servers
@pytest.mark.parametrize("flavour,extra", [(f, "") for f in _FAMILIES] + [
    ("mysql-8.0", WITHOUT_GTIDS) for f in _FAMILIES if f == "mysql-8.0"],
    ids=lambda v: "without-gtids" if v == WITHOUT_GTIDS else v)
def test_a_transaction_the_binlog_was_cut_off_inside_is_not_published(tmp_path, flavour, extra):
    # A server that stops while writing a transaction to its binlog (a crash, a full disk)
    # leaves it cut off: its rows, no COMMIT. It rolls the transaction back when it starts again
    # (MySQL also trims its binlog back; MariaDB doesn't), and its next binlog goes on. Made here
    # by cutting the binlog of a stopped server before the transaction's XID event: its rows
    # are in the table, but to a reader of the binlog it is the same cut-off group. Without
    # GTIDs (MySQL's default), the next group shows by its BEGIN.
    with PrivateMariaDB(str(tmp_path / "mdb"), flavour=flavour, extra_args=extra) as mdb:
        _cut_off(tmp_path, mdb, mdb.down, 0)


@pytest.mark.private_servers
@pytest.mark.skipif("mariadb-10.11" not in _FAMILIES, reason="MariaDB 10.11 is not in the matrix")
def test_a_binlog_a_crash_cut_off_inside_an_event_is_read_on_from_the_next(tmp_path):
    # Killed, then cut 10 bytes into the XID event, as a crash in the middle of writing it
    # leaves a binlog: MariaDB keeps such a binlog as it is (MySQL trims it when it starts), and
    # refuses to send it past the last whole event; a replica stops there. The streamer reads
    # on from the next binlog, as when a binlog ends between events.
    with PrivateMariaDB(str(tmp_path / "mdb")) as mdb:
        start, cut, out = _cut_off(tmp_path, mdb, mdb.kill, 10)
    said = [line for line in out.splitlines() if "ends inside an event" in line]
    assert len(said) == 1 and f"binlog {start[0]} ends inside an event, at byte {cut - 10}" in \
        said[0], said


@pytest.mark.private_servers
def test_a_streamer_started_while_mariadb_is_down_waits_for_it_then_streams(tmp_path):
    with PrivateMariaDB(str(tmp_path / "mdb")) as mdb:
        conn = mdb.admin()
        support.sql(conn, "CREATE DATABASE w", "CREATE TABLE w.t (id INT PRIMARY KEY)")
        start = support.master_pos(conn)
        conn.close()
        mdb.down()
        ns = support.unique("md")
        cfg = _restartable(tmp_path, mdb, ns, ["w.*"])
        unreachable = f"MySQL at 127.0.0.1:{mdb.port} unreachable"
        with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", start[0],
                                     "--start-pos", str(start[1])) as proc:
            support.wait_for(lambda: proc.output().count(unreachable) >= 2 or proc.proc.poll() is not None,
                             timeout=90, what="two retries")
            assert proc.proc.poll() is None, proc.output()[-3000:]
            mdb.up()
            support.sql(mdb.admin(), "INSERT INTO w.t VALUES (1), (2)")
            msgs = support.consume([f"{ns}.w.t"], expect=2, decode_ns=ns, timeout=120)
            assert proc.proc.poll() is None, proc.output()[-3000:]
            assert proc.stop() == 0
    assert sorted(m["key"]["id"] for m in msgs) == [1, 2]
    log = proc.output()
    assert "Check mysql.host/mysql.port and that the server is running" in log
    assert "Traceback" not in log


@pytest.mark.kafka_side
def test_kafka_restart_mid_stream_pauses_reads_and_loses_and_doubles_nothing(db, source,
                                                                              tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(5))")
    start = support.master_pos(conn)
    with PrivateKafka(str(tmp_path / "kafka")) as kafka:
        ns = support.unique("kr")
        cfg = support.write_config(
            str(tmp_path / "c.yaml"), ns, [f"{name}.t"], server=source, shutdown_timeout_s=5.0,
            batch={"max_messages": 5000, "linger_ms": 30000},
            kafka={"bootstrap.servers": kafka.bootstrap, "queue.buffering.max.messages": 2000,
                   "transaction.timeout.ms": 15000, "message.timeout.ms": 10000})
        with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", start[0],
                                     "--start-pos", str(start[1])) as proc:
            support.sql(conn, f"INSERT INTO t (v) SELECT 'a' FROM {source.seq(1000)}")
            try:
                # A fresh broker creates its transaction-state topic on first use: slow on a busy host.
                support.wait_for(lambda: _committed(kafka.bootstrap, f"{ns}.{name}.t") >= 1000,
                                 timeout=180, what="first rows published")
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n{proc.output()[-3000:]}") from None
            kafka.down()
            # With the broker gone, 10k rows overflow the 2000-message producer queue.
            support.sql(conn, f"INSERT INTO t (v) SELECT 'b' FROM {source.seq(10000)}")
            time.sleep(4)
            kafka.up()
            support.sql(conn, f"INSERT INTO t (v) SELECT 'c' FROM {source.seq(1000)}")
            end = support.master_pos(conn)
            truth = binlog_rows(source.port, support.secret("admin"), start, end, name)
            msgs = _consume(kafka.bootstrap, f"{ns}.{name}.t", len(truth))
            assert proc.proc.poll() is None, proc.output()[-2000:]
            assert proc.stop() == 0
        log = proc.output()
    assert log.count("producer queue full") == 1
    assert len(truth) == 12000
    # Every insert has its own key: 12000 distinct keys, each exactly once.
    assert len(msgs) == 12000 and len(set(msgs)) == 12000


def _committed(bootstrap, topic):
    return len(_consume(bootstrap, topic, None, idle=1.0, timeout=5))


def _consume(bootstrap, topic, expect, idle=3.0, timeout=180, conf=None):
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": support.unique("g"),
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  **(conf or {})})
    out = []
    try:
        try:
            c.assign([TopicPartition(topic, 0, 0)])
        except KafkaException:
            return out
        deadline = time.monotonic() + timeout
        last = time.monotonic()
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                if (expect is None or len(out) >= expect) and time.monotonic() - last > idle:
                    break
                continue
            if m.error():
                continue
            last = time.monotonic()
            out.append(m.key())
    finally:
        c.close()
    return out


def test_a_second_instance_fences_the_first_and_output_stays_exactly_once(db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(5))")
    start = support.master_pos(conn)
    ns = support.unique("fe")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.t"])
    writer = Writer(lambda: support.admin(name), "t")
    writer.start()
    with support.StreamerProcess(cfg, str(tmp_path / "a.log"), "--start-file", start[0],
                                 "--start-pos", str(start[1])) as first:
        support.wait_for(lambda: support.end_offsets(f"{ns}.{name}.t") > 100, timeout=60,
                         what="the first instance publishing")
        with support.StreamerProcess(cfg, str(tmp_path / "b.log")) as second:
            assert first.wait(60) == 4, first.output()[-3000:]
            time.sleep(1)
            writer.stop_flag.set()
            writer.join()
            end = support.master_pos(conn)
            truth = binlog_rows(support.MYSQL_PORT, support.secret("admin"), start, end, name)
            msgs = support.consume([f"{ns}.{name}.t"], expect=len(truth), decode_ns=ns)
            assert second.stop() == 0, second.output()[-3000:]
    assert "fenced" in first.output() and "another streamer started with the same" in first.output()
    got = _identities(msgs)
    assert got == sorted(truth) and len(set(got)) == len(got)


def _binlog_reader(source, server_id, **kwargs):
    """Another reader of ``source``'s binlog as ``server_id`` (a replica registers itself with
    ``report_slave``), connected once it has read its first event."""
    from pymysqlreplication import BinLogStreamReader
    with open(source.password_file) as fh:
        password = fh.read().strip()
    reader = BinLogStreamReader(connection_settings={
        "host": "127.0.0.1", "port": source.port, "user": "streamer", "password": password},
        server_id=server_id, blocking=True, **kwargs)
    next(iter(reader))
    return reader


@pytest.mark.every_source
def test_another_reader_of_the_server_id_ends_the_stream_which_says_so_and_goes_on(db, tmp_path,
                                                                                  source):
    # The server ends a stream when another reader connects with its server_id. MySQL says so
    # with the code of a binlog it can't send: taken for a purged one, the streamer stopped
    # (exit 3) advising a snapshot and a new position; MariaDB's was retried without a word of
    # why, every 0.5 s for as long as both ran.
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY)")
    ns = support.unique("si")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.t"], server=source)
    server_id = source.mysql_config(ns)["server_id"]
    topic = f"{ns}.{name}.t"
    with support.StreamerProcess(cfg, str(tmp_path / "a.log")) as proc:
        proc.wait_reading()
        support.sql(conn, "INSERT INTO t VALUES (1)")
        support.consume([topic], expect=1, decode_ns=ns)
        _binlog_reader(source, server_id).close()
        support.wait_for(lambda: "reading the binlog from" in proc.output().split(
            f"connected to read the binlog as server_id {server_id} (mysql.server_id)")[-1]
            and "needs a server_id of its own" in proc.output(), what="the stream back")
        support.sql(conn, "INSERT INTO t VALUES (2)")
        msgs = support.consume([topic], expect=2, decode_ns=ns, idle=1.0)
        assert proc.proc.poll() is None and proc.stop() == 0, proc.output()[-3000:]
    assert [m["key"]["id"] for m in msgs] == [1, 2]
    if not source.mysql:
        return  # MariaDB shows its replicas only to REPLICATION MASTER ADMIN
    # A replica registered with the streamer's server_id: the streamer refuses to end its stream.
    replica = _binlog_reader(source, server_id, report_slave=("replica-b", "", "", 3307))
    try:
        with support.StreamerProcess(cfg, str(tmp_path / "b.log")) as proc:
            assert proc.wait(60) == 3, proc.output()[-3000:]
        assert f"replica replica-b:3307 of MySQL at 127.0.0.1:{source.port} reads its binlog " \
               f"as server_id {server_id}, the streamer's mysql.server_id" in proc.output()
        assert [r[0] for r in support.sql(conn, "SHOW SLAVE HOSTS")] == [server_id]
        check = subprocess.run([sys.executable, "-m", "streamer.cli", "check", "-c", cfg],
                               cwd=support.ROOT, capture_output=True, text=True, timeout=120)
        assert check.returncode != 0 and f"✗ server_id {server_id} (mysql.server_id): replica " \
            f"replica-b:3307 reads the binlog as it" in check.stdout, check.stdout
    finally:
        replica.close()


@pytest.mark.private_servers
def test_purged_binlog_is_a_clear_error_and_a_non_zero_exit(tmp_path):
    with PrivateMariaDB(str(tmp_path / "mdb")) as mdb:
        conn = mdb.admin()
        support.sql(conn, "CREATE DATABASE p", "CREATE TABLE p.t (id INT PRIMARY KEY)")
        start = support.master_pos(conn)
        support.sql(conn, "INSERT INTO p.t VALUES (1)")
        ns = support.unique("pu")
        cfg = support.write_config(str(tmp_path / "c.yaml"), ns, ["p.*"],
                                   mysql={"port": mdb.port, "password_file": mdb.password_file()})
        with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", start[0],
                                     "--start-pos", str(start[1])) as proc:
            support.consume([f"{ns}.p.t"], expect=1)
            assert proc.stop() == 0
        support.sql(conn, "FLUSH BINARY LOGS", "INSERT INTO p.t VALUES (2)")
        # Every file but a fresh one. The server keeps a file a dump thread still reads (the
        # stopped streamer's, until it notices the connection is gone): purge asks again.
        done = binlogs.purge(conn, attempts=60, pause_s=0.5)
        assert done.error is None and done.files >= 2, done
        out = subprocess.run([sys.executable, "-m", "streamer.cli", "run", "-c", cfg],
                             cwd=support.ROOT, capture_output=True, text=True, timeout=120,
                             env=dict(os.environ))
    assert out.returncode == 3, out.stderr[-2000:]
    assert f"binlog file {start[0]}" in out.stderr and "snapshot" in out.stderr
    assert out.stderr.count("streamer: error:") == 1


def test_sigterm_flushes_and_exits_zero_and_the_next_start_resumes_after_it(db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY)")
    start = support.master_pos(conn)
    ns = support.unique("st")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.t"], batch={"linger_ms": 60000})
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", start[0],
                                 "--start-pos", str(start[1])) as proc:
        proc.wait_reading()
        support.sql(conn, "INSERT INTO t VALUES (1), (2)")
        time.sleep(3)  # well inside the 60 s linger: the batch is still open
        assert proc.stop(signal.SIGTERM, timeout=15) == 0
    support.sql(conn, "INSERT INTO t VALUES (3)")
    with support.StreamerProcess(cfg, str(tmp_path / "log2")) as proc:
        proc.wait_reading()
        time.sleep(3)
        assert proc.stop(signal.SIGINT, timeout=15) == 0
    msgs = support.consume([f"{ns}.{name}.t"], decode_ns=ns)
    assert [m["key"]["id"] for m in msgs] == [1, 2, 3]


def test_a_row_too_big_for_kafka_stops_once_and_is_published_after_the_limit_is_raised(db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE big (id INT PRIMARY KEY, doc MEDIUMTEXT)")
    start = support.master_pos(conn)
    support.sql(conn, "INSERT INTO big VALUES (1, 'small')",
                "INSERT INTO big VALUES (2, REPEAT('x', 300000))", "INSERT INTO big VALUES (3, 'after')")
    ns = support.unique("ov")
    topic = f"{ns}.{name}.big"
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.big"],
                               kafka={"bootstrap.servers": support.KAFKA,
                                      "message.max.bytes": 200000})
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", start[0],
                                 "--start-pos", str(start[1])) as proc:
        rc = proc.wait(120)
        out = proc.output()
    assert rc == 3, out[-3000:]
    assert f"a row change of topic {topic} is 30" in out and "over the 200000 bytes" in out, out[-2000:]
    assert "Traceback" not in out
    # The limit raised (the topic takes 16 MB), the run resumes from its checkpoint, which is
    # before the row: all three, once.
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.big"])
    with support.StreamerProcess(cfg, str(tmp_path / "log2")) as proc:
        msgs = support.consume([topic], expect=3, decode_ns=ns)
        assert proc.stop() == 0, proc.output()[-3000:]
    assert [m["key"]["id"] for m in msgs] == [1, 2, 3]
    assert len(msgs[1]["value"]["after"]["doc"]) == 300000


def _cpu_s(pid):
    """User and system CPU seconds of a process, all its threads."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.kafka_side
def test_a_broker_paused_across_a_commit_loses_and_doubles_nothing_and_the_wait_is_idle(db, source,
                                                                                       tmp_path):
    # The commit times out (kafka_commit_timeout_s), its one retry too: its outcome is unknown.
    # The producer is replaced; the new one waits, idle, for Kafka, and its init_transactions
    # settles the old transaction once the broker is back; the checkpoint is read back.
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(5))")
    start = support.master_pos(conn)
    with PrivateKafka(str(tmp_path / "kafka")) as kafka:
        ns = support.unique("pause")
        topic = f"{ns}.{name}.t"
        cfg = support.write_config(
            str(tmp_path / "c.yaml"), ns, [f"{name}.t"], server=source, kafka_commit_timeout_s=4.0,
            commit_retries=1, kafka_connect_timeout_s=3.0,
            kafka={"bootstrap.servers": kafka.bootstrap, "transaction.timeout.ms": 20000})
        with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", start[0],
                                     "--start-pos", str(start[1])) as proc:
            support.sql(conn, f"INSERT INTO t (v) SELECT 'a' FROM {source.seq(100)}")
            try:
                # (A fresh broker's first transactions can outlast the short commit timeout:
                # then the same replacement happens before the pause, and the rows still come.)
                support.wait_for(lambda: _committed(kafka.bootstrap, topic) >= 100, timeout=120,
                                 what="first rows published")
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n{proc.output()[-3000:]}") from None
            with open(os.path.join(str(tmp_path / "kafka"), "kafka.pid")) as fh:
                broker = int(fh.read().strip())
            os.kill(broker, signal.SIGSTOP)
            try:
                support.sql(conn, f"INSERT INTO t (v) SELECT 'b' FROM {source.seq(50)}")
                waited = proc.output().count("until Kafka answers")
                support.wait_for(lambda: proc.output().count("until Kafka answers") > waited,
                                 timeout=90, what="the new producer waiting for Kafka")
                before = _cpu_s(proc.proc.pid)
                time.sleep(4)
                idle_cpu = _cpu_s(proc.proc.pid) - before
            finally:
                os.kill(broker, signal.SIGCONT)
            support.sql(conn, f"INSERT INTO t (v) SELECT 'c' FROM {source.seq(50)}")
            keys = _consume(kafka.bootstrap, topic, 200, timeout=180)
            assert proc.proc.poll() is None, proc.output()[-3000:]
            assert proc.stop() == 0
        out = proc.output()
    assert "the commit's outcome is unknown" in out and "replacing the Kafka producer" in out, \
        out[-3000:]
    assert "Kafka answers again" in out
    # Each row once: nothing lost, nothing doubled.
    assert len(keys) == 200 and len(set(keys)) == 200, (len(keys), len(set(keys)))
    # Waiting for the broker costs next to nothing (a busy loop would burn a core: 4 s).
    assert idle_cpu < 0.5, idle_cpu


def test_a_row_its_topic_refuses_as_too_large_stops_naming_it_and_streams_once_allowed(db,
                                                                                       tmp_path):
    # A topic made by someone else, at a smaller max.message.bytes than the producer's limit:
    # the broker refuses the row's batch, the transaction fails, and reading it again would
    # meet the same refusal for good. The streamer stops, naming the topic, the row and the fix.
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY, b MEDIUMTEXT)")
    ns = support.unique("big")
    topic = f"{ns}.{name}.t"
    admin = AdminClient({"bootstrap.servers": support.KAFKA})
    admin.create_topics([NewTopic(topic, 1, 1, config={"max.message.bytes": "50000"})])[
        topic].result(30)
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.t"])
    with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
        proc.wait_reading()
        # ~190 KB of hex, which lz4 does not make small enough.
        support.sql(conn, "INSERT INTO t SELECT 2, GROUP_CONCAT(MD5(RAND()) SEPARATOR '') "
                          "FROM seq_1_to_6000", "INSERT INTO t VALUES (3, 'after')")
        code = proc.wait(90)
    out = proc.output()
    assert code == 3, out[-3000:]
    assert f"is a row change of topic {topic}, which takes 50000 bytes (its max.message.bytes)" \
        in out and f"--entity-name {topic} --add-config max.message.bytes=N" in out, out[-3000:]
    # Single-object encoding: the marker, the key schema's fingerprint, then id 2 (zigzag).
    assert re.search(r"its key, Avro-encoded: c301[0-9a-f]{16}04\. ", out), out[-3000:]
    assert support.consume([topic], decode_ns=ns) == []
    # Allowed, the same start goes on from before the row: each row once.
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"max.message.bytes": "1000000"})
    admin.alter_configs([res])[res].result(timeout=30)
    with support.StreamerProcess(cfg, str(tmp_path / "log2")) as proc:
        msgs = support.consume([topic], expect=2, decode_ns=ns, timeout=60)
        assert proc.stop() == 0, proc.output()[-3000:]
    assert [m["key"]["id"] for m in msgs] == [2, 3]
    assert len(msgs[0]["value"]["after"]["b"]) == 192000


def test_a_keyless_message_a_topic_compacted_elsewhere_refuses_stops_naming_it_and_goes_on_after(
        db, tmp_path):
    # topics.compact is off, but someone made the topic compacted: Kafka refuses the TRUNCATE
    # (keyless) with the whole batch, for good. The streamer stops naming the policy, not a
    # retry loop whose warnings say "Erroneous state"; nothing from the TRUNCATE on is published.
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY)")
    ns = support.unique("cpx")
    topic = f"{ns}.{name}.t"
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.t"])
    admin = AdminClient({"bootstrap.servers": support.KAFKA})
    with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
        proc.wait_reading()
        support.sql(conn, "INSERT INTO t VALUES (1)")
        support.consume([topic], expect=1)
        res = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"cleanup.policy": "compact"})
        admin.alter_configs([res])[res].result(timeout=30)
        support.sql(conn, "TRUNCATE TABLE t", "INSERT INTO t VALUES (2)")
        code = proc.wait(90)
    out = proc.output()
    assert code == 3, out[-3000:]
    assert (f"of topic {topic} as invalid (INVALID_RECORD: Broker: Broker failed to validate "
            f"record): the topic is compacted (cleanup.policy compact)") in out, out[-3000:]
    assert f"--entity-name {topic} --add-config cleanup.policy=delete" in out, out[-3000:]
    assert "Erroneous state" not in out, out[-3000:]
    assert [m["key"]["id"] for m in support.consume([topic], decode_ns=ns)] == [1]
    # The policy set back, the restart goes on from before the TRUNCATE: each message once.
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"cleanup.policy": "delete"})
    admin.alter_configs([res])[res].result(timeout=30)
    with support.StreamerProcess(cfg, str(tmp_path / "log2")) as proc:
        msgs = support.consume([topic], expect=3, decode_ns=ns, timeout=60)
        assert proc.stop() == 0, proc.output()[-3000:]
    assert [(m["value"]["op"], m["key"] and m["key"]["id"]) for m in msgs] == \
        [("c", 1), ("t", None), ("c", 2)]


def test_a_topic_deleted_while_streaming_is_made_again_and_the_stream_goes_on(db, tmp_path):
    # With the broker's auto-creation off (as in most production clusters), a deleted topic
    # stopped the streamer (exit 4, "Local: Unknown topic"). The batch is read again, after the
    # topic is made again, as a restart would: each row once, the one in flight included.
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY)")
    ns = support.unique("gone")
    topic = f"{ns}.{name}.t"
    # (Shorter librdkafka waits for a message and a topic's metadata than the defaults, 60 and
    # 30 s, so that the test takes seconds.)
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.t"],
                               kafka={"bootstrap.servers": support.KAFKA,
                                      "allow.auto.create.topics": False,
                                      "message.timeout.ms": 5000,
                                      "topic.metadata.propagation.max.ms": 2000})
    admin = AdminClient({"bootstrap.servers": support.KAFKA})
    with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
        proc.wait_reading()
        support.sql(conn, "INSERT INTO t VALUES (1)")
        support.consume([topic], expect=1)
        admin.delete_topics([topic])[topic].result(30)
        support.wait_for(lambda: topic not in admin.list_topics(timeout=10).topics, timeout=30,
                         what="the topic's deletion")
        support.sql(conn, "INSERT INTO t VALUES (2)", "INSERT INTO t VALUES (3)")
        msgs = support.consume([topic], expect=2, decode_ns=ns, timeout=120)
        assert proc.stop() == 0, proc.output()[-3000:]
    assert [m["key"]["id"] for m in msgs] == [2, 3]
    assert proc.output().count(f"created topic {topic}") == 2, proc.output()[-3000:]


@pytest.mark.private_servers
@pytest.mark.parametrize("flavour", _FAMILIES)
def test_a_binlog_reset_under_the_stream_stops_it_naming_the_new_binlogs_start(tmp_path, flavour):
    # RESET MASTER deletes the binlog and writes on in new files, GTIDs begun anew; the
    # stream's dump went on reading the old file, which nothing reaches: it sat caught up,
    # lag 0, publishing nothing again, unsaid (until the new file of the old one's name grew
    # past the place read: then MySQL's dump failed, MariaDB's ended and the restart was
    # refused; the GTID set begun anew shows it too, tests/unit/source/test_resetguard.py).
    with PrivateMariaDB(str(tmp_path / "mdb"), flavour=flavour) as mdb:
        conn = mdb.admin()
        support.sql(conn, "CREATE DATABASE r", "CREATE TABLE r.t (id INT PRIMARY KEY, v TEXT)")
        ns = support.unique("rm")
        topic = f"{ns}.r.t"
        cfg = _restartable(tmp_path, mdb, ns, ["r.*"])
        with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
            proc.wait_reading()
            support.sql(conn, "INSERT INTO r.t VALUES (1, 'a'), (2, 'b')")
            support.consume([topic], expect=2, decode_ns=ns)
            support.sql(conn, "RESET MASTER", "INSERT INTO r.t VALUES (3, 'c')")
            assert proc.wait(60) == 3, proc.output()[-3000:]
            said = proc.output()
        assert f"the binlog of MySQL at 127.0.0.1:{mdb.port} was reset under the stream " \
               f"(RESET MASTER, or a restore): its binlog mysql-bin.000001 is " in said, said[-3000:]
        first = support.sql(conn, "SHOW BINARY LOGS")[0][0]
        way = f"streamer run --start-file {first} --start-pos 4"
        assert way in said
        # The way named: the change after the reset, once, and on.
        with support.StreamerProcess(cfg, str(tmp_path / "log2"), *way.split()[2:]) as proc:
            support.sql(conn, "INSERT INTO r.t VALUES (4, 'd')")
            msgs = support.consume([topic], expect=4, decode_ns=ns)
            assert proc.stop() == 0, proc.output()[-3000:]
    assert [m["key"]["id"] for m in msgs] == [1, 2, 3, 4]


@pytest.mark.private_servers
@pytest.mark.parametrize("mode", ["file", "gtid"])
def test_a_gtid_domain_the_server_deletes_is_left_out_of_the_position_and_the_stream_goes_on(
        tmp_path, mode):
    # MariaDB's FLUSH BINARY LOGS DELETE_DOMAIN_ID, once no binlog file holds a transaction of
    # the domain: the stream took the domain gone from the server's set for a reset and stopped
    # (exit 3), and a checkpoint that had read the domain was refused at the start, as no place
    # in the server's binlog (by file) or as published transactions the server lacks (by GTID
    # set: mysql.position_mode gtid), however the streamer was started again.
    with PrivateMariaDB(str(tmp_path / "mdb")) as mdb:
        conn = mdb.admin()
        support.sql(conn, "CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY)")
        ns = support.unique("dd")
        topic = f"{ns}.d.t"
        cfg = _restartable(tmp_path, mdb, ns, ["d.*"], position_mode=mode)

        def in_domain(domain, row):
            support.sql(conn, f"SET SESSION gtid_domain_id = {domain}",
                        f"INSERT INTO d.t VALUES ({row})", "SET SESSION gtid_domain_id = 0")

        def delete_domain_1():
            # Every file with a transaction of domain 1 purged first, as the server demands.
            support.sql(conn, f"PURGE BINARY LOGS TO '{support.master_pos(conn)[0]}'",
                        "FLUSH BINARY LOGS DELETE_DOMAIN_ID = (1)")
            assert [g.split("-")[0] for g in mdb.gtid_position().split(",")] == ["0"]
            return support.master_pos(conn)[0]

        with support.StreamerProcess(cfg, str(tmp_path / "log1")) as proc:
            proc.wait_reading()
            in_domain(1, 1)
            support.sql(conn, "FLUSH BINARY LOGS")
            in_domain(0, 2)
            support.consume([topic], expect=2, decode_ns=ns)
            assert proc.stop() == 0, proc.output()[-3000:]
        # The checkpoint, in a file that opened with domain 1 as far as it had read it.
        delete_domain_1()
        in_domain(0, 3)
        with support.StreamerProcess(cfg, str(tmp_path / "log2")) as proc:
            support.consume([topic], expect=3, decode_ns=ns)
            # Under the running stream, which reads the deletion's new file from its start.
            in_domain(1, 4)
            support.sql(conn, "FLUSH BINARY LOGS")
            in_domain(0, 5)
            support.consume([topic], expect=5, decode_ns=ns)
            begun = delete_domain_1()
            time.sleep(resetguard.CHECK_S + 2)  # idle: the reset guard looks at the server
            in_domain(0, 6)
            support.consume([topic], expect=6, decode_ns=ns)
            assert proc.stop() == 0, proc.output()[-3000:]
            said = proc.output()
        assert "no longer has GTID domain 1 in its binlog (FLUSH BINARY LOGS " \
               "DELETE_DOMAIN_ID), which the checkpoint" in said, said[-3000:]
        assert f"the server's binlog has no GTID domain 1 from {begun} on" in said
        with support.StreamerProcess(cfg, str(tmp_path / "log3")) as proc:
            in_domain(0, 7)
            msgs = support.consume([topic], expect=7, decode_ns=ns)
            assert proc.stop() == 0, proc.output()[-3000:]
    assert [m["key"]["id"] for m in msgs] == [1, 2, 3, 4, 5, 6, 7]


@pytest.mark.private_servers
@pytest.mark.parametrize("mode", ["file", "gtid"])
def test_a_lower_gtid_sequence_number_logged_after_the_streams_is_no_reset_and_the_stream_goes_on(
        tmp_path, mode):
    # MariaDB without gtid_strict_mode (its default) logs a transaction given a lower sequence
    # number (SET gtid_seq_no, as a replayed mysqlbinlog dump does) after higher ones, and its
    # GTID position then names that lower one. A checkpoint that had read the higher one was
    # refused at every start: as no place in the server's binlog (by file: "The binlog was
    # reset"), or as published transactions the server lacks (by GTID set).
    with PrivateMariaDB(str(tmp_path / "mdb")) as mdb:
        conn = mdb.admin()
        support.sql(conn, "CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY)")
        assert support.sql(conn, "SELECT @@GLOBAL.gtid_strict_mode") == [(0,)]
        ns = support.unique("oo")
        topic = f"{ns}.d.t"
        cfg = _restartable(tmp_path, mdb, ns, ["d.*"], position_mode=mode)

        def insert(row, seq=None):
            support.sql(conn, *([f"SET SESSION gtid_seq_no = {seq}"] if seq else []),
                        f"INSERT INTO d.t VALUES ({row})")

        with support.StreamerProcess(cfg, str(tmp_path / "log1")) as proc:
            proc.wait_reading()
            insert(1, seq=1000)
            support.consume([topic], expect=1, decode_ns=ns)
            assert proc.stop() == 0, proc.output()[-3000:]
        insert(2, seq=50)  # after the checkpoint's 0-1-1000: the server's position is 0-1-50
        assert mdb.gtid_position() == "0-1-50"
        with support.StreamerProcess(cfg, str(tmp_path / "log2")) as proc:
            support.consume([topic], expect=2, decode_ns=ns)
            insert(3)  # numbered on from the highest: 0-1-1001
            insert(4, seq=60)
            support.consume([topic], expect=4, decode_ns=ns)
            assert proc.stop() == 0, proc.output()[-3000:]
            said = proc.output()
        assert "numbers a GTID domain's transactions out of order" in said, said[-3000:]
        # The server's position is ahead again (0-1-70), and the checkpoint's 0-1-60 follows a
        # higher number: a dump by GTID set (strict, as the replication library asks) refuses
        # it, and the stream reads by file.
        insert(5, seq=70)
        with support.StreamerProcess(cfg, str(tmp_path / "log3")) as proc:
            insert(6)
            msgs = support.consume([topic], expect=6, decode_ns=ns)
            assert proc.stop() == 0, proc.output()[-3000:]
            said = proc.output()
        assert (mode == "gtid") == ("which a dump by GTID set can't pass" in said), said[-3000:]
    assert [m["key"]["id"] for m in msgs] == [1, 2, 3, 4, 5, 6]
