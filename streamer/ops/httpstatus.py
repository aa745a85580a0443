"""The local HTTP endpoint: ``/health``, ``/status`` (JSON) and ``/metrics`` (Prometheus text).

Served from a background thread on metrics.http_host:http_port (port 0 turns it off). Handlers
only read the ``Metrics`` object; they never touch the pipeline.
"""
from __future__ import annotations

import json
import logging
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Optional

from streamer.config import Config
from streamer.errors import EndpointUnavailable
from streamer.ops.latency import split_text
from streamer.ops.metrics import Metrics, snapshot_line

log = logging.getLogger(__name__)

def prometheus(metrics: Metrics) -> str:
    """The Prometheus text exposition of the current numbers (ops.prom), with the process's own
    series. prometheus_client is imported only when asked: the endpoint is off by default."""
    from streamer.ops import prom

    registry = getattr(metrics, "prometheus_registry", None)
    if registry is None:
        registry = metrics.prometheus_registry = prom.registry(metrics)
    return prom.exposition(registry).decode("utf-8")


class _Handler(BaseHTTPRequestHandler):
    metrics: Metrics

    def do_GET(self) -> None:  # noqa: N802 - the http.server interface
        path = self.path.split("?", 1)[0]
        try:
            self._page(path)
        except _HUNG_UP:
            raise  # the server's handle_error notes it
        except Exception as exc:  # a page that fails must not take the endpoint's thread with it
            log.warning("status endpoint: %s failed (%s: %s)", path, type(exc).__name__, exc,
                        exc_info=log.isEnabledFor(logging.DEBUG))
            self._send(500, "application/json",
                       json.dumps({"error": f"{path} failed: {type(exc).__name__}: {exc}"}))

    def _page(self, path: str) -> None:
        if path == "/health":
            status, reason = self.metrics.health()
            body: Dict[str, Any] = {"status": status, "reason": reason}
            if status in ("ok", "warning"):
                body["lag_seconds"] = self.metrics.status()["lag_seconds"]
            # A warning still streams: a restart would not help, so a supervisor must not see
            # a failure.
            self._send(200 if status in ("ok", "warning") else 503, "application/json",
                       json.dumps(body))
        elif path == "/status":
            self._send(200, "application/json", json.dumps(self.metrics.status()))
        elif path == "/metrics":
            from streamer.ops.prom import CONTENT_TYPE

            self._send(200, CONTENT_TYPE, prometheus(self.metrics))
        else:
            self._send(404, "application/json",
                       json.dumps({"error": f"no such path {path}; try /health, /status, /metrics"}))

    def _send(self, code: int, ctype: str, body: str) -> None:
        data = body.encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, fmt: str, *args: Any) -> None:
        log.debug("http %s", fmt % args)


_HUNG_UP = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # socketserver's own prints a traceback on stderr, outside the (maybe JSON) log. A client
        # that hangs up before its answer (a scraper's timeout) is its own business.
        exc = sys.exc_info()[1]
        if isinstance(exc, _HUNG_UP):
            log.debug("status endpoint: %s hung up before its answer", client_address)
        else:
            log.warning("status endpoint: a request from %s failed (%s: %s)", client_address,
                        type(exc).__name__, exc, exc_info=log.isEnabledFor(logging.DEBUG))


