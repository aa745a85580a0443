"""Topics made sure of ahead (``TopicAdmin.soon``): created in a thread, waited for by ``ensure``,
and a creation that failed raised there, as one made in the loop would be."""
import threading
from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from streamer.errors import KafkaFatal, TopicClash
from streamer.kafka.admin import TopicAdmin, create_topics


class Admin:
    """An admin client whose creations end when ``release`` is set (or fail with ``fail``)."""

    def __init__(self):
        self.release = threading.Event()
        self.asked = []  # (topics, their configs) of each create_topics
        self.fail = None

    def create_topics(self, new_topics, operation_timeout):
        self.asked.append(([t.topic for t in new_topics], [t.config for t in new_topics]))
        futures = {}
        for t in new_topics:
            futures[t.topic] = f = Future()
            fail = self.fail

            def end(f=f, fail=fail):
                self.release.wait(10)
                if fail is None:
                    f.set_result(None)
                else:
                    f.set_exception(KafkaException(KafkaError(fail)))
            threading.Thread(target=end, daemon=True).start()
        return futures


class Producer:
    def __init__(self):
        self.looked_up = []

    def list_topics(self, topic, timeout):
        self.looked_up.append(topic)


def _admin():
    admin, producer = Admin(), Producer()
    topics = TopicAdmin(SimpleNamespace(partitions=3, replication_factor=1), admin,
                        lambda: [producer])
    return topics, admin, producer


def test_a_topic_asked_soon_is_created_in_a_thread_and_waited_for_once_needed():
    topics, admin, producer = _admin()
    topics.soon("ns.db.t", config={"cleanup.policy": "compact"})
    # The loop goes on while the broker answers: soon() didn't wait for it.
    assert "ns.db.t" in topics.creating and "ns.db.t" not in topics.known
    topics.soon("ns.db.t")  # asked again: one creation
    ensured = threading.Thread(target=topics.ensure, args=(["ns.db.t"],))
    ensured.start()
    ensured.join(0.2)
    assert ensured.is_alive()  # ensure waits for the creation...
    admin.release.set()
    ensured.join(10)
    assert not ensured.is_alive() and "ns.db.t" in topics.known  # ...and it is made
    assert [a[0] for a in admin.asked] == [["ns.db.t"]]
    assert admin.asked[0][1][0]["cleanup.policy"] == "compact"
    assert producer.looked_up == ["ns.db.t"]  # its metadata fetched into the producers
    topics.soon("ns.db.t")  # known: nothing more
    assert len(admin.asked) == 1 and not topics.creating


def test_a_creation_ahead_that_failed_is_made_again_where_the_topic_is_needed():
    topics, admin, _ = _admin()
    admin.fail = KafkaError._TRANSPORT  # the broker away for a moment
    admin.release.set()
    topics.soon("ns.db.t")
    topics.creating["ns.db.t"].exception(10)
    admin.fail = None
    topics.ensure(["ns.db.t"])  # back: created in the loop
    assert "ns.db.t" in topics.known and len(admin.asked) == 2
    # A creation that fails in the loop too is raised there, as one never asked ahead.
    admin.fail = KafkaError.TOPIC_AUTHORIZATION_FAILED
    topics.soon("ns.db.u")
    with pytest.raises(KafkaFatal, match="cannot create topic ns.db.u"):
        topics.ensure(["ns.db.u"])
    assert "ns.db.u" not in topics.known and not topics.creating and len(admin.asked) == 4


def test_a_topic_that_exists_already_is_fine_and_one_not_asked_soon_is_created_in_the_loop():
    topics, admin, _ = _admin()
    admin.fail = KafkaError.TOPIC_ALREADY_EXISTS
    admin.release.set()
    topics.soon("ns.db.a")
    topics.ensure(["ns.db.a", "ns.db.b"])
    assert topics.known >= {"ns.db.a", "ns.db.b"}
    assert [a[0] for a in admin.asked] == [["ns.db.a"], ["ns.db.b"]]


def test_a_topic_made_takes_the_messages_the_producer_sends():
    from streamer import config
    from streamer.kafka.publisher import Publisher

    # The producer's limit raised in the config: the topics made take as much (a topic at the
    # default would refuse what the producer lets through, batch after batch).
    cfg = config.validate(config._merge(config.DEFAULTS, {
        "mysql": {"server_id": 9}, "kafka": {"message.max.bytes": 33554432}}))
    pub = Publisher(cfg)
    admin = Admin()
    admin.release.set()
    pub.topics.admin = admin
    pub.topics.ensure(["ns.db.t"], config={"cleanup.policy": "compact"})
    assert admin.asked[0][1][0] == {"max.message.bytes": "33554432", "cleanup.policy": "compact"}
    # Left alone, the producer's default.
    topics, admin, _ = _admin()
    admin.release.set()
    topics.ensure(["ns.db.u"])
    assert admin.asked[0][1][0] == {"max.message.bytes": "16777216"}


