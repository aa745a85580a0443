"""What a second process would give a snapshot: ``python -m bench.crossing``.

#53 asks a snapshot to use both cores: the next chunk read while the current one is published.
Threads share the GIL, so the reading would go to a second process, and its rows would cross to
the one that publishes them. This bench measures that crossing on the `snapshot-wide` table's
rows, the whole chunk path as the snapshot stage runs it (``TableReader.open``, ``Chunk``'s
hold, land and messages), into a real producer (lz4, not transactional, flushed at each chunk's
end as a commit would be), two ways, alternating, each a fresh process:

- ``one``: the streamer today, one process reads, holds, writes and produces;
- ``two``: a reader process reads, holds and writes each row's message (value, key), and sends
  them in blocks of ``BLOCK`` through a pipe (1 MB); the first process only takes them from the
  pipe and produces them, so the reader goes on with the next chunk while a chunk is flushed.

Each run streams the table ``--rounds`` times; the first round is the JIT's warm-up and is left
out. The line records each way's rows/s, the CPU a row in each process, and the machine's idle
share over the warm rounds (``/proc/stat``): with the servers on the same two cores, what idles
says how far pipelining better could go. Results: docs/benchmarks.md, "The second process".
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import time
from typing import Any, BinaryIO, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from streamer.ops.gcpacing import GC_ENV

from . import env, results
from .shapes import drop
from .snapshot import load
from .watch import delete_namespace

BLOCK = 1000  # messages a block of the pipe carries
CHUNK = 10000  # rows a chunk: the snapshot's default when these figures were measured
NO_KEY = 0xFFFFFFFF  # a length that says the message has no key
_COUNT = struct.Struct("<I")

Message = Tuple[bytes, Optional[bytes]]


def frame(messages: Sequence[Message]) -> bytes:
    """A block as it crosses: the messages' count, each one's value and key length, the bytes."""
    lengths: List[int] = []
    parts: List[bytes] = []
    for value, key in messages:
        lengths.append(len(value))
        lengths.append(NO_KEY if key is None else len(key))
        parts.append(value)
        if key is not None:
            parts.append(key)
    head = struct.pack(f"<I{len(lengths)}I", len(messages), *lengths)
    return head + b"".join(parts)


def unframe(read: Callable[[int], bytes]) -> Optional[List[Message]]:
    """The next block's messages, read with ``read(n)`` (a buffered file's: all ``n`` bytes, or
    fewer only at the end); None at the end of the stream."""
    head = read(4)
    if not head:
        return None
    n = _COUNT.unpack(head)[0]
    lengths = struct.unpack(f"<{2 * n}I", _exactly(read, 8 * n))
    data = _exactly(read, sum(x for x in lengths if x != NO_KEY))
    out: List[Message] = []
    at = 0
    for i in range(0, 2 * n, 2):
        end = at + lengths[i]
        value = data[at:end]
        if lengths[i + 1] == NO_KEY:
            out.append((value, None))
            at = end
        else:
            at = end + lengths[i + 1]
            out.append((value, data[end:at]))
    return out


def _exactly(read: Callable[[int], bytes], n: int) -> bytes:
    got = read(n)
    if len(got) != n:
        raise EOFError(f"the pipe ended inside a block ({len(got)} of {n} bytes)")
    return got


def _write_all(fd: int, data: bytes) -> None:
    """``data`` written to the pipe whole. os.write, not a buffered file's write: under PyPy the
    buffered writer cost the reader 7.2–7.8 µs a row against 5.8 (ad hoc, one run each)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


# -- the worker: one run of one way, in its own process -------------------------------------------

