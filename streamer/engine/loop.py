"""The engine: read events, follow transactions, publish batches, resume after failures.

The event source (``reader``), the publisher and the clock are passed in: ``streamer run`` gets
the binlog reader, the Kafka publisher and the time module; the unit tests drive this same loop
with a replayed binlog, an in-memory publisher and a clock of their own.

Shutdown is one path whether it comes from a signal, an error or the end of a bounded run: the
open Kafka transaction is committed (or aborted when that fails) and the reader is closed.
"""
from __future__ import annotations

import logging
import signal
import time
from typing import Any, Callable, Dict, List, Optional

import pymysql
from pymysqlreplication.event import HeartbeatLogEvent, QueryEvent, XAPrepareEvent
from pymysqlreplication.row_event import (DeleteRowsEvent, TableMapEvent, UpdateRowsEvent,
                                          WriteRowsEvent)

from streamer import config as config_mod
from streamer.codec.avro import SNAPSHOT_BYTES, canonical_json
from streamer.codec.schema_registry import SchemaRegistry
from streamer.engine import start as start_mod
from streamer.engine import warmup
from streamer.engine.batch import Batch
from streamer.engine.snapshot import Chunk, Snapshots
from streamer.engine.rows import process_event, publish_truncate, truncated_version
from streamer.engine.start import Backoff, _Ahead
from streamer.engine.tracker import Tracker
from streamer.engine.txmeta import TransactionLog
from streamer.errors import (BatchAborted, ProducerBroken, ServerBehind, ServerUnreachable,
                             SourceError, StreamInterrupted, UnsupportedEvent)
from streamer.kafka.publisher import Publisher
from streamer.ops import gcpacing
from streamer.ops.heartbeat import COLUMN as HEARTBEAT_COLUMN
from streamer.ops.heartbeat import TABLE as HEARTBEAT_TABLE
from streamer.ops.metrics import Metrics
from streamer.position import Position
from streamer.schema import evolution
from streamer.schema.masking import ColumnRules
from streamer.schema.versions import TableCatalog, TableFilter, TableVersion
from streamer.source import events, failover, rowcount
from streamer.source.reader import BinlogReader

log = logging.getLogger(__name__)

OPS = {WriteRowsEvent: "c", UpdateRowsEvent: "u", DeleteRowsEvent: "d"}
FOLLOWED = frozenset(events.FOLLOWED)
RETRIED = (StreamInterrupted, BatchAborted, ProducerBroken, pymysql.err.OperationalError)


