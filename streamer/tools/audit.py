"""``streamer audit``: does a table's topic hold what the table holds? Without stopping the stream.

1. The table is read in chunks by its primary key, as a snapshot reads it (``source.chunks``), and
   each row is turned into what the streamer would publish for it now (the table's current
   version, its column masks included).
2. The binlog position after that read is noted, and the audit waits for the streamer's
   checkpoint to pass it: every change made before the read is then in the topic.
3. The topic is read from its start, read_committed, and materialized: the last value of each
   key; a delete or a tombstone removes the key, a TRUNCATE every key of its partition.
4. The two sides are compared by key, each row by a digest of its decoded value (both sides go
   through the same decoder, so a value published under an older schema version compares by
   its values).
5. A row changed while the audit ran can differ for a moment. The keys found missing, extra or
   different are read again from the table, the audit waits for the streamer to pass that read
   too, reads the topic on to its new end, and compares them again; up to ``RECHECKS`` times.
   What still differs is reported.

Memory stays bounded: both sides' digests live in a SQLite file in a temporary directory (one row
per key, ~100 bytes), not in memory, so a table of any size is audited in the same RSS.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import os
import sqlite3
import sys
import tempfile
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from streamer.config import Config
from streamer import config as config_mod
from streamer.codec.decode import Decoder, to_jsonable
from streamer.errors import SnapshotRefused, StreamerError, UndecodableMessage
from streamer.kafka.topics import TopicReader, kafka_schema_source, read_schema_records, read_topic_tail
from streamer.position import Position
from streamer.schema import evolution
from streamer.schema.masking import ColumnRules
from streamer.schema.naming import TopicNames
from streamer.schema.versions import TableCatalog, TableFilter, TableVersion
from streamer.source import chunks, server
from streamer.tools.snapshot import check

# A real difference stays through every recheck; one in flight goes. Under a sustained load a
# hot key can change again inside each recheck's window (seen: 707, then 11, then 1 key at ~500
# changes/s on ~3,000 rows, the last one changed in every window), so a few more are allowed.
RECHECKS = 6
CHUNK_ROWS = 5000
# Each kind of difference lists at most this many keys in the text output (all in --json).
SHOWN = 20
# A source with nothing written since the read may show its checkpoint no further than the read.
CHECKPOINT_TAIL = 1000
_SOURCE = {"server_id": 0, "file": "", "pos": 0, "gtid": None, "db": "", "table": "", "row": 0,
           "txid": "", "tx_row": 0, "snapshot": None}


class AuditFailed(StreamerError):
    """The audit could not finish (the streamer never passed the read, say)."""

    exit_code = 3


def canonical(value: Any) -> str:
    return json.dumps(to_jsonable(value), sort_keys=True, separators=(",", ":"))


def digest(row: Any) -> str:
    return hashlib.sha256(canonical(row).encode("utf-8")).hexdigest()[:32]


class Store:
    """Both sides' digests by key, in SQLite on disk."""

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path)
        self.db.executescript(
            "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;"
            "CREATE TABLE tbl (pk TEXT PRIMARY KEY, digest TEXT NOT NULL);"
            "CREATE TABLE topic (pk TEXT PRIMARY KEY, part INTEGER NOT NULL, digest TEXT NOT NULL);"
            "CREATE INDEX topic_part ON topic (part);"
            "CREATE TABLE cand (pk TEXT PRIMARY KEY);")

    def put_rows(self, rows: Sequence[Tuple[str, str]]) -> None:
        self.db.executemany("INSERT OR REPLACE INTO tbl VALUES (?, ?)", rows)

    def apply(self, part: int, pk: Optional[str], row_digest: Optional[str], truncate: bool) -> None:
        """One topic record: a value sets the key, None removes it, a TRUNCATE empties ``part``."""
        if truncate:
            self.db.execute("DELETE FROM topic WHERE part = ?", (part,))
        elif row_digest is None:
            self.db.execute("DELETE FROM topic WHERE pk = ?", (pk,))
        else:
            self.db.execute("INSERT OR REPLACE INTO topic VALUES (?, ?, ?)", (pk, part, row_digest))

    def count(self, table: str) -> int:
        return int(self.db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])

    def differences(self, only_candidates: bool, extras: bool) -> Dict[str, List[str]]:
        scope = " AND {0}.pk IN (SELECT pk FROM cand)" if only_candidates else ""
        found = {
            "missing": [r[0] for r in self.db.execute(
                "SELECT pk FROM tbl WHERE pk NOT IN (SELECT pk FROM topic)" + scope.format("tbl")
                + " ORDER BY pk")],
            "different": [r[0] for r in self.db.execute(
                "SELECT tbl.pk FROM tbl JOIN topic ON tbl.pk = topic.pk "
                "WHERE tbl.digest != topic.digest" + scope.format("tbl") + " ORDER BY tbl.pk")],
            "extra": [r[0] for r in self.db.execute(
                "SELECT pk FROM topic WHERE pk NOT IN (SELECT pk FROM tbl)" + scope.format("topic")
                + " ORDER BY pk")] if extras else [],
        }
        return found

    def candidates(self, keys: Sequence[str]) -> None:
        self.db.execute("DELETE FROM cand")
        self.db.executemany("INSERT INTO cand VALUES (?)", [(k,) for k in keys])

    def close(self) -> None:
        self.db.close()


