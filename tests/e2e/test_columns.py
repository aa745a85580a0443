"""What consumers of a compacted topic expect: tombstones and compaction, and columns kept out of
Kafka (tables.columns), against the real servers."""
import hashlib
import hmac
import time

import pytest

from confluent_kafka.admin import AdminClient, ConfigResource

from tests import support

SALT = "a-salt-for-the-e2e-tests-only"


def _hmac(text: str) -> str:
    return hmac.new(SALT.encode(), text.encode(), hashlib.sha256).hexdigest()


def _topic_config(admin, topic):
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return {k: v.value for k, v in admin.describe_configs([res])[res].result(timeout=30).items()}


def test_tombstones_can_be_turned_off(db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY)")
    start = support.master_pos(conn)
    support.sql(conn, "INSERT INTO t VALUES (1), (2)", "DELETE FROM t WHERE id = 1")
    ns = support.unique("nt")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.t"],
                               topics={"tombstones": False})
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", start[0],
                                 "--start-pos", str(start[1])) as proc:
        msgs = support.consume([f"{ns}.{name}.t"], expect=3, decode_ns=ns)
        assert proc.stop() == 0, proc.output()[-3000:]
    assert [(m["value"]["op"], m["key"]["id"]) for m in msgs] == [("c", 1), ("c", 2), ("d", 1)]


