"""A commit whose outcome is unknown: no abort that spins, a new producer, and the checkpoint read
back from the topic rather than taken from memory (the publisher, with a producer that fails)."""
import pytest
from confluent_kafka import KafkaError, KafkaException

from streamer import config
from streamer.errors import BatchAborted, ProducerBroken
from streamer.kafka.publisher import Publisher
from streamer.position import Position


class FailingProducer:
    """commit_transaction raises ``error`` every time; every call is recorded."""

    def __init__(self, error):
        self.error = error
        self.calls = []

    def produce(self, topic, value, key, headers=None):
        self.calls.append("produce")

    def begin_transaction(self):
        self.calls.append("begin")

    def commit_transaction(self, timeout):
        self.calls.append("commit")
        raise KafkaException(self.error)

    def abort_transaction(self, timeout):
        self.calls.append("abort")

    def flush(self, timeout):
        self.calls.append("flush")
        return 0

    def close(self):
        self.calls.append("close")


def _publisher(producer):
    cfg = config.validate(config._merge(config.DEFAULTS, {"mysql": {"server_id": 9},
                                                          "commit_retries": 2}))
    pub = Publisher(cfg)
    pub.producer = producer
    pub.producers = [producer]
    pub.in_tx = True
    pub.committed = Position("f", 4)
    return pub


def test_a_commit_that_keeps_timing_out_is_not_aborted_but_replaced():
    producer = FailingProducer(KafkaError(KafkaError._TIMED_OUT, "timed out", retriable=True))
    pub = _publisher(producer)
    remembered = pub.committed
    with pytest.raises(ProducerBroken, match="outcome is unknown"):
        pub.commit(Position("f", 100))
    assert producer.calls.count("commit") == 3 and "abort" not in producer.calls
    assert pub.committed is remembered and not pub.in_tx


def test_a_commit_the_broker_says_must_be_aborted_is_aborted_and_re_read():
    producer = FailingProducer(KafkaError(KafkaError._STATE, "abortable",
                                          txn_requires_abort=True))
    pub = _publisher(producer)
    with pytest.raises(BatchAborted):
        pub.commit(Position("f", 100))
    assert producer.calls.count("commit") == 1 and producer.calls[-1] == "abort"


def test_after_a_reset_the_checkpoint_is_read_back_from_the_topic(monkeypatch):
    pub = _publisher(FailingProducer(None))
    remembered = pub.committed
    started = []
    monkeypatch.setattr(Publisher, "_start_producer", lambda self: started.append(True))
    monkeypatch.setattr(pub.topics, "learn", lambda topics: None)
    # The old producer's last commit completed when the new one settled it: the topic is ahead.
    on_topic = Position("f", 100, run=pub.run)
    monkeypatch.setattr(Publisher, "_read_checkpoint", lambda self: remembered)

    def read_checkpoint(self):
        self.committed = on_topic
        return on_topic
    monkeypatch.setattr(Publisher, "read_checkpoint", read_checkpoint)
    pub.reset()
    assert started and pub.committed is on_topic and pub.committed != remembered


def test_a_reset_while_kafka_is_away_waits_for_it_and_a_stop_ends_the_wait(monkeypatch):
    from streamer.errors import KafkaFatal
    from streamer.kafka import transactions as publisher_mod
    pub = _publisher(FailingProducer(None))
    attempts, slept = [], []
    away = 3

    def start(self):
        attempts.append(True)
        if len(attempts) <= away:
            raise KafkaFatal("Kafka at b:9092 did not accept the transactional producer")
    monkeypatch.setattr(Publisher, "_start_producer", start)
    monkeypatch.setattr(pub.topics, "learn", lambda topics: None)
    monkeypatch.setattr(Publisher, "read_checkpoint", lambda self: self.committed)
    monkeypatch.setattr(Publisher, "_read_checkpoint", lambda self: self.committed)
    monkeypatch.setattr(publisher_mod.time, "sleep", lambda s: slept.append(s))
    clock = iter(range(0, 10 ** 6, 1))
    monkeypatch.setattr(publisher_mod.time, "monotonic", lambda: next(clock) / 4)
    pub.reset()
    assert len(attempts) == away + 1 and slept  # waited (sleeping, not spinning), then went on
    attempts.clear()
    pub.stopping = True
    with pytest.raises(KafkaFatal):
        pub.reset()
    assert len(attempts) == 1  # stopping: no wait


