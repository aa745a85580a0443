"""``format: json``: the streamer's envelope as one JSON object per message, no schema, for
consumers that want nothing else (jq, a log pipeline).

Values are rendered as ``streamer tail`` renders a decoded message (``codec.decode.to_jsonable``):
dates and times in ISO 8601 (a TIMESTAMP with its UTC offset), TIME as ``[-]H:MM:SS[.ffffff]``
(``1 day, 2:00:00`` past 24 h, as Python writes a duration), DECIMAL and BIGINT UNSIGNED as
strings (no precision lost to a JSON number), bytes as one character per byte (latin-1). The
key is the primary key's columns as an object. tests/unit/codec/test_formats.py checks, type by
type, that a message reads the same as the streamer's Avro one decoded by ``streamer tail``.
"""
from __future__ import annotations

import datetime
import json
from typing import Any, Callable, Dict, List, Optional, Tuple

from streamer.codec import avro
from streamer.codec.decode import to_jsonable

OPS = {avro.OP_BYTES[op]: op for op in ("c", "u", "d", "t", "r")}
SNAPSHOT_FLAGS = {avro.SNAPSHOT_BYTES["true"]: "true", avro.SNAPSHOT_BYTES["last"]: "last"}
_EPOCH = datetime.datetime(1970, 1, 1)
EPOCH_ORDINAL = _EPOCH.toordinal()


def _date(days: int) -> str:
    return datetime.date.fromordinal(EPOCH_ORDINAL + days).isoformat()


def _datetime(micros: int) -> str:
    return (_EPOCH + datetime.timedelta(microseconds=micros)).isoformat()


def _timestamp(micros: int) -> str:
    return (_EPOCH + datetime.timedelta(microseconds=micros)).replace(
        tzinfo=datetime.timezone.utc).isoformat()


def _time(micros: int) -> str:
    return str(datetime.timedelta(microseconds=micros))


def _latin1(value: bytes) -> str:
    return value.decode("latin-1")


RENDER: Dict[str, Callable[[Any], Any]] = {
    "date": _date, "datetime": _datetime, "timestamp": _timestamp, "time": _time,
    "decimal": str, "bigint unsigned": str, "binary": _latin1, "bit": _latin1,
    "geometry": _latin1, "uuid": str,
}


class JsonFormat:
    """Attaches a JsonEncoder to each table version."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace

    def attach(self, tv: Any) -> None:
        plan = [(name, RENDER.get(kind)) for name, kind, _, _ in tv.columns_info]
        key_plan = [(n, r) for n, r in plan if n in tv.pk_names]
        enc = JsonEncoder(plan, key_plan)
        tv.envelope = enc
        tv.key = enc.key
        tv.truncate_value = enc.truncate_value
        tv.wire_value = tv.wire_key = None  # nothing for a registry to frame

    def attach_topic(self, found: Any) -> None:
        found.truncate_value = JsonEncoder([], []).truncate_value


def rendered(plan: List[Tuple[str, Optional[Callable[[Any], Any]]]],
             values: Dict[str, Any]) -> Dict[str, Any]:
    """A row's values by ``plan`` (name, render or None): the fastavro path's union branches
    unwrapped, each value not None rendered (format: json, and format: debezium's rows)."""
    out = {}
    for name, render in plan:
        v = values.get(name)
        if v is not None:
            if v.__class__ is tuple:  # a union branch the streamer's fastavro path added
                v = v[1]
            if render is not None:
                v = render(v)
        out[name] = v
    return out


class JsonEncoder:
    """One table version's messages as JSON (the interface of codec.avro.EnvelopeWriter)."""

    def __init__(self, plan: List[Tuple[str, Optional[Callable[[Any], Any]]]],
                 key_plan: List[Tuple[str, Optional[Callable[[Any], Any]]]]) -> None:
        self.plan = plan
        self.key_plan = key_plan

    def event_parts(self, ts_ms: int, server_id: int, file: str, pos: int, gtid: Optional[str],
                    db: str, table: str, txid: str) -> Tuple[Any, Any]:
        return (ts_ms, {"server_id": server_id, "file": file, "pos": pos, "gtid": gtid,
                        "db": db, "table": table, "txid": txid}), txid

    def _value(self, before: Any, after: Any, op: str, parts: Any, row: int, tx_row: int,
               snapshot: Optional[str] = None) -> bytes:
        ts_ms, source = parts
        value = {"before": before, "after": after, "op": op, "ts_ms": ts_ms,
                 "source": dict(source, row=row, tx_row=tx_row, snapshot=snapshot)}
        return json.dumps(to_jsonable(value), ensure_ascii=False,
                          separators=(",", ":")).encode("utf-8")

    def encode(self, before: Any, after: Any, op: bytes, mid: Any, row: int, txid: Any,
               tx_row: int) -> bytes:
        return self._value(None if before is None else rendered(self.plan, before),
                           None if after is None else rendered(self.plan, after),
                           OPS[op], mid, row, tx_row)

    def encode_read(self, after: Any, mid: Any, row: int, txid: Any, snapshot: bytes) -> bytes:
        return self._value(None, rendered(self.plan, after), "r", mid, row, row,
                           SNAPSHOT_FLAGS[snapshot])

    def truncate_value(self, ts_ms: int, server_id: int, file: str, pos: int,
                       gtid: Optional[str], db: str, table: str, txid: str,
                       tx_row: int) -> bytes:
        parts, _ = self.event_parts(ts_ms, server_id, file, pos, gtid, db, table, txid)
        return self._value(None, None, "t", parts, 0, tx_row)

    def key(self, values: Dict[str, Any]) -> Optional[bytes]:
        if not self.key_plan:
            return None
        return json.dumps(to_jsonable(rendered(self.key_plan, values)), ensure_ascii=False,
                          separators=(",", ":")).encode("utf-8")