class TableSide:
    """The table's rows as the streamer would publish them now: (key, digest) pairs."""

    def __init__(self, conn: Any, described: chunks.Described, tv: TableVersion,
                 decoder: Decoder) -> None:
        self.conn = conn
        self.described = described
        self.tv = tv
        self.decoder = decoder
        key_fields = tv.key_schema["fields"] if tv.key_schema else []
        self.hashed_key = any("streamer.mask" in f for f in key_fields)

    def published(self, rows: List[Dict[str, Any]]) -> List[Tuple[str, str]]:
        tv = self.tv
        out = []
        for values in rows:
            tv.convert(values)
            env = self.decoder.decode(tv.value_writer.encode(
                {"before": None, "after": values, "op": "r", "ts_ms": 0, "source": _SOURCE}))
            out.append((canonical(self.decoder.decode(tv.key(values))), digest(env["after"])))
        return out

    def chunks(self, condition: Optional[str]) -> Iterator[List[Tuple[str, str]]]:
        last: Optional[List[str]] = None
        while True:
            rows, last, final = chunks.read_chunk(self.conn, self.described, last, condition,
                                                  CHUNK_ROWS)
            yield self.published(rows)
            if final:
                return

    def reread(self, keys: Sequence[str], condition: Optional[str]) -> List[Tuple[str, str]]:
        """The rows of ``keys`` (canonical key JSON, as ``published`` gives) as they are now. A
        key the table no longer has is left out: deleted meanwhile. So each key's values must
        find their row: they are turned back into the literals of their columns' types
        (``sql_literal``), under the columns' MySQL names."""
        fields = {f["name"]: f for f in (self.tv.key_schema or {}).get("fields", [])}
        found: List[Tuple[str, str]] = []
        for i in range(0, len(keys), 500):
            terms = []
            for k in keys[i:i + 500]:
                cols = json.loads(k)
                terms.append("(" + " AND ".join(
                    f"{chunks.quote(fields[c].get('mysql.column', c))} = "
                    f"{sql_literal(self.conn, fields[c], v)}" for c, v in sorted(cols.items()))
                    + ")")
            where = "(" + " OR ".join(terms) + ")"
            if condition:
                where = f"({condition}) AND {where}"
            rows, _, _ = chunks.read_chunk(self.conn, self.described, None, where, len(terms))
            found.extend(self.published(rows))
        return found


def sql_literal(conn: Any, field: Dict[str, Any], value: Any) -> str:
    """The SQL literal of a key column's value as ``canonical`` wrote it (codec.decode's
    to_jsonable), by the column's Avro type: bytes (BINARY, VARBINARY, BIT) from their latin-1
    text, times and dates in the forms the server reads (the audit's session is UTC)."""
    if value is None:
        return "NULL"
    ftype = field["type"]
    if isinstance(ftype, list):
        ftype = next(t for t in ftype if t != "null")
    base = ftype.get("type") if isinstance(ftype, dict) else ftype
    logical = ftype.get("logicalType") if isinstance(ftype, dict) else None
    if base == "bytes" and logical is None:
        raw = value.encode("latin-1")
        if field.get("mysql.type") == "bit":
            return str(int.from_bytes(raw, "big"))
        return "X'" + raw.hex() + "'"
    if logical in ("timestamp-micros", "local-timestamp-micros") and isinstance(value, str):
        moment = datetime.datetime.fromisoformat(value)
        if moment.tzinfo is not None:
            moment = moment.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return conn.escape(moment.strftime("%Y-%m-%d %H:%M:%S.%f"))
    if logical == "streamer.time-micros" and isinstance(value, str):
        return conn.escape(_time_text(value))
    if field.get("mysql.type") == "year" and value == 0:
        # The zero year: the number 0 is 2000 to a YEAR(2) (MariaDB's), the text to both.
        return "'0000'"
    return conn.escape(value)


