"""In-memory parts that drive the real engine loop without servers: a binlog file replayed through
python-mysql-replication's own packet layer, a publisher that keeps its transactions in a list,
and a clock the test moves."""
from __future__ import annotations

import json
import os
import struct
from typing import Any, Callable, Dict, List, Optional, Tuple

from pymysql.protocol import MysqlPacket
from pymysqlreplication.constants.BINLOG import HEARTBEAT_LOG_EVENT, ROTATE_EVENT
from pymysqlreplication.event import (FormatDescriptionEvent, MariadbAnnotateRowsEvent, RotateEvent,
                                      XidEvent)
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.row_event import TableMapEvent

from streamer.codec.decode import Decoder
from streamer.position import Position
from streamer.source.events import READ
from streamer.source.payload import TransactionPayloadEvent

BINLOGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "binlogs")
MAGIC = b"\xfebin"
HEADER = struct.Struct("<IBIIIH")  # timestamp, type, server_id, event_size, log_pos, flags
ARTIFICIAL = 0x20


class _Control:
    """What the library asks of its control connection while decoding events that carry their
    own metadata (binlog_row_metadata=FULL): the charset and the server's flavour."""
    charset = "utf8mb4"

    def _get_dbms(self) -> str:
        return "mariadb"


def _event_bytes(event_type: int, body: bytes, timestamp: int = 0, log_pos: int = 0) -> bytes:
    size = HEADER.size + len(body) + 4  # and a CRC32 the reader does not verify
    return HEADER.pack(timestamp, event_type, 1, size, log_pos, ARTIFICIAL) + body + b"\0" * 4


def _decoded(event_bytes: bytes, table_map: Dict[int, Any], version: Any, allowed: Any,
             post_header: Any) -> Any:
    """The event the library's packet layer makes of one event's bytes, as a stream's packet
    (the OK byte first), checksummed, with no library filter; None for a class not allowed."""
    return BinLogPacketWrapper(
        MysqlPacket(b"\x00" + event_bytes, "utf8"), table_map, _Control(), version, True, allowed,
        None, None, None, None, False, False, False, True, False, False, post_header).event


def _rewritten(name: str, at: int, drop: int, event: bytes) -> bytes:
    """The recorded binlog ``name`` with ``drop`` bytes at offset ``at`` (an event boundary)
    replaced by the event ``event``, as a server would have written it: the end positions of
    the events after it move by the difference."""
    with open(os.path.join(BINLOGS, name), "rb") as fh:
        data = fh.read()
    shift = len(event) - drop
    out, pos = bytearray(data[:at]), at + drop
    while pos < len(data):
        ts, kind, server, length, log_pos, fl = HEADER.unpack_from(data, pos)
        out += HEADER.pack(ts, kind, server, length, log_pos + shift, fl)
        out += data[pos + HEADER.size:pos + length]
        pos += length
    assert pos == len(data), "not an event boundary"
    return bytes(out[:at]) + event + bytes(out[at:])


def spliced(name: str, at: int, event_type: int, body: bytes, flags: int = 0) -> bytes:
    """The recorded binlog ``name`` with one more event (``event_type``, ``body``) written at
    offset ``at``, before the event there."""
    size = HEADER.size + len(body) + 4
    return _rewritten(name, at, 0,
                      HEADER.pack(0, event_type, 1, size, at + size, flags) + body + b"\0" * 4)


def maps_rewritten(name: str, rewrite: Callable[[bytes], bytes]) -> bytes:
    """The recorded binlog ``name`` with each table-map event's body made ``rewrite(body)`` (the
    checksum zeroed, as the tests' replay doesn't check it), as a server would have written it:
    every later event's end position moved."""
    with open(os.path.join(BINLOGS, name), "rb") as fh:
        data = fh.read()
    out, pos = bytearray(data[:4]), 4
    while pos < len(data):
        ts, kind, server, size, _, flags = HEADER.unpack_from(data, pos)
        body = data[pos + HEADER.size:pos + size - 4]
        if kind == 19:
            body = rewrite(body)
        length = HEADER.size + len(body) + 4
        out += HEADER.pack(ts, kind, server, length, len(out) + length, flags) + body + b"\0" * 4
        pos += size
    return bytes(out)


