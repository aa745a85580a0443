"""Source failover without servers: mysql.hosts, the GTID containment check's ranges, the server
list, and a checkpoint resumed by GTID set on another server (the engine's loop on a replayed
binlog). tests/e2e/test_failover.py does it on a real primary and replica."""
import collections
import json
import re

import pytest

from streamer import config
from streamer.errors import ConfigError, ServerBehind, ServerUnreachable, SourceError
from streamer.ops.httpstatus import prometheus
from streamer.position import GtidSet, Position
from streamer.source import failover, patches
from tests.unit.engine_parts import ReplayedBinlog
from tests.unit.engine.test_engine import ALL, FILE, TX2, stopped_inside_transaction_2

patches.apply()


def _config(**mysql):
    return config.build({"mysql": dict(mysql, server_id=9)})


def _mysql(**keys):
    return _config(**keys)["mysql"]


def test_hosts_default_to_host_and_port_and_the_first_entry_is_used_first():
    assert _mysql(host="db1", port=3307)["hosts"] == ["db1:3307"]
    m = _mysql(hosts=["db1", "db2:3310", "[fe80::1]:3311", "[fe80::2]"], port=3307)
    assert m["hosts"] == ["db1:3307", "db2:3310", "[fe80::1]:3311", "[fe80::2]:3307"]
    assert (m["host"], m["port"]) == ("db1", 3307)
    for bad in (["db1:x"], ["db1:0"], [""], ["[fe80::1"], "db1", ["db1", "db1:3306"], [7]):
        with pytest.raises(ConfigError, match="mysql.hosts"):
            _mysql(hosts=bad, port=3306)


def test_the_missing_ranges_name_every_transaction_the_server_lacks():
    # MariaDB: a domain behind, a domain absent; a domain ahead lacks nothing.
    have = GtidSet("0-2-11,1-1-9")
    assert have.missing(GtidSet("0-1-20,1-1-5,7-1-2")) == [
        "domain 0: seq 12..20 (up to 0-1-20; the server has 0-2-11)",
        "domain 7: every transaction up to 7-1-2"]
    assert have.missing(GtidSet("0-1-12")) == [
        "domain 0: seq 12 (up to 0-1-12; the server has 0-2-11)"]
    assert have.missing(GtidSet("0-1-11")) == [] and have.contains(GtidSet("0-1-11"))
    # MySQL: interval subtraction per source uuid.
    u, v = "3e11fa47-71ca-11e1-9e33-c80aa9429562", "5a0e5a8c-71ca-11e1-9e33-c80aa9429562"
    have = GtidSet(f"{u}:1-10:15-20:30,{v}:1-3")
    assert have.missing(GtidSet(f"{u}:1-40,{v}:1-3")) == [f"{u}:11-14", f"{u}:21-29",
                                                            f"{u}:31-40"]
    assert have.missing(GtidSet(f"{u}:5-9:16,{v}:2")) == []
    assert GtidSet("").missing(GtidSet(f"{v}:4")) == [f"{v}:4"]


def test_the_server_list_moves_on_and_stops_when_every_server_was_behind():
    cfg = _config(hosts=["a:1", "b:2", "c:3"])
    servers = failover.Servers(cfg)
    assert servers.next() and (cfg.mysql.host, cfg.mysql.port) == ("b", 2)
    servers.refused(ServerBehind("b lacks 0-1-5"))
    assert servers.current == "c:3" and (cfg.mysql.host, cfg.mysql.port) == ("c", 3)
    servers.worked()  # streaming worked on c: b may have caught up since
    servers.refused(ServerBehind("c lacks 0-1-9"))
    servers.refused(ServerBehind("a lacks 0-1-9"))
    with pytest.raises(ServerBehind, match="no server of mysql.hosts.*c lacks.*a lacks.*b lacks"):
        servers.refused(ServerBehind("b lacks 0-1-9"))
    alone = failover.Servers(_config(host="a", port=1))
    assert not alone.next()
    with pytest.raises(ServerBehind, match="^a lacks"):
        alone.refused(ServerBehind("a lacks 0-1-9"))


