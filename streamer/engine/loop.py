"""The engine: read events, track transaction boundaries, publish batches, resume after failures.

Shutdown is one path whether it comes from a signal, an error or the end of a bounded run: the
open Kafka transaction is committed (or aborted when that fails) and the reader is closed.
"""
from __future__ import annotations

import logging
import signal
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

import pymysql
from pymysqlreplication.event import (GtidEvent, HeartbeatLogEvent, MariadbGtidEvent, QueryEvent,
                                      RotateEvent, XidEvent)
from pymysqlreplication.row_event import (DeleteRowsEvent, TableMapEvent, UpdateRowsEvent,
                                          WriteRowsEvent)

from streamer import config as config_mod
from streamer.codec.avro import canonical_json
from streamer.codec.schema_registry import SchemaRegistry
from streamer.engine import truncate
from streamer.engine.batch import BatchClock, _live
from streamer.engine.rows import process_event
from streamer.engine.start import Backoff, _Ahead
from streamer.engine.tracker import Tracker
from streamer.errors import BatchAborted, ProducerBroken, SourceError, StreamInterrupted
from streamer.kafka.publisher import Publisher
from streamer.kafka.topics import read_schema_records
from streamer.ops import gcpacing
from streamer.ops.heartbeat import COLUMN as HEARTBEAT_COLUMN
from streamer.ops.metrics import Metrics
from streamer.position import Position
from streamer.schema import evolution
from streamer.schema.versions import TableFilter, TableRegistry, TableVersion
from streamer.source.reader import BinlogReader
from streamer.source.server import (ER_ACCESS_DENIED, ER_LOGIN_REFUSED, binlog_files, connect,
                                    connection_settings, master_status, settings_problems)

log = logging.getLogger(__name__)

OPS = {WriteRowsEvent: "c", UpdateRowsEvent: "u", DeleteRowsEvent: "d"}
FL_STANDALONE = 1


def _start_of(event: Any) -> int:
    return event.packet.log_pos - event.packet.event_size


class _Source(NamedTuple):
    """What the start position needs from MySQL, read once the settings are known to be right."""
    server_id: int
    end: Optional[Tuple[str, int]]  # SHOW MASTER STATUS, for start.initial: end
    first_file: Optional[str]  # the oldest binlog, for start.initial: beginning


