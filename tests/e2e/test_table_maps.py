"""Table-map events with the same bytes are parsed once (source.patches.table_map), and what a
later one takes over is what a parse of its own gives."""
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import TableMapEvent

from streamer.source import patches
from streamer.source.patches import table_map
from tests import support

patches.apply()  # as `streamer run` does before reading


def _table_maps(start, schema):
    stream = BinLogStreamReader(
        connection_settings={"host": "127.0.0.1", "port": support.MYSQL_PORT, "user": "admin",
                             "password": support.secret("admin")},
        server_id=998877, blocking=False, resume_stream=True, log_file=start[0], log_pos=start[1],
        only_events=[TableMapEvent], enable_logging=False)
    try:
        return [ev for ev in stream if ev.schema == schema]
    finally:
        stream.close()


def _parsed(ev):
    cols = [(c.name, c.type, c.unsigned, c.is_primary, c.character_set_name,
             getattr(c, "max_length", None)) for c in ev.columns]
    return (ev.table_id, ev.schema, ev.table, ev.flags, ev.column_count, ev.null_bitmask,
            ev.table_obj.primary_key, ev.table_obj.schema, cols, ev.timestamp, ev.packet.log_pos)


@pytest.fixture
def history(db):
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20) CHARACTER SET latin1)")
    start = support.master_pos(conn)
    support.sql(conn, "INSERT INTO t VALUES (1, 'a')", "INSERT INTO t VALUES (2, 'b')",
                "ALTER TABLE t ADD COLUMN n INT NOT NULL DEFAULT 0",
                "INSERT INTO t VALUES (3, 'c', 7)", "INSERT INTO t VALUES (4, 'd', 8)")
    return name, start


def test_the_same_table_map_is_parsed_once_and_a_changed_table_again(history):
    name, start = history
    table_map.forget()
    cached = _table_maps(start, name)
    assert [len(ev.columns) for ev in cached] == [2, 2, 3, 3]
    # Two parses, one per definition: the repeat of each takes over its Table.
    assert cached[0].table_obj is cached[1].table_obj
    assert cached[2].table_obj is cached[3].table_obj
    assert cached[1].table_obj is not cached[2].table_obj
    assert [c.name for c in cached[3].columns] == ["id", "v", "n"]
    # Each event keeps its own header fields, and all the rest equals a parse of its own.
    for ev in cached:
        table_map.forget()  # a parse of its own: read from the event's start
        assert _parsed(ev) == _parsed(_table_maps((start[0], ev.packet.log_pos - ev.packet.event_size),
                                                  name)[0])
    assert len({ev.packet.log_pos for ev in cached}) == 4


def test_a_new_stream_parses_its_table_maps_again(history):
    # What the library sets from the stream (its connection among them) must be the stream's
    # own: a reconnect gets a new one, and a repeat takes everything but packet and timestamp
    # from the first parse.
    name, start = history
    first, second = _table_maps(start, name), _table_maps(start, name)
    assert first[0].table_obj is first[1].table_obj
    assert second[0].table_obj is not first[0].table_obj
    assert first[0]._ctl_connection is not second[0]._ctl_connection
    assert all(ev._ctl_connection is first[0]._ctl_connection for ev in first)
    assert all(ev._ctl_connection is second[0]._ctl_connection for ev in second)
    assert [ev.timestamp for ev in first] == [ev.timestamp for ev in second]
