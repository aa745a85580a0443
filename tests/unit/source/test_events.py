"""Every binlog event type is read, known to carry nothing, or refused by name: none is dropped."""
import zlib
from types import SimpleNamespace

import pytest
from pymysqlreplication.event import (BeginLoadQueryEvent, ExecuteLoadQueryEvent, IntvarEvent,
                                      NotImplementedEvent, RandEvent, UserVarEvent)
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.row_event import PartialUpdateRowsEvent

from streamer import errors
from streamer.position import Position
from streamer.source import compressed, events, payload
from tests.unit.engine_parts import ReplayedBinlog, spliced
from tests.unit.engine.test_engine import ALL, FILE, TX2

EVENT_MAP = BinLogPacketWrapper._BinLogPacketWrapper__event_map


def fake(cls, code, at=1000, size=50, flags=0):
    event = cls.__new__(cls)
    event.packet = SimpleNamespace(event_type=code, log_pos=at + size, event_size=size, flags=flags)
    return event


def test_every_event_class_the_library_knows_is_in_exactly_one_list():
    lists = [set(events.FOLLOWED), set(events.NO_DATA), {NotImplementedEvent}]
    assert sum(len(x) for x in lists) == len(set().union(*lists))  # disjoint
    # Read apart: MariaDB's compressed events and MySQL's compressed transactions.
    apart = set(compressed.CLASSES.values()) | set(payload.EVENT_MAP.values())
    assert set(EVENT_MAP.values()) - apart <= set().union(*lists)
    assert set(events.READ) == set(events.FOLLOWED) | {NotImplementedEvent} | apart
    # MariaDB's compressed types: read, each as the plain twin the engine follows.
    for code, (_, twin, _) in compressed.TWINS.items():
        assert EVENT_MAP[code].__bases__ == (twin,) and twin in events.FOLLOWED


def test_an_event_type_the_library_does_not_know_is_refused_with_its_name_place_and_fix():
    with pytest.raises(errors.UnsupportedEvent) as refused:
        events.refuse(fake(NotImplementedEvent, 43), "binlog.000007")
    message = str(refused.value)
    assert "unknown (type 43) at binlog.000007:1000" in message
    assert "checkpoint stays before it" in message and "--start-gtid" in message
    assert refused.value.exit_code == errors.EXIT_SOURCE
    with pytest.raises(errors.UnsupportedEvent, match=r"unknown \(type 250\) .*does not know"):
        events.refuse(fake(NotImplementedEvent, 250), "binlog.000007")


def test_types_that_carry_no_change_pass_the_anonymous_gtid_and_the_servers_ignorable_flag():
    events.refuse(fake(NotImplementedEvent, 34), "f")  # MySQL, gtid_mode=OFF
    events.refuse(fake(NotImplementedEvent, 250, flags=events.IGNORABLE_F), "f")


def test_a_statements_context_and_a_load_datas_file_are_no_change_its_statement_is_followed():
    # A statement's context (INSERT_ID, RAND() seeds, user variables) and the file a LOAD DATA
    # reads are no change: the statement after them is judged by the tables it reaches
    # (engine.stages.statements), a LOAD DATA's too (Execute_load_query).
    assert {IntvarEvent, RandEvent, UserVarEvent, BeginLoadQueryEvent} <= set(events.NO_DATA)
    assert not {IntvarEvent, RandEvent, UserVarEvent, BeginLoadQueryEvent} & set(events.READ)
    events.refuse(fake(NotImplementedEvent, 9), "f")  # Append_block
    events.refuse(fake(NotImplementedEvent, 11), "f")  # Delete_file
    assert ExecuteLoadQueryEvent in events.FOLLOWED
    # MySQL's partial JSON updates are read (source.jsondiff), not refused.
    assert PartialUpdateRowsEvent in events.FOLLOWED


def _replay_compressed(make, start):
    streamer, publisher = make(batch={"max_messages": 1})
    reader = ReplayedBinlog("compressed.binlog", start, on_end=streamer.request_stop)
    with reader:
        streamer.stream(publisher, reader, start)
    decoder = publisher.decoder()
    envs = (decoder.decode(value) for _, _, value in publisher.messages())
    return [("tombstone", None, None) if env is None else (env["op"], env["before"], env["after"])
            for env in envs], publisher


