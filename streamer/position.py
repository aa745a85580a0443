"""Where the stream is: a GTID set, the start of the current transaction and rows already published.

Resume always seeks to a transaction start (never to a row event, where python-mysql-replication
would silently drop rows until the next table map) and skips the rows of that transaction that the
previous run already published.
"""
from __future__ import annotations

import json
import re
import time
from typing import Any, Dict, List, Optional, Tuple


class Position:
    """A binlog position with the GTID set and the rows of its transaction already published.

    A plain class, not a dataclass: ``dataclasses`` imports ``inspect``, ~10 ms of a PyPy start,
    and under PyPy nothing else that ``run`` imports needs them."""

    __slots__ = ("file", "pos", "gtid_set", "rows", "server_id", "ts", "snapshot", "transaction",
                 "tx_gtid", "server_uuid", "xa", "run", "awaited", "by_gtid")
    __hash__ = None  # type: ignore[assignment]  # mutable: compared by value, never a dict key

    def __init__(self, file: str, pos: int, gtid_set: str = "", rows: int = 0,
                 server_id: int = 0, ts: Optional[float] = None,
                 snapshot: Optional[Dict[str, Any]] = None,
                 transaction: Optional[Dict[str, Any]] = None, tx_gtid: str = "",
                 server_uuid: str = "", xa: Optional[Dict[str, List[Any]]] = None,
                 run: str = "", awaited: Optional[Dict[str, Dict[str, Any]]] = None,
                 by_gtid: bool = False) -> None:
        self.file = file
        self.pos = pos
        self.gtid_set = gtid_set
        self.rows = rows
        self.server_id = server_id
        self.ts = time.time() if ts is None else ts
        # The progress of the snapshots under way (engine.snapshot), committed with the position.
        self.snapshot = snapshot
        # The open source transaction's BEGIN and counts so far (engine.txmeta), when the
        # position is inside one and transaction metadata is on.
        self.transaction = transaction
        # The GTID of the transaction the position is inside (rows > 0), when it has one: on
        # another server, resumed by GTID set, the rows to skip are that transaction's, wherever
        # it comes in that server's binlog (source.failover).
        self.tx_gtid = tx_gtid
        # MySQL's server_uuid of the server read ("" on MariaDB): with server_id, which server's
        # binlog the file and offset are a place in (source.failover).
        self.server_uuid = server_uuid
        # The XA transactions prepared before the position and not yet committed or rolled back:
        # xid -> [file, offset, GTID, txid] of the group that prepared them, read again at their
        # XA COMMIT to publish their rows then (engine.stages.xa); a fifth field, the row changes
        # of it already published when a batch was cut inside its XA COMMIT.
        self.xa = xa
        # The process that committed it (kafka.transactions): a producer being replaced tells
        # a newer instance's checkpoint from its own.
        self.run = run
        # Other transactions whose first rows were published and that the stream has not come
        # to again: after a failover, a resume by GTID set skips into them wherever they come,
        # and the new server may send another domain's first (engine.tracker). GTID ->
        # {"rows": row changes already published, "transaction": its metadata's counts, if on}.
        self.awaited = awaited
        # Resume by the GTID set, not the file and offset (engine.tracker): the stream began by
        # a GTID set (a failover, --start-gtid, mysql.position_mode gtid), and this server may
        # have written transactions of that set after the offset, as out-of-order parallel or
        # multi-source replication leaves a binlog: a resume by offset would publish them
        # again, where a dump by the set leaves them out.
        self.by_gtid = by_gtid

    def _fields(self) -> Dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Position:
            return NotImplemented
        return self._fields() == other._fields()  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return "Position(" + ", ".join(f"{k}={v!r}" for k, v in self._fields().items()) + ")"

    def to_json(self) -> bytes:
        fields = self._fields()
        for name in ("snapshot", "transaction", "tx_gtid", "server_uuid", "xa", "run", "awaited",
                     "by_gtid"):
            if not fields[name]:
                del fields[name]  # a checkpoint without them reads as it always did
        return json.dumps(fields, sort_keys=True).encode("utf-8")

    @classmethod
    def from_json(cls, raw: bytes) -> "Position":
        data = json.loads(raw)
        return cls(file=data["file"], pos=int(data["pos"]), gtid_set=data.get("gtid_set", ""),
                   rows=int(data.get("rows", 0)), server_id=int(data.get("server_id", 0)),
                   ts=float(data.get("ts", 0.0)), snapshot=data.get("snapshot"),
                   transaction=data.get("transaction"), tx_gtid=data.get("tx_gtid", ""),
                   server_uuid=data.get("server_uuid", ""), xa=data.get("xa"),
                   run=data.get("run", ""), awaited=data.get("awaited"),
                   by_gtid=bool(data.get("by_gtid", False)))

    def describe(self) -> str:
        extra = f" +{self.rows} rows" if self.rows else ""
        if self.awaited:
            n = len(self.awaited)
            extra += f" (and rows of {n} more transaction{'s' if n > 1 else ''}, by GTID)"
        gtid = f" gtid={self.gtid_set}" if self.gtid_set else ""
        snap = ""
        if self.snapshot and self.snapshot.get("queue"):
            job = self.snapshot["queue"][0]
            snap = (f" (snapshot of {job['table']} at chunk {job['chunk']}, "
                    f"{len(self.snapshot['queue']) - 1} more tables queued)")
        if not self.file:  # a start by GTID set alone
            return f"after GTID set {self.gtid_set or '(empty)'}{extra}{snap}"
        by = " (resumed by the GTID set)" if self.by_gtid and self.gtid_set else ""
        return f"{self.file}:{self.pos}{extra}{gtid}{by}{snap}"


