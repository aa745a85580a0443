"""MySQL 8.4's tagged GTID event, on the layout MySQL's serialization library documents (no
MySQL 8.4 runs here): its variable-length integers against the documentation's own examples,
the event's fields, and a binlog whose transactions all carry tagged GTIDs streamed and resumed
by GTID with nothing lost or doubled."""
import os
import uuid

import pytest

from streamer.errors import UnsupportedEvent
from streamer.position import GtidSet, Position
from streamer.source import gtidtag, patches
from tests.unit.engine_parts import BINLOGS, HEADER, MAGIC, ReplayedBinlog

patches.apply()

SOURCE = uuid.UUID("3e11fa47-71ca-11e1-9e33-c80aa9429562")


def uint(value):
    """The serialization library's variable-length unsigned integer (written here to test the
    reader; MySQL's writer is the reference)."""
    for size in range(1, 9):
        if value < 1 << (7 * size):
            return ((value << size) | ((1 << (size - 1)) - 1)).to_bytes(size, "little")
    return b"\xff" + value.to_bytes(8, "little")


def sint(value):
    return uint(value << 1 if value >= 0 else ((-(value + 1)) << 1) | 1)


def body(gno, tag="etl", extra=b"", last_needed=3, version=2):
    fields = (uint(0) + uint(1) + uint(gtidtag.SID) + b"".join(uint(b) for b in SOURCE.bytes)
              + uint(gtidtag.GNO) + sint(gno) + uint(gtidtag.TAG) + uint(len(tag)) + tag.encode()
              + uint(gtidtag.LAST_COMMITTED) + sint(4) + uint(gtidtag.SEQUENCE_NUMBER) + sint(5)
              + uint(gtidtag.IMMEDIATE_TS) + uint(1700000000123456) + extra)
    head = uint(last_needed)
    size = 1 + len(head) + len(fields) + 1
    size += len(uint(size)) - 1
    return bytes([version]) + uint(size) + head + fields


def test_variable_length_integers_read_as_the_documentation_shows_them():
    # Its examples, written most significant byte first: 65535 is 00000111 11111111 11111011;
    # signed, 65535 is 00001111 11111111 11110011, -65535 ...11101011, -65536 ...11111011.
    assert gtidtag.read_uint(bytes([0xFB, 0xFF, 0x07]), 0) == (65535, 3)
    assert gtidtag.read_int(bytes([0xF3, 0xFF, 0x0F]), 0) == (65535, 3)
    assert gtidtag.read_int(bytes([0xEB, 0xFF, 0x0F]), 0) == (-65535, 3)
    assert gtidtag.read_int(bytes([0xFB, 0xFF, 0x0F]), 0) == (-65536, 3)
    for value in (0, 1, 127, 128, 2 ** 56 - 1, 2 ** 56, 2 ** 63 + 5, 2 ** 64 - 1):
        assert gtidtag.read_uint(uint(value), 0) == (value, len(uint(value)))
    assert len(uint(2 ** 64 - 1)) == 9 and len(uint(127)) == 1
    with pytest.raises(ValueError, match="runs past the end"):
        gtidtag.read_uint(bytes([0x03, 0x01]), 0)


def test_a_tagged_gtid_events_fields_are_read_and_a_newer_optional_field_ends_the_read():
    fields = gtidtag.parse(body(77, "Nightly_Load"))
    assert fields[gtidtag.SID] == SOURCE.bytes and fields[gtidtag.GNO] == 77
    assert fields[gtidtag.TAG] == "Nightly_Load" and fields[gtidtag.SEQUENCE_NUMBER] == 5
    assert fields[gtidtag.IMMEDIATE_TS] == 1700000000123456
    later = gtidtag.parse(body(78, extra=uint(40) + uint(9)))  # a field id from a newer server
    assert later[gtidtag.GNO] == 78
    with pytest.raises(ValueError, match="field 40, which this reader does not know"):
        gtidtag.parse(body(78, extra=uint(40) + uint(9), last_needed=40))
    with pytest.raises(ValueError, match="serialization version 3"):
        gtidtag.parse(body(1, version=3))
    with pytest.raises(ValueError, match="is missing"):
        gtidtag.parse(bytes([2]) + uint(3) + uint(0))


def retagged(tag="etl"):
    """engine.binlog with each MariaDB GTID event (type 162) replaced by a MySQL 8.4 tagged
    GTID event for SOURCE:tag:seq, and every later offset moved accordingly."""
    with open(os.path.join(BINLOGS, "engine.binlog"), "rb") as fh:
        data = fh.read()
    out, at = bytearray(MAGIC), 4
    while at < len(data):
        ts, kind, server, size, _, flags = HEADER.unpack_from(data, at)
        payload = data[at + HEADER.size:at + size]
        if kind == 162:
            seq = int.from_bytes(payload[:8], "little")
            kind, payload = gtidtag.TYPE, body(seq, tag) + b"\0" * 4  # checksum not verified
        length = HEADER.size + len(payload)
        out += HEADER.pack(ts, kind, server, length, len(out) + length, flags) + payload
        at += size
    return bytes(out)


def test_a_binlog_of_tagged_gtids_streams_and_resumes_by_gtid_with_nothing_lost_or_doubled(make):
    from tests.unit.engine.test_engine import ALL, FILE

    data = retagged()
    streamer, publisher = make(batch={"max_messages": 2})

    def inside(position):
        if position.rows:
            streamer.request_stop()
    publisher.on_commit = inside
    reader = ReplayedBinlog("engine.binlog", Position(FILE, 4), on_end=streamer.request_stop,
                            data=data)
    with reader:
        streamer.stream(publisher, reader, Position(FILE, 4))
    first, checkpoint = publisher.changes(), publisher.committed
    assert checkpoint.rows > 0 and first == ALL[:len(first)]
    assert checkpoint.tx_gtid.startswith(f"{SOURCE}:etl:")
    assert checkpoint.gtid_set == f"{SOURCE}:etl:4-7"  # the recording's first four transactions
    assert not GtidSet(checkpoint.gtid_set).contains(GtidSet(checkpoint.tx_gtid))

    again, resumed = make(batch={"max_messages": 2})
    again.cfg["mysql"]["position_mode"] = "gtid"
    reader = ReplayedBinlog("engine.binlog", checkpoint, on_end=again.request_stop, data=data,
                            rotate_pos=4)
    with reader:
        again.stream(resumed, reader, checkpoint)
    assert first + resumed.changes() == ALL
    assert GtidSet(resumed.committed.gtid_set).contains(GtidSet(checkpoint.tx_gtid))


def test_a_tagged_gtid_event_that_cant_be_read_is_refused_naming_its_offset(make):
    from tests.unit.engine.test_engine import FILE

    data = bytearray(retagged())
    first = 4
    while HEADER.unpack_from(data, first)[1] != gtidtag.TYPE:
        first += HEADER.unpack_from(data, first)[3]
    data[first + HEADER.size] = 9  # its serialization version
    streamer, publisher = make()
    reader = ReplayedBinlog("engine.binlog", Position(FILE, 4), data=bytes(data))
    with pytest.raises(UnsupportedEvent, match=rf"tagged GTID event \(type 42\) at offset {first}"):
        with reader:
            streamer.stream(publisher, reader, Position(FILE, 4))
    assert publisher.changes() == []
