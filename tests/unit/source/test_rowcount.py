"""Rows counted without decoding them: the count equals the library's decoded rows, event by event,
on every recorded binlog, and a value that can't be decoded doesn't stop the count."""
import pytest
from pymysqlreplication.row_event import RowsEvent

from streamer.position import Position
from streamer.source import patches, rowcount
from tests.unit.engine_parts import ReplayedBinlog
from tests.unit.engine.test_engine import FILE

patches.apply()


@pytest.mark.parametrize("binlog", ["engine.binlog", "compressed.binlog", "images.binlog",
                                    "snapshot.binlog"])
def test_the_count_of_every_rows_event_equals_its_decoded_rows(binlog):
    counted = 0
    for event in ReplayedBinlog(binlog, Position(FILE, 4)):
        if isinstance(event, RowsEvent):
            n = rowcount.count(event)
            assert n is not None, (binlog, event.schema, event.table, event.packet.log_pos)
            assert n == len(event.rows), (binlog, event.schema, event.table, event.packet.log_pos)
            counted += 1
    assert counted >= 3


def test_a_column_type_without_a_known_size_falls_back_to_decoding():
    class Column:
        type = 243  # MYSQL_TYPE_INVALID, in no binlog: no size known here

    assert rowcount.size_of(Column()) is None
