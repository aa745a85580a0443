"""The tracker under random batch cuts, crashes, stops and failovers, over a model of two servers'
binlogs: every row change committed once, each transaction's in order.

The model: transactions of three GTID domains (MariaDB) or source uuids (MySQL), each written
to the binlog of two servers in its own order (a replica applies domains in parallel: their
transactions interleave differently), whole, in files of one to four transactions, each file
beginning with the GTIDs written before it (source.filestart). A run reads one server from the
checkpoint as a dump sends it: by the checkpoint's file and offset, or by its GTID set (as
engine.start.gtid_for decides: another server, a checkpoint that says so, mysql.position_mode
gtid drawn per run) every transaction the set lacks, in that server's order, with a real
rotate and the next file's GTIDs between files. Row changes come in events of 1 to 3, and the
rows stage leaves out the first ``count`` says; a batch commits after any event with the
tracker's position as its checkpoint; a crash loses what the open batch holds. What the
engine's other stages add is tested where they are (test_failover, test_txmeta): this is the
skip and the checkpoint, through every kind of start.
"""
import collections
import os
import random
from types import SimpleNamespace

import pytest
from pymysqlreplication.event import RotateEvent

from streamer.engine.start import gtid_for
from streamer.engine.tracker import Tracker
from streamer.position import GtidSet, Position
from streamer.source import failover
from streamer.source.filestart import FileStart

SEED = os.environ.get("STREAMER_TEST_SEED", "")
ROUNDS = 400 if os.environ.get("STREAMER_SOAK") else 60
FILE_MODE = SimpleNamespace(mysql=SimpleNamespace(position_mode="file"))
UUIDS = ["3e11fa47-71ca-11e1-9e33-c80aa9429562", "4a0f6d3c-0b1e-11ef-8a4b-0242ac120002",
         "5b2c7e81-1d2f-11ef-9c5d-0242ac120003"]


def _rotate(file, pos, real):
    return SimpleNamespace(next_binlog=file, position=pos,
                           packet=SimpleNamespace(log_pos=1000 if real else 0))


def _file_start(gtids):
    """A file's first GTID event, as source.filestart reads it, of the GTIDs before the file."""
    event = FileStart.__new__(FileStart)
    event.mysql = event.mariadb = None
    if any(":" in g for g in gtids):
        event.mysql = GtidSet(",".join(gtids))
    else:
        event.mariadb = {}
        for g in gtids:
            domain, server_id, seq = (int(x) for x in g.split("-"))
            key = (domain, server_id)
            event.mariadb[key] = max(seq, event.mariadb.get(key, 0))
    return event


class Server:
    """One server's binlog: each transaction at its offsets, in the order it wrote them, in
    files of one to four."""

    def __init__(self, rng, server_id, uuid, order):
        self.server_id = server_id
        self.uuid = uuid
        self.files = []  # (name, the GTIDs before it, its groups: (start, gtid, rows, next))
        written = []
        while order:
            take, order = order[:rng.randint(1, 4)], order
            order = order[len(take):]
            at, groups = 200, []
            for gtid, rows in take:
                end = at + 100 + 40 * rows
                groups.append((at, gtid, rows, end))
                at = end
            self.files.append((f"bin-{server_id}.{len(self.files) + 1:06d}", list(written),
                               groups))
            written += [gtid for gtid, _ in take]

    @property
    def first(self):
        return self.files[0][0]

    def dump(self, start, by_gtid):
        """What a dump sends: (the tracker's event, its class) and ("group", group) items."""
        if by_gtid:
            have = GtidSet(start.gtid_set)
            wanted, index, pos = (lambda g: not have.contains(GtidSet(g[1]))), 0, 4
        else:
            index = [name for name, _, _ in self.files].index(start.file)
            wanted, pos = (lambda g: True), start.pos
        name, before, groups = self.files[index]
        yield _rotate(name, pos, False), RotateEvent
        if by_gtid and start.gtid_set:
            # MariaDB opens a dump by GTID set with a Gtid_list of its own: the set asked for.
            yield _file_start(start.gtid_set.split(",")), FileStart
        elif pos == 4:
            yield _file_start(before), FileStart
        for group in groups:
            if group[0] >= pos and wanted(group):
                yield "group", group
        for name, before, groups in self.files[index + 1:]:
            yield _rotate(name, 4, True), RotateEvent
            yield _file_start(before), FileStart
            for group in groups:
                if wanted(group):
                    yield "group", group


def _transactions(rng, flavour):
    out = []
    for domain in range(3):
        for seq in range(1, rng.randint(2, 5)):
            gtid = f"{domain}-1-{seq}" if flavour == "mariadb" else f"{UUIDS[domain]}:{seq}"
            out.append((domain, gtid, rng.randint(1, 7)))
    return out