def test_mariadb_compressed_events_are_read_exactly_as_their_plain_twins(make):
    # binlogs/compressed.sql: log_bin_compress switched on at run time, so plain and compressed
    # events interleave: rows events of every kind, and an ALTER as a Query_compressed.
    changes, publisher = _replay_compressed(make, Position(FILE, 4))
    first = {"id": 1, "v": "plain, before the switch"}
    assert changes == [
        ("c", None, first),                                                       # plain
        ("c", None, {"id": 2, "v": "compressed once the setting is on " * 5}),    # compressed
        ("c", None, {"id": 4, "v": "four"}),
        ("c", None, {"id": 5, "v": "five " * 30}),
        ("u", first, {"id": 1, "v": "changed while compressed"}),
        # The compressed ALTER was read as DDL: the row after it has the new column.
        ("c", None, {"id": 6, "v": "after the compressed ALTER", "n": 42}),
        ("d", {"id": 2, "v": "compressed once the setting is on " * 5, "n": 7}, None),
        ("tombstone", None, None),
        ("c", None, {"id": 3, "v": "plain again", "n": 8}),                       # plain again
    ]
    # Positions name the bytes in the file: each checkpoint (one message a batch) is the start of
    # its transaction, as mariadb-binlog shows them (GTID 0-1-9 at 959, 0-1-10 at 1280, 0-1-12
    # at 1989), with the rows of it published.
    checkpoints = [(c.file, c.pos, c.rows) for _, c in publisher.log]
    assert checkpoints[1:5] == [(FILE, 959, 1), (FILE, 1280, 2), (FILE, 1280, 3), (FILE, 1989, 1)]


def test_a_resume_inside_a_compressed_transaction_skips_its_published_rows_only(make):
    # The two-statement transaction (GTID 0-1-10, at 1280): rows 4 and 5 already published.
    changes, _ = _replay_compressed(make, Position(FILE, 1280, rows=2))
    assert [(op, (after or before or {}).get("id")) for op, before, after in changes] == [
        ("u", 1), ("c", 6), ("d", 2), ("tombstone", None), ("c", 3)]


def test_a_compressed_record_that_cannot_be_inflated_is_refused_naming_the_place():
    good = bytes([0x81, 11]) + zlib.compress(b"hello world")
    assert compressed.inflate(good, "offset 9") == b"hello world"
    # A length wider than a byte is big-endian (the server's own reading).
    long = bytes(range(256)) * 2
    assert compressed.inflate(bytes([0x82, 2, 0]) + zlib.compress(long), "offset 9") == long
    with pytest.raises(errors.UnsupportedEvent, match="at offset 9 can't be read: it inflates"):
        compressed.inflate(bytes([0x81, 12]) + zlib.compress(b"hello world"), "offset 9")
    with pytest.raises(errors.UnsupportedEvent, match="at offset 9 can't be read: zlib"):
        compressed.inflate(bytes([0x81, 11]) + b"not zlib at all", "offset 9")
    with pytest.raises(errors.UnsupportedEvent, match="header byte is 0x01"):
        compressed.inflate(bytes([0x01, 11]) + zlib.compress(b"hello world"), "offset 9")
    with pytest.raises(errors.UnsupportedEvent, match="compression algorithm 1"):
        compressed.inflate(bytes([0x91, 11]) + zlib.compress(b"hello world"), "offset 9")


def test_a_statement_logged_change_of_a_published_table_stops_the_streamer():
    import pytest

    from streamer.errors import UnsupportedEvent
    from streamer.source.events import refuse_statement

    class Packet:
        log_pos, event_size, flags = 1200, 100, 0

    class Query:
        packet = Packet()

    published = lambda db, table: db == "shop"  # noqa: E731
    refuse_statement(Query(), "mysql-bin.000003", published, {("other", "t"): ""})
    refuse_statement(Query(), "mysql-bin.000003", published, {})
    with pytest.raises(UnsupportedEvent, match=r"a statement changing shop\.t at "
                                               r"mysql-bin\.000003:1100 .*binlog_format=ROW"):
        refuse_statement(Query(), "mysql-bin.000003", published, {("shop", "t"): ""})
    with pytest.raises(UnsupportedEvent, match=r"changing shop\.b \(by the trigger shop\.ta on "
                                               r"other\.a\) at mysql-bin\.000003:1100 "):
        refuse_statement(Query(), "mysql-bin.000003", published,
                         {("other", "a"): "", ("shop", "b"): "the trigger shop.ta on other.a"})


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