def test_a_checkpoint_without_a_gtid_set_is_not_guessed_onto_another_server():
    with pytest.raises(SourceError, match="server_id 1.*server_id 2.*no GTID set.*--start-file "
                                          "mysql-bin.000003 --start-pos 120"):
        failover.translated(Position("mysql-bin.000003", 120, server_id=1), 2, "MySQL at b:2")
    moved = failover.translated(Position("mysql-bin.000003", 120, "0-1-7", rows=3, server_id=1,
                                         tx_gtid="0-1-8"), 2, "MySQL at b:2")
    assert (moved.file, moved.gtid_set, moved.rows, moved.server_id, moved.tx_gtid) == \
        ("", "0-1-7", 3, 2, "0-1-8")


U1, U2 = "3e11fa47-71ca-11e1-9e33-c80aa9429562", "5c2d0f5e-1111-11ef-8000-0242ac120002"


def test_another_server_is_a_different_server_id_or_on_mysql_a_different_server_uuid():
    assert failover.other_server(Position("f", 4, server_id=1), 2, "")
    assert not failover.other_server(Position("f", 4, server_id=1), 1, "")
    assert not failover.other_server(Position("f", 4, server_id=0), 9, "")  # an old checkpoint
    assert failover.other_server(Position("f", 4, server_id=1, server_uuid=U1), 1, U2)
    assert not failover.other_server(Position("f", 4, server_id=1, server_uuid=U1), 1, U1)
    assert not failover.other_server(Position("f", 4, server_id=1), 1, U2)  # none kept yet
    moved = failover.translated(Position("f", 4, U1 + ":1-9", server_id=1, server_uuid=U1), 1,
                                "MySQL at b:2", U2)
    assert (moved.file, moved.gtid_set, moved.server_uuid) == ("", U1 + ":1-9", U2)


class _Server:
    """What check_identity asks of a server: the GTID set a binlog file opens with, the one
    its binlog holds now, and MariaDB's BINLOG_GTID_POS at the checkpoint's place (``there``;
    None: NULL)."""

    def __init__(self, opening, now, there=None):
        self.opening, self.now, self.there = opening, now, there
        self.asked = []


@pytest.fixture
def server(monkeypatch):
    def use(opening, now, there=None):
        s = _Server(opening, now, there)
        monkeypatch.setattr(failover.server, "file_gtids", lambda conn, file: s.opening)
        monkeypatch.setattr(failover.server, "binlog_gtids", lambda conn: s.now)
        monkeypatch.setattr(failover.server, "binlog_files", lambda conn: ["mysql-bin.000002"])
        monkeypatch.setattr(failover.server, "is_mariadb", lambda conn: ":" not in now)
        monkeypatch.setattr(failover.server, "executed_gtids",
                            lambda conn, file, pos: s.asked.append((file, pos)) or s.there)
        return s
    return use


@pytest.mark.parametrize("opening,now", [
    ("0-1-100", "0-1-250"),          # the checkpoint lies between the file's start and now
    ("0-1-200", "0-1-200,1-2-5"),    # at the file's very start; another domain since
    ("", "0-1-200"),                 # a file opening with an empty list
    (None, "0-1-200"),               # (or none at all)
    (U1 + ":1-50", U1 + ":1-300"),   # MySQL
    # A domain (uuid) the checkpoint never had: an older checkpoint's, no evidence either way.
    ("0-1-100,7-3-50", "0-1-250,7-3-50"),
    (U1 + ":1-50," + U2 + ":1-10", U1 + ":1-300," + U2 + ":1-10"),
])
def test_a_checkpoint_inside_the_servers_binlog_history_is_taken(server, opening, now):
    server(opening, now)
    gtids = U1 + ":1-200" if ":" in now else "0-1-200"
    failover.check_identity(None, Position("mysql-bin.000002", 900, gtids, server_id=1), "here")


