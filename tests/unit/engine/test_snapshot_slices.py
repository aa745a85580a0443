"""A chunk read a slice at a time, between the stream's own changes: the unbuffered read's
bounds, the window over rows not read yet, and the stage's share of the loop."""
import json
from types import SimpleNamespace

import pymysql
import pytest
from pymysqlreplication.row_event import WriteRowsEvent

from streamer import config
from streamer.codec.decode import Decoder
from streamer.engine import snapshot
from streamer.engine.snapshot import Chunk, Snapshots, job
from streamer.engine.stages.snapshot import SHARE_S, SnapshotStage
from streamer.errors import SnapshotRefused
from streamer.position import Position
from streamer.schema.versions import TableFilter
from streamer.source import chunks
from streamer.source.rowplan import INVALID
from streamer.source.textrows import FastResult, row_reader
from tests.unit.schema.test_textavro import packet
from tests.unit.engine.test_snapshot import shop_t
from tests.unit.engine.test_stages import ctx  # noqa: F401 - the fixture


class Server:
    """An unbuffered result in memory: ``read_payloads`` hands out the SELECT's rows in order,
    each a tuple already (its ``reader`` reads it as it is)."""

    def __init__(self, rows, fail_after=None):
        self.rows = list(rows)
        self.sql = []
        self.fail_after = fail_after
        self.closed = 0
        self.asked = []  # each read_payloads's n

    def unbuffered(self, sql):
        self.sql.append(sql)
        return self

    def reader(self):
        return tuple

    def key_reader(self, indexes):
        return lambda row: tuple(row[i] for i in indexes)

    def read_payloads(self, n):
        self.asked.append(n)
        if self.fail_after is not None and self.fail_after <= 0:
            raise pymysql.err.ProgrammingError(1146, "Table 'shop.t' doesn't exist")
        out, self.rows = self.rows[:n], self.rows[n:]
        if self.fail_after is not None:
            self.fail_after -= len(out)
        return out

    def close(self):
        self.closed += 1

    def escape(self, value):
        return str(value)


class PacketServer(Server):
    """The same, its rows the server's text-protocol packets, read with PyMySQL's plan for
    (id INT, v VARCHAR utf8mb4): a chunk's messages are written from them (schema.textavro)."""

    converters = [("ascii", int), ("utf8", None)]
    fields = [SimpleNamespace(db=b"shop", table_name="t", org_table="t", name=n, org_name=n)
              for n in ("id", "v")]
    readable = FastResult.readable  # a row whose text can't be read, made readable

    def __init__(self, rows, fail_after=None):
        super().__init__([packet(*r) for r in rows], fail_after)

    def reader(self):
        return row_reader(self.converters)

    def key_reader(self, indexes):  # as FastResult's: the fields up to the last key's
        read = row_reader(self.converters[:max(indexes) + 1])
        return lambda data: tuple(read(data)[i] for i in indexes)


def _read(rows, limit, slice_rows):
    server = Server([(i, f"v{i}") for i in rows])
    read = chunks.ServerRead(server, shop_t(False), ["0"], None, limit)
    got = []
    while not read.done:
        got.append([read.unpack(r)["id"] for r in read.fetch(slice_rows)])
    return got, read, server


def test_a_chunk_read_in_slices_stops_at_its_limit_and_knows_whether_more_follow():
    # The SELECT asks for limit + 1 rows: the extra one says another chunk follows.
    got, read, server = _read(range(1, 6), limit=4, slice_rows=3)
    assert got == [[1, 2, 3], [4]] and (read.final, read.last_key) == (False, ["4"])
    assert "LIMIT 5" in server.sql[0] and server.closed == 1
    got, read, _ = _read(range(1, 5), limit=4, slice_rows=2)  # exactly the limit: the last
    assert got == [[1, 2], [3, 4], []] and (read.final, read.last_key) == (True, ["4"])
    got, read, _ = _read(range(1, 3), limit=4, slice_rows=5)
    assert got == [[1, 2]] and (read.final, read.last_key) == (True, ["2"])
    got, read, _ = _read([], limit=4, slice_rows=5)  # an empty chunk keeps the last key
    assert got == [[]] and (read.final, read.last_key) == (True, ["0"])


