"""Start-up checks both ends before it leaves anything behind, and a Kafka that isn't there is
reported within kafka_connect_timeout_s, not after a minute."""
import json
import re
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from streamer.position import GtidSet
from streamer.source import server
from tests import support


def _topics():
    return set(AdminClient({"bootstrap.servers": support.KAFKA}).list_topics(timeout=10).topics)


def test_a_wrong_mysql_password_creates_nothing_in_kafka(tmp_path):
    ns = support.unique("nopw")
    (tmp_path / "pw").write_text("not-the-password")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, ["demo.*"],
                               mysql={"host": "127.0.0.1", "port": support.MYSQL_PORT,
                                      "user": "streamer", "password_file": str(tmp_path / "pw"),
                                      "server_id": 7301})
    with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
        assert proc.wait(60) == 3
        out = proc.output()
    assert "refused the streamer's user 'streamer'" in out and "Traceback" not in out
    assert not {t for t in _topics() if t.startswith(ns + ".")}


def test_an_unreachable_kafka_is_reported_within_the_connect_timeout(tmp_path):
    ns = support.unique("nokafka")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, ["demo.*"],
                               kafka={"bootstrap.servers": "127.0.0.1:1"},
                               kafka_connect_timeout_s=5)
    began = time.monotonic()
    with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
        assert proc.wait(60) == 4
        out = proc.output()
    took = time.monotonic() - began
    assert "Kafka at 127.0.0.1:1 did not accept the transactional producer" in out, out[-2000:]
    assert "kafka_connect_timeout_s is 5" in out and "Traceback" not in out
    assert took < 30, f"took {took:.0f} s to report an unreachable Kafka"
    # librdkafka's own lines come through logging, at the level of what they mean, never raw.
    assert "WARNING streamer.kafka.librdkafka: FAIL: " in out and "Connection refused" in out
    assert not [line for line in out.splitlines() if line.startswith("%")]


def test_an_explicit_start_inside_a_transaction_is_refused_naming_the_nearest_starts(db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY)")
    f, p = support.master_pos(conn)
    support.sql(conn, "INSERT INTO t VALUES (1)", "INSERT INTO t VALUES (2)")
    events = support.sql(conn, f"SHOW BINLOG EVENTS IN '{f}' FROM {p}")
    starts = [int(e[1]) for e in events if e[2] == "Gtid"]
    table_map = next(int(e[1]) for e in events if e[2] == "Table_map")
    assert len(starts) == 2 and starts[0] < table_map < starts[1]
    ns = support.unique("badpos")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"])
    inside = f"nearest transaction starts: {f}:{starts[0]} and {f}:{starts[1]}"
    for file, pos, said in (
            (f, table_map, f"the explicit start {f}:{table_map} is not a transaction start (the "
                           f"event there is a Table_map inside a transaction)"),
            (f, table_map + 1, f"the explicit start {f}:{table_map + 1} is not a transaction "
                               f"start (no event starts there)"),
            # A typo in the file's name, and an offset past the file's end, are refused before
            # anything is committed: they were once the stream's checkpoint.
            (f + "9", 4, f"the explicit start's binlog file {f}9 is not on the server"),
            (f, 10 ** 12, f"the explicit start {f}:{10 ** 12} is past the end of {f}")):
        with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", file,
                                     "--start-pos", str(pos)) as proc:
            code = proc.wait(60)
            out = proc.output()
            assert code == 3, out[-3000:]
        assert said in out, out[-3000:]
        assert file != f or pos == 10 ** 12 or inside in out
        assert "Traceback" not in out
    # Nothing was committed (nor any topic made): a plain restart starts as a first start does.
    assert not {t for t in _topics() if t.startswith(ns + ".")}
    # A start it names is taken: the second row, alone.
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", f,
                                 "--start-pos", str(starts[1])) as proc:
        msgs = support.consume([f"{ns}.{name}.t"], expect=1, decode_ns=ns)
        assert proc.stop() == 0
    assert [m["key"] for m in msgs] == [{"id": 2}]