@pytest.mark.parametrize("opening,now,why", [
    # RESET MASTER: the binlog starts over, and lacks what the checkpoint saw.
    ("", "0-1-3", r"the server's binlog lacks transactions the checkpoint has \(domain 0: seq "
                  r"4..200"),
    # Another server with the same server_id, further on: its file opens after the checkpoint.
    ("0-1-5000", "0-1-6000", r"the file opens after transactions the checkpoint never saw "
                             r"\(domain 0: seq 201..5000"),
    # MySQL: another server, whose history has none of the checkpoint's uuid.
    (U2 + ":1-10", U2 + ":1-90", r"the server's binlog lacks .*" + U1 + ":1-200"),
])
def test_a_checkpoint_that_is_no_place_in_the_servers_binlog_is_refused(server, opening, now, why):
    server(opening, now)
    gtids = U1 + ":1-200" if ":" in now else "0-1-200"
    with pytest.raises(SourceError, match="the checkpoint mysql-bin.000002:900 .* is not a place in "
                                          "the binlog of here, although the server has the "
                                          "checkpoint's server_id 1: " + why):
        failover.check_identity(None, Position("mysql-bin.000002", 900, gtids, server_id=1),
                                "here")


@pytest.mark.parametrize("opening,now", [
    # MariaDB without gtid_strict_mode logged 0-1-150 after the 0-1-200 the checkpoint read:
    # its position names the last one logged.
    ("0-1-100", "0-1-150,1-1-4"),
    # The checkpoint read 0-1-200 after the 0-1-5000 its file opens with.
    ("0-1-5000", "0-1-6000"),
])
def test_a_checkpoint_behind_by_number_only_is_taken_where_mariadb_places_it(server, caplog,
                                                                            opening, now):
    s = server(opening, now, there="0-1-200,1-1-3")
    start = Position("mysql-bin.000002", 900, "0-1-200", server_id=1)
    assert failover.check_identity(None, start, "here") is start
    assert s.asked == [("mysql-bin.000002", 900)]
    assert "here numbers a GTID domain's transactions out of order" in caplog.text
    assert "resuming from mysql-bin.000002:900 gtid=0-1-200 by file" in caplog.text


@pytest.mark.parametrize("there", [
    None,                # not an event boundary there, or no such file: NULL
    "0-1-199",           # another history at that offset (a reset's binlog grown past it)
    "1-1-3",             # without the checkpoint's domain
])
def test_a_checkpoint_mariadb_places_elsewhere_is_refused(server, there):
    server("0-1-100", "0-1-150", there=there)
    with pytest.raises(SourceError, match="lacks transactions the checkpoint has"):
        failover.check_identity(None, Position("mysql-bin.000002", 900, "0-1-200", server_id=1),
                                "here")


def test_a_mysql_checkpoint_is_never_placed_by_number_order(server):
    s = server(U1 + ":1-50", U1 + ":1-100", there=U1 + ":1-200")
    with pytest.raises(SourceError, match="lacks transactions"):
        failover.check_identity(None, Position("mysql-bin.000002", 900, U1 + ":1-200",
                                               server_id=1), "here")
    assert s.asked == []


def test_a_checkpoint_is_taken_without_the_domains_the_server_deleted_from_its_binlog(
        server, caplog):
    # FLUSH BINARY LOGS DELETE_DOMAIN_ID = (1), once no file held a transaction of domain 1:
    # the checkpoint's file opened with the domain as far as the checkpoint had read it.
    server("0-1-100,1-2-3,1-1-5", "0-1-250")  # the domain's GTIDs of each server id
    start = Position("mysql-bin.000002", 900, "0-1-200,1-1-5", server_id=1)
    kept = failover.check_identity(None, start, "here")
    assert (kept.file, kept.pos, kept.gtid_set) == ("mysql-bin.000002", 900, "0-1-200")
    assert start.gtid_set == "0-1-200,1-1-5"  # the checkpoint read is left as it was
    assert "here no longer has GTID domain 1 in its binlog (FLUSH BINARY LOGS " \
           "DELETE_DOMAIN_ID)" in caplog.text
    # The same by GTID set (mysql.position_mode gtid), before the server is asked for it.
    assert failover.without_deleted_domains(None, start, "here").gtid_set == "0-1-200"


