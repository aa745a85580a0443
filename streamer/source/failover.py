"""Source failover: the servers of ``mysql.hosts``, the one in use, and what resuming on another
server must check first.

The server in use is ``mysql.host``/``mysql.port`` of the config. Every connection reads them when
it connects (the binlog stream, the probe, the heartbeat, the snapshots), so a switch reaches
each of them at its next connect.

When to switch: a dropped stream is resumed on the same server first (a restart or a network
blip is not a failover). A server that can't be connected to gives way to the next one in the
list, with the reconnect backoff between attempts (``engine.loop``).

Resuming on another server: a checkpoint's file and offset are a place in the binlog of the server
it was written reading (``Position.server_id``), and mean nothing on another one. There the
stream resumes by the checkpoint's GTID set, which is complete (``engine.start``). The server's
binlog must hold every transaction of that set first: one that lacks some (an asynchronous
replica promoted before it received them) holds none of the changes Kafka already has from
them, and it would hand their sequence numbers to new transactions. That is refused
(``ServerBehind``), naming the missing ranges. With several servers, one found behind gives way
to the next; when every server was found behind since the stream last worked, the streamer stops.

The rows of a transaction the checkpoint is inside are skipped by that transaction's GTID
(``Position.tx_gtid``, ``engine.tracker``), wherever it comes in the new server's binlog. With
several GTID domains the new server may send other domains' transactions first; a checkpoint
inside one of them keeps the skip still awaited beside its own (``Position.awaited``).
"""
from __future__ import annotations

import copy
import logging
from typing import Any, Callable, Dict, List, Optional, Tuple

from streamer.config import Config, split_host
from streamer.errors import ServerBehind, SourceError
from streamer.position import GtidSet, Position
from streamer.source import server
from streamer.source.filestart import deleted_domains, last_seqs

log = logging.getLogger(__name__)


