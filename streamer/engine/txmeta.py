"""Transaction metadata (``topics.transactions``): a BEGIN and an END record per source transaction.

Some consumers must apply a MySQL transaction as a whole: they buffer a transaction's messages
until its END says how many to expect in each topic. The records go to ``{namespace}.__transactions``
(one partition, keyless, schema ``schemas/transaction.avsc``), in the same Kafka transaction as rows
of the source transaction: BEGIN with its first published rows, END with the event that commits it.
A source transaction spread over several batches has its BEGIN in the first and its END in the
batch of its commit event: the batch of its last rows, unless that batch was cut at
``batch.max_messages`` right after them. A transaction that published nothing (other tables,
heartbeats, DDL) gets no records, and neither do a snapshot's rows.

The open transaction's counts ride in the checkpoint (``Position.transaction``), committed with the
messages they count, so a restart inside a transaction neither repeats its BEGIN nor loses counts.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

from streamer.codec import avro

Produce = Callable[[str, Optional[bytes], Optional[bytes]], None]
SCHEMA = avro.load_static("transaction")


class StreamerRecords:
    """The streamer's own BEGIN and END records: ``{namespace}.__transactions``, keyless, Avro
    (``schemas/transaction.avsc``). Another message format brings its own (codec.debezium)."""

    def __init__(self, namespace: str) -> None:
        self.topic = f"{namespace}.__transactions"
        self.writer: Optional[avro.Writer] = avro.Writer(SCHEMA)
        self.key_writer: Optional[avro.Writer] = None  # keyless

    def progress(self) -> Optional[Dict[str, Any]]:
        """What the checkpoint keeps of these records' own state: nothing."""
        return None

    def reset(self, txid: Optional[str], saved: Optional[Dict[str, Any]]) -> None:
        pass

    def begin(self, tx: Dict[str, Any]) -> Tuple[Optional[bytes], bytes]:
        assert self.writer is not None
        return None, self.writer.encode({
            "status": "BEGIN", "id": tx["id"], "gtid": tx["gtid"], "ts_ms": tx["ts_ms"],
            "event_count": None, "data_collections": None})

    def end(self, tx: Dict[str, Any], ts_ms: int) -> Tuple[Optional[bytes], bytes]:
        assert self.writer is not None
        counts = tx["counts"]
        return None, self.writer.encode({
            "status": "END", "id": tx["id"], "gtid": tx["gtid"], "ts_ms": ts_ms,
            "event_count": sum(counts.values()),
            "data_collections": [{"topic": t, "event_count": c} for t, c in counts.items()]})


class TransactionLog:
    """Writes the BEGIN and END records; ``on_published`` after a transaction's messages,
    ``on_end`` at its commit event."""

    __slots__ = ("topic", "writer", "records", "open", "announce", "announced")

    def __init__(self, namespace: str, records: Optional[Any] = None) -> None:
        self.records = records or StreamerRecords(namespace)
        self.topic = self.records.topic
        self.writer = self.records.writer
        # The open source transaction whose BEGIN is published: id, gtid, ts_ms, counts by topic.
        self.open: Optional[Dict[str, Any]] = None
        # Called before the first record of a stream: the topic exists and the schema goes out
        # (in the open batch: a record before it may have gone with an aborted batch).
        self.announce: Callable[[], None] = lambda: None
        self.announced = False

    def reset(self, progress: Optional[Dict[str, Any]]) -> None:
        """Resume from a checkpoint's ``transaction`` (None: between transactions)."""
        self.announced = False
        self.resume(progress)

    def resume(self, progress: Optional[Dict[str, Any]]) -> None:
        """Go on with the transaction whose counts are ``progress`` (its BEGIN went out in an
        earlier run), or with none."""
        self.open = None if progress is None else {
            "id": progress["id"], "gtid": progress.get("gtid"), "ts_ms": int(progress["ts_ms"]),
            "counts": dict(progress["counts"])}
        self.records.reset(None if progress is None else progress["id"],
                           None if progress is None else progress.get("records"))

    def progress(self) -> Optional[Dict[str, Any]]:
        """What the checkpoint keeps of the open transaction."""
        if self.open is None:
            return None
        out = {"id": self.open["id"], "gtid": self.open["gtid"], "ts_ms": self.open["ts_ms"],
               "counts": dict(self.open["counts"])}
        records = self.records.progress()  # the format's own (Debezium's change orders)
        if records is not None:
            out["records"] = records
        return out

    def on_published(self, tracker: Any, topic: str, n: int, ts_ms: int, produce: Produce) -> int:
        """``n`` messages of the current source transaction went to ``topic``; returns the
        messages this produced (1 for the transaction's BEGIN)."""
        if not n:
            return 0
        begun = 0
        tx = self.open
        if tx is None or tx["id"] != tracker.txid:
            if not self.announced:
                self.announce()
                self.announced = True
            tx = self.open = {"id": tracker.txid, "gtid": tracker.gtid, "ts_ms": ts_ms,
                              "counts": {}}
            key, value = self.records.begin(tx)
            produce(self.topic, value, key)
            begun = 1
        counts = tx["counts"]
        counts[topic] = counts.get(topic, 0) + n
        return begun

    def on_end(self, tracker_txid: str, commit_ts_ms: int, produce: Produce) -> int:
        """The source transaction ``tracker_txid`` committed; returns the messages this produced
        (1 for its END)."""
        tx = self.open
        if tx is None or tx["id"] != tracker_txid:
            self.open = None
            return 0
        self.open = None
        key, value = self.records.end(tx, commit_ts_ms)
        produce(self.topic, value, key)
        return 1
