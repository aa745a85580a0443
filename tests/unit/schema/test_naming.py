"""Each table's topic (topics.name, topics.names), and two tables never sharing one, as Kafka
tells topics apart ('.' and '_' the same)."""
from types import SimpleNamespace

import pytest
from pymysqlreplication.constants import FIELD_TYPE as T

from streamer import config
from streamer.errors import ConfigError, TopicClash
from streamer.schema.naming import TopicNames, kafka_form
from streamer.schema.versions import TableCatalog, TableFilter


def _table_map(db, table):
    col = SimpleNamespace(name="id", type=T.LONG, unsigned=False, is_primary=True,
                          character_set_name=None, enum_values=None, set_values=None,
                          max_length=0)
    state = SimpleNamespace()
    return SimpleNamespace(schema=db, table=table, columns=[col], null_bitmask=b"\x00",
                           table_id=hash((db, table)) & 0xFFFF, get_table=lambda: state)


def _cfg(**values):
    return config.build(dict({"mysql": {"server_id": 9}, "namespace": "ns"}, **values))


def test_a_tables_topic_is_the_templates_unless_topics_names_gives_it_one():
    names = TopicNames("ns", "{namespace}-{db}-{table}", {"shop.orders": "orders-all"})
    assert names.of("shop", "orders") == "orders-all"
    assert names.of("shop", "items") == "ns-shop-items"
    assert names.claim("shop", "orders") == "orders-all"
    assert names.claim("shop", "orders") == "orders-all"  # the same table again: its own topic


def test_two_tables_that_kafka_takes_as_one_topic_stop_naming_both_and_the_fix():
    names = TopicNames("ns")
    assert names.claim("shop_eu", "orders") == "ns.shop_eu.orders"
    assert kafka_form("ns.shop.eu_orders") == kafka_form("ns.shop_eu.orders")
    with pytest.raises(TopicClash) as err:
        names.claim("shop", "eu_orders")
    text = str(err.value)
    assert "table `shop`.`eu_orders` would publish to topic ns.shop.eu_orders, which Kafka takes " \
           "as ns.shop_eu.orders, table `shop_eu`.`orders`'s topic" in text
    assert 'topics.names: {"shop.eu_orders": "ns-shop-eu_orders"}' in text
    assert "tables.exclude" in text and isinstance(err.value, ConfigError)
    # The first table keeps its topic; the second one named elsewhere takes another.
    assert names.claim("shop_eu", "orders") == "ns.shop_eu.orders"
    named = TopicNames("ns", names={"shop.eu_orders": "ns-shop-eu_orders"})
    assert named.claim("shop_eu", "orders") != named.claim("shop", "eu_orders")


def test_dotted_names_that_fill_the_template_alike_stop_even_with_one_owner_text():
    # `a`.`b.c` and `a.b`.`c` both make ns.a.b.c, and both read "a.b.c".
    names = TopicNames("ns")
    names.claim("a", "b.c")
    with pytest.raises(TopicClash, match=r"table `a\.b`\.`c` would publish to topic ns\.a\.b\.c, "
                                          r"which is table `a`\.`b\.c`'s topic too"):
        names.claim("a.b", "c")


def test_no_table_takes_one_of_the_streamers_own_topics():
    cfg = _cfg(topics={"name": "{db}.{table}"}, format="debezium")
    names = TopicNames.from_config(cfg)
    for own in ("__schemas", "__positions", "__transactions", "__lease"):
        with pytest.raises(TopicClash, match="which is the streamer's own topic too: give the "
                                             "table"):
            names.claim("ns", own)
    with pytest.raises(TopicClash, match="which is the streamer's own topic too"):
        names.claim("ns", "transaction")  # Debezium's transaction topic
    with pytest.raises(TopicClash, match="which Kafka takes as ns.__schemas, the streamer's own"):
        names.claim("ns_", "_schemas")
    assert names.claim("ns", "orders") == "ns.orders"