def _chunks(db: str, rows: int) -> Iterator[Any]:
    """The table's chunks, each read and held, landed as the snapshot stage lands one."""
    from streamer.codec.avro import SNAPSHOT_BYTES
    from streamer.engine.chunk import Chunk
    from streamer.engine.snapshot import job
    from streamer.schema.versions import TableCatalog, TableFilter
    from streamer.source.chunks import TableReader

    source = TableReader(dict(host="127.0.0.1", port=env.MYSQL_PORT, user="admin",
                              password=env.read_password("admin"), charset="utf8mb4"),
                         "streamer_heartbeat", "crossing")
    d = source.describe(db, "snap")
    assert d is not None, f"{db}.snap is not there"
    tv = TableCatalog("crossing", TableFilter([db + ".*"], [])).snapshot_version(d)
    last = None
    read_rows = 0
    while read_rows < rows:
        reading = source.open(d, last, None, CHUNK)
        chunk = Chunk(job("1", db + ".snap", None), "L", "H", tv, list(d.chunk_key), {}, None,
                      True, reading)
        while not reading.done:
            chunk.add(reading.fetch(BLOCK), reading.keys)
        mid, txid = tv.envelope.event_parts(int(time.time() * 1000), 1, "mysql-bin.000001", 4,
                                            None, db, "snap", "crossing")
        chunk.land((mid, txid, SNAPSHOT_BYTES["last" if reading.final else "true"]))
        yield chunk
        read_rows += len(chunk.order)
        last = reading.last_key
        if reading.final:
            break


def _blocks(chunk: Any) -> Iterator[List[Message]]:
    row = 0
    while not chunk.published_all():
        block = list(chunk.messages(BLOCK, row))
        row += len(block)
        if block:  # a block of none ends a round in the pipe
            yield block


def _producer() -> Any:
    from streamer.kafka.rdkafka import Producer
    from streamer.kafka.settings import producer_settings

    conf = producer_settings({"bootstrap.servers": env.KAFKA})
    return Producer({k: v for k, v in conf.items() if "transaction" not in k})


class _Round:
    """One pass over the table: its wall time, the process's CPU and the machine's idle share
    (what neither the streamer's processes, the servers nor the hypervisor took: env.Steal)."""

    def __init__(self) -> None:
        self.wall, self.cpu, self.machine = time.perf_counter(), time.process_time(), env.Steal()

    def done(self, rows: int, **more: Any) -> Dict[str, Any]:
        wall = time.perf_counter() - self.wall
        steal = self.machine.stop()
        busy = self.machine.busy_pct
        return dict(rows_per_s=rows / wall,
                    cpu_us=(time.process_time() - self.cpu) / rows * 1e6,
                    idle_pct=None if busy is None else 100.0 - busy - (steal or 0.0),
                    **more)


def _one(db: str, rows: int, rounds: int, topic: str) -> Iterator[Dict[str, Any]]:
    producer = _producer()
    for _ in range(rounds):
        r = _Round()
        n = 0
        for chunk in _chunks(db, rows):
            for block in _blocks(chunk):
                for value, key in block:
                    producer.produce(topic, value, key, None)
                n += len(block)
            producer.flush(30)
        yield r.done(n)


def _reader(db: str, rows: int, rounds: int, fd: int) -> None:
    """The second process: each round's blocks, then a block of none and its own CPU a row."""
    for _ in range(rounds):
        began, n = time.process_time(), 0
        for chunk in _chunks(db, rows):
            for block in _blocks(chunk):
                _write_all(fd, frame(block))
                n += len(block)
        _write_all(fd, frame([]) + struct.pack("<d", (time.process_time() - began) / n * 1e6))
    os.close(fd)


def _two(db: str, rows: int, rounds: int, topic: str) -> Iterator[Dict[str, Any]]:
    r, w = os.pipe()
    try:
        import fcntl
        fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ: a pipe of 1 MB, ~3000 wide rows
    except (ImportError, OSError):
        pass
    pid = os.fork()  # before the producer's threads exist
    if pid == 0:
        os.close(r)
        code = 0
        try:
            _reader(db, rows, rounds, w)
        except BaseException:  # noqa: BLE001 - said on stderr; the parent sees the pipe end
            import traceback
            traceback.print_exc()
            code = 1
        os._exit(code)
    os.close(w)
    producer = _producer()
    pipe: BinaryIO = os.fdopen(r, "rb", buffering=1 << 20)
    r_ = _Round()
    n = 0
    while True:
        block = unframe(pipe.read)
        if block is None:
            break
        if not block:  # the round's end: the reader's CPU a row follows
            producer.flush(30)
            reader_us = struct.unpack("<d", _exactly(pipe.read, 8))[0]
            yield r_.done(n, reader_cpu_us=reader_us)
            r_, n = _Round(), 0
            continue
        for value, key in block:
            producer.produce(topic, value, key, None)
        n += len(block)
        if n % CHUNK == 0:
            producer.flush(30)  # where the stage's commit flushes a chunk
    _, status = os.waitpid(pid, 0)
    if status:
        raise RuntimeError(f"the reader process ended with status {status}")


