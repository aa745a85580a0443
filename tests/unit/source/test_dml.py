"""Which tables a statement-logged row change changes, and what it calls, from its text."""
import pytest

from streamer.source import dml, sqltext
from streamer.source.reach import Reach


def targets(sql, db="shop"):
    return dml.changes(sql, db).tables


def test_single_table_changes_name_their_table_however_spelt():
    assert targets("INSERT INTO t (id) VALUES (1)") == {("shop", "t")}
    assert targets("insert ignore into `sh op`.`t``x` values (1)", "d") == {("sh op", "t`x")}
    assert targets("/* app */ UPDATE LOW_PRIORITY shop.t SET v = 1", "d") == {("shop", "t")}
    assert targets("DELETE QUICK FROM t WHERE id = 1") == {("shop", "t")}
    assert targets("DELETE FROM t AS q WHERE q.id = 1") == {("shop", "t")}
    assert targets("REPLACE t VALUES (1)") == {("shop", "t")}
    assert targets("LOAD DATA INFILE 'x.csv' INTO TABLE shop.t (a, b)", "d") == {("shop", "t")}
    # As the server logs a LOAD DATA (LOCAL or not), and its REPLACE, which starts nothing.
    assert targets("LOAD DATA LOCAL INFILE '/tmp/SQL_LOAD_MB-1-2' IGNORE INTO TABLE `t` FIELDS "
                   "TERMINATED BY ',' ENCLOSED BY '' ESCAPED BY '\\\\' LINES TERMINATED BY "
                   "'\\n' (`id`, `v`)") == {("shop", "t")}
    assert targets("LOAD DATA CONCURRENT INFILE 'x' REPLACE INTO TABLE d.`u` CHARACTER SET "
                   "latin1") == {("d", "u")}
    assert targets("LOAD XML LOCAL INFILE 'x' INTO TABLE u ROWS IDENTIFIED BY '<r>'") == {
        ("shop", "u")}
    assert targets("/*!40000 INSERT IGNORE INTO t */ VALUES (1)") == {("shop", "t")}
    assert targets("# why\nINSERT INTO t VALUES (1) ON DUPLICATE KEY UPDATE v = 2") == {
        ("shop", "t")}


def test_multi_table_updates_name_the_tables_their_assignments_qualify():
    assert targets("UPDATE c JOIN b ON b.id = c.id SET b.v = 99") == {("shop", "b")}
    assert targets("UPDATE a x JOIN (SELECT * FROM p) d ON d.id = x.id SET x.v = d.v") == {
        ("shop", "a")}
    assert targets("UPDATE (a JOIN b USING (id)) LEFT JOIN o.c AS cc ON cc.id = a.id "
                   "SET cc.v = 1, b.w = (SELECT MAX(v) FROM z) WHERE a.id = 1") == {
        ("o", "c"), ("shop", "b")}
    assert targets("UPDATE a, o.b SET o.b.v = 1") == {("o", "b")}
    # A column alone could be either table's: both.
    assert targets("UPDATE a, b SET v = 1") == {("shop", "a"), ("shop", "b")}
    assert targets("UPDATE a FORCE INDEX (k) JOIN b IGNORE KEY FOR JOIN (k) ON a.i = b.i "
                   "SET b.v = 1") == {("shop", "b")}


def test_multi_table_deletes_resolve_their_targets_through_the_aliases():
    assert targets("DELETE b FROM b JOIN c ON b.id = c.id WHERE b.id = 1") == {("shop", "b")}
    assert targets("DELETE FROM x1 USING b AS x1 JOIN c ON x1.id = c.id + 1") == {("shop", "b")}
    assert targets("DELETE a.*, o.b.* FROM a JOIN o.b") == {("shop", "a"), ("o", "b")}
    assert targets("DELETE y FROM o.t y, u WHERE y.i = u.i") == {("o", "t")}


def test_statements_after_a_cte_list_and_inside_bodies_are_found():
    assert targets("WITH w AS (SELECT 3 AS id) UPDATE b SET v = 7 WHERE id IN "
                   "(SELECT id FROM w)") == {("shop", "b")}
    body = ("BEGIN DECLARE n INT; IF x > 0 THEN INSERT INTO b VALUES (x, x); ELSE "
            "lbl: LOOP DELETE FROM c WHERE id = x; LEAVE lbl; END LOOP; END IF; "
            "SELECT v INTO n FROM d FOR UPDATE; RETURN REPLACE(s, 'a', 'b'); END")
    assert targets(body) == {("shop", "b"), ("shop", "c")}


