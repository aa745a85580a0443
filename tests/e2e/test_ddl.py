"""DDL mid-stream: every row decodes with the columns it was written with, before and after each DDL.

One binlog holds row changes before and after each DDL (one table per DDL); one streamer run reads
it all, and each test checks one DDL. A second run into another namespace replays the same binlog.
"""
import datetime
import io

import fastavro
import pytest

from streamer.kafka.topics import read_schema_records
from streamer.schema.naming import topic_part
from tests import support

DDL_SCRIPT = [
    "CREATE TABLE t_add (id INT PRIMARY KEY, a VARCHAR(10) NOT NULL)",
    "CREATE TABLE t_drop (id INT PRIMARY KEY, a INT, b VARCHAR(5))",
    "CREATE TABLE t_ren (id INT PRIMARY KEY, a INT NOT NULL)",
    "CREATE TABLE t_mod (id INT PRIMARY KEY, n INT NOT NULL)",
    "CREATE TABLE t_vc (id INT PRIMARY KEY, s VARCHAR(5))",
    "CREATE TABLE t_pk (id INT PRIMARY KEY, code VARCHAR(5) NOT NULL)",
    "CREATE TABLE t_old (id INT PRIMARY KEY, v INT)",
    "CREATE TABLE t_gone (id INT PRIMARY KEY, v INT)",
    "CREATE TABLE t_trunc (id INT PRIMARY KEY, v INT)",
    "CREATE TABLE t_ts (id INT PRIMARY KEY, w DATETIME NULL)",
    "CREATE TABLE `t_été` (id INT PRIMARY KEY)",
    "START",
    "INSERT INTO t_add VALUES (1, 'x')",
    "ALTER TABLE t_add ADD COLUMN b INT NOT NULL DEFAULT 7",
    "INSERT INTO t_add VALUES (2, 'y', 8)",
    "UPDATE t_add SET a = 'x2' WHERE id = 1",
    "INSERT INTO t_drop VALUES (1, 10, 'bee')",
    "ALTER TABLE t_drop DROP COLUMN b",
    "INSERT INTO t_drop VALUES (2, 20)",
    "INSERT INTO t_ren VALUES (1, 5)",
    "ALTER TABLE t_ren RENAME COLUMN a TO c",
    "INSERT INTO t_ren VALUES (2, 6)",
    "INSERT INTO t_mod VALUES (1, 2147483647)",
    "ALTER TABLE t_mod MODIFY n BIGINT NOT NULL",
    "INSERT INTO t_mod VALUES (2, 9223372036854775807)",
    "INSERT INTO t_vc VALUES (1, 'abcde')",
    "ALTER TABLE t_vc MODIFY s VARCHAR(50)",
    "INSERT INTO t_vc VALUES (2, 'a much longer value')",
    "INSERT INTO t_pk VALUES (1, 'a')",
    "ALTER TABLE t_pk DROP PRIMARY KEY, ADD PRIMARY KEY (code)",
    "INSERT INTO t_pk VALUES (2, 'b')",
    "INSERT INTO t_old VALUES (1, 1)",
    "RENAME TABLE t_old TO t_new",
    "INSERT INTO t_new VALUES (2, 2)",
    "INSERT INTO t_gone VALUES (1, 1)",
    "DROP TABLE t_gone",
    "CREATE TABLE t_gone (id INT PRIMARY KEY, z DATE NOT NULL)",
    "INSERT INTO t_gone VALUES (2, '2024-02-29')",
    "INSERT INTO t_trunc VALUES (1, 1), (2, 2)",
    "TRUNCATE TABLE t_trunc /*controller='reset',framework='django'*/",  # an app's tag
    "INSERT INTO t_trunc VALUES (3, 3)",
    "INSERT INTO `t_été` VALUES (1)",
    # A session whose client charset is latin1 writes its statement's text in latin1.
    ("latin1", "TRUNCATE TABLE `t_été`"),
    "INSERT INTO `t_été` VALUES (2)",
    "CREATE TABLE t_created (id INT PRIMARY KEY, label VARCHAR(10))",
    "INSERT INTO t_created VALUES (1, 'new')",
    "INSERT INTO t_ts VALUES (1, '2024-01-01 10:00:00')",
    "ALTER TABLE t_ts MODIFY w TIMESTAMP NULL",
    "INSERT INTO t_ts VALUES (2, '2024-01-01 10:00:00')",
]
TABLES = ["t_add", "t_drop", "t_ren", "t_mod", "t_vc", "t_pk", "t_old", "t_new", "t_gone",
          "t_trunc", "t_created", "t_ts", "t_été"]