def _interleaved(rng, transactions, swapped=False):
    """The transactions in a random order that keeps each domain's own; ``swapped``: but for
    a source's two in a row, at times, as a MySQL replica commits them without
    replica_preserve_commit_order (its GTID set then has a gap for a while)."""
    queues = collections.defaultdict(collections.deque)
    for domain, gtid, rows in transactions:
        queues[domain].append((gtid, rows))
    order = []
    while queues:
        domain = rng.choice(sorted(queues))
        queue = queues[domain]
        if swapped and len(queue) > 1 and rng.random() < 0.3:
            queue[0], queue[1] = queue[1], queue[0]
        order.append(queue.popleft())
        if not queue:
            del queues[domain]
    return order


class Run:
    """One run of the streamer: the committed rows and checkpoint it leaves."""

    def __init__(self, rng, committed, checkpoint):
        self.rng = rng
        self.committed = committed
        self.checkpoint = checkpoint
        self.pending = []

    def commit(self, tracker):
        self.committed.extend(self.pending)
        self.pending = []
        # As the checkpoint topic keeps it, and the next run reads it back.
        self.checkpoint = Position.from_json(tracker.position().to_json())

    def after_event(self, tracker):
        """True when the run ends here: a stop (its batch committed first) or a crash."""
        draw = self.rng.random()
        if draw < 0.25:
            self.commit(tracker)
        elif draw < 0.29:
            self.commit(tracker)
            return True
        elif draw < 0.33:
            return True  # killed: the open batch is aborted
        return False

    def read(self, server, start, by_gtid):
        """Read ``server`` from ``start``; True when the run got to the binlog's end."""
        tracker = Tracker(start, by_gtid=by_gtid)
        for event, cls in server.dump(start, by_gtid):
            if event != "group":
                tracker.on_event(event, cls)
                continue
            at, gtid, rows, end = cls
            tracker.begin(at, gtid)
            done = 0
            while done < rows:
                n = min(rows - done, self.rng.randint(1, 3))
                skip = tracker.count(n)
                self.pending.extend((gtid, i) for i in range(done + skip, done + n))
                done += n
                if done < rows and self.after_event(tracker):
                    return False
            tracker.end(end)
            if self.after_event(tracker):
                return False
        self.commit(tracker)
        return True


@pytest.mark.parametrize("flavour", ["mariadb", "mysql"])
def test_random_cuts_crashes_and_failovers_commit_every_row_once_in_order(flavour):
    by_file_again = 0
    for round_ in range(ROUNDS):
        label = f"tracker {flavour} {round_} {SEED}"
        rng = random.Random(label)
        transactions = _transactions(rng, flavour)
        servers = [Server(rng, 1, UUIDS[0], _interleaved(rng, transactions)),
                   Server(rng, 2, UUIDS[1], _interleaved(rng, transactions,
                                                         swapped=flavour == "mysql"))]
        committed = []
        current = servers[0]
        checkpoint = Position(current.first, 4, "", 0, current.server_id,
                              server_uuid=current.uuid)
        history = []
        for _ in range(200):
            if checkpoint.gtid_set and rng.random() < 0.3:
                current = servers[1 - servers.index(current)]
            start = checkpoint
            if checkpoint.server_id != current.server_id:
                start = failover.translated(checkpoint, current.server_id, "the other",
                                            current.uuid)
            # As engine.start.gtid_for decides, mysql.position_mode gtid drawn for the run.
            by_gtid = gtid_for(SimpleNamespace(mysql=SimpleNamespace(
                position_mode="gtid" if rng.random() < 0.2 else "file")), start) is not None
            by_file_again += bool(history and history[-1][1] and not by_gtid)
            history.append((current.server_id, by_gtid, start))
            run = Run(rng, committed, checkpoint)
            ended = run.read(current, start, by_gtid)
            checkpoint = run.checkpoint
            if ended:
                break
        else:
            pytest.fail(f"no run got to the end ({label})")
        # Once more from the last checkpoint, on either server: nothing left to publish.
        last = rng.choice(servers)
        start = checkpoint if checkpoint.server_id == last.server_id else \
            failover.translated(checkpoint, last.server_id, "the other", last.uuid)
        Run(rng, committed, checkpoint).read(last, start, gtid_for(FILE_MODE, start) is not None)
        expected = [(gtid, i) for _, gtid, rows in transactions for i in range(rows)]
        seen = collections.Counter(committed)
        assert sorted(seen) == sorted(expected) and set(seen.values()) == {1}, \
            (label, sorted((k, v) for k, v in seen.items() if v != 1),
             sorted(set(expected) - set(seen)), history)
        by_tx = collections.defaultdict(list)
        for gtid, i in committed:
            by_tx[gtid].append(i)
        assert all(rows == sorted(rows) for rows in by_tx.values()), label
    # Streams begun by a GTID set went back to resuming by file, once a file began after
    # everything they published.
    assert by_file_again > 0
