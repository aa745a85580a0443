"""`make test`'s two lanes (tests/lanes.sh): STREAMER_TEST_LANE picks the tests of one.

A test may SET GLOBAL, PURGE or load its server, so no two tests share a server at the same
time. The lanes run at once: "default", the tests of the default server (MariaDB 10.11), and
"other", the rest: the tests of the matrix's other servers (MySQL 8.0, MariaDB 11.4), those of
private servers or Kafka alone, and those of no server (the unit tests). A test marked
kafka_side runs on the server support.kafka_side_source() names, and in that server's lane.
"""
import os

import pytest

from tests import support

LANES = ("default", "other")
E2E = os.path.join(os.path.dirname(os.path.abspath(__file__)), "e2e") + os.sep


def pytest_configure(config):
    config.addinivalue_line("markers", "on_source(name): a test of that server of the matrix "
                                       "only, skipped when STREAMER_TEST_SOURCES leaves it out")
    config.addinivalue_line("markers", "private_servers: a test of its own servers "
                                       "(tests/e2e/servers.py) or of Kafka alone, of no shared "
                                       "server of the matrix")
    config.addinivalue_line("markers", "kafka_side: a test of the stream's Kafka side, for which "
                                       "any source serves (support.kafka_side_source)")


def server_of(item) -> str:
    """The server of the source matrix a test runs on: its parameter's (a source, or a flavour
    of private servers), its on_source marker's, else the default."""
    params = item.callspec.params if hasattr(item, "callspec") else {}
    for value in params.values():
        if isinstance(value, support.Source):
            return value.name
        if isinstance(value, str) and value in support.SOURCES:
            return value
    if item.get_closest_marker("kafka_side") is not None:
        return support.kafka_side_source().name
    marker = item.get_closest_marker("on_source")
    return marker.args[0] if marker is not None else support.DEFAULT.name


def lane_of(item) -> str:
    if (str(item.path).startswith(E2E) and item.get_closest_marker("private_servers") is None
            and server_of(item) == support.DEFAULT.name):
        return "default"
    return "other"


def pytest_collection_modifyitems(config, items):
    lane = os.environ.get("STREAMER_TEST_LANE", "")
    if lane and lane not in LANES:
        raise pytest.UsageError(f"STREAMER_TEST_LANE={lane!r}: one of {', '.join(LANES)}, "
                                f"or unset for the whole suite")
    enabled = {s.name for s in support.enabled_sources()}
    kept, dropped = [], []
    for item in items:
        if item.get_closest_marker("on_source") is not None and server_of(item) not in enabled:
            item.add_marker(pytest.mark.skip(reason=f"{server_of(item)} is not in the matrix "
                                                    f"(STREAMER_TEST_SOURCES)"))
        (kept if not lane or lane_of(item) == lane else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
