"""A commit's end (EndTxn) runs in its own thread while the next batch is read and published on
the other producer (kafka.publisher): its checkpoint is committed only once the end is known,
and a failed end takes the batch opened after it down with it. Stand-in producers record what
is done to them; the thread that ends transactions is the publisher's own."""
import threading

import pytest
from confluent_kafka import KafkaError, KafkaException

from streamer import config
from streamer.errors import BatchAborted, Fenced, ProducerBroken
from streamer.kafka.publisher import Publisher, _Ender
from streamer.position import Position


class StandIn:
    """A producer whose commit_transaction raises the errors of ``fails`` first, in turn, and
    waits for ``gate`` (when given) before it answers; every call is recorded."""

    def __init__(self, name, fails=(), gate=None):
        self.name = name
        self.fails = list(fails)
        self.gate = gate
        self.calls = []

    def begin_transaction(self):
        self.calls.append("begin")

    def produce(self, topic, value, key):
        self.calls.append("produce")

    def flush(self, timeout):
        self.calls.append("flush")
        return 0

    def commit_transaction(self, timeout):
        self.calls.append("commit")
        if self.gate is not None:
            self.gate.wait(10)
        if self.fails:
            raise KafkaException(self.fails.pop(0))

    def abort_transaction(self, timeout):
        self.calls.append("abort")

    def close(self):
        self.calls.append("close")


@pytest.fixture
def make():
    made = []

    def make(first, second):
        cfg = config.validate(config._merge(config.DEFAULTS, {"mysql": {"server_id": 9},
                                                              "commit_retries": 2}))
        pub = Publisher(cfg)
        pub.prepared = True
        pub.producers = [first, second]
        pub.producer = first
        pub._ender = _Ender()
        pub.committed = Position("f", 4)
        made.append(pub)
        return pub

    yield make
    for pub in made:
        pub._drop_ending()
        pub._ender.close()


def _batch(pub, pos):
    pub.begin()
    pub.produce("ns.db.t", b"row", b"k")
    pub.commit(Position("f", pos))


ABORTABLE = KafkaError(KafkaError._STATE, "must abort", txn_requires_abort=True)
UNKNOWN = KafkaError(KafkaError._TIMED_OUT, "timed out", retriable=True)


def test_the_checkpoint_is_committed_once_its_end_is_known(make):
    gate = threading.Event()
    first, second = StandIn("a", gate=gate), StandIn("b")
    pub = make(first, second)
    _batch(pub, 100)
    assert pub.committed.pos == 4 and pub.producer is second  # the end is under way
    pub.settle(wait=False)
    assert pub.committed.pos == 4  # still under way: not waited for
    gate.set()
    pub.settle()
    assert pub.committed.pos == 100 and pub.last_commit_s > 0
    assert first.calls[-2:] == ["flush", "commit"]  # delivered before it was ended


def test_the_next_batch_ends_only_after_the_last_one_did(make):
    first, second = StandIn("a"), StandIn("b")
    pub = make(first, second)
    _batch(pub, 100)
    _batch(pub, 200)  # settles the first end before the second goes to the thread
    assert pub.committed.pos == 100
    pub.settle()
    assert pub.committed.pos == 200
    assert first.calls.count("commit") == 1 and second.calls.count("commit") == 1


def test_a_failed_end_aborts_the_batch_opened_after_it(make):
    first, second = StandIn("a", fails=[ABORTABLE]), StandIn("b")
    pub = make(first, second)
    _batch(pub, 100)
    pub.begin()
    pub.produce("ns.db.t", b"after", b"k")
    with pytest.raises(BatchAborted, match="must abort"):
        pub.commit(Position("f", 200))
    assert "abort" in first.calls
    assert "commit" not in second.calls and second.calls[-1] == "abort"
    assert pub.committed.pos == 4 and not pub.in_tx  # re-read from before both batches


def test_an_end_with_an_unknown_outcome_replaces_the_producers(make):
    first, second = StandIn("a", fails=[UNKNOWN] * 5), StandIn("b")
    pub = make(first, second)
    _batch(pub, 100)
    pub.begin()
    with pytest.raises(ProducerBroken, match="outcome is unknown"):
        pub.commit(Position("f", 200))
    # Resumed twice (commit_retries) on the main thread; no abort, which a pending commit
    # refuses: the new producers' init_transactions settles both (reset).
    assert first.calls.count("commit") == 3 and "abort" not in first.calls
    assert "commit" not in second.calls and "abort" not in second.calls
    assert pub.committed.pos == 4 and not pub.in_tx


def test_an_end_that_a_retry_completes_lets_the_next_batch_commit(make):
    first, second = StandIn("a", fails=[UNKNOWN]), StandIn("b")
    pub = make(first, second)
    _batch(pub, 100)
    _batch(pub, 200)
    assert first.calls.count("commit") == 2 and pub.committed.pos == 100
    pub.settle()
    assert pub.committed.pos == 200


def test_a_fenced_end_says_so(make):
    fenced = KafkaError(KafkaError._FENCED, "producer fenced", fatal=True)
    first, second = StandIn("a", fails=[fenced]), StandIn("b")
    pub = make(first, second)
    _batch(pub, 100)
    with pytest.raises(Fenced, match="fenced"):
        pub.settle()
    assert pub.committed.pos == 4


def test_an_abort_waits_for_the_last_end_first(make):
    """The loop resumes from ``committed`` after an abort: the end under way counts."""
    first, second = StandIn("a"), StandIn("b")
    pub = make(first, second)
    _batch(pub, 100)
    pub.begin()
    pub.produce("ns.db.t", b"dropped", b"k")
    pub.abort()
    assert pub.committed.pos == 100 and second.calls[-1] == "abort"


def test_an_abort_after_a_failed_end_resumes_from_before_it(make):
    first, second = StandIn("a", fails=[ABORTABLE]), StandIn("b")
    pub = make(first, second)
    _batch(pub, 100)
    pub.begin()
    pub.abort()  # quiet: the caller is recovering already
    assert pub.committed.pos == 4 and "abort" in first.calls and second.calls[-1] == "abort"