def test_a_compacted_topic_forgets_a_deleted_key(db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
    ns = support.unique("cp")
    topic = f"{ns}.{name}.t"
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.t"],
                               topics={"compact": True})
    admin = AdminClient({"bootstrap.servers": support.KAFKA})
    with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
        proc.wait_reading()
        support.sql(conn, "INSERT INTO t SELECT seq, 'v' FROM seq_1_to_50")
        assert len(support.consume([topic], expect=50)) == 50
        assert _topic_config(admin, topic)["cleanup.policy"] == "compact"
        # The streamer made the topic compacted; make the broker compact it now rather than in
        # a week: roll segments at once and clean whatever is dirty.
        # (alter_configs replaces the topic's whole config: the policy is set again with it.)
        res = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={
            "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "100", "min.compaction.lag.ms": "0"})
        admin.alter_configs([res])[res].result(timeout=30)
        support.sql(conn, "DELETE FROM t WHERE id <= 10", "UPDATE t SET v = 'w' WHERE id = 11")
        kept = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            # Each new message rolls the segment before it, so the ones above can be cleaned.
            support.sql(conn, "UPDATE t SET v = LEFT(UUID(), 8) WHERE id = 50")
            msgs = support.consume([topic], idle=2, decode_ns=ns)
            kept = {m["key"]["id"] for m in msgs}
            if not kept & set(range(1, 12)) - {11} and \
                    sum(1 for m in msgs if m["key"]["id"] == 11) == 1:
                break
            time.sleep(1)
        assert proc.stop() == 0, proc.output()[-3000:]
    # The deleted keys are gone: their creates, deletes and tombstones alike. The rest are
    # there, each once, with its last value.
    assert not kept & set(range(1, 11)), sorted(kept)[:12]
    last = {m["key"]["id"]: m["value"] for m in msgs}
    assert set(last) == set(range(11, 51))
    assert last[11]["after"] == {"id": 11, "v": "w"} and last[12]["after"] == {"id": 12, "v": "v"}
    assert all(sum(1 for m in msgs if m["key"]["id"] == k) == 1 for k in range(11, 50))


def test_excluded_and_masked_columns_in_snapshot_binlog_and_after_a_ddl(db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE p (id INT PRIMARY KEY, email VARCHAR(80), ssn CHAR(11), "
                      "note TEXT, salary INT NOT NULL)",
                "INSERT INTO p VALUES (1, 'ann@example.com', '123-45-6789', 'first note', 100)")
    ns = support.unique("mk")
    topic = f"{ns}.{name}.p"
    cfg = support.write_config(
        str(tmp_path / "c.yaml"), ns, [f"{name}.p"], start={"initial": "snapshot"},
        tables={"include": [f"{name}.p"],
                "columns": {"exclude": ["*.*.ssn"],
                            "mask": {f"{name}.p.EMAIL": "hash", "*.*.note": "truncate:5",
                                     "*.*.salary": "null", "*.*.phone": "hash"}}})
    with support.StreamerProcess(cfg, str(tmp_path / "log"),
                                 env={"STREAMER_MASK_SALT": SALT}) as proc:
        support.wait_for(lambda: " done: " in proc.output(), timeout=60, what="the snapshot")
        support.sql(conn, "INSERT INTO p VALUES (2, 'bo@example.com', '987-65-4321', 'hello there', 200)",
                    "ALTER TABLE p ADD COLUMN phone VARCHAR(20), DROP COLUMN salary",
                    "INSERT INTO p VALUES (3, NULL, '555-55-5555', NULL, '+1 555 0100')")
        msgs = support.consume([topic], expect=3, decode_ns=ns)
        assert proc.stop() == 0, proc.output()[-3000:]
    out = proc.output()
    assert SALT not in out
    by_id = {m["key"]["id"]: m for m in msgs}
    assert [m["value"]["op"] for m in msgs] == ["r", "c", "c"]
    assert by_id[1]["value"]["after"] == {"id": 1, "email": _hmac("ann@example.com"),
                                          "note": "first", "salary": None}
    assert by_id[2]["value"]["after"] == {"id": 2, "email": _hmac("bo@example.com"),
                                          "note": "hello", "salary": None}
    assert by_id[3]["value"]["after"] == {"id": 3, "email": None, "note": None,
                                          "phone": _hmac("+1 555 0100")}
    dec = support.decoder(ns)
    for m, fields in ((by_id[1], ["id", "email", "note", "salary"]),
                      (by_id[3], ["id", "email", "note", "phone"])):
        row = dec.schema_of(m["raw_value"])["fields"][0]["type"][1]
        assert [f["name"] for f in row["fields"]] == fields
        assert row["streamer.excluded"] == ["ssn"]
        masks = {f["name"]: f.get("streamer.mask") for f in row["fields"]}
        assert masks["email"] == "hash" and masks["note"] == "truncate:5" and masks["id"] is None
    # Nothing of the excluded column reached Kafka, in any message.
    for secret in (b"123-45-6789", b"987-65-4321", b"555-55-5555", b"ann@example.com"):
        assert not any(secret in (m["raw_value"] or b"") for m in msgs)


@pytest.mark.every_source
def test_values_left_out_or_masked_with_null_are_stepped_over_in_the_binlog_the_rest_as_select(
        db, tmp_path, source):
    # The reader steps over an excluded or null-masked string, blob, JSON, geometry or (MariaDB)
    # compressed value without decoding it (source.rowplan): the columns after it must still
    # read as SELECT shows them, partial JSON updates (MySQL) of an excluded document included.
    name, conn = db
    support.sql(conn, "CREATE TABLE s (id INT PRIMARY KEY, doc JSON, g GEOMETRY, keep "
                      "VARCHAR(300), z " + ("TEXT" if source.mysql else "TEXT COMPRESSED") +
                      ", body MEDIUMTEXT, pic BLOB, n INT, tag CHAR(10), d DECIMAL(8,2))")
    ns = support.unique("sk")
    cfg = support.write_config(
        str(tmp_path / "c.yaml"), ns, [f"{name}.s"],
        tables={"include": [f"{name}.s"],
                "columns": {"exclude": ["*.*.doc", "*.*.body", "*.*.g", "*.*.z"],
                            "mask": {"*.*.pic": "null", "*.*.tag": "null"}}},
        server=source)
    g, z = "ST_GeomFromText('LINESTRING(0 0, 1 1, 2 5)')", "REPEAT('zé', 500)"
    doc = "JSON_OBJECT('k', REPEAT('é', 3000), 'a', JSON_ARRAY(1, 2, 3))"
    statements = [  # (statement, the row it changes)
        (f"INSERT INTO s VALUES (1, {doc}, {g}, REPEAT('ü', 300), {z}, REPEAT('b', 70000), "
         "X'00FF', 5, 't', 12.5)", 1),
        ("INSERT INTO s VALUES (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)", 2),
        (f"INSERT INTO s VALUES (3, '[]', {g}, '', {z}, '', X'', 0, '', -0.01)", 3),
        ("UPDATE s SET doc = JSON_SET(doc, '$.a[1]', 9), keep = 'after a partial' WHERE id = 1", 1),
        ("UPDATE s SET doc = JSON_REPLACE(doc, '$.k', 'short'), n = n + 1 WHERE id = 1", 1),
        ("UPDATE s SET body = 'x', keep = 'k2', pic = X'01' WHERE id = 2", 2),
        ("DELETE FROM s WHERE id = 3", 3),
    ]
    shown, kinds = [], set()  # the row as SELECT shows it after each statement
    with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
        proc.wait_reading()
        f, p = support.master_pos(conn)
        if source.mysql:
            support.sql(conn, "SET SESSION binlog_row_value_options = 'PARTIAL_JSON'")
        for statement, row in statements:
            shown += support.sql(conn, "SELECT id, keep, n, d FROM s WHERE id = %s", args=[row]) \
                if statement.startswith("DELETE") else []
            support.sql(conn, statement)
            shown += support.sql(conn, "SELECT id, keep, n, d FROM s WHERE id = %s", args=[row])
        kinds.update(r[2] for r in support.sql(conn, f"SHOW BINLOG EVENTS IN '{f}' FROM {p}"))
        msgs = support.consume([f"{ns}.{name}.s"], expect=len(statements) + 1, decode_ns=ns)
        assert proc.stop() == 0, proc.output()[-3000:]
    assert ("Update_rows_partial" in kinds) == source.mysql, kinds
    values = [m["value"] for m in msgs if m["value"] is not None]  # the delete's tombstone aside
    assert [v["op"] for v in values] == ["c", "c", "c", "u", "u", "u", "d"]
    images = [v["after"] or v["before"] for v in values]
    assert [tuple(image[c] for c in ("id", "keep", "n", "d")) for image in images] == \
        [tuple(r) for r in shown]
    assert all(set(image) == {"id", "keep", "n", "d", "pic", "tag"} and image["pic"] is None
               and image["tag"] is None for image in images)


@pytest.mark.every_source
def test_a_noblob_row_image_is_read_when_the_blobs_it_leaves_out_are_left_out_of_kafka(
        db, tmp_path, source):
    # binlog_row_image NOBLOB leaves a TEXT or BLOB out of a row image when it can: a delete's
    # before image, an update's when the statement didn't change it. Excluded or masked with
    # null, it isn't needed: the stream goes on (a column that is published still stops it:
    # test_events.py's minimal row image).
    name, conn = db
    support.sql(conn, "CREATE TABLE nb (id INT PRIMARY KEY, body TEXT, v VARCHAR(20), pic BLOB, "
                      "n INT)")
    ns = support.unique("nb")
    cfg = support.write_config(
        str(tmp_path / "c.yaml"), ns, [f"{name}.nb"], server=source,
        tables={"include": [f"{name}.nb"], "columns": {"exclude": ["*.*.body"],
                                                       "mask": {"*.*.pic": "null"}}})
    statements = ["INSERT INTO nb VALUES (1, 'b1', 'a', X'01', 10), (2, 'b2', 'b', X'02', 20)",
                  "UPDATE nb SET v = 'a2', n = 11 WHERE id = 1",
                  "UPDATE nb SET body = 'b1 again', n = 21 WHERE id = 2",
                  "DELETE FROM nb WHERE id = 1"]
    session = source.admin(name)
    try:
        with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
            proc.wait_reading()
            support.sql(session, "SET SESSION binlog_row_image = 'NOBLOB'")
            support.sql(session, *statements)
            msgs = support.consume([f"{ns}.{name}.nb"], expect=6, decode_ns=ns)
            assert proc.stop() == 0, proc.output()[-3000:]
    finally:
        session.close()
    values = [m["value"] for m in msgs if m["value"] is not None]
    assert [(v["op"], (v["after"] or v["before"])["id"]) for v in values] == [
        ("c", 1), ("c", 2), ("u", 1), ("u", 2), ("d", 1)]
    assert values[2]["before"] == {"id": 1, "v": "a", "pic": None, "n": 10}
    assert values[2]["after"] == {"id": 1, "v": "a2", "pic": None, "n": 11}
    assert values[3]["after"] == {"id": 2, "v": "b", "pic": None, "n": 21}
    assert values[4]["before"] == {"id": 1, "v": "a2", "pic": None, "n": 11}


def test_tail_shows_a_tombstone_as_one(db, tmp_path):
    import json
    import subprocess
    import sys

    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY)")
    start = support.master_pos(conn)
    support.sql(conn, "INSERT INTO t VALUES (1)", "DELETE FROM t WHERE id = 1")
    ns = support.unique("tt")
    topic = f"{ns}.{name}.t"
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.t"])
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", start[0],
                                 "--start-pos", str(start[1])) as proc:
        assert len(support.consume([topic], expect=3)) == 3
        assert proc.stop() == 0, proc.output()[-3000:]
    tail = subprocess.run([sys.executable, "-m", "streamer.cli", "tail", topic, "-c", cfg,
                           "--max", "3", "--idle-exit", "20"], capture_output=True, text=True,
                          cwd=support.ROOT, timeout=120)
    assert tail.returncode == 0, tail.stderr
    lines = [json.loads(line) for line in tail.stdout.splitlines()]
    assert [(line["value"] or {}).get("op") for line in lines] == ["c", "d", None]
    assert lines[2]["tombstone"] is True and lines[2]["value"] is None
    assert lines[2]["key"] == {"id": 1} and "tombstone" not in lines[1]


