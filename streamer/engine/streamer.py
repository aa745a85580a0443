"""One source streamed into one namespace: what outlives a binlog connection, and a pipeline for each.

The table versions, the snapshots under way, the transaction log and the totals are kept across
reconnects, so that a re-read builds the very same versions and goes on where the checkpoint
says. For each connection, ``pipeline`` builds the stages over a fresh tracker and commit policy
(engine.pipeline says how they fit). The publisher, the reader and the clock are passed in: the
supervisor gives the Kafka publisher and the binlog reader, the unit tests in-memory ones.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Dict, List, Optional

from streamer.config import Config
from streamer import config as config_mod
from streamer.codec import formats
from streamer.codec.schema_registry import SchemaRegistry
from streamer.engine import start as start_mod
from streamer.engine.announce import Announcer
from streamer.engine.commit import CommitPolicy, Totals
from streamer.engine.context import Context
from streamer.engine.pipeline import Pipeline
from streamer.engine.snapshot import Snapshots
from streamer.engine.stages.dbzheartbeat import DebeziumHeartbeats
from streamer.engine.stages.heartbeat import Heartbeat
from streamer.engine.stages.rows import Rows
from streamer.engine.stages.savepoints import Savepoints
from streamer.engine.stages.snapshot import SnapshotStage
from streamer.engine.stages.statements import Statements
from streamer.engine.stages.tables import TableMaps
from streamer.engine.stages.txmeta import TxMeta
from streamer.engine.stages.xa import Xa
from streamer.engine.start import Ahead
from streamer.engine.tracker import Tracker
from streamer.engine.txmeta import TransactionLog
from streamer.ops import gcpacing
from streamer.ops.metrics import Metrics
from streamer.position import Position
from streamer.schema import evolution
from streamer.schema.masking import ColumnRules
from streamer.schema.naming import TopicNames
from streamer.schema.versions import TableCatalog, TableFilter
from streamer.source import oldtemporal, server
from streamer.source.definitions import Definitions
from streamer.source.temporary import TemporaryTables

log = logging.getLogger(__name__)


class Streamer:
    """``reader`` (cfg, password, start, gtid -> an event source context manager) reads the
    binlog again for a prepared XA transaction's rows; ``clock`` has ``monotonic()``, ``time()``
    and ``sleep()``. ``idle_hooks`` run when the stream is caught up with nothing open (the JIT
    warm-up): each is called as ``hook(reader, published, stopping)`` and returns True once
    done."""

    def __init__(self, cfg: Config, metrics: Optional[Metrics] = None,
                 reader: Optional[Callable[..., Any]] = None, clock: Any = time,
                 password: Optional[server.Secret] = None) -> None:
        self.cfg = cfg
        self.metrics = metrics if metrics is not None else Metrics(cfg)
        # Read again for each connection (source.server.Password).
        self.password = server.Password(cfg) if password is None else password
        self.new_reader = reader
        self.clock = clock
        self.stop_requested = False
        self.filter = TableFilter.streamed(cfg)
        self.column_rules = ColumnRules.from_config(cfg, config_mod.mask_salt(cfg))
        self.format = formats.make(cfg)
        self.txlog = TransactionLog(cfg.namespace, formats.transaction_records(
            cfg, self.format, self._collection)) if cfg.topics.transactions else None
        self.format_heartbeats = formats.heartbeat_records(cfg, self.format)
        self.snapshots = Snapshots(cfg, self.password, self.filter, clock)
        self.metrics.snapshot_status = self.snapshots.status
        self.totals = Totals()
        self.heap = gcpacing.OldGenerationLimit()
        self.idle_hooks: List[Callable[[Any, int, Callable[[], bool]], bool]] = []
        # Whether the server's binlog is still the one read (source.resetguard), from the idle
        # moments of a stream of a real server.
        self.reset_guard: Optional[Any] = None
        self.uncompacted: set = set()
        self.definitions: Optional[Definitions] = None
        # Row changes a ROLLBACK TO SAVEPOINT took back, by transaction (stages.savepoints).
        self.holes: Dict[str, List[Any]] = {}
        # The temporary tables of sessions logging statements (stages.statements).
        self.temporary = TemporaryTables()
        # Kept across reconnects so a re-read builds the very same table versions.
        self.tables: Optional[TableCatalog] = None
        self.schema_records: Optional[Ahead[List[Dict[str, Any]]]] = None
        sr = cfg.schema_registry
        self.schema_registry = SchemaRegistry.from_config(sr) if sr.url else None

    @property
    def published(self) -> int:
        return self.totals.published

    @property
    def batches(self) -> int:
        return self.totals.batches

    def request_stop(self, *_: Any) -> None:
        # Only flags: the loop wakes at the next event or heartbeat and shuts down in order.
        self.stop_requested = True

    def stopping(self) -> bool:
        return self.stop_requested

    # -- a connection -------------------------------------------------------------------------
    def stream(self, publisher: Any, reader: Any, start: Position) -> None:
        """Publish the events ``reader`` yields from ``start`` until the stop is requested (or
        the reader ends)."""
        self.pipeline(publisher, reader, start).stream(reader)

    def pipeline(self, publisher: Any, reader: Any, start: Position) -> Pipeline:
        """The stages of one connection, reading from ``start``."""
        cfg = self.cfg
        # Read by GTID set as the reader reads (a MySQL without GTIDs is read by file).
        gtid = getattr(reader, "gtid_start", start_mod.gtid_for(cfg, start))
        tracker = Tracker(start, by_gtid=gtid is not None, holes=self.holes)
        if start.file:
            self.metrics.resumed_at(start)  # the committed position until the first commit
        tables = self.catalog(publisher)
        if self.definitions is not None:
            # Its connection may be to a server restarted since, or failed over from: the next
            # read opens one to the server in use.
            self.definitions.close()
        policy = CommitPolicy(cfg, publisher, tracker, reader, self, self.metrics, self.clock,
                              self.totals, after_commit=self.heap.after_commit)
        announce = Announcer(publisher, policy.open, cfg.topics.compact,
                             self.schema_registry, self.uncompacted, cfg.topics.headers)
        ctx = Context(cfg, publisher, tracker, tables, self.clock, self.metrics, announce, policy)
        rows = Rows(ctx)
        table_maps = TableMaps(ctx, rows)
        stages: List[Any] = [table_maps, Statements(ctx, self.temporary),
                             Savepoints(ctx, self.holes)]
        if self.txlog is not None:
            stages.append(TxMeta(ctx, self.txlog))
        stages.append(SnapshotStage(ctx, self.snapshots, table_maps, start))
        stages.append(Xa(ctx, rows, self.reread))
        if self.metrics.heartbeat_db is not None:
            stages.append(Heartbeat(ctx, table_maps))
        if self.format_heartbeats is not None:
            stages.append(DebeziumHeartbeats(ctx, self.format_heartbeats,
                                             cfg.debezium.heartbeat_interval_s))
        for hook in self.idle_hooks:
            policy.idle_hooks.append(self._idle(hook, reader))
        if self.reset_guard is not None:
            policy.idle_hooks.append(self.reset_guard.hook(tracker, getattr(reader, "where", "MySQL")))
        pipeline = Pipeline(ctx, rows, stages)
        self.snapshots.pump()
        return pipeline

    def _idle(self, hook: Callable[..., bool], reader: Any) -> Callable[[], bool]:
        def idle() -> bool:
            done = hook(reader, self.totals.published, self.stopping)
            if done:
                self.idle_hooks.remove(hook)
            return done
        return idle

    def reread(self, start: Position) -> Any:
        """A second reader of the binlog from ``start``, under a replica id of its own: the
        server ends an older binlog stream of the same id when a new one connects."""
        if self.new_reader is None:
            raise RuntimeError("this streamer reads no binlog of its own (a warm-up's)")
        cfg = self.cfg.but({"mysql.server_id": (self.cfg.mysql.server_id + 2 ** 31) % 2 ** 32
                            or 1})
        return self.new_reader(cfg, self.password, start, None)

    # -- the table versions -------------------------------------------------------------------
    def catalog(self, publisher: Any) -> TableCatalog:
        """The table versions, kept across reconnects so that a re-read builds the very same
        versions; the first time, the schema topic's last version of each table continues its
        lineage (evolution)."""
        if self.tables is None:
            ahead, self.schema_records = self.schema_records, None
            records = ahead.result() if ahead is not None else publisher.read_schema_records()
            self.tables = self.new_catalog(records)
        self.tables.forget_current()
        return self.tables

    def new_catalog(self, records: List[Dict[str, Any]],
                    read_definitions: bool = True) -> TableCatalog:
        """The table versions, continuing the lineage of the schema topic's ``records``; with
        ``read_definitions``, what a MariaDB table map hides is read from the server in use
        (source.definitions)."""
        cfg = self.cfg
        if read_definitions and self.definitions is None:
            self.definitions = Definitions(
                lambda: server.connect(server.connection_settings(cfg, self.password)),
                server.is_mariadb)
        if read_definitions:  # old temporal columns are measured as their table maps are parsed
            oldtemporal.configure(self.definitions.of)
        return TableCatalog(cfg.namespace, self.filter,
                            lineage=evolution.lineage_from_records(records),
                            rules=self.column_rules, tombstones=cfg.topics.tombstones,
                            compact=cfg.topics.compact,
                            schemas=evolution.schemas_from_records(records),
                            definitions=self.definitions if read_definitions else None,
                            fmt=self.format, topics=TopicNames.from_config(cfg))

    def _collection(self, topic: str) -> str:
        """The ``db.table`` whose messages go to ``topic`` (Debezium's data_collection)."""
        for tv in (self.tables.current.values() if self.tables is not None else ()):
            if tv.topic == topic:
                return f"{tv.db}.{tv.table}"
        return topic

    def close(self) -> None:
        self.snapshots.close()
        if self.definitions is not None:
            self.definitions.close()
