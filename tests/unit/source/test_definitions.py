"""MariaDB's data-type plugins and system-versioned tables: what a table map hides, and how their
values and rows are published. (Against the real servers, every value compared with SELECT:
tests/e2e/test_types.py and tests/e2e/test_events.py.)"""
import logging
from types import SimpleNamespace

from pymysqlreplication.constants import FIELD_TYPE as T

from streamer.schema import columns
from streamer.schema.versions import TableCatalog, TableFilter, versioning
from streamer.source import definitions


def col(name, type_code, pk=False, size=None, charset=None, unsigned=False):
    return SimpleNamespace(name=name, type=type_code, is_primary=pk, max_length=size,
                           character_set_name=charset, unsigned=unsigned)


def test_only_a_table_map_that_could_hide_a_plugin_type_or_a_period_is_asked_about():
    assert not definitions.worth_asking([col("id", T.LONG, pk=True), col("v", T.VARCHAR)])
    assert definitions.worth_asking([col("u", T.STRING, size=16, charset="binary")])
    assert definitions.worth_asking([col("a", T.STRING, size=4)])
    assert not definitions.worth_asking([col("b", T.STRING, size=8, charset="binary")])
    # MariaDB's VECTOR(n) (11.7+) is a VARBINARY(4n) in the table map.
    assert definitions.worth_asking([col("v", T.VARCHAR, size=12, charset="binary")])
    assert not definitions.worth_asking([col("v", T.VARCHAR, size=10, charset="binary")])
    assert not definitions.worth_asking([col("s", T.VARCHAR, size=12, charset="utf8")])
    assert definitions.worth_asking([col("row_end", T.TIMESTAMP2)])
    assert definitions.worth_asking([col("id", T.LONG, pk=True), col("e", T.TIMESTAMP2, pk=True)])
    # MySQL's name for a functional index's hidden column: MD5(index name + key part) in hex.
    assert definitions.worth_asking([col("id", T.LONG), col("f92a934bb8b32234cc185c85b5f3631f",
                                                             T.VARCHAR)])
    assert not definitions.worth_asking([col("F92A934BB8B32234CC185C85B5F3631F", T.VARCHAR)])
    # Later servers' name for it (8.0.41's make_functional_index_column_name): !hidden!, the
    # index's name, its part's number and a count.
    assert definitions.worth_asking([col("!hidden!idx_lower!0!0", T.VARCHAR)])
    assert definitions.worth_asking([col("!hidden!a!b!1!12", T.LONGLONG)])
    assert not definitions.worth_asking([col("!hidden!idx", T.VARCHAR)])


class _Cursor:
    """information_schema as MySQL answers for a table with a functional index."""

    def __init__(self):
        self.rows = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, sql, args=None):
        self.rows = [("BASE TABLE",)] if "information_schema.TABLES" in sql else \
            [("id", "int", "", None), ("a", "varchar", "", None),
             ("0123456789abcdef0123456789abcdef", "int", "", None)]

    def fetchone(self):
        return self.rows[0]

    def fetchall(self):
        return self.rows


def test_a_column_of_the_table_map_information_schema_does_not_list_is_hidden():
    conn = SimpleNamespace(cursor=_Cursor)
    found = definitions.read(conn, "app", "g", ["id", "a", "f92a934bb8b32234cc185c85b5f3631f",
                                                "0123456789abcdef0123456789abcdef"])
    # A column of such a name that the table lists is the user's own, and published.
    assert found.hidden == ("f92a934bb8b32234cc185c85b5f3631f",)
    assert "column f92a934bb8b32234cc185c85b5f3631f is hidden (a functional index's): not " \
           "published" in definitions.describe(found)
    later = definitions.read(conn, "app", "g", ["id", "a", "!hidden!functional_index!0!0"])
    assert later.hidden == ("!hidden!functional_index!0!0",)