def test_partitions_added_while_streaming_are_counted_within_seconds():
    # A TRUNCATE goes to every partition: one added since the last count must not be missed
    # for longer than the producer takes to send a key there.
    from streamer.kafka.admin import PARTITIONS_FRESH_S

    counts, asked = {"ns.db.t": 2}, []

    class Metadata:
        def list_topics(self, topic, timeout):
            asked.append(topic)
            md = SimpleNamespace(partitions=dict.fromkeys(range(counts[topic])))
            return SimpleNamespace(topics={topic: md})
    now, producer = [0.0], Producer()
    topics = TopicAdmin(SimpleNamespace(partitions=1, replication_factor=1), Metadata(),
                        lambda: [producer])
    topics.clock = lambda: now[0]
    assert topics.partitions_of("ns.db.t") == 2
    counts["ns.db.t"] = 4  # kafka-topics.sh --alter --partitions 4
    now[0] += PARTITIONS_FRESH_S / 2
    assert topics.partitions_of("ns.db.t") == 2 and len(asked) == 1  # a TRUNCATE storm asks once
    assert producer.looked_up == ["ns.db.t"]
    now[0] += PARTITIONS_FRESH_S
    assert topics.partitions_of("ns.db.t") == 4 and len(asked) == 2
    # The producer learns of the new partitions, or it refuses to produce to them.
    assert producer.looked_up == ["ns.db.t", "ns.db.t"]
    now[0] += PARTITIONS_FRESH_S
    assert topics.partitions_of("ns.db.t") == 4 and len(producer.looked_up) == 2  # no change


class _Refusing:
    """An admin client whose every creation Kafka refuses with ``error``."""

    def __init__(self, error):
        self.error = error

    def create_topics(self, new_topics, operation_timeout):
        out = {}
        for t in new_topics:
            out[t.topic] = f = Future()
            f.set_exception(KafkaException(self.error))
        return out


def test_kafkas_refusal_of_a_colliding_topic_names_the_fix():
    # A topic an earlier run (or someone else) made, which this run never claimed.
    refused = KafkaError(KafkaError.TOPIC_EXCEPTION,
                         "Topic 'ns.shop.eu_orders' collides with existing topic: ns.shop_eu.orders")
    with pytest.raises(TopicClash, match=r"cannot create topic ns\.shop\.eu_orders: Topic .* "
                                         r"collides .*: give the table a topic of its own with "
                                         r"topics\.names"):
        create_topics(_Refusing(refused), ["ns.shop.eu_orders"], 1, 1, {})
    other = KafkaError(KafkaError.TOPIC_EXCEPTION, "Topic name is invalid")
    with pytest.raises(Exception) as err:
        create_topics(_Refusing(other), ["ns.x"], 1, 1, {})
    assert not isinstance(err.value, TopicClash) and "Topic name is invalid" in str(err.value)


def test_a_topic_kafka_will_not_create_names_the_way_on():
    def refused(code, text):
        with pytest.raises(Exception) as err:
            create_topics(_Refusing(KafkaError(code, text)), ["ns.db.t"], 3, 2,
                          {"max.message.bytes": "1048588", "cleanup.policy": "compact"})
        return str(err.value)
    made = ("kafka-topics.sh --create --topic ns.db.t --partitions 3 --replication-factor 2 "
            "--config cleanup.policy=compact --config max.message.bytes=1048588")
    text = refused(KafkaError.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
    assert text == ("cannot create topic ns.db.t: Authorization failed. Grant the streamer's "
                    "principal CREATE on the topic (or the cluster), or create the topic "
                    f"beforehand: {made}")
    assert made in refused(KafkaError.POLICY_VIOLATION, "refused by policy")
    assert "Set topics.replication_factor (now 2) to at most the number of brokers" in refused(
        KafkaError.INVALID_REPLICATION_FACTOR, "Replication factor: 2 larger than available "
                                               "brokers: 1.")


def test_whether_a_topic_exists_is_what_a_broker_answers_or_unknown():
    class Metadata:
        def __init__(self, answer):
            self.answer = answer

        def list_topics(self, topic, timeout):
            if isinstance(self.answer, Exception):
                raise self.answer
            return SimpleNamespace(topics={topic: self.answer} if self.answer else {})

    def exists(answer, admin=True):
        return TopicAdmin(SimpleNamespace(partitions=1, replication_factor=1),
                          Metadata(answer) if admin else None, lambda: []).exists("ns.db.t")

    there = SimpleNamespace(error=None, partitions={0: None})
    gone = SimpleNamespace(error=KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART), partitions={})
    moving = SimpleNamespace(error=KafkaError(KafkaError.LEADER_NOT_AVAILABLE), partitions={})
    away = KafkaException(KafkaError(KafkaError._TRANSPORT, "Local: Broker transport failure"))
    assert exists(there) is True and exists(gone) is False and exists(None) is False
    assert exists(moving) is None and exists(away) is None and exists(there, admin=False) is None