EXPECTED_MESSAGES = 27


def _stream(tmp_path, db, start, ns, source=None):
    cfg = support.write_config(str(tmp_path / f"{ns}.yaml"), ns, [f"{db}.*"], server=source)
    with support.StreamerProcess(cfg, str(tmp_path / f"{ns}.log"), "--start-file", start[0],
                                 "--start-pos", str(start[1])) as proc:
        msgs = support.consume([f"{ns}.{db}.{topic_part(t)}" for t in TABLES],
                               expect=EXPECTED_MESSAGES,
                               decode_ns=ns, idle=2.0)
        assert proc.stop() == 0, proc.output()
    return msgs, proc.output()


@pytest.fixture(scope="module", params=support.enabled_sources(), ids=lambda s: s.name)
def run(tmp_path_factory, request):
    """The DDL script streamed once per server of the source matrix: every test of this module
    is a contract test."""
    source = request.param
    support.ensure_servers()
    tmp = tmp_path_factory.mktemp("ddl")
    db = support.unique("ddl_")
    conn = source.admin()
    support.sql(conn, f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    conn.select_db(db)
    # MariaDB 11.4 writes its ALTERs in two phases (binlog_alter_two_phase, off by default, so
    # 10.11 keeps the one-event form): each one a START ALTER and a COMMIT ALTER, two query
    # events with the statement's text, in two GTIDs.
    two_phase = source.name == "mariadb-11.4"
    if two_phase:
        support.sql(conn, "SET SESSION binlog_alter_two_phase = ON")
    start = None
    for stmt in DDL_SCRIPT:
        if stmt == "START":
            start = support.master_pos(conn)
        elif isinstance(stmt, tuple):  # (the session's client charset, the statement)
            session = source.admin(db)
            session.set_character_set(stmt[0])
            support.sql(session, stmt[1])
            session.close()
        else:
            support.sql(conn, stmt)
    ns = support.unique("dd")
    msgs, log = _stream(tmp, db, start, ns, source)
    yield {"db": db, "ns": ns, "msgs": msgs, "log": log, "start": start, "tmp": tmp,
           "source": source, "two_phase": two_phase}
    support.sql(conn, f"DROP DATABASE {db}")
    conn.close()


def _of(run, table):
    topic = f"{run['ns']}.{run['db']}.{topic_part(table)}"
    return [m for m in run["msgs"] if m["topic"] == topic]


def _rows(run, table):
    return [(m["value"]["op"], m["value"]["before"], m["value"]["after"]) for m in _of(run, table)]


def _schema(run, msg):
    return support.decoder(run["ns"]).schema_of(msg["raw_value"])


def _row_fields(schema):
    row = next(b for b in schema["fields"][0]["type"] if isinstance(b, dict))
    return {f["name"]: f for f in row["fields"]}


def test_every_row_change_around_the_ddl_arrives_once(run):
    assert len(run["msgs"]) == EXPECTED_MESSAGES, run["log"]


def test_alters_written_in_two_phases_are_read_as_one(run):
    """The START ALTER / COMMIT ALTER pair of each ALTER (MariaDB 11.4 here) is in the binlog,
    and the stream around it is the same as around a one-event ALTER (the other tests)."""
    # Bytes: MySQL shows each statement's text as it was written (one in latin1 here).
    conn = support.admin(port=run["source"].port, use_unicode=False)
    try:
        events = [[v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in e]
                  for e in support.sql(conn, f"SHOW BINLOG EVENTS IN '{run['start'][0]}' "
                                             f"FROM {run['start'][1]}")]
    finally:
        conn.close()
    alters = [e[5] for e in events if e[2] == "Query" and "ALTER TABLE t_add" in e[5]]
    gtids = " ".join(e[5] for e in events if e[2] == "Gtid")
    if run["two_phase"]:
        assert len(alters) == 2 and "START ALTER" in gtids and "COMMIT ALTER" in gtids, events
    else:
        assert len(alters) == 1 and "START ALTER" not in gtids, events


def test_add_column_rows_before_have_old_columns_and_rows_after_the_new_one(run):
    assert _rows(run, "t_add") == [
        ("c", None, {"id": 1, "a": "x"}),
        ("c", None, {"id": 2, "a": "y", "b": 8}),
        ("u", {"id": 1, "a": "x", "b": 7}, {"id": 1, "a": "x2", "b": 7}),
    ]
    old, new = (_schema(run, m) for m in _of(run, "t_add")[:2])
    # NOT NULL in MySQL, but new to the table: nullable with a default, so new readers read old data.
    assert _row_fields(new)["b"]["type"] == ["null", "int"] and _row_fields(new)["b"]["default"] is None
    body = _of(run, "t_add")[0]["raw_value"][10:]
    as_new = fastavro.schemaless_reader(io.BytesIO(body), fastavro.parse_schema(old),
                                        fastavro.parse_schema(new))
    assert as_new["after"] == {"id": 1, "a": "x", "b": None}


def test_drop_column_rows_after_lack_it(run):
    assert _rows(run, "t_drop") == [("c", None, {"id": 1, "a": 10, "b": "bee"}),
                                    ("c", None, {"id": 2, "a": 20})]


def test_rename_column_is_a_drop_and_an_add_and_is_warned_about(run):
    assert _rows(run, "t_ren") == [("c", None, {"id": 1, "a": 5}), ("c", None, {"id": 2, "c": 6})]
    assert "NOT backward-compatible" in run["log"] and "a rename to c?" in run["log"]


def test_modify_int_to_bigint_changes_the_avro_type_compatibly(run):
    msgs = _of(run, "t_mod")
    assert [m["value"]["after"]["n"] for m in msgs] == [2147483647, 9223372036854775807]
    assert [_row_fields(_schema(run, m))["n"]["type"] for m in msgs] == ["int", "long"]
    assert "column n type int -> long (Avro promotion" in run["log"]


def test_varchar_length_change_keeps_the_same_schema(run):
    msgs = _of(run, "t_vc")
    assert [m["value"]["after"]["s"] for m in msgs] == ["abcde", "a much longer value"]
    assert msgs[0]["raw_value"][:10] == msgs[1]["raw_value"][:10]


def test_primary_key_change_changes_the_message_key_and_is_warned_about(run):
    msgs = _of(run, "t_pk")
    assert [m["key"] for m in msgs] == [{"id": 1}, {"code": "b"}]
    assert [m["value"]["after"] for m in msgs] == [{"id": 1, "code": "a"}, {"id": 2, "code": "b"}]
    assert "primary key (id) -> (code): message keys change" in run["log"]


def test_rename_table_moves_later_rows_to_the_new_tables_topic(run):
    assert _rows(run, "t_old") == [("c", None, {"id": 1, "v": 1})]
    assert _rows(run, "t_new") == [("c", None, {"id": 2, "v": 2})]


def test_drop_and_recreate_table_publishes_nothing_for_the_drop_and_new_columns_after(run):
    assert _rows(run, "t_gone") == [("c", None, {"id": 1, "v": 1}),
                                    ("c", None, {"id": 2, "z": datetime.date(2024, 2, 29)})]


def test_truncate_is_published_as_op_t_between_the_rows(run):
    msgs = _of(run, "t_trunc")
    assert _rows(run, "t_trunc") == [("c", None, {"id": 1, "v": 1}), ("c", None, {"id": 2, "v": 2}),
                                     ("t", None, None), ("c", None, {"id": 3, "v": 3})]
    assert msgs[2]["raw_key"] is None
    src = msgs[2]["value"]["source"]
    assert src["table"] == "t_trunc" and src["db"] == run["db"] and src["tx_row"] == 0


def test_a_truncate_written_in_another_charset_than_utf8_is_published(run):
    # The statement's bytes are latin1 ('t_\xe9t\xe9'): read as UTF-8, they named no table.
    assert _rows(run, "t_été") == [("c", None, {"id": 1}), ("t", None, None),
                                   ("c", None, {"id": 2})]


def test_table_created_mid_stream_is_streamed(run):
    assert _rows(run, "t_created") == [("c", None, {"id": 1, "label": "new"})]


def test_datetime_to_timestamp_gets_a_distinct_fingerprint_and_logical_type(run):
    msgs = _of(run, "t_ts")
    schemas = [_schema(run, m) for m in msgs]
    kinds = [_row_fields(s)["w"]["type"][1]["logicalType"] for s in schemas]
    assert kinds == ["local-timestamp-micros", "timestamp-micros"]
    assert msgs[0]["raw_value"][2:10] != msgs[1]["raw_value"][2:10]
    assert "NOT backward-compatible" in run["log"] and "timestamp-micros" in run["log"]


def test_replaying_the_binlog_from_its_start_gives_byte_identical_messages(run):
    ns2 = support.unique("dr")
    again, _ = _stream(run["tmp"], run["db"], run["start"], ns2, run["source"])

    def strip(msgs, ns):
        # Per topic, in topic order (offsets differ: batch boundaries leave commit markers).
        return sorted(((m["topic"][len(ns):], m["raw_key"], m["raw_value"]) for m in msgs),
                      key=lambda t: t[0])

    assert strip(again, ns2) == strip(run["msgs"], run["ns"])
    kafka = {"bootstrap.servers": support.KAFKA}
    # Settled: the last transaction's commit marker may reach the schema topic after its rows'.
    first = {(r["fingerprint"], r["schema"])
             for r in read_schema_records(kafka, run["ns"], settle=True)}
    second = {(r["fingerprint"], r["schema"]) for r in read_schema_records(kafka, ns2, settle=True)}
    assert first == second and len(first) >= 20


@pytest.mark.private_servers
def test_a_server_keeping_names_in_lower_case_has_statements_naming_them_in_any_case_read(
        tmp_path):
    """lower_case_table_names=1 (MariaDB takes it at start): table maps name mydb.mytable,
    statements name it as written. A TRUNCATE of MyDb.MYTABLE is published, and a
    statement-logged change of MyTable stops the stream, naming it."""
    from tests.e2e.servers import PrivateMariaDB

    mdb = PrivateMariaDB(str(tmp_path / "lower"), extra_args="--lower-case-table-names=1")
    mdb.up()
    try:
        conn = mdb.admin()
        support.sql(conn, "CREATE DATABASE MyDb", "CREATE TABLE MyDb.MyTable (id INT PRIMARY KEY)",
                    "USE MyDb")
        ns = support.unique("lc")
        start = support.master_pos(conn)
        cfg = support.write_config(str(tmp_path / "c.yaml"), ns, ["mydb.*"],
                                   mysql={"port": mdb.port, "password_file": mdb.password_file()})
        with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", start[0],
                                     "--start-pos", str(start[1])) as proc:
            support.sql(conn, "INSERT INTO MyTable VALUES (1)", "TRUNCATE TABLE MyTable",
                        "INSERT INTO MyDb.MyTable VALUES (2)", "TRUNCATE MYDB.MYTABLE",
                        "INSERT INTO MyTable VALUES (3)")
            msgs = support.consume([f"{ns}.mydb.mytable"], expect=5, decode_ns=ns)
            support.sql(conn, "SET SESSION binlog_format = 'STATEMENT'",
                        "INSERT INTO MyTable VALUES (4)")
            code = proc.wait(60)
        out = proc.output()
        assert code == 3, out[-3000:]
        assert [(m["value"]["op"], (m["value"]["after"] or {}).get("id")) for m in msgs] == [
            ("c", 1), ("t", None), ("c", 2), ("t", None), ("c", 3)]
        assert "a statement changing mydb.mytable at " in out, out[-3000:]
    finally:
        mdb.down()