def _time_text(value: str) -> str:
    """A TIME's text (MySQL's -838:59:59.000000 form) from str(timedelta)."""
    days, _, clock = value.rpartition(", ")
    n_days = int(days.split()[0]) if days else 0
    h, m, sec = clock.split(":")
    total = (n_days * 86400 + int(h) * 3600 + int(m) * 60) * 1000000 + round(float(sec) * 1e6)
    sign = "-" if total < 0 else ""
    total = abs(total)
    return (f"{sign}{total // 3600000000}:{total // 60000000 % 60:02d}:"
            f"{total // 1000000 % 60:02d}.{total % 1000000:06d}")


def _source_position(conn: Any) -> Tuple[str, int]:
    return server.master_status(conn)


def wait_for_streamer(cfg: Config, target: Tuple[str, int], timeout: float,
                      sleep: Callable[[float], None] = time.sleep) -> Position:
    """Block until the streamer's committed checkpoint is at or past ``target`` (binlog file and
    offset), so that every change made before it is in the topic."""
    topic = f"{cfg.namespace}.__positions"
    key = cfg.source.name.encode()
    deadline = time.monotonic() + timeout
    seen: Optional[Position] = None
    while True:
        records, _ = read_topic_tail(cfg.kafka, topic, tail=CHECKPOINT_TAIL)
        for k, value in records:
            if k == key and value is not None:
                seen = Position.from_json(value)
        # At or past the target, inside a transaction or not: a transaction that starts there
        # began after the read.
        if seen is not None and (seen.file, seen.pos) >= target:
            return seen
        if time.monotonic() > deadline:
            where = seen.describe() if seen is not None else "none"
            raise AuditFailed(
                f"the streamer's checkpoint ({where}) has not reached {target[0]}:{target[1]}, "
                f"where the table was read, in {timeout:.0f} s: is the streamer of source "
                f"{cfg.source.name!r} running and caught up? (--timeout)")
        sleep(0.5)


class TopicSide:
    """The topic's materialized state, followed as far as it has been read."""

    def __init__(self, cfg: Config, topic: str, decoder: Decoder, store: Store) -> None:
        self.reader = TopicReader(cfg.kafka, topic)
        self.decoder = decoder
        self.store = store
        self.records = 0

    def follow(self, progress: Optional[Any] = None) -> None:
        ends = self.reader.ends()
        if progress is not None:
            progress.reset(total=max(0, sum(ends.values()) - sum(self.reader.next.values())))
        for part, offset, key, value in self.reader.read(ends):
            self.records += 1
            if progress is not None:
                progress.update(1)
            try:
                self._apply(part, key, value)
            except UndecodableMessage as exc:
                raise UndecodableMessage(f"{self.reader.topic} partition {part} offset {offset}: "
                                         f"{exc}") from None

    def _apply(self, part: int, key: Optional[bytes], value: Optional[bytes]) -> None:
        if value is None:
            if key is not None:
                self.store.apply(part, canonical(self.decoder.decode(key)), None, False)
            return
        env = self.decoder.decode(value)
        op = env["op"]
        if op == "t":
            self.store.apply(part, None, None, True)
        elif key is None:
            return  # a keyless message (no primary key): check() refused such tables
        elif op == "d":
            self.store.apply(part, canonical(self.decoder.decode(key)), None, False)
        else:
            self.store.apply(part, canonical(self.decoder.decode(key)), digest(env["after"]),
                             False)


def _decoder(cfg: Config, tv: TableVersion) -> Decoder:
    """Decodes the topic's messages (their schemas from the schema topic) and the table side's
    (its current version's schemas, which the topic may not have yet)."""
    own = {tv.value_writer.fingerprint.hex(): tv.value_schema}
    if tv.key_writer is not None:
        own[tv.key_writer.fingerprint.hex()] = tv.key_schema
    return Decoder(kafka_schema_source(cfg.kafka, cfg.namespace), known=own)


def _version(cfg: Config, described: chunks.Described) -> TableVersion:
    records = read_schema_records(cfg.kafka, cfg.namespace)
    catalog = TableCatalog(cfg.namespace, TableFilter.streamed(cfg),
                           lineage=evolution.lineage_from_records(records),
                           rules=ColumnRules.from_config(cfg, config_mod.mask_salt(cfg)),
                           topics=TopicNames.from_config(cfg))
    return catalog.snapshot_version(described)


