"""Schema-registry mode against a real registry (Apicurio, Confluent-compatible API).

Messages carry the Confluent wire format, subjects are {topic}-key / {topic}-value, and
confluent-kafka's own AvroDeserializer decodes what the streamer wrote.
"""
import datetime
import decimal
import json
import os
import socket
import subprocess
import threading
import urllib.request

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from streamer.codec.decode import Decoder
from streamer.codec.schema_registry import SchemaRegistry
from streamer.kafka.topics import kafka_schema_source
from tests import support

PORT = os.environ.get("STREAMER_REGISTRY_PORT", "8081")
URL = f"http://127.0.0.1:{PORT}/apis/ccompat/v7"


@pytest.fixture(scope="session")
def registry_url():
    """The real registry, started by the project's own script (idempotent; down.sh stops it)."""
    subprocess.run([os.path.join(support.ROOT, "deploy/local/registry.sh"), "up"], check=True)
    return URL


def _get(url):
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


def test_registry_mode_messages_decode_with_confluents_avro_deserializer(db, tmp_path, registry_url):
    name, conn = db
    support.sql(conn, "CREATE TABLE acct (id INT PRIMARY KEY, owner VARCHAR(20) NOT NULL, "
                      "balance DECIMAL(12,2), opened TIMESTAMP(3) NULL)")
    support.sql(conn, "SET time_zone = '+00:00'")
    start = support.master_pos(conn)
    for i in range(1, 11):
        support.sql(conn, f"INSERT INTO acct VALUES ({i}, 'o{i}', {i}.25, '2024-05-0{i % 9 + 1} 08:00:00.5')")
    support.sql(conn, "ALTER TABLE acct ADD COLUMN note VARCHAR(10)",
                "INSERT INTO acct VALUES (11, 'late', NULL, NULL, 'hi')",
                "UPDATE acct SET balance = 0 WHERE id = 1")
    ns = support.unique("sr")
    topic = f"{ns}.{name}.acct"
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"],
                               schema_registry={"url": registry_url})
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", start[0],
                                 "--start-pos", str(start[1]), env={"TZ": "UTC"}) as proc:
        msgs = support.consume([topic], expect=12)
        assert proc.stop() == 0, proc.output()
    assert len(msgs) == 12
    assert all(m["raw_value"][:1] == b"\x00" and m["raw_key"][:1] == b"\x00" for m in msgs)

    client = SchemaRegistryClient({"url": registry_url})
    values = AvroDeserializer(client)
    keys = AvroDeserializer(client)
    decoded = [(keys(m["raw_key"], SerializationContext(topic, MessageField.KEY)),
                values(m["raw_value"], SerializationContext(topic, MessageField.VALUE)))
               for m in msgs]
    assert [k for k, _ in decoded] == [{"id": i} for i in range(1, 12)] + [{"id": 1}]
    first = decoded[0][1]
    assert first["op"] == "c" and first["before"] is None
    assert first["after"] == {"id": 1, "owner": "o1", "balance": decimal.Decimal("1.25"),
                              "opened": datetime.datetime(2024, 5, 2, 8, 0, 0, 500000,
                                                          tzinfo=datetime.timezone.utc)}
    assert first["source"]["table"] == "acct" and first["source"]["db"] == name
    assert decoded[10][1]["after"] == {"id": 11, "owner": "late", "balance": None, "opened": None,
                                       "note": "hi"}
    last = decoded[11][1]
    assert (last["op"], last["before"]["balance"], last["after"]["balance"]) == (
        "u", decimal.Decimal("1.25"), decimal.Decimal("0.00"))

    # Two value versions (before and after the ALTER), one key version: three registrations in
    # all for 12 messages, so the hot path made no registry call.
    subjects = _get(f"{registry_url}/subjects")
    assert f"{topic}-value" in subjects and f"{topic}-key" in subjects
    assert len(_get(f"{registry_url}/subjects/{topic}-value/versions")) == 2
    assert len(_get(f"{registry_url}/subjects/{topic}-key/versions")) == 1
    assert proc.output().count("as schema id") == 3

    ours = Decoder(kafka_schema_source({"bootstrap.servers": support.KAFKA}, ns),
                   registry=SchemaRegistry(registry_url).schema)
    assert [ours.decode(m["raw_value"])["after"] for m in msgs[:11]] == \
        [v["after"] for _, v in decoded[:11]]
    assert ours.decode(msgs[0]["raw_key"]) == {"id": 1}


