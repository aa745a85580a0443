"""The cffi producer's edges that need no broker: config errors, the full-queue signal, the ffi."""
import os
import time

import pytest
from confluent_kafka import KafkaException

from streamer import rdkafka

# Nothing listens here: the producer only tries to connect in the background.
NOWHERE = "127.0.0.1:1"


def test_config_values_are_passed_the_way_librdkafka_spells_them():
    assert rdkafka._conf_value(True) == "true"
    assert rdkafka._conf_value(False) == "false"
    assert rdkafka._conf_value(5) == "5"
    assert rdkafka._conf_value("lz4") == "lz4"


def test_an_unknown_setting_is_refused_with_its_name():
    with pytest.raises(KafkaException, match="lingr.ms"):
        rdkafka.Producer({"bootstrap.servers": NOWHERE, "lingr.ms": 5})


def test_a_bad_value_is_refused_with_the_setting_named():
    with pytest.raises(KafkaException, match="compression.type"):
        rdkafka.Producer({"bootstrap.servers": NOWHERE, "compression.type": "zip"})


def test_a_full_queue_raises_buffer_error():
    p = rdkafka.Producer({"bootstrap.servers": NOWHERE, "queue.buffering.max.messages": 2})
    try:
        p.produce("t", b"v1", b"k")
        p.produce("t", b"v2", None)
        with pytest.raises(BufferError):
            p.produce("t", b"v3", b"k")
    finally:
        p.close()
    p.close()  # a second close is harmless


def test_a_failed_message_does_not_stay_outstanding_and_close_stops_the_drain_thread():
    # A failed message counts as outstanding until its delivery event is destroyed; without the
    # drain thread, this flush would wait its whole 20 s and leave the message counted.
    p = rdkafka.Producer({"bootstrap.servers": NOWHERE, "message.timeout.ms": 200})
    try:
        p.produce("t", b"v", b"k")
        assert p.flush(20) == 0
    finally:
        p.close()
    assert not p._drainer.is_alive()


def test_a_broker_error_on_the_event_queue_is_not_counted_as_a_message():
    # A refused connection puts an error op on the main queue, which rd_kafka_outq_len counts.
    # CI once saw flush() report that op as a message still queued.
    p = rdkafka.Producer({"bootstrap.servers": NOWHERE})
    try:
        p._closing = True
        p._drainer.join()  # keep the ops where librdkafka puts them
        deadline = time.monotonic() + 30
        while p._lib.rd_kafka_queue_length(p._events) == 0:
            assert time.monotonic() < deadline, "no connection error reached the event queue"
            time.sleep(0.02)
        assert len(p) == 0
        p.produce("t", b"v", b"k")
        assert len(p) == 1
    finally:
        p.close()


def test_a_transactional_call_that_times_out_raises_a_retriable_kafka_error():
    p = rdkafka.Producer({"bootstrap.servers": NOWHERE, "transactional.id": "unit-nowhere"})
    try:
        with pytest.raises(KafkaException) as caught:
            p.init_transactions(0.5)
        err = caught.value.args[0]
        assert err.name() == "_TIMED_OUT"
        assert err.retriable() and not err.fatal()
    finally:
        p.close()


def test_the_prebuilt_declarations_are_current_and_used(tmp_path):
    fresh = tmp_path / "ffi.py"
    rdkafka.generate(str(fresh))
    with open(os.path.join(os.path.dirname(rdkafka.__file__), rdkafka.PREBUILT + ".py")) as fh:
        committed = fh.read()
    assert committed == fresh.read_text(), "streamer/_rdkafka_ffi.py is stale: run `make ffi`"
    assert rdkafka.FFI_SOURCE == "prebuilt"


def test_stale_prebuilt_declarations_are_parsed_instead(monkeypatch):
    monkeypatch.setattr(rdkafka, "_CDEF", rdkafka._CDEF + "int rd_kafka_brokers_add(void *, const char *);\n")
    ffi, source = rdkafka._load_ffi()
    assert source == "parsed"
    lib = ffi.dlopen("librdkafka.so.1")
    assert lib.rd_kafka_version() >= rdkafka.MIN_VERSION and hasattr(lib, "rd_kafka_brokers_add")
