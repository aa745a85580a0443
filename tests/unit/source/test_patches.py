"""The library fixes: applied on purpose, refused on an untested library, checked target by target,
and each one doing what it says (a correctness fix changes what the library reads; a speed fix
reads the same, faster)."""
import datetime
import json
import logging
import subprocess
import sys
from types import SimpleNamespace

import pytest
from pymysqlreplication.column import Column
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.row_event import RowsEvent
from pymysqlreplication.table import Table

from streamer import errors
from streamer.source import patches
from tests.unit.source.test_mysql_decimal import mysql_pack
from tests.unit.source.test_rowplan import Packet

patches.apply()


def library(owner, attr):
    """The library's own function, which the fix replaced (a property's getter)."""
    installed = getattr(owner, attr)
    return (installed.fget if isinstance(installed, property) else installed).__wrapped__


def reader_over(data: bytes):
    """A rows event reading ``data`` through the library's own packet wrapper."""
    wrapper = BinLogPacketWrapper.__new__(BinLogPacketWrapper)
    wrapper.__dict__.update({"packet": Packet(data), "read_bytes": 0,
                             "_BinLogPacketWrapper__data_buffer": b""})
    ev = RowsEvent.__new__(RowsEvent)
    ev.__dict__.update({"packet": wrapper, "_ignore_decode_errors": False})
    return ev


# -- refusing an untested library -----------------------------------------------------------------
def test_the_installed_libraries_are_the_tested_versions():
    import pymysql
    import pymysqlreplication

    assert patches.installed_version("mysql-replication", pymysqlreplication) in \
        patches.TESTED["mysql-replication"]
    assert patches.installed_version("PyMySQL", pymysql) in patches.TESTED["PyMySQL"]


def test_an_unknown_library_version_is_refused_naming_it_and_the_way_out(monkeypatch):
    monkeypatch.setattr(patches, "_applied", {})
    monkeypatch.setattr(patches, "installed_version",
                        lambda name, module: "1.0.99" if name == "mysql-replication" else "1.2.4")
    before = RowsEvent._read_column_data
    with pytest.raises(errors.LibraryVersionUnsupported) as refused:
        patches.apply()
    message = str(refused.value)
    assert "mysql-replication 1.0.99 (tested: 1.0.17)" in message and "PyMySQL" not in message
    assert "mysql.allow_untested_libraries" in message
    assert refused.value.exit_code == errors.EXIT_SOURCE
    assert RowsEvent._read_column_data is before and not patches._applied  # nothing replaced


def test_the_config_switch_runs_an_untested_version_with_a_loud_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="streamer.source.patches"):
        patches.check_versions({"mysql-replication": "1.0.99", "PyMySQL": None}, True)
    assert "UNTESTED library version: mysql-replication 1.0.99" in caplog.text
    assert "PyMySQL (version unknown)" in caplog.text


# -- every target checked before anything is replaced ---------------------------------------------
class Library:
    def _Library__read(self, column):
        return column


def test_a_renamed_target_is_refused_instead_of_assigned_silently():
    with pytest.raises(errors.PatchTargetMissing) as missing:
        patches.check_target(Library, "_Library__read_time2", ("self", "column"))
    assert "Library._Library__read_time2 is missing" in str(missing.value)
    assert "mysql-replication 1.0.17" in str(missing.value)


def test_a_target_with_other_parameters_is_refused():
    with pytest.raises(errors.PatchTargetMissing) as changed:
        patches.check_target(Library, "_Library__read", ("self", "column", "unsigned"))
    assert "takes ('self', 'column')" in str(changed.value)


def test_an_inherited_attribute_is_not_taken_for_the_target():
    class Child(Library):
        pass

    with pytest.raises(errors.PatchTargetMissing):
        patches.check_target(Child, "_Library__read", ("self", "column"))


def test_every_fix_is_installed_over_the_librarys_function_it_checked():
    for fix in patches.FIXES:
        installed = getattr(fix.owner, fix.attr)
        installed = installed.fget if isinstance(installed, property) else installed
        assert installed.__wrapped__ is patches._applied[fix.target()], fix.target()
        assert patches.check_target(fix.owner, fix.attr, fix.params) is installed.__wrapped__


