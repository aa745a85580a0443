"""Shared helpers for tests against the real local MariaDB and Kafka."""
from __future__ import annotations

import os
import platform
import random
import signal
import subprocess
import sys
import time
import uuid
import zlib
from typing import Any, Callable, Dict, List, Optional, Tuple

import pymysql
import yaml
from confluent_kafka import (OFFSET_BEGINNING, Consumer, KafkaError, KafkaException,
                             TopicPartition)

from streamer.codec.decode import Decoder
from streamer.kafka.topics import kafka_schema_source

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOCAL = os.path.join(ROOT, ".local")
MYSQL_PORT = int(os.environ.get("STREAMER_MYSQL_PORT", "13306"))
KAFKA = f"127.0.0.1:{os.environ.get('STREAMER_KAFKA_PORT', '9092')}"


def soak(quick: int, full: int) -> int:
    """How many times a kill loop kills: ``quick`` in `make test` under PyPy, the production
    runtime; ``full`` in `make soak` (STREAMER_SOAK=1). Under CPython, which `make test` runs on
    the same server after PyPy, a third of ``quick`` (at least 2): the same paths, at its own
    timing, for a third of the machine's time (CI's two cores are its limit)."""
    if os.environ.get("STREAMER_SOAK") == "1":
        return full
    if platform.python_implementation() != "PyPy":
        return max(2, round(quick / 3))
    return quick


def rng(label: str) -> "random.Random":
    """The random source of a randomized test, seeded by ``label`` (the same draws each run), and
    by STREAMER_TEST_SEED when set: `make soak` sets a new one each time, to try other draws. A
    failure is replayed with the seed it names in its message (``seeded``)."""
    seed = os.environ.get("STREAMER_TEST_SEED", "")
    return random.Random(f"{label} {seed}" if seed else label)


def seeded(message: str) -> str:
    """``message`` with the STREAMER_TEST_SEED a randomized test ran with, if any."""
    seed = os.environ.get("STREAMER_TEST_SEED", "")
    return f"{message} (STREAMER_TEST_SEED={seed})" if seed else message


class Source:
    """One server of the source matrix: the default MariaDB 10.11 (deploy/local/up.sh), MySQL
    8.0 and MariaDB 11.4 (deploy/local/sources.sh), all opened by the same passwords."""

    def __init__(self, name: str, port: int) -> None:
        self.name = name
        self.port = port
        self.mysql = name.startswith("mysql")
        self.password_file = os.path.join(LOCAL, "secrets", "streamer.password")

    def __repr__(self) -> str:
        return self.name

    def admin(self, db: Optional[str] = None) -> Any:
        conn = admin(db, port=self.port)
        if self.mysql:
            # seq() builds a sequence by recursion: as deep as the largest one a test asks for.
            sql(conn, "SET SESSION cte_max_recursion_depth = 10000000")
        return conn

    def seq(self, n: int) -> str:
        return seq(n, self.mysql)

    def binlog_end(self, conn: Any) -> Tuple[str, int]:
        return master_pos(conn)

    def mysql_config(self, namespace: str) -> Dict[str, Any]:
        """A streamer config's mysql section for this server."""
        return {"host": "127.0.0.1", "port": self.port, "user": "streamer",
                "password_file": self.password_file,
                "server_id": 5000 + (zlib.crc32(namespace.encode()) % 100000)}


SOURCES = {s.name: s for s in (Source("mariadb-10.11", MYSQL_PORT),
                               Source("mysql-8.0", int(os.environ.get("STREAMER_MYSQL80_PORT",
                                                                      "13316"))),
                               Source("mariadb-11.4", int(os.environ.get(
                                   "STREAMER_MARIADB114_PORT", "13326"))))}
DEFAULT = SOURCES["mariadb-10.11"]


def kafka_side_source() -> Source:
    """The server of the tests marked kafka_side: what they try is Kafka's side of the stream
    (a broker restarted, paused, over TLS), and any source serves. tests/lanes.sh gives them
    MariaDB 11.4 (STREAMER_TEST_KAFKA_SIDE), off the default server, whose tests are the lanes'
    longest path; run alone, they use the default."""
    name = os.environ.get("STREAMER_TEST_KAFKA_SIDE", DEFAULT.name)
    if name not in SOURCES:
        raise ValueError(f"STREAMER_TEST_KAFKA_SIDE={name!r} names no known source; known: "
                         f"{', '.join(SOURCES)}")
    return SOURCES[name]


def seq(n: int, mysql: bool) -> str:
    """A table expression of one column ``seq`` holding 1..n: MariaDB's sequence engine, a
    recursive common table expression on MySQL (deeper than 1000 with the session's
    cte_max_recursion_depth raised, as Source.admin does)."""
    if not mysql:
        return f"seq_1_to_{int(n)}"
    return (f"(WITH RECURSIVE s (seq) AS (SELECT 1 UNION ALL SELECT seq + 1 FROM s "
            f"WHERE seq < {int(n)}) SELECT seq FROM s) AS seq_1_to_{int(n)}")