@pytest.mark.every_source
def test_names_a_topic_or_avro_cant_hold_are_published_under_names_they_can(db, tmp_path, source):
    """MySQL takes any character in a table or column name; Kafka's topic names and Avro's
    field names take a few. The table's rows go to a topic named with '_' for the others and a
    hash of the name (two names never share one), its columns under Avro names, in the binlog
    and in a snapshot; a table whose name a topic can hold keeps it."""
    from streamer.schema.naming import topic_part

    name, conn = db
    support.sql(conn, "CREATE TABLE `café$x` (id INT PRIMARY KEY, `naïve col` INT, `1st` INT)",
                "CREATE TABLE `café_x` (id INT PRIMARY KEY)",
                "INSERT INTO `café$x` VALUES (1, 10, 100)")
    start = support.master_pos(conn)
    support.sql(conn, "INSERT INTO `café$x` VALUES (2, 20, 200)", "INSERT INTO `café_x` VALUES (5)",
                "UPDATE `café$x` SET `naïve col` = 11 WHERE id = 1", "DELETE FROM `café$x` WHERE id = 2")
    topic, other = (f"{name}.{topic_part(t)}" for t in ("café$x", "café_x"))
    # Both are caf__x with '_' for what a topic can't hold: the hashes keep them apart.
    assert topic.startswith(f"{name}.caf__x_") and other.startswith(f"{name}.caf__x_")
    assert topic != other
    ns = support.unique("nm")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"], server=source)
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", start[0],
                                 "--start-pos", str(start[1])) as proc:
        msgs = support.consume([f"{ns}.{topic}"], expect=4, decode_ns=ns, idle=1)
        assert len(support.consume([f"{ns}.{other}"], expect=1, decode_ns=ns, idle=1)) == 1
        assert proc.stop() == 0, proc.output()[-3000:]
    assert f"on topic {ns}.{topic} (a topic name holds ASCII letters" in proc.output()
    got = [(m["value"]["op"], m["value"]["before"], m["value"]["after"]) for m in msgs
           if m["value"] is not None]
    # (Decoded by the columns' MySQL names, which each field keeps beside its Avro name.)
    row = lambda i, a, b: {"id": i, "naïve col": a, "1st": b}  # noqa: E731
    schema = support.decoder(ns).schema_of(msgs[0]["raw_value"])
    fields = schema["fields"][0]["type"][1]["fields"]
    assert [(f["name"], f.get("mysql.column")) for f in fields] == [
        ("id", None), ("na_ve_col", "naïve col"), ("_1st", "1st")]
    assert got == [("c", None, row(2, 20, 200)), ("u", row(1, 10, 100), row(1, 11, 100)),
                   ("d", row(2, 20, 200), None)], got
    # A snapshot reads the table by its MySQL names into the same topic.
    ns2 = support.unique("nms")
    cfg2 = support.write_config(str(tmp_path / "s.yaml"), ns2, [f"{name}.café$x"], server=source,
                                start={"initial": "snapshot"})
    with support.StreamerProcess(cfg2, str(tmp_path / "log2")) as proc:
        snapped = support.consume([f"{ns2}.{topic}"], expect=1, decode_ns=ns2, idle=1)
        assert proc.stop() == 0, proc.output()[-3000:]
    assert [(m["value"]["op"], m["value"]["after"]) for m in snapped] == [("r", row(1, 11, 100))]