class GtidSet:
    """Executed-GTID tracking for both flavours.

    MariaDB GTIDs are ``domain-server-seq`` and a set keeps the last seq per domain. MySQL GTIDs are
    ``uuid:n`` and a set keeps intervals per uuid. MySQL 8.3+ may tag a GTID (``uuid:tag:n``,
    a tag being up to 32 letters, digits and underscores, not starting with a digit, compared
    without case): the tagged ones of a uuid are kept apart, under ``uuid:tag``, and a set is
    written ``uuid:1-5:tag:1-3`` as the server writes it.
    """

    def __init__(self, text: str = ""):
        self.mariadb: Dict[int, Tuple[int, int]] = {}
        self.mysql: Dict[str, list] = {}
        for part in (p.strip() for p in text.replace("\n", "").split(",")):
            if not part:
                continue
            if ":" in part:
                uuid, *fields = part.split(":")
                key = uuid.lower()
                for field in fields:
                    field = field.strip()
                    if _TAG.match(field):
                        key = f"{uuid.lower()}:{field.lower()}"
                        continue
                    lo, _, hi = field.partition("-")
                    self._add_mysql_range(key, int(lo), int(hi or lo))
            else:
                d, s, n = (int(x) for x in part.split("-"))
                self.mariadb[d] = (s, n)

    def _add_mysql_range(self, uuid: str, lo: int, hi: int) -> None:
        ivs = self.mysql.setdefault(uuid, [])
        ivs.append([lo, hi])
        ivs.sort()
        merged = [ivs[0]]
        for a, b in ivs[1:]:
            if a <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        self.mysql[uuid] = merged

    def add(self, gtid: str) -> None:
        if ":" in gtid:
            key, _, n = gtid.rpartition(":")
            self._add_mysql_range(key.lower(), int(n), int(n))
        else:
            d, s, n = (int(x) for x in gtid.split("-"))
            self.mariadb[d] = (s, n)

    def discard(self, gtid: str) -> None:
        """Take one MySQL transaction (``uuid:n``, ``uuid:tag:n``) out of the set."""
        key, _, n = gtid.rpartition(":")
        key, gno = key.lower(), int(n)
        kept = [[a, b] for lo, hi in self.mysql.get(key, []) for a, b in
                _subtract(lo, hi, [[gno, gno]])]
        if kept:
            self.mysql[key] = kept
        else:
            self.mysql.pop(key, None)

    def drop_domains(self, domains: List[int]) -> None:
        """Take MariaDB GTID domains out of the set (deleted from the server's binlog:
        source.failover.deletion_proven)."""
        for domain in domains:
            self.mariadb.pop(domain, None)

    def missing(self, other: "GtidSet") -> List[str]:
        """The transactions of ``other`` that this set lacks, as ranges to show: MariaDB
        ``domain D: seq A..B`` (or the whole domain), MySQL ``uuid:A-B``."""
        out = []
        for domain, (server, seq) in sorted(other.mariadb.items()):
            mine = self.mariadb.get(domain)
            if mine is None:
                out.append(f"domain {domain}: every transaction up to {domain}-{server}-{seq}")
            elif mine[1] < seq:
                first = mine[1] + 1
                span = f"seq {first}" if first == seq else f"seq {first}..{seq}"
                out.append(f"domain {domain}: {span} (up to {domain}-{server}-{seq}; the "
                           f"server has {domain}-{mine[0]}-{mine[1]})")
        for uuid, ivs in sorted(other.mysql.items()):
            have = self.mysql.get(uuid, [])
            for lo, hi in ivs:
                for a, b in _subtract(lo, hi, have):
                    out.append(f"{uuid}:{a}" if a == b else f"{uuid}:{a}-{b}")
        return out

    def contains(self, other: "GtidSet") -> bool:
        """Whether every transaction ``other`` stands for is in this set: MariaDB, per domain, a
        sequence number at least as high; MySQL, every interval covered."""
        for domain, (_, seq) in other.mariadb.items():
            mine = self.mariadb.get(domain)
            if mine is None or mine[1] < seq:
                return False
        for uuid, ivs in other.mysql.items():
            mine_ivs = self.mysql.get(uuid, [])
            for lo, hi in ivs:
                if not any(a <= lo and hi <= b for a, b in mine_ivs):
                    return False
        return True

    def __str__(self) -> str:
        parts = [f"{d}-{s}-{n}" for d, (s, n) in sorted(self.mariadb.items())]
        by_uuid: Dict[str, str] = {}
        for key, ivs in sorted(self.mysql.items()):
            uuid, _, tag = key.partition(":")
            text = "".join(f":{a}" if a == b else f":{a}-{b}" for a, b in ivs)
            by_uuid[uuid] = by_uuid.get(uuid, uuid) + (f":{tag}" if tag else "") + text
        parts.extend(by_uuid[u] for u in sorted(by_uuid))
        return ",".join(parts)


