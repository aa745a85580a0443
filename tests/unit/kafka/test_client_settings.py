"""A kafka setting librdkafka refuses is a config error (code 2) naming the section, not a
Kafka error (code 4) whose advice was to check that the brokers are up. librdkafka checks the
settings when a client is made, before it connects: no broker is needed here."""
import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from streamer.errors import ConfigError
from streamer.kafka.settings import client

UNREACHABLE = {"bootstrap.servers": "127.0.0.1:1"}


@pytest.mark.parametrize("make", [Producer, AdminClient])
@pytest.mark.parametrize("setting,said", [
    ({"foo.bar": "1"}, 'No such configuration property: "foo.bar"'),
    ({"linger.ms": "abc"}, "Invalid value for configuration property"),
    ({"message.max.bytes": "10"}, "value 10 is outside allowed range"),
])
def test_a_setting_librdkafka_refuses_is_a_config_error_naming_it(make, setting, said):
    with pytest.raises(ConfigError) as err:
        client(make, dict(UNREACHABLE, **setting))
    assert str(err.value).startswith("a setting of the config's kafka section is refused by "
                                     "librdkafka: ")
    assert said in str(err.value)


def test_settings_librdkafka_takes_make_the_client_and_other_errors_go_on_as_they_are():
    made = []
    assert client(lambda conf: made.append(conf) or "made", {"linger.ms": "5"}) == "made"
    assert made == [{"linger.ms": "5"}]

    def unreachable(conf):
        raise KafkaException(KafkaError(KafkaError._TRANSPORT, "down"))
    with pytest.raises(KafkaException):
        client(unreachable, {})


@pytest.mark.parametrize("alias, real", [("linger.ms", "queue.buffering.max.ms"),
                                         ("retries", "message.send.max.retries"),
                                         ("acks", "request.required.acks"),
                                         ("delivery.timeout.ms", "message.timeout.ms"),
                                         ("compression.type", "compression.codec")])
def test_a_setting_refused_under_librdkafka_s_other_name_names_the_config_s(alias, real):
    # `linger.ms: abc` was refused as "queue.buffering.max.ms", a key the config doesn't have.
    with pytest.raises(ConfigError) as err:
        client(Producer, dict(UNREACHABLE, **{alias: "abc"}))
    assert f'property "{real}"' in str(err.value)
    assert f"(the config's kafka.{alias}: librdkafka's own name for it)" in str(err.value)
    with pytest.raises(ConfigError) as err:  # set by its own name: nothing to add
        client(Producer, dict(UNREACHABLE, **{real: "abc"}))
    assert "librdkafka's own name" not in str(err.value)
