import pytest

from tests import support


def pytest_configure(config):
    config.addinivalue_line("markers", "every_source: a contract test, run against every server "
                                       "of the source matrix (STREAMER_TEST_SOURCES)")


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
    """The source server: each of the matrix for an every_source test, the Kafka side's for a
    kafka_side one, else the default."""
    if hasattr(request, "param"):
        return request.param
    if request.node.get_closest_marker("kafka_side") is not None:
        return support.kafka_side_source()
    return support.DEFAULT


@pytest.fixture
def db(source):
    name = support.unique("t_")
    conn = source.admin()
    support.sql(conn, f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
    conn.select_db(name)
    yield name, conn
    support.sql(conn, f"DROP DATABASE {name}")
    conn.close()
