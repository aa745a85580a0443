"""MySQL's typed arrays (source.standins), on its documented layout: no MySQL 8.0.17+ runs here.

A multi-valued index (8.0.17+, ``INDEX ((CAST(doc->'$.tags' AS CHAR(20) ARRAY)))``) has a
hidden column that servers writing such columns in their table maps write as type 244, its
metadata the elements' type and then that type's own (rows_event.h); newer servers leave it
out of the map. The tests make binlogs/vectors.binlog's app.plain (recorded on MySQL 8.0.15:
``id INT PRIMARY KEY, s VARCHAR(10)``) into a table whose ``s`` is such a column: a CHAR(10)
ARRAY (counted among the character columns, as MySQL counts one by its elements' type) or a
DATE ARRAY (counted in no optional field).
"""
import pytest
from pymysqlreplication.constants import FIELD_TYPE as T
from pymysqlreplication.row_event import TableMapEvent

from streamer.errors import UnsupportedEvent
from streamer.position import Position
from streamer.schema.versions import TableCatalog, TableFilter
from streamer.source import patches, rowcount, rowplan, standins
from tests.unit.engine_parts import ReplayedBinlog, maps_rewritten

patches.apply()

FILE = "mysql-bin.000002"
PLAIN = b"\x02\x03\x0f\x02\x28\x00"  # 2 columns: INT, VARCHAR; 2 bytes of metadata: 40


def as_8017(element: bytes) -> bytes:
    """The recording with app.plain's ``s`` as a typed array of ``element`` (its elements' type
    and metadata), as 8.0.17 writes one; every later event's end position moved."""
    def rewrite(body):
        if b"\x05plain\x00" not in body:
            return body
        assert body.count(PLAIN) == 1, body
        return body.replace(PLAIN, b"\x02\x03\xf4" + bytes([len(element)]) + element)
    return maps_rewritten("vectors.binlog", rewrite)


CHAR_ARRAY = b"\x0f\x28\x00"  # VARCHAR elements of 40 bytes
DATE_ARRAY = b"\x0e"  # NEWDATE elements, no metadata


def _maps(data):
    return [e for e in ReplayedBinlog("vectors.binlog", Position(FILE, 4), data=data)
            if isinstance(e, TableMapEvent) and e.table == "plain"]


def test_the_library_alone_fails_on_such_a_table_map(monkeypatch):
    # It reads no metadata for type 244, then the rest of the map from the wrong bytes (fails
    # before: such a table's every map, published or not, stopped the stream).
    monkeypatch.setattr(TableMapEvent, "__init__", TableMapEvent.__init__.__wrapped__)
    with pytest.raises(ValueError, match="is not a valid MetadataFieldType"):
        _maps(as_8017(CHAR_ARRAY))


@pytest.mark.parametrize("element, stand_in, charset", [(CHAR_ARRAY, T.VARCHAR, "utf8"),
                                                         (DATE_ARRAY, T.DATE, None)])
def test_a_typed_array_is_read_through_a_stand_in_and_the_rest_of_the_map_as_written(
        element, stand_in, charset):
    maps = _maps(as_8017(element))
    assert len(maps) == 2
    cols = maps[0].columns
    assert [c.name for c in cols] == ["id", "s"] and [c.is_primary for c in cols] == [True, False]
    assert [c.type for c in cols] == [T.LONG, stand_in]
    assert cols[1].typed_array == element[0] and not cols[0].unsigned
    assert getattr(cols[1], "character_set_name", None) == charset


def test_a_typed_array_is_not_published_and_its_absence_from_a_row_is_no_partial_image():
    tv = TableCatalog("ns", TableFilter(["app.*"], [])).on_table_map(_maps(as_8017(CHAR_ARRAY))[0])
    assert [f["name"] for f in tv.row_schema["fields"]] == ["id"] and "s" in tv.hidden
    assert tv.pk_names == ["id"]


def test_a_row_that_carries_a_typed_arrays_value_stops_naming_it():
    # MySQL writes none; the recording's rows, made for a real column, carry one.
    plan = rowplan.plan_for(_maps(as_8017(CHAR_ARRAY))[0].columns)
    event = type("E", (), {"schema": "app", "table": "plain",
                           "packet": type("P", (), {"log_pos": 90, "event_size": 40})()})()
    column = _maps(as_8017(CHAR_ARRAY))[0].columns[1]
    with pytest.raises(UnsupportedEvent, match="column 's', a multi-valued index's typed array"):
        plan[1][1](event, column)


def test_rows_of_an_unpublished_table_with_one_are_counted():
    events = [e for e in ReplayedBinlog("vectors.binlog", Position(FILE, 4),
                                        data=as_8017(CHAR_ARRAY))
              if e.__class__.__name__ == "WriteRowsEvent" and e.table == "plain"]
    assert [rowcount.count(e) for e in events] == [1, 1]


def test_the_translation_takes_a_typed_arrays_metadata_out_or_down_to_its_elements():
    types = bytes([T.LONG, standins.TYPED_ARRAY, T.VARCHAR, standins.TYPED_ARRAY])
    meta = CHAR_ARRAY + b"\x0a\x00" + b"\x08"  # a CHAR array, a VARCHAR, a BIGINT array
    new_types, arrays = bytearray(types), {}
    assert standins._arrays_as_stand_ins(types, meta, new_types, arrays) == b"\x28\x00\x0a\x00"
    assert list(new_types) == [T.LONG, T.VARCHAR, T.VARCHAR, T.DATE]
    assert arrays == {1: T.VARCHAR, 3: T.LONGLONG}