def test_a_reset_after_another_instance_committed_stops_as_fenced_instead_of_fencing_it(
        monkeypatch):
    from streamer.errors import Fenced
    pub = _publisher(FailingProducer(None))
    pub.committed = Position("f", 100, run=pub.run)
    started = []
    monkeypatch.setattr(Publisher, "_start_producer", lambda self: started.append(True))
    monkeypatch.setattr(pub.topics, "learn", lambda topics: None)
    newer = Position("f", 900, run="another-process")
    monkeypatch.setattr(Publisher, "_read_checkpoint", lambda self: newer)
    with pytest.raises(Fenced, match="another instance of source .* committed the checkpoint"):
        pub.reset()
    assert not started  # its producers were never replaced, so the newer instance runs on
    # Its own commit, whose outcome was unknown, read back: no other instance, a plain reset.
    mine = Position("f", 900, run=pub.run)
    monkeypatch.setattr(Publisher, "_read_checkpoint", lambda self: mine)
    pub.reset()
    assert started and pub.committed == mine


class TooLarge(FailingProducer):
    def produce(self, topic, value, key, headers=None):
        self.calls.append("produce")
        raise KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "Broker: Message size too large"))


def test_a_message_over_the_size_limit_stops_once_naming_the_topic_key_size_and_fixes():
    from streamer.errors import OversizedRow

    producer = TooLarge(None)
    pub = _publisher(producer)
    with pytest.raises(OversizedRow) as err:
        pub.produce("ns.db.t", b"x" * 20000000, b"\xc3\x01key")
    text = str(err.value)
    assert "topic ns.db.t is 20000005 bytes, over the 16777216 bytes" in text
    assert "c3016b6579" in text and "tables.columns.exclude" in text
    # The batch is aborted: its position was never committed, so a restart reads the row again.
    assert producer.calls == ["produce", "abort"] and not pub.in_tx
    assert err.value.exit_code == 3


class Refused(FailingProducer):
    """Kafka refused one of the transaction's messages: the commit fails and needs an abort, and
    the drain thread has noted the message (rdkafka.Producer.too_large, or .refused for a
    refusal of another kind)."""

    def __init__(self, size, err=KafkaError.MSG_SIZE_TOO_LARGE, key=b"\x02\x04",
                 reason="Broker: Message size too large"):
        super().__init__(KafkaError(err, reason, txn_requires_abort=True))
        self.too_large = self.refused = None
        self.size, self.err, self.key, self.reason = size, err, key, reason

    def commit_transaction(self, timeout):
        from streamer.kafka.rdkafka import Refused as Noted
        noted = Noted("ns.db.t", self.size, self.key, len(self.key or b""), 2, self.err,
                      self.reason)
        if self.err == KafkaError.MSG_SIZE_TOO_LARGE:
            self.too_large = noted
        else:
            self.refused = noted
        super().commit_transaction(timeout)


def _topic_config(monkeypatch, conf):
    monkeypatch.setattr(Publisher, "topic_config", lambda self, topic: conf)


@pytest.mark.parametrize("limit", [50000, None])
def test_a_message_the_topic_refuses_as_too_large_stops_naming_it_not_a_retry_loop(
        monkeypatch, limit):
    from streamer.errors import OversizedRow

    producer = Refused(200073)
    pub = _publisher(producer)
    before = pub.committed
    _topic_config(monkeypatch, {"max.message.bytes": "50000"} if limit else {})
    with pytest.raises(OversizedRow) as err:
        pub.commit(Position("f", 100))
    text = str(err.value)
    takes = "50000" if limit else "fewer"
    assert (f"Kafka refused 2 message(s) as too large (MESSAGE_TOO_LARGE); the largest, 200073 "
            f"bytes, is a row change of topic ns.db.t, which takes {takes} bytes") in text
    assert "its key, Avro-encoded: 0204." in text and "--entity-name ns.db.t" in text
    assert "kafka.batch.size" not in text
    # Aborted, never committed: the checkpoint stays before the row.
    assert producer.calls[-1] == "abort" and pub.committed is before
    assert err.value.exit_code == 3 and producer.too_large is None


