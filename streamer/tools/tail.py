"""``streamer tail``: a topic's messages decoded to JSON lines, read_committed, like kcat."""
from __future__ import annotations

import argparse
import json
import time
from typing import Any, Dict, Optional

from confluent_kafka import Consumer, KafkaError

from streamer import config as config_mod
from streamer.codec.decode import Decoder, to_jsonable
from streamer.errors import KafkaFatal
from streamer.kafka import logs
from streamer.kafka.topics import kafka_schema_source


def readable(decoder: Decoder, data: Optional[bytes]) -> Any:
    """A message's key or value as a line shows it: decoded when it is the streamer's Avro; the
    JSON it holds when it is JSON text (``format: json``, the namespace's own __positions and
    __schemas records), or the text (their keys); else its bytes in hex, with why they weren't
    read. A message of another writer, or one whose schema is gone, is shown so, and the lines
    after it go on."""
    if data is None:
        return None
    try:
        return decoder.decode(data)
    except (ValueError, LookupError, EOFError) as exc:  # a frame, a schema, a body cut short
        why = str(exc) or type(exc).__name__
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {"undecoded_hex": data.hex(), "why": why}
    try:
        return json.loads(text)
    except ValueError:
        return text if text.isprintable() else {"undecoded_hex": data.hex(), "why": why}


def tail(args: argparse.Namespace) -> int:
    """`streamer tail`: print each committed message of a topic as one JSON line."""
    conf: Dict[str, Any] = {"bootstrap.servers": args.bootstrap}
    if args.config:
        conf = dict(config_mod.load(args.config)["kafka"])
    namespace = args.namespace or args.topic.split(".")[0]
    decoder = Decoder(kafka_schema_source(conf, namespace))
    consumer = Consumer(logs.client_conf(dict(conf, **{
        "group.id": f"streamer-tail-{time.time()}", "enable.auto.commit": False,
        "auto.offset.reset": "latest" if args.from_end else "earliest",
        "isolation.level": "read_committed"})))
    try:
        known = consumer.list_topics(args.topic, timeout=10).topics.get(args.topic)
        if known is None or known.error is not None:
            raise KafkaFatal(f"topic {args.topic} does not exist on {conf['bootstrap.servers']}"
                             f" (a table's topic is {{namespace}}.{{database}}.{{table}}, made "
                             f"at its first change)")
        consumer.subscribe([args.topic])
    except BaseException:
        consumer.close()
        raise
    seen = 0
    idle_since = time.monotonic()
    try:
        while args.max is None or seen < args.max:
            msg = consumer.poll(0.5)
            if msg is None:
                if args.idle_exit and time.monotonic() - idle_since > args.idle_exit:
                    break
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaFatal(f"reading {args.topic}: {msg.error().str()}")
            idle_since = time.monotonic()
            line = {"topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset(),
                    "key": readable(decoder, msg.key()), "value": readable(decoder, msg.value())}
            if msg.value() is None:
                line["tombstone"] = True  # a delete's key, for compaction (value null)
            print(json.dumps(to_jsonable(line), sort_keys=True), flush=True)
            seen += 1
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()
    return 0
