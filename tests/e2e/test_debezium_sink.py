"""format: debezium read by a real consumer: Debezium's own JDBC sink connector, in Kafka Connect,
materializes the streamer's topics into another database of the local MariaDB, and that copy
equals the source table after a snapshot, inserts, updates, deletes, a DDL mid-stream, a TRUNCATE
and a SIGKILL of the streamer; in JSON (Connect's JsonConverter) and in Avro (through the
registry, read by Apicurio's AvroConverter). Connect and the plugins: deploy/local/connect.sh."""
import datetime
import decimal
import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from tests import support
from tests.e2e.test_registry import registry_url  # noqa: F401 - the registry fixture

CONNECT = f"http://127.0.0.1:{os.environ.get('STREAMER_CONNECT_PORT', '8083')}"
REGISTRY_V2 = f"http://127.0.0.1:{os.environ.get('STREAMER_REGISTRY_PORT', '8081')}/apis/registry/v2"

# Columns the JDBC sink writes back (docs/debezium.md lists the types it does not).
COLUMNS = ("ti TINYINT, tu TINYINT UNSIGNED, sm SMALLINT, mi MEDIUMINT, bi BIGINT, "
           "de DECIMAL(12,3), fl FLOAT, dbl DOUBLE, vc VARCHAR(40), tx TEXT, vb VARBINARY(8), "
           "dt DATE, d0 DATETIME, d6 DATETIME(6), ts TIMESTAMP(3) NULL, tm TIME(6), yr YEAR, "
           "en ENUM('red','green'), js JSON, st SET('a','b'), b1 BIT(1)")
ROW = ("{i} % 100, {i} % 200, -{i}, {i} * 7, {i} * 1000000007, {i} * 1.125, {i} / 4, {i} / 3, "
       "CONCAT('v', {i}), REPEAT('t', {i} % 50), UNHEX(LPAD(HEX({i}), 4, '0')), "
       "'2024-01-01' + INTERVAL {i} DAY, '2024-01-01 10:00:00' + INTERVAL {i} MINUTE, "
       "'2024-01-01 10:00:00.123456' + INTERVAL {i} SECOND, "
       "'2024-06-01 00:00:00.250' + INTERVAL {i} HOUR, SEC_TO_TIME(43200.5 + {i}), "
       "2000 + {i} % 100, IF({i} % 2, 'red', 'green'), JSON_OBJECT('n', {i}), "
       "IF({i} % 3, 'a,b', 'b'), {i} % 2")

# Columns whose snapshot rows Debezium's Avro writes from their text (schema.textavro).
WRITTEN = ("id BIGINT PRIMARY KEY, name VARCHAR(64) NOT NULL, email VARCHAR(128) NULL, "
           "created DATETIME(6) NOT NULL, at3 DATETIME(3) NULL, amount DECIMAL(12,4) NOT NULL, "
           "payload TEXT NULL, ti TINYINT NULL, sm SMALLINT NOT NULL")
WRITTEN_NAMES = "name, email, created, at3, amount, payload, ti, sm"
WRITTEN_ROW = ("({i}, 'name-{i:08d}', IF({i} % 10, 'user{i}@example.com', NULL), "
               "'2024-01-01' + INTERVAL {i} SECOND + INTERVAL {i} * 7 MICROSECOND, "
               "IF({i} % 4, '1969-12-31 23:59:59.5' - INTERVAL {i} MINUTE, NULL), "
               "-{i} * 1234.5678, IF({i} % 5, REPEAT('é', {i} * 5), NULL), {i} - 30, -{i} * 500)")


@pytest.fixture(scope="module")
def connect():
    subprocess.run([os.path.join(support.ROOT, "deploy/local/connect.sh"), "up"], check=True)
    return CONNECT


