"""Warm PyPy's JIT before the first real change, while the stream is idle.

Under PyPy the hot path runs interpreted until the JIT has traced and compiled it: measured at a
live load of 5k rows/s right after a start, the loop fell ~200 ms behind in its first ~300 ms,
and the first changes waited that long (docs/benchmarks-history.md, "JIT warm-up"). A start under a
backlog warms up on the backlog; a start into an idle stream met its first changes cold.

So, under PyPy, a pipeline of its own (engine.streamer builds it, for a config of the recording's
database) streams a recorded OLTP binlog (warmup.sql, recorded into warmup.binlog) through the very
loop, reader, decoding and encoding of the real stream, over twins of the live reader's objects
(source.replay), into the real Publisher on librdkafka's in-process mock cluster
(``Publisher.in_process``). It is an idle hook of the real stream's commit policy. Nothing reaches
Kafka or MySQL. It runs only when the real stream is caught up with nothing in its open batch, as
one replayed stream for as long as that lasts: between two slices of a few transactions it looks at
the real stream, and it ends as soon as the server has sent something, to go on at the next idle
moment; a real change so waits at most for one small slice. Once real changes flow, it waits for
them to stop (``Quiet``): at 5k rows/s the stream is caught up between most transactions, and a
slice at each of those moments, 15-40 ms while the JIT still compiles, made the live changes wait
for one slice after another. (A stream of its own for each slice took 4.2 s for 8,000 transactions
of an idle stream here, against 2.0 s: ~4 ms a stream.) What takes longer than a slice happens in
threads of its own, away from the stream: making the pipeline and starting the mock cluster
(~0.5 s), from the first idle moment on, and closing the mock cluster (~0.2 s) once done. After
``warmup.transactions`` transactions, or once the real stream has published as many changes itself,
it is done for the process; a full collection, still idle, then takes what it left
(docs/benchmarks-history.md, "JIT warm-up while idle").
"""
from __future__ import annotations

import gc
import logging
import os
import platform
import threading
import time
from typing import Any, Callable, Optional

from streamer.config import Config
from streamer.engine.start import Ahead
from streamer.engine.streamer import Streamer
from streamer.kafka.publisher import Publisher
from streamer.ops.metrics import Metrics
from streamer.source import replay

log = logging.getLogger(__name__)

RECORDING = os.path.join(os.path.dirname(os.path.abspath(__file__)), "warmup.binlog")
DATABASE = "streamer_warmup"  # warmup.sql's
# Transactions a slice; between two, the real stream is checked for new data.
SLICE = 16
# How long the real stream must have published nothing before a slice runs (``Quiet``).
QUIET_S = 0.1


