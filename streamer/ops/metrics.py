"""Counters, gauges and the latency distribution that the pipeline feeds, read by the sinks.

The pipeline calls in at most once per rows event (``on_rows``) and once per batch commit
(``on_commit``); nothing here runs per message except the byte count in ``counting``. Latency is
processing time (the batch's Kafka commit returned) minus event time (the MySQL commit), kept in a
fixed array of log-spaced buckets: constant memory, constant cost per sample, quantiles within 5%.
The background reporter calls ``roll`` once per interval to turn counters into rates.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from streamer.config import Config
from streamer.errors import BatchAborted, ProducerBroken
from streamer.ops.buildinfo import build_info
from streamer.ops.latency import Latency, LatencyWindow, split_text
from streamer.source.rowplan import INVALID

log = logging.getLogger(__name__)

Produce = Callable[[str, Optional[bytes], Optional[bytes]], None]


COUNTERS = ("messages", "rows", "bytes", "batches", "errors", "reconnects", "invalid_values",
            "commit_failures")


class Metrics:
    """The live numbers of one streamer. Written by the pipeline thread, read by the others."""

    def __init__(self, cfg: Config, heartbeat: bool = False):
        m = cfg.metrics
        self.dimensions = {"environment": str(cfg.environment),
                           "source": str(cfg.source.name), "namespace": str(cfg.namespace)}
        self.build = build_info()  # what runs: version, release, runtime
        self.heartbeat = heartbeat
        # Without the heartbeat, latency comes from the binlog's whole-second event times: a
        # half-second artefact, labelled so wherever it is shown.
        self.resolution = "1us" if heartbeat else "1s"
        self.heartbeat_db: Optional[str] = cfg.heartbeat.database if heartbeat else None
        self.idle_window_s = max(1.0, 5 * cfg.mysql.heartbeat_s)
        self.stall_after_s = m.stall_after_s
        self.messages = self.rows = self.bytes = self.batches = self.errors = self.reconnects = 0
        # Batches whose Kafka transaction failed to commit (aborted and read again, or a producer
        # replaced): exactly-once held, but the stream paid for it.
        self.commit_failures = 0
        self.prometheus_registry: Optional[Any] = None  # ops.prom's, made at the first scrape
        self.invalid_base = INVALID.total  # (a process runs one streamer; tests run several)
        self.queue_depth = 0
        self.commit_seconds = 0.0
        self.batch_size = 0
        self.lag_bytes: Optional[int] = None
        # The retention guard's state (ops.retention), set by the reporter's poll.
        self.retention: Optional[Dict[str, Any]] = None
        # The replica guard's state (ops.replica), set by the reporter's poll.
        self.replication: Optional[Dict[str, Any]] = None
        self.position: Dict[str, Any] = {"file": None, "pos": None, "gtid_set": None, "rows": 0,
                                         "needs_file": None}
        self.last_event_ts: Optional[float] = None
        self.started = time.time()
        self.started_mono = time.monotonic()
        self.last_commit_mono: Optional[float] = None
        self.last_idle_mono: Optional[float] = None
        self.last_error: Optional[Tuple[float, str]] = None
        self.hooks: List[Callable[[], None]] = []
        # The snapshots' progress (engine.snapshot.Snapshots.status), None when there are none.
        self.snapshot_status: Callable[[], Optional[Dict[str, Any]]] = lambda: None
        # The hot-standby lease (kafka.lease) when ha.enabled: role, takeovers.
        self.ha: Optional[Any] = None
        # The servers of mysql.hosts (source.failover.Servers) when it lists more than one.
        self.servers: Optional[Any] = None
        self.rates = {"messages_per_s": 0.0, "rows_per_s": 0.0, "bytes_per_s": 0.0}
        self.latency = LatencyWindow(m.latency_threshold_ms).summary()
        # Each stage's p50, p99 and max over the last interval (ops.latency).
        self.latency_split: Dict[str, Dict[str, Any]] = {}
        self.latencies = Latency(m.latency_threshold_ms)
        self._lock = threading.Lock()
        # Binlog event second -> [rows, when the first was read]; heartbeats: (µs ts, read at).
        self._event_ts: Dict[int, List[Any]] = {}
        self._beats: List[Tuple[float, float]] = []
        self._prev = (time.monotonic(), 0, 0, 0)

    # -- called by the pipeline -----------------------------------------------------------------

    @property
    def invalid_values(self) -> int:
        """Invalid dates published as null (source.rowplan.INVALID says which)."""
        return INVALID.total - self.invalid_base
    def counting(self, produce: Produce) -> Produce:
        """``produce`` that also counts the bytes handed to Kafka (key plus value)."""
        def produce_counted(topic: str, value: Optional[bytes], key: Optional[bytes],
                            headers: Any = None) -> None:
            produce(topic, value, key, headers)
            n = 0 if value is None else len(value)  # None: a tombstone
            self.bytes += n if key is None else n + len(key)
        return produce_counted

    def on_rows(self, ts: int, rows: int) -> None:
        """One published rows event: its MySQL commit time (seconds) and row count. The time it
        was read is taken once per second of binlog time, not per event."""
        self.rows += rows
        seen = self._event_ts.get(ts)
        if seen is None:
            self._event_ts[ts] = [rows, time.time()]
        else:
            seen[0] += rows

    def on_heartbeat(self, ts_us: int) -> None:
        """A heartbeat row came back through the binlog, written at ``ts_us`` (µs since epoch)."""
        self._beats.append((ts_us / 1e6, time.time()))

    def checkpoint_change_ts(self) -> Optional[float]:
        """The binlog time of the newest committed change, or before the first commit the
        oldest change read since: no later than the close of the checkpoint's binlog file (the
        retention guard's clock)."""
        if self.last_event_ts is not None:
            return self.last_event_ts
        try:
            return float(min(list(self._event_ts))) if self._event_ts else None
        except (RuntimeError, ValueError):  # changed by the pipeline thread meanwhile
            return None

    def resumed_at(self, position: Any) -> None:
        """The stream starts from ``position``, a committed checkpoint."""
        self.position = {"file": position.file, "pos": position.pos,
                         "gtid_set": position.gtid_set, "rows": position.rows,
                         "needs_file": needed_file(position)}

    def on_commit(self, position: Any, messages: int, commit_s: float, queue_depth: int) -> None:
        now = time.time()
        self.messages += messages
        self.batches += 1
        self.batch_size = messages
        self.commit_seconds = commit_s
        self.queue_depth = queue_depth
        self.resumed_at(position)
        newest = self.last_event_ts
        begun = now - commit_s
        with self._lock:
            latencies = self.latencies
            if self.heartbeat:
                # Binlog timestamps have one-second resolution; the heartbeat's are µs.
                for t, read in self._beats:
                    latencies.add(t, read, begun, now)
            else:
                for ts, (n, read) in self._event_ts.items():
                    latencies.add(ts, read, begun, now, n)
        for t, _ in self._beats:
            newest = t if newest is None or t > newest else newest
        if self._event_ts and not self.heartbeat:
            top = float(max(self._event_ts))
            newest = top if newest is None or top > newest else newest
        self.last_event_ts = newest
        self._event_ts.clear()
        self._beats.clear()
        self.last_commit_mono = time.monotonic()
        self.last_error = None
        # Lazy args: nothing is formatted unless DEBUG is on (SIGHUP toggles it).
        log.debug("committed %d messages up to %s:%s in %.1f ms, producer queue %d", messages,
                  position.file, position.pos, commit_s * 1000.0, queue_depth)

    def on_idle(self) -> None:
        """The server sent a binlog heartbeat: the reader is waiting on the socket, caught up."""
        self.last_idle_mono = time.monotonic()
        self.last_error = None  # connected again and nothing left to read: recovered

    def on_error(self, exc: BaseException, reconnect: bool) -> None:
        self.errors += 1
        if isinstance(exc, (BatchAborted, ProducerBroken)):
            self.commit_failures += 1
        if reconnect:
            self.reconnects += 1
        self.last_error = (time.monotonic(), str(exc))
        self._event_ts.clear()
        self._beats.clear()

    def tick(self) -> None:
        """Run the hooks (profiler, log level): what signal handlers asked for is done here, in
        the main loop, which calls this after each commit and at each idle heartbeat."""
        for hook in self.hooks:
            hook()

    # -- read by the reporter, the HTTP endpoint and the profiler -----------------------------------
    def last_commit_age(self) -> Optional[float]:
        """Seconds since the last batch committed (None before the first)."""
        last = self.last_commit_mono
        return None if last is None else round(time.monotonic() - last, 3)

    def caught_up(self) -> bool:
        last = self.last_idle_mono
        return last is not None and time.monotonic() - last < self.idle_window_s

    def lag_seconds(self) -> Optional[float]:
        if not self.heartbeat and self.caught_up():
            return 0.0
        if self.last_event_ts is None:
            return None
        return max(0.0, time.time() - self.last_event_ts)

    def roll(self) -> None:
        """Close the interval: rates since the previous roll, and the latency window's summary."""
        now = time.monotonic()
        t0, m0, r0, b0 = self._prev
        dt = max(now - t0, 1e-6)
        m, r, b = self.messages, self.rows, self.bytes
        self.rates = {"messages_per_s": round((m - m0) / dt, 3), "rows_per_s": round((r - r0) / dt, 3),
                      "bytes_per_s": round((b - b0) / dt, 3)}
        self._prev = (now, m, r, b)
        with self._lock:
            summary, split = self.latencies.roll()
        # An interval without a change is idle: it has no latency (None values, which no sink
        # sends), never the last busy interval's distribution again.
        self.latency = summary
        self.latency_split = split

    def health(self) -> Tuple[str, str]:
        now = time.monotonic()
        if self.ha is not None and self.ha.role == "standby" and not self.ha.lost:
            return "ok", "standby: another instance holds the lease; this one takes over"
        if self.last_error is not None:
            return "error", self.last_error[1]
        if self.replication is not None and self.replication["status"] == "unlogged":
            return "error", self.replication["reason"]
        progress = [t for t in (self.last_commit_mono, self.last_idle_mono) if t is not None]
        if not progress:
            return "starting", "no batch committed and the binlog reader has not caught up yet"
        quiet = now - max(progress)
        if quiet > self.stall_after_s:
            return "stalled", (f"no batch committed and no idle binlog heartbeat for {quiet:.1f} s "
                               f"(metrics.stall_after_s is {self.stall_after_s:g})")
        guard = self.retention
        if guard is not None and guard["status"] == "warning":
            return "warning", guard["reason"]
        return "ok", "advancing" if not self.caught_up() else "caught up"

    def status(self) -> Dict[str, Any]:
        lag = self.lag_seconds()
        latency = {k: self.latency[k] for k in ("p50", "p99", "max", "over_threshold_share",
                                                "threshold_ms", "samples")}
        latency["resolution"] = self.resolution
        out: Dict[str, Any] = dict(self.dimensions)
        out.update({
            "position": dict(self.position),
            "lag_seconds": None if lag is None else round(lag, 3),
            "lag_bytes": self.lag_bytes,
            "throughput": dict(self.rates),
            "latency_ms": latency,
            # Where it went: MySQL commit to read, read to commit begun, the commit (ops.latency).
            "latency_split_ms": dict(self.latency_split),
            "counters": {f"{name}_total": getattr(self, name) for name in COUNTERS},
            "queue_depth": self.queue_depth,
            "commit_seconds": round(self.commit_seconds, 6),
            "batch_size": self.batch_size,
            "heartbeat": self.heartbeat,
            "uptime_s": round(time.monotonic() - self.started_mono, 3),
            "build": dict(self.build),
            "snapshot": self.snapshot_status(),
            "retention": self.retention,
            "replication": self.replication,
            "ha": None if self.ha is None else {
                "role": self.ha.role, "takeovers": self.ha.takeovers,
                "since": round(self.ha.since, 3), "group": self.ha.group},
            "failover": None if self.servers is None else {
                "server": self.servers.current, "switches": self.servers.switches,
                "behind": self.servers.found_behind()},
        })
        state, reason = self.health()
        out["health"] = {"status": state, "reason": reason}
        return out


