"""Reading one of the namespace's topics to its end (the checkpoint, the schema lineage, the
audit's read of a table's topic): a read that fails or never ends is one line naming the topic
and what to check, a Kafka error (exit 4), not a RuntimeError traceback."""
import time

import pytest
from confluent_kafka import KafkaError

from streamer.errors import EXIT_KAFKA, KafkaFatal
from streamer.kafka.topics import TopicReader, _drain


class Message:
    def __init__(self, error):
        self._error = error

    def error(self):
        return self._error

    def partition(self):
        return 0


class Consumer:
    """A consumer whose every poll gives ``answer`` (None: nothing came)."""

    def __init__(self, answer=None):
        self.answer = answer

    def poll(self, timeout):
        time.sleep(min(timeout, 0.01))
        return self.answer

    def position(self, partitions):
        return [type("TP", (), {"partition": p.partition, "offset": 0})() for p in partitions]

    def assign(self, partitions):
        pass

    def close(self):
        pass


def test_a_read_that_fails_names_the_topic_and_what_to_check():
    failed = Message(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "not authorized"))
    with pytest.raises(KafkaFatal, match=r"reading ns.__positions failed: not authorized "
                                         r"\(TOPIC_AUTHORIZATION_FAILED\); check .*may read") as e:
        _drain(Consumer(failed), "ns.__positions", {0}, time.monotonic() + 5, False, None, 5)
    assert e.value.exit_code == EXIT_KAFKA


def test_a_read_that_never_reaches_the_end_names_the_topic_and_the_wait():
    with pytest.raises(KafkaFatal, match=r"reading ns.__schemas to its end took over 1 s: "
                                         r"check .*kafka-topics.sh --describe --topic ns.__schemas"):
        _drain(Consumer(None), "ns.__schemas", {0}, time.monotonic() + 0.2, False, None, 1)


def test_the_audit_s_read_of_a_table_topic_fails_and_times_out_the_same_way(monkeypatch):
    import confluent_kafka

    failed = Message(KafkaError(KafkaError._TRANSPORT, "broker down"))
    for answer, said in ((failed, r"reading ns.db.t failed: broker down \(_TRANSPORT\)"),
                         (None, r"reading ns.db.t to its end took over 0 s")):
        monkeypatch.setattr(confluent_kafka, "Consumer", lambda conf, a=answer: Consumer(a))
        reader = TopicReader({"bootstrap.servers": "127.0.0.1:1"}, "ns.db.t")
        with pytest.raises(KafkaFatal, match=said):
            list(reader.read({0: 10}, timeout=0.2))
