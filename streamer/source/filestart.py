"""The GTIDs a binlog file begins after: MySQL's Previous_gtids event, MariaDB's Gtid_list.

Each binlog file opens, after its format description, with the GTIDs of the transactions
written before it: MySQL's ``Previous_gtids`` (type 35, every transaction executed),
MariaDB's ``Gtid_list`` (type 163, the binlog state: the last sequence number per domain and
server id). A stream begun by a GTID set resumes by it (``Position.by_gtid``) until a file it
reads after a real rotate begins after every transaction it published: none of them can come
later in that server's binlog, and a resume by file is safe again (engine.tracker).

Their layouts, as the servers' sources write them (read whole here; python-mysql-replication's
reading of the first made its text from a Python list, and of the second kept the flags in the
count):

- ``Previous_gtids``: the number of uuids (8 bytes, little-endian), then for each the uuid
  (16 bytes), its number of intervals (8 bytes) and each interval's first and past-the-last
  transaction numbers (8 bytes each). MySQL 8.3+ writes a set holding tagged GTIDs in another
  format, which the number's top byte tells: not read (``holds`` is then never true).
- ``Gtid_list``: a count (4 bytes: the low 28 bits; the top 4 are flags), then for each entry
  its domain (4 bytes), server id (4) and sequence number (8).
"""
from __future__ import annotations

import struct
import uuid as uuid_mod
from typing import Any, Dict, List, Optional, Tuple

from pymysqlreplication.event import BinLogEvent

from streamer.position import GtidSet

PREVIOUS_GTIDS = 35
GTID_LIST = 163
_U64 = struct.Struct("<Q")
_ENTRY = struct.Struct("<IIQ")


def previous_gtids(body: bytes) -> Optional[GtidSet]:
    """The set a Previous_gtids event's body holds; None in a format not read (tagged)."""
    (n_sids,) = _U64.unpack_from(body, 0)
    if n_sids >> 56:
        return None
    parts = []
    at = 8
    for _ in range(n_sids):
        sid = str(uuid_mod.UUID(bytes=bytes(body[at:at + 16])))
        (n_intervals,) = _U64.unpack_from(body, at + 16)
        at += 24
        for _ in range(n_intervals):
            start, end = struct.unpack_from("<QQ", body, at)
            at += 16
            if end > start:
                parts.append(f"{sid}:{start}-{end - 1}")
    return GtidSet(",".join(parts))  # as gtid_executed writes it, read the one way


def gtid_list(body: bytes) -> Dict[Tuple[int, int], int]:
    """A Gtid_list event's entries: (domain, server id) -> its last sequence number."""
    count = struct.unpack_from("<I", body, 0)[0] & ((1 << 28) - 1)
    out: Dict[Tuple[int, int], int] = {}
    for i in range(count):
        domain, server_id, seq = _ENTRY.unpack_from(body, 4 + 16 * i)
        out[(domain, server_id)] = max(seq, out.get((domain, server_id), 0))
    return out


class FileStart(BinLogEvent):
    """A binlog file's first GTID state, of either server. ``holds(gtids)``: whether every
    transaction of ``gtids`` was written before the file."""

    def __init__(self, from_packet: Any, event_size: int, table_map: Any, ctl_connection: Any,
                 **kwargs: Any) -> None:
        super().__init__(from_packet, event_size, table_map, ctl_connection, **kwargs)
        body = self.packet.read(event_size)
        self.mysql: Optional[GtidSet] = None
        self.mariadb: Optional[Dict[Tuple[int, int], int]] = None
        try:
            if from_packet.event_type == PREVIOUS_GTIDS:
                self.mysql = previous_gtids(body)
            else:
                self.mariadb = gtid_list(body)
        except (struct.error, ValueError):
            pass  # not read: holds nothing, and the stream goes on resuming by its set

    def holds(self, gtids: GtidSet) -> bool:
        if self.mysql is not None:
            return not gtids.mariadb and self.mysql.contains(gtids)
        if self.mariadb is not None:
            # By domain and server id, as the binlog state keeps them: the transaction the set
            # ends each domain with was written before the file.
            return not gtids.mysql and all(
                self.mariadb.get((domain, server_id), -1) >= seq
                for domain, (server_id, seq) in gtids.mariadb.items())
        return False

    def domains_gone(self, gtids: GtidSet) -> List[int]:
        """MariaDB: the domains of ``gtids`` this file's state has none of, when it still has
        the others, each as far (``deleted_domains``); else none."""
        if self.mariadb is None:
            return []
        state: Dict[int, int] = {}
        for (domain, _), seq in self.mariadb.items():
            state[domain] = max(seq, state.get(domain, 0))
        return deleted_domains(gtids, state)


def last_seqs(gtids: GtidSet) -> Dict[int, int]:
    """A MariaDB GTID set's last sequence number of each domain."""
    return {domain: seq for domain, (_, seq) in gtids.mariadb.items()}


def deleted_domains(gtids: GtidSet, state: Dict[int, int]) -> List[int]:
    """The MariaDB GTID domains of ``gtids`` that a binlog state (domain -> its last sequence
    number) has none of, as FLUSH BINARY LOGS DELETE_DOMAIN_ID leaves it: only once no binlog
    file holds a transaction of theirs, the other domains going on. None when no other domain
    of ``gtids`` is in the state, or one is behind there: a binlog begun anew (RESET MASTER)
    lost them all, or has written less in them (source.resetguard). A server that never had
    them lacks them as well: ``source.failover.deletion_proven`` tells the two apart."""
    gone = sorted(d for d in gtids.mariadb if d not in state)
    kept = [(d, seq) for d, (_, seq) in gtids.mariadb.items() if d in state]
    if not gone or not kept or any(state[d] < seq for d, seq in kept):
        return []
    return gone


EVENT_MAP = {PREVIOUS_GTIDS: FileStart, GTID_LIST: FileStart}
