"""Shared helpers for tests against the real local MariaDB and Kafka."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
import zlib
from typing import Any, Dict, List, Optional, Tuple

import pymysql
import yaml
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from streamer.codec.decode import Decoder
from streamer.kafka.topics import kafka_schema_source

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOCAL = os.path.join(ROOT, ".local")
MYSQL_PORT = int(os.environ.get("STREAMER_MYSQL_PORT", "13306"))
KAFKA = f"127.0.0.1:{os.environ.get('STREAMER_KAFKA_PORT', '9092')}"


def ensure_servers() -> None:
    subprocess.run([os.path.join(ROOT, "deploy/local/up.sh")], check=True)


def secret(name: str, base: str = LOCAL) -> str:
    with open(os.path.join(base, "secrets", name + ".password")) as fh:
        return fh.read().strip()


def admin(db: Optional[str] = None, port: int = MYSQL_PORT, base: str = LOCAL) -> Any:
    return pymysql.connect(host="127.0.0.1", port=port, user="admin",
                           password=secret("admin", base), database=db, autocommit=True,
                           charset="utf8mb4")


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


def write_config(path: str, namespace: str, include: List[str], **over: Any) -> str:
    cfg: Dict[str, Any] = {
        "namespace": namespace,
        "source": {"name": namespace},
        "mysql": {"host": "127.0.0.1", "port": MYSQL_PORT, "user": "streamer",
                  "password_file": os.path.join(LOCAL, "secrets", "streamer.password"),
                  "server_id": 5000 + (zlib.crc32(namespace.encode()) % 100000)},
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


def decoder(namespace: str) -> Decoder:
    return Decoder(kafka_schema_source({"bootstrap.servers": KAFKA}, namespace))


def consume(topics: List[str], expect: Optional[int] = None, idle: float = 3.0,
            timeout: float = 90.0, decode_ns: Optional[str] = None) -> List[Dict[str, Any]]:
    """All committed messages of the topics (read_committed), in partition order.

    Stops when ``expect`` messages arrived (then reads ``idle`` more seconds to catch extras),
    or when nothing arrived for ``idle`` seconds, or at ``timeout``.
    """
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
                if expect is not None and len(out) < expect:
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
                   "raw_key": msg.key(), "raw_value": msg.value()}
            if dec is not None:
                rec["key"] = dec.decode(msg.key())
                rec["value"] = dec.decode(msg.value())
            out.append(rec)
    finally:
        c.close()
    return out


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