class StatusServer:
    """The endpoint's server thread, as a context manager. Observability makes one only when
    metrics.http_port is set (0 turns the endpoint off, and this module is then not imported)."""

    def __init__(self, cfg: Config, metrics: Metrics):
        self.host = cfg.metrics.http_host
        self.port = cfg.metrics.http_port
        self.metrics = metrics
        self._server: Optional[_Server] = None
        self._thread: Optional[threading.Thread] = None

    def __enter__(self) -> "StatusServer":
        handler = type("Handler", (_Handler,), {"metrics": self.metrics})
        try:
            self._server = _Server((self.host, self.port), handler)
        except OSError as exc:
            from streamer.errors import ConfigError

            raise ConfigError(f"config key 'metrics.http_port': cannot listen on "
                              f"{self.host}:{self.port} ({exc.strerror}); pick a free port, "
                              f"or 0 to turn the endpoint off") from None
        self._thread = threading.Thread(target=self._server.serve_forever, name="streamer-http",
                                        daemon=True)
        self._thread.start()
        log.info("status endpoint on http://%s:%d (/health /status /metrics)", self.host, self.port)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def fetch_status(cfg: Config, timeout: float = 5.0) -> Dict[str, Any]:
    """The running instance's /status, read over its local endpoint."""
    import urllib.error
    import urllib.request

    from streamer.errors import ConfigError

    host, port = cfg.metrics.http_host, cfg.metrics.http_port
    if not port:
        raise ConfigError("config key 'metrics.http_port' is 0, so the streamer serves no status "
                          "endpoint: set it to a free port and restart the streamer")
    url = f"http://{host}:{port}/status"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            body = resp.read()
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise EndpointUnavailable(f"no streamer answered at {url} ({reason}); is `streamer run` "
                                  f"running with this config?") from None
    try:
        found = json.loads(body.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError too
        found = None
    if not isinstance(found, dict) or "position" not in found:
        raise EndpointUnavailable(f"something answered at {url}, but not a streamer's /status "
                                  f"({body[:60]!r}): another service has metrics.http_port "
                                  f"{port}?")
    return found


def _build_line(build: Optional[Dict[str, str]]) -> str:
    from streamer.ops import buildinfo

    # None: a streamer from before /status said it.
    return f"build      {buildinfo.text(build) if build else '(not said)'}"


def status_text(st: Dict[str, Any]) -> str:
    """/status for humans."""
    pos, t, lat, c = st["position"], st["throughput"], st["latency_ms"], st["counters"]

    def ms(v: Any) -> str:
        return "-" if v is None else f"{v:.1f} ms"

    share = lat["over_threshold_share"]
    lines = [
        f"source {st['source']}  namespace {st['namespace']}  environment {st['environment']}  "
        f"up {st['uptime_s']:.0f} s",
        _build_line(st.get("build")),
        f"position   {pos['file']}:{pos['pos']}" + (f" +{pos['rows']} rows" if pos["rows"] else "")
        + (f"  gtid {pos['gtid_set']}" if pos["gtid_set"] else ""),
        f"lag        {'-' if st['lag_seconds'] is None else format(st['lag_seconds'], '.3f') + ' s'}"
        f"  {'-' if st['lag_bytes'] is None else str(st['lag_bytes']) + ' bytes'} of binlog behind",
        f"throughput {t['messages_per_s']:.1f} msg/s  {t['rows_per_s']:.1f} rows/s  "
        f"{t['bytes_per_s'] / 1024:.1f} KiB/s",
        ("latency    idle: no change in the last interval" if not lat.get("samples") else
         f"latency    p50 {ms(lat['p50'])}  p99 {ms(lat['p99'])}  max {ms(lat['max'])}  "
         f"over {lat['threshold_ms']:g} ms: "
         f"{'-' if share is None else format(100 * share, '.1f') + '%'}"
         + ("  (binlog times, 1 s resolution)" if lat.get("resolution") == "1s" else "")
         + (f"\n           p50 by stage: {split_text(st['latency_split_ms'])} ms"
            if split_text(st.get("latency_split_ms") or {}) else "")),
        f"totals     {c['messages_total']} messages  {c['rows_total']} rows  {c['bytes_total']} bytes  "
        f"{c['batches_total']} batches  {c['errors_total']} errors  {c['reconnects_total']} reconnects",
    ]
    if st.get("ha"):
        ha = st["ha"]
        lines.insert(1, f"role       {ha['role']} (hot standby group {ha['group']}; took the lease "
                        f"{ha['takeovers']} times)")
    if st.get("snapshot"):
        lines.append(snapshot_line(st["snapshot"]))
    if c.get("invalid_values_total"):
        lines.append(f"invalid    {c['invalid_values_total']} invalid dates published as null "
                     f"or texts with a '?' for bytes no character stands for (each in the log)")
    guard = st.get("retention") or {}
    if guard.get("status") == "warning":
        lines.append(f"WARNING    {guard['reason']}")
    return "\n".join(lines)
