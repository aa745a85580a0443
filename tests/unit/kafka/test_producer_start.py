"""A new producer's init_transactions, while Kafka's transaction coordinator is still getting
ready (a broker just started, loading its transaction log): waited for, not reported as fatal."""
import logging

import pytest
from confluent_kafka import KafkaError, KafkaException

from streamer import config
from streamer.errors import KafkaFatal
from streamer.kafka import transactions
from streamer.kafka.transactions import Transactions


class StartingProducer:
    """init_transactions raises each of ``errors`` in turn, then succeeds; timeouts recorded."""
    made = []

    def __init__(self, conf, errors):
        self.errors = list(errors)
        self.waits = []
        StartingProducer.made.append(self)

    def init_transactions(self, timeout):
        self.waits.append(timeout)
        if self.errors:
            raise KafkaException(self.errors.pop(0))

    def close(self):
        pass


def _start(monkeypatch, errors, reachable=True):
    StartingProducer.made = []
    monkeypatch.setattr(transactions, "Producer", lambda conf: StartingProducer(conf, errors))
    cfg = config.validate(config._merge(config.DEFAULTS, {"mysql": {"server_id": 9},
                                                          "kafka_connect_timeout_s": 3}))
    tx = Transactions(cfg)
    monkeypatch.setattr(tx, "reachable", lambda: reachable)
    tx._start_producer()
    return tx


@pytest.mark.parametrize("code", [KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                                  KafkaError.COORDINATOR_NOT_AVAILABLE,
                                  KafkaError.NOT_COORDINATOR, KafkaError._TIMED_OUT])
def test_a_coordinator_still_getting_ready_is_waited_for(monkeypatch, caplog, code):
    # librdkafka retries these itself; when kafka_connect_timeout_s ends first, it gives the
    # last one (a CI run's fresh broker: "Coordinator load in progress" after 3 s, exit 4).
    caplog.set_level(logging.WARNING)
    tx = _start(monkeypatch, [KafkaError(code, "Broker: Coordinator load in progress",
                                         retriable=True)])
    first = StartingProducer.made[0]
    assert first.waits[0] == 3 and first.waits[1] > 3
    assert tx.producers == StartingProducer.made and len(tx.producers) == 2
    assert "has not accepted the producer in 3 s (Broker: Coordinator load in progress); " \
           "waiting longer" in caplog.text


def test_a_coordinator_not_ready_on_a_kafka_that_cant_be_reached_is_reported(monkeypatch):
    error = KafkaError(KafkaError.COORDINATOR_NOT_AVAILABLE, "not available", retriable=True)
    with pytest.raises(KafkaFatal, match="kafka_connect_timeout_s is 3"):
        _start(monkeypatch, [error], reachable=False)


@pytest.mark.parametrize("error", [
    KafkaError(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "not authorized"),
    KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS, "fatal", fatal=True)])
def test_a_refusal_is_reported_at_once(monkeypatch, error):
    with pytest.raises(KafkaFatal, match="did not accept the transactional producer"):
        _start(monkeypatch, [error, error])
    assert StartingProducer.made[0].waits == [3]