def test_a_start_gtid_of_no_set_or_of_the_other_kind_of_server_is_refused_naming_it(db,
                                                                                     tmp_path):
    # 'zzz' stopped the start with a traceback; a MySQL set given to MariaDB was said to lack
    # every transaction of it (lost), where they are another server's.
    name, _ = db
    ns = support.unique("badgtid")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"])
    mysql_set = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"
    for gtids, code, said in (
            ("0-1-", 2, "--start-gtid '0-1-' is not a GTID set: '0-1-' is neither a MariaDB "
                        "GTID nor a MySQL uuid:interval. Write MariaDB's domain-server-seq"),
            (mysql_set, 3, f"MySQL at 127.0.0.1:{support.MYSQL_PORT} runs MariaDB 10.11")):
        with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-gtid", gtids) as proc:
            assert proc.wait(60) == code, proc.output()[-3000:]
            out = proc.output()
        assert said in out and "Traceback" not in out, out[-3000:]
    assert f"the stream's GTID set {mysql_set} is MySQL's: it names another server's " \
           f"transactions" in out
    assert not {t for t in _topics() if t.startswith(ns + ".")}


def _forged(checkpoint, shift):
    """The checkpoint with every domain's seq moved by ``shift`` (a binlog of another history)."""
    parts = [p.rsplit("-", 1) for p in checkpoint["gtid_set"].split(",")]
    return dict(checkpoint, gtid_set=",".join(f"{head}-{max(1, int(seq) + shift)}"
                                              for head, seq in parts))


def test_a_checkpoint_from_another_binlog_with_the_same_server_id_is_refused(db, tmp_path):
    # The same server_id, another history: a RESET MASTER, or mysql.host moved to another
    # server. The checkpoint's file and offset exist there, but mean other transactions.
    name, conn = db
    admin = support.admin()
    support.sql(admin, "FLUSH BINARY LOGS")  # a file that opens with the transactions before it
    admin.close()
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1)")
    f, p = support.master_pos(conn)
    ns = support.unique("ident")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"])
    topic, positions = f"{ns}.{name}.t", f"{ns}.__positions"
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", f,
                                 "--start-pos", str(p)) as proc:
        support.sql(conn, "INSERT INTO t VALUES (2)")
        support.consume([topic], expect=1, decode_ns=ns)
        assert proc.stop() == 0
    real = json.loads(support.consume([positions])[-1]["raw_value"])
    producer = Producer({"bootstrap.servers": support.KAFKA})
    for shift, why in ((1000, "the server's binlog lacks transactions the checkpoint has"),
                       (-1000000, "the file opens after transactions the checkpoint never saw")):
        producer.produce(positions, json.dumps(_forged(real, shift)).encode(), ns.encode())
        producer.flush(10)
        support.sql(conn, "INSERT INTO t VALUES (3)")  # there to be published, were it read
        with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
            code = proc.wait(60)
            out = proc.output()
            assert code == 3, out[-3000:]
        assert f"is not a place in the binlog of MySQL at 127.0.0.1:{support.MYSQL_PORT}, " \
               f"although the server has the checkpoint's server_id" in out, out[-2000:]
        assert why in out and "RESET MASTER" in out and "Traceback" not in out
        support.sql(conn, "DELETE FROM t WHERE id = 3")
    assert len(support.consume([topic], idle=1.0)) == 1  # nothing was read on the wrong history
    producer.produce(positions, json.dumps(real).encode(), ns.encode())
    producer.flush(10)
    with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
        msgs = support.consume([topic], expect=7, decode_ns=ns)  # the real one resumes
        assert proc.stop() == 0
    assert [(m["value"]["op"] if m["value"] else "-", m["key"]["id"]) for m in msgs] == [
        ("c", 2), ("c", 3), ("d", 3), ("-", 3), ("c", 3), ("d", 3), ("-", 3)]


def test_a_namespace_whose_tables_were_published_never_restarts_at_the_end_silently(db, tmp_path):
    # The checkpoint is missing (here: source.name was changed): a start at the binlog's end
    # would skip every change since the last one published. Refused, unless a start is given.
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY)")
    f, p = support.master_pos(conn)
    ns = support.unique("used")
    first = support.write_config(str(tmp_path / "a.yaml"), ns, [f"{name}.*"])
    with support.StreamerProcess(first, str(tmp_path / "log"), "--start-file", f,
                                 "--start-pos", str(p)) as proc:
        support.sql(conn, "INSERT INTO t VALUES (1)")
        support.consume([f"{ns}.{name}.t"], expect=1, decode_ns=ns)
        assert proc.stop() == 0
    support.sql(conn, "INSERT INTO t VALUES (2)")  # while nothing streams
    renamed = support.write_config(str(tmp_path / "b.yaml"), ns, [f"{name}.*"],
                                   source={"name": ns + "-renamed"})
    with support.StreamerProcess(renamed, str(tmp_path / "log2")) as proc:
        assert proc.wait(60) == 3
        out = proc.output()
    assert f"no checkpoint of source '{ns}-renamed' was found in {ns}.__positions, but " \
           f"namespace '{ns}' has published its tables already ({name}.t)" in out, out[-2000:]
    assert "--start-file" in out and "Traceback" not in out
    # Another namespace's tables don't count: a first start there goes to the end as ever.
    other = support.write_config(str(tmp_path / "c.yaml"), ns + "x", [f"{name}.*"])
    with support.StreamerProcess(other, str(tmp_path / "log3")) as proc:
        proc.wait_reading()
        assert proc.stop() == 0


