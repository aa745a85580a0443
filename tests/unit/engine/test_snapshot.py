"""Snapshots without servers: the watermark algorithm in the real engine loop, over a recorded binlog
(binlogs/snapshot.sql says what it holds) and an in-memory table reader, and the pure parts."""
import logging
import re

import pymysql
import pytest
from pymysqlreplication.constants import FIELD_TYPE as T

from streamer import config
from streamer.engine.streamer import Streamer
from streamer.engine.snapshot import Snapshots
from streamer.errors import SnapshotRefused
from streamer.ops.metrics import Metrics
from streamer.position import Position
from streamer.schema.versions import TableFilter
from streamer.source import chunks, patches, signals
from tests.unit.engine_parts import FakeClock, InMemoryPublisher, ReplayedBinlog

patches.apply()

FILE = "mysql-bin.000002"


def shop_t(with_n):
    cols = [chunks.Column("id", T.LONG, is_primary=True, unsigned=False, nullable=False),
            chunks.Column("v", T.VARCHAR, character_set_name="utf8mb4", nullable=True,
                          unsigned=False, is_primary=False)]
    if with_n:
        cols.append(chunks.Column("n", T.LONG, nullable=True, unsigned=False, is_primary=False))
    return chunks.Described("shop", "t", cols, ["id"], 6)


class Tables:
    """The table reader's contract in memory: each ``read`` hands out the next of ``chunks``
    (rows, last key, final), as the server would have answered between that chunk's watermarks."""

    def __init__(self, answers, versions):
        self.answers = list(answers)
        self.versions = list(versions)
        self.marks = []
        self.reads = []
        self.unread = []

    def describe(self, db, table):
        return self.versions.pop(0) if len(self.versions) > 1 else self.versions[0]

    def watermark(self, mark):
        self.marks.append(mark)

    def read(self, described, last, where, limit):
        self.reads.append((last, where, limit, [c.name for c in described.columns]))
        self.unread.append(described.unread)
        rows, new_last, final = self.answers.pop(0)
        # The columns the SELECT names as NULL come back so.
        return [{k: None if k in described.unread else v for k, v in r.items()} for r in rows], \
            new_last, final

    def open(self, described, last, where, limit, max_bytes=0):
        return chunks.ListRead(*self.read(described, last, where, limit))

    def close(self):
        pass


@pytest.fixture
def snapshot_streamer(tmp_path):
    def make(tables, run="", columns="{}"):
        path = tmp_path / "streamer.yaml"
        (tmp_path / "pw").write_text("unused\n")
        path.write_text("namespace: ns\nsource: {name: src}\n"
                        "mysql: {server_id: 99, password_file: pw}\n"
                        f"tables: {{include: ['shop.*'], columns: {columns}}}\n"
                        "snapshot: {chunk_rows: 4}\n"
                        "batch: {max_messages: 1}\n")  # a commit after every event
        cfg = config.load(str(path), environ={})
        publisher = InMemoryPublisher(namespace="ns")
        streamer = Streamer(cfg, metrics=Metrics(cfg), clock=FakeClock())
        streamer.snapshots.new_tables = lambda: tables
        streamer.snapshots._run = run  # the recording's marks are L1, H1, L2...
        return streamer, publisher
    return make


def replay(streamer, publisher):
    start = Position(FILE, 4)
    reader = ReplayedBinlog("snapshot.binlog", start, on_end=streamer.request_stop)
    with reader:
        streamer.stream(publisher, reader, start)


def published(publisher):
    dec = publisher.decoder()
    out = []
    for _, key, value in publisher.messages():
        env = dec.decode(value)
        if env is None:
            out.append(("tombstone", dec.decode(key)["id"], None, None))
            continue
        out.append((env["op"], dec.decode(key)["id"], env["after"], env["source"]["snapshot"]))
    return out


CHUNK1 = ([{"id": 1, "v": "a"}, {"id": 2, "v": "b2"}, {"id": 3, "v": "c"}, {"id": 4, "v": "d"}],
          ["4"], False)
CHUNK2_OLD = ([{"id": 5, "v": "e"}, {"id": 6, "v": "f"}], ["6"], True)
CHUNK2_NEW = ([{"id": 5, "v": "e", "n": None}, {"id": 6, "v": "f", "n": None}], ["6"], True)


def test_the_window_drops_changed_keys_and_the_chunk_lands_at_its_high_watermark(
        snapshot_streamer):
    tables = Tables([CHUNK1, CHUNK2_OLD, CHUNK2_NEW], [shop_t(False), shop_t(False), shop_t(True)])
    streamer, publisher = snapshot_streamer(tables)
    replay(streamer, publisher)
    got = [(op, k, snap) for op, k, _, snap in published(publisher)]
    assert got == [
        ("c", 1, None), ("c", 2, None), ("c", 3, None), ("c", 4, None), ("c", 6, None),
        # chunk 1's window: 2 updated, 3 deleted, 5 inserted; 2 and 3 leave the chunk
        ("u", 2, None), ("d", 3, None), ("tombstone", 3, None), ("c", 5, None),
        ("r", 1, "true"), ("r", 4, "true"),      # at H1
        ("u", 1, None),                          # after H1
        ("r", 5, "last"), ("r", 6, "last"),      # chunk 2 read again after the ALTER, at H3
        ("c", 7, None)]
    rows = {(op, k): after for op, k, after, _ in published(publisher)}
    assert rows[("r", 1)] == {"id": 1, "v": "a"} and rows[("r", 5)] == {"id": 5, "v": "e", "n": None}
    # Chunk 2 was read from after key 4 both times; the second read saw the new column.
    assert [(last, cols) for last, _, _, cols in tables.reads] == [
        (None, ["id", "v"]), (["4"], ["id", "v"]), (["4"], ["id", "v", "n"])]
    # Chunk 2's first read was given up at the ALTER before it was read whole: no high mark.
    assert tables.marks == ["L1", "H1", "L2", "L3", "H3"]
    # The progress is committed with the rows it accounts for, in the same transaction.
    dec = publisher.decoder()
    progress = [(sorted(dec.decode(k)["id"] for t, k, v in msgs
                        if t == "ns.shop.t" and v is not None and dec.decode(v)["op"] == "r"),
                 pos.snapshot)
                for msgs, pos in publisher.log]
    with_reads = [(ids, p) for ids, p in progress if ids]
    assert [ids for ids, _ in with_reads] == [[1, 4], [5, 6]]
    chunk1 = with_reads[0][1]["queue"][0]
    assert (chunk1["table"], chunk1["chunk"], chunk1["last_key"], chunk1["rows"]) == \
        ("shop.t", 1, ["4"], 2)
    assert with_reads[1][1] == {"queue": [], "done": 1, "rows": 4}
    assert publisher.log[-1][1].snapshot == {"queue": [], "done": 1, "rows": 4}
    # Before the request, checkpoints carry no snapshot at all.
    assert publisher.log[0][1].snapshot is None