def test_applying_again_changes_nothing():
    before = {f.target(): getattr(f.owner, f.attr) for f in patches.FIXES}
    patches.apply()
    assert before == {f.target(): getattr(f.owner, f.attr) for f in patches.FIXES}


# -- what each fix does ---------------------------------------------------------------------------
def test_negative_time_with_fraction_is_corrected():
    # TIME(6) '-00:00:00.000001' is one 48-bit integer, -1 + 0x800000000000; the library read
    # its whole and fractional parts apart and got -0.999999 s.
    raw = (-1 + 0x800000000000).to_bytes(6, "big")
    column = SimpleNamespace(fsp=6)
    fixed = RowsEvent._RowsEvent__read_time2(reader_over(raw), column)
    wrong = library(RowsEvent, "_RowsEvent__read_time2")(reader_over(raw), column)
    assert fixed == -datetime.timedelta(microseconds=1)
    assert wrong != fixed


@pytest.mark.parametrize("value", ["-1234.5678", "0.0000", "99999999.9999", "-0.0001"])
def test_decimal_reads_what_the_library_reads(value):
    column = SimpleNamespace(precision=12, decimals=4)
    raw = mysql_pack(value, 12, 4)
    got = RowsEvent._RowsEvent__read_new_decimal(reader_over(raw), column)
    want = library(RowsEvent, "_RowsEvent__read_new_decimal")(reader_over(raw), column)
    assert got == want and got.as_tuple() == want.as_tuple()


@pytest.mark.parametrize("charset,text", [("latin1", "plain"), ("latin1", "café"),
                                          ("utf8mb4", "naïve ☃"), ("ascii", "abc")])
def test_strings_read_what_the_library_reads(charset, text):
    raw = text.encode("cp1252" if charset == "latin1" else "utf-8")
    data = bytes([len(raw)]) + raw
    column = SimpleNamespace(character_set_name=charset)

    got = RowsEvent._RowsEvent__read_string(reader_over(data), 1, column)
    want = library(RowsEvent, "_RowsEvent__read_string")(reader_over(data), 1, column)
    assert got == want == text


@pytest.mark.parametrize("keys", [[], ["id"], ["a", "b"]])
def test_a_table_finds_the_primary_key_the_library_finds(keys):
    cols = []
    for name in ("id", "a", "b", "v"):
        col = Column.__new__(Column)
        col.__dict__.update({"name": name, "is_primary": name in keys, "type": 3})
        cols.append(col)
    ours = Table(7, "db", "t", cols)
    theirs = Table.__new__(Table)
    library(Table, "__init__")(theirs, 7, "db", "t", cols)
    assert ours.primary_key == theirs.primary_key
    assert (ours.table_id, ours.schema, ours.table) == (7, "db", "t")


def test_a_tables_data_is_the_librarys_built_once():
    col = Column.__new__(Column)
    col.__dict__.update({"name": "id", "is_primary": True, "type": 3})
    table = Table(7, "db", "t", [col])
    want = library(Table, "data")(table)
    assert want == {"table_id": 7, "schema": "db", "table": "t", "columns": [col],
                    "primary_key": "id", "column_name_flag": False}
    first = table.data
    assert first == want
    assert table.data is first  # kept, not built again for the next rows event
    assert table == Table(7, "db", "t", [col])  # __eq__ compares the data dicts


def test_importing_the_streamer_changes_nothing_in_the_libraries():
    # In a fresh interpreter: every module that `streamer run` and its observers import.
    code = ("import json, streamer.cli, streamer.engine.supervisor, streamer.ops.observe, "
            "streamer.ops.reporter, streamer.ops.heartbeat, streamer.source.reader\n"
            "from pymysqlreplication.row_event import RowsEvent, TableMapEvent\n"
            "from streamer.source import patches\n"
            "print(json.dumps([patches.applied(), RowsEvent._read_column_data.__module__,\n"
            "                  TableMapEvent.__init__.__module__]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [False, "pymysqlreplication.row_event",
                                      "pymysqlreplication.row_event"]