def test_compression_and_partial_json_are_noted_not_required_and_a_missing_setting_is_a_problem():
    from streamer.source.server import NOTED, REQUIRED_SETTINGS, Setting
    required = {name for name, _, _ in REQUIRED_SETTINGS}
    noted = {name for name, _ in NOTED}
    for name in ("binlog_row_value_options", "binlog_transaction_compression", "log_bin_compress"):
        assert name in noted and name not in required
    assert Setting("binlog_row_metadata", "FULL", "full", "set it").ok
    assert not Setting("binlog_row_metadata", "FULL", "not available", "set it").ok
    # MariaDB 11.4's FULL_NODUP: an update's after image made whole from its before image.
    assert Setting("binlog_row_image", "FULL", "full_nodup", "set it").ok
    assert not Setting("binlog_row_image", "FULL", "MINIMAL", "set it").ok
    assert not Setting("binlog_row_metadata", "FULL", "FULL_NODUP", "set it").ok


def _stopped_by(make, event_type, body, flags=0, at=1434):
    """Replay engine.binlog with one event written inside transaction 2 (after its first rows
    event, which ends at 1434): the refusal, and what was committed before it."""
    streamer, publisher = make(batch={"max_messages": 1})
    data = spliced("engine.binlog", at, event_type, body, flags)
    reader = ReplayedBinlog("engine.binlog", Position(FILE, 4), data=data)
    with pytest.raises(errors.UnsupportedEvent) as refused:
        with reader:
            streamer.stream(publisher, reader, Position(FILE, 4))
    return str(refused.value), publisher


def _resumed(make, publisher):
    """A restart from the committed checkpoint once the event is dealt with: every change of
    the binlog is published once, in order, across both runs."""
    streamer, again = make()
    start = publisher.committed
    reader = ReplayedBinlog("engine.binlog", start, on_end=streamer.request_stop)
    with reader:
        streamer.stream(again, reader, start)
    return publisher.changes() + again.changes()


# MySQL 8's Transaction_payload (binlog_transaction_compression=ON), laid out as MySQL's
# control_events.h documents it: fields as (type, length, value) in MySQL's packed integers,
# payload size (1), compression type (2; 0 is zstd) and uncompressed size (3), the end mark (0),
# then the compressed transaction (a zstd frame: its magic number, here only the start of one).
PAYLOAD = bytes([1, 1, 8, 2, 1, 0, 3, 1, 200, 0]) + bytes.fromhex("28b52ffd") + b"\0" * 4


@pytest.mark.parametrize("event_type,body,refusal", [
    (40, PAYLOAD, "the compressed transaction at offset 1434 can't be read: zstd refused it"),
    (42, b"\1" * 40, "the tagged GTID event (type 42) at offset 1434 can't be read: "
                     "serialization version 1"),
    (250, b"\1" * 20, f"binlog event unknown (type 250) at {FILE}:1434: an event type the "
                      f"streamer does not know"),
])
def test_a_refused_event_stops_at_its_place_and_a_restart_loses_and_doubles_nothing(
        make, event_type, body, refusal):
    message, publisher = _stopped_by(make, event_type, body)
    assert refusal in message
    # Transaction 1 and the first row of transaction 2 (published before the event) only.
    assert publisher.changes() == ALL[:4]
    assert (publisher.committed.pos, publisher.committed.rows) == (TX2, 1)
    assert _resumed(make, publisher) == ALL


def test_an_event_the_server_marks_ignorable_is_passed_over():
    # LOG_EVENT_IGNORABLE_F: the server's own word that a reader may skip it.
    data = spliced("engine.binlog", 1434, 250, b"\1" * 20, flags=events.IGNORABLE_F)
    seen = [e for e in ReplayedBinlog("engine.binlog", Position(FILE, 4), data=data)
            if e.packet.event_type == 250]
    assert len(seen) == 1  # handed to the engine, which lets it pass (refuse returns)
    events.refuse(seen[0], FILE)