def test_two_tables_kafka_takes_as_one_topic_stop_naming_the_fix_and_go_on_once_named(db, tmp_path):
    # `app`.`user_roles` and `app_user`.`roles` make ns.app.user_roles and ns.app_user.roles,
    # one topic to Kafka ('.' and '_' the same). The second table's first row stops the stream
    # (exit 2) naming both and topics.names, before anything of it is published; a restart with
    # the same config is refused by Kafka itself, named the same way; with topics.names, the
    # second table goes to its own topic, and each row is published once.
    name, conn = db
    other = f"{name}_x"
    support.sql(conn, "CREATE TABLE x_y (id INT PRIMARY KEY)",
                f"CREATE DATABASE {other}", f"CREATE TABLE {other}.y (id INT PRIMARY KEY)")
    try:
        ns = support.unique("clash")
        first, second = f"{ns}.{name}.x_y", f"{ns}.{other}.y"
        include = [f"{name}.x_y", f"{other}.y"]
        cfg = support.write_config(str(tmp_path / "c.yaml"), ns, include)
        with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
            proc.wait_reading()
            support.sql(conn, "INSERT INTO x_y VALUES (1)")
            support.consume([first], expect=1)
            support.sql(conn, f"INSERT INTO {other}.y VALUES (10)", "INSERT INTO x_y VALUES (2)")
            code = proc.wait(60)
        out = proc.output()
        assert code == 2, out[-3000:]
        assert (f"table `{other}`.`y` would publish to topic {second}, which Kafka takes as "
                f"{first}, table `{name}`.`x_y`'s topic") in out, out[-3000:]
        assert f'topics.names: {{"{other}.y": "{second.replace(".", "-")}"}}' in out
        with support.StreamerProcess(cfg, str(tmp_path / "log2")) as proc:
            code = proc.wait(60)
        out = proc.output()
        assert code == 2, out[-3000:]
        assert f"cannot create topic {second}: Topic '{second}' collides with existing topic: " \
               f"{first}" in out and "topics.names" in out, out[-3000:]
        own = f"{ns}-{other}-y"
        cfg = support.write_config(str(tmp_path / "c.yaml"), ns, include,
                                   topics={"names": {f"{other}.y": own}})
        with support.StreamerProcess(cfg, str(tmp_path / "log3")) as proc:
            moved = support.consume([own], expect=1, decode_ns=ns, timeout=60)
            kept = support.consume([first], expect=2, decode_ns=ns, timeout=60, idle=1)
            assert proc.stop() == 0, proc.output()[-3000:]
        assert [m["key"]["id"] for m in moved] == [10]
        assert [m["key"]["id"] for m in kept] == [1, 2]
    finally:
        support.sql(conn, f"DROP DATABASE {other}")