def test_a_chunk_of_a_version_announced_at_its_high_mark_is_framed_by_the_registry(
        snapshot_streamer):
    # Chunk 2 is read again after the ALTER, with a version no table map announced yet: its
    # rows are encoded as they are read, but its messages must carry the frame the registry gives
    # when the version is announced, at the high mark, keys and values alike.
    from tests.unit.engine.test_engine import FramingRegistry

    tables = Tables([CHUNK1, CHUNK2_OLD, CHUNK2_NEW], [shop_t(False), shop_t(False), shop_t(True)])
    streamer, publisher = snapshot_streamer(tables)
    streamer.schema_registry = registry = FramingRegistry()
    replay(streamer, publisher)
    frame = {name: b"\x00" + registry.ids[f"ns.shop.t-{name}"].to_bytes(4, "big")
             for name in ("key", "value")}
    reads = [(key, value) for topic, key, value in publisher.messages()
             if topic == "ns.shop.t" and value is not None]
    assert len(reads) == 14  # 10 changes and 4 snapshot rows, 2 of them from chunk 2
    for key, value in reads:
        assert (key[:5], value[:5]) == (frame["key"], frame["value"])


def test_a_column_left_out_of_kafka_is_not_read_by_the_chunks(snapshot_streamer):
    tables = Tables([CHUNK1, CHUNK2_OLD, CHUNK2_NEW], [shop_t(False), shop_t(False), shop_t(True)])
    streamer, publisher = snapshot_streamer(tables, columns="{exclude: ['shop.t.v']}")
    replay(streamer, publisher)
    # Every chunk's SELECT, before the ALTER and after it, names v as NULL.
    assert tables.unread == [{"v"}, {"v"}, {"v"}]
    rows = {(op, k): after for op, k, after, _ in published(publisher)}
    assert rows[("r", 1)] == {"id": 1} and rows[("r", 5)] == {"id": 5, "n": None}
    assert [op for op, _, _, _ in published(publisher)].count("r") == 4


def test_watermarks_of_a_chunk_that_went_with_a_crash_match_nothing(snapshot_streamer):
    # A run whose marks differ from the recording's: its watermarks never come back, so its
    # chunk never lands, and the old ones publish nothing.
    tables = Tables([CHUNK1, CHUNK1], [shop_t(False)])  # read again after the ALTER
    streamer, publisher = snapshot_streamer(tables, run="other-")
    replay(streamer, publisher)
    assert [op for op, _, _, _ in published(publisher)].count("r") == 0
    queue = publisher.log[-1][1].snapshot["queue"]
    assert [(j["table"], j["chunk"], j["last_key"]) for j in queue] == [("shop.t", 0, None)]
    assert streamer.snapshots.chunk is not None
    assert tables.marks == ["Lother-1", "Hother-1", "Lother-2", "Hother-2"]


def _request_tx_start():
    """The offset of the request's transaction (its GTID event) in the recording."""
    start = None
    for e in ReplayedBinlog("snapshot.binlog", Position(FILE, 4)):
        if e.__class__.__name__ == "MariadbGtidEvent":
            start = e.packet.log_pos - e.packet.event_size
        if e.__class__.__name__ == "TableMapEvent" and e.table == signals.SIGNAL:
            return start
    raise AssertionError("no request in the recording")


@pytest.mark.parametrize("done", [0, 1])
def test_a_request_is_taken_once_even_when_a_checkpoint_fell_inside_its_transaction(
        snapshot_streamer, done):
    # Resume inside the request's transaction: with its one row published (done=1) the
    # checkpoint already holds the request and it is not taken again; with none, it is taken.
    tables = Tables([CHUNK1, CHUNK2_OLD, CHUNK2_NEW], [shop_t(False), shop_t(False), shop_t(True)])
    streamer, publisher = snapshot_streamer(tables)
    progress = {"queue": [{"id": "1", "table": "shop.t", "where": None, "last_key": None,
                           "chunk": 0, "rows": 0, "estimate": 6}], "done": 0, "rows": 0}
    start = Position(FILE, _request_tx_start(), rows=done, snapshot=progress if done else None)
    reader = ReplayedBinlog("snapshot.binlog", start, on_end=streamer.request_stop)
    with reader:
        streamer.stream(publisher, reader, start)
    assert all(len(p.snapshot["queue"]) <= 1 for _, p in publisher.log if p.snapshot)
    assert publisher.committed.snapshot == {"queue": [], "done": 1, "rows": 4}
    assert [k for op, k, _, _ in published(publisher) if op == "r"] == [1, 4, 5, 6]


def _cfg(tmp_path, extra=""):
    path = tmp_path / "s.yaml"
    (tmp_path / "pw").write_text("x\n")
    path.write_text("mysql: {server_id: 9, password_file: pw}\ntables: {include: ['shop.*']}\n" + extra)
    return config.load(str(path), environ={})


def test_a_request_for_a_table_the_streamer_does_not_stream_is_refused_loudly(tmp_path, caplog):
    cfg = _cfg(tmp_path)
    snaps = Snapshots(cfg, "pw", TableFilter(["shop.*"], []))
    snaps.add("12", ["shop.a", "other.b"], None)
    assert [j["table"] for j in snaps.queue] == ["shop.a"]
    assert "table other.b is not streamed" in caplog.text and "request 12" in caplog.text


def test_config_snapshot_defaults_and_refusals(tmp_path):
    cfg = _cfg(tmp_path, "start: {initial: snapshot}\n")
    assert cfg["snapshot"] == {"database": "streamer_heartbeat", "chunk_bytes": 8000000,
                               "chunk_rows": 100000, "slice_rows": 1000, "mode": "watermark",
                               "chunk_timeout_s": 300.0}
    with pytest.raises(config.ConfigError, match="snapshot.mode"):
        _cfg(tmp_path, "snapshot: {mode: maybe}\n")
    with pytest.raises(config.ConfigError, match="snapshot.chunk_rows"):
        _cfg(tmp_path, "snapshot: {chunk_rows: 0}\n")
    with pytest.raises(config.ConfigError, match="snapshot.chunk_bytes.*1000..1000000000"):
        _cfg(tmp_path, "snapshot: {chunk_bytes: 10}\n")
    with pytest.raises(config.ConfigError, match="snapshot.database"):
        _cfg(tmp_path, "snapshot: {database: 'a;b'}\n")
    with pytest.raises(config.ConfigError, match="'end', 'beginning' or 'snapshot'"):
        _cfg(tmp_path, "start: {initial: sometimes}\n")


# -- the pure parts -------------------------------------------------------------------------------

def test_enum_and_set_members_are_unquoted_as_the_server_quotes_them():
    assert chunks.members("enum('a','b''c','d,e')") == ("a", "b'c", "d,e")
    assert chunks.members("set('')") == ("",)