def test_a_row_read_after_its_change_in_the_window_stays_out():
    tv = SimpleNamespace(db="shop", table="t", convert=lambda values: None)
    chunk = Chunk(job("1", "shop.t", None), "L", "H", tv, ["id"], None, False)
    chunk.add([{"id": 1, "v": "a"}])
    chunk.remove({"id": 1, "v": "new"})  # changed after it was read
    chunk.remove({"id": 3, "v": "new"})  # changed before it is read: it was read older
    chunk.add([{"id": 2, "v": "b"}, {"id": 3, "v": "old"}, {"id": 4, "v": "c"}])
    chunk.remove({"id": 4, "v": "new"})  # changed after the high mark, before its turn
    chunk.land(None)
    assert chunk.kept() == [(2,)] and list(chunk.next_rows(None)) == [{"id": 2, "v": "b"}]
    assert chunk.published_all()


class Tables:
    """A table reader whose chunk of ``rows`` is read from an in-memory unbuffered result."""

    def __init__(self, rows, fail_after=None, server=Server):
        self.server = server([(i, f"v{i}") for i in rows], fail_after)
        self.marks = []

    def describe(self, db, table):
        return shop_t(False)

    def watermark(self, mark):
        self.marks.append(mark)

    def open(self, described, last, where, limit, max_bytes=0):
        return chunks.ServerRead(self.server, described, last, where, limit, 0.0, max_bytes)

    def close(self):
        pass


class Reader:
    def __init__(self):
        self.arrived = []  # what more_arrived answers, in turn; then False

    def more_arrived(self):
        return self.arrived.pop(0) if self.arrived else False


def _stage(context, tables, slice_rows=2):
    context.policy.reader = Reader()
    cfg = config.build({"mysql": {"server_id": 9}, "tables": {"include": ["shop.*"]},
                        "snapshot": {"chunk_rows": 10, "slice_rows": slice_rows}})
    snaps = Snapshots(cfg, "pw", TableFilter(["shop.*"], []), clock=context.clock,
                      tables=lambda: tables)
    stage = SnapshotStage(context, snaps, SimpleNamespace(claim=lambda *a: None), Position("f", 4))
    snaps.add("1", ["shop.t"], None)
    snaps.pump()
    return context, snaps, stage


def test_the_stage_reads_until_changes_arrive_and_writes_the_high_mark_once_read(ctx):  # noqa: F811
    tables = Tables(range(1, 8))
    ctx, snaps, stage = _stage(ctx, tables)
    assert tables.marks == [snaps.chunk.low] and snaps.chunk.reading is not None
    ctx.policy.reader.arrived = [False, False, True]  # a change arrives after the second slice
    stage.work()
    assert [k for (k,) in snaps.chunk.kept()] == [1, 2, 3, 4] and len(tables.marks) == 1
    ctx.policy.reader.arrived = [True]  # changes keep coming: they go first...
    stage.work()
    assert len(snaps.chunk.kept()) == 4
    ctx.clock.sleep(SHARE_S)  # ...until the chunk had no slice for SHARE_S
    ctx.policy.reader.arrived = [True, True]
    stage.work()
    assert len(snaps.chunk.kept()) == 6
    stage.work()  # caught up: the rest, then the high mark
    assert [k for (k,) in snaps.chunk.kept()] == list(range(1, 8))
    assert tables.marks == [snaps.chunk.low, snaps.chunk.high] and snaps.chunk.reading is None
    assert snaps.chunk.final and snaps.chunk.last_key == ["7"]


def test_a_slice_is_read_in_batches_each_kept_before_the_next_is_read(ctx, monkeypatch):  # noqa: F811
    monkeypatch.setattr(snapshot, "READ_BATCH", 3)
    tables = Tables(range(1, 13))
    ctx, snaps, stage = _stage(ctx, tables, slice_rows=8)
    kept = []
    add = Chunk.add
    monkeypatch.setattr(Chunk, "add", lambda chunk, rows, keys=None: (
        kept.append(len(chunk.kept())), add(chunk, rows, keys)))
    assert snaps.step()  # one slice: 8 rows, in batches of 3, 3 and 2
    assert tables.server.asked == [3, 3, 2] and kept == [0, 3, 6]
    assert [k for (k,) in snaps.chunk.kept()] == list(range(1, 9))
    assert not snaps.step()  # the rest: rows 9 and 10, and the one that says more follow
    assert tables.server.asked[3:] == [3] and len(snaps.chunk.kept()) == 10
    assert snaps.chunk.reading is None and len(tables.marks) == 2