def worker(way: str, db: str, rows: int, rounds: int, topic: str) -> None:
    for i, line in enumerate((_one if way == "one" else _two)(db, rows, rounds, topic)):
        print(json.dumps(dict(line, round=i, interpreter=sys.implementation.name)), flush=True)


# -- the driver --------------------------------------------------------------------------------

def _run(python: str, way: str, db: str, rows: int, rounds: int) -> List[Dict[str, Any]]:
    namespace = env.unique("crossing")  # its topic is dropped after the run
    try:
        proc = subprocess.run([python, "-m", "bench.crossing", "--worker", way, "--db", db,
                               "--rows", str(rows), "--rounds", str(rounds),
                               "--topic", f"{namespace}.snap"],
                              cwd=env.ROOT, stdout=subprocess.PIPE, check=True,
                              env={**GC_ENV, **os.environ})
    finally:
        delete_namespace(namespace)
    lines = [json.loads(x) for x in proc.stdout.decode().splitlines() if x.startswith("{")]
    if len(lines) != rounds:
        raise RuntimeError(f"{way}: {len(lines)} rounds reported of {rounds}")
    return lines[1:]  # the first is the JIT's warm-up


def _median(lines: List[Dict[str, Any]], field: str) -> Optional[float]:
    values = [x[field] for x in lines if x.get(field) is not None]  # no /proc/stat: no idle
    return round(statistics.median(values), 2) if values else None


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--python", default=sys.executable, help="the interpreter measured")
    p.add_argument("--rows", type=int, default=200000, help="rows of the wide table")
    p.add_argument("--rounds", type=int, default=4, help="passes over the table a run")
    p.add_argument("--repeat", type=int, default=3, help="runs of each way, alternating")
    p.add_argument("--db", help="a database whose `snap` table is the wide one (kept)")
    p.add_argument("--results", default=env.RESULTS)
    p.add_argument("--worker", choices=["one", "two"], help=argparse.SUPPRESS)
    p.add_argument("--topic", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker(args.worker, args.db, args.rows, args.rounds, args.topic)
        return 0
    db = args.db or load(False, args.rows, "wide")[0]
    runs: Dict[str, List[Dict[str, Any]]] = {"one": [], "two": []}
    try:
        for _ in range(args.repeat):
            for way in ("one", "two"):
                runs[way] += _run(args.python, way, db, args.rows, args.rounds)
    finally:
        if not args.db:
            drop(db)
    rec: Dict[str, Any] = dict(results.run_header(False, args.repeat), shape="crossing",
                               interpreter=runs["one"][0]["interpreter"], rows=args.rows)
    for way, lines in runs.items():
        for field in ("rows_per_s", "cpu_us", "idle_pct"):
            rec[f"{way}_{field}"] = _median(lines, field)
    rec["two_reader_cpu_us"] = _median(runs["two"], "reader_cpu_us")
    results.emit(rec, args.results)
    print(f"crossing: one process {rec['one_rows_per_s']:.0f} rows/s, {rec['one_cpu_us']} µs a "
          f"row; two {rec['two_rows_per_s']:.0f} rows/s, {rec['two_cpu_us']} + "
          f"{rec['two_reader_cpu_us']} µs a row; idle {rec['one_idle_pct']} / "
          f"{rec['two_idle_pct']} % (medians of {len(runs['one'])} warm rounds)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
