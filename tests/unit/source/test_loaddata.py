"""A LOAD DATA logged as a statement (source.patches.query, engine.stages.statements), on a
recording.

binlogs/loaddata.binlog was recorded on MariaDB 10.11 (binlogs/loaddata.sql): a row-logged insert
of app.t, a statement-logged LOAD DATA of 2,000 lines into app.o (the file's bytes in a
Begin_load_query and Append_block events, then the statement), another insert of app.t, then
the same LOAD DATA into app.t. The library reads no statement of it, and the streamer refused
the first whatever its table. (Against the real servers: tests/e2e/test_events.py.)
"""
import logging

import pytest
from pymysqlreplication.event import ExecuteLoadQueryEvent

from streamer.engine.stages import statements
from streamer.errors import UnsupportedEvent
from streamer.position import Position
from streamer.source import patches
from streamer.source.reach import Reach
from tests.unit.engine_parts import ReplayedBinlog

patches.apply()
FILE = "mysql-bin.000002"


def test_the_statement_is_read_with_its_default_database():
    loads = [e for e in ReplayedBinlog("loaddata.binlog", Position(FILE, 4))
             if isinstance(e, ExecuteLoadQueryEvent)]
    assert [(e.schema, e.query[:45]) for e in loads] == [
        (b"app", "LOAD DATA INFILE 'lines.csv' INTO TABLE `o` F"),
        (b"app", "LOAD DATA INFILE 'lines.csv' IGNORE INTO TABL")]
    # Read to its end, and not past it (the event's checksum is not text).
    assert all(e.query.endswith("LINES TERMINATED BY '\\n' (`id`, `v`)") for e in loads)


def test_one_of_an_unpublished_table_is_said_one_of_a_published_table_stops_the_stream(
        make, caplog, monkeypatch):
    # No server to ask for triggers: the statement alone is read (source.reach).
    monkeypatch.setattr(statements, "Reach", lambda connection: Reach(None))
    streamer, publisher = make(batch={"max_messages": 1},
                               sections={"tables": {"include": ["app.t"]}})
    start = Position(FILE, 4)
    reader = ReplayedBinlog("loaddata.binlog", start, on_end=streamer.request_stop)
    with reader, caplog.at_level(logging.WARNING), pytest.raises(UnsupportedEvent) as refused:
        streamer.stream(publisher, reader, start)
    assert "row changes of app.o were logged as a statement (at mysql-bin.000002:" in caplog.text
    assert str(refused.value).startswith(
        f"a statement changing app.t at {FILE}:57278 was logged as a statement, not as row "
        f"events: ")
    # Both rows before it, the one after app.o's LOAD DATA included; the checkpoint before it.
    assert publisher.changes() == [("c", 1), ("c", 2001)]
    assert publisher.committed.pos < 57278