@pytest.mark.parametrize("opening,now", [
    ("0-1-100", "0-1-250"),            # the file opened without the domain: no proof
    ("0-1-100,1-1-3", "0-1-250"),      # the file has transactions of it: not deletable
    ("0-1-100,1-1-5", "0-1-150"),      # the other domain behind: a reset
    ("0-1-100,1-1-5", ""),             # none left: a reset
])
def test_a_domain_gone_without_the_proof_of_its_deletion_is_refused(server, opening, now):
    server(opening, now)
    with pytest.raises(SourceError, match="is not a place in the binlog of here"):
        failover.check_identity(None, Position("mysql-bin.000002", 900, "0-1-200,1-1-5",
                                               server_id=1), "here")


def test_a_checkpoint_without_a_gtid_set_cant_be_checked_and_is_taken(server):
    server("0-1-5000", "0-1-6000")
    failover.check_identity(None, Position("mysql-bin.000002", 900, server_id=1), "here")


@pytest.mark.parametrize("first", ["its transaction", "another transaction"])
def test_a_checkpoint_resumed_by_gtid_on_another_server_skips_its_published_rows_once(make, first):
    _, published, checkpoint = stopped_inside_transaction_2(make, Position(FILE, 4, server_id=1))
    assert checkpoint.tx_gtid
    moved = failover.translated(checkpoint, 2, "MySQL at b:2")
    # The other server sends the checkpoint's transaction first, or (another GTID domain's
    # order) a transaction the checkpoint doesn't have before it: that one is published whole.
    replay_from = TX2 if first == "its transaction" else 4
    again, resumed = make(batch={"max_messages": 2})
    reader = ReplayedBinlog("engine.binlog", Position(FILE, replay_from),
                            on_end=again.request_stop, file="mysql-bin.000107")
    with reader:
        again.stream(resumed, reader, moved)
    before = [] if first == "its transaction" else ALL[:3]
    assert resumed.changes() == before + ALL[len(published):]
    assert published == ALL[:len(published)]
    # The checkpoints name this server's files (the recording ends in a rotate) and server.
    assert [cp.file for _, cp in resumed.log][:1] == ["mysql-bin.000107"]
    assert {cp.server_id for _, cp in resumed.log} == {2}


def test_a_checkpoint_taken_before_the_transaction_to_skip_into_came_keeps_the_skip(make):
    from streamer.engine.tracker import Tracker
    tracker = Tracker(Position("", 4, "0-1-7", rows=3, server_id=2, tx_gtid="0-1-8"))
    tracker.begin(400, "1-1-3")  # another domain's transaction comes first
    assert tracker.count(2) == 0
    tracker.end(500)
    kept = tracker.position()
    assert (kept.file, kept.gtid_set, kept.rows, kept.tx_gtid) == ("", "0-1-7,1-1-3", 3, "0-1-8")
    tracker.begin(500, "0-1-8")
    assert tracker.count(5) == 3  # its first three were published before the failover


# Transaction metadata on, in the streamer's own records or Debezium's (whose changes also
# carry their order in the transaction).
FORMATS = {
    "avro": {"topics": {"transactions": True}},
    "debezium": {"topics": {"transactions": True},
                 "sections": {"format": "debezium", "debezium": {"schemas_enable": False}}},
}


def _framing(publisher, fmt):
    """(op, key) of each row change; per transaction id, its records' statuses, its END's count
    and (Debezium) its changes' total orders."""
    changes, txs = [], collections.defaultdict(lambda: {"status": [], "orders": []})
    decoder = publisher.decoder()
    dec = decoder.decode if fmt == "avro" else (lambda b: b and json.loads(b))
    for topic, key, value in publisher.messages(all_topics=True):
        if topic.endswith("__transactions") or topic == "test.transaction":
            rec = dec(value)
            txs[rec["id"]]["status"].append(rec["status"])
            if rec["status"] == "END":
                txs[rec["id"]]["count"] = rec["event_count"]
        elif topic == "test.app.t":
            env = dec(value)
            changes.append(("tombstone" if env is None else env["op"],
                            None if key is None else dec(key)["id"]))
            if env is not None and fmt == "debezium":
                txs[env["transaction"]["id"]]["orders"].append(env["transaction"]["total_order"])
    return changes, txs