def test_the_chunk_after_a_composite_key_is_one_range_the_server_compares():
    d = chunks.Described("db", "t`x", [chunks.Column("a", T.LONG), chunks.Column("b", T.FLOAT)],
                         ["a", "b"], 0)
    assert chunks.chunk_sql(d, None, None, 11) == \
        "SELECT `a`, `b` + 0e0 FROM `db`.`t``x` ORDER BY `a`, `b` LIMIT 11"
    assert chunks.chunk_sql(d, ["1", "'x'"], "a < 5", 3) == (
        "SELECT `a`, `b` + 0e0 FROM `db`.`t``x` WHERE ((`a` > 1) OR (`a` = 1 AND `b` > 'x')) "
        "AND (a < 5) ORDER BY `a`, `b` LIMIT 3")


def test_a_column_left_out_of_kafka_is_selected_as_null_unless_the_chunks_follow_it():
    d = chunks.Described("db", "t", [chunks.Column("a", T.LONG), chunks.Column("b", T.FLOAT),
                                     chunks.Column("c", T.BLOB), chunks.Column("u", T.LONG)],
                         ["u"], 0)
    left = d.leaving_out(["b", "c", "u"])
    assert left.unread == {"b", "c"} and d.unread == frozenset()
    assert chunks.chunk_sql(left, ["7"], None, 5) == \
        "SELECT `a`, NULL, NULL, `u` FROM `db`.`t` WHERE ((`u` > 7)) ORDER BY `u` LIMIT 5"
    assert chunks.chunk_sql(d.leaving_out([]), None, None, 5) == chunks.chunk_sql(d, None, None, 5)


def test_text_protocol_values_are_shaped_as_the_binlog_reader_hands_them_back():
    import datetime
    cols = [chunks.Column("d", T.DATE), chunks.Column("dt", T.DATETIME2),
            chunks.Column("ts", T.TIMESTAMP2), chunks.Column("s", T.SET),
            chunks.Column("b", T.BIT), chunks.Column("i", T.LONG)]
    shape = dict(chunks.shapers(cols))
    assert 5 not in shape  # an INT is the same either way
    assert shape[0]("0000-00-00") is None and shape[0](datetime.date(2020, 1, 2)) == \
        datetime.date(2020, 1, 2)
    assert shape[1]("2020-00-01 00:00:00") is None
    assert shape[2]("0000-00-00 00:00:00") == 0
    assert shape[3]("a,c") == {"a", "c"} and shape[3]("") == set()
    assert shape[4](b"\x02\xaa") == "1010101010"


def _information_schema(tables_rows, keys=()):
    """A connection answering describe's three queries: one column, ``keys`` (index, column) of
    unique keys, and ``tables_rows`` from information_schema.TABLES."""
    class Cursor:
        def __init__(self):
            self.results = [
                ([("COLUMN_NAME",), ("DATA_TYPE",), ("COLUMN_TYPE",), ("IS_NULLABLE",),
                  ("CHARACTER_SET_NAME",), ("NUMERIC_PRECISION",), ("NUMERIC_SCALE",),
                  ("DATETIME_PRECISION",), ("CHARACTER_OCTET_LENGTH",)],
                 [("v", "varchar", "varchar(3)", "YES", "utf8mb4", None, None, None, 12)]),
                (None, list(keys)), (None, tables_rows)]

        def __enter__(self):
            return self

        def __exit__(self, *a):
            pass

        def execute(self, sql, args=None):
            self.description, self.rows = self.results.pop(0)

        def fetchall(self):
            return self.rows

        def fetchone(self):
            return self.rows[0] if self.rows else None

    class Conn:
        def cursor(self):
            return cursor
    cursor = Cursor()
    return Conn()


def test_a_keyless_table_is_refused_naming_the_fix():
    with pytest.raises(SnapshotRefused, match="db.t has no primary key and no unique key of NOT "
                                              "NULL columns.*ADD PRIMARY KEY"):
        chunks.describe(_information_schema([(5, "BASE TABLE")]), "db", "t")


def test_a_description_carries_the_servers_row_estimates_for_the_chunk_size():
    d = chunks.describe(_information_schema([(5, "BASE TABLE", 312)], [("PRIMARY", "v")]),
                        "db", "t")
    assert (d.chunk_key, d.estimate, d.row_bytes) == (["v"], 5, 312)
    d = chunks.describe(_information_schema([(0, "BASE TABLE", None)], [("PRIMARY", "v")]),
                        "db", "t")  # a table the server has no statistics of yet
    assert (d.estimate, d.row_bytes) == (0, 0)


def test_a_table_dropped_while_described_is_gone_not_keyless():
    # The columns were read before the DROP, the keys and the row count after it.
    assert chunks.describe(_information_schema([]), "db", "t") is None


def test_requests_parse_or_say_what_is_wrong():
    assert signals.parse_request(signals.request(["a.b"], "x > 1")) == {"tables": ["a.b"],
                                                                        "where": "x > 1"}
    with pytest.raises(ValueError, match="db.table"):
        signals.parse_request('{"tables": ["nodot"]}')


def test_the_local_server_is_provisioned_with_the_snapshot_tables_the_code_names():
    import os
    script = open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "deploy", "local",
                               "mysql.sh")).read()
    for statement in signals.tables_sql("streamer_heartbeat"):
        assert statement.replace("`", "") + ";" in script


class _ReadOnlyTables(Tables):
    """Two chunks of shop.t, read at GTID positions: those around each SELECT in turn."""

    def __init__(self):
        super().__init__([CHUNK1, CHUNK2_OLD], [shop_t(False)])
        self.positions = ["0-1-10", "0-1-12", "0-1-12", "0-1-12"]

    def gtid_position(self):
        return self.positions.pop(0)

    def read_at_position(self, *args):
        low = self.gtid_position()  # the position the chunk's consistent read saw
        return (*self.read(*args), low)

    def watermark(self, mark):
        raise AssertionError("read-only mode writes nothing")


def _read_only(tmp_path, clock=None):
    """A read-only snapshot of shop.t, its first chunk read."""
    from streamer.schema.versions import TableCatalog

    cfg = _cfg(tmp_path, "snapshot: {mode: read_only, chunk_rows: 4}\n")
    table_filter = TableFilter(["shop.*"], [])
    snaps = Snapshots(cfg, "pw", table_filter, tables=_ReadOnlyTables,
                      clock=clock or FakeClock())
    snaps.reset({"queue": [{"id": "1", "table": "shop.t", "where": None, "last_key": None,
                            "chunk": 0, "rows": 0, "estimate": 4}], "done": 0, "rows": 0},
                TableCatalog("ns", table_filter))
    snaps.pump()
    return snaps


