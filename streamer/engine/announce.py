"""Announcements: a topic made sure of and its writer schemas published before its first message.

Every stage that publishes to a topic announces it first, in the open batch: the schema records
ride in the same Kafka transaction as the messages that use them, so an aborted batch takes both,
and a re-read announces again.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Dict, Optional, Set

from streamer.codec.avro import CONFLUENT_MAGIC, MAGIC, canonical_json

log = logging.getLogger(__name__)


def _topic_config(tv: Any) -> Optional[Dict[str, str]]:
    """A table's topic's config where it differs from the default: compacted when keyed."""
    return {"cleanup.policy": "compact"} if tv.compacted else None


class Announcer:
    """Announces table versions and the transaction topic on one publisher. ``open`` begins the
    batch's transaction when none is open; ``registry`` (a schema_registry.SchemaRegistry) frames
    writers for the Confluent wire format when one is configured."""

    def __init__(self, publisher: Any, open_batch: Callable[[], None], compact: bool,
                 registry: Optional[Any] = None, uncompacted: Optional[Set[str]] = None,
                 headers: bool = False) -> None:
        self.publisher = publisher
        self.open = open_batch
        self.compact = compact
        self.headers = headers
        self.registry = registry
        # Topics already warned about (kept by the caller across connections: warned once).
        self.uncompacted = uncompacted if uncompacted is not None else set()

    def table(self, tv: Any) -> None:
        """A table's current version changed: its topic exists and its writer schemas go out in
        the open batch, before the first message that uses them."""
        publisher = self.publisher
        if not tv.compacted and self.compact and tv.topic not in self.uncompacted:
            self.uncompacted.add(tv.topic)
            log.warning("table %s.%s has no primary key: its topic %s is created with the "
                        "delete cleanup policy, not compacted (Kafka compacts keyed records "
                        "only)", tv.db, tv.table, tv.topic,
                        extra={"table": f"{tv.db}.{tv.table}"})
        publisher.ensure_topic(tv.topic, config=_topic_config(tv))
        if self.registry is not None and tv.wire_value is not None:
            self.registry.frame(tv.topic, tv.wire_value, tv.wire_key)
        if self.headers:
            tv.headers = message_headers(tv.db, tv.table, tv.wire_value)
        self.open()
        for kind, writer in (("value", tv.value_writer), ("key", tv.key_writer)):
            if writer is not None:
                publisher.produce_schema(writer.fingerprint.hex(), canonical_json(writer.schema),
                                         tv.topic, kind)

    def ahead(self, tv: Any) -> None:
        """A version that will be announced soon (a snapshot's, while its chunk is read): its
        topic is made sure of in the background meanwhile."""
        self.publisher.ensure_topic_soon(tv.topic, config=_topic_config(tv))

    def transactions(self, topic: str, writer: Any, key_writer: Any = None) -> None:
        """The transaction topic exists and its schema goes out in the open batch, before the
        stream's first transaction record."""
        self.side_topic(topic, writer, key_writer, "transaction")

    def side_topic(self, topic: str, writer: Any, key_writer: Any, kind: str) -> None:
        """A topic of the streamer's own records (transactions, Debezium's heartbeats), of one
        partition, exists, and its schema goes out in the open batch, under its own ``kind``:
        the "value" records are table versions, whose lineage a start reads."""
        self.publisher.ensure_topic(topic, partitions=1)
        if writer is None:  # a format whose records carry their schema (Debezium's JSON)
            return
        if self.registry is not None:
            self.registry.frame(topic, writer, key_writer)
        self.open()
        self.publisher.produce_schema(writer.fingerprint.hex(), canonical_json(writer.schema),
                                      topic, kind)


def schema_id(header: bytes) -> str:
    """The schema id a message's frame names: the registry's id (Confluent wire format), else
    the schema's fingerprint in hex (Avro single-object encoding)."""
    if len(header) == 5 and header[:1] == CONFLUENT_MAGIC:
        return str(int.from_bytes(header[1:], "big"))
    if header[:len(MAGIC)] == MAGIC:
        return header[len(MAGIC):].hex()
    raise ValueError(f"a message frame of neither known kind: {header!r}")


def message_headers(db: str, table: str, writer: Optional[Any]) -> Dict[str, Any]:
    """By op, the Kafka headers of a table's messages (topics.headers): ``op``, ``db``,
    ``table`` and, for a format whose values name a writer schema (``writer``, framed by now),
    ``schema_id``; UTF-8 text, so a consumer can route or filter without decoding a value. A
    tombstone carries its delete's."""
    common = [("db", db.encode()), ("table", table.encode())]
    if writer is not None:
        common.append(("schema_id", schema_id(writer.header).encode()))
    return {op: (("op", op.encode()), *common) for op in ("c", "u", "d", "r", "t")}