def query_rewritten(name: str, at: int, old: bytes, new: bytes) -> bytes:
    """The recorded binlog ``name`` with the query event at ``at``, whose statement is ``old``,
    saying ``new`` instead."""
    with open(os.path.join(BINLOGS, name), "rb") as fh:
        data = fh.read()
    ts, kind, server, length, _, fl = HEADER.unpack_from(data, at)
    event = data[at:at + length]
    assert event[-4 - len(old):-4] == old, event
    body = event[HEADER.size:-4 - len(old)] + new
    size = HEADER.size + len(body) + 4
    return _rewritten(name, at, length,
                      HEADER.pack(ts, kind, server, size, at + size, fl) + body + b"\0" * 4)


class ReplayedBinlog:
    """The events of a recorded binlog file from ``start``, as a server would send them: a rotate
    to the file first, then its format description, then every event from ``start.pos`` on,
    decoded by the library's BinLogPacketWrapper exactly as a stream's packets are.

    ``live``: each event arrives alone, and after each transaction the server sends a heartbeat
    with nothing behind it (the reader is caught up). Otherwise the whole file is a backlog:
    more has always arrived, and no heartbeat comes until its end. ``on_event(n)`` is called
    before the n-th event (from 1) is handed out; at the end ``on_end()`` is called and heartbeats
    follow, so that a loop that was asked to stop sees it."""

    def __init__(self, name: str, start: Position, live: bool = False,
                 on_event: Optional[Callable[[int], None]] = None,
                 on_end: Optional[Callable[[], None]] = None, file: str = "mysql-bin.000002",
                 data: Optional[bytes] = None, rotate_pos: Optional[int] = None,
                 annotate: bool = False):
        if data is None:
            with open(os.path.join(BINLOGS, name), "rb") as fh:
                data = fh.read()
        self.data = data
        assert self.data[:4] == MAGIC, name
        self.file = file
        self.start = start
        self.live = live
        self.on_event = on_event
        self.on_end = on_end
        self.handed_out = 0
        self._more = True
        # The offset the first (artificial) rotate carries: the start's, as a dump by file and
        # offset sends it; a dump by GTID set sends 4 (the file's start) whatever the GTID's.
        self.rotate_pos = start.pos if rotate_pos is None else rotate_pos
        # Hand out MariaDB's Annotate_rows events too, as a server asked for them sends them.
        self.annotate = annotate

    def __enter__(self) -> "ReplayedBinlog":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def more_arrived(self) -> bool:
        return self._more and not self.live

    def raw_events(self) -> List[Tuple[int, bytes]]:
        """(offset, bytes) of each event in the file."""
        out, at = [], 4
        while at < len(self.data):
            size = HEADER.unpack_from(self.data, at)[3]
            out.append((at, self.data[at:at + size]))
            at += size
        return out

    def __iter__(self) -> Any:
        table_map: Dict[int, Any] = {}
        version, post_header = (0, 0, 0), None
        allowed = set(READ) | ({MariadbAnnotateRowsEvent} if self.annotate else set())
        rotate = _event_bytes(ROTATE_EVENT, struct.pack("<Q", self.rotate_pos) + self.file.encode())
        raw = [(None, rotate)] + [(at, b) for at, b in self.raw_events()
                                  if at >= self.start.pos or b[4] == 15]  # 15: format description
        for _, event_bytes in raw:
            event = _decoded(event_bytes, table_map, version, allowed | {FormatDescriptionEvent},
                             post_header)
            if event is None:
                continue
            if isinstance(event, FormatDescriptionEvent):
                version, post_header = event.mysql_version, event.post_header_len
                continue
            if isinstance(event, TableMapEvent):
                table_map[event.table_id] = event.get_table()
            if event.__class__ not in allowed:
                continue
            # A compressed transaction's own events, handed out in its place as the binlog
            # reader does (source.payload).
            for one in event.events if event.__class__ is TransactionPayloadEvent else [event]:
                self.handed_out += 1
                if self.on_event is not None:
                    self.on_event(self.handed_out)
                yield one
                if self.live and self._ends_transaction(one):
                    yield self.heartbeat()
        self._more = False
        if self.on_end is not None:
            self.on_end()
            for _ in range(3):
                yield self.heartbeat()

    @staticmethod
    def _ends_transaction(event: Any) -> bool:
        if isinstance(event, XidEvent):
            return True
        query = getattr(event, "query", None)
        return query is not None and query != "BEGIN" and not isinstance(event, RotateEvent)

    def heartbeat(self) -> Any:
        return _decoded(_event_bytes(HEARTBEAT_LOG_EVENT, self.file.encode()), {}, (0, 0, 0),
                        set(READ), None)


