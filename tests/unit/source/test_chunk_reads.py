"""TableReader's read-only chunk read on a connection that breaks under it."""
import pymysql
import pytest

from streamer.source import chunks
from tests.fakeserver import FakeConnection


@pytest.mark.parametrize("info", ["8.0.15", "10.11.19-MariaDB"])
def test_a_read_stopped_by_a_lost_connection_says_so_not_the_commit_after_it(monkeypatch, info):
    # The COMMIT that ends the read's transaction fails too on a connection that broke, with
    # PyMySQL's InterfaceError(0, ''): raised from a finally, it took the loss's place, and the
    # snapshot read it as the server refusing the SELECT (it ended without its rows).
    asked = []

    def answer(sql, args):
        asked.append(sql)
        if sql == "COMMIT":
            raise pymysql.err.InterfaceError(0, "")
        if "gtid_executed" in sql:
            return [("u:1-5",)]
        if sql.startswith("SHOW STATUS"):
            return [("binlog_snapshot_file", "mysql-bin.000001"),
                    ("binlog_snapshot_position", "4")]
        return []

    lost = pymysql.err.OperationalError(2013, "Lost connection to MySQL server during query")

    def read_chunk(*args):
        raise lost
    monkeypatch.setattr(chunks, "read_chunk", read_chunk)
    conn = FakeConnection(answer, info)
    reader = chunks.TableReader({}, "heartbeat", "src")
    reader.conn = conn
    with pytest.raises(pymysql.err.OperationalError) as raised:
        reader.read_at_position(None, None, None, 10)
    assert raised.value is lost
    assert asked[-1] == "COMMIT"  # the transaction was still ended, quietly
