"""Per-table versions built from table-map events, without a server."""
import pytest
from pymysqlreplication.constants import FIELD_TYPE

from streamer.errors import MissingColumnNames
from streamer.schema.versions import TableFilter, TableVersion


class Col:
    def __init__(self, name, type_, primary=False, **extra):
        self.name, self.type, self.is_primary = name, type_, primary
        self.unsigned = False
        self.character_set_name = extra.pop("charset", None)
        self.enum_values = self.set_values = None
        self.__dict__.update(extra)


class TableMap:
    def __init__(self, columns, nullable_bits=b"\x00"):
        self.schema, self.table, self.table_id = "shop", "orders", 7
        self.columns = columns
        self.null_bitmask = nullable_bits


def test_columns_without_names_are_never_published():
    event = TableMap([Col("id", FIELD_TYPE.LONG, True), Col("UNKNOWN_COL1", FIELD_TYPE.LONG)])
    with pytest.raises(MissingColumnNames, match="binlog_row_metadata=FULL"):
        TableVersion("ns", event)
    with pytest.raises(MissingColumnNames):
        TableVersion("ns", TableMap([Col(None, FIELD_TYPE.LONG)]))


def test_topic_key_and_nullability_come_from_the_table_map():
    event = TableMap([Col("id", FIELD_TYPE.LONG, True),
                      Col("note", FIELD_TYPE.VARCHAR, charset="utf8mb4", max_length=20)],
                     nullable_bits=b"\x02")
    tv = TableVersion("canary", event)
    assert tv.topic == "canary.shop.orders" and tv.pk_names == ["id"]
    fields = {f["name"]: f["type"] for f in tv.row_schema["fields"]}
    assert fields == {"id": "int", "note": ["null", "string"]}
    assert tv.key_schema["fields"][0]["name"] == "id"


def test_filters_include_then_exclude_db_table_globs():
    f = TableFilter(["shop.*", "crm.customers"], ["shop.tmp_*"])
    assert f("shop", "orders") and f("crm", "customers")
    assert not f("shop", "tmp_import") and not f("crm", "leads") and not f("other", "orders")


def test_a_text_value_that_could_not_be_decoded_is_one_error_naming_the_column():
    from streamer.errors import UnsupportedValue
    event = TableMap([Col("id", FIELD_TYPE.LONG, True),
                      Col("note", FIELD_TYPE.VARCHAR, charset="eucjpms", max_length=20)])
    tv = TableVersion("ns", event)
    tv.convert({"id": 1, "note": "ascii decodes"})
    with pytest.raises(UnsupportedValue, match=r"shop\.orders column note: a text value the "
                                               r"streamer can't decode .*utf8mb4"):
        tv.convert({"id": 1, "note": b"\xad\xa1"})