def audit(cfg: Config, table: str, condition: Optional[str] = None,
          timeout: float = 300.0, bars: bool = False, log: Any = None) -> Dict[str, Any]:
    """Compare ``table`` (db.table) with its topic; the report (see ``report``)."""
    log = log if log is not None else sys.stderr
    conn = server.connect(server.connection_settings(cfg, config_mod.mysql_password(cfg)))
    workdir = tempfile.mkdtemp(prefix="streamer-audit-")
    store = Store(os.path.join(workdir, "digests.sqlite"))
    try:
        chunks.session(conn)
        check(conn, cfg, [table], condition)
        db, _, name = table.partition(".")
        described = chunks.describe(conn, db, name)
        assert described is not None  # check() said it exists
        primary = [c.name for c in described.columns if c.is_primary]
        if not primary:
            raise SnapshotRefused(f"table {table} has no primary key: its messages have no key, "
                                  f"so the topic can't be matched with the table row by row")
        tv = _version(cfg, described)
        decoder = _decoder(cfg, tv)
        side = TableSide(conn, described, tv, decoder)
        topic = TopicSide(cfg, tv.topic, decoder, store)
        started = time.monotonic()
        bar = _bar(bars, f"{table} (table)", described.estimate, "rows")
        for rows in side.chunks(condition):
            store.put_rows(rows)
            if bar is not None:
                bar.update(len(rows))
        if bar is not None:
            bar.close()
        wait_for_streamer(cfg, _source_position(conn), timeout)
        bar = _bar(bars, f"{tv.topic} (topic)", 0, "msgs")
        topic.follow(bar)
        if bar is not None:
            bar.close()
        extras = not condition  # with --where the table side is a part: topic keys outside it
        found, rechecks = _rechecked(cfg, conn, store, side, topic, condition, extras, timeout,
                                     log)
        return report(table, tv.topic, store, found, rechecks, topic.records,
                      time.monotonic() - started, extras)
    finally:
        store.close()
        conn.close()
        for f in os.listdir(workdir):
            os.unlink(os.path.join(workdir, f))
        os.rmdir(workdir)


def _rechecked(cfg: Config, conn: Any, store: "Store", side: Any, topic: Any,
               condition: Optional[str], extras: bool, timeout: float, log: Any
               ) -> Tuple[Dict[str, List[str]], int]:
    """The differences, after up to RECHECKS reads again of the keys that differ (a change in
    flight between the two reads is no difference); and how many rechecks it took."""
    found = store.differences(False, extras)
    rechecks = 0
    while any(found.values()) and rechecks < RECHECKS:
        rechecks += 1
        keys = sorted(set(found["missing"]) | set(found["different"]) | set(found["extra"]))
        print(f"audit: {len(keys)} keys differ; reading them again (recheck {rechecks} of "
              f"{RECHECKS}) after the streamer passes the read", file=log, flush=True)
        store.candidates(keys)
        if side.hashed_key:
            # The keys are hashes, which can't be looked up: the whole table is read again.
            store.db.execute("DELETE FROM tbl")
            for rows in side.chunks(condition):
                store.put_rows(rows)
        else:
            store.db.execute("DELETE FROM tbl WHERE pk IN (SELECT pk FROM cand)")
            store.put_rows(side.reread(keys, condition))
        wait_for_streamer(cfg, _source_position(conn), timeout)
        topic.follow()
        found = store.differences(True, extras)
    return found, rechecks


def report(table: str, topic: str, store: Store, found: Dict[str, List[str]], rechecks: int,
           records: int, seconds: float, extras: bool) -> Dict[str, Any]:
    return {"table": table, "topic": topic, "rows": store.count("tbl"),
            "topic_keys": store.count("topic"), "topic_records": records,
            "missing": [json.loads(k) for k in found["missing"]],
            "extra": [json.loads(k) for k in found["extra"]] if extras else None,
            "different": [json.loads(k) for k in found["different"]],
            "rechecks": rechecks, "seconds": round(seconds, 1),
            "equal": not any(found.values())}


def summary(r: Dict[str, Any]) -> str:
    extra = "not checked (--where)" if r["extra"] is None else str(len(r["extra"]))
    verdict = "EQUAL" if r["equal"] else "DIFFERENT"
    return (f"audit of {r['table']} against {r['topic']}: {verdict}: {r['rows']} rows, "
            f"{r['topic_keys']} keys in the topic ({r['topic_records']} records read); "
            f"{len(r['missing'])} missing, {extra} extra, {len(r['different'])} different "
            f"({r['rechecks']} rechecks, {r['seconds']} s)")


def print_report(r: Dict[str, Any], as_json: bool, out: Any = None) -> int:
    out = out if out is not None else sys.stdout
    if as_json:
        print(json.dumps(r, sort_keys=True, default=str), file=out)
    else:
        for kind in ("missing", "extra", "different"):
            keys = r[kind] or []
            for k in keys[:SHOWN]:
                print(f"{kind} {json.dumps(k, sort_keys=True, default=str)}", file=out)
            if len(keys) > SHOWN:
                print(f"... and {len(keys) - SHOWN} more {kind} keys (--json lists them all)",
                      file=out)
        print(summary(r), file=out)
    return 0 if r["equal"] else 1


def _bar(enabled: bool, desc: str, total: int, unit: str) -> Any:
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total or None, desc=desc, unit=unit, unit_scale=True, file=sys.stderr,
                dynamic_ncols=True)

