"""MySQL's compressed transactions, on the layout codecs/binary.cpp documents, compressed with the
zstd binding itself (no MySQL 8.0.20+ runs here): the events a payload holds are decoded as a
stream's, and the engine publishes them as a plain transaction's, with the resume skip right."""
import os
import struct

import pytest

from streamer.errors import UnsupportedEvent
from streamer.position import Position
from streamer.source import patches, payload
from tests.unit.engine_parts import BINLOGS, ReplayedBinlog, _field, compressed, payload_body

patches.apply()


def test_the_header_fields_and_the_payload_are_read_as_documented():
    body = payload_body(b"x" * 300)
    fields, at = payload.header(body)
    assert fields[payload.COMPRESSION] == payload.ZSTD and fields[payload.UNCOMPRESSED_SIZE] == 300
    assert payload.inflate(body, "here") == b"x" * 300
    assert payload.inflate(payload_body(b"abc", payload.NONE), "here") == b"abc"


def test_a_payload_that_does_not_inflate_to_its_size_is_refused_naming_where():
    body = payload_body(b"y" * 50)
    broken = body[:-5] + b"\x00" * 5
    with pytest.raises(UnsupportedEvent, match="compressed transaction at offset 7 can't be read"):
        payload.inflate(broken, "offset 7")
    with pytest.raises(UnsupportedEvent, match="compression type 3"):
        payload.inflate(_field(payload.COMPRESSION, 3) + b"\x00", "offset 7")


def compressed_binlog():
    """engine.binlog with each transaction's events in a Transaction_payload event."""
    with open(os.path.join(BINLOGS, "engine.binlog"), "rb") as fh:
        return compressed(fh.read())


def test_a_compressed_transactions_events_are_published_as_a_plain_ones_once_across_a_restart(
        make):
    from tests.unit.engine.test_engine import ALL, FILE

    data = compressed_binlog()

    def replay(start, streamer, publisher, stop=None):
        reader = ReplayedBinlog("engine.binlog", start, on_end=streamer.request_stop, data=data)
        publisher.on_commit = stop
        with reader:
            streamer.stream(publisher, reader, start)

    streamer, publisher = make(batch={"max_messages": 2})

    def inside(position):
        if position.rows:
            streamer.request_stop()

    replay(Position(FILE, 4), streamer, publisher, inside)
    first, checkpoint = publisher.changes(), publisher.committed
    assert checkpoint.rows > 0 and first == ALL[:len(first)]
    again, resumed = make(batch={"max_messages": 2})
    replay(checkpoint, again, resumed)
    assert first + resumed.changes() == ALL
    assert struct.unpack_from("<B", data, 4 + 4)[0] == 15  # the format description comes first