@pytest.mark.every_source
def test_the_binlog_is_read_page_after_page_from_where_each_ended(db, source, monkeypatch):
    # Pages of 3 events: every transaction's events cut by a page's end somewhere. The events
    # read page by page are those one SHOW BINLOG EVENTS shows, and the starts and GTIDs found
    # from them are the ones it shows. (Rows sharing an offset, as the events inside a MySQL
    # Transaction_payload do: MySQL 8.0.15 has no compression, tests/unit/source/test_server.py.)
    # Values that aren't UTF-8 in the statements the binlog shows (MariaDB's Annotate_rows, MySQL's
    # Rows_query) are read all the same.
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY, b VARBINARY(4))")
    support.sql(conn, "FLUSH BINARY LOGS")
    if not server.is_mariadb(conn):
        support.sql(conn, "SET SESSION binlog_rows_query_log_events = ON")
    f, p = support.master_pos(conn)
    for i in range(1, 8):  # the bytes as they are, as a JDBC driver sends them
        conn.query(b"INSERT INTO t VALUES (%d, _binary'\xc8\xff')" % i)
    other = source.admin()
    with pytest.raises(UnicodeDecodeError):
        support.sql(other, f"SHOW BINLOG EVENTS IN '{f}'")  # PyMySQL's own decoding
    other.close()
    whole = server.show_events(conn, f)
    assert sum("\ufffd" in r[5] for r in whole) == 7  # each statement, its bytes replaced
    monkeypatch.setattr(server, "_EVENTS_PAGE", 3)
    paged = list(server.binlog_events(conn, f))
    assert paged == whole
    assert support.sql(conn, "SELECT @@SESSION.character_set_results")[0][0] == "utf8mb4"
    starts = [int(r[1]) for r in whole if r[2] == "Gtid"]
    table_maps = [int(r[1]) for r in whole if r[2] == "Table_map"]
    assert len(starts) == 7 and len(table_maps) == 7
    assert server.nearest_transaction_starts(conn, f, table_maps[4]) == (starts[4], starts[5])
    assert server.nearest_transaction_starts(conn, f, table_maps[6]) == (starts[6], None)
    gtid = re.search(r"GTID\s+(\d+-\d+-\d+)|GTID_NEXT\s*=\s*'([^']+)'",
                     str([r for r in whole if r[2] == "Gtid"][3][5]))
    assert server.locate_gtid(conn, gtid.group(1) or gtid.group(2)) == (f, starts[3])
    if not server.is_mariadb(conn):  # MariaDB asks BINLOG_GTID_POS instead
        before = server.executed_gtids(conn, f, starts[3])
        assert before is not None and gtid.group(2) not in before
        assert server.executed_gtids(conn, f, starts[4]) == _plus(before, gtid.group(2))


def _plus(gtids, gtid):
    out = GtidSet(gtids)
    out.add(gtid)
    return str(out)


def test_a_transaction_timeout_over_the_brokers_maximum_names_both_settings(db, tmp_path):
    # Kafka refuses the producer (INVALID_TRANSACTION_TIMEOUT); its text names the broker's
    # setting backwards. The error names the streamer's key and the broker's.
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY)")
    cfg = support.write_config(str(tmp_path / "c.yaml"), support.unique("tt"), [f"{name}.t"],
                               kafka={"bootstrap.servers": support.KAFKA,
                                      "transaction.timeout.ms": 1000000})
    with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
        code = proc.wait(60)
    out = proc.output()
    assert code == 4, out[-3000:]
    assert "Set kafka.transaction.timeout.ms (now 1000000) to at most the brokers' " \
           "transaction.max.timeout.ms (900000 unless set)" in out, out[-3000:]


def test_a_replication_factor_over_the_brokers_is_one_clear_error(db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY)")
    cfg = support.write_config(str(tmp_path / "c.yaml"), support.unique("rf"), [f"{name}.t"],
                               topics={"replication_factor": 3})
    with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
        code = proc.wait(60)
    out = proc.output()
    assert code == 4, out[-3000:]
    assert "Set topics.replication_factor (now 3) to at most the number of brokers" in out, \
        out[-3000:]