def test_slice_sizes_double_from_the_first_up_to_the_full_by_table():
    ramp = snapshot.Ramp(1000, 64)
    sizes = []
    for _ in range(8):
        sizes.append(ramp.size("a.t"))
        ramp.done("a.t", sizes[-1])
    assert sizes == [64, 64, 128, 256, 512, 1000, 1000, 1000]
    assert ramp.size("a.u") == 64  # each table its own
    assert snapshot.Ramp(10, 64).size("a.t") == 10  # never over the full size


def test_a_tables_first_slices_read_and_published_are_smaller(ctx, monkeypatch):  # noqa: F811
    monkeypatch.setattr(snapshot, "FIRST_SLICE", 2)
    tables = Tables(range(1, 23))
    ctx, snaps, stage = _stage(ctx, tables, slice_rows=8)
    read = []
    add = Chunk.add
    monkeypatch.setattr(Chunk, "add", lambda chunk, rows, keys=None: (
        read.append(len(rows)), add(chunk, rows, keys)))
    while snaps.step():  # the chunk's 10 rows read in slices of 2, 2, 4, then up to 8
        read.append("|")
    assert read == [2, "|", 2, "|", 4, "|", 2]
    chunk = snaps.window = snaps.chunk
    sent = [stage.publish(chunk, None)]
    while not chunk.published_all():
        sent.append(stage._publish_slice(chunk))
    assert sent == [2, 2, 4, 2] and _read_keys(ctx) == list(range(1, 11))
    # The table's next chunk is read and published in full slices from its start.
    assert snaps.chunk is not chunk and snaps.chunk.reading is not None
    del read[:]
    while snaps.step():
        read.append("|")
    assert read == [8, "|", 2]
    chunk = snaps.window = snaps.chunk
    assert stage.publish(chunk, None) == 8


def test_a_chunks_topic_is_made_sure_of_while_the_chunk_is_read_once_per_version(ctx):  # noqa: F811
    tables = Tables(range(1, 16))
    ctx, snaps, stage = _stage(ctx, tables, slice_rows=4)
    pub = ctx.publisher
    topic = snaps.chunk.tv.topic
    assert pub.soon == []
    stage.work()  # the chunk read, up to its high mark
    # Asked ahead at the chunk's first turn, before its high mark announces the version.
    assert not snaps.chunk.landed and topic not in pub.topics
    assert pub.soon == [(topic, {"cleanup.policy": "compact"} if snaps.chunk.tv.compacted else {})]
    first = snaps.window = snaps.chunk
    stage.publish(first, None)
    assert topic in pub.topics
    while snaps.chunk is first:
        stage.work()
    assert snaps.chunk is not None and snaps.chunk.tv is first.tv  # the next chunk, same version
    assert len(pub.soon) == 1


def test_a_table_dropped_while_its_chunk_is_read_ends_its_snapshot_and_the_stream_goes_on(
        ctx, caplog):  # noqa: F811
    tables = Tables(range(1, 8), fail_after=2)
    ctx, snaps, stage = _stage(ctx, tables)
    stage.work()
    assert snaps.chunk is None and snaps.queue == [] and snaps.done == 1
    assert tables.server.closed == 1  # its result went
    assert "the table was dropped" in caplog.text


class _FailsOnce(Server):
    """The SELECT's rows, its first run failing with ``error`` after ``fail_after`` rows: each
    SELECT starts them again from the first."""

    def __init__(self, rows, fail_after, error):
        super().__init__(rows, fail_after)
        self.all, self.error = list(rows), error

    def unbuffered(self, sql):
        self.rows = list(self.all)
        return super().unbuffered(sql)

    def read_payloads(self, n):
        if self.fail_after is not None and self.fail_after <= 0:
            self.fail_after = None
            raise self.error
        return super().read_payloads(n)