class Servers:
    """The ordered ``mysql.hosts``; ``next`` moves ``mysql.host``/``port`` to the next one."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.names: List[str] = list(cfg.mysql.hosts)
        self.hosts: List[Tuple[str, int]] = [split_host(h, cfg.mysql.port) for h in self.names]
        self.index = 0
        self.behind: Dict[str, str] = {}  # server -> what it lacks, since streaming last worked
        self.switches = 0
        # The checkpoint committed last (a callable reading it), and which it was as the
        # connection in use began.
        self._committed: Callable[[], Any] = lambda: None
        self._connected_at: Any = None

    @property
    def current(self) -> str:
        return self.names[self.index]

    def next(self) -> bool:
        """Move to the next server (the caller says why, and when it is tried); False when
        there is no other."""
        if len(self.hosts) < 2:
            return False
        self.index = (self.index + 1) % len(self.hosts)
        host, port = self.hosts[self.index]
        self.cfg.set("mysql.host", host)
        self.cfg.set("mysql.port", port)
        self.switches += 1
        return True

    def refused(self, exc: ServerBehind) -> None:
        """The server in use lacks transactions of the checkpoint: the next one is tried,
        unless every server was found so since streaming last worked (then the error is raised,
        naming what each lacks)."""
        self.behind[self.current] = str(exc)
        if len(self.behind) >= len(self.hosts):
            if len(self.hosts) == 1:
                raise exc
            raise ServerBehind("no server of mysql.hosts has every transaction of the checkpoint: "
                               + " | ".join(self.behind.values()))
        self.next()

    def worked(self) -> None:
        """Streaming worked: a server found behind before may have caught up since."""
        self.behind.clear()

    def connecting(self, committed: Callable[[], Any]) -> None:
        """A connection to the server in use begins; ``committed`` reads the checkpoint the
        publisher committed last."""
        self._committed = committed
        self._connected_at = committed()

    def found_behind(self) -> List[str]:
        """The servers found behind since streaming last worked, as /status shows them: none
        once the connection in use has committed (streaming works: they may have caught up
        since, and are tried again when it is lost)."""
        if self._committed() is not self._connected_at:
            return []
        return sorted(self.behind)


def translated(start: Position, server_id: int, where: str, uuid: str = "") -> Position:
    """``start``, written reading server ``start.server_id``, as a start on the server
    ``server_id`` (MySQL: with server_uuid ``uuid``): by its GTID set alone."""
    if not start.gtid_set:
        raise SourceError(
            f"the checkpoint {start.describe()} was written reading the server with server_id "
            f"{start.server_id}{_uuid(start.server_uuid)}, and {where} has server_id "
            f"{server_id}{_uuid(uuid)}; the checkpoint carries no "
            f"GTID set, so its place in this server's binlog is unknown. If this is the same "
            f"server with a new server_id, restart once with --start-file {start.file} "
            f"--start-pos {start.pos}; otherwise enable GTIDs on the source (gtid_mode=ON)")
    log.warning("%s has server_id %d, and the checkpoint %s was written reading server_id %d: "
                "resuming there by the checkpoint's GTID set", where, server_id, start.describe(),
                start.server_id)
    return Position("", 4, start.gtid_set, start.rows, server_id, start.ts, start.snapshot,
                    start.transaction, start.tx_gtid, uuid, xa=start.xa, awaited=start.awaited)


def translated_xa(conn: Any, xa: Optional[Dict[str, List[Any]]], where: str
                  ) -> Optional[Dict[str, List[Any]]]:
    """The prepared XA transactions of a checkpoint written reading another server, each placed
    in this server's binlog by its GTID: their rows are read again there at their XA COMMIT. One
    that can't be found (no GTID, or not in this server's binlog files) is refused, naming it:
    its rows could not be published at its commit."""
    if not xa:
        return xa
    out: Dict[str, List[Any]] = {}
    for xid, entry in xa.items():
        gtid = entry[2] if len(entry) > 2 else ""
        found = server.locate_gtid(conn, gtid) if gtid else None
        if found is None:
            raise SourceError(
                f"the XA transaction {xid}, prepared at {entry[0]}:{entry[1]} on the server the "
                f"checkpoint was written reading, is not committed yet, and {where} "
                f"{'has no binlog event of its GTID ' + gtid if gtid else 'can only be told it by a GTID, which it has none of'}: "
                f"its rows could not be published at its XA COMMIT. Resume on a server whose "
                f"binlog holds its XA PREPARE, or restart once from a position before it")
        out[xid] = [found[0], found[1], *entry[2:]]
        log.info("the XA transaction %s prepared before the checkpoint is at %s:%d on %s",
                 xid, found[0], found[1], where)
    return out


def _uuid(uuid: str) -> str:
    return f" (server_uuid {uuid})" if uuid else ""


def check_identity(conn: Any, start: Position, where: str) -> Position:
    """Refuse a file/offset resume on a binlog that is not the one the checkpoint was written
    reading, although the server has the same server_id (a RESET MASTER, or a config now pointing
    at another server). The checkpoint's GTID set is the identity: it must lie between the GTID
    set its file opens with and the set the server's binlog holds now. Both are read cheaply (the
    file's first events and a variable), where MariaDB's BINLOG_GTID_POS would scan the file: it
    is asked only when they find the checkpoint outside, for a domain numbered out of order
    (``place_proven``). The start to resume from: ``start``, or, after a MariaDB domain's
    deletion, without it (``without_deleted_domains``)."""
    if not start.gtid_set or not start.file:
        return start
    mine = GtidSet(start.gtid_set)
    opening = GtidSet(server.file_gtids(conn, start.file) or "")
    # Only the domains (MySQL: server uuids) the checkpoint has: one written before checkpoints
    # carried the server's whole set may lack old ones, which says nothing of its history.
    opening.mariadb = {d: v for d, v in opening.mariadb.items() if d in mine.mariadb}
    opening.mysql = {u: v for u, v in opening.mysql.items() if u in mine.mysql}
    before = mine.missing(opening)
    have = server.binlog_gtids(conn)
    after = GtidSet(have).missing(mine)
    if not before and not after:
        return start
    if not before:
        kept = without_deleted_domains(conn, start, where)
        if kept is not start:
            return kept
    if place_proven(conn, start.file, start.pos, mine):
        out_of_order(where, start)
        return start
    why = (f"the file opens after transactions the checkpoint never saw ({'; '.join(before)})"
           if before else f"the server's binlog lacks transactions the checkpoint has "
                          f"({'; '.join(after)}; the server has {have or 'none'})")
    raise SourceError(
        f"the checkpoint {start.describe()} is not a place in the binlog of {where}, although the "
        f"server has the checkpoint's server_id {start.server_id}: {why}. The binlog was reset "
        f"(RESET MASTER), or mysql.host now points at another server with the same server_id. "
        f"Reading {start.file} at {start.pos} there would publish the wrong changes. If this "
        f"server has every transaction of the checkpoint under other files, resume by GTID "
        f"(mysql.position_mode: gtid); otherwise take a snapshot of the tables and restart from "
        f"a new position (streamer run --start-file/--start-pos)")


def without_deleted_domains(conn: Any, start: Position, where: str) -> Position:
    """The checkpoint ``start`` without the MariaDB GTID domains the server deleted from its
    binlog (FLUSH BINARY LOGS DELETE_DOMAIN_ID): all the server lacks of it is those domains,
    and the server's binlog shows it had them as the checkpoint read them
    (``deletion_proven``). Else ``start`` itself, for the checks that follow to judge."""
    mine = GtidSet(start.gtid_set)
    if not mine.mariadb:
        return start
    gone = deleted_domains(mine, last_seqs(GtidSet(server.binlog_gtids(conn))))
    if not gone or not deletion_proven(conn, mine, gone, start.file):
        return start
    kept = copy.copy(start)
    mine.drop_domains(gone)
    kept.gtid_set = str(mine)
    log.warning("%s no longer has GTID domain %s in its binlog (FLUSH BINARY LOGS "
                "DELETE_DOMAIN_ID), which the checkpoint %s had read as far as its binlog "
                "had it: the stream resumes without it", where, ", ".join(map(str, gone)),
                start.describe())
    return kept


def deletion_proven(conn: Any, gtids: GtidSet, gone: List[int], file: Optional[str]) -> bool:
    """Whether the server's binlog had each domain of ``gone`` exactly as far as ``gtids``:
    its oldest file, or ``file``, opens with the domain's GTID there in its Gtid_list (one
    per domain and server id). MariaDB deletes a domain only once no binlog file holds a
    transaction of it, so the files kept open with its last GTID until the deletion's own; a
    server that never had the domain (another one, or a reset's) has no such file."""
    files = server.binlog_files(conn)
    entries: set = set()
    for name in dict.fromkeys(files[:1] + ([file] if file in files else [])):
        entries.update((server.file_gtids(conn, name) or "").split(","))
    return all(f"{d}-{gtids.mariadb[d][0]}-{gtids.mariadb[d][1]}" in entries for d in gone)


def place_proven(conn: Any, file: Optional[str], pos: int, gtids: GtidSet) -> bool:
    """Whether offset ``pos`` of ``file`` in a MariaDB server's binlog is where the GTID
    position ``gtids`` was read: the server's own BINLOG_GTID_POS there names, for each domain
    of ``gtids``, the very GTID. It proves a binlog whose position is below ``gtids`` holds them
    all the same. Without gtid_strict_mode (MariaDB's default) a transaction given a lower
    sequence number (SET gtid_seq_no, as a replayed mysqlbinlog dump does; a second master
    writing the domain) is logged after higher ones, and the server's position then names that
    lower one. A reset binlog, or another server's, has other GTIDs at ``pos``, or no event
    boundary there (NULL). BINLOG_GTID_POS reads the file up to ``pos``: this runs only once the
    cheap checks found the binlog behind. MySQL's GTID sets have no order: never proven."""
    if not file or not gtids.mariadb or gtids.mysql or not server.is_mariadb(conn):
        return False
    there = server.executed_gtids(conn, file, pos)
    found = GtidSet(there or "").mariadb
    return there is not None and all(found.get(d) == v for d, v in gtids.mariadb.items())


def out_of_order(where: str, start: Position) -> None:
    """Say that a MariaDB binlog behind the stream's GTID position by its numbers holds the
    stream's place all the same (``place_proven``)."""
    log.warning("%s numbers a GTID domain's transactions out of order (a lower sequence number "
                "logged after higher ones, as it allows without gtid_strict_mode), so its GTID "
                "position is below the stream's by number; BINLOG_GTID_POS at the stream's "
                "place is the stream's position: resuming from %s by file", where,
                start.describe(), extra={"position": start.describe()})


def other_server(start: Position, here_id: int, here_uuid: str) -> bool:
    """Whether the checkpoint ``start`` was written reading another server than this one: a
    different server_id, or (MySQL) the same server_id with a different server_uuid."""
    if start.server_id and here_id != start.server_id:
        return True
    return bool(start.server_uuid and here_uuid and here_uuid != start.server_uuid)


def begun(start: Position) -> str:
    """The transactions whose first rows were published, as a GTID set ("" if none): the one
    the checkpoint ``start`` is inside, and any it awaits. A server must hold them as well as
    the checkpoint's set, or their published rows would stay in Kafka with no rest to come."""
    wanted = GtidSet("")
    inside = [start.tx_gtid] if start.rows and start.tx_gtid else []
    for gtid in inside + [g for g in (start.awaited or ()) if g]:
        wanted.add(gtid)
    return str(wanted)


def another_kinds(conn: Any, gtids: str, where: str) -> Optional[str]:
    """Why the GTID set ``gtids`` can't be this server's when it is the other flavour's (a MySQL
    set given to MariaDB, or the reverse), in words; None when it can be."""
    wanted = GtidSet(gtids)
    mariadb = server.is_mariadb(conn)
    if not ((wanted.mysql and mariadb) or (wanted.mariadb and not mariadb)):
        return None
    return (f"{where} runs {server.label(conn)}, and the stream's GTID set {gtids} is "
            f"{'MySQL' if mariadb else 'MariaDB'}'s: it names another server's transactions. "
            f"Point mysql.host at the server it is of, or start once with --start-gtid naming "
            f"this server's set (SELECT {'@@gtid_binlog_pos' if mariadb else '@@gtid_executed'})")


def check_contains(conn: Any, gtids: str, where: str) -> None:
    """Refuse a server whose binlog lacks transactions of the GTID set ``gtids`` (a resume's
    set, or those ``begun``). On MariaDB the set keeps one sequence number
    per domain, which a promoted replica that wrote past a gap would have too: there, each of
    the set's GTIDs must be in the binlog's state of its own server id
    (``@@gtid_binlog_state``: the last sequence number per domain and server id). A set of the
    other flavour's GTIDs is refused as another server's (MariaDB read a MySQL set as lacking
    every transaction: lost, where they are only elsewhere)."""
    other = another_kinds(conn, gtids, where)
    if other is not None:
        raise ServerBehind(other)
    wanted = GtidSet(gtids)
    have = server.binlog_gtids(conn)
    lacks = GtidSet(have).missing(wanted)
    if not lacks and wanted.mariadb:
        lacks = diverged(server.binlog_state(conn), wanted)
    if lacks:
        raise ServerBehind(
            f"{where} lacks transactions the stream already published: {'; '.join(lacks)} "
            f"(the stream read {gtids}; the server's binlog has {have or 'none'}). Resuming "
            f"there would leave their changes in Kafka with no source, and the server could "
            f"give their numbers to new transactions. Point mysql.hosts at a server that has "
            f"them (a replica that caught up), or, if they are lost for good, restart once "
            f"with --start-gtid naming this server's set")


def diverged(state: str, wanted: GtidSet) -> List[str]:
    """The GTIDs of ``wanted`` (MariaDB) that a binlog whose ``gtid_binlog_state`` is ``state``
    does not hold: its last sequence number for that domain and server id is lower, or it has
    none. A domain's later sequence numbers by another server id (a replica promoted while this
    one's transactions were missing) don't make up for them."""
    last: Dict[Tuple[int, int], int] = {}
    for part in (p.strip() for p in state.replace("\n", "").split(",")):
        if part:
            d, s, n = (int(x) for x in part.split("-"))
            last[(d, s)] = max(n, last.get((d, s), 0))
    out = []
    for domain, (server_id, seq) in sorted(wanted.mariadb.items()):
        mine = last.get((domain, server_id))
        if mine is None or mine < seq:
            after = "none" if mine is None else f"{domain}-{server_id}-{mine}"
            out.append(f"domain {domain}: {domain}-{server_id}-{seq} (its last transaction of "
                       f"server {server_id} is {after}; it went on with other servers' numbers)")
    return out
