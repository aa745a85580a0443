"""Random partial JSON updates on MySQL (binlog_row_value_options=PARTIAL_JSON): JSON_SET,
JSON_REPLACE, JSON_INSERT, JSON_REMOVE and the array functions on random paths of random
documents, with values of every JSON kind and MySQL's own (DECIMAL, DATETIME, TIME, binary
strings). Each published document is the text SELECT showed right after its update."""
import json

import pymysql
import pytest

from tests import support
from tests.e2e.test_events import _stream_from

# Keys whose order MySQL keeps by their bytes' length, then bytes: "é" (2 bytes) after "b",
# beside "ab"; "😀" (4) beside "abcd".
KEYS = ["a", "b", "ab", "abcd", "key with space", "é", "😀", 'q"t', "x.y", "", "k1", "k10",
        "a_much_longer_key"]
# Values only SQL makes: opaque DECIMAL and temporal values, a binary string, doubles.
SQL_VALUES = ["CAST({n}e-3 AS DECIMAL(12,{s}))", "CAST({n}{n} AS DECIMAL(30,0))",
              "CAST('2024-01-02 03:04:05.5' AS DATETIME(6))", "CAST('2024-02-29' AS DATE)",
              "CAST('-838:59:59' AS TIME)", "CAST('12:34:56.123456' AS TIME(6))",
              "TIMESTAMP'2024-01-02 03:04:05'", "CAST(x'00ff' AS BINARY)", "1e15", "0.5e0",
              "JSON_ARRAY({n}e-9, CAST(1.5 AS DECIMAL(4,2)))"]
# Only the first three are logged as diffs (the rest: whole documents).
FUNCTIONS = ["JSON_SET"] * 3 + ["JSON_REPLACE", "JSON_REMOVE", "JSON_INSERT", "JSON_ARRAY_APPEND",
                                "JSON_ARRAY_INSERT"]


def _scalar(rng):
    return rng.choice([
        lambda: rng.randint(-10, 10), lambda: rng.randint(-2 ** 63, 2 ** 64 - 1),
        lambda: rng.uniform(-1, 1) * 10.0 ** rng.randint(-20, 20),
        lambda: rng.choice([1e-300, 1.5e300, -0.0, 2.5]), lambda: True, lambda: None,
        lambda: "".join(rng.choice('aé😀"\\/\n\t\x01 ') for _ in range(rng.randint(0, 8)))])()


def _document(rng, depth=0):
    """A random JSON value: an object at the top (depth 0), anything below it."""
    r = rng.random()
    if depth == 0 or depth < 3 and r < 0.2:
        return {rng.choice(KEYS): _document(rng, depth + 1) for _ in range(rng.randint(0, 5))}
    if depth < 3 and r < 0.35:
        return [_document(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return _scalar(rng)


def _paths(doc, here="$"):
    """Every path of a document, and a few that aren't in it."""
    out = [here]
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) \
        else ()
    for k, v in items:
        out += _paths(v, f"{here}.{json.dumps(k, ensure_ascii=False)}" if isinstance(k, str)
                      else f"{here}[{k}]")
    return out


def _quoted(text):
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def _update(rng, doc, column):
    """An UPDATE of ``column`` by one of FUNCTIONS on random paths of ``doc``, or None."""
    function, args = rng.choice(FUNCTIONS), []
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(_paths(doc))
        if rng.random() < 0.5:  # a member or element that may not be there yet
            path += rng.choice([f".{json.dumps(rng.choice(KEYS), ensure_ascii=False)}",
                                f"[{rng.randint(0, 6)}]", "[last]", "[last-1]"])
        if function == "JSON_REMOVE":
            args += [_quoted(path)] if path != "$" else []
        elif rng.random() < 0.25:
            args.append(f"{_quoted(path)}, " + rng.choice(SQL_VALUES).format(
                n=rng.randint(-10 ** 8, 10 ** 8), s=rng.randint(0, 5)))
        else:
            text = json.dumps(_document(rng, depth=1), ensure_ascii=False)
            args.append(f"{_quoted(path)}, CAST({_quoted(text)} AS JSON)")
    return f"UPDATE j SET {column} = {function}({column}, {', '.join(args)}) WHERE id = %s" \
        if args else None


@pytest.mark.every_source
def test_random_partial_json_updates_publish_the_text_select_shows(db, tmp_path, source):
    if not source.mysql:
        pytest.skip("MariaDB's JSON is text, its updates whole values (test_types covers them)")
    name, conn = db
    rng = support.rng(f"json {source.name}")
    support.sql(conn, "CREATE TABLE j (id INT PRIMARY KEY, doc JSON, other JSON)")
    for row in range(1, 6):
        support.sql(conn, "INSERT INTO j VALUES (%s, CAST(%s AS JSON), CAST(%s AS JSON))",
                    args=(row, json.dumps(_document(rng)), json.dumps({"a": [1, {"b": "c"}]})))
    shown, kinds = [], set()

    def changes():
        session = source.admin(name)
        f, p = support.master_pos(session)
        support.sql(session, "SET SESSION binlog_row_value_options = 'PARTIAL_JSON'")
        with session.cursor() as cur:
            for _ in range(300):
                row, column = rng.randint(1, 5), rng.choice(["doc", "other"])
                cur.execute(f"SELECT {column} FROM j WHERE id = %s", (row,))
                update = _update(rng, json.loads(cur.fetchone()[0]), column)
                try:
                    changed = update is not None and cur.execute(update, (row,))
                except pymysql.err.MySQLError:
                    continue  # a path the function refuses (JSON_ARRAY_INSERT on an object)
                if changed:
                    cur.execute("SELECT doc, other FROM j WHERE id = %s", (row,))
                    shown.append((row,) + cur.fetchone())
        kinds.update(r[2] for r in support.sql(session, f"SHOW BINLOG EVENTS IN '{f}' FROM {p}"))

    # As many as SELECT showed: waited for (a stream slow to start is not an empty one), and
    # any extra, a double, read in the second after them.
    msgs, _ = _stream_from(tmp_path, conn, source, name, "j", lambda: len(shown), changes)
    assert "Update_rows_partial" in kinds and len(shown) > 150, (kinds, len(shown))
    published = [(m["key"]["id"], m["value"]["after"]["doc"], m["value"]["after"]["other"])
                 for m in msgs]
    wrong = [(n, got, want) for n, (got, want) in enumerate(zip(published, shown)) if got != want]
    assert len(published) == len(shown) and not wrong, support.seeded(str(wrong[:3]))