def test_a_chunk_whose_rows_the_server_fails_to_send_is_read_again_whole(ctx, caplog):  # noqa: F811
    # An error in the middle of the SELECT's rows (a lock wait, memory, a temporary file gone)
    # ended the table's snapshot: its chunk is read again, from its first row, a moment later.
    tables = Tables(range(1, 8))
    tables.server = _FailsOnce(tables.server.rows, 2, pymysql.err.OperationalError(
        1205, "Lock wait timeout exceeded; try restarting transaction"))
    ctx, snaps, stage = _stage(ctx, tables)
    stage.work()
    assert snaps.chunk is None and len(snaps.queue) == 1 and snaps.failures.times == 1
    assert tables.server.closed == 1 and len(tables.marks) == 1  # its low mark alone
    ctx.clock.now = snaps.retry_at
    snaps.pump()
    while snaps.step():
        pass
    assert len(tables.marks) == 3  # a low mark of its own, then the high one
    chunk = snaps.window = snaps.chunk
    assert stage.publish(chunk, None) == 2
    while stage.work():
        pass
    assert _read_keys(ctx) == list(range(1, 8))
    assert snaps.failures.times == 0 and len(tables.server.sql) == 2
    assert "snapshot of shop.t: the chunk's SELECT failed (1205: Lock wait timeout exceeded; " \
           "try restarting transaction); reading that chunk again in 0.1 s" in caplog.text
    assert "without its remaining rows" not in caplog.text


def _reads(context):
    """The (key, value) of the op r messages in the open batch, decoded."""
    pub = context.publisher
    schemas = {}
    for topic, _, value in pub.open:
        if topic == pub.schemas_topic:
            record = json.loads(value)
            schemas[record["fingerprint"]] = json.loads(record["schema"])
    dec = Decoder(lambda: schemas)
    decoded = [(dec.decode(key), dec.decode(value)) for topic, key, value in pub.open
               if topic.endswith(".shop.t")]
    return [(key, value) for key, value in decoded if value["op"] == "r"]


def _read_keys(context):
    """The keys of the op r messages in the open batch."""
    return [key["id"] for key, _ in _reads(context)]


@pytest.mark.parametrize("from_packets", [True, False])
def test_a_row_whose_text_its_encoding_cant_read_is_published_as_the_binlogs_and_noted(
        ctx, from_packets):  # noqa: F811
    # MariaDB's SELECT sends a lone UTF-16 surrogate a ucs2 column holds as three bytes no
    # UTF-8 character stands for. The binlog's reader publishes it as one '?' and notes it;
    # the snapshot does the same, written from its packet (schema.textavro) or unpacked.
    tables = Tables([])
    tables.server = PacketServer([(1, "a"), (2, b"A\xed\xa0\x80B"), (3, "\u00e9")])
    ctx, snaps, stage = _stage(ctx, tables)
    noted = INVALID.by_column.get(("shop", "t", "v"), 0)
    snaps.read_whole()
    if not from_packets:
        snaps.chunk.writer = None
    _publish_all(snaps, stage)
    assert [(k["id"], v["after"]["v"]) for k, v in _reads(ctx)] == [
        (1, "a"), (2, "A?B"), (3, "\u00e9")]
    assert INVALID.by_column[("shop", "t", "v")] == noted + 1


def test_a_chunk_key_its_encoding_cant_read_refuses_the_snapshot_naming_the_column():
    # Made readable, the key would not say where the next chunk starts.
    server = PacketServer([(b"\xed\xa0\x80", "x")])
    server.converters = [("utf8", None), ("utf8", None)]
    read = chunks.ServerRead(server, shop_t(False), None, None, 30)
    with pytest.raises(SnapshotRefused, match="chunk key column id of shop.t holds bytes that "
                                               "are not utf8 text .*: eda080"):
        read.fetch(4)


def test_a_chunk_read_whole_whose_key_was_made_readable_refuses_the_snapshot_too():
    # Read-only mode's chunks are read whole (read_chunk): the rows made readable as they came
    # (textrows.FastResult) are the same refusal when a key is among them; a value is not.
    class Conn:
        def __init__(self, unreadable):
            self.result = SimpleNamespace(converters=PacketServer.converters,
                                          unreadable=unreadable)

        def cursor(self):
            conn = self

            class Cursor:
                _result = conn.result

                def __enter__(self):
                    return self

                def __exit__(self, *exc):
                    pass

                def execute(self, sql):
                    pass

                def fetchall(self):
                    return [(1, "A?B")]

                def close(self):
                    pass
            return Cursor()

        def escape(self, value):
            return str(value)

    rows, last, final = chunks.read_chunk(Conn({1: b"A\xed\xa0\x80B"}), shop_t(False),
                                          None, None, 10)
    assert rows == [{"id": 1, "v": "A?B"}] and final
    with pytest.raises(SnapshotRefused, match="chunk key column id of shop.t"):
        chunks.read_chunk(Conn({0: b"\xed\xa0\x80"}), shop_t(False), None, None, 10)