def _request(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(CONNECT + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            text = resp.read()
            return json.loads(text) if text else None
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"{method} {path}: {exc.code} {exc.read()[:2000]!r}") from None


def _snapshot_config(tmp_path, ns, db, encoding, registry, debezium=None, **extra):
    """A config streaming ``db`` in format debezium (Avro through the registry, or JSON) from a
    snapshot of its tables."""
    extra.update({"format": "debezium", "debezium": dict(debezium or {}, encoding=encoding)})
    if encoding == "avro":
        extra["schema_registry"] = {"url": registry}
    return support.write_config(str(tmp_path / "c.yaml"), ns, [f"{db}.*"],
                                start={"initial": "snapshot"}, **extra)


def _records(path):
    """The records a FileStreamSink wrote, one a line but for the newlines of their values: a
    record starts a line with its Struct, or is a tombstone's "null"."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().rstrip("\n").split("\n"):
        if line.startswith("Struct{") or line == "null" or not out:
            out.append(line)
        else:
            out[-1] += "\n" + line
    return [r for r in out if r]


def _converters(encoding):
    if encoding == "json":
        conv = "org.apache.kafka.connect.json.JsonConverter"
        return {"key.converter": conv, "value.converter": conv,
                "key.converter.schemas.enable": "true", "value.converter.schemas.enable": "true"}
    conv = "io.apicurio.registry.utils.converter.AvroConverter"
    out = {"key.converter": conv, "value.converter": conv}
    for side in ("key", "value"):
        out.update({f"{side}.converter.apicurio.registry.url": REGISTRY_V2,
                    f"{side}.converter.apicurio.registry.as-confluent": "true",
                    f"{side}.converter.apicurio.registry.use-id": "contentId",
                    f"{side}.converter.apicurio.registry.headers.enabled": "false"})
    return out


def _sink(name, ns, db, target, encoding):
    config = {
        "connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector", "tasks.max": "1",
        "topics.regex": f"{ns}\\.{db}\\..*",
        "connection.url": f"jdbc:mariadb://127.0.0.1:{support.MYSQL_PORT}/{target}",
        "connection.username": "admin", "connection.password": support.secret("admin"),
        "insert.mode": "upsert", "delete.enabled": "true", "truncate.enabled": "true",
        "primary.key.mode": "record_key", "schema.evolution": "basic",
        # A name no other database has: the sink's "does it exist" looks beyond its own.
        "collection.name.format": f"{db}_${{source.table}}",
        "consumer.override.isolation.level": "read_committed",
        "consumer.override.auto.offset.reset": "earliest",
        # A topic made after the sink subscribed (a table's first message) is found within 1 s.
        "consumer.override.metadata.max.age.ms": "1000",
    }
    config.update(_converters(encoding))
    _request("PUT", f"/connectors/{name}/config", config)


def _rows(conn, db, table, columns):
    # BIT(1) is Debezium's boolean: the copy holds it as a number, compared as one.
    select = ", ".join(f"{c} + 0" if c == "b1" else c for c in columns.split(", "))
    with conn.cursor() as cur:
        cur.execute(f"SELECT id, {select} FROM {db}.{table} ORDER BY id")
        return [tuple(_normal(v) for v in row) for row in cur.fetchall()]


def _normal(value):
    """What the copy may store differently but means the same: JSON text, bytes."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.dumps(json.loads(value), sort_keys=True)
        except ValueError:
            return value
    if isinstance(value, float):
        return round(value, 5)
    if isinstance(value, (decimal.Decimal, datetime.timedelta, datetime.date)):
        return value
    return value


def _wait_equal(conn, db, target, names, what, timeout=180, table="t"):
    deadline = time.monotonic() + timeout
    want = got = None
    while time.monotonic() < deadline:
        want = _rows(conn, db, table, names)
        try:
            got = _rows(conn, target, f"{db}_{table}", names)
        except Exception as exc:  # noqa: BLE001 - the sink has not created the table yet
            got = repr(exc)
        if got == want:
            return
        time.sleep(1)
    diff = [(w, g) for w, g in zip(want or [], got if isinstance(got, list) else [])
            if w != g][:3]
    raise AssertionError(f"{what}: the sink's table differs: {len(want or [])} rows at the "
                         f"source, {len(got) if isinstance(got, list) else got} in the copy; "
                         f"first differences {diff}")


@pytest.mark.parametrize("encoding", ["json", "avro"])
def test_the_jdbc_sink_makes_an_equal_copy_through_changes_ddl_truncate_and_kills(
        db, tmp_path, connect, registry_url, encoding):  # noqa: F811 - the fixture
    name, conn = db
    target = f"{name}_sink"
    support.sql(conn, f"CREATE DATABASE {target}", "SET time_zone = '+00:00'",
                f"CREATE TABLE t (id INT PRIMARY KEY, {COLUMNS})")
    names = ", ".join(c.split()[0] for c in COLUMNS.split(", "))
    filled = names

    def insert(lo, hi):
        for i in range(lo, hi):
            support.sql(conn, f"INSERT INTO t (id, {filled}) VALUES ({i}, "
                        + ROW.format(i=i) + ")")

    insert(1, 41)  # read by the snapshot
    # A table whose snapshot rows are written from the packets (schema.textavro), not dicts.
    support.sql(conn, f"CREATE TABLE w ({WRITTEN})",
                "INSERT INTO w VALUES " + ", ".join(WRITTEN_ROW.format(i=i) for i in range(1, 61)))
    ns = support.unique("dbz")
    cfg = _snapshot_config(tmp_path, ns, name, encoding, registry_url)
    sink = f"sink-{ns}"
    try:
        with support.StreamerProcess(cfg, str(tmp_path / "run1.log"), env={"TZ": "UTC"}) as proc:
            proc.wait_reading()
            _sink(sink, ns, name, target, encoding)
            _wait_equal(conn, name, target, names, "after the snapshot")
            _wait_equal(conn, name, target, WRITTEN_NAMES, "after the snapshot", table="w")
            insert(41, 61)
            support.sql(conn, "UPDATE t SET vc = 'changed', de = -de WHERE id % 3 = 0",
                        "DELETE FROM t WHERE id % 7 = 0")
            _wait_equal(conn, name, target, names, "after inserts, updates and deletes")
            proc.stop(signal.SIGKILL)
        support.sql(conn, "UPDATE t SET tx = 'while down' WHERE id < 10")
        with support.StreamerProcess(cfg, str(tmp_path / "run2.log"), env={"TZ": "UTC"}) as proc:
            proc.wait_reading()
            _wait_equal(conn, name, target, names, "after a SIGKILL and a restart")
            support.sql(conn, "ALTER TABLE t ADD COLUMN note VARCHAR(20) NULL",
                        "INSERT INTO t (id, note) VALUES (100, 'after the DDL')")
            names += ", note"
            _wait_equal(conn, name, target, names, "after a DDL mid-stream")
            support.sql(conn, "TRUNCATE TABLE t")
            insert(200, 205)
            _wait_equal(conn, name, target, names, "after a TRUNCATE")
            assert proc.stop() == 0, proc.output()[-3000:]
        status = _request("GET", f"/connectors/{sink}/status")
        assert status["tasks"][0]["state"] == "RUNNING", status
    finally:
        try:
            _request("DELETE", f"/connectors/{sink}")
        except AssertionError:
            pass
        support.sql(conn, f"DROP DATABASE IF EXISTS {target}")


def test_format_json_is_one_json_object_per_change_with_the_key_as_an_object(db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE j (id INT PRIMARY KEY, amount DECIMAL(8,2), at DATETIME(3))")
    ns = support.unique("fj")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"], format="json")
    with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
        proc.wait_reading()
        support.sql(conn, "INSERT INTO j VALUES (1, 12.50, '2024-05-01 10:00:00.250')",
                    "UPDATE j SET amount = 13 WHERE id = 1", "DELETE FROM j WHERE id = 1")
        msgs = support.consume([f"{ns}.{name}.j"], expect=4)
        assert proc.stop() == 0, proc.output()[-3000:]
    values = [None if m["raw_value"] is None else json.loads(m["raw_value"]) for m in msgs]
    assert [json.loads(m["raw_key"]) for m in msgs] == [{"id": 1}] * 4
    assert [v and v["op"] for v in values] == ["c", "u", "d", None]  # the tombstone last
    assert values[0]["after"] == {"id": 1, "amount": "12.50", "at": "2024-05-01T10:00:00.250000"}
    assert values[1]["before"]["amount"] == "12.50" and values[1]["after"]["amount"] == "13.00"
    assert values[0]["source"]["db"] == name and values[0]["source"]["table"] == "j"


@pytest.mark.parametrize("encoding", ["json", "avro"])
def test_connects_converters_read_every_record_of_the_type_test(db, tmp_path, connect,
                                                               registry_url, encoding):  # noqa: F811
    """Kafka Connect's JsonConverter, and the Avro converter through the registry, turn every
    record of the type test's table (every type, its edges, NULLs) into Connect data: a
    FileStreamSink writes each one, and its task fails at the first it can't read. With
    transaction metadata, headers and Debezium's heartbeats on: a second sink reads the
    transaction and heartbeat topics, and a consumer the headers."""
    from tests.e2e.test_types import columns_of
    name, conn = db
    columns = columns_of(support.DEFAULT)
    support.sql(conn, "CREATE TABLE types (id INT PRIMARY KEY, "
                + ", ".join(f"{c} {t}" for c, t, _, _ in columns) + ")")
    names = ", ".join(c for c, _, _, _ in columns)
    for row_id, idx in ((1, 2), (2, 3)):
        support.sql(conn, f"INSERT INTO types (id, {names}) VALUES ({row_id}, "
                    + ", ".join(col[idx] for col in columns) + ")")
    support.sql(conn, "INSERT INTO types (id) VALUES (3)", "DELETE FROM types WHERE id = 3")
    ns = support.unique("dbt")
    cfg = _snapshot_config(tmp_path, ns, name, encoding, registry_url,
                           debezium={"heartbeat_interval_ms": 200},
                           topics={"transactions": True, "headers": True})
    out, side = tmp_path / "records.txt", tmp_path / "side.txt"
    sink, side_sink = f"file-{ns}", f"file-side-{ns}"
    try:
        with support.StreamerProcess(cfg, str(tmp_path / "run.log")) as proc:
            # The snapshot's rows first, then the changes: an order the test can tell.
            support.wait_for(lambda: f"snapshot of {name}.types done" in proc.output(),
                             what="the snapshot")
            support.sql(conn, "UPDATE types SET ti = 0 WHERE id = 1", "DELETE FROM types WHERE id = 2")
            config = {"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                      "tasks.max": "1", "topics": f"{ns}.{name}.types", "file": str(out),
                      "consumer.override.isolation.level": "read_committed",
                      "consumer.override.auto.offset.reset": "earliest"}
            config.update(_converters(encoding))
            _request("PUT", f"/connectors/{sink}/config", config)
            _request("PUT", f"/connectors/{side_sink}/config", dict(
                config, topics=f"{ns}.transaction,__debezium-heartbeat.{ns}", file=str(side)))
            # The snapshot's 2 rows, the update, the delete and its tombstone (null: written as
            # "null"), all read.
            support.wait_for(lambda: len(_records(out)) >= 5
                             or _request("GET", f"/connectors/{sink}/status")["tasks"][:1]
                             and _request("GET", f"/connectors/{sink}/status")["tasks"][0]["state"]
                             == "FAILED", timeout=120, what="the sink to read every record")
            # Both transactions' BEGIN and END, and heartbeats.
            support.wait_for(lambda: sum(1 for line in _records(side) if "ts_ms=" in line) >= 5,
                             timeout=60, what="the side sink to read transactions and heartbeats")
            for name_ in (sink, side_sink):
                status = _request("GET", f"/connectors/{name_}/status")
                assert status["tasks"][0]["state"] == "RUNNING", \
                    status["tasks"][0].get("trace", "")[:3000]
            assert proc.stop() == 0, proc.output()[-3000:]
        records = _records(out)
        assert [re.search(r"\},op=(\w),", r).group(1) for r in records[:4]] == ["r", "r", "u", "d"]
        # The changes' transaction block; a snapshot's rows have none.
        assert all("transaction=" not in r for r in records[:2])
        assert all(re.search(r"transaction=Struct\{id=[^,]+,total_order=1,"
                             r"data_collection_order=1\}", r) for r in records[2:4]), records
        side_records = _records(side)
        assert sum("status=END" in r and "event_count=1" in r for r in side_records) == 2
        assert any(r.startswith("Struct{ts_ms=") for r in side_records), side_records
        table = support.consume([f"{ns}.{name}.types"], expect=5, idle=2.0)
        assert [dict(m["headers"])["op"] for m in table] == [b"r", b"r", b"u", b"d", b"d"]
        assert all(dict(m["headers"])["table"] == b"types" for m in table)
        assert records[4] == "null" and len(records) == 5, records
        assert all(r.startswith("Struct{") and "id=" in r for r in records[:4])
        # DECIMAL(65,30) at its edge, every digit through the converter.
        assert f"decbig=-{'9' * 35}.{'9' * 30}," in records[0]
    finally:
        for name_ in (sink, side_sink):
            try:
                _request("DELETE", f"/connectors/{name_}")
            except AssertionError:
                pass
