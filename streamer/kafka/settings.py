"""The Kafka clients' settings, the names the streamer gives its producers, and Kafka's errors.

Every client the streamer opens (the producers, the checkpoint and schema readers, the admin
client, the lease's consumer) gets the whole ``kafka:`` section of the config: TLS, SASL, socket
and address settings alike. Only the producer's own settings are kept from the others.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, TypeVar

from confluent_kafka import KafkaError, KafkaException

from streamer.errors import ConfigError
from streamer.kafka import logs

T = TypeVar("T")

SAFE_IN_FLIGHT = 1
DEFAULT_PRODUCER = {
    "linger.ms": 5,
    "batch.num.messages": 10000,
    "queue.buffering.max.messages": 200000,
    "queue.buffering.max.kbytes": 262144,
    "message.max.bytes": 16777216,
    "compression.type": "lz4",
    "transaction.timeout.ms": 60000,
    # One produce request in flight per broker. With more, librdkafka (2.0.2, Debian 12's, as
    # seen here) can lose a message: a request refused with NOT_LEADER (a partition whose leader
    # is new, e.g. a topic just created) followed by an accepted later request of the same
    # partition makes it count the refused messages as delivered ("implicitly acked"), and the
    # transaction commits without them.
    "max.in.flight.requests.per.connection": SAFE_IN_FLIGHT,
    # A key's partition as the Java clients pick it (kafka.partition), so that topics with more
    # than one partition co-partition with Kafka Streams and the rest; librdkafka's default
    # (consistent_random, CRC32) puts keys elsewhere.
    "partitioner": "murmur2_random",
    **logs.RECONNECT_BACKOFF,  # a shorter start-up (kafka.logs says why)
}
# Producer settings that would confuse a consumer or an admin client; the rest pass through.
PRODUCER_ONLY = frozenset((set(DEFAULT_PRODUCER) - set(logs.RECONNECT_BACKOFF)) | {
    "compression.type", "batch.size", "retries", "delivery.timeout.ms", "request.timeout.ms"})


def producer_settings(kafka: Dict[str, Any]) -> Dict[str, Any]:
    """The producers' settings: the defaults, overridden by the config's kafka section."""
    return dict(DEFAULT_PRODUCER, **kafka)


def client_settings(kafka: Dict[str, Any]) -> Dict[str, Any]:
    """Every other client's settings: the config's kafka section without the producer's own."""
    return {k: v for k, v in kafka.items() if k not in PRODUCER_ONLY}


def transactional_id(namespace: str, source: str) -> str:
    """``streamer.{namespace}.{source}``; with a dot in the namespace, ``streamer.{namespace}+
    {source}``, since ``a.b``/``c`` and ``a``/``b.c`` would otherwise share one id, fence each
    other and share the lease (no name holds ``+``)."""
    sep = "+" if "." in namespace else "."
    return f"streamer.{namespace}{sep}{source}"


def transactional_ids(namespace: str, source: str) -> List[str]:
    """The ids of a source's two producers: ``transactional_id`` and the same with ``+1`` (a
    character no source or namespace name has, so no other source's id is one of these; a
    prefixed ACL on the first covers both)."""
    first = transactional_id(namespace, source)
    return [first, first + "+1"]


def as_int(value: Any) -> int:
    """A librdkafka integer setting; one that isn't is left for librdkafka to refuse."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def kafka_error(exc: KafkaException) -> KafkaError:
    err = exc.args[0] if exc.args else None
    return err if isinstance(err, KafkaError) else KafkaError(KafkaError._FAIL, str(exc))


# librdkafka's name of a property -> the other name it takes for it (its CONFIGURATION.md's
# "alias"). A refusal names the property by the first, whichever of the two the config used.
ALIASES = {
    "queue.buffering.max.ms": "linger.ms",
    "message.send.max.retries": "retries",
    "request.required.acks": "acks",
    "message.timeout.ms": "delivery.timeout.ms",
    "compression.codec": "compression.type",
    "sasl.mechanisms": "sasl.mechanism",
    "metadata.broker.list": "bootstrap.servers",
    "max.in.flight.requests.per.connection": "max.in.flight",
}
_PROPERTY = re.compile(r'property "([^"]+)"')


def client(make: Callable[[Dict[str, Any]], T], conf: Dict[str, Any]) -> T:
    """A Kafka client made by ``make`` from ``conf``; a setting librdkafka refuses (an unknown
    property, a value out of its range) is a config error naming the section it came from."""
    try:
        return make(conf)
    except KafkaException as exc:
        err = kafka_error(exc)
        if err.code() != KafkaError._INVALID_ARG:
            raise
        said = err.str().strip()
        named = _PROPERTY.search(said)
        alias = ALIASES.get(named.group(1)) if named else None
        if named and alias in conf and named.group(1) not in conf:
            said += f" (the config's kafka.{alias}: librdkafka's own name for it)"
        raise ConfigError(f"a setting of the config's kafka section is refused by librdkafka: "
                          f"{said}. Fix or remove it (librdkafka's CONFIGURATION.md lists the "
                          f"settings and their ranges)") from None