@pytest.mark.parametrize("server", [Server, PacketServer])
def test_a_landed_chunk_goes_out_a_slice_at_a_time_and_a_commit_between_keeps_its_place(
        ctx, server):  # noqa: F811
    tables = Tables(range(1, 8), server=server)
    ctx, snaps, stage = _stage(ctx, tables)
    stage.work()  # caught up: read whole, then its high mark
    chunk = snaps.window = snaps.chunk  # (its low mark, read in the binlog, opened the window)
    assert (chunk.writer is not None) == (server is PacketServer)
    assert chunk.reading is None and tables.marks == [chunk.low, chunk.high]
    assert stage.publish(chunk, None) == 2  # at the high mark: the first slice
    # Row 4, not published yet, changes after the high mark: its change is newer; it leaves.
    snaps.on_change(chunk.tv, SimpleNamespace(rows=[{"values": {"id": 4, "v": "new"}}]), "c")
    # A commit now checkpoints the chunk up to its last row published.
    assert snaps.progress()["queue"][0]["last_key"] == ["2"]
    assert (snaps.progress()["queue"][0]["rows"], snaps.progress()["rows"]) == (2, 2)
    ctx.policy.reader.arrived = [False, True]  # a change arrives after the next slice
    assert stage.work() == 1 and _read_keys(ctx) == [1, 2, 3]  # rows 3 and 4, less 4
    assert snaps.progress()["queue"][0]["last_key"] == ["4"]  # 4 is passed: its change went
    assert stage.work() == 3  # caught up: the rest; the table's snapshot is done
    assert _read_keys(ctx) == [1, 2, 3, 5, 6, 7] and snaps.chunk is None and snaps.window is None
    assert snaps.progress() == {"queue": [], "done": 1, "rows": 6}


def test_what_the_stage_publishes_is_told_the_policy_as_a_snapshots(ctx):  # noqa: F811
    tables = Tables(range(1, 8))
    ctx, snaps, stage = _stage(ctx, tables)
    stage.work()  # read whole, then its high mark
    chunk = snaps.window = snaps.chunk
    high = SimpleNamespace(__class__=WriteRowsEvent, timestamp=1,
                           packet=SimpleNamespace(server_id=9, log_pos=300, event_size=30),
                           rows=[{"values": {"streamer": snaps.name, "mark": chunk.high}}])
    # Published at the high mark (the first slice) and then by work(): none the stream's own.
    assert stage.on_watermarks(high, 0) == 2 and ctx.policy.background == 2
    assert stage.work() == 5 and ctx.policy.background == 7 and snaps.chunk is None


def test_with_changes_of_the_stream_waiting_a_snapshot_takes_one_slice_at_most(ctx):  # noqa: F811
    tables = Tables(range(1, 8))
    ctx, snaps, stage = _stage(ctx, tables)
    ctx.policy.pending = 1  # a change of the stream's own waits for its commit
    stage.work()
    assert len(snaps.chunk.kept()) == 2
    stage.work()  # not SHARE_S since the last slice: none
    assert len(snaps.chunk.kept()) == 2
    ctx.clock.sleep(SHARE_S)
    stage.work()
    assert len(snaps.chunk.kept()) == 4


def test_a_statement_on_the_table_while_its_chunk_goes_out_reads_on_after_what_went(
        ctx):  # noqa: F811
    tables = Tables(range(1, 8))
    ctx, snaps, stage = _stage(ctx, tables)
    stage.work()
    chunk = snaps.chunk
    stage.publish(chunk, None)
    tables.server.rows = [(5, "v5")]  # what the chunk read again from after key 2 finds
    snaps.on_query("ALTER TABLE t ADD COLUMN n INT")
    assert snaps.queue[0]["last_key"] == ["2"] and snaps.rows == 2
    assert "WHERE" in tables.server.sql[-1] and "2" in tables.server.sql[-1].split("WHERE")[1]



def _tv(described):
    from streamer.schema.versions import TableCatalog

    return TableCatalog("ns", TableFilter(["shop.*"], [])).snapshot_version(described)


def _converted(tv, row):
    values = dict(row)
    tv.convert(values)
    return values