def test_a_row_event_over_one_protocol_packet_is_read_whole_with_its_big_columns_left_out(
        db, tmp_path):
    # The way on from a row too big for Kafka is to leave its big columns out: the row event is
    # then still bigger than a MySQL packet (16 MiB), so the server sends it in two, and the
    # reader must join them (a row of two 9 MB values: an 18 MB event).
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY, a LONGBLOB, b LONGBLOB, c INT)")
    ns = support.unique("pk")
    topic = f"{ns}.{name}.t"
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.t"],
                               tables={"include": [f"{name}.t"],
                                       "columns": {"exclude": ["*.*.a", "*.*.b"]}})
    with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
        proc.wait_reading()
        support.sql(conn, "FLUSH BINARY LOGS")  # a fresh file: the event can't rotate it
        before = support.master_pos(conn)
        support.sql(conn, "INSERT INTO t VALUES (1, REPEAT('x', 9000000), REPEAT('y', 9000000), 7)")
        after = support.master_pos(conn)
        assert after[0] == before[0] and after[1] - before[1] > 0xFFFFFF  # over one packet
        support.sql(conn, "INSERT INTO t VALUES (2, 'a', 'b', 8)")
        msgs = support.consume([topic], expect=2, decode_ns=ns, timeout=60)
        assert proc.stop() == 0, proc.output()[-3000:]
    assert [m["value"]["after"] for m in msgs] == [{"id": 1, "c": 7}, {"id": 2, "c": 8}]
