"""ENUM and SET members in their column's charset (source.patches.table_map), on a recording.

binlogs/members.binlog was recorded on MariaDB 10.11 (binlogs/members.sql): app.m has latin1,
ucs2 and utf8mb4 ENUMs and a latin1 SET, and a row of each member, and one of NULLs. (Against
the real servers, in the binlog and a snapshot, compared with SELECT: tests/e2e/test_types.py.)
"""
from pymysqlreplication.row_event import TableMapEvent, WriteRowsEvent

from streamer.position import Position
from streamer.source import patches
from tests.unit.engine_parts import ReplayedBinlog

patches.apply()

MEMBERS = {"e": ["", "café", "naïve", "plain"], "s": ["größe", "x", "ü"], "u": ["", "Ā€", "b"],
           "j": ["", "日本", "z"]}


def _events(kind):
    return [e for e in ReplayedBinlog("members.binlog", Position("mysql-bin.000002", 4))
            if isinstance(e, kind) and e.table == "m"]


def _columns():
    return {c.name: c for c in _events(TableMapEvent)[0].columns}


def test_the_library_alone_reads_members_that_are_no_utf8_as_empty(monkeypatch):
    originals = patches._applied
    monkeypatch.setattr(TableMapEvent, "__init__", TableMapEvent.__init__.__wrapped__)
    monkeypatch.setattr(TableMapEvent, "_read_type_values", originals[
        "pymysqlreplication.row_event.TableMapEvent._read_type_values"])
    cols = _columns()
    assert cols["e"].enum_values == ["", "", "", "plain"] and cols["s"].set_values[0] == ""
    assert cols["j"].enum_values == MEMBERS["j"]


def test_members_are_read_in_their_columns_charset():
    cols = _columns()
    assert {name: cols[name].enum_values if name != "s" else cols[name].set_values
            for name in MEMBERS} == MEMBERS


def test_rows_carry_the_members_text():
    rows = [row["values"] for e in _events(WriteRowsEvent) for row in e.rows]
    assert [(r["e"], r["s"], r["u"], r["j"]) for r in rows[:2]] == [
        ("café", {"größe", "ü"}, "Ā€", "日本"), ("naïve", {"x"}, "b", "z")]
    assert (rows[2]["e"], rows[2]["u"], rows[2]["j"]) == (None, None, None)