def enabled_sources() -> List[Source]:
    """The sources the contract tests run against: STREAMER_TEST_SOURCES (comma-separated
    names), by default all of them."""
    names = [n.strip() for n in os.environ.get("STREAMER_TEST_SOURCES", ",".join(SOURCES))
             .split(",") if n.strip()]
    unknown = [n for n in names if n not in SOURCES]
    if unknown:
        raise ValueError(f"STREAMER_TEST_SOURCES names unknown sources {unknown}; known: "
                         f"{', '.join(SOURCES)}")
    return [SOURCES[n] for n in names]


def ensure_servers() -> None:
    subprocess.run([os.path.join(ROOT, "deploy/local/up.sh")], check=True)
    others = [s.name for s in enabled_sources() if s is not DEFAULT]
    if others:
        subprocess.run([os.path.join(ROOT, "deploy/local/sources.sh"), "up", *others], check=True)


def secret(name: str, base: str = LOCAL) -> str:
    with open(os.path.join(base, "secrets", name + ".password")) as fh:
        return fh.read().strip()


def admin(db: Optional[str] = None, port: int = MYSQL_PORT, base: str = LOCAL,
          **options: Any) -> Any:
    return pymysql.connect(**{"host": "127.0.0.1", "port": port, "user": "admin",
                              "password": secret("admin", base), "database": db,
                              "autocommit": True, "charset": "utf8mb4", "local_infile": True,
                              **options})


def sql(conn: Any, *statements: str, args: Any = None) -> List[Tuple]:
    out: List[Tuple] = []
    with conn.cursor() as cur:
        for s in statements:
            cur.execute(s, args)
            out = list(cur.fetchall())
    return out


def master_pos(conn: Any) -> Tuple[str, int]:
    row = sql(conn, "SHOW MASTER STATUS")[0]
    return row[0], int(row[1])


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def write_config(path: str, namespace: str, include: List[str], server: Optional[Source] = None,
                 **over: Any) -> str:
    """A config streaming ``include`` from ``server`` (the default source) into ``namespace``;
    ``over`` replaces or extends its sections."""
    cfg: Dict[str, Any] = {
        "namespace": namespace,
        "source": {"name": namespace},
        "mysql": (server or DEFAULT).mysql_config(namespace),
        "kafka": {"bootstrap.servers": KAFKA},
        "tables": {"include": include},
        "batch": {"linger_ms": 50},
        "start": {"initial": "end"},
        # PyPy's JIT warm-up (engine.warmup) spends idle seconds of CPU that the suite's many
        # short-lived streamers would not use; tests/e2e/test_warmup.py runs it.
        "warmup": {"transactions": 0},
    }
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key].update(value)
        else:
            cfg[key] = value
    with open(path, "w") as fh:
        yaml.safe_dump(cfg, fh)
    return path


class StreamerProcess:
    """`streamer run` as a real child process of the interpreter running the tests."""

    def __init__(self, config_path: str, log_path: str, *args: str, env: Optional[Dict[str, str]] = None):
        self.log_path = log_path
        self.log = open(log_path, "ab")
        e = dict(os.environ)
        e.update(env or {})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streamer.cli", "run", "-c", config_path, *args],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=ROOT, env=e)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        finally:
            self.log.close()

    def wait_reading(self, timeout: float = 120) -> None:
        """Wait out start-up: a signal before the stream opens stops a streamer that read nothing."""
        wait_for(lambda: "reading the binlog from" in self.output() or self.proc.poll() is not None,
                 timeout=timeout, what="the binlog stream to open")
        assert self.proc.poll() is None, self.output()[-3000:]

    def wait(self, timeout: float = 60) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            self.log.close()

    def output(self) -> str:
        with open(self.log_path, "rb") as fh:
            return fh.read().decode("utf-8", "replace")

    def __enter__(self) -> "StreamerProcess":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if not self.log.closed:
            self.log.close()


def killed_after_a_commit(config_path: str, log_path: str, positions: str,
                          start: Optional[Tuple[str, int]], pause: float) -> str:
    """One run of the streamer, SIGKILLed ``pause`` s after its first commit to ``positions``
    (however long start-up took); what it logged. Until a checkpoint is committed it starts at
    ``start`` (None: as the config says), as an operator would restart with the same explicit
    position; after that, it resumes from the checkpoint."""
    before = last_committed(positions)
    resumes = before >= 0 or start is None
    args = () if resumes else ("--start-file", start[0], "--start-pos", str(start[1]))
    logged = os.path.getsize(log_path) if os.path.exists(log_path) else 0

    def committed() -> bool:
        # The stream opened in this run's own lines, and a checkpoint committed since: the end
        # offset alone also moves by the marker of the last run's transaction that this run's
        # producer aborts as it starts.
        return ("reading the binlog from" in proc.output()[logged:]
                and last_committed(positions) > before)

    with StreamerProcess(config_path, log_path, *args) as proc:
        wait_for(lambda: proc.proc.poll() is not None or committed(),
                 timeout=120, what="a commit by this run")
        time.sleep(pause)
        assert proc.proc.poll() is None, proc.output()[-3000:]
        proc.stop(signal.SIGKILL)
    with open(log_path, "rb") as fh:
        fh.seek(logged)
        return fh.read().decode("utf-8", "replace")


