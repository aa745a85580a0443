"""Offsets worked out for a server that writes none inside transactions (MariaDB 11.4's
binlog_legacy_event_pos=OFF), on a recorded binlog rewritten as such a server writes it."""
import logging
import os
from types import SimpleNamespace

from pymysqlreplication.event import FormatDescriptionEvent

from streamer.position import Position
from streamer.source import patches
from streamer.source.positions import Offsets, writes_offsets
from tests.unit.engine_parts import BINLOGS, HEADER, MAGIC, ReplayedBinlog

patches.apply()
FILE = "mysql-bin.000002"
# Inside a transaction: annotations, table maps and rows events (v1 and v2).
INSIDE = {160, 19, 23, 24, 25, 30, 31, 32}


def _events(data):
    at = 4
    while at < len(data):
        size = HEADER.unpack_from(data, at)[3]
        yield at, data[at:at + size]
        at += size


def without_offsets(drop_annotation_at=None):
    """engine.binlog as MariaDB 11.4 writes it: no end offset on events inside a transaction;
    the annotation at ``drop_annotation_at`` left out, as a server not asked for it sends."""
    with open(os.path.join(BINLOGS, "engine.binlog"), "rb") as fh:
        data = fh.read()
    out = bytearray(MAGIC)
    for at, event in _events(data):
        ts, kind, server, size, log_pos, flags = HEADER.unpack_from(event, 0)
        if at == drop_annotation_at:
            continue
        out += HEADER.pack(ts, kind, server, size, 0 if kind in INSIDE else log_pos, flags)
        out += event[HEADER.size:]
    return bytes(out)


def offsets(reader):
    return [(e.__class__.__name__, e.packet.log_pos) for e in reader]


def test_the_offsets_worked_out_are_the_ones_the_server_would_have_written():
    start = Position(FILE, 4)
    truth = [e for e in offsets(ReplayedBinlog("engine.binlog", start, annotate=True))
             if e[0] != "MariadbAnnotateRowsEvent"]
    zeroed = ReplayedBinlog("engine.binlog", start, annotate=True, data=without_offsets())
    assert any(pos == 0 for _, pos in offsets(zeroed))  # the rewrite took
    filler = Offsets()
    filled = offsets(filler.filled(ReplayedBinlog("engine.binlog", start, annotate=True,
                                                  data=without_offsets())))
    assert filled == truth and filler.mismatches == 0
    assert any(name == "WriteRowsEvent" for name, _ in filled)


def test_a_dump_begun_inside_a_file_sends_its_format_description_with_no_offset(caplog):
    # As MariaDB 11.4 sends it (seen on a dump by file from inside a file): the rotate, the
    # file's format description with log_pos 0, then the transaction the dump begins at. The
    # description lies at the file's start, not where the dump reads: no offset is worked out
    # from it, and none found wrong.
    start = Position(FILE, 1234)  # transaction 2
    truth = [e for e in offsets(ReplayedBinlog("engine.binlog", start, annotate=True))
             if e[0] != "MariadbAnnotateRowsEvent"]
    sent = list(ReplayedBinlog("engine.binlog", start, annotate=True, data=without_offsets()))
    description = FormatDescriptionEvent.__new__(FormatDescriptionEvent)
    description.packet = SimpleNamespace(log_pos=0, event_size=252)
    sent.insert(1, description)
    filler = Offsets()
    with caplog.at_level(logging.ERROR):
        filled = offsets(filler.filled(sent))
    assert filled[1] == ("FormatDescriptionEvent", 0)
    assert filled[:1] + filled[2:] == truth
    assert filler.mismatches == 0 and caplog.text == ""


def test_an_event_the_server_did_not_send_is_named_when_the_transaction_ends(caplog):
    with open(os.path.join(BINLOGS, "engine.binlog"), "rb") as fh:
        annotations = [at for at, e in _events(fh.read()) if e[4] == 160]
    data = without_offsets(drop_annotation_at=annotations[1])
    filler = Offsets()
    with caplog.at_level(logging.ERROR):
        list(filler.filled(ReplayedBinlog("engine.binlog", Position(FILE, 4), annotate=True,
                                          data=data)))
    assert filler.mismatches == 1
    assert "were wrong by" in caplog.text and "source.pos are off" in caplog.text


class Variables:
    def __init__(self, rows):
        self.rows = rows

    def cursor(self):
        rows = self.rows

        class Cursor:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                pass

            def execute(self, sql):
                assert "binlog_legacy_event_pos" in sql

            def fetchone(self):
                return rows[0] if rows else None
        return Cursor()


def test_only_a_server_with_binlog_legacy_event_pos_off_leaves_offsets_out():
    assert writes_offsets(Variables([]))  # MySQL, MariaDB before 11.4
    assert writes_offsets(Variables([("binlog_legacy_event_pos", "ON")]))
    assert not writes_offsets(Variables([("binlog_legacy_event_pos", "OFF")]))


def test_a_dump_command_asks_for_annotations_and_nothing_else_changes():
    import struct

    from streamer.source.positions import ask_for_annotations

    class Conn:
        sent = []

        def _write_bytes(self, data):
            self.sent.append(data)

    conn = Conn()
    ask_for_annotations(conn)
    # COM_BINLOG_DUMP as the library writes it for a start by file and offset: length, command,
    # offset, flags (non-blocking), server id, file name.
    name = b"mysql-bin.000007"
    dump = (struct.pack("<i", len(name) + 11) + bytes([0x12]) + struct.pack("<I", 1234)
            + struct.pack("<H", 0x01) + struct.pack("<I", 4201) + name)
    conn._write_bytes(dump)
    conn._write_bytes(b"\x05\x00\x00\x00\x03SELECT 1")
    sent, other = Conn.sent
    assert struct.unpack_from("<H", sent, 9)[0] == 0x03  # non-blocking, and annotations
    assert sent[:9] == dump[:9] and sent[11:] == dump[11:]
    assert other == b"\x05\x00\x00\x00\x03SELECT 1"