def test_topics_names_is_read_and_checked_with_the_config():
    cfg = _cfg(topics={"names": {"shop.eu_orders": "ns-shop-eu_orders"}})
    assert TopicNames.from_config(cfg).of("shop", "eu_orders") == "ns-shop-eu_orders"
    with pytest.raises(ConfigError, match="'topics.names' has bad value 'orders'.*'db.table'"):
        _cfg(topics={"names": {"orders": "x"}})
    with pytest.raises(ConfigError, match="'topics.names.shop.a' has bad value 'a b'"):
        _cfg(topics={"names": {"shop.a": "a b"}})
    with pytest.raises(ConfigError, match="'topics.names.shop.a' has bad value '__a'"):
        _cfg(topics={"names": {"shop.a": "__a"}})
    with pytest.raises(ConfigError, match=r"'topics.names.shop.b' has bad value 'x_y'; allowed: a "
                                          r"topic no other table has: shop.a's is x.y"):
        _cfg(topics={"names": {"shop.a": "x.y", "shop.b": "x_y"}})


def test_a_catalog_stops_the_second_table_before_it_has_a_version():
    catalog = TableCatalog("ns", TableFilter(["*.*"], []))
    assert catalog.on_table_map(_table_map("app", "user_roles")).topic == "ns.app.user_roles"
    with pytest.raises(TopicClash, match="table `app_user`.`roles`"):
        catalog.on_table_map(_table_map("app_user", "roles"))
    assert ("app_user", "roles") not in catalog.current
    # A snapshot's version claims the same way.
    with pytest.raises(TopicClash):
        catalog.snapshot_version(_table_map("app_user", "roles"))
    named = TableCatalog("ns", TableFilter(["*.*"], []), topics=TopicNames(
        "ns", names={"app_user.roles": "ns.app-user.roles"}))
    named.on_table_map(_table_map("app", "user_roles"))
    assert named.on_table_map(_table_map("app_user", "roles")).topic == "ns.app-user.roles"


def test_a_topic_name_longer_than_kafka_takes_is_one_clear_error():
    names = TopicNames("n" * 120)
    assert names.claim("shop", "orders") == "n" * 120 + ".shop.orders"
    with pytest.raises(ConfigError, match=r"would publish to topic n+\.shop\.o+, 250 characters: "
                                          r"Kafka takes 249 at most; .*topics.names"):
        names.claim("shop", "o" * 124)


def test_a_databases_topics_that_had_messages_are_read_back_from_the_schema_topics_names():
    """What a DROP DATABASE leaves behind (engine.stages.statements): the topics of its
    published tables that had messages, by topics.names and by the template."""
    schemas = {t: ({}, True) for t in (
        "ns-shop-orders", "ns-shop-items", "orders-all", "ns-shop-secret", "ns-shopx-a",
        "ns-other-orders", "ns-shop-")}
    catalog = TableCatalog("ns", TableFilter(["shop.*", "other.*"], ["shop.secret"]),
                           schemas=schemas, topics=TopicNames(
                               "ns", "{namespace}-{db}-{table}",
                               {"shop.orders": "orders-all", "other.items": "ns-shop-items"}))
    # shop.orders publishes to orders-all (ns-shop-orders is an earlier name's); ns-shop-items
    # is other.items'; shop.secret is not published; ns-shopx-a is another database's.
    assert catalog.database_topics("shop") == ["ns-shop-orders", "orders-all"]
    assert catalog.database_topics("other") == ["ns-other-orders", "ns-shop-items"]
    catalog.on_table_map(_table_map("shop", "new"))  # this run's, no schema read yet
    assert catalog.database_topics("shop") == ["ns-shop-new", "ns-shop-orders", "orders-all"]
    assert catalog.had_messages("shop", "new") and catalog.had_messages("shop", "orders")
    assert not catalog.had_messages("shop", "gone")
    # A template without the database: its topics can't be told apart, only this run's named.
    flat = TableCatalog("ns", TableFilter(["*.*"], []), schemas=schemas,
                        topics=TopicNames("ns", "{namespace}-{table}"))
    assert flat.database_topics("shop") == []
