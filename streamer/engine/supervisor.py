"""The supervisor: the lifetime of a run around the streamer. It waits for the lease (with
``ha.enabled``), finds the start position while the producer starts, opens the binlog, and when
a connection is lost resumes from the last committed checkpoint, on the next server of
``mysql.hosts`` when this one can't be reached, with the reconnect backoff in between.

Shutdown is one path whether it comes from a signal, an error or the end of a bounded run: the
open Kafka transaction is committed (or aborted when that fails) and the reader is closed. An
instance that lost its lease exits with the lease's error (exit 4), never 0, whatever it was
doing when it lost it, so that its service manager starts it again as a standby.
"""
from __future__ import annotations

import logging
import signal
import time
from typing import Any, Callable, Dict, Optional

import pymysql

from streamer.config import Config
from streamer.engine import start as start_mod
from streamer.engine.start import Ahead
from streamer.engine.streamer import Streamer
from streamer.errors import (BatchAborted, LeaseLost, ProducerBroken, RegistryError,
                             RegistryUnavailable, RolledBackRows, ServerBehind, ServerIdTaken,
                             ServerUnreachable, SourceError, StreamInterrupted, UnreadableCheckpoint,
                             WithoutGtids)
from streamer.kafka.publisher import Publisher
from streamer.ops.metrics import Metrics
from streamer.position import Position
from streamer.source import failover, server
from streamer.source.reader import BinlogReader
from streamer.source.resetguard import ResetGuard

log = logging.getLogger(__name__)

# PyMySQL's InterfaceError: a statement on a connection that had already broken (a snapshot's).
# A schema registry that can't serve is waited for as MySQL is: the version it was to register
# is announced again on the re-read.
RETRIED = (StreamInterrupted, BatchAborted, ProducerBroken, RolledBackRows, RegistryUnavailable,
           pymysql.err.OperationalError, pymysql.err.InterfaceError)


class Backoff:
    """Reconnect delays: doubling from mysql.reconnect_backoff_s up to reconnect_backoff_max_s,
    for at most mysql.reconnect_max_attempts attempts (0: no limit)."""

    def __init__(self, mysql: Any) -> None:
        self.first = mysql.reconnect_backoff_s
        self.delay = self.first
        self.max_s = mysql.reconnect_backoff_max_s
        self.limit = mysql.reconnect_max_attempts
        self.attempts = 0

    def succeeded(self) -> None:
        """A connection worked: the next failure starts from the first delay, with its own
        attempts (else a long-lived process would keep the longest delay for good, and give up
        on a routine blip once reconnect_max_attempts blips had added up)."""
        self.delay = self.first
        self.attempts = 0

    def next(self) -> Optional[float]:
        """Seconds to wait before the next attempt, or None when the attempts are used up."""
        self.attempts += 1
        if self.limit and self.attempts > self.limit:
            return None
        delay = self.delay
        self.delay = min(delay * 2, self.max_s)
        return delay


