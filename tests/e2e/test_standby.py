"""Hot standby (ha.enabled, kafka.lease) against the real servers: two instances of one source under a
load of multi-row and multi-statement transactions. The active one is SIGKILLed 10 times in
`make soak` (4 in `make test`, 2 under CPython), each killed instance started again as the new standby; then a SIGTERM hands over; then the active one
is SIGSTOPped past its session and woken again. A read_committed consumer checked against the
binlog sees nothing lost, nothing doubled, per-key order kept. Takeover times (kill to the new
active reading the binlog) are printed and written to .local/results/standby.jsonl."""
import datetime
import json
import os
import random
import signal
import statistics
import sys
import time

from tests import support
from tests.e2e.test_exactly_once import Load, assert_matches_binlog, load_table

READING = "reading the binlog from"


def _reading_at(proc):
    """The log time of the instance's last 'reading the binlog from' line, as epoch seconds."""
    line = [x for x in proc.output().splitlines() if READING in x][-1]
    stamp = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
    return stamp.timestamp()


def _active(procs, timeout=60):
    try:
        return support.wait_for(
            lambda: next((p for p in procs if p.proc.poll() is None and READING in p.output()),
                         None), timeout=timeout, what="an instance to take the lease and stream")
    except AssertionError as exc:  # say what each instance did: one may have died
        told = "\n".join(f"--- exit {p.proc.poll()}:\n{p.output()[-1500:]}" for p in procs)
        raise AssertionError(f"{exc}\n{told}") from None


def test_a_standby_takes_over_from_killed_stopped_and_paused_instances_losing_nothing(db, tmp_path):
    name, conn = db
    start = load_table(conn)
    ns = support.unique("ha")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.t"],
                               batch={"max_messages": 300, "linger_ms": 20},
                               ha={"enabled": True, "session_timeout_ms": 6000,
                                   "heartbeat_interval_ms": 500})
    count = [0]

    def instance(*args):
        count[0] += 1
        return support.StreamerProcess(cfg, str(tmp_path / f"log{count[0]}"), *args)

    # The first active one starts at the recorded position; every later one from the checkpoint.
    first = instance("--start-file", start[0], "--start-pos", str(start[1]))
    _active([first])
    procs = [first, instance()]
    support.wait_for(lambda: "standby: waiting for the lease" in procs[1].output(),
                     what="the second instance to wait as a standby")
    load = Load(name)
    load.start()
    rng = random.Random(5)
    kill_takeovers = []
    try:
        active = procs[0]
        for _ in range(support.soak(4, 10)):
            time.sleep(rng.uniform(0.3, 2.0))
            killed_at = time.time()
            active.stop(signal.SIGKILL)
            procs.remove(active)
            procs.append(instance())
            active = _active(procs)
            kill_takeovers.append(_reading_at(active) - killed_at)
        # A clean stop leaves the group after its last commit.
        support.wait_for(lambda: all("standby: waiting" in p.output() for p in procs
                                     if p is not active), what="the standby to be up")
        stopped_at = time.time()
        assert active.stop(signal.SIGTERM) == 0, active.output()[-3000:]
        assert "lost the lease" not in active.output()  # it gave the lease up
        procs.remove(active)
        active = _active(procs)
        term_takeover = _reading_at(active) - stopped_at
        procs.append(instance())
        support.wait_for(lambda: "standby: waiting" in procs[-1].output(), what="a standby")
        # A paused active one loses the lease when its session expires, and once woken it
        # publishes nothing: its lease is gone and its producer was fenced.
        paused = active
        assert paused.proc.poll() is None
        paused.proc.send_signal(signal.SIGSTOP)
        procs.remove(paused)
        try:
            active = _active(procs, timeout=90)
        finally:
            paused.proc.send_signal(signal.SIGCONT)
        code = paused.wait(60)
        woken = paused.output()
        assert code != 0 and ("lost the lease" in woken or "fenced" in woken), woken[-3000:]
        time.sleep(1.0)
    finally:
        load.stop()
    truth = load.changes_since(start)
    deletes = sum(1 for r in truth if r[3] == "d")
    msgs = support.consume([f"{ns}.{name}.t"], expect=len(truth) + deletes, decode_ns=ns,
                           timeout=240)
    for p in procs:
        assert p.stop() == 0, p.output()[-3000:]
        assert "lost the lease" not in p.output()
    assert len(truth) > 1000
    assert_matches_binlog(msgs, truth)

    ordered = sorted(kill_takeovers)
    report = {"kills": len(ordered), "kill_takeover_s": {
        "p50": round(statistics.median(ordered), 3), "p99": round(ordered[-1], 3),
        "max": round(ordered[-1], 3)}, "sigterm_takeover_s": round(term_takeover, 3),
        "session_timeout_ms": 6000, "python": os.path.basename(os.path.realpath(
            sys.executable))}
    print("standby takeovers:", json.dumps(report))
    results = os.path.join(support.LOCAL, "results")
    os.makedirs(results, exist_ok=True)
    with open(os.path.join(results, "standby.jsonl"), "a") as fh:
        fh.write(json.dumps(dict(report, at=time.time())) + "\n")
