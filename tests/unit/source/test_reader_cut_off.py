"""BinlogReader: a binlog that ends inside an event is read on from the next binlog's start."""
import logging
import types

import pymysql
import pytest

from streamer.errors import (GtidsOutOfOrder, PurgedBinlog, ServerBehind, ServerIdTaken,
                             SourceError, StreamInterrupted, WithoutGtids)
from streamer.source import reader as reader_mod
from streamer.source.reader import BinlogReader, cut_off

MARIADB = ("binlog truncated in the middle of event; consider out of disk space on master; the "
           "first event 'mysql-bin.000001' at 1739, the last event read from 'mysql-bin.000001' "
           "at 2324, the last byte read from 'mysql-bin.000001' at 2324.")
MYSQL = ("binlog truncated in the middle of event; consider out of disk space on master; the "
         "first event 'binlog.000007' at 4, the last event read from './binlog.000007' at 125, "
         "the last byte read from './binlog.000007' at 144.")


def _refused(text, code=1236):
    return pymysql.err.OperationalError(code, text)


def test_the_servers_refusal_names_the_binlog_and_where_its_last_whole_event_ends():
    assert cut_off(_refused(MARIADB)) == ("mysql-bin.000001", 2324)
    assert cut_off(_refused(MYSQL)) == ("binlog.000007", 125)
    # Any other refusal, or the same words under another code, or no file named: not this.
    assert cut_off(_refused("Could not find first log file name in binary log index file")) is None
    assert cut_off(_refused(MARIADB, code=2013)) is None
    assert cut_off(_refused("binlog truncated in the middle of event")) is None


class Stream:
    """A library stream: ``events``, then ``error`` raised (if any)."""

    def __init__(self, events, error=None):
        self.events, self.error, self.closed = events, error, False

    def __iter__(self):
        yield from self.events
        if self.error is not None:
            raise self.error

    def close(self):
        self.closed = True


def _reader(monkeypatch, first, files, later):
    reader = BinlogReader.__new__(BinlogReader)
    reader.settings, reader._settings, reader.offsets = {}, {"read_timeout": 10}, None
    reader.cfg = types.SimpleNamespace(mysql=types.SimpleNamespace(server_id=99))
    reader.start, reader.gtid_start = types.SimpleNamespace(describe=lambda: "f:4"), None
    reader._stream = first
    opened = []

    def new_stream(settings, **kwargs):
        opened.append(kwargs)
        return later
    reader.new_stream = new_stream
    monkeypatch.setattr(reader_mod, "connect", lambda settings: types.SimpleNamespace(
        close=lambda: None))
    monkeypatch.setattr(reader_mod, "binlog_files", lambda conn: files)
    monkeypatch.setattr(reader_mod, "_SEEN_CUT_OFF", set())
    return reader, opened


def test_a_binlog_cut_off_inside_an_event_is_read_on_from_the_next_ones_start(monkeypatch,
                                                                              caplog):
    first = Stream(["a", "b"], _refused(MARIADB))
    later = Stream(["rotate", "c"])
    reader, opened = _reader(monkeypatch, first, ["mysql-bin.000001", "mysql-bin.000002"],
                             later)
    with caplog.at_level(logging.WARNING):
        assert list(reader) == ["a", "b", "rotate", "c"]
    assert opened == [{"log_file": "mysql-bin.000002", "log_pos": 4, "resume_stream": True}]
    assert first.closed and reader._stream is later
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and said[0].startswith(
        "binlog mysql-bin.000001 ends inside an event, at byte 2324"), said
    # Read again (the stream after a batch was taken back), it is passed without a word more.
    caplog.clear()
    reader._stream = Stream(["a"], _refused(MARIADB))
    later.events = ["c"]
    assert list(reader) == ["a", "c"] and caplog.records == []


