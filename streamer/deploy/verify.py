"""Canary verdict: watch the canary's ``/status`` over a window and pass or fail it, with reasons.

The canary passes when it advanced (or sat idle and caught up), its error count did not rise,
its lag stayed under the limit and, when main is running and busy, it kept up with main's rate.
``judge`` is pure so each rule is tested on its own; ``run`` does the HTTP and the printing.
"""
from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, TextIO, Tuple

from streamer.config import Config
from streamer.errors import ConfigError
from streamer.ops import buildinfo

Sample = Tuple[float, Optional[Dict[str, Any]], str]  # (monotonic time, /status or None, error)


@dataclass
class Limits:
    max_lag_s: float = 60.0
    max_slower_pct: float = 25.0
    # Below this main rate a throughput comparison measures noise, not the canary.
    min_main_rows_per_s: float = 5.0


def base_url(cfg: Config) -> str:
    """Where the streamer of this config serves /health, /status and /metrics."""
    m = cfg.metrics
    if not m.http_port:
        raise ConfigError(f"config key 'metrics.http_port' is 0 for namespace {cfg.namespace!r}: "
                         "the status endpoint is off; set a port to deploy or verify it")
    return f"http://{m.http_host}:{m.http_port}"


def fetch(url: str, timeout: float = 3.0) -> Tuple[int, Dict[str, Any]]:
    """(HTTP status, JSON body) of a GET; a 503 from /health is an answer, not an error."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read().decode("utf-8"))
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read().decode("utf-8") or "{}")


def sample(url: str) -> Sample:
    try:
        code, body = fetch(url + "/status")
        if code == 200:
            return time.monotonic(), body, ""
        return time.monotonic(), None, f"HTTP {code}"
    except (OSError, ValueError) as exc:
        return time.monotonic(), None, str(getattr(exc, "reason", exc))


def _pos(status: Dict[str, Any]) -> Tuple[Any, Any, Any]:
    p = status["position"]
    return p.get("file"), p.get("pos"), p.get("rows")


def _rate(samples: List[Sample]) -> float:
    (t0, a, _), (t1, b, _) = samples[0], samples[-1]
    assert a is not None and b is not None
    return (b["counters"]["rows_total"] - a["counters"]["rows_total"]) / max(t1 - t0, 1e-6)


def judge(canary: List[Sample], main: Optional[List[Sample]], limits: Limits
          ) -> Tuple[bool, List[Tuple[bool, str]]]:
    """The verdict and its reasons, each (passed, text)."""
    missing = [err for _, body, err in canary if body is None]
    if missing or len(canary) < 2:
        why = missing[-1] if missing else "fewer than two samples"
        return False, [(False, f"canary /status did not answer {len(missing)} of {len(canary)} "
                               f"times ({why}): it is down or hung")]
    first, last = canary[0][1], canary[-1][1]
    assert first is not None and last is not None
    out: List[Tuple[bool, str]] = []
    ha = last.get("ha") or {}
    if ha.get("role") == "standby":
        # A standby publishes nothing, by design: its verdict is that it is up and waiting.
        e0, e1 = first["counters"]["errors_total"], last["counters"]["errors_total"]
        return e1 == e0, [(True, f"standby: publishes nothing while another instance holds the "
                                 f"lease ({ha.get('group')})"),
                          (e1 == e0, f"errors_total unchanged at {e1}" if e1 == e0
                           else f"errors_total rose from {e0} to {e1}")]
    lag_b = last.get("lag_bytes")
    if _pos(first) != _pos(last):
        out.append((True, f"advancing: {_pos(first)} -> {_pos(last)}"))
    elif lag_b == 0:
        out.append((True, f"idle and caught up at {_pos(last)}"))
    else:
        behind = "an unknown distance" if lag_b is None else f"{lag_b} bytes"
        out.append((False, f"stuck: position stayed at {_pos(last)} for "
                           f"{canary[-1][0] - canary[0][0]:.0f}s while the source is {behind} ahead"))
    e0, e1 = first["counters"]["errors_total"], last["counters"]["errors_total"]
    out.append((e1 == e0, f"errors_total unchanged at {e1}" if e1 == e0
                else f"errors_total rose from {e0} to {e1}"))
    health = last.get("health") or {}
    if health.get("status") == "error":
        # Between two retries of a long backoff the counter can stand still for the whole window;
        # the error the canary is retrying stays named.
        out.append((False, f"last error, still unrecovered: {health.get('reason')}"))
    lag_s = last.get("lag_seconds")
    if lag_s is None:
        out.append((lag_b == 0, "lag: caught up (no event to measure)" if lag_b == 0
                    else "lag unknown: no event read yet while the source is ahead"))
    else:
        out.append((lag_s <= limits.max_lag_s,
                    f"lag {lag_s:.1f}s {'within' if lag_s <= limits.max_lag_s else 'over'} "
                    f"the {limits.max_lag_s:.0f}s limit"))
    out.append(_throughput(canary, main, limits))
    return all(ok for ok, _ in out), out


def _throughput(canary: List[Sample], main: Optional[List[Sample]],
                limits: Limits) -> Tuple[bool, str]:
    if main is None:
        return True, "throughput not compared: no main to compare with"
    if any(body is None for _, body, _ in main) or len(main) < 2:
        return True, "throughput not compared: main is not running"
    c, m = _rate(canary), _rate(main)
    if m < limits.min_main_rows_per_s:
        return True, f"throughput not compared: main is idle ({m:.1f} rows/s)"
    floor = m * (1 - limits.max_slower_pct / 100.0)
    last = canary[-1][1] or {}
    lag_s = last.get("lag_seconds")
    if c < floor and (last.get("lag_bytes") == 0 or (lag_s is not None and lag_s <= 2.0)):
        # A caught-up canary publishes all there is; over a short window the two instances'
        # batches just fall on different sides of its edges.
        return True, (f"throughput {c:.0f} rows/s vs main {m:.0f} rows/s, but the canary is "
                      f"caught up (lag {lag_s}s): not slower")
    return c >= floor, (f"throughput {c:.0f} rows/s vs main {m:.0f} rows/s "
                        f"({'within' if c >= floor else 'more than'} {limits.max_slower_pct:.0f}% below)")


def runs(canary: List[Sample], main: Optional[List[Sample]]) -> str:
    """What each instance runs, as its last answer's ``build`` says (ops.buildinfo): a
    verdict is about a release, and this names it."""
    def build(samples: Optional[List[Sample]]) -> str:
        body = next((b for _, b, _ in reversed(samples or []) if b is not None), None)
        info = (body or {}).get("build")
        if not info:
            return "unknown (no answer, or a streamer from before /status said it)"
        return buildinfo.text(info)

    said = f"  canary runs {build(canary)}"
    return said if main is None else f"{said}; main runs {build(main)}"


def observe(url: str, main_url: Optional[str], window: float, interval: float
            ) -> Tuple[List[Sample], Optional[List[Sample]]]:
    canary: List[Sample] = []
    main: Optional[List[Sample]] = [] if main_url else None
    end = time.monotonic() + window
    while True:
        canary.append(sample(url))
        if main is not None and main_url:
            main.append(sample(main_url))
        if time.monotonic() >= end:
            return canary, main
        time.sleep(max(0.0, min(interval, end - time.monotonic())))


def run(url: str, main_url: Optional[str], window: float, limits: Limits,
        interval: float = 1.0, out: TextIO = sys.stdout) -> int:
    """Print the reasons and the verdict; 0 on pass, 1 on fail."""
    print(f"verifying {url} over {window:.0f}s" + (f" against main {main_url}" if main_url else ""),
          file=out, flush=True)
    canary, main = observe(url, main_url, window, interval)
    print(runs(canary, main), file=out)
    passed, reasons = judge(canary, main, limits)
    for ok, text in reasons:
        print(f"{'✓' if ok else '✗'} {text}", file=out)
    print(f"verdict: {'PASS' if passed else 'FAIL'}", file=out, flush=True)
    return 0 if passed else 1