def decoder(namespace: str) -> Decoder:
    return Decoder(kafka_schema_source({"bootstrap.servers": KAFKA}, namespace))


def consume(topics: List[str], expect: Optional[int] = None, idle: Optional[float] = None,
            timeout: float = 90.0, decode_ns: Optional[str] = None,
            until: Optional[Callable[[List[Dict[str, Any]]], bool]] = None
            ) -> List[Dict[str, Any]]:
    """All committed messages of the topics (read_committed), in partition order.

    Stops when ``expect`` messages arrived and ``until`` (of the messages so far) holds, then
    reads ``idle`` more seconds (1 s unless given) to catch extras: a streamer commits what it
    has read within milliseconds, so an extra one comes in that second or with a restart, which
    its test reads after. With neither given, stops when nothing arrived for ``idle`` seconds
    (3 s unless given: the consumer's first fetch comes in that time), or at ``timeout``.
    """
    if idle is None:
        idle = 1.0 if expect is not None or until is not None else 3.0
    c = Consumer({"bootstrap.servers": KAFKA, "group.id": unique("test-"),
                  "enable.auto.commit": False, "isolation.level": "read_committed",
                  "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 500})
    dec = decoder(decode_ns) if decode_ns else None
    out: List[Dict[str, Any]] = []
    try:
        # assign, not subscribe: a group rebalance would re-read from the start and duplicate.
        # Topics the streamer hasn't created yet are picked up as they appear.
        deadline = time.monotonic() + timeout
        waiting = list(topics)
        next_check = 0.0

        def assign_new() -> None:
            md = c.list_topics(timeout=10)
            for t in list(waiting):
                if t in md.topics and not md.topics[t].error and md.topics[t].partitions:
                    c.incremental_assign([TopicPartition(t, p, 0) for p in md.topics[t].partitions])
                    waiting.remove(t)

        last = time.monotonic()
        while time.monotonic() < deadline:
            if waiting and time.monotonic() >= next_check:
                assign_new()
                next_check = time.monotonic() + 0.5
            msg = c.poll(0.2)
            now = time.monotonic()
            if msg is None:
                if expect is not None and len(out) < expect or until is not None and not until(out):
                    continue
                if now - last > idle:
                    break
                continue
            if msg.error():
                if msg.error().code() in (KafkaError._PARTITION_EOF, KafkaError.UNKNOWN_TOPIC_OR_PART):
                    continue
                raise RuntimeError(msg.error().str())
            last = now
            rec = {"topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset(),
                   "raw_key": msg.key(), "raw_value": msg.value(), "headers": msg.headers()}
            if dec is not None:
                rec["key"] = dec.decode(msg.key())
                rec["value"] = dec.decode(msg.value())
            out.append(rec)
    finally:
        c.close()
    return out


def last_committed(topic: str) -> int:
    """The offset of the topic's (partition 0) last record a read_committed consumer reads, -1
    if none: unlike the end offset, not moved by a transaction's abort marker."""
    c = Consumer({"bootstrap.servers": KAFKA, "group.id": unique("test-"),
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    tp = TopicPartition(topic, 0)
    try:
        try:
            end = c.get_watermark_offsets(tp, timeout=10)[1]  # the last stable offset
        except KafkaException:
            return -1  # the topic doesn't exist yet
        if end <= 0:
            # Made, nothing in it yet (a streamer killed before its first commit): an empty
            # partition's position is never set, so it would never be read to its end.
            return -1
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        last = -1
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            # Aborted records and markers are passed over, and move the position past them.
            if c.position([tp])[0].offset >= end:
                return last
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                last = m.offset()
            elif m is not None and m.error().code() != KafkaError._PARTITION_EOF:
                raise KafkaException(m.error())
        raise AssertionError(f"{topic} not read to {end} in 30 s")
    finally:
        c.close()


class EndOffset:
    """A topic's end offset (partition 0), read again and again through one consumer: fast
    enough to act between two of a streamer's batches (``end_offsets`` makes a consumer per
    call, a few hundred ms on a busy machine)."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.consumer = Consumer({"bootstrap.servers": KAFKA, "group.id": unique("test-")})

    def __call__(self) -> int:
        try:
            return self.consumer.get_watermark_offsets(TopicPartition(self.topic, 0),
                                                       timeout=10)[1]
        except KafkaException:
            return 0  # the topic doesn't exist yet

    def __enter__(self) -> "EndOffset":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.consumer.close()


def end_offsets(topic: str) -> int:
    c = Consumer({"bootstrap.servers": KAFKA, "group.id": unique("test-")})
    try:
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return hi
    except KafkaException:
        return 0  # the topic doesn't exist yet
    finally:
        c.close()


def wait_for(predicate: Any, timeout: float = 60.0, interval: float = 0.2, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
