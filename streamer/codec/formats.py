"""The messages' format (config ``format``): what attaches to each table version its envelope,
key and wire writers. The streamer's own Avro needs nothing attached (``make`` gives None)."""
from __future__ import annotations

from typing import Any, Optional

from streamer.config import Config


def make(cfg: Config) -> Optional[Any]:
    """The format object of a config; imported on use, so the default costs no import."""
    if cfg.format == "debezium":
        from streamer.codec.debezium import DebeziumFormat
        return DebeziumFormat(cfg.namespace, cfg.debezium)
    if cfg.format == "json":
        from streamer.codec.jsonformat import JsonFormat
        return JsonFormat(cfg.namespace)
    return None


def transaction_records(cfg: Config, fmt: Optional[Any],
                        collection: Any) -> Optional[Any]:
    """The BEGIN/END records of a format that has its own (None: the streamer's)."""
    if cfg.format == "debezium":
        from streamer.codec.debezium import TransactionRecords
        return TransactionRecords(fmt, collection)
    return None


def heartbeat_records(cfg: Config, fmt: Optional[Any]) -> Optional[Any]:
    """The heartbeat records of a format that writes them (Debezium's, when its interval is set)."""
    d = cfg.debezium
    if cfg.format == "debezium" and d.heartbeat_interval_ms:
        from streamer.codec.debezium import HeartbeatRecords
        return HeartbeatRecords(fmt, d.heartbeat_topic_prefix)
    return None