class _OwnTable(logging.Filter):
    """Keeps the warm-up's own table out of the log (its schema version): not the user's."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.args, tuple) and record.args[:1] == (DATABASE,))


QUIET = _OwnTable()
VERSIONS_LOG = logging.getLogger("streamer.schema.versions")


def wanted(cfg: Config) -> bool:
    """Whether this process warms up: under PyPy (CPython has no JIT to warm), unless
    ``warmup.transactions`` is 0."""
    return platform.python_implementation() == "PyPy" and cfg.warmup.transactions > 0


def warm_config(cfg: Config) -> Config:
    """The real config, for the recording's database alone, with nothing that reaches a server
    (no schema registry, heartbeat or metrics endpoint) and no password (it connects nowhere)."""
    return cfg.but({
        "tables.include": [DATABASE + ".*"], "tables.exclude": [],
        "tables.columns.exclude": [], "tables.columns.mask": {},  # the real tables' rules
        "schema_registry.url": None, "heartbeat.enabled": False, "metrics.http_port": 0,
        "signalfx.enabled": False,
        "snapshot.mode": "watermark",  # read_only mode would query the server's position
        "namespace": cfg.namespace + "-warmup"})


class Quiet:
    """Whether the real stream has been quiet, nothing published, for ``quiet_s``: told at each
    idle moment how many messages it has published so far. A stream that has never published
    since the process began is quiet."""

    def __init__(self, quiet_s: float = QUIET_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.quiet_s = quiet_s
        self.clock = clock
        self.seen = 0
        self.changed_at = float("-inf")

    def __call__(self, published: int) -> bool:
        now = self.clock()
        if published != self.seen:
            self.seen, self.changed_at = published, now
        return now - self.changed_at >= self.quiet_s


class Warmup:
    """The warm-up of one process (the module's docstring says what it does). ``run`` is called
    by the engine when its stream is idle; ``done`` once it has nothing left to do."""

    def __init__(self, cfg: Config, quiet: Optional[Quiet] = None) -> None:
        self.quiet = quiet or Quiet()
        # Made at the first idle moment (``_prepare``), not at start: a start never waits for it.
        self.real_cfg = cfg
        self.cfg: Optional[Config] = None
        self.recording: Optional[replay.Recording] = None
        self.streamer: Optional[Streamer] = None  # builds the warm-up's pipelines
        self.making: Optional[Ahead[Publisher]] = None
        self.closing: Optional[threading.Thread] = None
        self.publisher: Optional[Publisher] = None  # on librdkafka's mock cluster, once running
        self.total = self.left = cfg.warmup.transactions
        self.spent_s = 0.0
        self.runs = 0
        self.messages = 0  # streamed, once done
        self.done = False

    def run(self, live: Any, published: int, stopping: Callable[[], bool] = lambda: False
            ) -> bool:
        """Replay slices, in one stream, until the warm-up is over, the live reader ``live`` has
        more to read, or ``stopping()``; True when it is over. ``published``: the real stream's
        messages so far (as many warm the JIT as well). Nothing is replayed while the real
        stream is not ``quiet``: its own changes warm the JIT meanwhile."""
        if published >= self.total:
            self._overtaken(published)
            # The stream is live here: closing the mock cluster (~0.2 s) is left to a thread.
            self.close(wait=False)
            return True
        began = time.monotonic()
        VERSIONS_LOG.addFilter(QUIET)
        try:
            if self.publisher is None and not self._made():
                return False  # the next idle moment looks again
            if not self.quiet(published):
                return False
            assert self.recording is not None
            assert self.streamer is not None
            # One replayed stream for as long as the stream stays idle: it ends after the
            # slice during which the server sent something (or the process began to stop).
            replaying = replay.replayed(live, self.recording, self.left, group=SLICE,
                                        first=(self.total - self.left),
                                        stop=lambda: live.more_arrived() or stopping())
            with replaying as reader:
                self.streamer.pipeline(self.publisher, reader, reader.start).stream(reader)
            self.left -= replaying.sent()
            self.runs += 1
            if self.left > 0:
                return False
        except Exception as exc:  # noqa: BLE001 - the warm-up must never stop the stream
            log.warning("JIT warm-up stopped after %d of %d transactions: %r. Streaming goes on "
                        "without it: the first changes may wait longer while PyPy compiles",
                        self.total - self.left, self.total, exc)
            self.close(wait=False)
            return True
        finally:
            VERSIONS_LOG.removeFilter(QUIET)
            self.spent_s += time.monotonic() - began
        self.messages = self.streamer.published
        self.close(wait=False)
        # Idle still: what the warm-up left is collected now, in one ~30 ms pause, rather than
        # by incremental steps between the first real commits (a larger heap's steps are longer).
        began = time.monotonic()
        gc.collect()
        log.info("JIT warm-up: %d transactions (%d messages, published only to librdkafka's "
                 "in-process mock cluster) streamed in %.0f ms, in %d runs; its garbage "
                 "collected in %.0f ms", self.total, self.messages, self.spent_s * 1000,
                 self.runs, (time.monotonic() - began) * 1000)
        return True

    def _overtaken(self, published: int) -> None:
        """Says that the real stream's ``published`` changes have warmed the JIT as much."""
        if self.left == self.total:
            log.info("JIT warm-up not needed: %d changes already streamed", published)
            return
        # Real changes came before it was done (a restart into a live load): how far it got.
        log.info("JIT warm-up over after %d of %d transactions (streamed in %.0f ms, in %d "
                 "runs): the stream has published %d changes of its own, which warm the JIT "
                 "as well", self.total - self.left, self.total, self.spent_s * 1000, self.runs,
                 published)

    def _made(self) -> bool:
        """Whether the warm-up's pipeline is made; the first call starts making it, in a thread
        (the stream never waits for the mock cluster's start)."""
        if self.making is None:
            self.making = Ahead(self._prepare, "streamer-warmup-prepare")
            return False
        if not self.making.done():
            return False
        self.publisher = self.making.result()  # what went wrong making it, raised here
        return True

    def _prepare(self) -> Publisher:
        with open(RECORDING, "rb") as fh:
            self.recording = replay.Recording(fh.read())
        self.cfg = warm_config(self.real_cfg)
        self.streamer = Streamer(self.cfg, metrics=Metrics(self.cfg), password="")
        # No schema topic to read, and no server to ask for table definitions.
        self.streamer.tables = self.streamer.new_catalog([], read_definitions=False)
        return Publisher.in_process(self.cfg)

    def close(self, wait: bool = True) -> None:
        """Done: the mock cluster and its producer go, in a thread of their own (also when the
        stream stops first, or while they are still being made), and what else the warm-up made
        is let go. ``wait``: until they are gone (the engine's own close, before the process
        ends, waits; the warm-up's end, while the stream goes on, doesn't)."""
        self.done = True
        publisher, self.publisher = self.publisher, None
        making, self.making = self.making, None
        self.streamer = self.recording = None
        if publisher is not None or making is not None:
            self.closing = threading.Thread(target=_close, args=(publisher, making), daemon=True,
                                            name="streamer-warmup-close")
            self.closing.start()
        if wait and self.closing is not None:
            self.closing.join()
            self.closing = None


def _close(publisher: Optional[Publisher], making: Optional[Ahead[Publisher]]) -> None:
    if publisher is None and making is not None:
        try:
            publisher = making.result()
        except Exception:  # noqa: BLE001 - said by run() when it was still to use it
            return
    if publisher is not None:
        publisher.close()
