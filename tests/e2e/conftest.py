import os

import pytest

from tests import support

# `make test` runs the suite in two lanes at once (tests/lanes.sh), one per set of shared servers,
# so that no test sees another's SET GLOBAL, PURGE or load on its server: "default" (MariaDB 10.11
# and every test of no server) and "matrix" (the tests of MySQL 8.0 and MariaDB 11.4).
PARTS = ("default", "matrix")


def pytest_configure(config):
    config.addinivalue_line("markers", "every_source: a contract test, run against every server "
                                       "of the source matrix (STREAMER_TEST_SOURCES)")
    config.addinivalue_line("markers", "on_source(name): a test of that server of the matrix "
                                       "only, skipped when STREAMER_TEST_SOURCES leaves it out")


def server_of(item) -> str:
    """The server of the source matrix a test runs on: its parameter's (a source, or a flavour
    of private servers), its on_source marker's, else the default."""
    params = item.callspec.params if hasattr(item, "callspec") else {}
    for value in params.values():
        if isinstance(value, support.Source):
            return value.name
        if isinstance(value, str) and value in support.SOURCES:
            return value
    marker = item.get_closest_marker("on_source")
    return marker.args[0] if marker is not None else support.DEFAULT.name


def pytest_collection_modifyitems(config, items):
    part = os.environ.get("STREAMER_TEST_PART", "")
    if part and part not in PARTS:
        raise pytest.UsageError(f"STREAMER_TEST_PART={part!r}: one of {', '.join(PARTS)}, "
                                f"or unset for the whole suite")
    enabled = {s.name for s in support.enabled_sources()}
    kept, dropped = [], []
    for item in items:
        server = server_of(item)
        if item.get_closest_marker("on_source") is not None and server not in enabled:
            item.add_marker(pytest.mark.skip(reason=f"{server} is not in the matrix "
                                                    f"(STREAMER_TEST_SOURCES)"))
        if not part or (part == "matrix") == (server != support.DEFAULT.name):
            kept.append(item)
        else:
            dropped.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_generate_tests(metafunc):
    if metafunc.definition.get_closest_marker("every_source") is not None:
        metafunc.parametrize("source", support.enabled_sources(), ids=lambda s: s.name,
                             indirect=True)


@pytest.fixture(scope="session", autouse=True)
def servers():
    """The real servers and Kafka; started by the project's own scripts when not running."""
    support.ensure_servers()


@pytest.fixture
def source(request):
    """The source server: each of the matrix for an every_source test, else the default."""
    return getattr(request, "param", support.DEFAULT)


@pytest.fixture
def db(source):
    name = support.unique("t_")
    conn = source.admin()
    support.sql(conn, f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
    conn.select_db(name)
    yield name, conn
    support.sql(conn, f"DROP DATABASE {name}")
    conn.close()