def _two_chunks(tv, described, rows, changed):
    """The same rows read into a chunk that holds them as read and one that holds them as dicts
    (as read-only mode's reads come), with the window's ``changed`` rows (converted, as the stage
    hands a change's rows over) taken out of both, the first before the rows are read, the rest
    after."""
    server_read = chunks.ServerRead(Server(rows), described, None, None, 10)
    list_read = chunks.ListRead([server_read.unpack(r) for r in rows], None, True)
    changed = [_converted(tv, r) for r in changed]
    out = []
    for read in (server_read, list_read):
        chunk = Chunk(job("1", "shop.ev", None), "L", "H", tv, described.chunk_key, None, False,
                      read)
        for values in changed[:1]:
            chunk.remove(values)
        while not read.done:
            chunk.add(read.fetch(2), read.keys)
        for values in changed[1:]:
            chunk.remove(values)
        chunk.land(None)
        out.append((chunk, list(chunk.next_rows(None))))
    return out


def test_rows_held_as_read_are_keyed_and_published_as_rows_converted_when_read():
    import datetime

    from pymysqlreplication.constants import FIELD_TYPE as T

    # A DATETIME key: published as µs since the epoch, so the key a change takes out is that.
    d = chunks.Described("shop", "ev", [
        chunks.Column("at", T.DATETIME2, is_primary=True, nullable=False, unsigned=False, fsp=6),
        chunks.Column("v", T.VARCHAR, character_set_name="utf8mb4", nullable=True,
                      unsigned=False, is_primary=False)], ["at"], 4)
    at = [datetime.datetime(2024, 1, 1, 0, 0, i, 5) for i in range(4)]
    tv = _tv(d)
    (held, got), (dicts, want) = _two_chunks(
        tv, d, [(t, f"v{i}") for i, t in enumerate(at)],
        [{"at": at[0], "v": "x"}, {"at": at[2], "v": "y"}])
    assert held.held and held.key_of is not None and not dicts.held
    assert got == want and [r["v"] for r in got] == ["v1", "v3"]
    assert all(isinstance(r["at"], int) for r in got)
    assert all(isinstance(r, tuple) for r in held.rows)  # held as read until then


def test_a_set_key_is_held_as_read_and_keyed_as_its_rows_are_converted():
    from pymysqlreplication.constants import FIELD_TYPE as T

    # A NOT NULL SET key: its members as the column lists them, and a NULL its empty value, as
    # convert fills it in.
    d = chunks.Described("shop", "ev", [
        chunks.Column("s", T.SET, is_primary=True, nullable=False, unsigned=False,
                      set_values=("a", "b")),
        chunks.Column("v", T.VARCHAR, character_set_name="utf8mb4", nullable=True,
                      unsigned=False, is_primary=False)], ["s"], 4)
    tv = _tv(d)
    (held, got), (dicts, want) = _two_chunks(
        tv, d, [("", "v0"), ("a", "v1"), ("b,a", "v2")], [{"s": {"a", "b"}, "v": "x"}])
    assert held.held and held.key_of is not None and not dicts.held
    assert held.keys == dicts.keys == [("",), ("a",), ("a,b",)]
    assert got == want and [(r["s"], r["v"]) for r in got] == [("", "v0"), ("a", "v1")]
    values = {"s": None, "v": None}
    tv.convert(values)
    assert held.key_of((None,)) == (values["s"],) == ("",)


class _Failing(Server):
    """A server whose rows read whole fail, unexpectedly, on the row with id ``bad``; its keys
    read alone don't (a held row fails only as it is published)."""

    def __init__(self, rows, bad, error):
        super().__init__(rows)
        self.bad, self.error = bad, error

    def reader(self):
        def read(row):
            if row[0] == self.bad:
                raise self.error
            return tuple(row)
        return read


def test_a_held_row_that_fails_as_it_is_published_ends_its_tables_snapshot_not_the_stream(
        ctx, caplog):  # noqa: F811
    tables = Tables(range(1, 8))
    tables.server = _Failing(tables.server.rows, 4, IndexError("bytes end early"))
    ctx, snaps, stage = _stage(ctx, tables)
    snaps.add("2", ["shop.t"], None)  # the next table's request (the same table, asked again)
    stage.work()
    chunk = snaps.window = snaps.chunk
    assert chunk.held and stage.publish(chunk, None) == 2
    assert stage.work() == 1  # row 3 went; row 4 failed: request 1 ends there
    assert _read_keys(ctx) == [1, 2, 3]
    assert "snapshot of shop.t ends without its remaining rows" in caplog.text
    assert "after 3 of its rows were published (request 1): IndexError: bytes end early" \
        in caplog.text
    assert [j["id"] for j in snaps.queue] == ["2"] and snaps.done == 1 and snaps.rows == 3
    assert snaps.chunk is not None and snaps.chunk.job["id"] == "2"  # the next one is read