class Streamer:
    """One source, one namespace. ``run()`` blocks until stopped and returns the exit code.

    ``publisher`` (cfg -> a Publisher context manager), ``reader`` (cfg, password, start, gtid ->
    an event source context manager: iterable, with ``more_arrived()``, and optionally
    ``arrives_within(seconds)`` for batch.gather_ms) and ``clock`` (with
    ``monotonic()`` and ``time()``) default to Kafka, the binlog and the time module."""

    def __init__(self, cfg: Dict[str, Any], start: Optional[Position] = None,
                 start_gtid: Optional[str] = None, metrics: Optional[Metrics] = None,
                 publisher: Callable[[Dict[str, Any]], Any] = Publisher,
                 reader: Callable[..., Any] = BinlogReader, clock: Any = time,
                 password: Optional[str] = None) -> None:
        self.cfg = cfg
        self.metrics = metrics if metrics is not None else Metrics(cfg)
        self.password = config_mod.mysql_password(cfg) if password is None else password
        self.override = start
        self.override_gtid = start_gtid
        self.new_publisher = publisher
        self.new_reader = reader
        self.clock = clock
        self.stop_requested = False
        # The heartbeat's and the snapshots' databases are never published, whatever the
        # patterns say.
        self.filter = TableFilter(cfg["tables"]["include"], list(cfg["tables"]["exclude"]) +
                                  [cfg["heartbeat"]["database"] + ".*",
                                   cfg["snapshot"]["database"] + ".*"])
        self.column_rules = ColumnRules.from_config(cfg, config_mod.mask_salt(cfg))
        self.txlog = TransactionLog(cfg["namespace"]) if cfg["topics"]["transactions"] else None
        self.snapshots = Snapshots(cfg, self.password, self.filter, clock)
        self.metrics.snapshot_status = self.snapshots.status
        self.published = 0
        self.batches = 0
        self.reconnects = 0
        self.servers = failover.Servers(cfg["mysql"])
        self.lease: Optional[Any] = None  # kafka.lease, with ha.enabled
        self.publisher: Optional[Any] = None
        self.heap = gcpacing.OldGenerationLimit()
        self.warmup: Optional[warmup.Warmup] = None  # engine.warmup: PyPy's, until it is done
        self._uncompacted: set = set()
        # Kept across reconnects so a re-read builds the very same table versions.
        self.tables: Optional[TableCatalog] = None
        self._schema_records: Optional[_Ahead[List[Dict[str, Any]]]] = None
        sr = cfg["schema_registry"]
        self.schema_registry = SchemaRegistry(sr["url"], float(sr["timeout_s"])) if sr["url"] else None

    # -- control --------------------------------------------------------------------------------
    def request_stop(self, *_: Any) -> None:
        # Only flags: the loop wakes at the next event or heartbeat and shuts down in order.
        self.stop_requested = True
        if self.publisher is not None:
            self.publisher.stopping = True

    def stopping(self) -> bool:
        return self.stop_requested

    def install_signals(self) -> None:
        signal.signal(signal.SIGTERM, self.request_stop)
        signal.signal(signal.SIGINT, self.request_stop)

    # -- the run: start position, then stream and recover ---------------------------------------
    def run(self) -> int:
        """Stream until stopped; with ha.enabled, first wait for the lease (kafka.lease)."""
        if not self.cfg["ha"]["enabled"]:
            return self._run()
        from streamer.kafka.lease import Lease
        with Lease(self.cfg, self.request_stop) as lease:
            self.lease = self.metrics.ha = lease
            if not lease.wait(lambda: self.stop_requested):
                log.info("stopped as a standby")
                return 0
            # The producer starts only now: its init_transactions fences the previous holder.
            return self._run()

    def _run(self) -> int:
        # MySQL's checks run while the producer starts; once both answered, the internal topics
        # are made sure of, and the schema topic is read while the checkpoint is (measured: see
        # docs/benchmarks.md, "Start-up").
        explicit = start_mod.explicit_start(self.cfg, self.override)
        probe = _Ahead(lambda: start_mod.probe_source(self.cfg, self.password, self.filter,
                                                      explicit), "streamer-mysql-probe")
        with self.new_publisher(self.cfg) as publisher:
            self.publisher = publisher
            publisher.lease = self.lease
            position = self._first_position(publisher, probe)
            if position is None:  # stopped while MySQL was unreachable
                log.info("stopped before streaming")
                return 0
            if publisher.committed is not position:
                # Make a new start point durable before reading: a crash before the first batch
                # must resume here, not at a binlog end that has moved on meanwhile.
                publisher.commit(position)
            if warmup.wanted(self.cfg) and self.new_reader is BinlogReader:
                self.warmup = warmup.Warmup(self.cfg, Streamer)
            retry = Backoff(self.cfg["mysql"])
            while not self.stop_requested:
                began, committed = time.monotonic(), publisher.committed
                try:
                    gtid = start_mod.gtid_for(self.cfg, position)
                    with self.new_reader(self.cfg, self.password, position, gtid) as reader:
                        # On another server than the checkpoint's, the reader resumes by
                        # GTID set (source.failover).
                        start = getattr(reader, "start", position)
                        log.info("reading the binlog from %s on MySQL at %s", start.describe(),
                                 self.servers.current)
                        self.stream(publisher, reader, start)
                    if not self.stop_requested:
                        # The server ended the stream (an EOF packet: it is shutting down, or
                        # dropped this replica): a lost connection, not the end of the work.
                        raise StreamInterrupted("the server ended the binlog stream")
                    break
                except (ServerBehind,) + RETRIED as exc:
                    if publisher.committed is not committed or \
                            time.monotonic() - began >= retry.max_s:
                        retry.succeeded()  # this connection worked before it was lost
                        self.servers.worked()
                    if isinstance(exc, ServerBehind):
                        self.servers.refused(exc)  # raises when no server is left to try
                    elif isinstance(exc, ServerUnreachable):
                        self.servers.next()
                    self._recover(publisher, exc)
                    self.metrics.on_error(exc, reconnect=True)
                    backoff = retry.next()
                    if backoff is None:
                        raise SourceError(f"gave up after {retry.attempts - 1} reconnect attempts: {exc}")
                    self.reconnects += 1
                    if publisher.committed is not None:
                        position = publisher.committed
                    log.warning("%s; resuming from %s on MySQL at %s in %.1fs", exc,
                                position.describe(), self.servers.current, backoff)
                    self._sleep(backoff)
        self.snapshots.close()
        if self.warmup is not None:
            self.warmup.close()
        log.info("stopped after %d messages in %d batches", self.published, self.batches)
        return 0

    def _first_position(self, publisher: Any,
                        probe: Optional[_Ahead[start_mod.SourceInfo]]) -> Optional[Position]:
        """The start position. While MySQL can't be reached (down, restarting, not up yet), retry
        with the reconnect backoff, as a dropped stream does; a refused login fails at once.
        ``probe`` is the first attempt's MySQL check, already under way."""
        m = self.cfg["mysql"]
        retry = Backoff(m)
        while not self.stop_requested:
            try:
                ahead, probe = probe, None  # a retry probes again
                source = ahead.result() if ahead is not None else \
                    start_mod.probe_source(self.cfg, self.password, self.filter,
                                           start_mod.explicit_start(self.cfg, self.override))
                # Both ends answered: only now is anything created in Kafka.
                publisher.prepare()
                if self.tables is None and self._schema_records is None:
                    self._schema_records = _Ahead(publisher.read_schema_records,
                                                  "streamer-schemas-read")
                checkpoint = publisher.read_checkpoint()
                if checkpoint is None and self.cfg["start"]["initial"] == "end" and not \
                        start_mod.is_explicit(self.cfg, self.override, self.override_gtid):
                    ahead = self._schema_records
                    start_mod.check_unused(self.cfg, ahead.result() if ahead is not None else
                                           publisher.read_schema_records(), self.filter)
                return start_mod.initial_position(self.cfg, checkpoint, source,
                                                  self.override, self.override_gtid)
            except pymysql.err.OperationalError as exc:
                refused = start_mod.refusal(exc, m)
                if refused is not None:
                    raise refused from exc
                where = f"MySQL at {m['host']}:{m['port']}"
                backoff = retry.next()
                if backoff is None:
                    raise SourceError(f"{where} unreachable, gave up after {retry.attempts - 1} "
                                      f"reconnect attempts ({exc}). Check mysql.host/mysql.port "
                                      f"and that the server is running") from exc
                self.metrics.on_error(exc, reconnect=False)
                # Read the schema topic again when streaming starts: the read made ahead may
                # be stale by then (other sources of the namespace write to it too).
                self._schema_records = None
                if self.servers.next():
                    log.warning("%s unreachable (%s): trying MySQL at %s in %.1fs (mysql.hosts)",
                                where, exc, self.servers.current, backoff)
                else:
                    log.warning("%s unreachable (%s): retrying in %.1fs. Check mysql.host/"
                                "mysql.port and that the server is running", where, exc, backoff)
                self._sleep(backoff)
        return None

    def _recover(self, publisher: Any, exc: Exception) -> None:
        """Drop the open batch: abort it, or replace a producer that can't abort any more."""
        try:
            if isinstance(exc, ProducerBroken):
                raise exc
            publisher.abort()
        except ProducerBroken:
            publisher.reset()

    def _sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self.stop_requested and time.monotonic() < end:
            time.sleep(min(0.1, end - time.monotonic()))

    def _catalog(self, publisher: Any) -> TableCatalog:
        """The table versions, kept across reconnects so that a re-read builds the very same
        versions; the first time, the schema topic's last version of each table continues its
        lineage (evolution)."""
        if self.tables is None:
            ahead, self._schema_records = self._schema_records, None
            records = ahead.result() if ahead is not None else publisher.read_schema_records()
            self.tables = self.new_catalog(records)
        self.tables.forget_current()
        return self.tables

    def new_catalog(self, records: List[Dict[str, Any]]) -> TableCatalog:
        """The table versions, continuing the lineage of the schema topic's ``records``."""
        return TableCatalog(self.cfg["namespace"], self.filter,
                            lineage=evolution.lineage_from_records(records),
                            rules=self.column_rules, tombstones=self.cfg["topics"]["tombstones"],
                            compact=self.cfg["topics"]["compact"],
                            schemas=evolution.schemas_from_records(records))

    # -- the loop -------------------------------------------------------------------------------
    def stream(self, publisher: Any, reader: Any, start: Position) -> None:
        """Publish the events ``reader`` yields from ``start`` until the stop is requested (or
        the reader ends)."""
        tracker = Tracker(start)
        if start.file:
            self.metrics.resumed_at(start)  # the committed position until the first commit
        tables = self._catalog(publisher)
        batch = Batch(publisher, self.cfg["batch"], self.clock, tracker.mark())
        txlog = self.txlog
        if txlog is not None:
            txlog.reset(start.transaction if start.rows else None)
            txlog.announce = lambda: self._announce_txlog(publisher, txlog)
        snaps = self.snapshots
        snaps.reset(start.snapshot, tables)
        if snaps.read_only:
            snaps.seed(tracker.gtids, start)
        snap_db = snaps.database
        snap_ids = snaps.ids
        by_id = tables.by_id
        metrics = self.metrics
        produce = metrics.counting(publisher.produce)
        on_rows = metrics.on_rows
        beat_db = metrics.heartbeat_db
        beat_ids: set = set()
        monotonic = self.clock.monotonic
        max_messages = batch.max_messages
        last_ts = 0
        warm = self.warmup
        gather = batch.gather_s
        arrives_within = getattr(reader, "arrives_within", None) if gather else None

        def everywhere(topic: str, value: bytes) -> int:
            """A keyless message in every partition (a TRUNCATE), its bytes counted."""
            n = publisher.produce_everywhere(topic, value)
            metrics.bytes += n * len(value)
            return n

        def emit(chunk: Chunk, event: Any) -> int:
            return self._emit_chunk(publisher, batch, tracker, produce, tables, chunk, event)

        landed = False  # a snapshot chunk was published in the open transaction
        snaps.pump()
        for event in reader:
            cls = event.__class__
            tx_end = False
            op = OPS.get(cls)
            if op is not None:
                last_ts = event.timestamp
                tv = by_id.get(event.table_id)
                if tv is not None and not tracker.xa:
                    batch.open()
                    sent = process_event(event, op, tv, tracker, produce)
                    batch.pending += sent
                    if txlog is not None:
                        batch.pending += txlog.on_published(tracker, tv.topic, sent,
                                                            last_ts * 1000, produce)
                    on_rows(last_ts, len(event.rows))
                    if snaps.window is not None:
                        snaps.on_change(tv, event, op)
                else:
                    table_id = event.table_id
                    # An unpublished table's rows are counted, never decoded (source.rowcount);
                    # so are a prepared XA transaction's, published at its XA COMMIT.
                    skip = tracker.count(len(event.rows) if table_id in snap_ids or
                                         table_id in beat_ids else rowcount.rows_in(event))
                    if table_id in snap_ids:
                        # A watermark (the high one publishes its chunk) or a snapshot request.
                        sent = snaps.on_marks(event, skip, emit)
                        if sent:
                            batch.pending += sent
                            landed = True
                    elif event.table_id in beat_ids:
                        # Never published; committed within linger like a change, so it
                        # measures the latency a change would see and keeps lag alive.
                        metrics.on_heartbeat(_beat_of(event))
                        batch.open()
                        batch.beat = True
            elif cls is TableMapEvent:
                tv = tables.on_table_map(event)
                if tv is not None:
                    self._announce(publisher, batch, tv)
                if event.schema == beat_db and event.table == HEARTBEAT_TABLE:
                    # The server gives a table a new id when it reopens it: keep the latest.
                    if event.table_id not in beat_ids:
                        beat_ids.clear()
                        beat_ids.add(event.table_id)
                elif event.schema == snap_db:
                    snaps.on_table_map(event)
            else:
                if cls is QueryEvent:
                    query = event.query
                    if query != "BEGIN" and query != "COMMIT":
                        # DDL, or row changes a session logged as a statement: refused.
                        events.refuse_statement(event, tracker.file, tables.filter)
                        tv = truncated_version(event, tables)
                        if tv is not None:
                            if tv is not tables.current.get((tv.db, tv.table)):
                                # A version no table map of this stream announced: its schema
                                # goes out first (its announcement may have been aborted).
                                self._announce(publisher, batch, tv)
                            batch.open()
                            sent = publish_truncate(event, tv, tracker, everywhere)
                            batch.pending += sent
                            if txlog is not None:
                                batch.pending += txlog.on_published(
                                    tracker, tv.topic, sent, event.timestamp * 1000, produce)
                        if snaps.chunk is not None:
                            snaps.on_query(query)
                        if query[:3] == "XA " or query[:3] == "xa ":
                            sent = self._xa_outcome(publisher, batch, tables, tracker, event,
                                                    produce)
                            if sent:
                                batch.pending += sent
                elif cls is XAPrepareEvent:
                    if event.one_phase and tracker.xa:  # MySQL's XA COMMIT ... ONE PHASE
                        batch.pending += self._publish_xa(
                            publisher, batch, tables, [tracker.file, tracker.tx_start,
                                                       tracker.gtid or "", tracker.txid],
                            event.timestamp * 1000, produce)
                elif cls not in FOLLOWED:
                    events.refuse(event, tracker.file)  # raises, unless it carries no change
                tx_end = tracker.on_event(event, cls)
                if tx_end and txlog is not None and txlog.open is not None:
                    batch.open()  # a batch cut right after the transaction's last rows
                    batch.pending += txlog.on_end(tracker.txid, event.timestamp * 1000, produce)
                if tx_end and snaps.read_only and snaps.chunk is not None:
                    sent = snaps.on_position(tracker.gtids, emit)
                    if sent:
                        batch.pending += sent
                        landed = True
            if batch.pending >= max_messages or self.stop_requested:
                self._commit(publisher, batch, tracker)
                if self.stop_requested:
                    return
                continue
            now = monotonic()
            # A binlog heartbeat with nothing queued behind it means the server had nothing more
            # to send: the reader is caught up, so waiting out the linger would only add latency.
            # A heartbeat queued before newer changes says nothing of the sort.
            caught_up = cls is HeartbeatLogEvent and not reader.more_arrived()
            if caught_up:
                metrics.on_idle()
                metrics.tick()
                if snaps.read_only and snaps.chunk is not None and not tracker.in_tx:
                    batch.pending += snaps.on_position(tracker.gtids, emit)
            elif tx_end and landed:
                # A snapshot chunk landed: what arrived meanwhile is mostly the next chunk's own
                # watermarks, no backlog. Committing now keeps live changes from waiting for
                # catch-up lingers behind a snapshot's batches.
                caught_up = True
                landed = False
            elif tx_end and (batch.pending or batch.beat) and batch.clock.live(last_ts):
                # At a transaction's end. The commit can't end before its partitions are
                # registered (Batch.gather_s): a change that arrives until then goes in this
                # batch, not the next, so a young batch waits for one up to the rest of that.
                left = batch.started + gather - now
                caught_up = not (arrives_within(left) if left > 0 and arrives_within is not None
                                 else reader.more_arrived())
            if batch.due(now, caught_up, last_ts):
                self._commit(publisher, batch, tracker)
                batch.clock.committed(caught_up)
            elif batch.idle_due(now, tracker):
                self._commit(publisher, batch, tracker)
            if caught_up and warm is not None and not batch.pending and not batch.beat:
                # Idle, nothing open: warm the JIT up a little (engine.warmup).
                if warm.run(reader, self.published, self.stopping):
                    self.warmup = warm = None

    def _announce(self, publisher: Any, batch: Batch, tv: TableVersion) -> None:
        """A table's current version changed: its topic exists and its writer schemas go out
        in the open batch, before the first message that uses them."""
        if tv.compacted:
            publisher.ensure_topic(tv.topic, config={"cleanup.policy": "compact"})
        else:
            if self.cfg["topics"]["compact"] and tv.topic not in self._uncompacted:
                self._uncompacted.add(tv.topic)
                log.warning("table %s.%s has no primary key: its topic %s is created with the "
                            "delete cleanup policy, not compacted (Kafka compacts keyed records "
                            "only)", tv.db, tv.table, tv.topic)
            publisher.ensure_topic(tv.topic)
        if self.schema_registry is not None:
            self.schema_registry.frame(tv.topic, tv.value_writer, tv.key_writer)
        batch.open()
        for kind, writer in (("value", tv.value_writer), ("key", tv.key_writer)):
            if writer is not None:
                publisher.produce_schema(writer.fingerprint.hex(), canonical_json(writer.schema),
                                         tv.topic, kind)

    def _announce_txlog(self, publisher: Any, txlog: TransactionLog) -> None:
        """The transaction topic exists and its schema goes out in the open batch, before the
        stream's first transaction record."""
        publisher.ensure_topic(txlog.topic, partitions=1)
        writer = txlog.writer
        if self.schema_registry is not None:
            self.schema_registry.frame(txlog.topic, writer, None)
        # Its own kind: the "value" records are table versions, whose lineage a start reads.
        publisher.produce_schema(writer.fingerprint.hex(), canonical_json(writer.schema),
                                 txlog.topic, "transaction")

    def _emit_chunk(self, publisher: Any, batch: Batch, tracker: Tracker, produce: Any,
                    tables: TableCatalog, chunk: Chunk, event: Any) -> int:
        """Publish a snapshot chunk's rows as op r at its high watermark ``event`` (None in
        read-only mode: between transactions): in binlog order, that is where they were read.
        Returns the messages published."""
        tv = chunk.tv
        if tv is not tables.current.get((tv.db, tv.table)) and tv not in self.snapshots.announced:
            self._announce(publisher, batch, tv)  # a version no table map of this run announced
            self.snapshots.announced.add(tv)
        batch.open()
        if event is not None:  # the high watermark's rows event
            packet = event.packet
            mid, txid = tv.envelope.event_parts(
                event.timestamp * 1000, packet.server_id, tracker.file,
                packet.log_pos - packet.event_size, tracker.gtid, tv.db, tv.table, tracker.txid)
        else:  # read-only mode: between transactions, where the reader reached the high position
            at = tracker.next_pos
            mid, txid = tv.envelope.event_parts(
                int(self.clock.time() * 1000), tracker.server_id, tracker.file, at, None, tv.db,
                tv.table, f"{tracker.file}:{at}:snapshot")
        flag = SNAPSHOT_BYTES["last" if chunk.final else "true"]
        encode = tv.envelope.encode_read
        key = tv.key
        topic = tv.topic
        n = 0
        for datum in chunk.rows.values():
            produce(topic, encode(datum, mid, n, txid, flag), key(datum))
            n += 1
        return n

    def _xa_outcome(self, publisher: Any, batch: Batch, tables: TableCatalog, tracker: Tracker,
                    event: Any, produce: Any) -> int:
        """XA COMMIT publishes the rows its prepare group held back (read again from the
        binlog); XA ROLLBACK drops them. Returns the messages produced."""
        outcome = events.xa_outcome(event.query)
        if outcome is None:
            return 0
        kind, xid = outcome
        entry = tracker.xa_pending.pop(xid, None)
        where = f"{tracker.file}:{event.packet.log_pos - event.packet.event_size}"
        if kind == "ROLLBACK" or entry is not None:
            return 0 if kind == "ROLLBACK" else self._publish_xa(
                publisher, batch, tables, entry, event.timestamp * 1000, produce)
        raise UnsupportedEvent(
            f"XA COMMIT of {xid} at {where}: the XA PREPARE of that transaction came before the "
            f"position this stream started from, so its rows were never read, and publishing "
            f"nothing would lose them. Restart once from a position before its XA PREPARE "
            f"(streamer run --start-file/--start-pos); the transactions between that position "
            f"and this one are then published again")

    def _publish_xa(self, publisher: Any, batch: Batch, tables: TableCatalog, entry: List[Any],
                    ts_ms: int, produce: Any) -> int:
        """Publish the rows of the prepared XA transaction whose group ``entry`` names (file,
        offset, GTID, txid), read again from there, with their own places in the binlog; returns
        the messages produced. Its XA COMMIT is when its rows take effect, so this is where they
        go in the topic's order."""
        file, pos, gtid, txid = entry
        sub = Tracker(Position(file, pos))
        sub.begin(pos, gtid or None)
        sub.txid = txid
        by_id = tables.by_id
        txlog = self.txlog
        sent = 0
        batch.open()
        with self.reread(Position(file, pos)) as reader:
            for event in reader:
                cls = event.__class__
                op = OPS.get(cls)
                if op is not None:
                    tv = by_id.get(event.table_id)
                    if tv is None:
                        sub.count(rowcount.rows_in(event))
                        continue
                    n = process_event(event, op, tv, sub, produce)
                    sent += n
                    if txlog is not None:
                        sent += txlog.on_published(sub, tv.topic, n, ts_ms, produce)
                elif cls is TableMapEvent:
                    tv = tables.on_table_map(event)
                    if tv is not None:
                        self._announce(publisher, batch, tv)
                elif cls is XAPrepareEvent:
                    break
        if txlog is not None:
            sent += txlog.on_end(txid, ts_ms, produce)
        log.info("XA transaction of the group at %s:%d committed: %d messages published", file,
                 pos, sent)
        return sent

    def reread(self, start: Position) -> Any:
        """A second reader of the binlog from ``start``, under a replica id of its own: the
        server ends an older binlog stream of the same id when a new one connects."""
        m = self.cfg["mysql"]
        cfg = dict(self.cfg, mysql=dict(m, server_id=(int(m["server_id"]) + 2 ** 31) % 2 ** 32
                                        or 1))
        return self.new_reader(cfg, self.password, start, None)

    def _commit(self, publisher: Any, batch: Batch, tracker: Tracker) -> None:
        position = tracker.position()
        position.snapshot = self.snapshots.progress()
        if self.txlog is not None and tracker.in_tx:
            position.transaction = self.txlog.progress()
        timeout = float(self.cfg["shutdown_timeout_s"] if self.stop_requested else
                        self.cfg["kafka_commit_timeout_s"])
        publisher.commit(position, timeout)
        pending = batch.pending
        self.metrics.on_commit(position, pending, publisher.last_commit_s, publisher.queue_depth())
        self.published += pending
        self.batches += 1
        batch.committed(self.clock.monotonic(), tracker.mark())
        self.heap.after_commit()
        # Where the main loop does what signal handlers asked for (profiler, log level).
        self.metrics.tick()


def _beat_of(event: Any) -> int:
    """The µs timestamp a heartbeat rows event carries (its last row)."""
    row = event.rows[-1]
    return int((row.get("after_values") or row["values"])[HEARTBEAT_COLUMN])
