"""Latency: where a change's time goes, over an interval and since the start.

A change's latency is its Kafka commit's end minus its MySQL commit (the heartbeat's µs
timestamp where it runs, the binlog's whole-second event time otherwise). It splits in three
(``STAGES``), the first question every slow-change report asks:

- **source**: MySQL commit to the binlog event read by the streamer (the server's and the
  network's share, and the streamer's backlog);
- **streamer**: read to the batch's commit beginning (decoding, encoding, the linger);
- **kafka**: the commit itself, until the batch is visible to read_committed consumers.

Each is kept twice: in a ``LatencyWindow`` per reporting interval (p50, p99, max: /status and the
log line), and in a cumulative ``Histogram`` (Prometheus histograms that any number of
instances and intervals add up, for alerts such as "p99 over 5 minutes").
"""
from __future__ import annotations

import bisect
import math
from typing import Any, Dict, List, Optional, Tuple

STAGES = ("source", "streamer", "kafka")
# Bucket bounds (seconds): fine around a live stream's few ms, coarse up to a catch-up's minutes.
BUCKETS = (0.001, 0.002, 0.003, 0.004, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.075, 0.1,
           0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class LatencyWindow:
    """Weighted latency samples in log-spaced buckets: p50, p99, max, share over a threshold."""

    RATIO = 1.05
    FLOOR_MS = 0.05
    SIZE = 420  # 0.05 ms * 1.05**420 is about 40 hours; anything above lands in the last bucket

    def __init__(self, threshold_ms: float):
        self.threshold_ms = float(threshold_ms)
        self._log_ratio = math.log(self.RATIO)
        self.reset()

    def reset(self) -> None:
        self.buckets = [0] * self.SIZE
        self.count = 0
        self.over = 0
        self.max_ms = 0.0

    def add(self, ms: float, weight: int = 1) -> None:
        if ms < self.FLOOR_MS:
            i = 0
        else:
            i = min(self.SIZE - 1, int(math.log(ms / self.FLOOR_MS) / self._log_ratio) + 1)
        self.buckets[i] += weight
        self.count += weight
        if ms > self.threshold_ms:
            self.over += weight
        if ms > self.max_ms:
            self.max_ms = ms

    def quantile(self, q: float) -> Optional[float]:
        if not self.count:
            return None
        rank = q * self.count
        seen = 0
        for i, n in enumerate(self.buckets):
            seen += n
            if n and seen >= rank:
                # The bucket's geometric middle, never above the true maximum.
                mid = self.FLOOR_MS if i == 0 else self.FLOOR_MS * self.RATIO ** (i - 0.5)
                return min(mid, self.max_ms)
        return self.max_ms

    def summary(self) -> Dict[str, Any]:
        return {"p50": _round(self.quantile(0.5)), "p99": _round(self.quantile(0.99)),
                "max": _round(self.max_ms) if self.count else None,
                "over_threshold_share": (self.over / self.count) if self.count else None,
                "threshold_ms": self.threshold_ms, "samples": self.count}


def _round(v: Optional[float]) -> Optional[float]:
    return None if v is None else round(v, 3)


def _round(v: Optional[float]) -> Optional[float]:
    return None if v is None else round(v, 3)


class Histogram:
    """Cumulative counts of samples (seconds) at or below each of ``BUCKETS``, their sum and
    count: Prometheus' histogram, exposed as it is."""

    __slots__ = ("counts", "sum", "count")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)  # the last: above every bound (+Inf only)
        self.sum = 0.0
        self.count = 0

    def add(self, seconds: float, weight: int = 1) -> None:
        self.counts[bisect.bisect_left(BUCKETS, seconds)] += weight
        self.sum += seconds * weight
        self.count += weight

    def cumulative(self) -> List[Tuple[str, int]]:
        """(upper bound, samples at or below it) per bucket, +Inf last."""
        out, seen = [], 0
        for bound, n in zip(list(BUCKETS) + [math.inf], self.counts):
            seen += n
            out.append(("+Inf" if bound == math.inf else repr(bound), seen))
        return out


class Latency:
    """The end-to-end latency and its three stages, per interval and since the start."""

    def __init__(self, threshold_ms: float) -> None:
        self.threshold_ms = threshold_ms
        self.total = Histogram()
        self.stages: Dict[str, Histogram] = {s: Histogram() for s in STAGES}
        self.window = LatencyWindow(threshold_ms)
        self.stage_windows = {s: LatencyWindow(threshold_ms) for s in STAGES}

    def add(self, event_s: float, read_s: float, begin_s: float, end_s: float,
            weight: int = 1) -> None:
        """One change (or ``weight`` of them): committed on MySQL at ``event_s``, read at
        ``read_s``, its batch's commit begun at ``begin_s`` and ended at ``end_s`` (wall
        clock, seconds). A stage never shows below zero: clocks of two hosts disagree by a
        little."""
        total = max(0.0, end_s - event_s)
        parts = (max(0.0, read_s - event_s), max(0.0, begin_s - read_s), max(0.0, end_s - begin_s))
        self.total.add(total, weight)
        self.window.add(total * 1000.0, weight)
        for stage, seconds in zip(STAGES, parts):
            self.stages[stage].add(seconds, weight)
            self.stage_windows[stage].add(seconds * 1000.0, weight)

    def roll(self) -> Tuple[Dict[str, Any], Dict[str, Dict[str, Any]]]:
        """The interval's summaries (the whole, and each stage's), the windows emptied."""
        summary = self.window.summary()
        split = {s: {k: w.summary()[k] for k in ("p50", "p99", "max")}
                 for s, w in self.stage_windows.items()}
        self.window.reset()
        for w in self.stage_windows.values():
            w.reset()
        return summary, split


def split_text(split: Dict[str, Dict[str, Any]]) -> str:
    """The stages' p50s in one piece of a log line."""
    return " ".join(f"{s} {split[s]['p50']}" for s in STAGES if split.get(s, {}).get("p50")
                    is not None)