# The snapshot numbers of /status, as metric series: (key, type, help).
SNAPSHOT_SERIES = [
    ("rows", "counter", "rows published by snapshots"),
    ("chunks", "counter", "snapshot chunks published by this run"),
    ("tables_left", "gauge", "tables whose snapshot is queued or under way"),
    ("tables_done", "gauge", "tables whose snapshot ended"),
    ("rows_per_s", "gauge", "snapshot rows per second in this run"),
    ("eta_s", "gauge", "seconds until the queued snapshots end, at the current rate"),
]


def snapshot_line(snap: Dict[str, Any]) -> str:
    """The snapshots' progress in one line (``streamer status`` and the log)."""
    eta = snap.get("eta_s")
    if not snap["tables_left"]:
        return f"snapshot   done: {snap['tables_done']} tables, {snap['rows']} rows"
    return (f"snapshot   {snap['table']} {snap['table_rows']}/~{snap['table_estimate']} rows, "
            f"{snap['tables_left']} tables left, {snap['rows_per_s']:.0f} rows/s, "
            f"ETA {'-' if eta is None else format(eta, '.0f') + ' s'}")


def latency_text(latency: Dict[str, Any], split: Optional[Dict[str, Any]] = None) -> str:
    """The latency of one interval for the log and ``streamer status``: "idle" when no change
    was measured, and the resolution when it is the binlog's whole seconds; with ``split``,
    each stage's p50 (ops.latency)."""
    if not latency.get("samples"):
        return "latency idle (no change in the interval)"
    coarse = " (binlog times, 1 s resolution)" if latency.get("resolution") == "1s" else ""
    parts = split_text(split or {})
    return (f"latency{coarse} p50 {latency['p50']} ms p99 {latency['p99']} ms "
            f"max {latency['max']} ms" + (f" (p50 {parts} ms)" if parts else ""))


def _file_order(name: str) -> Any:
    base, _, number = name.rpartition(".")
    return (base, int(number)) if number.isdigit() else (name, 0)


def needed_file(position: Any) -> Optional[str]:
    """The oldest binlog file a restart from ``position`` reads: its own, or an older one holding
    a prepared XA transaction's rows, read again at its XA COMMIT (Position.xa)."""
    files = [position.file] if position.file else []
    files += [entry[0] for entry in (position.xa or {}).values() if entry and entry[0]]
    return min(files, key=_file_order) if files else None