def test_streamer_check_signs_in_to_the_registry_and_names_a_wrong_url(db, tmp_path, registry_url):
    # `streamer check` had no registry line: a wrong URL showed at the first table's
    # registration, in the running stream.
    import sys

    name, _ = db
    for url, line in ((registry_url, "✓ schema registry"),
                      (registry_url.replace("/apis/ccompat/v7", ""), "✗ schema registry")):
        cfg = support.write_config(str(tmp_path / "c.yaml"), support.unique("src"),
                                   [f"{name}.*"], schema_registry={"url": url})
        out = subprocess.run([sys.executable, "-m", "streamer.cli", "check", "-c", cfg],
                             cwd=support.ROOT, capture_output=True, text=True, timeout=120)
        said = [x for x in out.stdout.splitlines() if x.startswith(line)]
        assert len(said) == 1, out.stdout + out.stderr
        if line.startswith("✓"):
            assert "default compatibility" in said[0] and out.returncode == 0, out.stdout
        else:
            assert "answered 404" in said[0] and "Apicurio's is .../apis/ccompat/v7" in said[0]
            assert out.returncode == 1


def test_unreachable_registry_is_retried_naming_the_fix_and_given_up_as_configured(db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY)")
    start = support.master_pos(conn)
    support.sql(conn, "INSERT INTO t VALUES (1)")
    ns = support.unique("su")
    port = 1  # nothing listens on port 1
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"],
                               mysql={"reconnect_max_attempts": 2},
                               schema_registry={"url": f"http://127.0.0.1:{port}"})
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", start[0],
                                 "--start-pos", str(start[1])) as proc:
        code = proc.wait(60)
    out = proc.output()
    said = "schema registry at http://127.0.0.1:1 is not reachable"
    assert code == 5, out[-3000:]
    assert out.count(f"{said} ([Errno 111] Connection refused); check schema_registry.url and "
                     f"that the registry is up; resuming from") == 2
    assert f"gave up after 2 reconnect attempts: {said}" in out


class Relay:
    """A TCP relay to the real registry on a port of its own, which the test can take down
    (nothing listens: connections are refused, live ones cut) and bring up again."""

    def __init__(self, target_port):
        self.target = ("127.0.0.1", int(target_port))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.listener = None
        self.live = []
        self.up()

    def up(self):
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", self.port))
        self.listener.listen(16)
        threading.Thread(target=self._accept, args=(self.listener,), daemon=True).start()

    def down(self):
        self.listener.close()
        for s in self.live:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        self.live.clear()

    def _accept(self, listener):
        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # closed: down
                return
            upstream = socket.create_connection(self.target)
            self.live += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


