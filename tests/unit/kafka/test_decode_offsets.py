"""Offsets of a topic whose partition leader is moving: asked again, never taken for empty."""
import time
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from streamer.kafka.topics import _offsets


class Answers:
    """A consumer's metadata and watermark calls, answering from a script (no broker here:
    a moving leader can't be made to happen on cue with a real one)."""

    def __init__(self, topic_errors, watermark_answers):
        self.topic_errors = list(topic_errors)
        self.watermark_answers = list(watermark_answers)
        self.calls = 0

    def list_topics(self, topic, timeout):
        self.calls += 1
        err = self.topic_errors.pop(0) if self.topic_errors else None
        meta = SimpleNamespace(error=None if err is None else KafkaError(err), partitions={0: None})
        return SimpleNamespace(topics={topic: meta})

    def get_watermark_offsets(self, tp, timeout):
        answer = self.watermark_answers.pop(0)
        if isinstance(answer, int):
            raise KafkaException(KafkaError(answer))
        return answer


def test_a_partition_without_a_leader_yet_is_asked_again():
    c = Answers([], [KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART, (0, 7)])
    assert _offsets(c, "ns.__positions", time.monotonic() + 10) == {0: (0, 7)}
    assert c.calls == 3


def test_a_topic_whose_leader_is_moving_is_not_taken_for_a_missing_one():
    c = Answers([KafkaError.LEADER_NOT_AVAILABLE], [(3, 9)])
    assert _offsets(c, "ns.__positions", time.monotonic() + 10) == {0: (3, 9)}


def test_a_missing_topic_is_none():
    c = Answers([KafkaError.UNKNOWN_TOPIC_OR_PART], [])
    assert _offsets(c, "ns.__positions", time.monotonic() + 10) is None


def test_a_leader_that_never_comes_is_an_error_at_the_deadline():
    c = Answers([], [KafkaError.NOT_LEADER_FOR_PARTITION] * 100)
    with pytest.raises(KafkaException) as err:
        _offsets(c, "ns.__positions", time.monotonic() + 0.3)
    assert err.value.args[0].code() == KafkaError.NOT_LEADER_FOR_PARTITION


def test_other_errors_are_not_retried():
    c = Answers([], [KafkaError.TOPIC_AUTHORIZATION_FAILED, (0, 1)])
    with pytest.raises(KafkaException):
        _offsets(c, "ns.__positions", time.monotonic() + 10)
    assert c.calls == 1


def test_a_topic_that_must_exist_but_is_unknown_for_a_moment_is_asked_again():
    # A broker behind in a rolling restart: the checkpoint topic that prepare() made sure of is
    # "unknown" twice. Taken for missing, the stream would start at the binlog's end.
    c = Answers([KafkaError.UNKNOWN_TOPIC_OR_PART] * 2, [(0, 5)])
    assert _offsets(c, "ns.__positions", time.monotonic() + 10, must_exist=True) == {0: (0, 5)}
    assert c.calls == 3


def test_a_topic_that_must_exist_and_stays_unknown_is_an_error_at_the_deadline():
    c = Answers([KafkaError.UNKNOWN_TOPIC_OR_PART] * 1000, [])
    with pytest.raises(KafkaException) as err:
        _offsets(c, "ns.__positions", time.monotonic() + 0.3, must_exist=True)
    assert err.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
