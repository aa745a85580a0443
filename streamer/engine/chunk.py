"""One snapshot chunk, from its SELECT to its last row published (``engine.snapshot`` runs the
watermark algorithm around it)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Set, Tuple

from streamer.position import GtidSet
from streamer.schema.versions import TableVersion


class Chunk:
    """One chunk between its watermarks: ``rows`` by chunk key, in key order. While ``reading``
    (a ``source.chunks`` read) is set, its rows are still being read, a slice at a time
    (``Snapshots.step``); ``changed`` holds the keys the window's changes took out, so that a row
    read after its change stays out too. From its high mark (``land``) its rows are published a
    slice at a time, in key order (``next_rows``), with the window still open: a change of a row
    not published yet takes it out, as in the window. A commit between slices checkpoints the
    chunk's progress up to the last row published (``done_key``)."""

    __slots__ = ("job", "low", "high", "tv", "db", "table", "key_names", "rows", "last_key",
                 "final", "low_set", "high_set", "reading", "changed", "raw_keys", "literals",
                 "order", "at", "sent", "parts")

    def __init__(self, job_: Dict[str, Any], low: str, high: str, tv: TableVersion,
                 key_names: List[str], rows: Dict[Tuple, Dict[str, Any]],
                 last_key: Optional[List[str]], final: bool, reading: Any = None) -> None:
        self.job = job_
        self.low = low
        self.high = high
        self.tv = tv
        self.db = tv.db
        self.table = tv.table
        self.key_names = key_names
        self.rows = rows
        self.last_key = last_key
        self.final = final
        # Read-only mode: the watermarks are GTID positions, reached rather than read.
        self.low_set: Optional[GtidSet] = None
        self.high_set: Optional[GtidSet] = None
        self.reading = reading
        self.changed: Set[Tuple] = set()
        # The key as read (for the SQL literals of a checkpoint between slices), by chunk key;
        # a read without them (``literals`` None) is published whole.
        self.raw_keys: Dict[Tuple, tuple] = {}
        self.literals = reading.literals if reading is not None else None
        self.order: Optional[List[Tuple]] = None
        self.at = 0
        self.sent = 0
        self.parts: Any = None

    def add(self, rows: List[Dict[str, Any]], keys: Optional[List[tuple]] = None) -> None:
        """Rows read (and their chunk key as read): converted in place, and kept unless the
        window changed their key."""
        convert = self.tv.convert
        names = self.key_names
        changed = self.changed
        by_key = self.rows
        raw_keys = self.raw_keys
        for i, values in enumerate(rows):
            convert(values)
            key = tuple([values[n] for n in names])
            if key not in changed:
                by_key[key] = values
            if keys is not None:
                raw_keys[key] = keys[i]

    def land(self, parts: Any) -> None:
        """At the high mark: the rows left are published from here on, with ``parts``."""
        self.parts = parts
        self.order = list(self.rows)

    def next_rows(self, n: Optional[int]) -> List[Dict[str, Any]]:
        """The next ``n`` rows to publish (None: all that are left), less those changed since."""
        order = self.order
        assert order is not None
        i = self.at
        end = len(order) if n is None or self.literals is None else min(i + n, len(order))
        self.at = end
        rows = self.rows
        return [rows[k] for k in order[i:end] if k in rows]

    def published_all(self) -> bool:
        return self.order is not None and self.at >= len(self.order)

    def done_key(self) -> Optional[List[str]]:
        """The SQL literals of the last row published or passed over, once a slice was."""
        if not self.at or self.order is None or self.literals is None:
            return None
        return self.literals(self.raw_keys[self.order[self.at - 1]])

    def remove(self, values: Dict[str, Any]) -> None:
        key = tuple([values[n] for n in self.key_names])
        self.changed.add(key)
        self.rows.pop(key, None)

    def close(self) -> None:
        """A chunk given up before it was read: its result goes."""
        if self.reading is not None:
            self.reading.close()
            self.reading = None
