"""Snapshots: a table's existing rows published as op ``r``, in chunks interleaved with the binlog.

The algorithm is the watermark one of Netflix's DBLog (Andreakis & Papapanagiotou, arXiv 2010.12597):

1. Write a *low* watermark (a fresh mark in the watermark table: ``source.signals``), read the
   next chunk of the table in key order (``source.chunks``), write a *high* watermark. The chunk
   is held in memory, keyed by its chunk key.
2. Reading the binlog on, the low watermark opens the chunk's *window*: every change of the table
   read before the high watermark removes its keys from the chunk. A changed row's own change
   is in the binlog, in its place, so the chunk's copy of it is not needed (and could be older).
3. At the high watermark, the rows left are published as op ``r``, in the open batch: in binlog
   order they sit where the chunk was read. Then the next chunk starts.

The stream never waits for a whole chunk: the SELECT's rows are read from the server a slice
(``snapshot.slice_rows``) at a time, between the stream's own transactions, and the high mark is
written once the last is read; a change read in the window before its row was takes that row
out all the same. From the high mark the rows are published a slice at a time too, with the
window held open until the last: a change of a row not published yet takes it out, since the
change is newer (engine.stages.snapshot says when slices run).

Why this is exactly once: the chunk's rows, the progress (the chunk's last key, in ``queue[0]``,
or the last row published when a commit falls between slices) and the binlog position all go
into the same Kafka transaction. A crash loses the open chunk with the open batch; the
checkpoint's progress starts that chunk again with new watermarks, and the old ones, read again
from the binlog, match no chunk. At most one chunk is held in memory.

Progress (``progress()``, in the checkpoint): the queue of tables still to read, each with its
request id, condition, last key (SQL literals) and counts; how many tables and rows are done.
"""
from __future__ import annotations

import collections
import logging
import time
import uuid
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

import pymysql
from pymysqlreplication.row_event import DeleteRowsEvent, WriteRowsEvent

from streamer.config import Config
from streamer.engine.chunk import Chunk, RowUnreadable
from streamer.engine.streak import Streak
from streamer.errors import SnapshotRefused, StreamerError
from streamer.position import GtidSet, Position
from streamer.schema.versions import TableCatalog, TableFilter, TableVersion
from streamer.source import chunks, condition, server, signals, sqltext

log = logging.getLogger(__name__)

ER_BAD_FIELD = 1054
ER_QUERY_INTERRUPTED = 1317  # KILL QUERY
# A chunk whose table's columns kept changing under its SELECT, whose SELECT was interrupted, that
# failed with an error that may pass, or (read-only) that MySQL's commit order put off, is read
# again later, waiting longer each time in a row and saying so less often (engine.streak).
# A chunk whose read the server failed with an error that may pass (a lock wait timeout, a table
# in use, out of memory or disk, a temporary file of its own gone) is read again the same way;
# the table's snapshot ends only once its reads have failed for this long in a row (``_failed``),
# unless it is a lock that made them fail: the chunk waits for it as long as it is held.
FAILING_MOST_S = 300.0
LOCKED = frozenset((1205, 1213))  # ER_LOCK_WAIT_TIMEOUT, ER_LOCK_DEADLOCK
# Errors that are the statement's own (its syntax, a name or value it uses): reading again would
# meet them again, so the snapshot ends at once, naming them. By PyMySQL's classes, and these
# codes it leaves to OperationalError: unknown column, and mixes of collations.
OWN_ERRORS = (pymysql.err.ProgrammingError, pymysql.err.DataError,
              pymysql.err.NotSupportedError)
OWN_CODES = frozenset((ER_BAD_FIELD, 1267, 1270, 1271))
RATE_WINDOW_S = 30.0
# Read-only mode: a chunk whose position the stream has not reached in this long is said to wait,
# again each time the wait doubles (``_overdue``).
POSITION_WAIT_S = 30.0


def job(request_id: str, table: str, where: Optional[str]) -> Dict[str, Any]:
    """A table to snapshot: ``last_key`` holds the SQL literals of the last chunk's last key,
    ``key`` the names of the columns they are of, ``order`` how those sort (their types and
    collations)."""
    return {"id": request_id, "table": table, "where": where, "last_key": None, "key": None,
            "order": None, "chunk": 0, "rows": 0, "estimate": 0}


# A slice is read READ_BATCH rows at a time, each batch converted and kept before the next is
# read: the values a row is read through (its packet, fields, tuple) die young. Read a slice of
# 1000 at once, a minor collection mostly found hundreds of rows in flight and copied them out
# of the nursery (docs/benchmarks.md, "Where a wide snapshot's time goes").
READ_BATCH = 64

# A table's first slices in this process are smaller, from FIRST_SLICE rows, each as many as went
# before: its rows run code the JIT has not compiled yet (the version's generated writers, the
# read and publish loops), tens of µs a row, and a whole first slice held a live stream ~90 ms
# (docs/benchmarks.md, "A snapshot's first slices").
FIRST_SLICE = 64