def test_read_only_mode_frames_a_chunk_by_the_gtid_positions_around_its_select(tmp_path):
    from streamer.position import GtidSet

    snaps = _read_only(tmp_path)
    emitted = []

    def emit(chunk, event):
        assert event is None
        emitted.append(sorted(k[0] for k in chunk.kept()))
        return len(chunk.kept())

    tv = snaps.chunk.tv

    class Rows:
        def __init__(self, *ids):
            self.rows = [{"values": {"id": i, "v": "x"}} for i in ids]

    def land(gtids):
        """What the snapshot stage does between transactions: publish a chunk that landed."""
        chunk = snaps.on_position(gtids)
        if chunk is None:
            return 0
        sent = emit(chunk, None)
        snaps.finish(chunk, sent)
        return sent

    assert land(GtidSet("0-1-9")) == 0 and snaps.window is None
    snaps.on_change(tv, Rows(1), "c")  # before the low position: the chunk keeps key 1
    assert land(GtidSet("0-1-10")) == 0 and snaps.window is snaps.chunk
    snaps.on_change(tv, Rows(3), "d")  # between the positions: key 3 leaves
    assert land(GtidSet("0-1-11")) == 0
    assert land(GtidSet("0-1-12")) == 3
    assert emitted == [[1, 2, 4]]
    assert snaps.progress()["queue"][0]["last_key"] == ["4"]
    # The next chunk was read at once; the reader has its positions already, so it lands next.
    assert land(GtidSet("0-1-12")) == 2 and emitted[-1] == [5, 6]
    assert snaps.progress() == {"queue": [], "done": 1, "rows": 5}


def _statuses(*snaps):
    queue = list(snaps)

    def fetch():
        return {"snapshot": queue.pop(0) if len(queue) > 1 else queue[0]}
    return fetch


def _snap(table, rows, estimate, left, done, total):
    return {"table": table, "table_rows": rows, "table_estimate": estimate, "tables_left": left,
            "tables_done": done, "rows": total, "chunks": 1, "rows_per_s": 1000.0, "eta_s": 3.0}


def test_follow_shows_a_bar_per_table_on_a_terminal_and_lines_elsewhere(tmp_path):
    import io

    from streamer.tools import snapshot as tool

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    steps = [{"tables_done": 2, "tables_left": 0, "rows": 10},  # before the request is taken
             _snap("db.a", 500, 1000, 2, 2, 510), _snap("db.a", 1000, 1000, 2, 2, 1010),
             _snap("db.b", 300, 200, 1, 3, 1310),  # an estimate that was low
             {"tables_done": 4, "tables_left": 0, "rows": 1400}]
    term = Terminal()
    assert tool.follow({}, 7, 2, interval=0, fetch=_statuses(*steps), out=term) == 0
    text = term.getvalue()
    assert "db.a" in text and "db.b" in text and "100%" in text and "rows/s" in text
    assert text.rstrip().endswith("request 7: done, 4 tables and 1400 rows snapshotted so far")

    plain = io.StringIO()
    assert tool.follow({}, 7, 2, interval=0, fetch=_statuses(*steps), out=plain) == 0
    lines = plain.getvalue().splitlines()
    assert lines[0].startswith("snapshot   db.a 500/~1000 rows, 2 tables left") and len(lines) == 4


def test_an_explicit_start_position_keeps_the_snapshots_under_way(tmp_path):
    from streamer.engine.start import SourceInfo, initial_position
    cfg = _cfg(tmp_path)
    progress = {"queue": [{"id": "1", "table": "shop.t", "where": None, "last_key": ["9"],
                           "chunk": 3, "rows": 30, "estimate": 100}], "done": 0, "rows": 30}
    checkpoint = Position("mysql-bin.000007", 1234, snapshot=progress)
    pos = initial_position(cfg, checkpoint, SourceInfo(1, ("mysql-bin.000009", 4), None),
                           Position("mysql-bin.000008", 4), None)
    assert (pos.file, pos.pos) == ("mysql-bin.000008", 4) and pos.snapshot == progress


def test_only_the_latest_table_id_of_each_snapshot_table_is_kept(make):
    from streamer.engine.stages.rows import Rows

    streamer, publisher = make()
    rows = streamer.pipeline(publisher, None, Position(FILE, 4)).rows
    marks, requests = object(), object()
    before = dict(rows.claimed)
    for table_id in range(100, 200):  # a table reopened again and again over a long run
        rows.claim("streamer_heartbeat", signals.WATERMARK, table_id, marks)
        rows.claim("streamer_heartbeat", signals.SIGNAL, table_id + 1000, requests)
    assert isinstance(rows, Rows)
    assert {k: v for k, v in rows.claimed.items() if k not in before} == {199: marks,
                                                                          1199: requests}


def test_a_failed_watermark_or_request_write_names_its_fix():
    import pymysql

    denied = pymysql.err.OperationalError(1142, "INSERT command denied to user 'x'@'h'")
    err = signals.explain(denied, "streamer_heartbeat", signals.SIGNAL, "x", "write a request to")
    assert "may not write a request to streamer_heartbeat.snapshot_signal" in str(err)
    assert "GRANT INSERT, UPDATE ON `streamer_heartbeat`.* TO that user" in str(err)
    missing = pymysql.err.ProgrammingError(1146, "Table doesn't exist")
    err = signals.explain(missing, "streamer_heartbeat", signals.WATERMARK, "x", "write the mark to")
    assert "does not exist" in str(err) and signals.tables_sql("streamer_heartbeat")[0] in str(err)
    read_only = pymysql.err.OperationalError(1290, "--read-only option")
    err = signals.explain(read_only, "db", signals.WATERMARK, "x", "write the watermark to")
    assert "snapshot.mode: read_only" in str(err) and err.exit_code == 3


class _Refusing:
    """A connection whose every statement the server answers with ``error``."""

    def __init__(self, error):
        self.error = error

    def cursor(self):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, *args):
        raise self.error


@pytest.mark.parametrize("error,stops", [
    (pymysql.err.OperationalError(1142, "INSERT command denied"), True),  # a grant to give
    (pymysql.err.OperationalError(1290, "--read-only option"), True),
    (pymysql.err.ProgrammingError(1146, "Table doesn't exist"), True),
    # A lock (a backup's FLUSH TABLES WITH READ LOCK) or a deadlock: the snapshot reads that
    # chunk again later (engine.snapshot), where this stopped the streamer.
    (pymysql.err.OperationalError(1205, "Lock wait timeout exceeded"), False),
    (pymysql.err.OperationalError(1213, "Deadlock found"), False),
    (pymysql.err.OperationalError(2013, "Lost connection"), False),  # a dropped stream's retry
])
def test_a_watermark_write_stops_the_streamer_only_for_a_refusal_a_person_must_fix(error, stops):
    from streamer.errors import SourceError

    with pytest.raises(SourceError if stops else type(error)) as raised:
        signals.write_watermark(_Refusing(error), "hb", "s", "L1", "x")
    assert isinstance(raised.value, SourceError) == stops


