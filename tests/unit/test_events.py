"""Every binlog event type is read, known to carry nothing, or refused by name: none is dropped."""
from types import SimpleNamespace

import pytest
from pymysqlreplication.event import NotImplementedEvent, RandEvent
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.row_event import PartialUpdateRowsEvent

from streamer import errors
from streamer.position import Position
from streamer.source import events
from tests.unit.engine_parts import InMemoryPublisher, ReplayedBinlog
from tests.unit.test_engine import FILE

EVENT_MAP = BinLogPacketWrapper._BinLogPacketWrapper__event_map


def fake(cls, code, at=1000, size=50, flags=0):
    event = cls.__new__(cls)
    event.packet = SimpleNamespace(event_type=code, log_pos=at + size, event_size=size, flags=flags)
    return event


def test_every_event_class_the_library_knows_is_in_exactly_one_list():
    lists = [set(events.FOLLOWED), set(events.NO_DATA), set(events._REFUSED), {NotImplementedEvent}]
    assert sum(len(x) for x in lists) == len(set().union(*lists))  # disjoint
    assert set(EVENT_MAP.values()) <= set().union(*lists)
    assert set(events.READ) == set(events.FOLLOWED) | set(events._REFUSED) | {NotImplementedEvent}


def test_an_event_type_the_library_does_not_know_is_refused_with_its_name_place_and_fix():
    with pytest.raises(errors.UnsupportedEvent) as refused:
        events.refuse(fake(NotImplementedEvent, 40), "binlog.000007")
    message = str(refused.value)
    assert "Transaction_payload (type 40) at binlog.000007:1000" in message
    assert "binlog_transaction_compression=OFF" in message
    assert refused.value.exit_code == errors.EXIT_SOURCE
    with pytest.raises(errors.UnsupportedEvent, match=r"unknown \(type 250\) .*does not know"):
        events.refuse(fake(NotImplementedEvent, 250), "binlog.000007")


def test_types_that_carry_no_change_pass_the_anonymous_gtid_and_the_servers_ignorable_flag():
    events.refuse(fake(NotImplementedEvent, 34), "f")  # MySQL, gtid_mode=OFF
    events.refuse(fake(NotImplementedEvent, 250, flags=events.IGNORABLE_F), "f")


@pytest.mark.parametrize("cls,code,setting", [
    (PartialUpdateRowsEvent, 39, "binlog_row_value_options"),
    (RandEvent, 13, "binlog_format=ROW"),
])
def test_known_events_the_streamer_cannot_read_are_refused_naming_the_setting(cls, code, setting):
    with pytest.raises(errors.UnsupportedEvent) as refused:
        events.refuse(fake(cls, code), "f")
    assert cls.__name__ in str(refused.value) and setting in str(refused.value)


def test_mariadb_compressed_rows_stop_the_stream_before_them_and_nothing_after_is_published(make):
    # compressed.sql: row 1 plain, row 2 written with log_bin_compress=ON, row 3 plain again.
    streamer, publisher = make()
    reader = ReplayedBinlog("compressed.binlog", Position(FILE, 4), live=True)
    with pytest.raises(errors.UnsupportedEvent) as refused:
        streamer.stream(publisher, reader, Position(FILE, 4))
    message = str(refused.value)
    assert f"Write_rows_compressed_v1 (type 166) at {FILE}:1163" in message
    assert "log_bin_compress=OFF" in message
    assert publisher.changes() == [("c", 1)]
    # The checkpoint is the end of row 1's transaction: the compressed one is read again after
    # a restart, never passed over.
    assert publisher.committed.pos == 959 and publisher.committed.rows == 0
    assert isinstance(publisher, InMemoryPublisher) and publisher.in_tx is False


def test_statement_logged_row_changes_are_found_with_the_table_they_change():
    from streamer.source.events import statement_target
    assert statement_target("INSERT INTO t (id) VALUES (1)", "shop") == ("shop", "t")
    assert statement_target("insert ignore into `sh op`.`t``x` values (1)", "d") == ("sh op", "t`x")
    assert statement_target("/* app */ UPDATE LOW_PRIORITY shop.t SET v = 1", "d") == ("shop", "t")
    assert statement_target("DELETE QUICK FROM t WHERE id = 1", "shop") == ("shop", "t")
    assert statement_target("REPLACE t VALUES (1)", "shop") == ("shop", "t")
    assert statement_target("LOAD DATA INFILE 'x.csv' INTO TABLE shop.t", "d") == ("shop", "t")
    for other in ("BEGIN", "COMMIT", "ALTER TABLE t ADD c INT", "CREATE TABLE t (id INT)",
                  "TRUNCATE TABLE t", "GRANT SELECT ON *.* TO u", "SAVEPOINT a",
                  "DROP TABLE updates"):
        assert statement_target(other, "shop") is None, other


def test_a_statement_logged_change_of_a_published_table_stops_the_streamer():
    import pytest

    from streamer.errors import UnsupportedEvent
    from streamer.source.events import refuse_statement

    class Packet:
        log_pos, event_size = 1200, 100

    class Query:
        packet = Packet()

        def __init__(self, query, schema=b"shop"):
            self.query, self.schema = query, schema

    published = lambda db, table: db == "shop"  # noqa: E731
    refuse_statement(Query("INSERT INTO other.t VALUES (1)"), "mysql-bin.000003", published)
    refuse_statement(Query("ALTER TABLE t ADD c INT"), "mysql-bin.000003", published)
    with pytest.raises(UnsupportedEvent, match=r"a statement changing shop\.t at "
                                               r"mysql-bin\.000003:1100 .*binlog_format=ROW"):
        refuse_statement(Query("UPDATE t SET v = 2"), "mysql-bin.000003", published)


def _replay_images(make, start):
    streamer, publisher = make(batch={"max_messages": 1})
    reader = ReplayedBinlog("images.binlog", start, on_end=streamer.request_stop)
    with pytest.raises(errors.UnsupportedEvent) as err:
        with reader:
            streamer.stream(publisher, reader, start)
    return str(err.value), publisher


def test_a_row_image_without_a_published_column_stops_instead_of_publishing_null(make):
    # binlogs/images.sql: a MINIMAL update of app.t at 1122, after a FULL insert.
    message, publisher = _replay_images(make, Position(FILE, 4))
    assert "a rows event of app.t at offset 1122" in message and "column 'v'" in message
    assert "binlog_row_image=FULL" in message and "checkpoint stays before it" in message
    assert publisher.changes() == [("c", 1), ("c", 2)]  # the update itself: never, not with nulls
    assert publisher.committed.pos <= 954  # nothing past the update's transaction start


def test_row_changes_logged_as_a_statement_stop_the_streamer(make):
    # The statement-logged INSERT of binlogs/images.sql, read from its transaction's start.
    message, publisher = _replay_images(make, Position(FILE, 1196))
    assert f"a statement changing app.t at {FILE}:1238" in message
    assert "binlog_format=ROW" in message
    assert publisher.changes() == []