def test_what_changes_no_rows_names_no_table():
    for other in ("BEGIN", "ALTER TABLE t ADD c INT", "CREATE TABLE t (id INT)",
                  "GRANT SELECT, UPDATE ON shop.t TO u", "SAVEPOINT a", "DROP TABLE updates",
                  "SELECT INSERT('abc', 1, 1, 'x'), 'UPDATE t SET v = 1' FROM d",
                  "DELETE HISTORY FROM t BEFORE SYSTEM_TIME NOW()"):
        assert targets(other) == set(), other


def test_a_table_created_by_a_select_is_named_and_other_ddl_names_none():
    assert dml.created_by_select("CREATE TABLE s1 AS SELECT * FROM a", "d") == ("d", "s1")
    assert dml.created_by_select("CREATE OR REPLACE TABLE IF NOT EXISTS x.s2 (PRIMARY KEY (id)) "
                                 "(SELECT 1 AS id)", "d") == ("x", "s2")
    for other in ("CREATE TABLE t (id INT, v VARCHAR(10))", "CREATE TEMPORARY TABLE t SELECT 1",
                  "CREATE TABLE t LIKE a", "CREATE VIEW v AS SELECT 1", "INSERT INTO t SELECT 1",
                  # a CREATE TABLE ... SELECT logged in row format: the definition alone
                  "CREATE TABLE `r1` (\n  `id` int(11) NOT NULL,\n  `select` int(11))"):
        assert dml.created_by_select(other, "d") is None, other


def test_calls_are_named_with_their_database():
    assert dml.changes("SELECT `o`.`f`(50)", "shop").calls == {("o", "f")}
    assert dml.changes("INSERT INTO c SELECT g(id) FROM a WHERE id IN (1, 2)", "shop").calls == {
        ("shop", "g")}
    assert sqltext.first_word("/* x */ -- y\n  select f(1)") == "SELECT"
    assert sqltext.first_word("(SELECT 1)") == ""


class _Cursor:
    def __init__(self, answers, asked):
        self.answers, self.asked = answers, asked

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, sql, args):
        self.asked.append(("TRIGGERS" in sql, args))
        self.rows = self.answers.get(("TRIGGERS" in sql,) + tuple(args), [])

    def fetchall(self):
        return self.rows


class _Server:
    """information_schema's TRIGGERS and ROUTINES rows, by (is a trigger, db, name)."""

    def __init__(self, answers):
        self.answers, self.asked = answers, []

    def cursor(self):
        return _Cursor(self.answers, self.asked)


def test_the_reach_follows_triggers_and_routines_to_the_tables_they_change():
    server = _Server({
        (True, "app", "a"): [("app", "ta", "INSERT INTO log.b VALUES (NEW.id)")],
        (True, "log", "b"): [("log", "tb", b"BEGIN SET @x = log.count_it(NEW.id); END")],
        (False, "log", "count_it"): [("log", "count_it", "FUNCTION",
                                      "BEGIN UPDATE n SET v = v + 1; RETURN 1; END")],
        (False, "app", "f"): [("app", "f", "FUNCTION", None)],
    })
    reach = Reach(lambda: server)
    reached = reach.of("INSERT INTO a VALUES (1)", "app")
    assert reached.tables == {("app", "a"): "", ("log", "b"): "the trigger app.ta on app.a",
                              ("log", "n"): "the stored function log.count_it"}
    assert any("app.a" in u for u in reached.unseen) is False  # its trigger was shown
    assert any("any trigger on log.n" in u for u in reached.unseen)
    asked = len(server.asked)
    reach.of("INSERT INTO a VALUES (2)", "app")
    assert len(server.asked) == asked  # kept until a DDL
    reach.forget()
    reach.of("INSERT INTO a VALUES (2)", "app")
    assert len(server.asked) == 2 * asked

    called = reach.of("SELECT `app`.`f`(1)", "app")
    assert called.tables == {}
    assert called.unseen == ["the stored function app.f, whose body the streamer's user is not "
                             "shown"]
    assert reach.of("ALTER TABLE a ADD c INT", "app") is None
    created = reach.of("CREATE TABLE c SELECT * FROM a", "app")
    assert created.tables == {("app", "c"): ""} and created.ddl
    assert reach.of("CREATE TABLE c (id INT)", "app") is None
    # A published table reached ends the reading: the stream stops there anyway.
    asked = len(server.asked)
    stopped = reach.of("INSERT INTO a VALUES (3)", "app", lambda db, table: db == "app")
    assert stopped.tables == {("app", "a"): ""} and len(server.asked) == asked