def _keyed(key, order=None):
    return chunks.Described("shop", "t", [], key, 1, key_order=tuple(order or ["int"] * len(key)))


def test_a_changed_chunk_key_starts_the_tables_snapshot_again_from_its_first_row(tmp_path, caplog):
    from streamer.engine.snapshot import job

    snaps = Snapshots(_cfg(tmp_path), "pw", TableFilter(["shop.*"], []))
    j = dict(job("r1", "shop.t", None), last_key=["1000"], key=["id"], order=["int"], chunk=3,
             rows=30000)
    snaps._same_key(j, _keyed(["id"]))
    assert (j["last_key"], j["chunk"]) == (["1000"], 3)  # the same key: on from where it was
    snaps._same_key(j, _keyed(["id", "b"]))  # the primary key got longer
    assert (j["last_key"], j["key"], j["chunk"]) == (None, ["id", "b"], 0)
    assert "chunk key changed from (id) to (id, b) after 30000 rows" in caplog.text
    j.update(last_key=["'a'"], key=["id", "b"])
    snaps._same_key(j, _keyed(["uuid"]))  # replaced: its literals would be compared with the wrong column
    assert j["last_key"] is None
    # A checkpoint written before the key's names were kept: its length tells a longer key.
    old = dict(job("r2", "shop.t", None), last_key=["7"], chunk=1)
    del old["key"], old["order"]
    snaps._same_key(old, _keyed(["id", "b"]))
    assert old["last_key"] is None


def test_a_chunk_key_sorted_another_way_starts_the_tables_snapshot_again(tmp_path, caplog):
    from streamer.engine.snapshot import job

    snaps = Snapshots(_cfg(tmp_path), "pw", TableFilter(["shop.*"], []))
    bin_, ci = "varchar(20) utf8mb4_bin", "varchar(20) utf8mb4_general_ci"
    j = dict(job("r1", "shop.t", None), last_key=["'K1'"], key=["w"], order=[bin_], chunk=3,
             rows=150)
    snaps._same_key(j, _keyed(["w"], [bin_]))
    assert (j["last_key"], j["chunk"]) == (["'K1'"], 3)
    snaps._same_key(j, _keyed(["w"], [ci]))  # 'a…' sorted after 'K1', now before it
    assert (j["last_key"], j["key"], j["order"], j["chunk"]) == (None, ["w"], [ci], 0)
    assert (f"chunk key (w) changed its order ({bin_} to {ci}) after 150 rows; it starts again "
            f"from the first row") in caplog.text
    # An ENUM's members are in its type: a member added in front renumbers the key literals.
    j.update(last_key=["2"], order=["enum('a','b')"])
    snaps._same_key(j, _keyed(["w"], ["enum('z','a','b')"]))
    assert j["last_key"] is None
    # A checkpoint written before the order was kept goes on, and keeps the order from then.
    old = dict(job("r2", "shop.t", None), last_key=["7"], key=["w"], chunk=1)
    del old["order"]
    snaps._same_key(old, _keyed(["w"], [ci]))
    assert (old["last_key"], old["order"]) == (["7"], [ci])


def test_enum_set_and_bit_keys_are_compared_as_the_numbers_they_sort_by():
    class Conn:
        def escape(self, value):
            return repr(value)

    enum = chunks.Column("e", chunks.T.ENUM, enum_values=("b", "a", "c"))
    sets = chunks.Column("s", chunks.T.SET, set_values=("x", "y", "z"))
    bits = chunks.Column("bt", chunks.T.BIT, bits=13, bytes=2)
    text = chunks.Column("v", chunks.T.VARCHAR)
    # 'a' is the 2nd member: ORDER BY puts it after 'b', so "> 'a'" would skip 'b' rows.
    assert chunks.key_literal(Conn(), enum, "a") == "2"
    assert chunks.key_literal(Conn(), enum, "") == "0"  # the invalid value, index 0
    assert chunks.key_literal(Conn(), sets, "x,z") == "5"
    assert chunks.key_literal(Conn(), sets, "") == "0"
    assert chunks.key_literal(Conn(), bits, b"\x01\x02") == "258"
    assert chunks.key_literal(Conn(), text, "a") == "'a'"


def test_the_rate_is_the_last_windows_own_and_falls_while_a_snapshot_stalls(tmp_path):
    from streamer.engine.snapshot import RATE_WINDOW_S

    class Clock:
        now = 1000.0

        def monotonic(self):
            return self.now

    clock = Clock()
    snaps = Snapshots(_cfg(tmp_path), "pw", TableFilter(["shop.*"], []), clock=clock)
    assert snaps.rate() == 0.0
    snaps._sample()  # the first read: nothing done yet
    for _ in range(10):  # a slow start: 100 rows a second
        clock.now += 1.0
        snaps.rows += 100
        snaps._sample()
    assert snaps.rate() == pytest.approx(100.0)
    for _ in range(int(RATE_WINDOW_S) + 5):  # then 1000 rows a second for over a window
        clock.now += 1.0
        snaps.rows += 1000
        snaps._sample()
    assert snaps.rate() == pytest.approx(1000.0, rel=0.05)  # the slow start has left the window
    clock.now += RATE_WINDOW_S  # no chunk ends for a window: the rate halves, it does not stay
    assert snaps.rate() < 600.0


class _Unknown(Tables):
    """Its chunk's SELECT meets an unknown column (or ``error``) ``times`` times."""

    def __init__(self, times, versions,
                 error=(1054, "Unknown column 'n' in 'field list'")):
        super().__init__([CHUNK1], versions)
        self.times = times
        self.error = error

    def open(self, *args):
        if self.times:
            self.times -= 1
            raise pymysql.err.OperationalError(*self.error)
        return super().open(*args)


def _queued(tmp_path, tables, where, clock=None, mode="watermark"):
    """Snapshots of shop.t in chunks of 4 rows, read from ``tables``, asked with ``where``."""
    from streamer.schema.versions import TableCatalog

    table_filter = TableFilter(["shop.*"], [])
    snaps = Snapshots(_cfg(tmp_path, f"snapshot: {{mode: {mode}, chunk_rows: 4}}\n"), "pw",
                      table_filter,
                      clock=clock or FakeClock(step=0), tables=lambda: tables)
    snaps.reset({"queue": [{"id": "1", "table": "shop.t", "where": where, "last_key": None,
                            "chunk": 0, "rows": 0, "estimate": 4}], "done": 0, "rows": 0},
                TableCatalog("ns", table_filter))
    return snaps


def _put_off(snaps, clock, times):
    """Pump ``times`` chunk reads that are each put off, and nothing read before each is due:
    the waits (s) each was given."""
    waits = []
    for _ in range(times):
        snaps.pump()
        assert snaps.chunk is None and len(snaps.queue) == 1
        waits.append(round(snaps.retry_at - clock.now, 3))
        snaps.pump()  # not due yet: nothing is read
        clock.now = snaps.retry_at
    return waits


