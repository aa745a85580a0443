"""Topics: created when missing, in one request for several, and their metadata fetched ahead."""
from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable, Dict, List, Optional, Tuple

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ConfigResource, NewTopic

from streamer.errors import KafkaFatal, TopicClash
from streamer.kafka.settings import DEFAULT_PRODUCER, kafka_error

log = logging.getLogger(__name__)

# How long a topic's partition count is taken as known (a TRUNCATE's, TopicAdmin.partitions_of).
PARTITIONS_FRESH_S = 10.0


def create_topics(admin: Any, topics: List[str], partitions: int, replication_factor: int,
                  config: Dict[str, str]) -> None:
    """Create the topics in one request (one round trip for all); one that exists is fine."""
    futures = admin.create_topics(
        [NewTopic(t, num_partitions=partitions, replication_factor=replication_factor,
                  config=config) for t in topics], operation_timeout=30)
    for topic in topics:
        try:
            futures[topic].result(timeout=60)
            log.info("created topic %s", topic)
        except KafkaException as exc:
            err = kafka_error(exc)
            if err.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise _refused(topic, err, partitions, replication_factor, config) from None


def _refused(topic: str, err: Any, partitions: int, replication_factor: int,
             config: Dict[str, str]) -> Exception:
    """The error for a topic Kafka would not create, with the way on for what a user can fix."""
    head = f"cannot create topic {topic}: {err.str().rstrip('.')}"
    code = err.code()
    if code == KafkaError.TOPIC_EXCEPTION and "collides" in err.str():
        return TopicClash(
            f"{head}. Kafka takes '.' and '_' in topic names as the same, and the other topic "
            f"exists already (made by an earlier run, or outside the streamer): give the table a "
            f"topic of its own with topics.names, or leave it out with tables.exclude")
    if code == KafkaError.INVALID_REPLICATION_FACTOR:
        return KafkaFatal(f"{head}. Set topics.replication_factor (now {replication_factor}) to "
                          f"at most the number of brokers")
    made = (f"kafka-topics.sh --create --topic {topic} --partitions {partitions} "
            f"--replication-factor {replication_factor}"
            + "".join(f" --config {k}={v}" for k, v in sorted(config.items())))
    if code in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED):
        return KafkaFatal(f"{head}. Grant the streamer's principal CREATE on the topic (or the "
                          f"cluster), or create the topic beforehand: {made}")
    if code == KafkaError.POLICY_VIOLATION:
        return KafkaFatal(f"{head}. The cluster's topic creation policy refused it: create the "
                          f"topic as the policy allows, beforehand, e.g. {made}")
    return KafkaFatal(head)


class EveryTopic(set):
    """The topics a mock cluster has: all of them (it creates one when it is produced to)."""

    def __contains__(self, topic: object) -> bool:
        return True


