"""What one Kafka transaction costs the streamer: its Publisher committing back to back, each
transaction holding one message and the checkpoint, as a live streamer's smallest batch does.
With ``--batch-ms`` each transaction stays open that long before its commit, as a live batch
does, so that what the commit waits for once the batch's partitions are long registered shows.

Runs as a child under the interpreter being measured (``python -m bench.txn -c CONFIG``) and
prints one JSON object: commits per second, CPU per commit (the whole process, librdkafka's
threads included, and librdkafka's main thread alone) and commit times. With the environment's
``STREAMER_LIBRDKAFKA=system`` it measures the system's librdkafka instead of the project's copy
(streamer.rdkafka), which is how the suite shows what a current librdkafka saves.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any, Dict

from streamer import config as config_mod
from streamer.kafka import rdkafka
from streamer.kafka.publisher import Publisher
from streamer.position import Position

from .bare import interpreter
from .proc import schedstat, stat_cpu


def _thread_cpu() -> Dict[str, float]:
    """CPU seconds per thread name of this process (librdkafka names its threads rdk:...). The
    kernel's schedstat keeps nanoseconds; stat counts clock ticks of 10 ms, and in a quick run
    rdk:main spent less than one in all its commits, which then came out as 0."""
    out: Dict[str, float] = {}
    for tid in os.listdir("/proc/self/task"):
        found = stat_cpu(f"/proc/self/task/{tid}/stat")
        if not found:  # a thread that ended meanwhile
            continue
        precise = schedstat(f"/proc/self/task/{tid}/schedstat")
        cpu = precise[0] if precise is not None else found[1]  # else the ticks stand
        out[found[0]] = out.get(found[0], 0.0) + cpu
    return out


def measure(cfg: Dict[str, Any], seconds: float, batch_ms: float = 0.0) -> Dict[str, Any]:
    """``batch_ms``: how long each transaction stays open between its message and its commit,
    as a live batch does (0: back to back)."""
    topic = f"{cfg['namespace']}.txn"
    times = []
    with Publisher(cfg) as pub:
        pub.ensure_topic(topic)
        pub.begin()
        pub.produce(topic, b"x" * 300, b"k")
        pub.commit(Position("mysql-bin.000001", 4))  # the first commit to a topic is slow
        cpu0, threads0 = time.process_time(), _thread_cpu()
        began = time.monotonic()
        n = 0
        while time.monotonic() - began < seconds:
            pub.begin()
            pub.produce(topic, b"x" * 300, b"k%d" % n)
            if batch_ms:
                time.sleep(batch_ms / 1000.0)
            pub.commit(Position("mysql-bin.000001", 4 + n))
            times.append(pub.last_commit_s * 1000.0)
            n += 1
        wall = time.monotonic() - began
        cpu, threads = time.process_time() - cpu0, _thread_cpu()
    if n == 0:
        raise SystemExit(f"no transaction committed within {seconds} s: is Kafka at "
                         f"{cfg['kafka']['bootstrap.servers']} up?")
    rdk_main = threads.get("rdk:main", 0.0) - threads0.get("rdk:main", 0.0)
    times.sort()
    return {"commits": n, "commits_s": round(n / wall, 1),
            "cpu_ms_per_commit": round(cpu / n * 1000.0, 3),
            "rdk_main_ms_per_commit": round(rdk_main / n * 1000.0, 3),
            "commit_p50_ms": round(statistics.median(times), 3),
            "commit_p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))], 3),
            "library": rdkafka.LIBRARY,
            "librdkafka": rdkafka.LIBRARY_VERSION}


def main(argv: Any = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.txn", description=__doc__)
    p.add_argument("-c", "--config", required=True, help="a streamer config (its Kafka and namespace)")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--batch-ms", type=float, default=0.0,
                   help="ms each transaction stays open before its commit (default 0)")
    args = p.parse_args(argv)
    out = measure(config_mod.load(args.config), args.seconds, args.batch_ms)
    print(json.dumps(dict(out, **interpreter())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