def test_a_streamer_error_of_a_held_row_still_stops_the_stream(ctx):  # noqa: F811
    from streamer.errors import UnsupportedValue

    tables = Tables(range(1, 8))
    tables.server = _Failing(tables.server.rows, 2, UnsupportedValue("a value out of range"))
    ctx, snaps, stage = _stage(ctx, tables)
    stage.work()
    chunk = snaps.window = snaps.chunk
    with pytest.raises(UnsupportedValue):
        stage.publish(chunk, None)


def test_a_row_whose_message_cant_be_written_ends_its_tables_snapshot_not_the_stream(
        ctx, caplog):  # noqa: F811
    tables = Tables(range(1, 8), server=PacketServer)
    tables.server.rows[2] = packet(3)  # a packet without its second field
    ctx, snaps, stage = _stage(ctx, tables)
    stage.work()
    chunk = snaps.window = snaps.chunk
    assert chunk.writer is not None and stage.publish(chunk, None) == 2
    assert stage.work() == 0 and _read_keys(ctx) == [1, 2]
    assert "after 2 of its rows were published (request 1): IndexError" in caplog.text
    assert snaps.queue == [] and snaps.done == 1 and snaps.chunk is None


def test_chunk_sizes_go_by_bytes_as_measured_else_as_the_server_estimates():
    sizes = snapshot.ChunkSize(budget=1000, most=50)
    assert sizes.rows("a.t") == 50  # nothing to go by: FIRST_CHUNK_ROWS, at most `most`
    assert snapshot.ChunkSize(1000, 10 ** 6).rows("a.t") == snapshot.FIRST_CHUNK_ROWS
    # An estimate alone never asks a first chunk for more (it may be far off: off-page TEXT).
    assert snapshot.ChunkSize(10 ** 9, 10 ** 6).rows("a.t", estimate=10) == \
        snapshot.FIRST_CHUNK_ROWS
    assert sizes.most_bytes == 2000  # where a chunk ends, as read, whatever it asked for
    assert sizes.rows("a.t", estimate=250) == 4  # the server's average row length
    sizes.read("a.t", rows=20, size=2000)  # measured: 100 bytes a row
    assert sizes.rows("a.t", estimate=250) == 10  # the measure before the estimate
    assert sizes.rows("a.u", estimate=10) == 50  # each table its own; never over `most`
    sizes.read("a.t", rows=3, size=30000)  # rows of 10 kB: one a chunk, never none
    assert sizes.rows("a.t") == 1
    sizes.read("a.t", rows=0, size=0)  # an empty chunk measures nothing
    assert sizes.rows("a.t") == 1


def _publish_all(snaps, stage):
    """The chunk in flight, read: landed (no binlog here) and published a slice at a time."""
    chunk = snaps.window = snaps.chunk
    stage.publish(chunk, None)
    while not chunk.published_all():
        stage._publish_slice(chunk)
    return chunk


def test_a_tables_chunks_after_its_first_ask_for_the_rows_its_bytes_allow(ctx):  # noqa: F811
    # Rows of ~99 bytes as the server sends them, 1000 bytes a chunk. The first chunk (no row
    # length known) asks for chunk_rows, and ends at twice the budget as read: 24 rows, read 8
    # at a time. The next ask for the 10 rows the measured length allows.
    tables = Tables([])
    tables.server = PacketServer([(i, "x" * 95) for i in range(1, 81)])
    ctx.policy.reader = Reader()
    cfg = config.build({"mysql": {"server_id": 9}, "tables": {"include": ["shop.*"]},
                        "snapshot": {"chunk_rows": 50, "chunk_bytes": 1000, "slice_rows": 8}})
    snaps = Snapshots(cfg, "pw", TableFilter(["shop.*"], []), clock=ctx.clock,
                      tables=lambda: tables)
    stage = SnapshotStage(ctx, snaps, SimpleNamespace(claim=lambda *a: None), Position("f", 4))
    snaps.add("1", ["shop.t"], None)
    snaps.pump()
    limits, published, measured = [], [], []
    while snaps.chunk is not None:
        limits.append(tables.server.sql[-1].rsplit("LIMIT ", 1)[1])
        snaps.read_whole()
        measured.append(snaps.sizes.row_bytes["shop.t"])
        published.append(_publish_all(snaps, stage).sent)
    assert limits == ["51"] + ["11"] * 6
    assert all(98 <= m <= 99 for m in measured)
    # (The in-memory result hands out its rows once: the row each SELECT asks for beyond its
    # chunk, which a server would send again after the chunk's last key, is not read again.)
    assert published == [24, 10, 10, 10, 10, 10, 1]
    assert _read_keys(ctx)[:26] == list(range(1, 25)) + [25, 26]