class TopicAdmin:
    """The topics one publisher has made sure of, and the admin client that made them.
    ``producers()`` gives the producers whose metadata a new topic is fetched into."""

    def __init__(self, topics_cfg: Any, admin: Optional[Any], producers: Callable[[], List[Any]],
                 message_max_bytes: int = DEFAULT_PRODUCER["message.max.bytes"]) -> None:
        self.topics_cfg = topics_cfg
        # A topic made here takes the messages the producer sends (kafka.message.max.bytes).
        self.message_max_bytes = message_max_bytes
        self.admin = admin
        self.producers = producers
        self.known: set = set() if admin is not None else EveryTopic()
        self.partitions: Dict[str, Tuple[int, float]] = {}  # (count, when asked), by topic
        self.clock = time.monotonic
        self.creating: Dict[str, Future] = {}  # topics ``soon`` is creating, by name

    def ensure(self, topics: List[str], partitions: Optional[int] = None,
               config: Optional[Dict[str, str]] = None) -> None:
        """Create the topics that don't exist yet, in one request (one round trip for all). A
        topic ``soon`` is creating is waited for; one whose creation there failed is created
        here (what fails then is raised)."""
        new_topics = [t for t in topics if t not in self.known]
        if not new_topics:
            return
        made = set()
        for topic in new_topics:
            creating = self.creating.pop(topic, None)
            failed = creating.exception() if creating is not None else None
            if creating is not None and failed is None:
                made.add(topic)
            elif failed is not None:
                log.debug("topic %s not created ahead (%s): created now", topic, failed)
        missing = [t for t in new_topics if t not in made]
        if missing:
            assert self.admin is not None
            create_topics(self.admin, missing, partitions or self.topics_cfg.partitions,
                          self.topics_cfg.replication_factor, self._config(config))
        self.known.update(new_topics)
        self.learn(new_topics)

    def soon(self, topic: str, partitions: Optional[int] = None,
             config: Optional[Dict[str, str]] = None) -> None:
        """Start creating ``topic`` when it may not exist, in a thread, so that the loop does not
        wait for the broker's round trip (~50 ms): ``ensure`` of it then waits for what is left.
        Only a head start: a creation that fails here is made again by ``ensure``."""
        if topic in self.known or topic in self.creating:
            return
        assert self.admin is not None
        created: Future = Future()
        args = (self.admin, [topic], partitions or self.topics_cfg.partitions,
                self.topics_cfg.replication_factor, self._config(config))

        def create() -> None:
            try:
                create_topics(*args)
            except BaseException as exc:  # ensure tries again, in the loop
                created.set_exception(exc)
            else:
                created.set_result(None)
        self.creating[topic] = created
        threading.Thread(target=create, name=f"create topic {topic}", daemon=True).start()

    def _config(self, config: Optional[Dict[str, str]]) -> Dict[str, str]:
        conf = {"max.message.bytes": str(self.message_max_bytes)}
        conf.update(config or {})
        return conf

    def topic_config(self, topic: str) -> Dict[str, str]:
        """``topic``'s settings (max.message.bytes, cleanup.policy ...), or {} when they can't be
        read (no admin client, an ACL without DescribeConfigs, Kafka away)."""
        if self.admin is None:
            return {}
        res = ConfigResource(ConfigResource.Type.TOPIC, topic)
        try:
            found = self.admin.describe_configs([res])[res].result(timeout=10)
        except Exception:  # noqa: BLE001 - only to name a setting in an error
            return {}
        return {name: entry.value for name, entry in found.items() if entry.value is not None}

    def learn(self, topics: List[str]) -> None:
        """Fetch the topics' metadata into the producers now. Left to itself, librdkafka looks
        up a topic it has not produced to on a one-second timer, and the first commit to each
        topic would wait for that (docs/benchmarks.md, "Start-up")."""
        for topic in topics:
            try:
                for producer in self.producers():
                    producer.list_topics(topic, timeout=10)
            except KafkaException as exc:
                # Only a speed-up: the first produce looks the topic up by itself.
                log.debug("metadata for %s not fetched ahead: %s", topic, exc)

    def partitions_of(self, topic: str) -> int:
        """How many partitions ``topic`` has, asked again when the last answer is older than
        ``PARTITIONS_FRESH_S``: partitions added to a topic while it is streamed must each get
        a TRUNCATE (``produce_everywhere``), as the producer sends keys there once its metadata
        refresh learns of them. A count not seen before is fetched into the producers too: a
        producer refuses a partition its metadata does not have yet ("Unknown partition")."""
        now = self.clock()
        known = self.partitions.get(topic)
        if known is not None and now - known[1] < PARTITIONS_FRESH_S:
            return known[0]
        if self.admin is None:
            return 1
        md = self.admin.list_topics(topic, timeout=10).topics.get(topic)
        found = len(md.partitions) if md is not None and md.partitions else 1
        self.partitions[topic] = (found, now)
        if known is None or known[0] != found:
            self.learn([topic])
        return found

    def exists(self, topic: str) -> Optional[bool]:
        """Whether ``topic`` exists, as a broker answers now; None when that can't be told (no
        admin client, no broker answering within a few seconds)."""
        if self.admin is None:
            return None
        try:
            found = self.admin.list_topics(topic, timeout=5).topics.get(topic)
        except KafkaException:
            return None
        if found is None:
            return False
        if found.error is None:
            return True
        return False if found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART else None

    def reachable(self) -> bool:
        """Whether a broker answers a metadata request within a few seconds."""
        if self.admin is None:
            return True
        try:
            self.admin.list_topics(timeout=3)
            return True
        except KafkaException:
            return False
