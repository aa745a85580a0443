"""The publisher's two transactional producers take turns (kafka.publisher's docstring says why),
on librdkafka's in-process mock cluster: no broker needed."""
import pytest

from streamer import config
from streamer.kafka.publisher import Publisher
from streamer.kafka.settings import transactional_id, transactional_ids
from streamer.position import Position


def _cfg():
    return config.load(None, environ={"STREAMER__MYSQL__SERVER_ID": "9",
                                      "STREAMER_MYSQL_PASSWORD": "unused",
                                      "STREAMER__NAMESPACE": "ns",
                                      "STREAMER__SOURCE__NAME": "db1"})


@pytest.fixture
def pub():
    p = Publisher.in_process(_cfg())
    try:
        yield p
    finally:
        p.close()


def test_each_commit_hands_the_next_transaction_to_the_other_producer(pub):
    first, second = pub.producers
    assert first is not second and pub.producer is first
    seen = []
    for i in range(5):
        pub.begin()
        seen.append(pub.producer)
        pub.produce("ns.db.t", b"row %d" % i, b"k")
        pub.commit(Position("mysql-bin.000001", 100 + i))
    assert seen == [first, second, first, second, first]
    assert pub.committed.pos == 104 and not pub.in_tx


def test_an_aborted_transaction_leaves_the_turn_where_it_was(pub):
    pub.begin()
    pub.produce("ns.db.t", b"row", b"k")
    pub.commit(Position("mysql-bin.000001", 100))
    turn = pub.producer
    pub.begin()
    pub.produce("ns.db.t", b"lost", b"k")
    pub.producer.flush(10)
    pub.abort()
    assert pub.producer is turn and not pub.in_tx
    pub.begin()  # and that producer can begin again
    assert pub.producer is turn
    pub.commit(Position("mysql-bin.000001", 200))
    assert pub.producer is not turn


def test_the_queue_depth_counts_both_producers(pub):
    pub.begin()
    pub.produce("ns.db.t", b"row", b"k")
    pub.commit(Position("mysql-bin.000001", 100))
    assert pub.queue_depth() == 0
    pub.begin()
    pub.produce("ns.db.t", b"row", b"k")
    assert pub.queue_depth() >= 1
    pub.commit(Position("mysql-bin.000001", 200))
    assert pub.queue_depth() == 0


def test_the_second_id_can_be_no_other_sources():
    ids = transactional_ids("ns", "db1")
    assert ids[0] == transactional_id("ns", "db1") and ids[1] != ids[0]
    assert ids[1].startswith(ids[0])  # one prefixed ACL covers both
    # "+" is in no valid source name, so no source's first id is another's second.
    with pytest.raises(config.ConfigError, match="source.name"):
        config.load(None, environ={"STREAMER__MYSQL__SERVER_ID": "9",
                                   "STREAMER_MYSQL_PASSWORD": "unused",
                                   "STREAMER__SOURCE__NAME": "db1+1"})
