"""The snapshot stage: chunks of existing rows published as op ``r`` where the binlog has them.

``engine.snapshot.Snapshots`` runs the watermark algorithm (requests, chunks, windows, progress);
this stage connects it to the stream. It speaks through two tables of ``snapshot.database``: their
rows go to it (claimed by name). While a chunk's window is open, every published change of its
table drops its keys from the chunk (a hook on the rows stage, registered only then). At a
chunk's high mark (in read-only mode: between transactions, once the reader has executed the
high GTID position) the chunk's rows start to be published in the open batch, with its progress
in the checkpoint; once they all are, the batch commits at the end of that transaction.

A chunk is read, and published, a slice at a time (``work``): after each transaction, when the
reader is caught up and right after a commit made caught up, slices follow one another until the
server sends more; with changes of the stream's own waiting for their commit, one slice at most,
and only if the chunk had none for SHARE_S. So a change waits for one slice of a snapshot, not
for a whole chunk, and the snapshot goes on in the stream's every pause.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

from pymysqlreplication.event import QueryEvent

from streamer.codec.avro import SNAPSHOT_BYTES
from streamer.engine.chunk import RowUnreadable
from streamer.engine.snapshot import Chunk, Snapshots
from streamer.position import Position
from streamer.source import signals

# While changes keep arriving, the chunk being read still gets a slice this often: a snapshot
# goes on under any load, and a change waits for at most one slice.
SHARE_S = 0.05
# A chunk whose high mark has not come in this long, the stream caught up all the while, is read
# again (``Snapshots.mark_lost``): a mark comes within milliseconds of its write.
HIGH_MARK_S = 30.0


class SnapshotStage:
    def __init__(self, ctx: Any, snaps: Snapshots, tables: Any, start: Position) -> None:
        self.ctx = ctx
        self.snaps = snaps
        self.tracker = ctx.tracker
        self.last_slice = float("-inf")
        self.ahead: Any = None  # the last chunk's table version whose topic was asked ahead
        # The chunk waiting for its high mark, and since when the stream has been caught up.
        self.awaited: Optional[Chunk] = None
        self.awaited_since = 0.0
        snaps.reset(start.snapshot, ctx.tables)
        if snaps.read_only:
            snaps.seed(ctx.tracker.gtids, start)
        ctx.policy.caught_up_hooks.append(self.on_caught_up)
        if not snaps.read_only:
            ctx.policy.caught_up_commit_hooks.append(self.work)
        tables.claim(snaps.database, signals.WATERMARK, self.on_watermarks)
        tables.claim(snaps.database, signals.SIGNAL, self.on_requests)
        ctx.policy.checkpoint_parts.append(self.checkpoint)

    def handlers(self) -> Dict[Any, Callable[[Any], int]]:
        return {QueryEvent: self.on_query}

    def tx_end_hooks(self) -> list:
        return [self.on_tx_end] if self.snaps.read_only else [self.work]

    # -- what the stream brings -------------------------------------------------------------------
    def on_requests(self, event: Any, skip: int) -> int:
        self.snaps.on_requests(event, skip)
        self._follow()
        return 0

    def on_watermarks(self, event: Any, skip: int) -> int:
        chunk = self.snaps.on_watermarks(event, skip)
        sent = 0 if chunk is None else self.publish(chunk, event)
        self._follow()
        self.ctx.policy.in_background(sent)
        return sent

    def on_query(self, event: Any) -> int:
        if self.snaps.chunk is not None:
            query = event.query
            if query != "BEGIN" and query != "COMMIT":
                self.snaps.on_query(query)
                self._follow()
        return 0

    def on_tx_end(self) -> int:
        return self.on_position()

    def on_caught_up(self) -> int:
        if not self.snaps.read_only:
            self._overdue()
            return self.work()
        return 0 if self.tracker.in_tx else self.on_position()

    def _overdue(self) -> None:
        """Caught up: a chunk read whose high mark has not come in HIGH_MARK_S is read again."""
        chunk = self.snaps.chunk
        if chunk is None or chunk.reading is not None or chunk.landed:
            self.awaited = None  # not kept past its wait: its rows go with it
            return
        now = self.ctx.clock.monotonic()
        if chunk is not self.awaited:
            self.awaited, self.awaited_since = chunk, now
        elif now - self.awaited_since >= HIGH_MARK_S:
            self.awaited = None
            self.snaps.mark_lost(chunk, now - self.awaited_since)
            self._follow()

    def work(self) -> int:
        """Slices of the chunk in flight (read, or published once landed) until the server sends
        more changes; the messages published."""
        chunk = self.snaps.chunk
        if chunk is None:
            return self._resume() if self.snaps.queue else 0
        if chunk.reading is None and not chunk.landed:
            return 0  # waiting for its high mark
        policy = self.ctx.policy
        arrived = policy.reader.more_arrived
        monotonic = self.ctx.clock.monotonic
        waiting = policy.pending > policy.background  # the stream's own, not yet committed
        if (waiting or arrived()) and monotonic() - self.last_slice < SHARE_S:
            return 0
        sent = 0
        more = True
        while more:
            more, n = self._slice()
            sent += n
            if waiting or arrived():
                break
        self.last_slice = monotonic()
        self._follow()
        policy.in_background(sent)
        return sent

    def _slice(self) -> Tuple[bool, int]:
        """One slice of the chunk in flight: (whether more work is there, messages published)."""
        snaps = self.snaps
        chunk = snaps.chunk
        if chunk is not None and chunk.landed:
            sent = self._publish_slice(chunk)
        elif chunk is not None and chunk.reading is not None:
            snaps.step()
            sent = 0
        else:
            return False, 0
        chunk = snaps.chunk
        return chunk is not None and (chunk.reading is not None or chunk.landed), sent

    def on_position(self) -> int:
        """Read-only mode, between transactions: a chunk whose high position was reached."""
        if self.snaps.chunk is None:
            return self._resume() if self.snaps.queue else 0
        chunk = self.snaps.on_position(self.tracker.gtids)
        sent = 0 if chunk is None else self.publish(chunk, None)
        self._follow()
        self.ctx.policy.in_background(sent)
        return sent

    def _resume(self) -> int:
        """No chunk in flight, tables queued: one to read later (``Snapshots.retry_at``) is read
        once due."""
        self.snaps.pump()
        self._follow()
        return 0

    def on_change(self, tv: Any, event: Any, op: str) -> None:
        self.snaps.on_change(tv, event, op)

    def checkpoint(self, position: Position) -> None:
        position.snapshot = self.snaps.progress()

    def _follow(self) -> None:
        """After each turn: the changes hook follows the window, and a chunk's table version,
        first seen, has its topic made sure of while the chunk is read (``Announcer.ahead``):
        a new topic's creation doesn't hold the stream at the chunk's high mark."""
        self._follow_window()
        chunk = self.snaps.chunk
        if chunk is not None and chunk.tv is not self.ahead:
            self.ahead = chunk.tv
            self.ctx.announce.ahead(chunk.tv)

    def _follow_window(self) -> None:
        """The changes hook is registered while a window is open, and only then."""
        changes = self.ctx.changes
        hooked = self.on_change in changes
        if (self.snaps.window is not None) != hooked:
            if hooked:
                changes.remove(self.on_change)
            else:
                changes.append(self.on_change)

    # -- publishing a chunk -----------------------------------------------------------------------
    def publish(self, chunk: Chunk, event: Optional[Any]) -> int:
        """A chunk's rows start to be published as op r at its high watermark ``event`` (None in
        read-only mode: between transactions): in binlog order, that is where they were read.
        Its first slice now, the rest from ``work``. Returns the messages published."""
        ctx = self.ctx
        tv = chunk.tv
        # A version that no table map of this run announced is announced, and is the table's
        # current one from here: a TRUNCATE or the next version of the table follow it.
        ctx.announce_current(tv)
        tracker = self.tracker
        if event is not None:  # the high watermark's rows event
            packet = event.packet
            mid, txid = tv.envelope.event_parts(
                event.timestamp * 1000, packet.server_id, tracker.file,
                packet.log_pos - packet.event_size, tracker.gtid, tv.db, tv.table, tracker.txid)
        else:  # read-only mode: between transactions, where the reader reached the high position
            at = tracker.next_pos
            mid, txid = tv.envelope.event_parts(
                int(ctx.clock.time() * 1000), tracker.server_id, tracker.file, at, None, tv.db,
                tv.table, f"{tracker.file}:{at}:snapshot")
        chunk.land((mid, txid, SNAPSHOT_BYTES["last" if chunk.final else "true"]))
        return self._publish_slice(chunk)

    def _publish_slice(self, chunk: Chunk) -> int:
        """The chunk's next slice of rows; the last one ends the chunk (the batch commits at the
        end of this transaction), and the next chunk is read."""
        ctx = self.ctx
        ctx.open()
        tv = chunk.tv
        topic = tv.topic
        produce = ctx.produce
        headers = tv.headers["r"]
        first = n = chunk.sent
        size = self.snaps.publish_slices.size(chunk.job["table"])
        try:
            for value, key in chunk.messages(size, n):
                produce(topic, value, key, headers)
                n += 1
        except RowUnreadable as exc:
            self.snaps.published(chunk, n - first)
            self.snaps.abandon(chunk, exc)
            return n - first
        self.snaps.published(chunk, n - first)
        if chunk.published_all():
            self.snaps.finish(chunk, chunk.sent)
            ctx.policy.request_commit()
        return n - first
