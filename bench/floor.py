"""The latency floor of exactly-once on this broker (#37): one message per Kafka transaction.

A minimal transactional producer (the streamer's own producer binding, with the publisher's
settings) publishes one message per transaction to a one-partition topic; the message holds the
wall-clock µs when it was produced, as a source row holds its write time. A ``read_committed``
consumer in its own process takes ``arrival - stamp`` for every message (same host, same clock). Nothing of MySQL or the streamer's
loop is in the path: what remains is what the Kafka transaction protocol costs here, which the
streamer's live latency can't go under.

Three modes: commits back to back (``--rate 0``); paced at a rate (``--rate N``: a transaction
every 1/N s; when a commit takes longer than that, the rate achieved is reported, not the one
asked); and grouped (``--rate N --group``): messages fall due at N a second, each stamped with the
time it fell due, and each transaction carries every message due when it begins, as the
streamer's batches carry the changes that arrived during the last commit. Only the grouped mode
keeps a rate above ~500/s here, and only it charges a slow commit to every message that waited
behind it (a paced message is stamped when it is sent, however late). The first ``--warmup``
seconds are reported apart.

With ``--producers 2`` two transactional producers take turns, a transaction each, as the
streamer's publisher does (kafka.publisher): one producer's next transaction is refused its
partitions until the broker has finished its last one, and librdkafka waits 20 ms to ask again.

With ``--checkpoint`` each transaction also writes a checkpoint (the count of messages sent) to
a one-partition topic of its own, produced with its first message, as the streamer's publisher
writes its position into every batch's transaction. That is what a resumable exactly-once
publisher can't do without: a position committed with the messages it covers, so a transaction
of two partitions (both registered with the coordinator, both written, both given a marker).

    python -m bench.floor [--rate N [--group]] [--producers P] [--checkpoint] [--seconds S]
        [--warmup W] [--results FILE]

prints one JSON line (and appends it to ``--results``): p50, p90, p99, p99.9 and max in ms, the
share over 50 and 100 ms, the messages, the rate achieved, and the producer's commit times.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
import uuid
from typing import Any, Dict, List, Optional

from . import env, results


def percentiles(values: List[float]) -> Dict[str, Optional[float]]:
    """p50/p90/p99/p99.9/max (nearest rank) and the shares over 50 and 100 ms of ``values``
    (ms)."""
    if not values:
        return {k: None for k in ("p50", "p90", "p99", "p999", "max", "over_50ms",
                                  "over_100ms")}
    s = sorted(values)
    n = len(s)

    def rank(q: float) -> float:
        return round(s[min(n - 1, max(0, int(q * n + 0.999999) - 1))], 3)

    return {"p50": rank(0.50), "p90": rank(0.90), "p99": rank(0.99), "p999": rank(0.999),
            "max": round(s[-1], 3), "over_50ms": round(sum(v > 50 for v in s) / n, 5),
            "over_100ms": round(sum(v > 100 for v in s) / n, 5)}


END = b"end"  # the producer's last message: the consumer stops there
CHECKPOINT_KEY = b"floor"


def consume(topic: str, deadline_s: float) -> List[List[float]]:
    """[arrival µs, stamp µs] of each message of ``topic``, read_committed, up to END (runs as
    a child)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": env.KAFKA, "group.id": f"floor-{uuid.uuid4().hex}",
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 5, "fetch.min.bytes": 1})
    c.assign([TopicPartition(topic, 0, 0)])
    out: List[List[float]] = []
    end = time.monotonic() + deadline_s
    try:
        while time.monotonic() < end:
            m = c.poll(0.1)
            if m is None or m.error():
                continue
            if m.value() == END:
                break
            out.append([time.time_ns() / 1000.0, float(m.value().decode())])
    finally:
        c.close()
    return out


