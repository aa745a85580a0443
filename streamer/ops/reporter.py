"""The background reporter: polls the binlog backlog and sends the numbers to the sinks.

One thread, its own MySQL connection: SHOW BINARY LOGS is polled here, never in the hot loop.
Every ``metrics.interval_s`` it rolls the metrics into rates and a latency distribution, sends
them to SignalFx (the library posts from its own thread, so a slow ingest never blocks us) and
logs a one-line summary.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

import pymysql

from streamer.config import Config
from streamer import config as config_mod
from streamer.ops import replica, retention
from streamer.ops.metrics import COUNTERS, SNAPSHOT_SERIES, Metrics, latency_text, snapshot_line
from streamer.source.server import Password, connect, connection_settings, said

log = logging.getLogger(__name__)


def backlog_bytes(logs: List[Tuple[str, int]], file: Optional[str], pos: Optional[int]) -> Optional[int]:
    """Bytes of binlog after (file, pos), given SHOW BINARY LOGS rows; None if the file is gone."""
    if file is None or pos is None:
        return None
    names = [name for name, _ in logs]
    if file not in names:
        return None
    i = names.index(file)
    return max(0, int(logs[i][1]) - pos) + sum(int(size) for _, size in logs[i + 1:])


def signalfx_token(cfg: Config, environ: Optional[Dict[str, str]] = None) -> str:
    environ = os.environ if environ is None else environ
    s = cfg.signalfx
    if s.token_file:
        return config_mod.read_secret_file("signalfx.token_file", s.token_file)
    if s.token_env and environ.get(s.token_env):
        return environ[s.token_env]
    raise config_mod.ConfigError(
        f"signalfx.enabled is true but there is no token: set the environment variable "
        f"{s.token_env} (signalfx.token_env) or signalfx.token_file")


class SignalFxSink:
    """The SignalFx ingest client, with the token as its file has it now: a token rotated in
    signalfx.token_file (a secrets agent rewriting it) is sent from the next report on, where
    one read at the start was sent until it expired, and every datapoint after was refused."""

    def __init__(self, cfg: Config) -> None:
        import signalfx

        self._cfg = cfg
        self._client = signalfx.SignalFx(ingest_endpoint=cfg.signalfx.ingest_endpoint)
        self.token = signalfx_token(cfg)
        self._ingest = self._client.ingest(self.token)

    def send(self, points: Dict[str, List[Dict[str, Any]]]) -> None:
        if self._cfg.signalfx.token_file:
            token = config_mod.read_again(lambda: signalfx_token(self._cfg), self.token,
                                          "sending SignalFx the token")
            if token != self.token:
                # The library's client holds its token: a new one, the old one flushed.
                old, self._ingest, self.token = self._ingest, self._client.ingest(token), token
                old.stop()
        self._ingest.send(**points)

    def stop(self) -> None:
        self._ingest.stop()  # flushes what is queued


def datapoints(metrics: Metrics) -> Dict[str, List[Dict[str, Any]]]:
    """The SignalFx datapoints of one interval: cumulative counters and gauges."""
    dims = metrics.dimensions
    st = metrics.status()
    counters = [{"metric": f"streamer.{name}", "value": getattr(metrics, name), "dimensions": dims}
                for name in COUNTERS]
    gauges: List[Dict[str, Any]] = []

    def gauge(name: str, value: Any) -> None:
        if value is not None:
            gauges.append({"metric": name, "value": value, "dimensions": dims})

    for key, value in st["throughput"].items():
        gauge(f"streamer.throughput.{key}", value)
    lat = st["latency_ms"]
    # An idle interval sends no latency; binlog-time latency carries its 1 s resolution.
    lat_dims = dict(dims, latency_resolution=lat["resolution"])
    for key in ("p50", "p99", "max"):
        if lat[key] is not None:
            gauges.append({"metric": f"streamer.latency_ms.{key}", "value": lat[key],
                           "dimensions": lat_dims})
    gauge("streamer.latency.over_threshold_ratio", lat["over_threshold_share"])
    gauge("streamer.lag_seconds", st["lag_seconds"])
    gauge("streamer.lag_bytes", st["lag_bytes"])
    gauge("streamer.queue_depth", st["queue_depth"])
    gauge("streamer.commit_seconds", st["commit_seconds"])
    gauge("streamer.batch_size", st["batch_size"])
    if st["replication"] is not None:
        gauge("streamer.unlogged_replication", int(st["replication"]["status"] == "unlogged"))
    guard = st["retention"]
    if guard is not None:
        gauge("streamer.retention_warning", int(guard["status"] == "warning"))
        gauge("streamer.binlog_expires_in_s", guard["expires_in_s"])
    snap = st["snapshot"]
    if snap is not None:
        for key, kind, _ in SNAPSHOT_SERIES:
            if snap[key] is not None:
                point = {"metric": f"streamer.snapshot.{key}", "value": snap[key], "dimensions": dims}
                (counters if kind == "counter" else gauges).append(point)
    return {"cumulative_counters": counters, "gauges": gauges}


def _known(value: Any) -> str:
    return "-" if value is None else str(value)


def summary_line(metrics: Metrics) -> str:
    st = metrics.status()
    t, lat, pos = st["throughput"], st["latency_ms"], st["position"]
    return (f"{t['messages_per_s']:.0f} msg/s {t['rows_per_s']:.0f} rows/s "
            f"{t['bytes_per_s'] / 1024:.0f} KiB/s; {latency_text(lat, st['latency_split_ms'])}; "
            f"lag {_known(st['lag_seconds'])} s "
            f"{_known(st['lag_bytes'])} B; "
            f"position {pos['file']}:{pos['pos']}; {st['counters']['messages_total']} messages, "
            f"{st['counters']['errors_total']} errors"
            + (f"; {snapshot_line(st['snapshot']).split(None, 1)[1]}" if st["snapshot"] else ""))


class Reporter:
    """Background thread: backlog polling plus the SignalFx and log sinks. A context manager."""

    def __init__(self, cfg: Config, metrics: Metrics):
        self.cfg = cfg
        self.metrics = metrics
        self.interval = cfg.metrics.interval_s
        self.poll_s = min(1.0, self.interval)
        self.log_summary = cfg.metrics.log_summary
        self.password = Password(cfg)  # read again for each connection
        self.sfx = SignalFxSink(cfg) if cfg.signalfx.enabled else None
        self._conn: Any = None
        self._expiry: Optional[Tuple[float, float]] = None  # (when read, seconds)
        self.replica = replica.ReplicaGuard()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="streamer-reporter", daemon=True)

    def __enter__(self) -> "Reporter":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
        if self.sfx is not None:
            self.report()
            self.sfx.stop()
        if self._conn is not None:
            self._conn.close()

    def poll_backlog(self) -> None:
        try:
            if self._conn is None:
                # On the server in use when it connects (source.failover).
                self._conn = connect(connection_settings(self.cfg, self.password))
                self.replica.forget()
            with self._conn.cursor() as cur:
                cur.execute("SHOW BINARY LOGS")
                logs = [(row[0], int(row[1])) for row in cur.fetchall()]
        except pymysql.err.MySQLError as exc:
            log.warning("backlog poll failed (will retry): %s", said(exc))
            self._conn = None
            return
        pos = self.metrics.position
        self.metrics.lag_bytes = backlog_bytes(logs, pos["file"], pos["pos"])
        self.guard_retention([name for name, _ in logs])
        self.guard_replica()

    def guard_retention(self, files: List[str]) -> None:
        """The retention guard's state (ops.retention), logged when it changes."""
        now = time.monotonic()
        if self._expiry is None or now - self._expiry[0] > 60:
            try:
                with self._conn.cursor() as cur:
                    cur.execute("SHOW GLOBAL VARIABLES WHERE Variable_name IN "
                                "('binlog_expire_logs_seconds', 'expire_logs_days')")
                    self._expiry = (now, retention.expiry_seconds(dict(cur.fetchall())))
            except pymysql.err.MySQLError as exc:
                log.warning("binlog expiry read failed (will retry): %s", said(exc))
                return
        last = self.metrics.checkpoint_change_ts()
        r = self.cfg.retention
        position = self.metrics.position
        needs = position.get("needs_file") or position["file"]
        state = retention.judge(files, needs, self._expiry[1],
                                None if last is None else time.time() - last,
                                r.warn_files, r.warn_margin_s,
                                retention.XA_FILE if needs != position["file"] else
                                "the checkpoint's binlog file")
        before = self.metrics.retention
        self.metrics.retention = state
        if state["status"] != (before or {}).get("status", "ok"):
            if state["status"] == "warning":
                log.warning("%s", state["reason"])
            else:
                log.info("the checkpoint's binlog file is no longer at risk of being purged")

    def guard_replica(self) -> None:
        """The replica guard's state (ops.replica), logged when it changes."""
        try:
            state = self.replica.poll(self._conn)
        except pymysql.err.MySQLError as exc:
            log.warning("replication state read failed (will retry): %s", said(exc))
            return
        if state is None:
            return
        before = self.metrics.replication
        self.metrics.replication = state
        if state["status"] != (before or {}).get("status", "ok"):
            if state["status"] == "unlogged":
                log.error("%s", state["reason"])
            else:
                log.info("the server no longer replicates another unlogged")

    def report(self) -> None:
        self.metrics.roll()
        if self.sfx is not None:
            self.sfx.send(datapoints(self.metrics))
        if self.log_summary:
            log.info("%s", summary_line(self.metrics))

    def _run(self) -> None:
        next_report = time.monotonic() + self.interval
        while not self._stop.wait(self.poll_s):
            self.poll_backlog()
            if time.monotonic() >= next_report:
                next_report += self.interval
                try:
                    self.report()
                except Exception:  # noqa: BLE001 - a sink failure must not kill the reporter
                    log.exception("metrics report failed")