# The server's own answers (SELECT CAST(UNHEX(...) AS INET6) on MariaDB 10.11 and 11.4).
INET6 = [
    ("00000000000000000000000000000000", "::"), ("00000000000000000000000000000001", "::1"),
    ("00000000000000000000000000000002", "::2"),
    ("000000000000000000000000c0a80001", "::192.168.0.1"),
    ("00000000000000000000ffff01020304", "::ffff:1.2.3.4"),
    ("00000000000000000000ffff00000000", "::ffff:0.0.0.0"),
    ("20010db8000000000000000000000001", "2001:db8::1"),
    ("20010db8000000010000000000000001", "2001:db8:0:1::1"),
    ("0000000000000000000000000000ffff", "::ffff"),
    ("000000000000000000000000ffffffff", "::255.255.255.255"),
    ("00000000000000000001000000000000", "::1:0:0:0"),
    ("20010db8000000000001000000000000", "2001:db8:0:0:1::"),
    ("00000000000000000000fffe01020304", "::fffe:102:304"),
    ("000000000000000000000000000100ff", "::0.1.0.255"),
    ("00000000fda9f1ca00000000c7950114", "::fda9:f1ca:0:0:c795:114"),
    ("00007004000000000000000000000000", "0:7004::"),
    ("00010000000000000000000000000000", "1::"),
    # A run of one zero word is the '::' too when no run is longer (10.11 and 11.4 alike).
    ("d5a1ce82ab88d2b400006a327966e566", "d5a1:ce82:ab88:d2b4::6a32:7966:e566"),
    ("00010000000200000000000300000004", "1:0:2::3:0:4"),
    ("00010000000200030004000500060007", "1::2:3:4:5:6:7"),
    ("00000001000200030004000500060007", "::1:2:3:4:5:6:7"),
    ("00010002000300040005000600070000", "1:2:3:4:5:6:7::"),
    ("00010000000100000001000000010000", "1::1:0:1:0:1:0"),
    ("00000000000000000000000100000001", "::1:0:1"),
    ("00000000000000000000000001020000", "::1.2.0.0"),
]


def test_inet6_is_written_as_the_server_shows_it():
    for raw, text in INET6:
        # The binlog drops a BINARY's trailing zero bytes: they are put back.
        assert columns.inet6_text(bytes.fromhex(raw).rstrip(b"\0")) == text, raw
        assert columns.inet6_text(text) == text  # a snapshot reads the text itself


def test_uuid_and_inet4_are_written_as_the_server_shows_them():
    raw = bytes.fromhex("123e4567e89b12d3a456426614174000")
    assert columns.uuid_text(raw.rstrip(b"\0")) == "123e4567-e89b-12d3-a456-426614174000"
    assert columns.uuid_text(b"") == "00000000-0000-0000-0000-000000000000"
    assert columns.inet4_text(bytes([192, 168, 0, 1])) == "192.168.0.1"
    assert columns.inet4_text(b"") == "0.0.0.0"
    atype, _, kind = columns.avro_type(col("u", T.STRING, size=16, charset="binary"), "uuid")
    assert atype == {"type": "string", "logicalType": "uuid"} and kind == "uuid"


def test_a_system_versioned_tables_history_is_no_change_of_its_own():
    current, ended = 2147483647999999, 1700000000000000
    classify = versioning("row_end")
    row = {"values": {"id": 1, "row_end": current}}
    assert classify("c", row) == ("c", row)
    assert classify("c", {"values": {"id": 1, "row_end": ended}})[0] is None  # a history row
    update = {"before_values": {"id": 1, "row_end": current},
              "after_values": {"id": 1, "row_end": current}}
    assert classify("u", update) == ("u", update)
    op, deleted = classify("u", {"before_values": {"id": 1, "v": 2, "row_end": current},
                                 "after_values": {"id": 1, "v": 2, "row_end": ended}})
    assert op == "d" and deleted["values"] == {"id": 1, "v": 2, "row_end": current}
    assert classify("d", {"values": {"id": 1, "row_end": ended}})[0] is None  # history purged
    # A transaction-precise period ends at the largest BIGINT UNSIGNED.
    assert classify("c", {"values": {"row_end": 2 ** 64 - 1}})[0] == "c"


def test_on_mysql_only_a_column_named_like_a_hidden_one_is_worth_a_read():
    # An unsigned BIGINT key or a BINARY(16) column hides nothing on MySQL: no query for it.
    asked = []

    class Conn:
        def cursor(self):
            asked.append(1)
            return _Cursor()
    mysql = definitions.Definitions(Conn, mariadb=lambda conn: False)
    key = col("id", T.LONGLONG, pk=True, unsigned=True)
    assert mysql.of("app", "t", [key, col("u", T.STRING, size=16, charset="binary")]) is \
        definitions.NONE and asked == []
    hidden = col("f92a934bb8b32234cc185c85b5f3631f", T.VARCHAR)
    assert mysql.of("app", "g", [key, hidden]).hidden == ("f92a934bb8b32234cc185c85b5f3631f",)
    assert asked
    mariadb = definitions.Definitions(Conn, mariadb=lambda conn: True)
    asked.clear()
    assert mariadb.of("app", "t", [key]).hidden == () and asked


