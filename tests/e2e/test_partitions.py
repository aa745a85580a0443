"""Topics with several partitions: each key where the Java clients put it (murmur2), per-key order,
and a TRUNCATE in every partition."""
import collections
import time

from confluent_kafka.admin import AdminClient

from streamer.kafka.partition import java_partition
from tests import support


def test_keys_land_where_murmur2_puts_them_in_order_and_a_truncate_reaches_every_partition(
        db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    ns = support.unique("part")
    f, p = support.master_pos(conn)
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.t"],
                               topics={"partitions": 4, "replication_factor": 1})
    support.sql(conn, "INSERT INTO t SELECT seq, 0 FROM seq_1_to_3000",
                "UPDATE t SET v = 1 WHERE id % 3 = 0", "UPDATE t SET v = 2 WHERE id % 5 = 0",
                "DELETE FROM t WHERE id % 7 = 0", "TRUNCATE TABLE t",
                "INSERT INTO t VALUES (1, 9)")
    topic = f"{ns}.{name}.t"
    changes = 3000 + 1000 + 600 + 428
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", f,
                                 "--start-pos", str(p)) as proc:
        msgs = support.consume([topic], expect=changes + 428 + 4 + 1, idle=3, decode_ns=ns)
        assert proc.stop() == 0, proc.output()[-3000:]
    md = AdminClient({"bootstrap.servers": support.KAFKA}).list_topics(topic, timeout=10)
    assert len(md.topics[topic].partitions) == 4
    keyed = [m for m in msgs if m["raw_key"] is not None]
    assert len(keyed) == changes + 428 + 1  # 428 deletes, each with its tombstone
    assert all(m["partition"] == java_partition(m["raw_key"], 4) for m in keyed)
    msgs = [m for m in msgs if m["value"] is not None]
    keyed = [m for m in keyed if m["value"] is not None]
    # Per key, the partition's order is the binlog's.
    per_key = collections.defaultdict(list)
    for m in sorted(keyed, key=lambda m: (m["partition"], m["offset"])):
        s = m["value"]["source"]
        per_key[m["key"]["id"]].append((s["file"], s["pos"], s["row"]))
    assert all(seq == sorted(seq) for seq in per_key.values())
    # The TRUNCATE is in each partition, after everything before it and before the new row.
    truncates = [m for m in msgs if m["value"]["op"] == "t"]
    assert sorted(m["partition"] for m in truncates) == [0, 1, 2, 3]
    for t in truncates:
        same = [m for m in msgs if m["partition"] == t["partition"]]
        after = [m for m in same if m["offset"] > t["offset"]]
        assert all(m["value"]["after"] == {"id": 1, "v": 9} for m in after)


def test_a_truncate_reaches_partitions_added_while_streaming(db, tmp_path):
    # The partition count was asked once per run: a TRUNCATE after partitions were added missed
    # them, and a consumer of a new partition kept the rows Kafka had sent there.
    from confluent_kafka.admin import NewPartitions

    from streamer.kafka.admin import PARTITIONS_FRESH_S

    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY)")
    ns = support.unique("grow")
    topic = f"{ns}.{name}.t"
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.t"],
                               topics={"partitions": 2, "replication_factor": 1})
    admin = AdminClient({"bootstrap.servers": support.KAFKA})
    with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
        proc.wait_reading()
        support.sql(conn, "INSERT INTO t VALUES (1)", "TRUNCATE TABLE t")
        support.consume([topic], expect=3)  # c, then t in each of the 2 partitions
        admin.create_partitions([NewPartitions(topic, 4)])[topic].result(30)
        support.wait_for(lambda: len(admin.list_topics(topic, timeout=10).topics[topic]
                                     .partitions) == 4, timeout=30, what="4 partitions")
        time.sleep(PARTITIONS_FRESH_S)  # the count the streamer asked for before is stale
        support.sql(conn, "TRUNCATE TABLE t")
        msgs = support.consume([topic], expect=3 + 4, decode_ns=ns)
        assert proc.stop() == 0, proc.output()[-3000:]
    truncates = [m["partition"] for m in msgs if m["value"] and m["value"]["op"] == "t"]
    assert sorted(truncates) == [0, 0, 1, 1, 2, 3], truncates