def test_without_a_server_the_statement_alone_is_read():
    reached = Reach(None).of("UPDATE a JOIN b ON a.i = b.i SET b.v = f(1)", "app")
    assert reached.tables == {("app", "b"): ""} and reached.unseen == []


def test_on_a_server_keeping_names_in_lower_case_a_statements_names_are_read_so(monkeypatch):
    from streamer.source import rowless, truncate
    monkeypatch.setattr(sqltext, "FOLD_NAMES", True)
    assert targets("UPDATE Shop.Orders o JOIN Items i ON i.id = o.id SET o.n = 1") == {
        ("shop", "orders")}
    assert dml.changes("SELECT Shop.Bump(1)", "shop").calls == {("shop", "bump")}
    assert dml.created_by_select("CREATE TABLE Copy SELECT * FROM t", "shop") == ("shop", "copy")
    assert truncate.truncated_table("TRUNCATE TABLE Shop.MyTable", "x") == ("shop", "mytable")
    found = rowless.rowless_change("ALTER TABLE T EXCHANGE PARTITION p0 WITH TABLE Arch.T0", "d")
    assert (found.db, found.table, found.other) == ("d", "t", ("arch", "t0"))
    monkeypatch.setattr(sqltext, "FOLD_NAMES", False)  # lower_case_table_names 0 (or 2)
    assert targets("UPDATE Shop.Orders SET n = 1") == {("Shop", "Orders")}


def test_a_statement_run_with_mariadbs_per_statement_settings_is_the_statement_after_them():
    # As MariaDB logs them: the SET STATEMENT ... FOR prefix kept in the query event.
    from streamer.source import rowless, truncate
    reach = Reach(None)
    assert reach.of("SET STATEMENT binlog_format=STATEMENT FOR INSERT INTO t VALUES (1)",
                    "shop").tables == {("shop", "t"): ""}
    assert reach.of("set statement max_statement_time=1.5, sql_mode=CONCAT(@@sql_mode, ',X') "
                    "for UPDATE o.t SET v = 1", "shop").tables == {("o", "t"): ""}
    assert reach.of("SET STATEMENT sql_mode='' FOR SELECT * FROM t FOR UPDATE", "shop") \
        .tables == {}
    assert truncate.truncated_table("SET STATEMENT foreign_key_checks=0 FOR TRUNCATE TABLE t",
                                    "shop") == ("shop", "t")
    found = rowless.rowless_change("SET STATEMENT lock_wait_timeout=5 FOR ALTER TABLE t DROP "
                                   "PARTITION p0", "shop")
    assert (found.db, found.table, found.what) == ("shop", "t", "drop")
    assert rowless.cascade_added("SET STATEMENT lock_wait_timeout=5 FOR ALTER TABLE t ADD "
                                 "FOREIGN KEY (p) REFERENCES p (id) ON DELETE CASCADE",
                                 "shop") == ("shop", "t")
    # Inside a routine's body too; other SETs are no prefix.
    assert targets("BEGIN SET STATEMENT sql_mode='' FOR DELETE FROM a; SELECT 1 FROM b FOR "
                   "UPDATE; END") == {("shop", "a")}
    assert reach.of("SET PASSWORD FOR 'u'@'h' = PASSWORD('x')", "shop") is None
    assert reach.of("SET STATEMENT sql_mode=''", "shop") is None


@pytest.mark.parametrize("sql, expected", [
    ("DELETE FROM `shop`.`mem`", ("shop", "mem")),  # as MySQL 8.0.15 logs a MEMORY table's
    ("delete quick from t ;", ("shop", "t")),
    ("DELETE FROM t /* tag */", ("shop", "t")),
    ("DELETE FROM t WHERE id = 1", None),
    ("DELETE FROM t LIMIT 5", None),
    ("DELETE FROM t AS x", None),
    ("DELETE FROM a, b USING a JOIN b", None),
    ("DELETE a FROM a", None),
    ("DELETE HISTORY FROM t", None),
    ("TRUNCATE t", None),
])
def test_a_delete_of_every_row_is_told_from_others(sql, expected):
    assert dml.emptied(sql, "shop") == expected