def test_with_no_binlog_after_it_the_stream_stops_naming_it(monkeypatch):
    reader, opened = _reader(monkeypatch, Stream(["a"], _refused(MARIADB)),
                             ["mysql-bin.000001"], None)
    with pytest.raises(PurgedBinlog, match="binlog mysql-bin.000001 ends inside an event, at "
                       "byte 2324, and no binlog follows it.*Start the server again"):
        list(reader)
    assert opened == []


MARIADB_SAME_ID = ("A slave with the same server_uuid/server_id is already connected; the first "
                   "event 'mysql-bin.000001' at 4, the last event read from 'mysql-bin.000001' "
                   "at 900, the last byte read from 'mysql-bin.000001' at 931.")
MYSQL_SAME_ID = ("A replica with the same server_uuid/server_id as this replica has connected to "
                 "the source; the first event 'binlog.000001' at 4, the last event read from "
                 "'./binlog.000001' at 900, the last byte read from './binlog.000001' at 900.")


@pytest.mark.parametrize("code, text", [(4052, MARIADB_SAME_ID), (1236, MYSQL_SAME_ID),
                                        (1236, MYSQL_SAME_ID.replace("replica", "slave")
                                         .replace("source", "master"))])
def test_a_stream_ended_for_another_reader_of_its_server_id_says_so_and_is_retried(code, text):
    # MySQL says it with the code of a binlog it can't send: it was taken for a purged binlog,
    # and the stream stopped (exit 3) advising a snapshot and a new position.
    start = types.SimpleNamespace(describe=lambda: "binlog.000001:4")
    found = reader_mod._classify(_refused(text, code), start, None, 4242)
    assert isinstance(found, ServerIdTaken) and not isinstance(found, PurgedBinlog)
    said = str(found)
    assert said.startswith("another client connected to read the binlog as server_id 4242 "
                           "(mysql.server_id), and the server ended this stream for it") and \
        "needs a server_id of its own" in said and "snapshot" not in said
    # Any other refusal of the binlog is what it was.
    assert isinstance(reader_mod._classify(_refused("Could not find first log file name in "
                                                    "binary log index file"), start),
                      PurgedBinlog)


# MySQL 8.0.15's words, as a dump met a transaction of another gtid_mode (seen on the server).
_AT = ", at file /m/binlog/mysql-bin.000003, position 195.; the first event '' at 4"
ANONYMOUS_BY_SET = "Cannot replicate anonymous transaction when AUTO_POSITION = 1" + _AT
SET_REFUSED = ("The replication sender thread cannot start in AUTO_POSITION mode: this server "
               "has GTID_MODE = OFF_PERMISSIVE instead of ON.")
ANONYMOUS_WHEN_ON = "Cannot replicate anonymous transaction when @@GLOBAL.GTID_MODE = ON" + _AT
GTID_WHEN_OFF = "Cannot replicate GTID-transaction when @@GLOBAL.GTID_MODE = OFF" + _AT


@pytest.mark.parametrize("text", [ANONYMOUS_BY_SET, SET_REFUSED])
def test_a_dump_by_gtid_set_refused_for_want_of_gtids_is_resumed_by_file(text):
    # Taken for a server lacking the set's transactions, the stream stopped (exit 3) advising
    # another server or a snapshot; the supervisor resumes it by file (WithoutGtids).
    start = types.SimpleNamespace(describe=lambda: "mysql-bin.000001:2779")
    found = reader_mod._classify(_refused(text), start, "u:1-10")
    assert isinstance(found, WithoutGtids) and isinstance(found, StreamInterrupted)
    assert str(found).endswith("it resumes by binlog file and offset")
    # By file the first can't come, and the second's words name no anonymous transaction.
    assert not isinstance(reader_mod._classify(_refused(text), start), WithoutGtids)


# MariaDB 10.11's words (seen on the server), a dump from 0-1-60 logged after 0-1-1000.
HOLE = ("The binlog on the master is missing the GTID 0-1-60 requested by the slave (even "
        "though both a prior and a subsequent sequence number does exist), and GTID strict mode "
        "is enabled")


