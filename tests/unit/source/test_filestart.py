"""The GTIDs a binlog file begins after, read from MySQL's Previous_gtids and MariaDB's Gtid_list
as their servers' sources lay them out."""
import struct
import uuid
from types import SimpleNamespace

from streamer.position import GtidSet
from streamer.source.filestart import FileStart, gtid_list, previous_gtids

A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
B = "4a0f6d3c-0b1e-11ef-8a4b-0242ac120002"


def _previous(sets):
    """A Previous_gtids body: uuid -> [(first, past the last)]."""
    body = struct.pack("<Q", len(sets))
    for sid, intervals in sets.items():
        body += uuid.UUID(sid).bytes + struct.pack("<Q", len(intervals))
        body += b"".join(struct.pack("<QQ", a, b) for a, b in intervals)
    return body


def _list(entries, flags=0):
    return struct.pack("<I", len(entries) | flags) + b"".join(
        struct.pack("<IIQ", *e) for e in entries)


def _event(code, body):
    event = FileStart.__new__(FileStart)
    ctl = SimpleNamespace(_get_dbms=lambda: "mysql" if code == 35 else "mariadb")
    FileStart.__init__(event, _Packet(code, body), len(body), None, ctl)
    return event


class _Packet:
    def __init__(self, code, body):
        self.event_type, self.body, self.at = code, body, 0
        self.log_pos, self.event_size, self.timestamp, self.server_id, self.flags = 0, 0, 0, 1, 0

    def read(self, n):
        out = self.body[self.at:self.at + n]
        self.at += n
        return out


def test_previous_gtids_intervals_end_past_their_last_transaction():
    found = previous_gtids(_previous({A: [(1, 6), (8, 9)], B: [(1, 4)]}))
    assert str(found) == f"{A}:1-5:8,{B}:1-3"
    assert previous_gtids(_previous({})).mysql == {}


def test_a_tagged_sets_format_is_not_read():
    body = bytearray(_previous({A: [(1, 6)]}))
    body[7] = 1  # the top byte of the count: the tagged format
    assert previous_gtids(bytes(body)) is None
    assert not _event(35, bytes(body)).holds(GtidSet(f"{A}:1-3"))


def test_a_gtid_lists_count_leaves_its_flags_out():
    entries = [(0, 1, 7), (0, 2, 9), (1, 1, 3)]
    assert gtid_list(_list(entries, flags=0x10000000)) == {(0, 1): 7, (0, 2): 9, (1, 1): 3}


def test_a_file_holds_a_set_when_it_begins_after_every_transaction_of_it():
    mysql = _event(35, _previous({A: [(1, 11)], B: [(1, 3), (5, 6)]}))
    assert mysql.holds(GtidSet(f"{A}:1-10,{B}:1-2:5"))
    assert not mysql.holds(GtidSet(f"{A}:1-11"))
    assert not mysql.holds(GtidSet(f"{B}:3"))  # a gap: 3 comes in this file or later
    mariadb = _event(163, _list([(0, 1, 7), (0, 2, 9), (1, 1, 3)]))
    assert mariadb.holds(GtidSet("0-1-7,1-1-3")) and mariadb.holds(GtidSet("0-2-9"))
    assert not mariadb.holds(GtidSet("0-1-8"))
    assert not mariadb.holds(GtidSet("2-1-1"))  # a domain the file knows nothing of
    # By server id too: 0-3-5 was not written before the file, whatever 0-2-9 says.
    assert not mariadb.holds(GtidSet("0-3-5"))
    # A body cut short is not read, and holds nothing.
    assert not _event(163, _list([(0, 1, 7)])[:-4]).holds(GtidSet("0-1-1"))


def test_the_librarys_file_start_classes_are_replaced_only_where_they_are_the_tested_ones(
        monkeypatch):
    import pytest
    from pymysqlreplication.packet import BinLogPacketWrapper

    from streamer import errors
    from streamer.source import patches

    patches.apply()
    found = BinLogPacketWrapper.__dict__[patches.EVENT_MAP_ATTR]
    assert found[35] is FileStart and found[163] is FileStart  # applied (patches.apply)
    monkeypatch.setitem(found, 163, object)  # a library that reads Gtid_list another way
    with pytest.raises(errors.PatchTargetMissing, match=r"maps the event types \[163\]"):
        patches.event_map()