class Ramp:
    """Slice sizes by table: ``size`` is ``full`` once ``done`` counted that many rows of the
    table, and until then as many as were counted (at least ``first``), so sizes double."""

    def __init__(self, full: int, first: int) -> None:
        self.full = full
        self.first = min(first, full)
        self.counted: Dict[str, int] = {}

    def size(self, table: str) -> int:
        return min(self.full, max(self.first, self.counted.get(table, 0)))

    def done(self, table: str, rows: int) -> None:
        counted = self.counted.get(table, 0)
        if counted < self.full:
            self.counted[table] = counted + rows

    def forget(self, table: str) -> None:
        """The table's snapshot ended: asked again, its slices start small again."""
        self.counted.pop(table, None)


# A table's first chunk in this process when the server gives no row length to go by.
FIRST_CHUNK_ROWS = 10000


class ChunkSize:
    """Rows a table's next chunk asks for: about ``budget`` bytes of rows as the server sends
    them, and at most ``most`` rows. A chunk holds its rows until its high mark, so its bytes are
    its memory; and each chunk has a fixed cost (its statements, its commit), which 10,000-row
    chunks of a wide table's rows paid every ~2.5 MB (docs/benchmarks.md, "Chunks by bytes").
    A row is taken to be as long as the table's last chunk measured; a table's first chunk in
    the process, whose rows only the server's estimate (``Described.row_bytes``) says anything
    of, asks for FIRST_CHUNK_ROWS at most. Rows much longer than their chunk was asked by (a
    table whose rows grow along its key) end it at ``most_bytes``, twice the budget, as read."""

    def __init__(self, budget: int, most: int) -> None:
        self.budget = budget
        self.most = most
        self.most_bytes = 2 * budget
        self.row_bytes: Dict[str, float] = {}
        self.cap: Dict[str, int] = {}  # rows at most, for a table whose SELECT was interrupted
        self.asked: Dict[str, int] = {}  # rows its last chunk asked for

    def rows(self, table: str, estimate: int = 0) -> int:
        measured = self.row_bytes.get(table)
        if measured:
            n = max(1, min(self.most, int(self.budget / measured)))
        else:
            first = min(self.most, FIRST_CHUNK_ROWS)
            n = max(1, min(first, int(self.budget / estimate))) if estimate > 0 else first
        n = min(n, self.cap.get(table, n))
        self.asked[table] = n
        return n

    def halve(self, table: str) -> int:
        """A chunk of ``table`` was cut short (its SELECT interrupted, as tools that end long
        queries do): its chunks ask for half the rows its last one asked for, from now on."""
        self.cap[table] = max(1, self.asked.get(table, FIRST_CHUNK_ROWS) // 2)
        return self.cap[table]

    def read(self, table: str, rows: int, size: int) -> None:
        """A chunk of ``table`` was read: ``rows`` rows of ``size`` bytes in all."""
        if rows > 0 and size > 0:
            self.row_bytes[table] = size / rows

    def forget(self, table: str) -> None:
        """The table's snapshot ended: asked again, its first chunk goes by the estimate."""
        self.row_bytes.pop(table, None)
        self.cap.pop(table, None)


class _Interrupted(Exception):
    """The chunk's SELECT was interrupted (KILL QUERY): it is read again later, smaller."""


class _Failed(Exception):
    """The server failed the chunk's read with an error that may pass: (its code, what to say
    of it)."""

    def __str__(self) -> str:
        return str(self.args[1])


class _ReadAgain(Exception):
    """A column of the table went between its description and the chunk's SELECT."""


class Snapshots:
    """The snapshots of one streamer: requests, progress, the chunk in flight and its window.

    Its stage (engine.stages.snapshot) hands it the rows of the request and watermark tables
    (``on_requests``, ``on_watermarks``), the changes of the table in the window (``on_change``,
    while ``window`` is not None) and statements while a chunk is in flight (``on_query``); it
    publishes a chunk whose high mark came, then calls ``finish``. ``pump`` reads the next
    chunk."""

    def __init__(self, cfg: Config, password: server.Secret, table_filter: TableFilter,
                 clock: Any = time, tables: Optional[Callable[[], Any]] = None) -> None:
        snap = cfg.snapshot
        self.database = snap.database
        self.sizes = ChunkSize(snap.chunk_bytes, snap.chunk_rows)
        self.slice_rows = snap.slice_rows
        # The rows of each slice read, and of each slice published (by the stage).
        self.read_slices = Ramp(snap.slice_rows, FIRST_SLICE)
        self.publish_slices = Ramp(snap.slice_rows, FIRST_SLICE)
        self.read_only = snap.mode == "read_only"
        self.name = signals.streamer_name(cfg)
        # tables() -> a source.chunks.TableReader, or what stands in for one; on the server in
        # use when it connects (source.failover)
        self.new_tables = tables or (lambda: chunks.TableReader(
            server.connection_settings(cfg, password), self.database, self.name,
            snap.chunk_timeout_s))
        self.filter = table_filter
        self.clock = clock
        self.source: Any = None
        self.catalog: Optional[TableCatalog] = None
        self.queue: List[Dict[str, Any]] = []
        self.done = 0
        self.rows = 0
        self.chunks = 0
        self.chunk: Optional[Chunk] = None
        self.window: Optional[Chunk] = None
        # A chunk put off is read again from then (``_later``, ``_interrupted``, ``_failed``,
        # ``_out_of_order``), each counting its own tries in a row.
        self.retry_at = 0.0
        self.changing = Streak(self.clock)  # its SELECT met changing columns twice
        self.interrupts = Streak(self.clock)  # its SELECT interrupted
        self.disordered = Streak(self.clock)  # a read-only chunk put off
        self.failures = Streak(self.clock)  # its reads the server failed
        # Read-only mode: when the chunk waiting for its position was framed, and when to say so.
        self.framed_at = self.overdue_at = 0.0
        self._progress: Optional[Dict[str, Any]] = None
        self._run = uuid.uuid4().hex[:12] + "-"
        self._marks = 0
        # (time, rows done) when chunks ended, over the last RATE_WINDOW_S: the rate the status
        # shows is the snapshot's own, not diluted by the time before it was asked for.
        self.samples: Deque[Tuple[float, int]] = collections.deque()

    # -- state ----------------------------------------------------------------------------------
    def reset(self, progress: Optional[Dict[str, Any]], catalog: TableCatalog) -> None:
        """Start (again) from committed progress: what was in flight went with the aborted batch."""
        self._give_up_chunk()
        self.close()  # a connection that broke with the stream is not reused
        progress = progress or {}
        self.queue = [dict(j) for j in progress.get("queue", [])]
        self.done = int(progress.get("done", 0))
        self.rows = int(progress.get("rows", 0))
        self.catalog = catalog
        self.chunk = self.window = None
        self._progress = None
        self.retry_at = 0.0
        for streak in (self.changing, self.interrupts, self.disordered, self.failures):
            streak.end()
        self.samples.clear()

    def progress(self) -> Optional[Dict[str, Any]]:
        """What the checkpoint carries; None when no snapshot was ever asked for."""
        if not self.queue and not self.done:
            return None
        if self._progress is None:
            queue = [dict(j) for j in self.queue]
            rows = self.rows
            chunk = self.chunk
            partly = chunk.done_key() if chunk is not None else None
            if partly is not None:  # a commit between the chunk's slices: up to the last one
                assert chunk is not None
                queue[0].update(last_key=partly, rows=queue[0]["rows"] + chunk.sent)
                rows += chunk.sent
            self._progress = {"queue": queue, "done": self.done, "rows": rows}
        return self._progress

    def published(self, chunk: Chunk, sent: int) -> None:
        """``sent`` more of the chunk's rows were published (by the stage)."""
        chunk.sent += sent
        self.publish_slices.done(chunk.job["table"], sent)
        self._progress = None

    def close(self) -> None:
        if self.source is not None:
            self.source.close()
            self.source = None

    def status(self) -> Optional[Dict[str, Any]]:
        """For /status and the metrics: rows done, chunks, tables left and an ETA."""
        queue = list(self.queue)  # read from the status thread while the loop changes it
        if not queue and not self.done:
            return None
        rate = self.rate()
        left = sum(max(j["estimate"] - j["rows"], 0) for j in queue)
        out: Dict[str, Any] = {"tables_left": len(queue), "tables_done": self.done,
                               "rows": self.rows, "chunks": self.chunks,
                               "rows_per_s": round(rate, 1),
                               "eta_s": round(left / rate, 1) if rate > 0 and queue else None}
        if queue:
            j = queue[0]
            out.update(table=j["table"], table_rows=j["rows"], table_estimate=j["estimate"])
        return out

    def rate(self) -> float:
        """Rows a second over the last RATE_WINDOW_S of chunks (0 before the second chunk)."""
        samples = list(self.samples)
        if len(samples) < 2:
            return 0.0
        (t0, r0), (_, r1) = samples[0], samples[-1]
        now = self.clock.monotonic()
        # Up to now, not the last chunk's end: a stalled snapshot's rate falls.
        return (r1 - r0) / (now - t0) if now > t0 else 0.0

    def _sample(self) -> None:
        now = self.clock.monotonic()
        self.samples.append((now, self.rows))
        while len(self.samples) > 2 and now - self.samples[1][0] >= RATE_WINDOW_S:
            self.samples.popleft()

    def add(self, request_id: str, tables: List[str], where: Optional[str]) -> None:
        for name in tables:
            db, _, table = name.partition(".")
            if not self.filter(db, table):
                log.error("snapshot request %s: table %s is not streamed (tables.include/exclude), "
                          "so it is not snapshotted; include it and ask again", request_id, name)
                continue
            self.queue.append(job(request_id, name, where))
            log.info("snapshot request %s: %s queued%s", request_id, name,
                     f" (where {where})" if where else "")
        self._progress = None

    # -- the binlog side --------------------------------------------------------------------------
    def on_requests(self, event: Any, skip: int) -> None:
        """Rows of the request table (the first ``skip`` were handled by the previous run): each
        new row of this streamer asks for a snapshot. A request can't stop the stream: one that
        can't be carried out is logged, naming it, and left."""
        if event.__class__ is not WriteRowsEvent:
            return  # a request is a new row; an edited or removed one is not asked again
        rows = event.rows
        for i in range(skip, len(rows)):
            values = rows[i].get("values")
            if values is not None and values.get("streamer") == self.name:
                self._on_request(values)

    def on_watermarks(self, event: Any, skip: int) -> Optional[Chunk]:
        """Rows of the watermark table (the first ``skip`` were handled by the previous run): the
        low mark opens the chunk's window; the chunk whose high mark this is, if any, is
        returned, to be published here, in binlog order (``finish`` then)."""
        if event.__class__ is DeleteRowsEvent:
            return None  # a mark removed (by an operator, say): nothing to do
        rows = event.rows
        for i in range(skip, len(rows)):
            row = rows[i]
            values = row.get("after_values") or row.get("values")
            chunk = self.chunk
            if values is None or chunk is None or values.get("streamer") != self.name:
                continue  # not ours, or a mark of a chunk that went with an aborted batch
            mark = values.get("mark")
            if mark == chunk.low:
                self.window = chunk
            elif mark == chunk.high:
                if chunk.reading is not None:
                    self.read_whole()  # read already, but in a binlog replayed by a test
                return chunk if self.chunk is chunk and chunk.reading is None else None
        return None

    def _on_request(self, values: Dict[str, Any]) -> None:
        request_id = str(values.get("id"))
        try:
            req = signals.parse_request(values.get("request") or "")
        except ValueError as exc:
            log.error("snapshot request %s is not readable and is ignored: %s", request_id, exc)
            return
        self.add(request_id, req["tables"], req["where"])
        self.pump()

    def on_change(self, tv: TableVersion, event: Any, op: str) -> None:
        """A change of the window's table, read between its watermarks: its keys leave the chunk.
        (Its rows were converted in place when they were published.)"""
        chunk = self.window
        if chunk is None or tv.table != chunk.table or tv.db != chunk.db:
            return
        for row in event.rows:
            if op == "u":
                chunk.remove(row["before_values"])
                chunk.remove(row["after_values"])
            else:
                chunk.remove(row["values"])

    def on_query(self, query: str) -> None:
        """A statement (DDL) naming the table of the chunk in flight: the chunk was read with
        columns that may have changed, so it is read again, with the table as it is now."""
        chunk = self.chunk
        if chunk is not None and sqltext.may_name(query, chunk.table):
            log.info("snapshot of %s.%s: a statement on the table while chunk %d was in flight; "
                     "reading that chunk again", chunk.db, chunk.table, chunk.job["chunk"] + 1)
            partly = chunk.done_key()
            if partly is not None:  # from after its rows already published
                chunk.job.update(last_key=partly, rows=chunk.job["rows"] + chunk.sent)
                self.rows += chunk.sent
                self._progress = None
            self._give_up_chunk()
            self.pump()

    def mark_lost(self, chunk: Chunk, waited_s: float) -> None:
        """The chunk in flight, read and its high mark written, has waited ``waited_s`` for that
        mark while the stream read all the server had: the mark is not coming (the server logs
        no change of the watermark table, or its event was lost). The chunk is read again, with
        new watermarks; none of its rows was published, so none is published twice."""
        log.warning("snapshot of %s.%s: chunk %d's high watermark (%s) has not come in the "
                    "binlog in %.0f s, while the stream read all the server sent; reading that "
                    "chunk again with new watermarks. If this repeats, the server does not log "
                    "the changes of %s.%s (binlog_do_db, binlog_ignore_db: streamer check "
                    "says)", chunk.db, chunk.table, chunk.job["chunk"] + 1, chunk.high, waited_s,
                    self.database, signals.WATERMARK, extra={"table": chunk.job["table"]})
        self._give_up_chunk()
        self.pump()

    def finish(self, chunk: Chunk, sent: int) -> None:
        """The chunk's rows were published (``sent`` in all): its progress goes with them, and
        the next chunk is read."""
        j = chunk.job
        j["chunk"] += 1
        j["rows"] += sent
        j["last_key"] = chunk.last_key
        self.rows += sent
        self.chunks += 1
        self._sample()
        self.chunk = self.window = None
        self._progress = None
        if chunk.final:
            self._ended(self.queue.pop(0))
            log.info("snapshot of %s done: %d rows in %d chunks (request %s)", j["table"],
                     j["rows"], j["chunk"], j["id"], extra={"table": j["table"]})
        self.pump()

    # -- the table side ---------------------------------------------------------------------------
    def pump(self) -> None:
        """Read the next chunk, framed by its watermarks, unless one is in flight. A table whose
        snapshot can't go on ends with an error naming why; the stream goes on. (A lost
        connection is retried like a dropped stream; a source that refuses the watermarks stops
        the streamer, naming the grant to give.)"""
        while self.queue and self.chunk is None:
            if self.retry_at and self.clock.monotonic() < self.retry_at:
                return  # the stage pumps again after each transaction (``_later``)
            self.retry_at = 0.0
            self._guarded(self._read)

    def step(self) -> bool:
        """Read the next slice of the chunk in flight (``snapshot.slice_rows`` rows, fewer at a
        table's first: ``read_slices``); True while it has
        more to read. Once it is read, its high watermark is written (in read-only mode its
        positions frame it instead), and it waits for that mark in the binlog."""
        chunk = self.chunk
        if chunk is None or chunk.reading is None:
            return False
        self._guarded(lambda j: self._slice(j, chunk))
        if self.chunk is None:
            self.pump()  # the table's snapshot ended, or its chunk is read again
        return self.chunk is not None and self.chunk.reading is not None

    def read_whole(self) -> None:
        """Read the rest of the chunk in flight now."""
        while self.step():
            pass

    def _guarded(self, work: Callable[[Dict[str, Any]], None]) -> None:
        """``work`` on the first table of the queue. A table whose snapshot can't go on ends
        with an error naming why; the stream goes on."""
        j = self.queue[0]
        try:
            try:
                work(j)
            except StreamerError:
                raise
            except pymysql.err.MySQLError as exc:
                if server.connection_lost(exc):
                    raise
                # The server failed another of the snapshot's statements (the table's
                # description in information_schema, a watermark's write) with an answer of its
                # own, which may pass.
                self._give_up_chunk()
                self._failed(j, _Failed(exc.args[0], f"a statement of the snapshot failed "
                                                     f"({exc.args[0]}: {exc.args[-1]})"))
        except SnapshotRefused as exc:
            log.error("snapshot of %s ends without its remaining rows: %s", j["table"], exc,
                      extra={"table": j["table"]})
            self._drop()
        except (StreamerError, pymysql.err.MySQLError):  # a connection lost, from the above
            raise
        except Exception:  # noqa: BLE001 - one table's snapshot must not stop the stream
            log.exception("snapshot of %s ends without its remaining rows: reading its next "
                          "chunk failed unexpectedly (request %s); ask again once the cause "
                          "is fixed", j["table"], j["id"])
            self._drop()

    def abandon(self, chunk: Chunk, exc: RowUnreadable) -> None:
        """A row of the chunk being published failed unexpectedly: the table's snapshot ends
        there, as when reading it fails (``_guarded``), with the rows published so far; the
        stream, and the next table's snapshot, go on."""
        j = chunk.job
        self.rows += chunk.sent
        cause = exc.__cause__ or exc
        log.error("snapshot of %s ends without its remaining rows: a row could not be read "
                  "after %d of its rows were published (request %s): %s: %s; ask again once "
                  "the cause is fixed", j["table"], j["rows"] + chunk.sent, j["id"],
                  type(cause).__name__, cause, exc_info=cause, extra={"table": j["table"]})
        self._drop()
        self.pump()

    def _slice(self, j: Dict[str, Any], chunk: Chunk) -> None:
        reading = chunk.reading
        try:
            left = size = self.read_slices.size(j["table"])
            while left > 0 and not reading.done:
                n = min(left, READ_BATCH)
                rows = self._query(j, lambda: reading.fetch(n), reading.d)
                if rows is None:
                    return  # the table was dropped
                chunk.add(rows, reading.keys)
                left -= n
            self.read_slices.done(j["table"], size - left)
        except _ReadAgain:
            self._give_up_chunk()  # read again from its first row, with new watermarks
            return
        except _Interrupted:
            self._give_up_chunk()
            self._interrupted(j)
            return
        except _Failed as exc:
            self._give_up_chunk()
            self._failed(j, exc)
            return
        if self.chunk is not chunk or not reading.done:
            return
        chunk.reading = None
        self.interrupts.end()  # read whole: an interrupt in its rows would have come by now
        chunk.last_key, chunk.final = reading.last_key, reading.final
        self.sizes.read(j["table"], reading.given, reading.bytes_read)
        if not self.read_only:
            self._tables().watermark(chunk.high)
        self.failures.end()  # read whole and framed: a failure would have come by now

    def _give_up_chunk(self) -> None:
        if self.chunk is not None:
            self.chunk.close()
        self.chunk = self.window = None

    def _put_off(self, streak: Streak) -> Tuple[float, bool]:
        """The chunk failed one more try of ``streak``'s kind: it is read again later
        (``retry_at``). The seconds from now, and whether to say so (engine.streak)."""
        wait, say = streak.again()
        self.retry_at = self.clock.monotonic() + wait
        return wait, say

    def _later(self, j: Dict[str, Any]) -> None:
        """The table's columns changed between its description and its chunk's SELECT twice in
        a row: statements on it one after another, as a migration runs them. Its chunk is read
        again later, while the stream goes on and reads those statements; the snapshot never
        ends for it."""
        wait, say = self._put_off(self.changing)
        if say:
            log.warning("snapshot of %s: its columns changed between its description and its "
                        "chunk's SELECT twice in a row (%s); reading that chunk again in %.1f s",
                        j["table"], str(self.changing), wait, extra={"table": j["table"]})

    def _interrupted(self, j: Dict[str, Any]) -> None:
        """The chunk's SELECT was interrupted: KILL QUERY, by hand or by a tool that ends long
        queries (pt-kill). Its chunk is read again later (until a chunk is read whole), and the
        table's chunks ask for half the rows (``ChunkSize.halve``), so a limit on a query's time
        is met; the snapshot never ends for it."""
        wait, say = self._put_off(self.interrupts)
        rows = self.sizes.halve(j["table"])
        if say:
            log.warning("snapshot of %s: the chunk's SELECT was interrupted (KILL QUERY, by hand "
                        "or by a tool that ends long queries; %s): reading that chunk again in "
                        "%.1f s, and its chunks %d rows at most from now on",
                        j["table"], str(self.interrupts), wait, rows, extra={"table": j["table"]})

    def _failed(self, j: Dict[str, Any], exc: _Failed) -> None:
        """The server failed the chunk's read with an error that may pass: a lock wait timeout
        (a table locked by LOCK TABLES or a DDL, the server by FLUSH TABLES WITH READ LOCK), out
        of memory or disk, a file error of its own. The chunk is read again later (until a chunk
        is read whole and framed); the table's snapshot ends, naming the error, only once its
        reads have failed for FAILING_MOST_S in a row, and never for a lock: a backup may hold
        one for long, and its table is read once it goes."""
        wait, say = self.failures.again()
        lasted = self.failures.lasted()
        if exc.args[0] not in LOCKED and lasted >= FAILING_MOST_S:
            raise SnapshotRefused(
                f"{exc}, and it kept failing for {lasted:.0f} s ({self.failures.times} times in "
                f"a row); ask again once the cause is fixed"
                + (f" (check the request's condition {j['where']!r} too)" if j["where"] else ""))
        self.retry_at = self.clock.monotonic() + wait
        if say:
            log.warning("snapshot of %s: %s; reading that chunk again in %.1f s (%s; %s)",
                        j["table"], exc, wait, str(self.failures),
                        "the table or the server is locked: it waits for the lock to go"
                        if exc.args[0] in LOCKED else
                        f"the table's snapshot ends if its reads keep failing for "
                        f"{FAILING_MOST_S:.0f} s", extra={"table": j["table"]})

    def _out_of_order(self, j: Dict[str, Any]) -> None:
        """MySQL was set to commit out of its binlog order (binlog_order_commits OFF) since the
        start checked it: a read-only chunk read now could miss a change the stream reads before
        its window. The chunk is read again later, once the setting is ON again; the stream
        goes on, and the snapshot never ends for it."""
        wait, say = self._put_off(self.disordered)
        if say:
            log.warning("snapshot of %s: this MySQL now has binlog_order_commits OFF, and a "
                        "read-only chunk read while it is OFF could publish a row older than a "
                        "change the stream has read; reading that chunk in %.1f s (%s). %s",
                        j["table"], wait, str(self.disordered), server.ORDER_FIX,
                        extra={"table": j["table"]})

    def _same_key(self, j: Dict[str, Any], described: Any) -> None:
        """The chunks go on after the last one's key only while the table's chunk key is the one
        that key was taken by, sorted the same way: after a change of the primary key (or of
        the unique key chunks follow), or of a key column's type or collation (the rows sort
        another way, and the next chunk would skip some), the table's snapshot starts again from
        its first row. Rows published twice are harmless (op r); rows skipped would be lost."""
        key, order = list(described.chunk_key), list(described.key_order)
        if j["last_key"] is None:
            j.update(key=key, order=order)
            return
        was, was_order = j.get("key"), j.get("order")
        same = was == key or (was is None and len(j["last_key"]) == len(key))
        # A checkpoint written before the order was kept: the order it was taken by is unknown.
        if same and (was_order is None or was_order == order):
            j.update(key=key, order=order)
            return
        if same:
            log.warning("snapshot of %s: its chunk key (%s) changed its order (%s to %s) after %d "
                        "rows; it starts again from the first row (rows read again are published "
                        "again as op r, none is skipped)", j["table"], ", ".join(key),
                        ", ".join(was_order), ", ".join(order), j["rows"],
                        extra={"table": j["table"]})
        else:
            log.warning("snapshot of %s: its chunk key changed from (%s) to (%s) after %d rows; "
                        "it starts again from the first row (rows read again are published "
                        "again as op r, none is skipped)", j["table"],
                        ", ".join(was or ["?"] * len(j["last_key"])), ", ".join(key), j["rows"],
                        extra={"table": j["table"]})
        j.update(last_key=None, key=key, order=order, chunk=0)
        self._progress = None

    def _drop(self) -> None:
        self._give_up_chunk()
        self.failures.end()  # the next table's reads have a time of their own to fail for
        self._ended(self.queue.pop(0))
        self._progress = None

    def _ended(self, j: Dict[str, Any]) -> None:
        """A table's snapshot ended (done, or given up): what was kept by its name goes. A
        long-lived process may snapshot a great many tables, one request after another."""
        self.done += 1
        for kept in (self.sizes, self.read_slices, self.publish_slices):
            kept.forget(j["table"])

    def _tables(self) -> Any:
        if self.source is None:
            self.source = self.new_tables()
        return self.source

    def _read(self, j: Dict[str, Any], retried: bool = False) -> None:
        if not self.samples:
            self._sample()  # the work begins with this read
        source = self._tables()
        db, _, table = j["table"].partition(".")
        described = source.describe(db, table)
        if described is None:
            log.warning("snapshot of %s ends: the table no longer exists (%d rows published)",
                        j["table"], j["rows"], extra={"table": j["table"]})
            self._drop()
            return
        if j["chunk"] == 0 and not j["estimate"]:
            j["estimate"] = described.estimate
            self._progress = None
            log.info("snapshot of %s begins: about %d rows, chunks of about %.1f MB (the first "
                     "%d rows, at most %d) (request %s)", j["table"], described.estimate,
                     self.sizes.budget / 1e6, self.sizes.rows(j["table"], described.row_bytes),
                     self.sizes.most, j["id"], extra={"table": j["table"]})
        self._same_key(j, described)
        tv = self._version_for(j, described)
        described = described.leaving_out(tv.row_schema.get("streamer.excluded", ()))
        # Marks unique to this run and chunk: a mark read again after a restart matches nothing.
        self._marks += 1
        low, high = f"L{self._run}{self._marks}", f"H{self._run}{self._marks}"
        if not self.read_only:
            source.watermark(low)
        try:
            got = self._select(source, described, j)
        except _ReadAgain:
            if retried:
                return self._later(j)
            return self._read(j, retried=True)
        except _Interrupted:
            return self._interrupted(j)
        except _Failed as exc:
            return self._failed(j, exc)
        except chunks.OutOfOrder:
            return self._out_of_order(j)
        if got is None:
            return
        self.changing.end()
        self.disordered.end()
        reading, read_at = got
        # An excluded column keeps its raw value under its MySQL name, on this side and in the
        # binlog's rows alike: the chunk's keys still match the changes'.
        names = {f.get("mysql.column", f["name"]): f["name"] for f in tv.row_schema["fields"]}
        key_names = [names.get(k, k) for k in described.chunk_key]
        self.chunk = chunk = Chunk(j, low, high, tv, key_names, None, False, reading)
        if self.read_only:
            # Read whole, in one consistent snapshot: the positions around it frame it.
            self.read_whole()
            if self.chunk is not chunk:
                return
            chunk.low, chunk.high = read_at, source.gtid_position()
            chunk.low_set, chunk.high_set = GtidSet(chunk.low), GtidSet(chunk.high)
            self.framed_at = self.clock.monotonic()
            self.overdue_at = self.framed_at + POSITION_WAIT_S
        # In watermark mode the stage reads it a slice at a time (``step``), between the
        # stream's own events, and the high watermark is written once it is read.

    def _version_for(self, j: Dict[str, Any], described: Any) -> Any:
        """The table version a chunk's rows are published with; a request's condition and a
        chunk key the masks made lossy are refused."""
        if j["where"]:
            try:
                condition.check(j["where"], [c.name for c in described.columns])
            except ValueError as exc:
                raise SnapshotRefused(f"the request's condition {j['where']!r} is refused: "
                                      f"{exc}") from None
        assert self.catalog is not None
        tv = self.catalog.snapshot_version(described)
        lossy = [k for k in described.chunk_key if k in tv.lossy]
        if lossy:
            raise SnapshotRefused(
                f"cannot snapshot {j['table']}: its rows are read in chunks by the unique key "
                f"({', '.join(described.chunk_key)}), and tables.columns.mask masks "
                f"{', '.join(lossy)} so that rows can't be told apart by it. Mask the column with "
                f"'hash', or give the table a primary key")
        return tv

    def _select(self, source: Any, described: Any, j: Dict[str, Any]) -> Optional[Tuple]:
        """(the chunk's read, the read-only read's position) of the chunk's SELECT; None when
        the table was dropped (its snapshot ends); _ReadAgain when a column went."""
        limit = self.sizes.rows(j["table"], described.row_bytes)

        def select() -> Tuple[Any, Optional[str]]:
            if self.read_only:
                # The position the SELECT's consistent read is at (source.chunks says how).
                rows, last, final, at = source.read_at_position(
                    described, j["last_key"], j["where"], limit)
                return chunks.ListRead(rows, last, final), at
            return source.open(described, j["last_key"], j["where"], limit,
                               self.sizes.most_bytes), None
        return self._query(j, select, described)

    def _query(self, j: Dict[str, Any], query: Callable[[], Any], described: Any) -> Any:
        """``query()``'s result; a MySQL error of the chunk's SELECT or of reading its rows is
        said as what it means for the snapshot (None: the table was dropped). ``described``:
        the table as the SELECT was written for it."""
        try:
            return query()
        except pymysql.err.MySQLError as exc:
            code = exc.args[0] if exc.args else None
            if server.connection_lost(exc):
                raise  # retried like a dropped stream
            if code == server.ER_NO_SUCH_TABLE:
                log.warning("snapshot of %s ends: the table was dropped (%d rows published)",
                            j["table"], j["rows"], extra={"table": j["table"]})
                self._drop()
                return None
            if code == ER_BAD_FIELD and self._column_went(j, described):
                raise _ReadAgain() from None  # a column went between describe and SELECT
            if code == ER_QUERY_INTERRUPTED:
                raise _Interrupted() from None
            if code in chunks.ER_STATEMENT_TIMEOUT:
                raise SnapshotRefused(f"the chunk's SELECT ran longer than "
                                      f"snapshot.chunk_timeout_s ({exc.args[-1]})"
                                      + (f"; its condition {j['where']!r} may need an index"
                                         if j["where"] else "")) from None
            if isinstance(exc, OWN_ERRORS) or code in OWN_CODES:
                raise SnapshotRefused(f"the server refused the chunk's SELECT ({code}: "
                                      f"{exc.args[-1]})"
                                      + (f"; check the request's condition {j['where']!r}"
                                         if j["where"] else "")) from None
            raise _Failed(code, f"the chunk's SELECT failed ({code}: {exc.args[-1]})") from None

    def _column_went(self, j: Dict[str, Any], described: Any) -> bool:
        """Whether a column the chunk's SELECT names is no longer the table's. Without a
        condition, an unknown column can only be one that went. A condition was checked against
        the columns, but names the checker takes for keywords (``hour``, ``date``) or a
        qualified name (``id.x``) can still be unknown to the server: the condition's error
        unless a column went."""
        if not j["where"] or described is None:
            return True
        db, _, table = j["table"].partition(".")
        now = self._tables().describe(db, table)
        if now is None:
            return True  # dropped since: the next read says so
        return bool({c.name for c in described.columns} - {c.name for c in now.columns})

    # -- read-only mode -----------------------------------------------------------------------------
    def seed(self, gtids: GtidSet, start: Position) -> None:
        """Read-only mode compares the reader's executed GTIDs with the server's positions, so they
        must hold every domain the server has, also those with no transaction since ``start``.
        On MySQL, ``start`` carries the executed set at its place; an empty one is a server
        that had executed nothing there."""
        tables = self._tables()
        refusal = server.read_only_refusal(tables.writes_gtids(), tables.commits_in_binlog_order(),
                                           self.database)
        if refusal is not None:
            raise SnapshotRefused(refusal)
        at = tables.gtid_at(start.file, start.pos) if start.file else None
        if at is None:
            if start.file and not start.gtid_set and tables.is_mariadb():
                raise SnapshotRefused(
                    f"snapshot.mode read_only needs the GTID position of the start, and the "
                    f"server has none for {start.file}:{start.pos} (BINLOG_GTID_POS is NULL: "
                    f"is the file still there?)")
            return
        for domain, value in GtidSet(at).mariadb.items():
            gtids.mariadb.setdefault(domain, value)

    def on_position(self, gtids: GtidSet) -> Optional[Chunk]:
        """Read-only mode, between transactions: the chunk's window opens once the reader has
        executed its low position; the chunk is returned, to be published (``finish`` then),
        once it has executed its high one."""
        chunk = self.chunk
        if chunk is None or chunk.high_set is None:
            return None
        if self.window is None and gtids.contains(chunk.low_set):  # type: ignore[arg-type]
            self.window = chunk
        if self.window is chunk and gtids.contains(chunk.high_set):
            return chunk
        if self.clock.monotonic() >= self.overdue_at:
            self._overdue(chunk, gtids)
        return None

    def _overdue(self, chunk: Chunk, gtids: GtidSet) -> None:
        """Say that a read-only chunk still waits for the stream to read the transactions before
        its position, naming those it lacks: a wait that never ends is seen, not silent."""
        now = self.clock.monotonic()
        waited = now - self.framed_at
        self.overdue_at = now + waited
        target = chunk.high_set if self.window is chunk else chunk.low_set
        lacking = "; ".join(gtids.missing(target)) or "none"  # type: ignore[arg-type]
        log.warning("snapshot of %s: chunk %d has waited %.0f s for the stream to read the "
                    "transactions the server had executed when its rows were read; it has yet to "
                    "read %s. A stream behind the server catches up; if it has, the server's "
                    "executed GTIDs hold transactions its binlog does not send", chunk.job["table"],
                    chunk.job["chunk"] + 1, waited, lacking, extra={"table": chunk.job["table"]})


def initial_jobs(conn: Any, table_filter: TableFilter) -> List[Dict[str, Any]]:
    """``start.initial: snapshot``: every streamed table, in name order. Refuses, naming them all,
    when some have no key to chunk by."""
    names = server.user_tables(conn, table_filter)
    keyless = []
    for db, t in names:
        try:
            chunks.describe(conn, db, t)
        except SnapshotRefused:
            keyless.append(f"{db}.{t}")
    if keyless:
        raise SnapshotRefused(
            f"start.initial is snapshot, but {', '.join(keyless)} ha{'s' if len(keyless) == 1 else 've'} "
            f"no primary key and no unique key of NOT NULL columns to read in chunks; add one, "
            f"or leave the table out with tables.exclude")
    return [job("initial", f"{db}.{t}", None) for db, t in names]
