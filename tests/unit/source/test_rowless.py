"""The ALTER TABLEs that take rows out of a table or put rows in with no row event."""
import pytest

from tests.fakeserver import FakeConnection
from streamer.source.rowless import RowlessChange, cascade_added, cascades_said, rowless_change


@pytest.mark.parametrize("query, expected", [
    ("ALTER TABLE t DROP PARTITION p0", ("cur", "t", "drop", None)),
    ("alter table shop.`or``ders` drop partition if exists p0, p1", ("shop", "or`ders", "drop", None)),
    ("/* retention */ ALTER TABLE t TRUNCATE PARTITION p2020", ("cur", "t", "truncate", None)),
    ("ALTER ONLINE TABLE t TRUNCATE PARTITION p0, p1;", ("cur", "t", "truncate", None)),
    ("ALTER TABLE t EXCHANGE PARTITION p0 WITH TABLE t_old WITHOUT VALIDATION",
     ("cur", "t", "exchange", ("cur", "t_old"))),
    ("ALTER TABLE a.t EXCHANGE PARTITION `p 0` WITH TABLE b.`x`", ("a", "t", "exchange", ("b", "x"))),
    ("ALTER TABLE t CONVERT PARTITION p0 TO TABLE arch.t0", ("cur", "t", "out", ("arch", "t0"))),
    ("ALTER TABLE t CONVERT TABLE t_new TO PARTITION p9 VALUES LESS THAN (90)",
     ("cur", "t", "into", ("cur", "t_new"))),
    ("ALTER TABLE t IMPORT TABLESPACE", ("cur", "t", "import", None)),
    ("ALTER TABLE t IMPORT PARTITION p0, p1 TABLESPACE", ("cur", "t", "import", None)),
    # Comments anywhere, as the servers log them.
    ("ALTER /* x */ TABLE t DROP PARTITION p0", ("cur", "t", "drop", None)),
    ("ALTER TABLE t TRUNCATE PARTITION p0 /*controller='cron'*/", ("cur", "t", "truncate", None)),
    ("ALTER TABLE t EXCHANGE PARTITION p0 -- monthly\n WITH TABLE t_old",
     ("cur", "t", "exchange", ("cur", "t_old"))),
    ("ALTER TABLE IF EXISTS t WAIT 3 DROP PARTITION p0", ("cur", "t", "drop", None)),
    # Rows stay where they are: nothing to say.
    ("ALTER TABLE t TRUNCATE PARTITION ALL", None),  # a TRUNCATE: source.truncate publishes it
    ("ALTER TABLE t ADD PARTITION (PARTITION p9 VALUES LESS THAN (100))", None),
    ("ALTER TABLE t REORGANIZE PARTITION p0 INTO (PARTITION a VALUES LESS THAN (5), "
     "PARTITION b VALUES LESS THAN (10))", None),
    ("ALTER TABLE t COALESCE PARTITION 2", None),
    ("ALTER TABLE t REMOVE PARTITIONING", None),
    ("ALTER TABLE t PARTITION BY HASH(id) PARTITIONS 4", None),
    ("ALTER TABLE t DROP COLUMN partition_key", None),
    ("ALTER TABLE t DISCARD TABLESPACE", None),  # nothing can be read from it until imported
    ("DROP TABLE t", None),
    ("CREATE TABLE drop_partition_log (id INT)", None),
    ("ALTER TABLE t COMMENT 'we drop partition p0 monthly'", None),  # a string, not words
    ("ALTER TABLE t TRUNCATE PARTITION ALL /* nightly */", None),
    ("ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4", None),
])
def test_statements_that_change_rows_without_row_events_are_recognised(query, expected):
    found = rowless_change(query, "cur")
    assert (tuple(found[:3]) + (found.other,) if found else None) == expected


def test_what_each_says_names_the_other_table():
    assert RowlessChange("a", "t", "exchange", ("b", "x")).says() == \
        "swapped a partition's rows with those of b.x"
    assert RowlessChange("a", "t", "drop", None).says() == \
        "dropped a partition: its rows left the table"