def test_a_chunk_whose_rows_come_to_its_byte_bound_ends_there_and_more_follow():
    server = PacketServer([(i, "x" * 95) for i in range(1, 41)])
    read = chunks.ServerRead(server, shop_t(False), None, None, 30, max_bytes=500)
    got = []
    while not read.done:
        got.append(len(read.fetch(4)))
    # Counted a fetch at a time: the second's 8 rows of ~99 bytes came over 500.
    assert got == [4, 4] and 500 <= read.bytes_read < 800
    assert (read.final, read.last_key, server.closed) == (False, ["8"], 1)
    read = chunks.ServerRead(PacketServer([(1, "x")]), shop_t(False), None, None, 30,
                             max_bytes=500)
    assert len(read.fetch(4)) == 1 and read.done and read.final  # under the bound: the last


def test_what_is_kept_by_a_tables_name_goes_once_its_snapshot_ends(ctx):  # noqa: F811
    # Done: its measured row length and slice ramps go (a long-lived process may snapshot a
    # great many tables, one request after another), and the table asked again starts afresh.
    tables = Tables(range(1, 16))
    ctx, snaps, stage = _stage(ctx, tables, slice_rows=4)

    def kept():
        return ("shop.t" in snaps.sizes.row_bytes, "shop.t" in snaps.read_slices.counted,
                "shop.t" in snaps.publish_slices.counted)
    seen = []
    while snaps.chunk is not None:
        snaps.read_whole()
        _publish_all(snaps, stage)
        seen.append(kept())
    assert len(seen) == 2 and seen[0] == (True, True, True)  # kept while chunks follow
    assert seen[-1] == (False, False, False) and snaps.done == 1
    # Given up (the table dropped while its chunk was read): the same.
    tables = Tables(range(1, 8), fail_after=2)
    snaps.new_tables = lambda: tables
    snaps.source = None
    snaps.add("2", ["shop.t"], None)
    snaps.pump()
    assert snaps.step() and kept() == (False, True, False)  # its first slice, then it fails
    assert not snaps.step() and snaps.chunk is None
    assert snaps.done == 2 and kept() == (False, False, False)


def test_a_chunk_whose_high_mark_does_not_come_while_caught_up_is_read_again(ctx, caplog):  # noqa: F811
    # A mark comes within milliseconds of its write; one that hasn't in HIGH_MARK_S while the
    # stream read all there was will not: a snapshot waiting for it would wait for ever, in
    # silence.
    from streamer.engine.stages import snapshot as stage_module
    tables = Tables(range(1, 4))
    ctx, snaps, stage = _stage(ctx, tables, slice_rows=10)
    stage.on_caught_up()  # read whole: the high mark is written
    first = snaps.chunk
    assert first.reading is None and tables.marks == [first.low, first.high]
    stage.on_caught_up()  # caught up, waiting for the mark from here
    ctx.clock.sleep(stage_module.HIGH_MARK_S - 1)
    stage.on_caught_up()
    assert snaps.chunk is first and not caplog.records  # not yet
    ctx.clock.sleep(1)
    tables.server.rows = [(i, f"v{i}") for i in range(1, 4)]  # the table, for a new SELECT
    stage.on_caught_up()
    again = snaps.chunk
    assert again is not first and again.low not in (first.low, first.high)
    assert tables.marks[2:] == [again.low, again.high]  # read again, framed by new marks
    assert [k for (k,) in again.kept()] == [1, 2, 3] and first.job is again.job
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and said[0].startswith(
        f"snapshot of shop.t: chunk 1's high watermark ({first.high}) has not come in the "
        f"binlog in {stage_module.HIGH_MARK_S:.0f} s, while the stream read all the server "
        f"sent; reading that chunk again with new watermarks"), said