def test_a_dump_by_gtid_set_mariadb_numbered_out_of_order_refuses_is_resumed_by_file():
    # Taken for a server lacking the stream's transactions: the stream stopped (exit 3).
    start = types.SimpleNamespace(describe=lambda: "mysql-bin.000001:2573",
                                  file="mysql-bin.000001", pos=2573)
    found = reader_mod._classify(_refused(HOLE), start, "0-1-60")
    assert isinstance(found, GtidsOutOfOrder) and isinstance(found, WithoutGtids)
    assert "numbers a GTID domain's transactions out of order" in str(found) and \
        str(found).endswith("at its own place mysql-bin.000001:2573, checked against the "
                            "server's binlog first")
    # A start with no place of its own there (another server's checkpoint, by its set): the
    # server lacks the stream's transactions as far as the stream can tell.
    translated = types.SimpleNamespace(describe=lambda: "gtid=0-1-60", file="", pos=4)
    assert isinstance(reader_mod._classify(_refused(HOLE), translated, "0-1-60"), ServerBehind)


@pytest.mark.parametrize("text", [ANONYMOUS_WHEN_ON, GTID_WHEN_OFF])
@pytest.mark.parametrize("gtid_start", [None, "u:1-10"])
def test_a_transaction_of_another_gtid_mode_stops_the_stream_naming_the_step_back(text,
                                                                                 gtid_start):
    start = types.SimpleNamespace(describe=lambda: "mysql-bin.000001:2779")
    found = reader_mod._classify(_refused(text), start, gtid_start)
    assert type(found) is SourceError
    said = str(found)
    assert said.startswith("MySQL refuses to send the binlog after mysql-bin.000001:2779: "
                           "Cannot replicate ") and \
        "Set gtid_mode back one step (to ON_PERMISSIVE from ON, OFF_PERMISSIVE from OFF)" in said


def test_a_lost_stream_is_said_once_by_the_streamer_not_as_the_librarys_reconnect(
        monkeypatch, caplog):
    # The library logs a warning over three lines that it will ask for the stream again, then
    # asks: the streamer refuses (it resumes from its checkpoint) and says why in its own words.
    from pymysqlreplication.logger import logger as library_log
    from streamer.errors import StreamInterrupted

    monkeypatch.setattr(reader_mod, "BinlogConnection", lambda **kwargs: types.SimpleNamespace())
    monkeypatch.setattr(reader_mod.caughtup, "count_reads", lambda conn: None)
    connector = reader_mod._Connector()
    connector(host="h")  # the stream's first connection
    with caplog.at_level(logging.WARNING):
        library_log.warning("""
                          A pymysql.OperationalError error occurred, Re-request the connection.
                        """)
        library_log.warning("another of the library's warnings")
        with pytest.raises(StreamInterrupted, match=r"^the binlog connection was lost \(the "
                           r"server closed it, or the network dropped it\)$"):
            connector(host="h")
    assert [r.getMessage() for r in caplog.records] == ["another of the library's warnings"]


@pytest.mark.parametrize("code,unreachable", [
    (2003, True), (2013, True), (3032, True),  # refused, lost, MySQL's offline_mode
    (3118, False), (4151, False), (3159, False), (1045, False),  # locked, TLS required, denied
])
def test_only_a_server_that_cant_be_reached_is_moved_on_from(monkeypatch, code, unreachable):
    # A login refused mid-run (an account locked since the start) was taken for a server down
    # (every code from 2000), and mysql.hosts moved on to a replica, which refuses it alike.
    from streamer.errors import ServerUnreachable

    def refuse(settings):
        raise pymysql.err.OperationalError(code, "no")
    monkeypatch.setattr(reader_mod, "connect", refuse)
    reader = BinlogReader.__new__(BinlogReader)
    reader.settings, reader.where = {}, "MySQL at a:1"
    with pytest.raises(pymysql.err.OperationalError if not unreachable else ServerUnreachable):
        reader.check_start()