def test_a_batch_over_the_topics_limit_of_messages_under_it_names_the_batch_size(monkeypatch):
    from streamer.errors import OversizedRow

    pub = _publisher(Refused(30000))
    _topic_config(monkeypatch, {"max.message.bytes": "50000"})
    with pytest.raises(OversizedRow, match="the message is under it, the batch it went in was "
                                           "not: set kafka.batch.size below 50000"):
        pub.commit(Position("f", 100))


def test_a_keyless_message_a_compacted_topic_refuses_stops_naming_the_policy_and_the_fix(
        monkeypatch):
    from streamer.errors import RefusedRow

    producer = Refused(300, KafkaError.INVALID_RECORD, None, "Broker: Broker failed to validate "
                                                             "record")
    pub = _publisher(producer)
    before = pub.committed
    _topic_config(monkeypatch, {"cleanup.policy": "compact", "max.message.bytes": "1048588"})
    with pytest.raises(RefusedRow) as err:
        pub.commit(Position("f", 100))
    text = str(err.value)
    assert text.startswith("Kafka refused 2 message(s) of topic ns.db.t as invalid "
                           "(INVALID_RECORD: Broker: Broker failed to validate record): the "
                           "topic is compacted (cleanup.policy compact)")
    assert "a TRUNCATE, or a row of a table without a primary key" in text
    assert "--entity-name ns.db.t --add-config cleanup.policy=delete" in text
    assert producer.calls[-1] == "abort" and pub.committed is before
    assert err.value.exit_code == 3 and producer.refused is None


def test_an_invalid_message_of_another_cause_stops_naming_its_key_and_the_topic_s_settings(
        monkeypatch):
    from streamer.errors import RefusedRow

    pub = _publisher(Refused(300, KafkaError.INVALID_RECORD, b"\x02\x06", "Broker: Broker "
                                                                      "failed to validate record"))
    _topic_config(monkeypatch, {"cleanup.policy": "delete"})
    with pytest.raises(RefusedRow, match=r"the topic's settings refuse it \(the broker's log "
                                         r"names the check that failed\); its key, Avro-encoded: "
                                         r"0206\. "):
        pub.commit(Position("f", 100))


def test_another_refusal_is_named_in_the_retry_s_message_and_read_again(monkeypatch):
    # Messages that timed out (a broker away): the batch is read again, and the retry's warning
    # names the topic and the reason.
    producer = Refused(300, KafkaError._MSG_TIMED_OUT, reason="Local: Message timed out")
    pub = _publisher(producer)
    with pytest.raises(BatchAborted) as err:
        pub.commit(Position("f", 100))
    assert ("commit failed (Local: Message timed out); 2 message(s) failed, the first of topic "
            "ns.db.t: Local: Message timed out (_MSG_TIMED_OUT); the batch was aborted") in \
        str(err.value)
    assert producer.refused is None and producer.calls[-1] == "abort"


@pytest.mark.parametrize("exists", [False, True, None])
def test_messages_timed_out_on_a_topic_that_is_gone_have_it_made_again(monkeypatch, exists):
    # librdkafka may send to a deleted topic's partition until its messages time out, rather
    # than call the topic unknown: the batch timed out again and again, the topic never made
    # again (seen with kafka.message.timeout.ms 5 s: 90 s, and on). Only a topic a broker says
    # is gone is made again: a broker away times messages out too.
    producer = Refused(300, KafkaError._MSG_TIMED_OUT, reason="Local: Message timed out")
    pub = _publisher(producer)
    pub.topics.known = {"ns.db.t", "ns.other"}
    asked = []
    monkeypatch.setattr(Publisher, "topic_exists", lambda self, t: asked.append(t) or exists)
    with pytest.raises(BatchAborted) as err:
        pub.commit(Position("f", 100))
    gone = "; topic ns.db.t no longer exists (deleted while the streamer ran?): it is made " \
           "again before the batch is read again"
    assert asked == ["ns.db.t"]
    assert (gone in str(err.value)) is (exists is False)
    assert pub.topics.known == ({"ns.other"} if exists is False else {"ns.db.t", "ns.other"})