@pytest.mark.on_source("mariadb-11.4")
def test_a_registry_down_while_a_new_version_needs_it_is_waited_for_and_nothing_is_lost(
        tmp_path, registry_url):
    # The stream goes on from its checkpoint once the registry answers again: no exit, each row
    # once and in order, the versions registered while it was down framed with their own ids.
    source = support.SOURCES["mariadb-11.4"]
    name = support.unique("srdown")
    conn = source.admin()
    support.sql(conn, f"CREATE DATABASE {name}")
    relay = Relay(PORT)
    try:
        conn.select_db(name)
        support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
        start = support.master_pos(conn)
        support.sql(conn, *[f"INSERT INTO t VALUES ({i}, 'a{i}')" for i in range(1, 4)])
        ns = support.unique("srd")
        topics = [f"{ns}.{name}.t", f"{ns}.{name}.u"]
        cfg = support.write_config(
            str(tmp_path / "c.yaml"), ns, [f"{name}.*"], server=source,
            schema_registry={"url": registry_url.replace(f":{PORT}/", f":{relay.port}/")})
        with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", start[0],
                                     "--start-pos", str(start[1])) as proc:
            assert len(support.consume(topics[:1], expect=3)) == 3
            relay.down()
            # A new version of t and a new table: each needs the registry before its rows go.
            support.sql(conn, "ALTER TABLE t ADD COLUMN n INT",
                        *[f"INSERT INTO t VALUES ({i}, 'b{i}', {i})" for i in range(4, 7)],
                        "CREATE TABLE u (id INT PRIMARY KEY)", "INSERT INTO u VALUES (1), (2)",
                        "UPDATE t SET n = 0 WHERE id = 1")
            support.wait_for(lambda: proc.output().count("is not reachable") >= 3, timeout=60,
                             what="the streamer to retry the registry three times")
            assert proc.proc.poll() is None, proc.output()[-3000:]
            relay.up()
            msgs = support.consume(topics, expect=3 + 3 + 1 + 2, timeout=120)
            assert proc.stop() == 0, proc.output()[-3000:]
        out = proc.output()
    finally:
        relay.down()
        support.sql(conn, f"DROP DATABASE {name}")
        conn.close()
    assert "resuming from" in out and "Traceback" not in out

    client = SchemaRegistryClient({"url": registry_url})
    rows = []
    for m in msgs:
        field = MessageField.VALUE
        value = AvroDeserializer(client)(m["raw_value"], SerializationContext(m["topic"], field))
        rows.append((m["topic"].rsplit(".", 1)[1], value["op"], value["after"]))
    assert [r[1:] for r in rows if r[0] == "t"] == \
        [("c", {"id": i, "v": f"a{i}"}) for i in range(1, 4)] + \
        [("c", {"id": i, "v": f"b{i}", "n": i}) for i in range(4, 7)] + \
        [("u", {"id": 1, "v": "a1", "n": 0})]
    assert [r[1:] for r in rows if r[0] == "u"] == [("c", {"id": i}) for i in (1, 2)]
    assert len(_get(f"{registry_url}/subjects/{topics[0]}-value/versions")) == 2
    assert len(_get(f"{registry_url}/subjects/{topics[1]}-value/versions")) == 1


@pytest.mark.private_servers
def test_two_ups_at_once_start_one_registry_and_down_stops_it(tmp_path, registry_url):
    # The two test lanes may ask for the registry in the same seconds: both found it not
    # running and started one; the second failed on the taken port and took the first's pid
    # file with it, so `status` and `down` no longer knew the registry that ran. A registry of
    # its own here (its own directory and ports; the app hard-linked from the shared one).
    import shutil

    from tests.e2e.servers import free_port

    script = os.path.join(support.ROOT, "deploy/local/registry.sh")
    own = tmp_path / "registry"
    shutil.copytree(os.path.join(support.ROOT, ".local/registry/app"), own / "app",
                    copy_function=os.link)
    port = free_port()
    env = dict(os.environ, STREAMER_REGISTRY_DIR=str(own), STREAMER_REGISTRY_PORT=str(port),
               STREAMER_REGISTRY_MANAGEMENT_PORT=str(free_port()))

    def java_pids():
        """The processes whose command line starts a registry on this port."""
        wanted, found = f"-Dquarkus.http.port={port}".encode(), []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    if wanted in fh.read().split(b"\0"):
                        found.append(int(pid))
            except OSError:
                continue  # gone meanwhile
        return sorted(found)

    ups = [subprocess.Popen([script, "up"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    try:
        said = [u.communicate(timeout=300)[0] for u in ups]
        assert [u.returncode for u in ups] == [0, 0], said
        assert sum("already running" in s for s in said) == 1, said
        pids = java_pids()
        assert len(pids) == 1 and (own / "registry.pid").read_text().strip() == str(pids[0])
        assert _get(f"http://127.0.0.1:{port}/apis/ccompat/v7/subjects") == []
    finally:
        down = subprocess.run([script, "down"], env=env, capture_output=True, text=True,
                              timeout=60)
    assert down.returncode == 0 and "stopped" in down.stdout, down.stdout + down.stderr
    assert java_pids() == []