class InMemoryPublisher:
    """A ``kafka.sink.Sink`` kept in lists: ``log`` holds each committed transaction as
    (messages, checkpoint), a message being (topic, key, value). An aborted transaction leaves
    nothing. ``on_commit(position)`` is called after each commit."""

    def __init__(self, namespace: str = "test", source: str = "src",
                 on_commit: Optional[Callable[[Position], None]] = None):
        self.positions_topic = f"{namespace}.__positions"
        self.schemas_topic = f"{namespace}.__schemas"
        self.source = source
        self.on_commit = on_commit
        self.in_tx = False
        self.stopping = False
        self.committed: Optional[Position] = None
        self.last_commit_s = 0.0
        self.topics: set = set()
        self.topic_configs: Dict[str, Dict[str, str]] = {}
        self.soon: List[Tuple[str, Dict[str, str]]] = []  # ensure_topic_soon's topics, in order
        self.open: List[Tuple[str, Optional[bytes], bytes]] = []
        self.log: List[Tuple[List[Tuple[str, Optional[bytes], bytes]], Position]] = []
        self.headers: List[Tuple[str, Any]] = []  # (topic, headers) of each message that had any
        self.aborts = self.drained = 0

    def __enter__(self) -> "InMemoryPublisher":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.in_tx:
            self.abort()

    def ensure_topic(self, topic: str, partitions: Optional[int] = None,
                     config: Optional[Dict[str, str]] = None) -> None:
        self.topics.add(topic)
        self.topic_configs[topic] = dict(config or {})

    def ensure_topic_soon(self, topic: str, partitions: Optional[int] = None,
                          config: Optional[Dict[str, str]] = None) -> None:
        self.soon.append((topic, dict(config or {})))

    def prepare(self) -> None:
        self.topics.update((self.positions_topic, self.schemas_topic))

    def begin(self) -> None:
        assert not self.in_tx, "a transaction is open already"
        self.in_tx = True
        self.open = []

    def produce(self, topic: str, value: bytes, key: Optional[bytes], headers: Any = None) -> None:
        assert self.in_tx, f"produce to {topic} outside a transaction"
        self.open.append((topic, key, value))
        if headers is not None:
            self.headers.append((topic, headers))

    def produce_everywhere(self, topic: str, value: bytes, headers: Any = None) -> int:
        self.produce(topic, value, None, headers)  # one partition here
        return 1

    def produce_schema(self, fingerprint_hex: str, schema_json: str, topic: str, kind: str) -> None:
        body = json.dumps({"fingerprint": fingerprint_hex, "schema": schema_json, "topic": topic,
                           "kind": kind}, sort_keys=True).encode()
        self.produce(self.schemas_topic, body, fingerprint_hex.encode())

    def commit(self, position: Position, timeout: float = 60.0) -> None:
        if not self.in_tx:
            self.begin()
        self.log.append((self.open, position))
        self.open, self.in_tx, self.committed = [], False, position
        if self.on_commit is not None:
            self.on_commit(position)

    def abort(self, drain: bool = False) -> None:
        self.open, self.in_tx = [], False
        self.aborts += 1
        self.drained += drain

    def read_checkpoint(self) -> Optional[Position]:
        return self.committed

    def reset(self) -> None:
        self.abort()

    def read_schema_records(self) -> List[Dict[str, Any]]:
        return [json.loads(value) for topic, _, value in self.messages(all_topics=True)
                if topic == self.schemas_topic]

    def queue_depth(self) -> int:
        return 0

    # -- for the tests ----------------------------------------------------------------------------
    def messages(self, all_topics: bool = False) -> List[Tuple[str, Optional[bytes], bytes]]:
        """Every committed message in order; the table topics' only, unless ``all_topics``."""
        return [m for messages, _ in self.log for m in messages
                if all_topics or not (m[0].startswith(self.schemas_topic) or
                                      m[0].endswith(".__transactions"))]

    def decoder(self) -> Decoder:
        return Decoder(lambda: {r["fingerprint"]: json.loads(r["schema"])
                                for r in self.read_schema_records()})

    def changes(self) -> List[Tuple[str, Any]]:
        """(op, primary key or None) of every committed row-change message, in order; a
        tombstone's op is "tombstone"."""
        decoder = self.decoder()
        out = []
        for _, key, value in self.messages():
            env = decoder.decode(value)
            out.append(("tombstone" if env is None else env["op"],
                        None if key is None else decoder.decode(key)["id"]))
        return out


