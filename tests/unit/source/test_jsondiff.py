"""MySQL's partial JSON updates, on their documented byte layout (json_diff.h): the after value is
the before value with the diffs applied, written as the server shows it. (Live, on MySQL 8.0 with
JSON_SET, JSON_REPLACE and JSON_REMOVE compared with SELECT: tests/e2e/test_events.py.)"""
import pytest

from streamer.errors import UnsupportedValue
from streamer.source import jsondiff


def _lenenc(n):
    return bytes([n]) if n < 0xFB else b"\xfc" + n.to_bytes(2, "little")


def _scalar_json(value):
    """MySQL's binary JSON of an int16 or a short string (json_binary.h)."""
    if isinstance(value, int):
        return b"\x05" + value.to_bytes(2, "little", signed=True)
    data = value.encode()
    return b"\x0c" + bytes([len(data)]) + data


def diff(op, path, value=None):
    out = bytes([op]) + _lenenc(len(path)) + path.encode()
    if op != jsondiff.REMOVE:
        doc = _scalar_json(value)
        out += _lenenc(len(doc)) + doc
    return out


def test_replace_insert_and_remove_on_nested_paths_in_one_update():
    diffs = jsondiff.read(diff(jsondiff.REPLACE, "$.a[1]", 7) + diff(jsondiff.INSERT, "$.b.c", "x")
                          + diff(jsondiff.REMOVE, "$.d"))
    before = '{"a": [1, 2, 3], "b": {"z": true}, "d": null}'
    assert jsondiff.apply(before, diffs) == '{"a": [1, 7, 3], "b": {"c": "x", "z": true}}'


def test_an_inserted_member_goes_where_mysql_keeps_it_shorter_keys_first():
    diffs = jsondiff.read(diff(jsondiff.INSERT, '$."a b"', 1) + diff(jsondiff.INSERT, "$.zz", 2))
    assert jsondiff.apply('{"c": 0, "bbb": 0}', diffs) == \
        '{"c": 0, "zz": 2, "a b": 1, "bbb": 0}'


def test_array_inserts_at_the_index_or_at_the_end_and_last_counts_from_the_end():
    diffs = jsondiff.read(diff(jsondiff.INSERT, "$[0]", 9) + diff(jsondiff.INSERT, "$[99]", 8)
                          + diff(jsondiff.REPLACE, "$[last-1]", 5))
    assert jsondiff.apply("[1, 2]", diffs) == "[9, 1, 5, 8]"


def test_numbers_keep_the_text_they_were_shown_with():
    diffs = jsondiff.read(diff(jsondiff.REPLACE, "$.n", 3))
    assert jsondiff.apply('{"f": 1.0, "n": 2, "e": 1e+300, "u": "é"}', diffs) == \
        '{"f": 1.0, "n": 3, "e": 1e+300, "u": "é"}'


def test_a_diff_of_a_null_before_value_or_an_unknown_operation_is_refused():
    with pytest.raises(UnsupportedValue, match="binlog_row_image=FULL"):
        jsondiff.apply(None, jsondiff.read(diff(jsondiff.REMOVE, "$.a")))
    with pytest.raises(UnsupportedValue, match="operation 7"):
        jsondiff.read(b"\x07\x01$")


def test_rows_of_a_partial_update_get_their_whole_after_value():
    rows = [{"before_values": {"id": 1, "j": '{"a": 1}'},
             "after_values": {"id": 1, "j": jsondiff.read(diff(jsondiff.REPLACE, "$.a", 2))}}]
    jsondiff.resolve(rows)
    assert rows[0]["after_values"] == {"id": 1, "j": '{"a": 2}'}