class Supervisor:
    """One source, one namespace. ``run()`` blocks until stopped and returns the exit code.

    ``publisher`` (cfg -> a Publisher context manager), ``reader`` (cfg, password, start, gtid ->
    an event source context manager: iterable, with ``more_arrived()``, and optionally
    ``arrives_within(seconds)`` for batch.gather_ms) and ``clock`` (``monotonic()``, ``time()``,
    ``sleep()``) default to Kafka, the binlog and the time module. ``warmup`` (engine.warmup) is
    run while the stream is idle."""

    def __init__(self, cfg: Config, start: Optional[Position] = None,
                 start_gtid: Optional[str] = None, metrics: Optional[Metrics] = None,
                 publisher: Callable[[Dict[str, Any]], Any] = Publisher,
                 reader: Callable[..., Any] = BinlogReader, clock: Any = time,
                 password: Optional[str] = None, warmup: Optional[Any] = None) -> None:
        self.cfg = cfg
        self.streamer = Streamer(cfg, metrics, reader, clock, password)
        self.metrics = self.streamer.metrics
        self.password = self.streamer.password
        self.override = start
        self.override_gtid = start_gtid
        self.new_publisher = publisher
        self.new_reader = reader
        self.clock = clock
        self.warmup = warmup
        if warmup is not None:
            self.streamer.idle_hooks.append(warmup.run)
        self.reconnects = 0
        if reader is BinlogReader:  # a real server's binlog (not a test's events)
            self.streamer.reset_guard = ResetGuard(
                lambda: server.connect(server.connection_settings(cfg, self.password)),
                clock.monotonic)
        # MySQL refused to go on by GTID set for transactions without GTIDs after the stream's
        # place, or MariaDB for a domain numbered out of order (source.reader.WithoutGtids,
        # GtidsOutOfOrder): until this run ends, resume by file and offset.
        self.by_file = False
        self.servers = failover.Servers(cfg)
        if len(self.servers.hosts) > 1:
            self.metrics.servers = self.servers
        self.lease: Optional[Any] = None  # kafka.lease, with ha.enabled
        self.publisher: Optional[Any] = None

    # -- control --------------------------------------------------------------------------------
    @property
    def stop_requested(self) -> bool:
        return self.streamer.stop_requested

    def request_stop(self, *_: Any) -> None:
        # Only flags: the loop wakes at the next event or heartbeat and shuts down in order.
        self.streamer.request_stop()
        if self.publisher is not None:
            self.publisher.stopping = True

    def install_signals(self) -> None:
        signal.signal(signal.SIGTERM, self.request_stop)
        signal.signal(signal.SIGINT, self.request_stop)

    # -- the run: start position, then stream and recover ---------------------------------------
    def run(self) -> int:
        """Stream until stopped; with ha.enabled, first wait for the lease (kafka.lease)."""
        try:
            if not self.cfg.ha.enabled:
                return self._run()
            from streamer.kafka.lease import Lease
            with Lease(self.cfg, self.request_stop) as lease:
                self.lease = self.metrics.ha = lease
                if not lease.wait(lambda: self.stop_requested):
                    log.info("stopped as a standby")
                    return 0
                # The producer starts only now: its init_transactions fences the previous holder.
                code = self._run()
                self._check_lease()
                return code
        finally:
            self.streamer.close()
            if self.warmup is not None:
                self.warmup.close()

    def _check_lease(self) -> None:
        """A lease lost while no commit was made (MySQL down, say) stopped the run like a
        signal: it is the lease's error all the same."""
        if self.lease is not None and self.lease.lost:
            raise LeaseLost(f"this instance lost the lease of source {self.cfg.source.name} "
                            f"while it was not committing (reconnecting or waiting for MySQL); "
                            f"the instance holding the lease now goes on from the checkpoint")

    def _run(self) -> int:
        # MySQL's checks run while the producer starts; once both answered, the internal topics
        # are made sure of, and the schema topic is read while the checkpoint is (measured: see
        # docs/benchmarks.md, "Start-up").
        explicit = start_mod.explicit_start(self.cfg, self.override)
        by_set = start_mod.explicit_gtid(self.cfg, self.override, self.override_gtid)
        probe = Ahead(lambda: start_mod.probe_source(self.cfg, self.password,
                                                     self.streamer.filter, explicit, by_set),
                      "streamer-mysql-probe")
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
            self._stream(publisher, position)
        log.info("stopped after %d messages in %d batches", self.streamer.published,
                 self.streamer.batches)
        return 0

    def _stream(self, publisher: Any, position: Position) -> None:
        """Stream from ``position``; a lost connection resumes from the last checkpoint."""
        retry = Backoff(self.cfg.mysql)
        while not self.stop_requested:
            began, committed = self.clock.monotonic(), publisher.committed
            self.servers.connecting(lambda: publisher.committed)
            try:
                self._connection(publisher, position)
                return
            except (ServerBehind,) + RETRIED as exc:
                # This connection worked before it was lost, unless another reader of its
                # server_id took it: then it is no blip, and the wait keeps growing.
                if (publisher.committed is not committed or
                        self.clock.monotonic() - began >= retry.max_s) and \
                        not isinstance(exc, ServerIdTaken):
                    retry.succeeded()
                    self.servers.worked()
                if isinstance(exc, WithoutGtids):
                    self.by_file = True
                if isinstance(exc, ServerBehind):
                    self.servers.refused(exc)  # raises when no server is left to try
                elif isinstance(exc, ServerUnreachable):
                    self.servers.next()
                self._recover(publisher, exc)
                self.metrics.on_error(exc, reconnect=True)
                # Rows a ROLLBACK TO took back are no failure: the batch is read again at once,
                # however many such transactions it holds, and the attempts are not used up.
                backoff = 0.0 if isinstance(exc, RolledBackRows) else retry.next()
                if backoff is None:
                    side = RegistryError if isinstance(exc, RegistryError) else SourceError
                    raise side(f"gave up after {retry.attempts - 1} reconnect attempts: {exc}")
                self.reconnects += 1
                if publisher.committed is not None:
                    position = publisher.committed
                log.warning("%s; resuming from %s on %s in %.1fs", server.said(exc),
                            position.describe(), self.servers.current, backoff,
                            extra={"position": position.describe()})
                self._sleep(backoff)

    def _connection(self, publisher: Any, position: Position) -> None:
        """One binlog connection, read until the stop."""
        gtid = start_mod.gtid_for(self.cfg, position)
        if self.by_file and position.file:
            gtid = None
        with self.new_reader(self.cfg, self.password, position, gtid) as reader:
            # On another server than the checkpoint's, the reader resumes by GTID set
            # (source.failover).
            start = getattr(reader, "start", position)
            log.info("reading the binlog from %s on %s at %s", start.describe(),
                     getattr(reader, "server", None) or "MySQL", self.servers.current,
                     extra={"position": start.describe()})
            self.streamer.stream(publisher, reader, start)
        if not self.stop_requested:
            # The server ended the stream (an EOF packet: it is shutting down, or dropped this
            # replica): a lost connection, not the end of the work.
            raise StreamInterrupted("the server ended the binlog stream")

    def _first_position(self, publisher: Any,
                        probe: Optional[Ahead[start_mod.SourceInfo]]) -> Optional[Position]:
        """The start position. While MySQL can't be reached (down, restarting, not up yet), retry
        with the reconnect backoff, as a dropped stream does; a refused login fails at once.
        ``probe`` is the first attempt's MySQL check, already under way."""
        m = self.cfg.mysql
        retry = Backoff(m)
        while not self.stop_requested:
            try:
                ahead, probe = probe, None  # a retry probes again
                return self._start_position(publisher, ahead)
            except pymysql.err.OperationalError as exc:
                refused = start_mod.refusal(exc, m)
                if refused is not None:
                    raise refused from exc
                where = f"MySQL at {m.host}:{m.port}"
                backoff = retry.next()
                if backoff is None:
                    raise SourceError(f"{where} unreachable, gave up after {retry.attempts - 1} "
                                      f"reconnect attempts ({exc}). Check mysql.host/mysql.port "
                                      f"and that the server is running") from exc
                self.metrics.on_error(exc, reconnect=False)
                # Read the schema topic again when streaming starts: the read made ahead may
                # be stale by then (other sources of the namespace write to it too).
                self.streamer.schema_records = None
                if self.servers.next():
                    log.warning("%s unreachable (%s): trying MySQL at %s in %.1fs (mysql.hosts)",
                                where, exc, self.servers.current, backoff)
                else:
                    log.warning("%s unreachable (%s): retrying in %.1fs. Check mysql.host/"
                                "mysql.port and that the server is running", where, exc, backoff)
                self._sleep(backoff)
        return None

    def _start_position(self, publisher: Any,
                        ahead: Optional[Ahead[start_mod.SourceInfo]]) -> Position:
        streamer = self.streamer
        source = ahead.result() if ahead is not None else start_mod.probe_source(
            self.cfg, self.password, streamer.filter,
            start_mod.explicit_start(self.cfg, self.override),
            start_mod.explicit_gtid(self.cfg, self.override, self.override_gtid))
        # Both ends answered: only now is anything created in Kafka.
        publisher.prepare()
        if streamer.tables is None and streamer.schema_records is None:
            streamer.schema_records = Ahead(publisher.read_schema_records, "streamer-schemas-read")
        explicit = start_mod.is_explicit(self.cfg, self.override, self.override_gtid)
        try:
            checkpoint = publisher.read_checkpoint()
        except UnreadableCheckpoint as exc:
            if not explicit:
                raise
            log.warning("%s. The explicit start goes on without it", exc)
            checkpoint = None
        if checkpoint is None and self.cfg.start.initial == "end" and not explicit:
            ahead_records = streamer.schema_records
            start_mod.check_unused(self.cfg, ahead_records.result() if ahead_records is not None
                                   else publisher.read_schema_records(), streamer.filter)
        return start_mod.initial_position(self.cfg, checkpoint, source, self.override,
                                          self.override_gtid)

    def _recover(self, publisher: Any, exc: Exception) -> None:
        """Drop the open batch: abort it, or replace a producer that can't abort any more. A
        batch dropped for the source's sake (a lost connection, rows a ROLLBACK TO took back)
        has its messages delivered first: Kafka is well, and an abort with messages queued
        purges them after they took their sequence numbers, so the next transaction failed on
        the gap too (librdkafka's TXNERR lines at ERROR, and the batch read once more)."""
        try:
            if isinstance(exc, ProducerBroken):
                raise exc
            publisher.abort(drain=not isinstance(exc, BatchAborted))
        except ProducerBroken:
            publisher.reset()

    def _sleep(self, seconds: float) -> None:
        end = self.clock.monotonic() + seconds
        while not self.stop_requested and self.clock.monotonic() < end:
            self.clock.sleep(min(0.1, end - self.clock.monotonic()))