class FakeClock:
    """``monotonic()`` moves on by ``step`` seconds each time it is read; ``time()`` is the wall
    clock the engine compares event times with (``wall``)."""

    def __init__(self, step: float = 0.001, wall: float = 4102444800.0):
        self.now = 1000.0
        self.step = step
        self.wall = wall

    def monotonic(self) -> float:
        self.now += self.step
        return self.now

    def time(self) -> float:
        return self.wall

    def sleep(self, seconds: float) -> None:
        self.now += seconds


# -- MySQL's compressed transactions, written (source.payload reads them) -------------------------
def _lenenc(n: int) -> bytes:
    return bytes([n]) if n < 0xFB else b"\xfc" + n.to_bytes(2, "little")


def _field(kind: int, value: int) -> bytes:
    encoded = _lenenc(value) if value < 0xFB else b"\xfd" + value.to_bytes(3, "little")
    return _lenenc(kind) + _lenenc(len(encoded)) + encoded


def payload_body(inner: bytes, compression: int = 0) -> bytes:
    """A Transaction_payload event's body holding ``inner`` (events), zstd (0) or not (255),
    laid out as MySQL's control_events.h documents it."""
    import zstandard

    from streamer.source import payload
    data = zstandard.ZstdCompressor().compress(inner) if compression == payload.ZSTD else inner
    return (_field(payload.COMPRESSION, compression) +
            _field(payload.UNCOMPRESSED_SIZE, len(inner)) +
            _field(payload.PAYLOAD_SIZE, len(data)) + b"\x00" + data)


def compressed(data: bytes) -> bytes:
    """A recorded binlog file with each transaction's events after its GTID event (but nothing
    else) in a Transaction_payload event, as MySQL writes a compressed transaction, with no
    checksums inside. (A MariaDB recording: its GTID events stay outside as MySQL's would.)"""
    from streamer.source import payload
    events, at = [], 4
    while at < len(data):
        size = HEADER.unpack_from(data, at)[3]
        events.append(data[at:at + size])
        at += size
    out, group = bytearray(MAGIC), []

    def flush() -> None:
        if not group:
            return
        inner = bytearray(b"".join(e[:HEADER.size] + e[HEADER.size:-4] for e in group))
        pos = 0
        for e in group:  # inner events: no checksum, so 4 bytes shorter each
            ts, kind, server, size, log_pos, fl = HEADER.unpack_from(e, 0)
            HEADER.pack_into(inner, pos, ts, kind, server, size - 4, 0, fl)
            pos += size - 4
        body = payload_body(bytes(inner))
        size = HEADER.size + len(body) + 4
        out.extend(HEADER.pack(group[0][0], payload.TYPE, 1, size, len(out) + size, 0))
        out.extend(body + b"\0" * 4)
        group.clear()

    for e in events:
        kind = e[4]
        if kind in (15, 162, 163, 160, 161):  # format, GTID, GTID list, annotation, checkpoint
            flush()
            ts, kind, server, size, _, fl = HEADER.unpack_from(e, 0)
            out.extend(HEADER.pack(ts, kind, server, size, len(out) + size, fl) + e[HEADER.size:])
        else:
            group.append(e)
    flush()
    return bytes(out)