def _string(charset, raw):
    column = SimpleNamespace(character_set_name=charset)  # the library's name: the codec it chose
    data = bytes([len(raw)]) + raw
    return (lambda reader: reader(reader_over(data), 1, column))


def test_latin1_decodes_every_byte_as_mysql_defines_it():
    read = _string("cp1252", bytes(range(128, 256)))
    got = read(RowsEvent._RowsEvent__read_string)
    assert len(got) == 128
    undefined = {0x81, 0x8D, 0x8F, 0x90, 0x9D}
    for byte, char in zip(range(128, 256), got):
        assert char == (chr(byte) if byte in undefined else bytes([byte]).decode("cp1252")), byte
    # Double-encoded UTF-8: 'Á' is C3 81. The library refused the row, on every restart.
    poison = _string("cp1252", b"\xc3\x81")
    assert poison(RowsEvent._RowsEvent__read_string) == "Ã\x81"
    with pytest.raises(UnicodeDecodeError):
        poison(library(RowsEvent, "_RowsEvent__read_string"))


@pytest.mark.parametrize("charset,codec,text", [("utf16", "utf-16-be", "A€😀"),
                                                ("utf16le", "utf-16-le", "A€😀"),
                                                ("ucs2", "utf-16-be", "A€"),
                                                ("utf32", "utf-32-be", "A€😀")])
def test_utf16_ucs2_and_utf32_decode_in_mysqls_byte_order(charset, codec, text):
    read = _string(charset, text.encode(codec))
    assert read(RowsEvent._RowsEvent__read_string) == text
    try:  # the library read it little-endian: other characters, or none at all
        theirs = read(library(RowsEvent, "_RowsEvent__read_string"))
    except (UnicodeDecodeError, LookupError) as refused:
        theirs = refused
    assert theirs != text


@pytest.mark.parametrize("raw", [b"", b"\x00", b"\x12>Eg"])
def test_a_binary_value_is_its_bytes_even_empty(raw):
    # A BINARY(16) of zeros (a MariaDB UUID 00000000-...) is stored empty. CPython decodes b""
    # without looking for the codec, so asking the decode whether 'binary' has one said "".
    read = _string("binary", raw)
    got = read(RowsEvent._RowsEvent__read_string)
    assert isinstance(got, bytes) and got == raw


class _TableMapPacket:
    """What the table-map patch reads of a packet: the event body's bytes and its time."""

    def __init__(self, body):
        self.packet = SimpleNamespace(get_bytes=lambda at, size: body)
        self.read_bytes = 0
        self.timestamp = 1700000000


class _Event:
    pass


def test_table_map_parses_are_kept_per_stream_while_streams_alternate():
    # The JIT warm-up's replayed streams run between the live stream's batches: the live
    # stream's table maps are not parsed again after each of them.
    from streamer.source.patches import table_map as tm

    tm.forget()
    parsed = []

    def parse(self, from_packet, event_size, table_map, ctl_connection, **kwargs):
        parsed.append(next(k for k, v in streams.items() if v is table_map))
        self.__dict__.update(table_id=7, table_obj=object(), _processed=True,
                             packet=from_packet, timestamp=from_packet.timestamp)
        table_map[7] = self.table_obj

    init = tm.cached_init(parse)
    streams = {name: {} for name in ("live", "warm1", "warm2")}

    def event(name, body=b"same bytes"):
        ev = _Event()
        init(ev, _TableMapPacket(body), len(body), streams[name], None)
        return ev

    first = event("live")
    event("warm1")
    again = event("live")
    event("warm2")
    last = event("live")
    assert parsed == ["live", "warm1", "warm2"]
    assert first.table_obj is again.table_obj is last.table_obj is streams["live"][7]
    assert streams["warm1"][7] is not first.table_obj  # each stream's parse is its own
    # Only the last few streams are kept: one read after STREAMS_KEPT others parses again.
    for i in range(tm.STREAMS_KEPT):
        streams[f"other{i}"] = {}
        event(f"other{i}")
    event("live")
    assert parsed[-1] == "live" and parsed.count("live") == 2
    tm.forget()