_TAG = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,31}$")
_UUID = re.compile(r"^[0-9A-Fa-f]{8}(-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}$")
_INTERVAL = re.compile(r"^([0-9]+)(?:-([0-9]+))?$")
_MARIADB_GTID = re.compile(r"^[0-9]+-[0-9]+-[0-9]+$")
GTID_SET_FORMS = ("MariaDB's domain-server-seq per domain (SELECT @@gtid_binlog_pos) or MySQL's "
                  "uuid:1-5 per server (SELECT @@gtid_executed), comma-separated")


def gtid_set_problem(text: str) -> Optional[str]:
    """What keeps ``text`` from being a GTID set of one flavour (GTID_SET_FORMS), in words;
    None when it is one (the empty set too)."""
    flavours = set()
    for part in (p.strip() for p in text.replace("\n", "").split(",")):
        if not part:
            continue
        if ":" not in part:
            if not _MARIADB_GTID.match(part):
                return f"{part!r} is neither a MariaDB GTID nor a MySQL uuid:interval"
            flavours.add("MariaDB")
            continue
        flavours.add("MySQL")
        uuid, *fields = part.split(":")
        if not _UUID.match(uuid.strip()):
            return f"{uuid.strip()!r} in {part!r} is not a server uuid"
        intervals = 0
        for field in (f.strip() for f in fields):
            if _TAG.match(field):
                continue
            m = _INTERVAL.match(field)
            if m is None or int(m.group(1)) < 1 or int(m.group(2) or m.group(1)) < int(m.group(1)):
                return (f"{field!r} in {part!r} is not an interval of transaction numbers (n or "
                        f"n-m, 1 <= n <= m)")
            intervals += 1
        if not intervals:
            return f"{part!r} names no transactions"
    if len(flavours) > 1:
        return "it mixes MariaDB's GTIDs and MySQL's"
    return None


def _subtract(lo: int, hi: int, have: List[List[int]]) -> List[Tuple[int, int]]:
    """The parts of [lo, hi] outside the sorted, merged intervals ``have``."""
    out = []
    for a, b in have:
        if b < lo or a > hi:
            continue
        if a > lo:
            out.append((lo, a - 1))
        lo = b + 1
        if lo > hi:
            return out
    out.append((lo, hi))
    return out