def test_a_chunk_whose_columns_keep_changing_under_its_select_is_read_later(tmp_path, caplog):
    clock = FakeClock(step=0)
    tables = _Unknown(7, [shop_t(False)])  # a column goes between each description and SELECT
    snaps = _queued(tmp_path, tables, None, clock)
    waits = []
    for _ in range(3):
        snaps.pump()  # twice in a row: read again later, waiting longer each time
        assert snaps.chunk is None and len(snaps.queue) == 1
        waits.append(round(snaps.retry_at - clock.now, 3))
        snaps.pump()  # not due yet: nothing is read
        assert tables.times == 7 - 2 * len(waits)
        clock.now = snaps.retry_at
    assert waits == [0.1, 0.2, 0.4]
    assert "changed between its description and its chunk's SELECT twice in a row (3 times in " \
           "a row now, over 0 s); reading that chunk again in 0.4 s" in caplog.text
    snaps.pump()  # the seventh change, then the chunk is read
    assert snaps.chunk is not None and snaps.changing.times == 0 and tables.times == 0
    assert "ends" not in caplog.text


def test_a_column_going_under_a_conditioned_chunk_has_it_read_again(tmp_path, caplog):
    # Described with n; n dropped before the SELECT: the table now has no n, so the chunk is
    # read again for the table as it is, the condition kept.
    tables = _Unknown(1, [shop_t(True), shop_t(False)])
    snaps = _queued(tmp_path, tables, "v <> 'x'")
    snaps.pump()
    assert snaps.chunk is not None and tables.times == 0
    assert tables.reads == [(None, "v <> 'x'", 4, ["id", "v"])]
    assert "ends" not in caplog.text


def test_a_condition_the_server_finds_a_column_unknown_in_ends_the_snapshot_by_name(
        tmp_path, caplog):
    # "hour" passes the check as a keyword, but the server reads it as a column: the table's
    # columns did not change, so it is the condition, and reading again would not help.
    tables = _Unknown(5, [shop_t(False)])
    snaps = _queued(tmp_path, tables, "hour > 3")
    snaps.pump()
    assert snaps.queue == [] and snaps.chunk is None and tables.times == 4
    assert "snapshot of shop.t ends without its remaining rows: the server refused the chunk's " \
           "SELECT (1054: Unknown column 'n' in 'field list'); check the request's condition " \
           "'hour > 3'" in caplog.text


@pytest.mark.parametrize("server,start,refusal", [
    # MySQL with gtid_mode OFF (its default): nothing frames a chunk.
    (dict(gtids=False, mariadb=False), Position("mysql-bin.000001", 4),
     "writes no GTIDs .*gtid_mode=ON.*snapshot.mode: watermark"),
    # MySQL with GTIDs, started where it had executed none yet: an empty set is its place.
    (dict(gtids=True, mariadb=False), Position("mysql-bin.000001", 4), None),
    (dict(gtids=True, mariadb=False), Position("mysql-bin.000001", 4, gtid_set="u:1-5"), None),
    # MySQL committing out of its binlog order: a chunk's window can't be told from the stream.
    (dict(gtids=True, mariadb=False, in_order=False), Position("mysql-bin.000001", 4),
     "binlog_order_commits OFF: .*SET GLOBAL binlog_order_commits=ON.*snapshot.mode: watermark"),
    # MariaDB names the start's position itself; a file it doesn't have has none.
    (dict(gtids=True, mariadb=True, at="0-1-7"), Position("b.000001", 400), None),
    (dict(gtids=True, mariadb=True, at=None), Position("b.000001", 400),
     "none for b.000001:400"),
])
def test_read_only_mode_starts_where_the_servers_gtids_place_it(tmp_path, server, start,
                                                                 refusal):
    from streamer.position import GtidSet

    class Positions(Tables):
        def __init__(self):
            super().__init__([], [shop_t(False)])

        def writes_gtids(self):
            return server["gtids"]

        def is_mariadb(self):
            return server["mariadb"]

        def commits_in_binlog_order(self):
            return server.get("in_order", True)

        def gtid_at(self, file, pos):
            return server.get("at")

    snaps = Snapshots(_cfg(tmp_path, "snapshot: {mode: read_only}\n"), "pw",
                      TableFilter(["shop.*"], []), tables=Positions)
    gtids = GtidSet(start.gtid_set)
    if refusal is None:
        snaps.seed(gtids, start)
        assert str(gtids) == (server.get("at") or start.gtid_set)
        return
    with pytest.raises(SnapshotRefused, match=refusal):
        snaps.seed(gtids, start)


class _Broken(Tables):
    """Its chunk's SELECT meets a connection that broke: ``error`` raised."""

    def __init__(self, error):
        super().__init__([CHUNK1], [shop_t(False)])
        self.error = error

    def open(self, *args):
        raise self.error


@pytest.mark.parametrize("error", [
    pymysql.err.OperationalError(2013, "Lost connection to MySQL server during query"),
    # PyMySQL's word for a statement on a connection that already broke: it was read as a
    # refusal of the SELECT (code 0 < the client's codes), and the snapshot ended without
    # its remaining rows (seen with the chunk connection killed, snapshot.mode read_only).
    pymysql.err.InterfaceError(0, ""),
])
def test_a_chunk_connection_that_broke_is_retried_not_taken_for_a_refusal(tmp_path, caplog,
                                                                          error):
    snaps = _queued(tmp_path, _Broken(error), None)
    with pytest.raises(type(error)):
        snaps.pump()
    assert len(snaps.queue) == 1 and "ends" not in caplog.text


def test_a_chunk_whose_select_is_interrupted_is_read_again_later_with_half_the_rows(tmp_path,
                                                                                    caplog):
    # KILL QUERY (by hand, or by pt-kill ending long queries) was taken for the server refusing
    # the SELECT: the table's snapshot ended without its remaining rows (seen on each server).
    clock = FakeClock(step=0)
    tables = _Unknown(2, [shop_t(False)], (1317, "Query execution was interrupted"))
    snaps = _queued(tmp_path, tables, None, clock)
    assert _put_off(snaps, clock, 2) == [0.1, 0.2] and tables.times == 0
    snaps.pump()
    # Counted in a row until a chunk is read whole: an interrupt can come in its rows too.
    assert snaps.chunk is not None and snaps.interrupts.times == 2
    snaps.read_whole()
    assert snaps.interrupts.times == 0
    assert [limit for _, _, limit, _ in tables.reads] == [1]  # 4 rows, then 2, then 1
    assert "snapshot of shop.t: the chunk's SELECT was interrupted (KILL QUERY, by hand or by " \
           "a tool that ends long queries; 2 times in a row now, over 0 s): reading that chunk " \
           "again in 0.2 s, and its chunks 1 rows at most from now on" in caplog.text
    assert "without its remaining rows" not in caplog.text