def test_foreign_keys_with_actions_are_read_from_the_tables_definition():
    from streamer.source.rowless import _actions

    definition = (
        "CREATE TABLE `c` (\n  `id` int(11) NOT NULL,\n  `a` int DEFAULT NULL,\n"
        "  CONSTRAINT `c_a` FOREIGN KEY (`a`) REFERENCES `p` (`id`) ON DELETE CASCADE,\n"
        "  CONSTRAINT `c``b` FOREIGN KEY (`b`, `x`) REFERENCES `other`.`q` (`id`, `y`) "
        "ON DELETE RESTRICT ON UPDATE SET NULL,\n"
        "  CONSTRAINT `c_plain` FOREIGN KEY (`d`) REFERENCES `p` (`id`),\n"
        "  CONSTRAINT `c_none` FOREIGN KEY (`e`) REFERENCES `p` (`id`) ON DELETE NO ACTION\n"
        ") ENGINE=InnoDB")
    found = _actions("shop", "c", definition)
    assert found == [("shop", "c", "c_a", "shop.p", "CASCADE", "RESTRICT"),
                     ("shop", "c", "c`b", "other.q", "RESTRICT", "SET NULL")]
    assert found[1].says() == "`c`b` on other.q (ON UPDATE SET NULL)"
    # The same with ANSI_QUOTES in the server's sql_mode: SHOW CREATE TABLE quotes in double
    # quotes (as MariaDB 10.11 and MySQL 8.0 write it), and the actions were not found.
    ansi = definition.replace("`c``b`", '"c`b"').replace("``", "`")
    ansi = ansi.replace('"c`b"', "C_B").replace("`", '"').replace("C_B", '"c`b"')
    assert 'CONSTRAINT "c_a" FOREIGN KEY ("a") REFERENCES "p" ("id")' in ansi
    assert _actions("shop", "c", ansi) == found
    assert _actions("shop", "c", ansi.replace('"p" ("id") ON DELETE CASCADE',
                                              '"p""q" ("id") ON DELETE CASCADE'))[0].parent == 'shop.p"q'
    said = cascades_said(found)
    assert [t for t, _ in said] == ["shop.c"]
    assert said[0][1].startswith("its rows are changed by foreign key actions: `c_a` on shop.p "
                                 "(ON DELETE CASCADE); `c`b` on other.q (ON UPDATE SET NULL); "
                                 "the server logs no row event for what those actions change")


@pytest.mark.parametrize("query, expected", [
    ("CREATE TABLE c (id INT, pid INT, FOREIGN KEY (pid) REFERENCES p (id) ON DELETE CASCADE)",
     ("cur", "c")),
    ("create table if not exists s.`c`(id int references p(id) on update set null)", ("s", "c")),
    ("ALTER TABLE c ADD CONSTRAINT f FOREIGN KEY (pid) REFERENCES p (id) ON DELETE SET NULL",
     ("cur", "c")),
    ("ALTER TABLE c ADD FOREIGN KEY (pid) REFERENCES p (id) ON DELETE RESTRICT", None),
    ("CREATE TABLE t (ts TIMESTAMP DEFAULT NOW() ON UPDATE CURRENT_TIMESTAMP)", None),
    ("ALTER TABLE c DROP FOREIGN KEY f", None),
    ("INSERT INTO log VALUES ('ON DELETE CASCADE')", None),
    ("CREATE /* app */ TABLE c (pid INT REFERENCES p (id) ON /* x */ DELETE CASCADE)",
     ("cur", "c")),
    ("ALTER TABLE c COMMENT 'on delete cascade, some day'", None),
    # A session's temporary table, named like a published one or not, is never published.
    ("CREATE TEMPORARY TABLE c (pid INT REFERENCES p (id) ON DELETE CASCADE)", None),
])
def test_a_statement_giving_a_table_a_foreign_key_action_is_recognised(query, expected):
    assert cascade_added(query, "cur") == expected


def _server(do="", ignore="", tables=()):
    """A server's answers to left_out's questions: its binlog status and its tables."""
    return FakeConnection(lambda sql, args: [("mysql-bin.000001", 4, do, ignore)]
                          if sql.startswith("SHOW MASTER STATUS") else list(tables))


def test_what_the_binlogs_filters_leave_out_of_the_published_tables_is_named():
    from streamer.source.rowless import left_out

    tables = [("shop", "a"), ("shop", "b"), ("scratch", "c"), ("streamer_heartbeat", "heartbeat")]
    published = lambda db, table: db == "shop" or table == "c"  # noqa: E731
    own = ["streamer_heartbeat"]
    assert left_out(_server(tables=tables), published, own) is None  # no filter
    assert left_out(_server(ignore="tmp", tables=tables), published, own) is None
    said = left_out(_server(ignore="tmp,scratch", tables=tables), published, own)
    assert said.startswith("the server's binlog leaves out scratch.c (binlog_ignore_db=tmp,"
                           "scratch): no change there is ever logged")
    # Limited to shop: the rest is left out, the streamer's own database too.
    said = left_out(_server(do="shop", tables=tables), published, own)
    assert said.startswith("the server's binlog leaves out the streamer's own database "
                           "streamer_heartbeat, scratch.c (binlog_do_db=shop)")
    many = [("big", f"t{i}") for i in range(12)]
    assert "big.t9 and 2 more (binlog_ignore_db=big)" in left_out(
        _server(ignore="big", tables=many), lambda db, t: True, [])
