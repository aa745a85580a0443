"""One snapshot chunk, from its SELECT to its last row published (``engine.snapshot`` runs the
watermark algorithm around it)."""
from __future__ import annotations

from typing import Any, Dict, Iterable, Iterator, List, Optional, Set, Tuple

from streamer.errors import StreamerError
from streamer.position import GtidSet
from streamer.schema.textavro import text_writer
from streamer.schema.versions import TableVersion


class RowUnreadable(Exception):
    """A row failed to unpack, convert or encode, unexpectedly (not a ``StreamerError``, which
    names its fix and stops the stream as a binlog row's would), as it was published: its
    table's snapshot ends there (``Snapshots.abandon``), as when reading it fails."""


class Chunk:
    """One chunk between its watermarks: ``rows`` in key order, as read, each row's chunk key in
    ``keys``. While ``reading`` (a ``source.chunks`` read) is set, its rows are still being read, a
    slice at a time (``Snapshots.step``); ``changed`` holds the keys the window's changes took out:
    a row is published only if its key is not in it when its turn comes, so a row changed before
    it was read, after, or after its chunk's high mark, while the chunk is published, stays out
    alike. From its high mark (``land``) its rows are published a slice at a time, in key order
    (``messages``), with the window still open. A commit between slices checkpoints the chunk's
    progress up to the last row published or passed over (``done_key``).

    The rows are held in lists, in the order read, not by key: a changed row is rare and is
    looked for in ``changed`` as its turn comes, where a dict by key cost every row two inserts
    and two lookups of its key tuple (~0.8 µs a row under PyPy; docs/benchmarks.md, "Rows held in
    lists").

    A read whose rows come as the server sent them (``reading.unpack``) has them held so, each with
    its chunk key as read and converted as ``convert`` would (``key_of``), and unpacked and
    converted as they are published: until its high mark a row is one object, not a dozen
    (docs/benchmarks.md, "Rows held as read"); a key column's value is converted on its own as
    ``convert`` converts it in a row (``TableVersion.alone``). Where the table version's columns
    allow it, a held row's message is written from its packet (``schema.textavro``), never made a
    dict."""

    __slots__ = ("job", "low", "high", "tv", "db", "table", "key_names", "rows", "keys",
                 "last_key", "final", "low_set", "high_set", "reading", "changed", "raw_keys",
                 "literals", "landed", "at", "sent", "parts", "unpack", "key_of", "held",
                 "writer", "readable")

    def __init__(self, job_: Dict[str, Any], low: str, high: str, tv: TableVersion,
                 key_names: List[str], last_key: Optional[List[str]], final: bool,
                 reading: Any = None) -> None:
        self.job = job_
        self.low = low
        self.high = high
        self.tv = tv
        self.db = tv.db
        self.table = tv.table
        self.key_names = key_names
        self.rows: List[Any] = []
        self.keys: List[Tuple] = []  # each row's key, as ``remove`` is given it
        self.last_key = last_key
        self.final = final
        # Read-only mode: the watermarks are GTID positions, reached rather than read.
        self.low_set: Optional[GtidSet] = None
        self.high_set: Optional[GtidSet] = None
        self.reading = reading
        self.changed: Set[Tuple] = set()
        # Each row's key as read (for the SQL literals of a checkpoint between slices); a read
        # without them (``literals`` None) is published whole.
        self.raw_keys: List[tuple] = []
        self.literals = reading.literals if reading is not None else None
        self.landed = False
        self.at = 0
        self.sent = 0
        self.parts: Any = None
        self.unpack = getattr(reading, "unpack", None)
        # A held row whose text its encoding can't read, made readable (source.textrows).
        self.readable = getattr(reading, "readable", None)
        self.held = self.unpack is not None
        self.key_of = self.writer = None
        if self.held:
            self.key_of = _key_converter(tv, reading)
            if reading.plan is not None:
                self.writer = text_writer(tv, reading.d, reading.plan, reading.fix)

    def add(self, rows: List[Any], keys: Optional[List[tuple]] = None) -> None:
        """Rows read (and their chunk key as read): held as read, or converted in place."""
        if self.held:
            assert keys is not None, "a read whose rows are held as read gives their keys"
            key_of = self.key_of
            self.keys += keys if key_of is None else [key_of(raw) for raw in keys]
        else:
            convert = self.tv.convert
            for values in rows:
                convert(values)
            names = self.key_names
            self.keys += [tuple([values[n] for n in names]) for values in rows]
        self.rows += rows
        if keys is not None:
            self.raw_keys += keys

    def kept(self) -> List[Tuple]:
        """The keys of the rows read that the window's changes left in, in key order."""
        changed = self.changed
        return [key for key in self.keys if key not in changed]

    def land(self, parts: Any) -> None:
        """At the high mark: the rows left are published from here on, with ``parts``."""
        self.parts = parts
        self.landed = True

    def _next(self, n: Optional[int]) -> List[Any]:
        """The next ``n`` rows to publish (None: all that are left), less those changed since,
        as held."""
        assert self.landed
        i = self.at
        total = len(self.rows)
        end = total if n is None or self.literals is None else min(i + n, total)
        self.at = end
        rows = self.rows[i:end]
        changed = self.changed
        if changed:
            keys = self.keys
            rows = [row for j, row in enumerate(rows, i) if keys[j] not in changed]
        return rows

    def next_rows(self, n: Optional[int]) -> Iterable[Dict[str, Any]]:
        """The next ``n`` rows to publish, as converted dicts."""
        out = self._next(n)
        return self._converted(out) if self.held else out

    def messages(self, n: Optional[int], row: int) -> Iterator[Tuple[bytes, Optional[bytes]]]:
        """The (value, key) of the next ``n`` rows to publish, the first the chunk's ``row``:
        written from the packets as read where the table version has a ``TextWriter``, else
        from the rows as converted dicts. A row that can't be written, unexpectedly, raises
        ``RowUnreadable``."""
        mid, txid, flag = self.parts
        if self.writer is not None:
            rows: Iterable[Any] = self._next(n)
            write = self.writer.encode
        else:
            rows = self.next_rows(n)
            write = self._encode
        for item in rows:
            try:
                message = write(item, mid, row, txid, flag)
            except StreamerError:
                raise
            except UnicodeDecodeError as exc:
                message = self._written_readable(write, item, exc, mid, row, txid, flag)
            except Exception as exc:
                raise RowUnreadable(exc) from exc
            yield message
            row += 1

    def _written_readable(self, write: Any, held: Any, exc: UnicodeDecodeError,
                          *parts: Any) -> Tuple[bytes, Optional[bytes]]:
        """The message of a held row whose text its encoding can't read: made readable (each
        such value noted), as the binlog's reader publishes it."""
        if self.readable is None:
            raise RowUnreadable(exc) from exc
        try:
            return write(self.readable(held), *parts)
        except StreamerError:
            raise
        except Exception as again:
            raise RowUnreadable(again) from again

    def _encode(self, datum: Dict[str, Any], mid: bytes, row: int, txid: bytes,
                flag: bytes) -> Tuple[bytes, Optional[bytes]]:
        tv = self.tv
        return tv.envelope.encode_read(datum, mid, row, txid, flag), tv.key(datum)

    def _converted(self, held: List[Any]) -> Iterator[Dict[str, Any]]:
        """Rows held as read, each unpacked and converted as it is asked for: a slice of them
        made dicts at once would all be alive at the next minor collection."""
        unpack = self.unpack
        convert = self.tv.convert
        for row in held:
            try:
                try:
                    values = unpack(row)
                except UnicodeDecodeError:
                    if self.readable is None:
                        raise
                    values = unpack(self.readable(row))
                convert(values)
            except StreamerError:
                raise
            except Exception as exc:
                raise RowUnreadable(exc) from exc
            yield values

    def published_all(self) -> bool:
        return self.landed and self.at >= len(self.rows)

    def done_key(self) -> Optional[List[str]]:
        """The SQL literals of the last row published or passed over, once a slice was."""
        if not self.at or not self.landed or self.literals is None:
            return None
        return self.literals(self.raw_keys[self.at - 1])

    def remove(self, values: Dict[str, Any]) -> None:
        """A change of the row with ``values``' key, in the window: that row stays out."""
        self.changed.add(tuple([values[n] for n in self.key_names]))

    def close(self) -> None:
        """A chunk given up before it was read: its result goes."""
        if self.reading is not None:
            self.reading.close()
            self.reading = None


def _key_converter(tv: TableVersion, reading: Any) -> Any:
    """The function from a chunk key as read to the key ``remove`` is given, or None when they
    are the same: what ``unpack`` then ``tv.convert`` do to each key column's value, column by
    column."""
    steps = [(shape,) + tv.alone(name)
             for name, shape in zip(reading.d.chunk_key, reading.key_shapers)]
    if all(x is None for step in steps for x in step):
        return None

    def key_of(raw: tuple) -> tuple:
        out = []
        for v, (shape, conv, branch, fill) in zip(raw, steps):
            if v is not None and shape is not None:
                v = shape(v)
            if v is not None:
                if conv is not None:
                    v = conv(v)
                if branch is not None:
                    v = (branch, v)
            if v is None:
                v = fill
            out.append(v)
        return tuple(out)
    return key_of
