"""``/metrics``: the Prometheus exposition, by prometheus_client, read at scrape time.

A custom collector turns the ``Metrics`` object into metric families when Prometheus scrapes: the
hot path feeds ``Metrics`` as it always has and pays nothing for the exposition. Latency is a real
histogram (``streamer_latency_seconds``, and by stage ``streamer_latency_stage_seconds``), whose
buckets add up across instances and intervals. prometheus_client's process collector adds the
process's own series (``process_resident_memory_bytes``, ``process_cpu_seconds_total``,
``process_open_fds`` ...). docs/metrics.md lists every series; deploy/monitoring uses them, and a
test checks that each one it uses exists.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                    HistogramMetricFamily)

from streamer.ops.latency import STAGES
from streamer.ops.metrics import COUNTERS, SNAPSHOT_SERIES, Metrics

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

HELPS = {"messages": "messages published", "rows": "row changes published",
         "bytes": "key and value bytes published", "batches": "Kafka transactions committed",
         "errors": "errors the stream recovered from", "reconnects": "binlog reconnects",
         "invalid_values": "invalid dates published as null, and texts published with a '?' "
                           "for bytes their charset has no character for (each logged)",
         "commit_failures": "batches whose Kafka commit failed (aborted and read again)"}


def _guards(gauge: Callable[[str, str, Optional[float]], Any], st: Dict[str, Any]) -> Iterator[Any]:
    """The retention and replica guards' gauges (ops.retention, ops.replica)."""
    guard = st["retention"] or {}
    yield gauge("streamer_retention_warning", "1 while a binlog file the checkpoint needs is at "
                "risk of being purged (ops/retention.py)",
                None if not guard else int(guard["status"] == "warning"))
    yield gauge("streamer_binlog_expires_in_seconds", "at least this long until the server's "
                "expiry purges the checkpoint's binlog file (absent: the active file, or no "
                "expiry)", guard.get("expires_in_s"))
    replication = st["replication"]
    yield gauge("streamer_unlogged_replication", "1 while the server replicates another and its "
                "binlog does not log what it applies: none of that is published "
                "(ops/replica.py)",
                None if replication is None else int(replication["status"] == "unlogged"))


class StreamerCollector:
    """The streamer's series, read from ``metrics`` when a scrape asks."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Any]:
        m = self.metrics
        st = m.status()
        dims = m.dimensions
        names, values = list(dims), list(dims.values())

        def gauge(name: str, text: str, value: Optional[float],
                  extra: Optional[Dict[str, str]] = None) -> Any:
            family = GaugeMetricFamily(name, text, labels=names + list(extra or {}))
            if value is not None:
                family.add_metric(values + list((extra or {}).values()), float(value))
            return family

        for key in COUNTERS:
            family = CounterMetricFamily(f"streamer_{key}", HELPS[key], labels=names)
            family.add_metric(values, float(getattr(m, key)))
            yield family
        yield gauge("streamer_build_info", "1, labelled with what runs: the streamer's version, "
                    "the deployed release and the runtime", 1, st["build"])
        yield gauge("streamer_lag_seconds", "seconds behind the source's commits",
                    st["lag_seconds"])
        yield gauge("streamer_lag_bytes", "bytes of binlog not yet committed to Kafka",
                    st["lag_bytes"])
        yield gauge("streamer_queue_depth", "messages in the producer queue after the last commit",
                    st["queue_depth"])
        yield gauge("streamer_commit_seconds", "duration of the last transaction commit",
                    st["commit_seconds"])
        yield gauge("streamer_batch_size", "messages in the last batch", st["batch_size"])
        yield gauge("streamer_up", "1 while the stream advances or is caught up, 0 while it is "
                    "stalled or failing (health)", 1 if st["health"]["status"] in
                    ("ok", "warning") else 0)
        yield gauge("streamer_last_commit_age_seconds", "seconds since the last batch committed",
                    m.last_commit_age())
        yield from _guards(gauge, st)
        yield from self._latency(names, values, st)
        ha = st.get("ha")
        if ha is not None:
            yield gauge("streamer_active", "1 while this instance holds the lease and streams, "
                        "0 as a standby", 1 if ha["role"] == "active" else 0)
            family = CounterMetricFamily("streamer_takeovers", "times this instance took the "
                                         "lease", labels=names)
            family.add_metric(values, float(ha["takeovers"]))
            yield family
        moved = st.get("failover")
        if moved is not None:
            family = CounterMetricFamily("streamer_source_switches", "times the stream moved to "
                                         "another server of mysql.hosts", labels=names)
            family.add_metric(values, float(moved["switches"]))
            yield family
        snap = st["snapshot"]
        if snap is not None:
            for key, kind, text in SNAPSHOT_SERIES:
                if kind == "counter":
                    family = CounterMetricFamily(f"streamer_snapshot_{key}", text, labels=names)
                    family.add_metric(values, float(snap[key]))
                    yield family
                else:
                    yield gauge(f"streamer_snapshot_{key}", text, snap[key])

    def _latency(self, names: List[str], values: List[str], st: Dict[str, Any]) -> Iterator[Any]:
        latencies = self.metrics.latencies
        resolution = st["latency_ms"]["resolution"]
        total = HistogramMetricFamily(
            "streamer_latency_seconds", "MySQL commit to Kafka commit of each change (heartbeat "
            "µs times, or the binlog's whole seconds: label resolution)",
            labels=names + ["resolution"])
        total.add_metric(values + [resolution], _buckets(latencies.total.cumulative()),
                         latencies.total.sum)
        yield total
        staged = HistogramMetricFamily(
            "streamer_latency_stage_seconds", "each change's latency by stage: source (MySQL "
            "commit to binlog read), streamer (read to commit begun), kafka (the commit)",
            labels=names + ["resolution", "stage"])
        for stage in STAGES:
            h = latencies.stages[stage]
            staged.add_metric(values + [resolution, stage], _buckets(h.cumulative()), h.sum)
        yield staged
        lat = st["latency_ms"]
        interval = GaugeMetricFamily(
            "streamer_latency_interval_seconds", "the last reporting interval's latency "
            "quantiles (absent when it was idle)", labels=names + ["quantile"])
        for q, k in (("0.5", "p50"), ("0.99", "p99"), ("1", "max")):
            if lat[k] is not None:
                interval.add_metric(values + [q], lat[k] / 1000.0)
        yield interval
        over = GaugeMetricFamily("streamer_latency_over_threshold_ratio",
                                 f"share of changes slower than {lat['threshold_ms']:g} ms in "
                                 f"the last interval", labels=names)
        if lat["over_threshold_share"] is not None:
            over.add_metric(values, lat["over_threshold_share"])
        yield over


def _buckets(cumulative: List[Tuple[str, int]]) -> List[Tuple[str, float]]:
    return [(bound, float(n)) for bound, n in cumulative]


def registry(metrics: Metrics) -> CollectorRegistry:
    """The streamer's series and the process's own."""
    reg = CollectorRegistry()
    reg.register(StreamerCollector(metrics))
    ProcessCollector(registry=reg)
    return reg


def exposition(reg: CollectorRegistry) -> bytes:
    return generate_latest(reg)