@pytest.mark.parametrize("error", [
    pymysql.err.OperationalError(1205, "Lock wait timeout exceeded; try restarting transaction"),
    pymysql.err.OperationalError(1213, "Deadlock found when trying to get lock"),
    pymysql.err.OperationalError(1041, "Out of memory"),
    # A server's own file error (mysys, a code under 1000: PyMySQL's InternalError), as when
    # another server starting in the same tmpdir deleted the chunk's temporary table.
    pymysql.err.InternalError(6, "Error on delete of '/tmp/#sql-temptable-d80-a5d-f59.MAI' "
                                 "(Errcode: 2)"),
])
def test_a_chunk_whose_select_the_server_fails_for_a_while_is_read_again_later(tmp_path, caplog,
                                                                               error):
    # Each was taken for the server refusing the SELECT: the table's snapshot ended without its
    # remaining rows, to be asked again by hand, for an error that passes.
    clock = FakeClock(step=0)
    tables = _Unknown(3, [shop_t(False)], error.args)
    tables.open = _raising(tables, error)
    snaps = _queued(tmp_path, tables, None, clock)
    assert _put_off(snaps, clock, 3) == [0.1, 0.2, 0.4] and tables.times == 0
    assert snaps.failures.times == 3
    snaps.pump()
    snaps.read_whole()
    assert snaps.chunk is not None and snaps.failures.times == 0  # read whole: counted afresh
    code, text = error.args
    then = "the table or the server is locked: it waits for the lock to go" if code in (
        1205, 1213) else "the table's snapshot ends if its reads keep failing for 300 s"
    assert f"snapshot of shop.t: the chunk's SELECT failed ({code}: {text}); reading that chunk " \
           f"again in 0.4 s (3 times in a row now, over 0 s; {then})" in caplog.text
    assert "without its remaining rows" not in caplog.text


def _raising(tables, error):
    """``tables.open`` that raises ``error`` itself (of its own class) ``tables.times`` times."""
    real = type(tables).__mro__[1].open

    def open_(*args):
        if tables.times:
            tables.times -= 1
            raise error
        return real(tables, *args)
    return open_


def test_a_chunk_whose_reads_keep_failing_ends_its_tables_snapshot_naming_the_error(tmp_path,
                                                                                   caplog):
    from streamer.engine.snapshot import FAILING_MOST_S

    clock = FakeClock(step=0)
    tables = _Unknown(10 ** 6, [shop_t(False)], (1142, "SELECT command denied to user 's'@'%' "
                                                       "for table 't'"))
    snaps = _queued(tmp_path, tables, "v <> 'x'", clock)
    began, tries = clock.now, 0
    while snaps.queue:
        snaps.pump()
        tries += 1
        clock.now = max(clock.now, snaps.retry_at)
        assert tries < 200
    assert clock.now - began >= FAILING_MOST_S and snaps.done == 1 and snaps.failures.times == 0
    # Backing off, at most LATER_MOST_S apart: ~65 tries in 300 s, not thousands.
    assert 60 <= tries <= 70
    assert f"snapshot of shop.t ends without its remaining rows: the chunk's SELECT failed " \
           f"(1142: SELECT command denied to user 's'@'%' for table 't'), and it kept failing " \
           f"for {clock.now - began:.0f} s ({tries} times in a row); ask again once the cause is fixed " \
           f"(check the request's condition \"v <> 'x'\" too)" in caplog.text


def _said_over(snaps, clock, held_s, caplog, words):
    """Pump a chunk put off again and again for ``held_s``: the seconds into the streak at which
    each of the lines with ``words`` said it, and the tries."""
    began, tries = clock.now, 0
    while clock.now - began < held_s:
        snaps.pump()
        tries += 1
        assert len(snaps.queue) == 1 and snaps.chunk is None
        clock.now = max(clock.now, snaps.retry_at)
    said = [r.getMessage() for r in caplog.records if words in r.getMessage()]
    return [int(re.search(r"in a row now, over (\d+) s[;)]", m).group(1)) for m in said], tries


def _said_at_first_then_once_a_minute(at, held_s):
    # Each of the first 3 tries, then one line a minute, not one per try (720 an hour); the
    # last within the last minute: still said while it lasts.
    assert at[:3] == [0, 0, 0] and all(b - a >= 60 for a, b in zip(at[2:], at[3:])), at
    assert 3 + held_s // 65 <= len(at) <= 3 + held_s // 60, (len(at), held_s)
    assert at[-1] > held_s - 65, at[-1]


def test_a_chunk_whose_table_stays_locked_waits_for_the_lock_however_long(tmp_path, caplog):
    # A backup's FLUSH TABLES WITH READ LOCK, or LOCK TABLES, may be held for long: the
    # snapshot, hours into a big table, must not end for it. Past ~85 min (1,024 tries) the
    # doubling wait was no float any more: OverflowError.
    from streamer.engine.streak import LATER_MOST_S

    clock = FakeClock(step=0)
    tables = _Unknown(10 ** 6, [shop_t(False)], (1205, "Lock wait timeout exceeded; try "
                                                       "restarting transaction"))
    snaps = _queued(tmp_path, tables, None, clock)
    held_s = 2 * 3600
    at, tries = _said_over(snaps, clock, held_s, caplog, "SELECT failed (1205")
    assert snaps.retry_at - clock.now <= LATER_MOST_S  # still asking every 5 s at most
    assert tries > 1400, tries
    _said_at_first_then_once_a_minute(at, held_s)
    tables.times = 0  # the lock goes
    clock.now = snaps.retry_at
    snaps.pump()
    snaps.read_whole()
    assert snaps.chunk is not None and snaps.failures.times == 0
    assert "without its remaining rows" not in caplog.text


class _Unwritable(Tables):
    """Its watermark writes fail with ``error`` ``times`` times (a lock held on the server)."""

    def __init__(self, times, error):
        super().__init__([CHUNK1, CHUNK1], [shop_t(False)])
        self.times, self.error = times, error

    def watermark(self, mark):
        if self.times:
            self.times -= 1
            raise self.error
        super().watermark(mark)