class FailedBefore(FailingProducer):
    """Its transaction failed when the broker refused to add a topic's partition to it (an
    ACL): librdkafka logged why (``txn_failure``), and a produce after it is refused with
    _STATE; no delivery report names it."""

    def __init__(self, failure):
        super().__init__(KafkaError(KafkaError._STATE, "Local: Erroneous state"))
        self.txn_failure = failure
        self.partition_failure = ('Failed to add partition "ns.db.t" [0] to transaction: '
                                  'Broker: Topic authorization failed')
        self.refused = self.too_large = None

    def produce(self, topic, value, key, headers=None):
        self.calls.append("produce")
        raise KafkaException(self.error)


def test_a_call_refused_after_the_transaction_failed_names_why_it_failed():
    failure = ("Current transaction failed in state InTransaction: Failed to add partition(s) "
               "to transaction on broker 1: Broker: Topic authorization failed (after 2 ms) "
               "(TOPIC_AUTHORIZATION_FAILED)")
    producer = FailedBefore(failure)
    pub = _publisher(producer)
    with pytest.raises(BatchAborted) as err:
        pub.produce("ns.db.t", b"v", b"k")
    assert str(err.value) == (
        f"produce to ns.db.t failed (Local: Erroneous state: the transaction had failed: "
        f"{failure}; Failed to add partition \"ns.db.t\" [0] to transaction: Broker: Topic "
        f"authorization failed; grant the streamer's principal WRITE on the topic: it goes on "
        f"by itself once granted); the batch was aborted")
    assert producer.calls == ["produce", "abort"]


def test_a_transaction_begins_forgetting_the_failures_the_last_one_noted():
    from streamer.kafka.rdkafka import Producer

    class Noted(FailingProducer):
        forget_failures = Producer.forget_failures

    producer = Noted(None)
    producer.too_large = producer.refused = object()
    producer.txn_failure, producer.partition_failure = "failed", "a partition"
    pub = _publisher(producer)
    pub.in_tx = False
    pub.prepared = True  # (its topics made)
    pub._begin()
    assert producer.calls == ["begin"] and pub.in_tx
    assert (producer.too_large, producer.refused, producer.txn_failure,
            producer.partition_failure) == (None, None, None, None)


def test_a_failed_commit_with_nothing_refused_is_read_again():
    # The same abortable error, with no refused message noted: the batch is read again.
    pub = _publisher(FailingProducer(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "Broker: Message "
                                                "size too large", txn_requires_abort=True)))
    with pytest.raises(BatchAborted):
        pub.commit(Position("f", 100))


class FullFor(FailingProducer):
    """Its queue is full for the first ``full`` tries of each message; ``poll`` drains it."""

    def __init__(self, full):
        super().__init__(None)
        self.full, self.left = full, full

    def produce(self, topic, value, key, headers=None):
        if self.left:
            self.left -= 1
            raise BufferError("Local: Queue full")
        self.left = self.full
        self.calls.append(("produce", value))

    def poll(self, timeout):
        self.calls.append("poll")


def test_a_full_producer_queue_waits_says_why_with_its_limits_and_loses_nothing(caplog):
    producer = FullFor(2)
    pub = _publisher(producer)
    with caplog.at_level("WARNING", logger="streamer.kafka.transactions"):
        pub.produce("ns.db.t", b"one", b"k1")
        pub.produce("ns.db.t", b"two", b"k2")
    assert [c for c in producer.calls if c != "poll"] == [("produce", b"one"), ("produce", b"two")]
    assert producer.calls.count("poll") == 4  # it waited for room, for each, by polling
    lines = [r.getMessage() for r in caplog.records if "producer queue full" in r.getMessage()]
    # Once, not once a message; naming the limits and both causes (backpressure, Kafka down).
    assert len(lines) == 1
    assert "queue.buffering.max.messages 200000" in lines[0]
    assert "queue.buffering.max.kbytes 262144" in lines[0]
    assert "snapshot chunk larger than the queue" in lines[0]
    assert "if it lasts, Kafka is slow or down" in lines[0]


