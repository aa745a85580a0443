"""The cffi producer against a real Kafka: what a read_committed consumer sees, fencing, and
how fast a transactional producer starts."""
import logging

import pytest
from confluent_kafka import KafkaException

from streamer.kafka import logs
from streamer.kafka.rdkafka import Producer
from tests import support

# Kafka alone: no server of the matrix.
pytestmark = pytest.mark.private_servers


def _producer(txid: str) -> Producer:
    p = Producer({"bootstrap.servers": support.KAFKA, "transactional.id": txid,
                  "enable.idempotence": True, "acks": "all", "linger.ms": 5})
    p.init_transactions(30)
    return p


def test_committed_messages_arrive_with_keys_and_aborted_ones_never():
    topic = support.unique("rdk")
    p = _producer(support.unique("rdk-tx"))
    try:
        p.list_topics(topic, 10)  # auto-created by the broker; fetched ahead like the publisher does
        p.begin_transaction()
        p.produce(topic, b"kept-1", b"a")
        p.produce(topic, b"kept-2", None)
        p.commit_transaction(30)
        p.begin_transaction()
        p.produce(topic, b"dropped", b"a")
        # Sent before the abort: an abort while the partition is still being added to the
        # transaction can fail with a fatal INVALID_TXN_STATE (seen once in CI; the publisher
        # replaces its producer then). Here the abort itself is what is tested.
        assert p.flush(30) == 0
        p.abort_transaction(30)
        p.begin_transaction()
        p.produce(topic, b"kept-3", b"b")
        p.commit_transaction(30)
        assert p.flush(10) == 0
    finally:
        p.close()
    got = support.consume([topic], expect=3, idle=2.0)
    assert [(m["raw_key"], m["raw_value"]) for m in got] == [
        (b"a", b"kept-1"), (None, b"kept-2"), (b"b", b"kept-3")]


def test_headers_reach_a_consumer_with_the_message_on_any_partition():
    # produce() with headers goes through rd_kafka_produceva; a keyed, a keyless, an empty and a
    # tombstone message, and one to an explicit partition (a TRUNCATE's way), each with its own.
    topic = support.unique("rdk-h")
    p = _producer(support.unique("rdk-h-tx"))
    sent = [(b"v1", b"k", (("op", b"c"), ("db", b"shop"), ("table", b"t\xc3\xa9"))),
            (b"", None, (("op", b"u"), ("empty", b""))),
            (None, b"k", (("op", b"d"),)),
            (b"plain", b"k", None)]
    try:
        p.list_topics(topic, 10)
        p.begin_transaction()
        for value, key, headers in sent:
            p.produce(topic, value, key, headers)
        p.produce_to(topic, 0, b"truncate", None, (("op", b"t"),))
        p.commit_transaction(30)
        assert p.flush(10) == 0
    finally:
        p.close()
    got = support.consume([topic], expect=5, idle=2.0)
    want = [(k, v, list(h) if h else None) for v, k, h in sent] + \
        [(None, b"truncate", [("op", b"t")])]
    assert [(m["raw_key"], m["raw_value"], m["headers"]) for m in got] == want


def test_a_fenced_producer_gets_a_fatal_error_naming_the_fence():
    txid = support.unique("rdk-fence")
    topic = support.unique("rdk")
    old = _producer(txid)
    try:
        old.list_topics(topic, 10)
        old.begin_transaction()
        old.produce(topic, b"zombie", b"z")
        new = _producer(txid)  # fences the old one and aborts its open transaction
        try:
            with pytest.raises(KafkaException) as caught:
                old.produce(topic, b"zombie-2", b"z")
                old.commit_transaction(30)
            err = caught.value.args[0]
            assert err.fatal()
            assert "fenc" in (err.name() + err.str()).lower()
        finally:
            new.close()
    finally:
        old.close()
    assert support.consume([topic], idle=2.0) == []


def test_no_init_transactions_waits_for_the_coordinator_query_timer(caplog, monkeypatch):
    # librdkafka 2.16 retires the bootstrap broker once the cluster's metadata names the real
    # one; a coordinator search begun on it in between found no broker and waited for the 500 ms
    # coordinator query timer (11 of 72 inits here). init_transactions asks for the
    # brokers first. librdkafka's own debug lines say whether the timer had to fire.
    monkeypatch.setattr(logs, "COLLAPSER", logs.Collapser())  # every line of a kind, logged
    caplog.set_level(logging.DEBUG, logger=logs.NAME)
    for _ in range(12):
        p = Producer({"bootstrap.servers": support.KAFKA, "debug": "eos",
                      "transactional.id": support.unique("rdk-init"),
                      "enable.idempotence": True, "acks": "all"})
        try:
            p.init_transactions(30)
        finally:
            p.close()
    lines = [r.getMessage() for r in caplog.records if r.name == logs.NAME]
    assert any("Transaction state change" in line for line in lines), lines[-20:]
    assert not [line for line in lines if "Coordinator query timer" in line]