@pytest.mark.parametrize("stop", ["the other", "the awaited", None],
                         ids=["stopped inside the other", "stopped inside the awaited",
                              "not stopped"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_another_domains_transaction_first_keeps_the_skip_and_counts_still_awaited(make, fmt, stop):
    # After a failover the new server sends another GTID domain's transaction before the one
    # the checkpoint is inside. Its rows are published whole, and the awaited one's rest once,
    # under the BEGIN its first rows went out with. Stopped by a batch cut inside the other
    # transaction (a crash would leave the same checkpoint), the next run, on that server,
    # resumes by file inside it and must still skip into the awaited one; stopped inside the
    # awaited one, it goes on there under the same BEGIN and counts.
    def made():
        return make(batch={"max_messages": 2}, **FORMATS[fmt])

    first, published = made()

    def stop_inside_transaction_2(position):
        if position.pos == TX2 and position.rows:
            first.request_stop()
    published.on_commit = stop_inside_transaction_2
    with ReplayedBinlog("engine.binlog", Position(FILE, 4), on_end=first.request_stop) as reader:
        first.stream(published, reader, Position(FILE, 4))
    checkpoint = published.committed
    assert checkpoint.pos == TX2 and checkpoint.rows and checkpoint.transaction
    moved = failover.translated(checkpoint, 2, "MySQL at b:2")

    second, then = made()

    def stop_inside(position):
        awaited = position.tx_gtid == checkpoint.tx_gtid
        if position.rows > (checkpoint.rows if awaited else 0) and \
                awaited == (stop == "the awaited"):
            second.request_stop()
    if stop:
        then.on_commit = stop_inside
    with ReplayedBinlog("engine.binlog", Position(FILE, 4), on_end=second.request_stop,
                        file="mysql-bin.000107") as reader:
        second.stream(then, reader, moved)
    publishers = [published, then]
    if stop:
        inside = Position.from_json(then.committed.to_json())
        assert inside.file == "mysql-bin.000107" and inside.rows
        if stop == "the other":
            assert inside.pos < TX2 and inside.awaited == {checkpoint.tx_gtid: {
                "rows": checkpoint.rows, "transaction": checkpoint.transaction}}
        else:
            assert inside.tx_gtid == checkpoint.tx_gtid and inside.rows > checkpoint.rows
            assert inside.transaction["id"] == checkpoint.transaction["id"]
            assert not inside.awaited
        third, resumed = made()
        with ReplayedBinlog("engine.binlog", Position(FILE, inside.pos),
                            on_end=third.request_stop, file="mysql-bin.000107") as reader:
            third.stream(resumed, reader, inside)
        publishers.append(resumed)
    runs = [_framing(p, fmt) for p in publishers]
    before = ALL[:len(runs[0][0])]
    assert runs[0][0] == before and 3 < len(before) < len(ALL)
    # The other transaction (its rows are those of the recording's first) whole, then the rest
    # of the awaited one and what follows: none repeated, none lost.
    assert [c for changes, _ in runs[1:] for c in changes] == ALL[:3] + ALL[len(before):]
    # Every transaction framed once over the runs; the awaited one's END counts all nine of
    # its messages (Debezium: seven change events), and its orders go on where they stopped.
    framed = {}
    for _, txs in runs:
        for txid, tx in txs.items():
            into = framed.setdefault(txid, {"status": [], "orders": []})
            into["status"] += tx["status"]
            into["orders"] += tx["orders"]
            into["count"] = tx.get("count", into.get("count"))
    assert all(tx["status"] == ["BEGIN", "END"] for tx in framed.values()), framed
    awaited = framed[checkpoint.transaction["id"]]
    assert awaited["count"] == (9 if fmt == "avro" else 7)
    if fmt == "debezium":
        assert awaited["orders"] == list(range(1, 8))


def test_the_loop_moves_to_the_next_server_when_one_cant_be_connected_to(make, monkeypatch):
    from streamer.engine import start as start_mod

    streamer, publisher = make(supervised=True, hosts=["a:1", "b:2"])
    monkeypatch.setattr(start_mod, "probe_source",
                        lambda *args: start_mod.SourceInfo(1, (FILE, 4), None))
    monkeypatch.setattr(streamer, "_sleep", lambda seconds: None)
    seen = []

    class Reader:
        def __init__(self, cfg, password, start, gtid):
            seen.append((cfg["mysql"]["host"], cfg["mysql"]["port"]))
            self.start = start

        def __enter__(self):
            if len(seen) == 1:
                raise ServerUnreachable("MySQL at a:1 can't be connected to (2003)")
            if len(seen) == 2:
                raise ServerBehind("MySQL at b:2 lacks transactions")
            return self

        def __exit__(self, *exc):
            pass

        def __iter__(self):
            streamer.request_stop()
            return iter(())

        def more_arrived(self):
            return False

    streamer.new_reader = Reader
    assert streamer.run() == 0
    # a unreachable: b; b behind: a again, which works.
    assert seen == [("a", 1), ("b", 2), ("a", 1)] and streamer.servers.switches == 2
    # /status and /metrics say so: b is behind until streaming (on a) is seen to work, as
    # the connection in use commits.
    assert streamer.metrics.status()["failover"] == {"server": "a:1", "switches": 2,
                                                     "behind": ["b:2"]}
    publisher.committed = Position(FILE, 99)
    assert streamer.metrics.status()["failover"]["behind"] == []
    text = prometheus(streamer.metrics)
    assert re.search(r"^streamer_source_switches_total\{.*\} 2\.0$", text, re.M), text
    alone, _ = make(supervised=True)
    assert alone.metrics.status()["failover"] is None
    assert "streamer_source_switches" not in prometheus(alone.metrics)



def test_a_start_at_the_end_is_refused_where_the_namespace_published_the_tables_before():
    from streamer.engine.start import check_unused
    cfg = config.build({"namespace": "ns", "source": {"name": "src"}, "mysql": {"server_id": 9}})
    records = [{"kind": "value", "topic": "ns.app.t"}, {"kind": "key", "topic": "ns.app.t"}]
    mine = lambda db, table: db == "app"  # noqa: E731
    with pytest.raises(SourceError, match=r"no checkpoint of source 'src' .* namespace 'ns' has "
                                          r"published its tables already \(app\.t\)"):
        check_unused(cfg, records, mine)
    check_unused(cfg, records, lambda db, table: db == "other")  # another source's tables
    check_unused(cfg, [], mine)  # a first start
    check_unused(cfg, [{"kind": "value", "topic": "nsx.app.t"}], mine)  # another namespace


def test_a_mariadb_server_that_wrote_past_a_gap_under_another_server_id_lacks_the_gap():
    # The checkpoint has 0-1-108; the promoted replica received 0-1-105, then wrote 0-2-106..110:
    # its per-domain position (0-2-110) is ahead, but 0-1-106..108 are in no binlog of it.
    lacks = failover.diverged("0-1-105,0-2-110", GtidSet("0-1-108"))
    assert lacks == ["domain 0: 0-1-108 (its last transaction of server 1 is 0-1-105; it went "
                     "on with other servers' numbers)"]
    assert failover.diverged("0-1-108,0-2-110", GtidSet("0-1-108")) == []
    assert failover.diverged("1-1-3", GtidSet("0-1-5,1-1-3"))[0].startswith("domain 0: 0-1-5")


def test_a_translated_checkpoint_keeps_its_prepared_xa_transactions_placed_on_the_new_server(
        monkeypatch):
    from streamer.source import server

    start = Position("mysql-bin.000009", 500, "0-1-20", 0, server_id=1,
                     xa={"X'61',X'',1": ["mysql-bin.000008", 900, "0-1-17", "mysql-bin.000008:900"]})
    moved = failover.translated(start, 2, "MySQL at b:2")
    assert moved.xa == start.xa and moved.file == ""
    monkeypatch.setattr(server, "locate_gtid",
                        lambda conn, gtid: ("b-bin.000003", 4242) if gtid == "0-1-17" else None)
    placed = failover.translated_xa(None, moved.xa, "MySQL at b:2")
    assert placed == {"X'61',X'',1": ["b-bin.000003", 4242, "0-1-17", "mysql-bin.000008:900"]}
    with pytest.raises(SourceError, match="its rows could not be published at its XA"):
        failover.translated_xa(None, {"X'62',X'',1": ["f", 4, "0-1-99", "f:4"]}, "MySQL at b:2")


@pytest.mark.parametrize("start,now,lacks", [
    # Inside 0-1-8, three rows of it published: a server whose domain 0 ends at 0-1-7 lacks it.
    (Position("", 4, "0-1-7", rows=3, tx_gtid="0-1-8"), "0-1-7", "domain 0: seq 8 "),
    # Awaiting 7-2-1 (another domain's came first): a server without domain 7 lacks it.
    (Position("f", 400, "0-1-7", rows=2, tx_gtid="1-1-3", awaited={"7-2-1": {"rows": 4}}),
     "0-1-7,1-1-3", "domain 7: every transaction up to 7-2-1"),
    (Position("", 4, U1 + ":1-7", rows=3, tx_gtid=U1 + ":8"), U1 + ":1-7", U1 + ":8"),
])
def test_a_server_lacking_a_transaction_whose_first_rows_were_published_is_behind(
        monkeypatch, start, now, lacks):
    monkeypatch.setattr(failover.server, "is_mariadb", lambda conn: ":" not in now)
    monkeypatch.setattr(failover.server, "binlog_gtids", lambda conn: now)
    monkeypatch.setattr(failover.server, "binlog_state", lambda conn: now)
    # The set alone, which the server holds, would have let it resume: those rows stayed alone.
    failover.check_contains(None, start.gtid_set, "here")
    with pytest.raises(ServerBehind, match="lacks transactions the stream already published: "
                                           + lacks):
        failover.check_contains(None, failover.begun(start), "here")
    # A server that has them is taken.
    has = ",".join([now, failover.begun(start)])
    monkeypatch.setattr(failover.server, "binlog_gtids", lambda conn: has)
    monkeypatch.setattr(failover.server, "binlog_state", lambda conn: has)
    failover.check_contains(None, failover.begun(start), "here")
    assert failover.begun(Position("", 4, "0-1-7")) == ""


@pytest.mark.parametrize("mariadb,gtids,ask", [
    (True, U1 + ":1-7", "@@gtid_binlog_pos"), (False, "0-1-7", "@@gtid_executed")])
def test_a_gtid_set_of_the_other_kind_of_server_is_refused_as_another_servers(monkeypatch,
                                                                             mariadb, gtids, ask):
    # A MySQL set given to MariaDB (--start-gtid, or mysql.host moved): MariaDB read it as
    # lacking every transaction, which said the set's transactions were lost, not misplaced.
    monkeypatch.setattr(failover.server, "is_mariadb", lambda conn: mariadb)
    monkeypatch.setattr(failover.server, "label", lambda conn: "MariaDB 11.4.5" if mariadb
                        else "MySQL 8.0.15")
    monkeypatch.setattr(failover.server, "binlog_gtids", lambda conn: "")
    kind = "MariaDB 11.4.5" if mariadb else "MySQL 8.0.15"
    with pytest.raises(ServerBehind, match=f"here runs {kind}, and the stream's GTID set "
                                           f"{gtids} is .*'s: it names another server's "
                                           f"transactions.*SELECT {ask}"):
        failover.check_contains(None, gtids, "here")