def test_the_admin_client_is_let_go_at_exit_and_when_the_producers_are_refused(monkeypatch):
    # A live AdminClient at the interpreter's teardown can crash the exit (kafka.logs): the
    # publisher lets go of it, and the command's end collects it.
    import weakref

    cfg = config.validate(config._merge(config.DEFAULTS, {"mysql": {"server_id": 9},
                                                          "kafka": {"bootstrap.servers": "127.0.0.1:1"}}))
    held = []

    def refused(self):
        held.append(weakref.ref(self.admin))
        raise BatchAborted("refused")

    monkeypatch.setattr(Publisher, "_start_producer", refused)
    pub = Publisher(cfg)
    with pytest.raises(BatchAborted):
        pub.__enter__()
    assert pub.admin is None
    monkeypatch.setattr(Publisher, "_start_producer", lambda self: held.append(weakref.ref(self.admin)))
    with Publisher(cfg) as pub:
        assert pub.admin is not None
    assert pub.admin is None
    from streamer.kafka import logs
    logs.free_dropped_clients()
    assert [ref() for ref in held] == [None, None]


def test_a_healthy_batch_dropped_by_choice_is_delivered_before_its_abort():
    # Aborting with messages queued purges them after they took sequence numbers; the next
    # transaction then fails on the gap. A drained abort has nothing left to purge.
    producer = FailingProducer(None)
    pub = _publisher(producer)
    pub.abort(drain=True)
    assert producer.calls == ["flush", "abort"] and not pub.in_tx
    pub.in_tx = True
    pub.abort()  # a failed batch's: nothing waits for messages that may never be delivered
    assert producer.calls == ["flush", "abort", "abort"]


@pytest.mark.parametrize("own", [False, True])
def test_a_topic_deleted_under_the_streamer_is_made_again_before_the_batch_is_read_again(own):
    # librdkafka refuses every message to a topic it learnt is gone (_UNKNOWN_TOPIC): the batch
    # is aborted and read again (not an exit), and the topic made sure of again first; the
    # checkpoint topic by the next transaction's prepare.
    class Gone(FailingProducer):
        def produce(self, topic, value, key, headers=None):
            self.calls.append("produce")
            raise KafkaException(KafkaError(KafkaError._UNKNOWN_TOPIC, "Local: Unknown topic"))

    producer = Gone(None)
    pub = _publisher(producer)
    topic = pub.positions_topic if own else "ns.db.t"
    pub.topics.known = {topic, "ns.other"}
    pub.prepared = True
    with pytest.raises(BatchAborted) as err:
        pub.produce(topic, b"v", b"k")
    assert str(err.value) == (f"topic {topic} is gone (deleted while the streamer ran?): the "
                              f"batch was aborted, and the topic is made again before it is "
                              f"read again")
    assert pub.topics.known == {"ns.other"} and producer.calls == ["produce", "abort"]
    assert pub.prepared is not own


def test_a_message_refused_as_its_topic_is_unknown_has_the_topic_made_again():
    producer = Refused(300, KafkaError.UNKNOWN_TOPIC_OR_PART,
                       reason="Broker: Unknown topic or partition")
    pub = _publisher(producer)
    pub.topics.known = {"ns.db.t", "ns.other"}
    with pytest.raises(BatchAborted, match="the first of topic ns.db.t: Broker: Unknown topic or "
                                           "partition .UNKNOWN_TOPIC_OR_PART.; the batch was "
                                           "aborted"):
        pub.commit(Position("f", 100))
    assert pub.topics.known == {"ns.other"}
