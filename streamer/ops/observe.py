"""Everything that watches a running streamer, started and stopped as one context manager.

``Observability(cfg)`` owns the ``Metrics`` object the pipeline feeds, the reporter thread
(backlog, SignalFx, log summary), the HTTP endpoint, the heartbeat writer, the profiler and the
SIGHUP log-level toggle. Construction validates everything (a refused profiler, a missing token)
before any thread or connection starts. Leaving it stops them in reverse order, so a running
profile is always closed cleanly, whatever ended the run.
"""
from __future__ import annotations

import contextlib
import logging
import signal
from typing import Any

from streamer.config import Config
from streamer.errors import SourceError
from streamer.ops.heartbeat import TABLE as HEARTBEAT_TABLE
from streamer.ops.heartbeat import HeartbeatWriter
from streamer.ops.metrics import Metrics
from streamer.ops.profiler import Profiler
from streamer.ops.reporter import Reporter

log = logging.getLogger(__name__)


class DebugToggle:
    """SIGHUP switches the root logger between DEBUG and the configured level, at run time."""

    def __init__(self, metrics: Metrics):
        self.metrics = metrics
        self.requested = False
        self.saved_level = logging.getLogger().level
        self._previous: Any = None

    def __enter__(self) -> "DebugToggle":
        self._previous = signal.signal(signal.SIGHUP, self._on_signal)
        self.metrics.hooks.append(self.poll)
        return self

    def __exit__(self, *exc: Any) -> None:
        signal.signal(signal.SIGHUP, self._previous or signal.SIG_DFL)
        if self.poll in self.metrics.hooks:
            self.metrics.hooks.remove(self.poll)

    def _on_signal(self, *_: Any) -> None:
        # Only a flag: setLevel takes the logging lock, which the interrupted code may hold.
        self.requested = True

    def poll(self) -> None:
        if not self.requested:
            return
        self.requested = False
        root = logging.getLogger()
        if root.level == logging.DEBUG:
            root.setLevel(self.saved_level if self.saved_level != logging.DEBUG else logging.INFO)
            log.warning("SIGHUP: debug logging off (level %s)", logging.getLevelName(root.level))
        else:
            self.saved_level = root.level
            root.setLevel(logging.DEBUG)
            log.warning("SIGHUP: debug logging on")


class Observability:
    """Metrics, sinks, heartbeat and profiler of one ``streamer run``."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        wanted = cfg.heartbeat.enabled
        self.heartbeat_auto = wanted == "auto"
        heartbeat = wanted is True or self.heartbeat_auto
        self.metrics = Metrics(cfg, heartbeat=heartbeat)
        self.profiler = Profiler(cfg, self.metrics)
        self.reporter = Reporter(cfg, self.metrics)
        self.heartbeat = HeartbeatWriter(cfg, self._active) if heartbeat else None
        self.server = None
        if cfg.metrics.http_port:
            # Imported only when the endpoint is on (it is off by default): http.server and what
            # it pulls in take ~25 ms of a PyPy start.
            from streamer.ops.httpstatus import StatusServer

            self.server = StatusServer(cfg, self.metrics)
        self._stack = contextlib.ExitStack()

    def _active(self) -> bool:
        """Whether this instance streams: always, but for a hot standby (metrics.ha, the
        lease) waiting for its turn."""
        ha = self.metrics.ha
        return ha is None or ha.role == "active"

    def __enter__(self) -> "Observability":
        with contextlib.ExitStack() as stack:
            if self.server is not None:
                stack.enter_context(self.server)
            stack.enter_context(self.reporter)
            self._start_heartbeat(stack)
            stack.enter_context(DebugToggle(self.metrics))
            stack.enter_context(self.profiler)
            self._stack = stack.pop_all()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stack.close()

    def _start_heartbeat(self, stack: contextlib.ExitStack) -> None:
        """The heartbeat writer; with ``auto``, off (and said so) when its table can't be
        written, rather than a start that fails."""
        db = self.cfg.heartbeat.database
        if self.heartbeat is not None:
            try:
                stack.enter_context(self.heartbeat)
                return
            except SourceError as exc:
                if not self.heartbeat_auto:
                    raise
                log.warning("heartbeat off: %s", exc)
                self.heartbeat = None
                self.metrics.heartbeat = False
                self.metrics.heartbeat_db = None
                self.metrics.resolution = "1s"
        log.info("latency is measured from the binlog's event times, whole seconds: the log, "
                 "/status and the metrics label it '1 s resolution'. For µs latency, let the "
                 "heartbeat write %s.%s (heartbeat.enabled: auto or true; GRANT INSERT, UPDATE "
                 "ON `%s`.* TO the streamer's user)", db, HEARTBEAT_TABLE, db)
