"""MariaDB's two-phase ALTER (source.patches.gtid, engine.stages.statements), on a recording.

binlogs/alter2p.binlog was recorded on MariaDB 10.11 (binlogs/alter2p.sql) with
binlog_alter_two_phase on: app.c given a foreign key with ON DELETE CASCADE (a START ALTER, then
a COMMIT ALTER), then a column; then an ALTER adding a unique key and another foreign key, which
failed (a START ALTER, then a ROLLBACK ALTER); rows of app.c before, between and after; then an
XA transaction whose format id (6) has two phases' bits, held in its GTID events. The two
events of each ALTER hold the same statement: their GTID events' extra flags alone tell them
apart, which the library didn't read, so the foreign key was said twice, and the failed one said
as if it had been added. (Against the real servers: MariaDB 11.4's ALTERs in
tests/e2e/test_ddl.py.)
"""
import logging

from pymysqlreplication.event import MariadbGtidEvent, QueryEvent

from streamer.engine.stages import statements
from streamer.position import Position
from streamer.source import patches
from streamer.source.patches.gtid import COMMIT_ALTER, ROLLBACK_ALTER, START_ALTER
from streamer.source.reach import Reach
from tests.unit.engine_parts import ReplayedBinlog

patches.apply()
FILE = "mysql-bin.000002"


def test_each_gtid_event_says_its_alters_phase():
    phases = {}
    alter = None
    for event in ReplayedBinlog("alter2p.binlog", Position(FILE, 4)):
        if isinstance(event, MariadbGtidEvent):
            alter = event.alter
            phases[event.gtid_seq_no] = alter
        elif isinstance(event, QueryEvent) and event.query.startswith("ALTER"):
            assert alter != 0, event.query  # every ALTER of the recording is in two phases
    assert phases == {**{seq: 0 for seq in range(6, 22)},
                      11: START_ALTER, 12: COMMIT_ALTER, 13: START_ALTER, 14: COMMIT_ALTER,
                      17: START_ALTER, 18: ROLLBACK_ALTER}


def test_an_alter_is_read_once_when_committed_and_never_when_rolled_back(make, caplog,
                                                                         monkeypatch):
    monkeypatch.setattr(statements, "Reach", lambda connection: Reach(None))
    streamer, publisher = make(batch={"max_messages": 1},
                               sections={"tables": {"include": ["app.c"]}})
    streamer.reread = lambda pos: ReplayedBinlog("alter2p.binlog", pos)  # the XA group again
    start = Position(FILE, 4)
    reader = ReplayedBinlog("alter2p.binlog", start, on_end=streamer.request_stop)
    with reader, caplog.at_level(logging.WARNING):
        streamer.stream(publisher, reader, start)
    said = [r.getMessage() for r in caplog.records if "foreign key" in r.getMessage()]
    assert len(said) == 1, said
    # The COMMIT ALTER's statement (GTID 0-1-12's), not the START ALTER's before it.
    assert said[0].startswith(f"app.c has a foreign key with an ON DELETE or ON UPDATE action "
                              f"now (the statement at {FILE}:1542)"), said
    assert publisher.changes() == [("c", 1), ("c", 2), ("c", 3), ("c", 4)]
