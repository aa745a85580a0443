"""The Sink protocol: the Kafka publisher and the tests' in-memory one offer all of it, with the
same parameters, so that the engine driven in the unit tests is the engine that runs."""
import inspect

import pytest

from streamer.kafka.publisher import Publisher
from streamer.kafka.sink import Sink
from tests.unit.engine_parts import InMemoryPublisher

METHODS = [name for name, member in vars(Sink).items()
           if inspect.isfunction(member) and not name.startswith("_")]


@pytest.mark.parametrize("implementation", [Publisher, InMemoryPublisher])
@pytest.mark.parametrize("name", METHODS)
def test_each_sink_offers_every_method_of_the_protocol_with_its_parameters(implementation, name):
    wanted = list(inspect.signature(getattr(Sink, name)).parameters)
    found = list(inspect.signature(getattr(implementation, name)).parameters)
    assert found == wanted, (implementation.__name__, name)


def test_the_protocol_names_what_the_engine_uses():
    assert {"begin", "produce", "commit", "abort", "read_checkpoint", "ensure_topic"} <= \
        set(METHODS)