@pytest.mark.parametrize("low", [True, False])
def test_a_watermark_the_server_cant_write_for_a_while_has_its_chunk_read_again(tmp_path, caplog,
                                                                                 low):
    # FLUSH TABLES WITH READ LOCK (a backup's) makes the watermark's write wait for the lock,
    # holding the stream, then fail: that stopped the streamer ("write the watermark to ...
    # failed (1205)"). The chunk is read again once it can be framed.
    clock = FakeClock(step=0)
    tables = _Unwritable(0, pymysql.err.OperationalError(
        1205, "Lock wait timeout exceeded; try restarting transaction"))
    snaps = _queued(tmp_path, tables, None, clock)
    if low:
        tables.times = 2
        assert _put_off(snaps, clock, 2) == [0.1, 0.2]
        snaps.pump()
    else:
        snaps.pump()  # its low mark written, then the high one fails twice
        tables.times = 2
        for wait in (0.1, 0.2):
            snaps.read_whole()
            assert snaps.chunk is None and round(snaps.retry_at - clock.now, 3) == wait
            clock.now = snaps.retry_at
            snaps.pump()
    snaps.read_whole()
    assert snaps.chunk is not None and snaps.failures.times == 0 and tables.times == 0
    chunk = snaps.chunk
    assert tables.marks[-2:] == [chunk.low, chunk.high]  # framed by marks of its own read
    assert "snapshot of shop.t: a statement of the snapshot failed (1205: Lock wait timeout " \
           "exceeded; try restarting transaction); reading that chunk again in 0.2 s (2 times " \
           "in a row now, over 0 s; the table or the server is locked: it waits for the lock to go)" \
           in caplog.text
    assert "without its remaining rows" not in caplog.text


def test_an_error_of_the_select_itself_ends_its_tables_snapshot_at_once(tmp_path, caplog):
    # Reading again would meet it again: the request's condition, say.
    tables = _Unknown(5, [shop_t(False)])
    tables.open = _raising(tables, pymysql.err.ProgrammingError(
        1064, "You have an error in your SQL syntax"))
    snaps = _queued(tmp_path, tables, "v <> 'x' AND", FakeClock(step=0))
    snaps.pump()
    assert snaps.queue == [] and tables.times == 4
    assert "snapshot of shop.t ends without its remaining rows: the server refused the chunk's " \
           "SELECT (1064: You have an error in your SQL syntax); check the request's " \
           "condition \"v <> 'x' AND\"" in caplog.text


class _Undescribed(Tables):
    """The table's description (information_schema) fails with ``error`` ``times`` times."""

    def __init__(self, times, error):
        super().__init__([CHUNK1], [shop_t(False)])
        self.times, self.error = times, error

    def describe(self, db, table):
        if self.times:
            self.times -= 1
            raise self.error
        return super().describe(db, table)


def test_a_description_the_server_fails_is_asked_again_later(tmp_path, caplog):
    # It ended the snapshot as "failed unexpectedly" (seen in CI: a temporary table of the
    # information_schema query deleted under it).
    clock = FakeClock(step=0)
    tables = _Undescribed(2, pymysql.err.InternalError(6, "Error on delete of '/tmp/#sql-1' "
                                                          "(Errcode: 2)"))
    snaps = _queued(tmp_path, tables, None, clock)
    assert _put_off(snaps, clock, 2) == [0.1, 0.2]
    snaps.pump()
    assert snaps.chunk is not None and tables.times == 0
    assert "snapshot of shop.t: a statement of the snapshot failed (6: Error on delete of " \
           "'/tmp/#sql-1' (Errcode: 2)); reading that chunk again in 0.2 s" in caplog.text
    assert "without its remaining rows" not in caplog.text


@pytest.mark.parametrize("kind", ["interrupted", "changing", "out_of_order"])
def test_a_chunk_put_off_for_an_hour_says_so_once_a_minute_not_per_try(tmp_path, caplog, kind):
    # pt-kill ending every chunk's SELECT, a migration's statements one after another, MySQL
    # left with binlog_order_commits OFF: each retry, every 5 s at most, was a WARNING.
    clock = FakeClock(step=0)
    if kind == "out_of_order":
        snaps = _queued(tmp_path, _OutOfOrder(10 ** 6), None, clock, mode="read_only")
        words = "binlog_order_commits OFF"
    elif kind == "interrupted":
        snaps = _queued(tmp_path, _Unknown(10 ** 6, [shop_t(False)], (1317, "Query execution "
                                                                         "was interrupted")),
                        None, clock)
        words = "SELECT was interrupted"
    else:
        snaps = _queued(tmp_path, _Unknown(10 ** 6, [shop_t(False)]), None, clock)
        words = "its columns changed"
    at, _ = _said_over(snaps, clock, 3600, caplog, words)
    _said_at_first_then_once_a_minute(at, 3600)


class _OutOfOrder(_ReadOnlyTables):
    """MySQL with binlog_order_commits OFF for the first ``times`` chunk reads."""

    def __init__(self, times):
        super().__init__()
        self.times = times

    def read_at_position(self, *args):
        if self.times:
            self.times -= 1
            raise chunks.OutOfOrder()
        return super().read_at_position(*args)


def test_a_read_only_chunk_is_put_off_while_mysql_commits_out_of_binlog_order(tmp_path, caplog):
    # The start refuses the setting, but it is dynamic: a chunk read while it is OFF could miss
    # a change the stream read before its window, and publish the older row after it.
    clock = FakeClock(step=0)
    tables = _OutOfOrder(2)
    snaps = _queued(tmp_path, tables, None, clock, mode="read_only")
    assert _put_off(snaps, clock, 2) == [0.1, 0.2] and tables.times == 0
    snaps.pump()
    assert snaps.chunk is not None and snaps.chunk.low == "0-1-10" and snaps.disordered.times == 0
    assert "snapshot of shop.t: this MySQL now has binlog_order_commits OFF, and a read-only " \
           "chunk read while it is OFF could publish a row older than a change the stream has " \
           "read; reading that chunk in 0.2 s (2 times in a row now, over 0 s). SET GLOBAL " \
           "binlog_order_commits=ON" in caplog.text
    assert "without its remaining rows" not in caplog.text


def test_a_read_only_chunk_that_waits_long_for_its_position_says_what_the_stream_lacks(
        tmp_path, caplog):
    # A position the stream never reaches would hold the snapshot for ever, without a word.
    from streamer.engine.snapshot import POSITION_WAIT_S
    from streamer.position import GtidSet

    clock = FakeClock(step=0)
    snaps = _read_only(tmp_path, clock)
    behind = GtidSet("0-1-7")
    with caplog.at_level(logging.WARNING):
        assert snaps.on_position(behind) is None
        clock.now += POSITION_WAIT_S - 1
        assert snaps.on_position(behind) is None and not caplog.records
        clock.now += 1
        assert snaps.on_position(behind) is None
        said = [r.getMessage() for r in caplog.records]
        assert len(said) == 1 and "shop.t: chunk 1 has waited 30 s" in said[0] \
            and "domain 0: seq 8..10" in said[0]
        clock.now += POSITION_WAIT_S - 1  # said again once the wait has doubled
        snaps.on_position(behind)
        assert len(caplog.records) == 1
        clock.now += 1
        snaps.on_position(GtidSet("0-1-10"))  # the window opened; now its high position
        said = [r.getMessage() for r in caplog.records]
        assert len(said) == 2 and "waited 60 s" in said[1] and "domain 0: seq 11..12" in said[1]
    assert snaps.on_position(GtidSet("0-1-12")) is snaps.chunk
