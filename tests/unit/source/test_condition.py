"""A snapshot request's condition: accepted when it only filters the table's rows, refused when it
could do anything else (read another table, end the SELECT early, stall the stream)."""
import pytest

from streamer.source import chunks, condition, signals

COLUMNS = ["id", "created", "email", "amount", "Note col"]


@pytest.mark.parametrize("text", [
    "id > 100",
    "created >= '2024-01-01' AND created < NOW() - INTERVAL 1 DAY",
    "email LIKE '%@example.com' OR email IS NULL",
    "amount BETWEEN -1.5e3 AND 0x1F",
    "LOWER(email) IN ('a@b.c', 'd@e.f') AND NOT (id = 3)",
    "`Note col` = 'it''s (not) -- a comment'",
    "COALESCE(amount, 0) > 0 AND DATE(created) = CURDATE()",
    "CASE WHEN id % 2 = 0 THEN 1 ELSE 0 END = 1",
    "CAST(amount AS SIGNED) > 10",
    "JSON_EXTRACT(email, '$.a') = 1",
])
def test_a_condition_on_the_tables_own_columns_is_accepted(text):
    condition.check(text, COLUMNS)


@pytest.mark.parametrize("text,why", [
    ("0) UNION ALL SELECT 1, User, authentication_string FROM mysql.user WHERE (1",
     "closes a parenthesis"),
    ("1 UNION SELECT 1", "UNION is not allowed"),
    ("id IN (SELECT id FROM other)", "SELECT is not allowed"),
    ("id = 1 -- ", "comments"),
    ("1=1 # the rest", "comments"),
    ("1=1 /* */", "comments"),
    ("id > 1; DROP TABLE t", "';' is not allowed"),
    ("SLEEP(1) = 0", "function SLEEP() is not allowed"),
    ("BENCHMARK(100000000, MD5('x')) = 0", "function BENCHMARK() is not allowed"),
    ("GET_LOCK('x', 100)", "function GET_LOCK() is not allowed"),
    ("password = 'x'", "password is not a column"),
    ("`secret` = 1", "`secret` is not a column"),
    ("@@version > 0", "variables"),
    ("(id > 1", "leaves a parenthesis open"),
    ("", "empty"),
])
def test_anything_more_than_a_condition_is_refused_naming_the_part(text, why):
    with pytest.raises(ValueError, match=why.replace("(", r"\(").replace(")", r"\)")):
        condition.check(text, COLUMNS)


def test_without_the_columns_only_the_shape_is_checked():
    condition.check("anything_goes = 1")
    with pytest.raises(ValueError, match="SELECT"):
        condition.check("x IN (SELECT 1)")


@pytest.mark.parametrize("request_text", ["[]", "null", '"x"', "1", "{not json", ""])
def test_a_request_that_is_not_an_object_is_refused_with_a_value_error(request_text):
    with pytest.raises(ValueError, match="JSON"):
        signals.parse_request(request_text)


def test_a_request_whose_condition_is_a_statement_is_refused():
    with pytest.raises(ValueError, match="UNION"):
        signals.parse_request('{"tables": ["a.b"], "where": "1 UNION SELECT 2"}')
    assert signals.parse_request('{"tables": ["a.b"], "where": "id > 2"}')["where"] == "id > 2"


def test_the_chunk_select_is_stopped_by_the_server_after_the_timeout():
    sql = "SELECT `a` FROM `d`.`t` ORDER BY `a` LIMIT 5"
    assert chunks.time_limited(sql, 30, mariadb=True) == \
        "SET STATEMENT max_statement_time=30 FOR " + sql
    assert chunks.time_limited(sql, 1.5, mariadb=False) == \
        "SELECT /*+ MAX_EXECUTION_TIME(1500) */ `a` FROM `d`.`t` ORDER BY `a` LIMIT 5"
    assert chunks.time_limited(sql, 0, mariadb=True) == sql
