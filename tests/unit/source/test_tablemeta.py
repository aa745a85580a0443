"""What the library leaves wrong of a table map's optional metadata (source.patches.table_map),
on a recording.

binlogs/tablemeta.binlog was recorded on MariaDB 10.11 (binlogs/tablemeta.sql): app.m has latin1,
ucs2 and utf8mb4 ENUMs and a latin1 SET, and a row of each member, and one of NULLs; app.p and
app.q have primary keys with a prefix part. (Against the real servers, in the binlog and a
snapshot: tests/e2e/test_types.py.)
"""
from pymysqlreplication.row_event import TableMapEvent, WriteRowsEvent

from streamer.position import Position
from streamer.source import patches
from tests.unit.engine_parts import ReplayedBinlog

patches.apply()

MEMBERS = {"e": ["", "café", "naïve", "plain"], "s": ["größe", "x", "ü"], "u": ["", "Ā€", "b"],
           "j": ["", "日本", "z"]}


def _events(kind, table="m"):
    return [e for e in ReplayedBinlog("tablemeta.binlog", Position("mysql-bin.000002", 4))
            if isinstance(e, kind) and e.table == table]


def _columns(table="m"):
    return {c.name: c for c in _events(TableMapEvent, table)[0].columns}


def _keys():
    return {t: [n for n, c in _columns(t).items() if c.is_primary] for t in ("m", "p", "q")}


def test_the_library_alone_reads_members_that_are_no_utf8_as_empty(monkeypatch):
    originals = patches._applied
    monkeypatch.setattr(TableMapEvent, "__init__", TableMapEvent.__init__.__wrapped__)
    monkeypatch.setattr(TableMapEvent, "_read_type_values", originals[
        "pymysqlreplication.row_event.TableMapEvent._read_type_values"])
    cols = _columns()
    assert cols["e"].enum_values == ["", "", "", "plain"] and cols["s"].set_values[0] == ""
    assert cols["j"].enum_values == MEMBERS["j"]
    assert _keys() == {"m": ["id"], "p": [], "q": []}  # the prefix keys: none


def test_members_are_read_in_their_columns_charset():
    cols = _columns()
    assert {name: cols[name].enum_values if name != "s" else cols[name].set_values
            for name in MEMBERS} == MEMBERS


def test_rows_carry_the_members_text():
    rows = [row["values"] for e in _events(WriteRowsEvent) for row in e.rows]
    assert [(r["e"], r["s"], r["u"], r["j"]) for r in rows[:2]] == [
        ("café", {"größe", "ü"}, "Ā€", "日本"), ("naïve", {"x"}, "b", "z")]
    assert (rows[2]["e"], rows[2]["u"], rows[2]["j"]) == (None, None, None)


def test_a_primary_key_with_a_prefix_part_keys_the_table():
    assert _keys() == {"m": ["id"], "p": ["name", "id"], "q": ["t"]}