def produce(topic: str, rate: float, seconds: float, group: bool = False,
            producers: int = 1, checkpoints: Optional[str] = None) -> Dict[str, Any]:
    """Publish one message per transaction (``group``: every message due) for ``seconds``; the
    messages sent and the commit times. With ``producers`` > 1, transactional producers take
    turns, a transaction each, as the streamer's publisher does. With ``checkpoints`` (a topic),
    each transaction also holds a checkpoint there, produced with its first message."""
    from streamer.kafka import rdkafka
    from streamer.kafka.settings import DEFAULT_PRODUCER

    conf = dict(DEFAULT_PRODUCER, **{"bootstrap.servers": env.KAFKA,
                                     "enable.idempotence": True, "acks": "all"})
    ps = [rdkafka.Producer(dict(conf, **{"transactional.id": f"floor-{uuid.uuid4().hex}"}))
          for _ in range(producers)]
    turns = itertools.cycle(ps)
    p = next(turns)
    commits: List[float] = []

    def begin(p: Any, sent: int) -> None:
        p.begin_transaction()
        if checkpoints:  # the position after the messages sent so far, with the first message
            p.produce(checkpoints, str(sent).encode(), CHECKPOINT_KEY)

    try:
        for each in ps:
            each.init_transactions(60)
        interval = 1.0 / rate if rate else 0.0
        began = time.monotonic()
        due = began
        sent = 0
        while time.monotonic() - began < seconds:
            if group:
                now = time.monotonic()
                if due > now:
                    time.sleep(due - now)
                    now = time.monotonic()
                # Every message due by now, stamped with when it fell due (wall clock, µs).
                offset = time.time() - now
                begin(p, sent)
                while due <= now:
                    p.produce(topic, str((due + offset) * 1e6).encode())
                    due += interval
                    sent += 1
                t0 = time.monotonic()
                p.commit_transaction(30)
                commits.append((time.monotonic() - t0) * 1000.0)
                p = next(turns)
                continue
            if interval:
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                due += interval
            begin(p, sent)
            p.produce(topic, str(time.time_ns() / 1000.0).encode())
            t0 = time.monotonic()
            p.commit_transaction(30)
            commits.append((time.monotonic() - t0) * 1000.0)
            p = next(turns)
            sent += 1
        elapsed = time.monotonic() - began
        p.begin_transaction()
        p.produce(topic, END)
        p.commit_transaction(30)
    finally:
        for each in ps:
            each.close()
    return {"sent": sent, "commits": len(commits), "elapsed_s": elapsed,
            "commit_ms": percentiles(commits),
            "librdkafka": rdkafka.LIBRARY_VERSION}


def _end_offset(topic: str) -> int:
    """The end offset of ``topic``'s one partition."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": env.KAFKA, "group.id": f"floor-{uuid.uuid4().hex}"})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        c.close()


def measure(rate: float, seconds: float, warmup: float, group: bool = False,
            producers: int = 1, checkpoint: bool = False) -> Dict[str, Any]:
    topic = f"floor.{uuid.uuid4().hex[:12]}"
    checkpoints = f"{topic}.positions" if checkpoint else None
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": env.KAFKA})
    topics = [t for t in (topic, checkpoints) if t]
    created = admin.create_topics([NewTopic(t, 1, 1) for t in topics])  # one request
    for t in topics:
        created[t].result(30)
    child = subprocess.Popen([sys.executable, "-m", "bench.floor", "--consume", topic,
                              "--deadline", str(seconds + 60)],
                             stdout=subprocess.PIPE, cwd=env.ROOT)
    time.sleep(1.0)  # the consumer is assigned and fetching before the first message
    sent = produce(topic, rate, seconds, group, producers, checkpoints)
    out, _ = child.communicate(timeout=seconds + 90)  # read while it writes: a pipe holds 64 KB
    pairs = json.loads(out or b"[]")
    # One record and one commit marker a transaction, when each transaction held a checkpoint.
    offsets = _end_offset(checkpoints) if checkpoints else 0
    admin.delete_topics(topics)
    first = min((stamp for _, stamp in pairs), default=0.0)
    warm = [(arrival - stamp) / 1000.0 for arrival, stamp in pairs
            if stamp - first >= warmup * 1e6]
    cold = [(arrival - stamp) / 1000.0 for arrival, stamp in pairs
            if stamp - first < warmup * 1e6]
    return {"bench": "floor", "mode": "grouped" if group else "paced" if rate else "back-to-back",
            "commits": sent["commits"], "producers": producers, "checkpoint": checkpoint,
            "checkpoint_offsets": offsets,
            "rate_asked": rate, "rate_achieved": round(sent["sent"] / sent["elapsed_s"], 1),
            "messages": sent["sent"], "received": len(pairs), "warmup_s": warmup,
            "latency_ms": percentiles(warm), "warmup_latency_ms": percentiles(cold),
            "commit_ms": sent["commit_ms"], "librdkafka": sent["librdkafka"],
            "python": os.path.basename(sys.executable), "ts": time.time()}


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=float, default=0.0, help="transactions/s (0: back to back)")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--group", action="store_true",
                    help="with --rate: each transaction carries every message due (stamped due)")
    ap.add_argument("--producers", type=int, default=1,
                    help="transactional producers taking turns, a transaction each (the "
                         "streamer's publisher has 2)")
    ap.add_argument("--checkpoint", action="store_true",
                    help="each transaction also writes a checkpoint to a topic of its own, as "
                         "the streamer's batches do")
    ap.add_argument("--results", help="JSON lines file to append the result to")
    ap.add_argument("--consume", help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, default=60.0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.consume:
        print(json.dumps(consume(args.consume, args.deadline)))
        return 0
    if args.group and not args.rate:
        ap.error("--group needs --rate")
    if args.producers < 1:
        ap.error("--producers must be at least 1")
    result = measure(args.rate, args.seconds, args.warmup, args.group, args.producers,
                     args.checkpoint)
    results.emit(result, args.results)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
