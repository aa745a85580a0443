"""librdkafka's log lines: the levels they get, and the logger confluent-kafka's clients call."""
import logging

import pytest

from streamer.kafka import logs


@pytest.fixture(autouse=True)
def fresh_collapser(monkeypatch):
    """Each test sees each kind of line first (kafka.logs collapses repeats process-wide)."""
    monkeypatch.setattr(logs, "COLLAPSER", logs.Collapser())


def test_transient_trouble_is_not_an_error_and_chatter_is_debug():
    assert logs.level_of(3, "FAIL", "Connect to ipv4#127.0.0.1:1 failed: Connection refused") == \
        logging.WARNING
    assert logs.level_of(4, "GETPID", "Failed to acquire transactional PID from broker "
                                      "TxnCoordinator/1: Broker: Not coordinator: retrying") == \
        logging.INFO
    assert logs.level_of(6, "BGQUEUE", "Purging 3 ops") == logging.DEBUG
    assert logs.level_of(3, "TXNERR", "Current transaction failed") == logging.ERROR
    assert logs.level_of(4, "CONFWARN", "Configuration property is deprecated") == logging.WARNING
    assert logs.level_of(5, "PARTCNT", "Topic partition count changed") == logging.INFO
    # A leader hint librdkafka drops (a topic just created has none yet), then looks up again.
    assert logs.level_of(4, "METADATAUPDATE", "Partition ns.db.t(m4ZeytbASQeldcBeHCnaCA)[0]: "
                                              "new leader-1 not found in cache") == logging.INFO


def test_confluent_kafka_clients_calls_reach_the_same_mapping(caplog):
    caplog.set_level(logging.DEBUG, logger=logs.NAME)
    # As confluent-kafka calls it: its own mapping of the syslog level, then fac, name, text.
    logs.LOGGER.log(logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#consumer-1",
                    "Connect to ipv4#127.0.0.1:1 failed: Connection refused")
    logs.LOGGER.log(logging.INFO, "%s [%s] %s", "BGQUEUE", "rdkafka#consumer-1", "Purging")
    got = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
    assert got == [(logs.NAME, logging.WARNING, "FAIL: Connect to ipv4#127.0.0.1:1 failed: "
                                                "Connection refused"),
                   (logs.NAME, logging.DEBUG, "BGQUEUE: Purging")]
    assert logs.client_conf({"bootstrap.servers": "x"})["logger"] is logs.LOGGER


def test_every_client_reconnects_after_20_ms_first_unless_the_config_says_otherwise():
    from streamer.kafka import settings
    assert logs.client_conf({"bootstrap.servers": "x"})["reconnect.backoff.ms"] == 20
    assert logs.client_conf({"reconnect.backoff.ms": 100})["reconnect.backoff.ms"] == 100
    # A config made by client_conf may go through it again (the lease's admin client's does).
    twice = logs.client_conf(logs.client_conf({"bootstrap.servers": "x"}))
    assert twice == {"bootstrap.servers": "x", "reconnect.backoff.ms": 20, "logger": logs.LOGGER}
    assert settings.DEFAULT_PRODUCER["reconnect.backoff.ms"] == 20
    # The config's own value reaches the consumers too, not only the producer.
    kafka = {"bootstrap.servers": "x", "reconnect.backoff.ms": 250, "linger.ms": 1}
    assert settings.client_settings(kafka) == {"bootstrap.servers": "x", "reconnect.backoff.ms": 250}


def test_a_line_repeated_within_the_interval_is_logged_once_then_counted_in_one_line():
    now = [100.0]
    c = logs.Collapser(interval_s=30, clock=lambda: now[0])
    refused = "Connect to ipv4#127.0.0.1:9092 failed: Connection refused (after {} ms)"
    assert c.admit(logging.WARNING, "FAIL", refused.format(1)) == [
        (logging.WARNING, "FAIL: " + refused.format(1))]
    for ms in range(2, 60):
        now[0] += 0.3
        assert c.admit(logging.WARNING, "FAIL", refused.format(ms)) == []
    # Another kind of line is never held back by the first.
    assert c.admit(logging.WARNING, "FAIL", "SSL handshake failed") == [
        (logging.WARNING, "FAIL: SSL handshake failed")]
    now[0] = 131.0
    out = c.admit(logging.WARNING, "FAIL", refused.format(99))
    assert out[0] == (logging.WARNING, "FAIL: " + refused.format(59) + " (and 58 more like it "
                                       "in 31 s)")
    assert out[-1] == (logging.WARNING, "FAIL: " + refused.format(99))  # a new interval begins