class _Sequences(_Cursor):
    """information_schema as MariaDB answers for a sequence ``s`` and a table ``t``."""

    def execute(self, sql, args=None):
        if "information_schema.TABLES" in sql:
            self.rows = [("SEQUENCE" if args[1] == "s" else "BASE TABLE",)]
        else:
            self.rows = [(c.name, "bigint", "", None) for c in _sequence_columns()]


def _sequence_columns():
    """A sequence's table map as MariaDB 10.11 writes it (CREATE SEQUENCE s)."""
    return [col("next_not_cached_value", T.LONGLONG), col("minimum_value", T.LONGLONG),
            col("maximum_value", T.LONGLONG), col("start_value", T.LONGLONG),
            col("increment", T.LONGLONG), col("cache_size", T.LONGLONG, unsigned=True),
            col("cycle_option", T.TINY, unsigned=True), col("cycle_count", T.LONGLONG)]


def test_a_sequence_is_not_published_and_says_so_once_per_version(caplog):
    # MariaDB writes a sequence's one row of state again, as an insert, at each NEXTVAL cache
    # refill, SETVAL and ALTER SEQUENCE: no change of a table's rows (tests/e2e/test_events.py).
    caplog.set_level(logging.INFO, logger="streamer.source.definitions")
    assert definitions.worth_asking(_sequence_columns())
    known = definitions.Definitions(lambda: SimpleNamespace(cursor=_Sequences),
                                    mariadb=lambda conn: True)
    catalog = TableCatalog("ns", TableFilter(["*.*"], []), definitions=known)
    for table_id in (7, 8):  # the same sequence under two table ids: one read, one line
        assert catalog.on_table_map(_table_map("app", "s", table_id)) is None
        assert catalog.by_id[table_id] is None
    assert ("app", "s") not in catalog.current and catalog.topics.of("app", "s") not in \
        [tv.topic for tv in catalog.current.values()]
    said = [r.getMessage() for r in caplog.records]
    assert said == ["table app.s: a sequence (CREATE SEQUENCE): the writes of its one row of "
                    "state (NEXTVAL's cache refills, SETVAL, ALTER SEQUENCE) are no changes of "
                    "a table's rows, and are not published; the rows that take its values "
                    "carry them"]
    # A table of the same columns is a table: published.
    table = catalog.on_table_map(_table_map("app", "t", 9))
    assert table is not None and table.topic == "ns.app.t" and catalog.by_id[9] is table


def _table_map(db, table, table_id):
    state = SimpleNamespace()
    columns = _sequence_columns()
    for c in columns:
        c.enum_values = c.set_values = None
    return SimpleNamespace(schema=db, table=table, columns=columns,
                           null_bitmask=b"\x00", table_id=table_id, get_table=lambda: state)


def _show_create(text):
    """A connection whose SHOW CREATE TABLE of db.t answers ``text``."""
    class _ShowCreate(_Cursor):
        def execute(self, sql, args=None):
            assert sql == "SHOW CREATE TABLE `db`.`t`"
            self.rows = [("t", text)]
    return SimpleNamespace(cursor=_ShowCreate)


def test_a_period_is_read_from_show_create_table_in_either_quoting():
    # With ANSI_QUOTES in the server's sql_mode, SHOW CREATE TABLE quotes names in double quotes
    # (MariaDB 10.11's own output below); a period not found was taken for the implicit one.
    ansi = ('CREATE TABLE "t" (\n  "id" int(11) NOT NULL,\n  "s""x" timestamp(6) GENERATED ALWAYS '
            'AS ROW START,\n  "e" timestamp(6) GENERATED ALWAYS AS ROW END,\n  PRIMARY KEY ("id",'
            '"e"),\n  PERIOD FOR SYSTEM_TIME ("s""x", "e")\n) ENGINE=InnoDB WITH SYSTEM VERSIONING')
    assert definitions.period_of(_show_create(ansi), "db", "t") == ("s\"x", "e", False)
    plain = ansi.replace('"s""x"', '`s"x`').replace('"e"', "`e`")
    assert definitions.period_of(_show_create(plain), "db", "t") == ("s\"x", "e", False)
    ticks = plain.replace('`s"x`', "`s``t`")
    assert definitions.period_of(_show_create(ticks), "db", "t") == ("s`t", "e", False)
    implicit = "CREATE TABLE `t` (\n  `id` int(11) NOT NULL\n) WITH SYSTEM VERSIONING"
    assert definitions.period_of(_show_create(implicit), "db", "t") == ("row_start", "row_end", True)
