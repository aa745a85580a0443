"""Which topic a table's messages go to, and the guard that no two tables go to one topic.

A table's topic is ``topics.name``'s template filled with its names (each made a name a topic
can hold, ``topic_part``), or the name ``topics.names`` gives the table. Two tables can still
meet in one topic: a database ``shop_eu`` with a table ``orders`` and a database ``shop`` with a
table ``eu_orders`` fill the template as ``ns.shop_eu.orders`` and ``ns.shop.eu_orders``, which
Kafka takes as one topic (it refuses a topic whose name equals another's once '.' and '_' are
made the same: its metrics' names can't tell them apart); a dotted name (`a`.`b.c` and
`a.b`.`c`) gives the very same one. ``TopicNames.claim`` stops such a second table before any
message of it is published, naming both tables and the fix.
"""
from __future__ import annotations

import hashlib
import re
from typing import Any, Dict, Iterable, Optional, Tuple

from streamer.config import MAX_TOPIC, own_topics
from streamer.errors import ConfigError, TopicClash

# topics.name: a table's topic (config.py checks that it names {db} and {table}).
TOPIC_TEMPLATE = "{namespace}.{db}.{table}"

# What a Kafka topic name can't hold: anything but ASCII letters, digits, '.', '_' and '-'.
_NOT_IN_TOPICS = re.compile(r"[^A-Za-z0-9._-]")


def topic_name(template: str, namespace: str, db: str, table: str) -> str:
    return template.replace("{namespace}", namespace).replace("{db}", topic_part(db)) \
        .replace("{table}", topic_part(table))


def topic_part(name: str) -> str:
    """A database or table name as a topic name can hold it. MySQL takes any character in a
    name (`café`, `order$items`), Kafka refuses the topic: such a name has each character a topic
    can't hold made '_' and 8 hex digits of its SHA-1 appended, so that two names never share a
    topic (`café$x` is `caf__x_` and the digits). Other names are kept as they are."""
    if _NOT_IN_TOPICS.search(name) is None:
        return name
    digest = hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{_NOT_IN_TOPICS.sub('_', name)}_{digest}"


def kafka_form(topic: str) -> str:
    """The name Kafka tells topics apart by: two topics of one form collide (Kafka's own rule,
    ``Topic.hasCollision``: '.' and '_' are the same)."""
    return topic.replace(".", "_")


class TopicNames:
    """The topic of each table, by ``template`` or by ``names`` ('db.table' to a topic), and
    the tables that have claimed a topic in this run. ``own`` lists the streamer's own topics
    (the checkpoint and schema topics ...), which no table may take either."""

    def __init__(self, namespace: str, template: str = TOPIC_TEMPLATE,
                 names: Optional[Dict[str, str]] = None, own: Iterable[str] = ()) -> None:
        self.namespace = namespace
        self.template = template
        self.names = dict(names or {})
        # Each claimed topic by its Kafka form: (the topic, who claimed it: (db, table), or None
        # for the streamer's own).
        self._taken: Dict[str, Tuple[str, Optional[Tuple[str, str]]]] = {
            kafka_form(t): (t, None) for t in own}

    @classmethod
    def from_config(cls, cfg: Any) -> "TopicNames":
        own = [topic for topic, _ in own_topics(cfg)]
        return cls(cfg.namespace, cfg.topics.name, cfg.topics.names, own)

    def of(self, db: str, table: str) -> str:
        named = self.names.get(f"{db}.{table}")
        return named if named is not None else \
            topic_name(self.template, self.namespace, db, table)

    def claim(self, db: str, table: str) -> str:
        """``db.table``'s topic, once no other table of this run has it (in Kafka's form)."""
        topic = self.of(db, table)
        if len(topic) > MAX_TOPIC:
            raise ConfigError(
                f"table `{db}`.`{table}` would publish to topic {topic}, {len(topic)} characters: "
                f"Kafka takes {MAX_TOPIC} at most; give the table a shorter one with topics.names, "
                f"or make topics.name (or the namespace) shorter")
        taken, by = self._taken.setdefault(kafka_form(topic), (topic, (db, table)))
        if by != (db, table):
            raise TopicClash(_clash(db, table, topic, taken, by))
        return topic


def _clash(db: str, table: str, topic: str, taken: str, by: Optional[Tuple[str, str]]) -> str:
    whose = "the streamer's own topic" if by is None else f"table `{by[0]}`.`{by[1]}`'s topic"
    clash = f"which is {whose} too" if taken == topic else \
        f"which Kafka takes as {taken}, {whose} ('.' and '_' are one in its topic names)"
    one = "the table" if by is None else "one of them"
    return (f"table `{db}`.`{table}` would publish to topic {topic}, {clash}: give {one} a topic "
            f"of its own with topics.names (e.g. topics.names: "
            f"{{\"{db}.{table}\": \"{topic.replace('.', '-')}\"}}), or leave "
            f"{'it' if by is None else 'one'} out with tables.exclude")
