import pytest

from tests import support


@pytest.fixture(scope="session", autouse=True)
def servers():
    """The real MariaDB and Kafka; started by the project's own script when not running."""
    support.ensure_servers()


@pytest.fixture
def db():
    name = support.unique("t_")
    conn = support.admin()
    support.sql(conn, f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
    conn.select_db(name)
    yield name, conn
    support.sql(conn, f"DROP DATABASE {name}")
    conn.close()