class Streamer:
    """One source, one namespace. ``run()`` blocks until stopped and returns the exit code."""

    def __init__(self, cfg: Dict[str, Any], start: Optional[Position] = None,
                 start_gtid: Optional[str] = None,
                 on_batch: Optional[Callable[["Streamer"], None]] = None,
                 metrics: Optional[Metrics] = None):
        self.cfg = cfg
        self.metrics = metrics if metrics is not None else Metrics(cfg)
        self.password = config_mod.mysql_password(cfg)
        self.override = start
        self.override_gtid = start_gtid
        self.on_batch = on_batch
        self.stop_requested = False
        # The heartbeat database is never published, whatever the patterns say.
        self.filter = TableFilter(cfg["tables"]["include"], list(cfg["tables"]["exclude"]) +
                                  [cfg["heartbeat"]["database"] + ".*"])
        self.published = 0
        self.batches = 0
        self.reconnects = 0
        self.publisher: Optional[Publisher] = None
        self.heap = gcpacing.OldGenerationLimit()
        # Kept across reconnects so a re-read builds the very same table versions.
        self.tables: Optional[TableRegistry] = None
        self._schema_records: Optional[_Ahead[List[Dict[str, Any]]]] = None
        sr = cfg["schema_registry"]
        self.schema_registry = SchemaRegistry(sr["url"], float(sr["timeout_s"])) if sr["url"] else None

    # -- control --------------------------------------------------------------------------------
    def request_stop(self, *_: Any) -> None:
        # Only flags: the loop wakes at the next event or heartbeat and shuts down in order.
        self.stop_requested = True
        if self.publisher is not None:
            self.publisher.stopping = True

    def install_signals(self) -> None:
        signal.signal(signal.SIGTERM, self.request_stop)
        signal.signal(signal.SIGINT, self.request_stop)

    # -- start position -------------------------------------------------------------------------
    def _probe_source(self) -> _Source:
        """Check that MySQL is set up for row-based CDC and read what a start position needs."""
        conn = connect(connection_settings(self.cfg, self.password))
        try:
            problems = settings_problems(conn)
            if problems:
                raise SourceError("the MySQL source is not set up for row-based CDC: " +
                                  "; ".join(problems))
            beginning = self.cfg["start"]["initial"] == "beginning"
            return _Source(_server_id(conn), None if beginning else master_status(conn),
                           binlog_files(conn)[0] if beginning else None)
        finally:
            conn.close()

    def _initial_position(self, publisher: Publisher, source: _Source) -> Position:
        checkpoint = publisher.read_checkpoint()
        start_cfg = self.cfg["start"]
        if self.override is not None or self.override_gtid is not None or start_cfg["file"] \
                or start_cfg["gtid"]:
            pos = self.override
            if pos is None and start_cfg["file"]:
                pos = Position(start_cfg["file"], start_cfg["pos"])
            gtid = self.override_gtid or (start_cfg["gtid"] if pos is None else None)
            if gtid is not None:
                pos = Position("", 4, gtid_set=gtid)
            log.warning("!!! explicit start position %s OVERRIDES the committed checkpoint "
                        "%s !!!", pos.describe(),
                        checkpoint.describe() if checkpoint else "(none)")
            pos.server_id = source.server_id
            return pos
        if checkpoint is not None:
            log.info("resuming from committed checkpoint %s", checkpoint.describe())
            return checkpoint
        if source.first_file is not None:
            pos = Position(source.first_file, 4)
        else:
            assert source.end is not None
            pos = Position(*source.end)
        pos.server_id = source.server_id
        log.info("no checkpoint for source %s: starting at the %s of the binlog, %s",
                 self.cfg["source"]["name"], start_cfg["initial"], pos.describe())
        return pos

    # -- main loop ------------------------------------------------------------------------------
    def run(self) -> int:
        # MySQL's checks run while the producer starts; the schema topic is read while the
        # checkpoint is (measured: see docs/benchmarks.md, "Start-up").
        probe = _Ahead(self._probe_source, "streamer-mysql-probe")
        with Publisher(self.cfg) as publisher:
            self.publisher = publisher
            if self.tables is None:
                self._schema_records = _Ahead(self._read_schema_records, "streamer-schemas-read")
            position = self._first_position(publisher, probe)
            if position is None:  # stopped while MySQL was unreachable
                log.info("stopped before streaming")
                return 0
            if publisher.committed is not position:
                # Make a new start point durable before reading: a crash before the first batch
                # must resume here, not at a binlog end that has moved on meanwhile.
                publisher.commit(position)
            gtid = self._gtid_for(position)
            retry = Backoff(self.cfg["mysql"])
            while not self.stop_requested:
                try:
                    self._stream(publisher, position, gtid)
                    break
                except (StreamInterrupted, BatchAborted, ProducerBroken,
                        pymysql.err.OperationalError) as exc:
                    self._recover(publisher, exc)
                    self.metrics.on_error(exc, reconnect=True)
                    backoff = retry.next()
                    if backoff is None:
                        raise SourceError(f"gave up after {retry.attempts - 1} reconnect attempts: {exc}")
                    self.reconnects += 1
                    if publisher.committed is not None:
                        position = publisher.committed
                        gtid = self._gtid_for(position)
                    log.warning("%s; resuming from %s in %.1fs", exc, position.describe(), backoff)
                    self._sleep(backoff)
        log.info("stopped after %d messages in %d batches", self.published, self.batches)
        return 0

    def _first_position(self, publisher: Publisher,
                        probe: Optional[_Ahead[_Source]]) -> Optional[Position]:
        """The start position. While MySQL can't be reached (down, restarting, not up yet), retry
        with the reconnect backoff, as a dropped stream does; a refused login fails at once.
        ``probe`` is the first attempt's MySQL check, already under way."""
        m = self.cfg["mysql"]
        retry = Backoff(m)
        while not self.stop_requested:
            try:
                ahead, probe = probe, None  # a retry probes again
                source = ahead.result() if ahead is not None else self._probe_source()
                return self._initial_position(publisher, source)
            except pymysql.err.OperationalError as exc:
                code = exc.args[0] if exc.args else None
                where = f"MySQL at {m['host']}:{m['port']}"
                if code in ER_LOGIN_REFUSED:
                    raise SourceError(f"{where} refused the streamer's user {m['user']!r}: "
                                      f"{exc.args[-1]}. Check mysql.user and mysql.password_file, "
                                      f"and that the account exists and is not locked") from exc
                if code in ER_ACCESS_DENIED:
                    raise SourceError(f"{where}: the streamer's user {m['user']!r} lacks a "
                                      f"privilege: {exc.args[-1]}. Grant it SELECT, REPLICATION "
                                      f"SLAVE, REPLICATION CLIENT ON *.*") from exc
                backoff = retry.next()
                if backoff is None:
                    raise SourceError(f"{where} unreachable, gave up after {retry.attempts - 1} "
                                      f"reconnect attempts ({exc}). Check mysql.host/mysql.port "
                                      f"and that the server is running") from exc
                self.metrics.on_error(exc, reconnect=False)
                # Read the schema topic again when streaming starts: the read made ahead may
                # be stale by then (other sources of the namespace write to it too).
                self._schema_records = None
                log.warning("%s unreachable (%s): retrying in %.1fs. Check mysql.host/mysql.port "
                            "and that the server is running", where, exc, backoff)
                self._sleep(backoff)
        return None

    def _recover(self, publisher: Publisher, exc: Exception) -> None:
        """Drop the open batch: abort it, or replace a producer that can't abort any more."""
        try:
            if isinstance(exc, ProducerBroken):
                raise exc
            publisher.abort()
        except ProducerBroken:
            publisher.reset()

    def _read_schema_records(self) -> List[Dict[str, Any]]:
        return read_schema_records(self.cfg["kafka"], self.cfg["namespace"])

    def _gtid_for(self, position: Position) -> Optional[str]:
        """The GTID set to resume by, or None to resume by file/offset."""
        if position.gtid_set and (not position.file or
                                  self.cfg["mysql"]["position_mode"] == "gtid"):
            return position.gtid_set
        return None

    def _sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self.stop_requested and time.monotonic() < end:
            time.sleep(min(0.1, end - time.monotonic()))

    def _stream(self, publisher: Publisher, start: Position, gtid: Optional[str]) -> None:
        tracker = Tracker(start)

        def new_version(tv: TableVersion) -> None:
            publisher.ensure_topic(tv.topic)
            if self.schema_registry is not None:
                self.schema_registry.frame(tv)
            if not publisher.in_tx:
                publisher.begin()
            for kind, writer in (("value", tv.value_writer), ("key", tv.key_writer)):
                if writer is not None:
                    publisher.produce_schema(writer.fingerprint.hex(),
                                             canonical_json(writer.schema), tv.topic, kind)

        if self.tables is None:
            # The schema topic's last version of each table continues its lineage (evolution).
            ahead, self._schema_records = self._schema_records, None
            records = ahead.result() if ahead is not None else self._read_schema_records()
            self.tables = TableRegistry(self.cfg["namespace"], self.filter,
                                        lineage=evolution.lineage_from_records(records))
        registry = self.tables
        registry.forget_current()
        registry.on_new_version = new_version
        by_id = registry.by_id
        metrics = self.metrics
        produce = metrics.counting(publisher.produce)
        on_rows = metrics.on_rows
        beat_db = metrics.heartbeat_db
        beat_ids: set = set()
        beat = False
        batch = self.cfg["batch"]
        max_messages = int(batch["max_messages"])
        # Live, a batch commits as soon as the reader has read all the server has sent (at a
        # transaction's end, or at an idle heartbeat): changes that arrive during the commit
        # queue up and make the next batch, so batches grow with the load (group commit).
        # Catching up, changes are old anyway: a commit every linger would stall reading for a
        # synchronous commit every few hundred rows.
        clock = BatchClock(float(batch["linger_ms"]) / 1000.0, float(batch["min_linger_ms"]) / 1000.0,
                           float(batch["catchup_linger_ms"]) / 1000.0)
        last_ts = 0
        idle = float(batch["idle_checkpoint_ms"]) / 1000.0
        pending = 0
        batch_started = time.monotonic()
        last_commit = batch_started
        committed_at = (start.file, start.pos, start.rows)
        with BinlogReader(self.cfg, self.password, start, gtid) as reader:
            log.info("reading the binlog from %s", start.describe())
            for event in reader:
                cls = event.__class__
                tx_end = False
                op = OPS.get(cls)
                if op is not None:
                    last_ts = event.timestamp
                    tv = by_id.get(event.table_id)
                    if tv is None:
                        tracker.tx_rows += len(event.rows)
                        if event.table_id in beat_ids:
                            # Never published; committed within linger like a change, so it
                            # measures the latency a change would see and keeps lag alive.
                            metrics.on_heartbeat(_beat_of(event))
                            if not publisher.in_tx:
                                publisher.begin()
                                batch_started = time.monotonic()
                            beat = True
                    else:
                        if not publisher.in_tx:
                            publisher.begin()
                            batch_started = time.monotonic()
                        pending += process_event(event, op, tv, tracker, produce)
                        on_rows(event.timestamp, len(event.rows))
                elif cls is TableMapEvent:
                    registry.on_table_map(event)
                    if event.schema == beat_db:
                        beat_ids.add(event.table_id)
                else:
                    if cls is QueryEvent:
                        tv = truncate.truncated_version(event, registry)
                        if tv is not None:
                            if not publisher.in_tx:
                                publisher.begin()
                                batch_started = time.monotonic()
                            pending += truncate.publish_truncate(event, tv, tracker, produce)
                    self._boundary(event, cls, tracker)
                    tx_end = not tracker.in_tx and (cls is XidEvent or cls is QueryEvent)
                if pending >= max_messages or self.stop_requested:
                    self._commit(publisher, tracker, pending)
                    pending = 0
                    beat = False
                    last_commit = time.monotonic()
                    committed_at = (tracker.file, tracker.tx_start, tracker.tx_rows)
                    if self.stop_requested:
                        return
                    continue
                now = time.monotonic()
                # A binlog heartbeat with nothing queued behind it means the server had nothing
                # more to send: the reader is caught up, so waiting out the linger would only add
                # latency. A heartbeat queued before newer changes says nothing of the sort.
                caught_up = cls is HeartbeatLogEvent and not reader.more_arrived()
                if caught_up:
                    self.metrics.on_idle()
                elif tx_end and (pending or beat) and _live(last_ts):
                    caught_up = not reader.more_arrived()  # at a transaction's end
                if (pending or beat) and clock.due(now - batch_started, caught_up, last_ts):
                    self._commit(publisher, tracker, pending)
                    clock.committed(caught_up)
                    pending = 0
                    beat = False
                    last_commit = now
                    committed_at = (tracker.file, tracker.tx_start, tracker.tx_rows)
                elif not pending and not beat and now - last_commit >= idle and \
                        not tracker.in_tx and \
                        committed_at != (tracker.file, tracker.tx_start, tracker.tx_rows):
                    # Tables we don't publish and DDL still move the position: checkpoint it so
                    # a restart need not re-read them. Pending changes are left to the linger:
                    # a reader slower than idle_checkpoint_ms would otherwise commit after every
                    # transaction and ignore catchup_linger_ms.
                    self._commit(publisher, tracker, 0)
                    last_commit = now
                    committed_at = (tracker.file, tracker.tx_start, tracker.tx_rows)

    def _boundary(self, event: Any, cls: Any, tracker: Tracker) -> None:
        if cls is MariadbGtidEvent:
            tracker.begin(_start_of(event), event.gtid)
            tracker.explicit = not (event.flags & FL_STANDALONE)
        elif cls is GtidEvent:
            tracker.begin(_start_of(event), event.gtid)
            tracker.explicit = False
        elif cls is XidEvent:
            tracker.end(event.packet.log_pos)
        elif cls is QueryEvent:
            query = event.query
            if query == "BEGIN":
                if not tracker.in_tx:
                    tracker.begin(_start_of(event), None)
                tracker.explicit = True
            elif query == "COMMIT" or not tracker.explicit or not tracker.in_tx:
                tracker.end(event.packet.log_pos)
        elif cls is RotateEvent:
            tracker.file = event.next_binlog
            if not tracker.in_tx:
                tracker.next_pos = event.position
                tracker.tx_start = event.position

    def _commit(self, publisher: Publisher, tracker: Tracker, pending: int) -> None:
        position = tracker.position()
        timeout = float(self.cfg["shutdown_timeout_s"]) if self.stop_requested else 60.0
        publisher.commit(position, timeout)
        self.metrics.on_commit(position, pending, publisher.last_commit_s, len(publisher.producer))
        self.published += pending
        self.batches += 1
        self.heap.after_commit()
        if self.on_batch is not None:
            self.on_batch(self)


def _beat_of(event: Any) -> int:
    """The µs timestamp a heartbeat rows event carries (its last row)."""
    row = event.rows[-1]
    return int((row.get("after_values") or row["values"])[HEARTBEAT_COLUMN])


def _server_id(conn: Any) -> int:
    with conn.cursor() as cur:
        cur.execute("SELECT @@server_id")
        return int(cur.fetchone()[0])
