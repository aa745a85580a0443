"""The benchmark suite runs end to end on a tiny backlog and records a sane results line.

It writes to a temporary results file, never to the committed bench/results.jsonl.
"""
import importlib.util
import json
import os
import platform
import re
import subprocess
import sys

from bench import binlogs, env
from tests import support

SHAPE_ROWS = 20000  # bench.shapes: quick bulk


def _run(*args: str, environ=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=env.ROOT, capture_output=True, text=True,
                          timeout=300, env=environ)


def _binlog_files():
    conn = support.admin()
    try:
        return [row[0] for row in support.sql(conn, "SHOW BINARY LOGS")], binlogs.binlog_dir(conn)
    finally:
        conn.close()


def _committed_results_state():
    try:
        st = os.stat(env.RESULTS)
        return st.st_size, st.st_mtime_ns
    except FileNotFoundError:
        return None


def test_quick_bulk_catchup_appends_one_sane_line_per_interpreter(tmp_path):
    out_file = tmp_path / "results.jsonl"
    committed_before = _committed_results_state()

    done = _run("-m", "bench.suite", "--quick", "--no-latency", "--shape", "bulk", "--no-live", "--no-startup",
                "--no-txn", "--no-snapshot", "--warmup", "1", "--python", sys.executable, "--results", str(out_file))

    assert done.returncode == 0, done.stdout + done.stderr
    lines = [json.loads(x) for x in out_file.read_text().splitlines()]
    assert len(lines) == 1  # the warm-up run is printed, not recorded
    assert "warm-up 1/1" in done.stdout and "(not recorded)" in done.stdout
    # ... with the seconds the broker spent compiling meanwhile.
    assert re.search(r"warm-up 1/1 .*, Kafka's JIT compilers \d+\.\d\d s\n", done.stdout)
    rec = lines[0]
    assert re.fullmatch(r"[0-9a-f]{40}", rec["commit"]) and isinstance(rec["dirty"], bool)
    assert re.fullmatch(r"[0-9a-f]{12}" if rec["dirty"] else "", rec["dirty_digest"])
    assert rec["shape"] == "bulk" and rec["rows"] == SHAPE_ROWS and rec["quick"] is True
    assert rec["interpreter"] == platform.python_implementation().lower()
    assert rec["host_cores"] == os.cpu_count()
    for key in ("bare_rows_s", "e2e_rows_s", "catchup_rows_s", "warm_rows_s"):
        assert rec[key] > 0, key
    # End to end counts from the process spawn, so the start-up lies inside its window.
    assert 0 < rec["start_s"] < SHAPE_ROWS / rec["e2e_rows_s"]
    assert abs(rec["ratio"] - rec["e2e_rows_s"] / rec["bare_rows_s"]) < 0.01
    assert 20 < rec["rss_mb"] < 4000
    assert rec["bare_rows_in_range"] >= SHAPE_ROWS
    assert 0 <= rec["cpu_steal_pct"] <= 100  # recorded with each run, to explain noisy ones
    assert "e2e/bare" in done.stdout and " bulk " in done.stdout
    assert _committed_results_state() == committed_before
    # The run's binlog went after it: one fresh file is left, the one the report names.
    purged = re.search(r"bench: purged (\d+) binlog files \((\d+\.\d\d) GB\), everything "
                       r"written before (\S+), which stays", done.stdout)
    assert purged, done.stdout[-2000:]
    files, where = _binlog_files()
    assert files[0] == purged[3] and os.path.isfile(os.path.join(where, files[0]))
    # What stays: the fresh file, or the oldest one the local (make run) streamer's
    # checkpoint needs, if it has one.
    needed = binlogs.local_needs()
    if needed is None:
        assert int(purged[1]) >= 1 and len(files) == 1
    else:
        assert files[0] == min(needed, files[-1])


def test_quick_startup_times_a_first_start_and_a_restart(tmp_path):
    out_file = tmp_path / "results.jsonl"
    pyc = importlib.util.cache_from_source(os.path.join(env.ROOT, "streamer", "engine",
                                                        "pipeline.py"))
    if os.path.exists(pyc):
        os.remove(pyc)

    conn = support.admin()
    support.sql(conn, "FLUSH BINARY LOGS")  # at least two files, for --keep-binlogs to keep
    conn.close()
    files_before, _ = _binlog_files()

    done = _run("-m", "bench.suite", "--quick", "--no-latency", "--no-catchup", "--no-live", "--no-txn",
                "--no-snapshot", "--keep-binlogs", "--python", sys.executable, "--results", str(out_file),
                environ=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))

    assert done.returncode == 0, done.stdout + done.stderr
    files_after, _ = _binlog_files()
    assert "purged" not in done.stdout and files_after[:len(files_before)] == files_before
    lines = [json.loads(x) for x in out_file.read_text().splitlines()]
    assert [rec["shape"] for rec in lines] == ["startup"]
    rec = lines[0]
    assert rec["interpreter"] == platform.python_implementation().lower() and rec["runs"] == 1
    # Spawn to reading: at least the interpreter's own start, and well under a minute.
    assert 0.05 < rec["fresh_start_s"] < 60 and 0.05 < rec["restart_s"] < 60
    assert rec["fresh_start_samples"] == [rec["fresh_start_s"]]
    assert rec["restart_samples"] == [rec["restart_s"]]
    assert "first start" in done.stdout and "restart" in done.stdout
    # Measured with the package's bytecode written, as an installed release has it, even where
    # the environment tells interpreters not to write any.
    assert os.path.exists(pyc)


def test_compare_reports_percent_change_and_flags_a_regression(tmp_path):
    base = {"commit": "a" * 40, "shape": "bulk", "interpreter": "pypy", "quick": False,
            "e2e_rows_s": 40000.0, "rss_mb": 150.0}
    worse = dict(base, commit="b" * 40, e2e_rows_s=30000.0, rss_mb=150.0)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(json.dumps(base) + "\n")
    b.write_text(json.dumps(worse) + "\n")

    done = _run("-m", "bench.compare", str(a), str(b))

    assert done.returncode == 0, done.stderr
    e2e = [ln for ln in done.stdout.splitlines() if "e2e_rows_s" in ln]
    assert len(e2e) == 1 and "-25.0%" in e2e[0] and "WORSE" in e2e[0]
    rss = [ln for ln in done.stdout.splitlines() if "rss_mb" in ln]
    assert "+0.0%" in rss[0] and "WORSE" not in rss[0]


def test_compare_names_the_fix_for_an_unknown_commit(tmp_path):
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps({"commit": "c" * 40, "shape": "bulk", "interpreter": "pypy"}) + "\n")

    done = _run("-m", "bench.compare", "--results", str(results), "deadbeef", "c" * 12)

    assert done.returncode == 2
    assert "no results for 'deadbeef'" in done.stderr and "make bench" in done.stderr


def test_quick_share_live_offers_the_shapes_own_rows_at_half_its_catchup_rate(tmp_path):
    out_file = tmp_path / "results.jsonl"

    done = _run("-m", "bench.suite", "--quick", "--no-latency", "--shape", "bulk", "--no-startup", "--warmup", "0",
                "--no-txn", "--no-snapshot", "--no-rate-live", "--share-live", "bulk", "--python", sys.executable,
                "--results", str(out_file))

    assert done.returncode == 0, done.stdout + done.stderr
    catchup, share = [json.loads(x) for x in out_file.read_text().splitlines()]
    assert catchup["shape"] == "bulk" and share["shape"] == "bulk-live"
    # Quick backlogs commit in a batch or two, so the cold catch-up rate is the saturation.
    assert share["saturation_of"] == "catchup_rows_s"
    assert share["saturation_rows_s"] == catchup["catchup_rows_s"] and share["saturation_share"] == 0.5
    # Whole 1000-row statements per second, the nearest to half the saturation (at least one).
    statements = max(1, round(catchup["catchup_rows_s"] * 0.5 / 1000))
    assert share["rows_per_event"] == 1000 and share["offered_rows_s"] == statements * 1000
    assert share["rows_s"] > 0 and isinstance(share["load_held"], bool)
    assert share["heartbeats"] > 0 and 0 < share["p50_ms"] <= share["p99_ms"] <= share["max_ms"]
    assert 0 < share["busy_pct"] <= 100 and share["streamer_cores"] > 0
    # MariaDB wrote the rows and Kafka took them: both were found and measured.
    assert share["mariadb_cores"] > 0 and share["kafka_cores"] > 0
    # Each one's wait for a CPU was read from the kernel, not left out.
    assert all(share[f"{name}_runq"] >= 0 for name in ("streamer", "mariadb", "kafka"))
    assert "live load at a share" in done.stdout and "bulk-live" in done.stdout


def test_quick_txn_times_a_commit_on_the_project_s_librdkafka_and_on_the_system_s(tmp_path):
    out_file = tmp_path / "results.jsonl"

    done = _run("-m", "bench.suite", "--quick", "--no-latency", "--no-catchup", "--no-startup", "--no-live",
                "--no-snapshot", "--python", sys.executable, "--results", str(out_file))

    assert done.returncode == 0, done.stdout + done.stderr
    own, system, batch = [json.loads(x) for x in out_file.read_text().splitlines()]
    assert (own["shape"], system["shape"], batch["shape"]) == ("txn", "txn-system", "txn-batch")
    # Recorded relative to the repo: the venv's own build, and the linker's choice by name.
    venv = os.path.relpath(sys.prefix, env.ROOT)
    assert own["library"] == batch["library"] == os.path.join(venv, "lib", "streamer", "librdkafka.so.1")
    assert system["library"] == "librdkafka.so.1"
    # Each of the batch line's transactions stayed open for a live batch's linger first.
    assert batch["batch_ms"] == 20.0 and "batch_ms" not in own
    assert own["librdkafka"] == batch["librdkafka"] == "2.16.0" and system["librdkafka"] == "2.0.2"
    for rec in (own, system, batch):
        assert rec["commits"] > 0 and rec["commits_s"] > 0
        assert 0 < rec["rdk_main_ms_per_commit"] < rec["cpu_ms_per_commit"]
        assert 0 < rec["commit_p50_ms"] <= rec["commit_p99_ms"]
    assert "Kafka transactions back to back" in done.stdout


def test_quick_snapshot_reads_the_whole_table_and_measures_a_live_stream_beside_it(tmp_path):
    out_file = tmp_path / "results.jsonl"

    done = _run("-m", "bench.suite", "--quick", "--no-latency", "--no-catchup", "--no-startup", "--no-live",
                "--no-txn", "--snapshot-chunk-rows", "5000", "--python", sys.executable,
                "--results", str(out_file))

    assert done.returncode == 0, done.stdout + done.stderr
    snap, cost, wide, mixed = [json.loads(x) for x in out_file.read_text().splitlines()]
    assert (snap["shape"], cost["shape"], wide["shape"], mixed["shape"]) == \
        ("snapshot", "snapshot-live", "snapshot-wide", "snapshot-mixed")
    # The snapshot-wide and snapshot-mixed shapes: their own tables, and the rate from launch
    # as well.
    for other in (wide, mixed):
        assert other["rows"] == 50000 and other["chunks"] == 10
        assert 0 < other["launch_rows_s"] <= other["rows_s"]
    # bench.snapshot fails the run unless exactly the table's rows were published.
    assert snap["rows"] == 50000 and snap["chunks"] == 10 and snap["chunk_rows"] == 5000
    assert snap["rows_s"] > 0 and snap["cpu_s"] > 0 and snap["rss_mb"] > 0
    assert cost["beats_during"] > 0 and 0 < cost["without_p50_ms"] <= cost["without_p99_ms"]
    assert 0 < cost["p50_ms"] <= cost["p99_ms"] and cost["streamer_cores"] > 0
    assert "snapshots (start.initial: snapshot)" in done.stdout
    assert "snapshot-mixed" in done.stdout and "without and during a snapshot" in done.stdout


def test_quick_latency_times_fixed_rate_rows_through_the_streamer_and_the_floor_beside_it(tmp_path):
    from bench import compare
    out_file = tmp_path / "results.jsonl"

    done = _run("-m", "bench.suite", "--quick", "--no-catchup", "--no-startup", "--no-live",
                "--no-txn", "--no-snapshot", "--latency-rate", "100", "--python", sys.executable,
                "--results", str(out_file))

    assert done.returncode == 0, done.stdout + done.stderr
    lines = [json.loads(x) for x in out_file.read_text().splitlines()]
    floors = [r for r in lines if r["shape"] == "floor"]
    (turns,) = [r for r in lines if r["shape"] == "floor-turns"]
    (ckpt,) = [r for r in lines if r["shape"] == "floor-checkpoint"]
    (lat,) = [r for r in lines if r["shape"] == "latency"]
    # The floor back to back and grouped at the load's rate, grouped with two producers taking
    # turns, as the streamer's publisher does, and grouped with a checkpoint in each
    # transaction, as its batches have.
    assert [(r["offered_rows_s"], r["mode"]) for r in floors] == [(0.0, "back-to-back"), (100.0, "grouped")]
    assert [(r["producers"], r["checkpoint"]) for r in floors] == [(1, False), (1, False)]
    assert (turns["offered_rows_s"], turns["mode"], turns["producers"]) == (100.0, "grouped", 2)
    assert compare.group_of(turns)[0] == "floor-turns@100/s/quick"
    assert (ckpt["offered_rows_s"], ckpt["mode"], ckpt["producers"]) == (100.0, "grouped", 1)
    assert compare.group_of(ckpt)[0] == "floor-checkpoint@100/s/quick"
    # One checkpoint record and one commit marker in its topic for each transaction.
    assert ckpt["checkpoint_offsets"] == 2 * ckpt["commits"] > 0
    assert floors[1]["checkpoint_offsets"] == 0
    for rec in floors + [turns, ckpt, lat]:
        assert rec["rows"] > 0 and rec["rows_s"] > 0
        assert 0 < rec["p50_ms"] <= rec["p90_ms"] <= rec["p99_ms"] <= rec["p999_ms"] <= rec["max_ms"]
        assert 0 <= rec["over_50ms_pct"] <= 100 and rec["cold_p50_ms"] > 0
    assert floors[1]["rows_s"] <= 110 and floors[0]["commits"] == floors[0]["rows"]
    # bench.latency checked that the consumer saw every row written; the rate held here.
    assert lat["offered_rows_s"] == 100 and lat["rows_s"] <= 110 and lat["rows"] >= 200
    assert lat["streamer_cores"] > 0 and lat["kafka_cores"] > 0 and lat["mariadb_cores"] > 0
    # Each line says which interpreter drove it, and a driver under PyPy was told its own pauses
    # count as latency.
    assert lat["driver"] == platform.python_implementation().lower()
    assert ("this driver runs under pypy" in done.stderr) == (lat["driver"] == "pypy")
    # Under PyPy the load waited for the streamer's JIT warm-up (its default), as a load after an
    # idle start meets it; CPython has none.
    from streamer.config import DEFAULTS
    if platform.python_implementation() == "PyPy":
        assert lat["jit_warmup_transactions"] == DEFAULTS["warmup"]["transactions"] > 0
        assert lat["jit_warmup_wait_s"] > 0
    else:
        assert (lat["jit_warmup_transactions"], lat["jit_warmup_wait_s"]) == (0, 0)
    # Its own group in bench-compare, apart from other rates and the floor.
    assert compare.group_of(lat)[0] == "latency@100/s/quick" and compare.group_of(floors[0])[0] == "floor@0/s/quick"
    assert "live latency at a fixed rate" in done.stdout
    # The restart pattern: the same load, started 1.5 s after the first probe row, whatever the
    # warm-up is doing; its whole distribution, first second included, is in all_*.
    (restart,) = [r for r in lines if r["shape"] == "latency-restart"]
    assert restart["after_start_s"] == 1.5 and restart["jit_warmup_wait_s"] == 1.5
    assert restart["rows"] >= 200 and 0 < restart["all_p50_ms"] <= restart["all_max_ms"]
    assert restart["all_max_ms"] >= max(restart["max_ms"], restart["cold_max_ms"])
    assert compare.group_of(restart)[0] == "latency-restart@100/s/quick"


def test_latency_in_debeziums_avro_decodes_each_row_through_the_registry(tmp_path):
    # bench.latency --format: the streamer publishes Connect's Avro, framed by the local
    # registry (started by the driver), and the consumer reads each row's stamp back through it.
    from bench import compare
    out_file = tmp_path / "results.jsonl"

    done = _run("-m", "bench.latency", "--python", sys.executable, "--rate", "100", "--seconds",
                "2", "--warmup", "1", "--after-start", "0.5", "--format", "debezium-avro",
                "--results", str(out_file))

    assert done.returncode == 0, done.stdout + done.stderr
    (line,) = [json.loads(x) for x in out_file.read_text().splitlines()]
    assert line["format"] == "debezium-avro" and line["shape"] == "latency-restart"
    # bench.latency checked that the consumer decoded every row written.
    assert line["rows"] >= 150 and 0 < line["all_p50_ms"] <= line["all_max_ms"]
    assert compare.group_of(line)[0] == "latency-restart@100/s/debezium-avro"


def test_engine_compares_two_commits_cpu_per_row_without_kafka(tmp_path):
    # HEAD in a worktree of its own against the working tree, on small recorded files, each
    # with the JIT tuned as its `streamer run` tunes it, and a column kept out of Kafka.
    results = tmp_path / "r.jsonl"
    out = _run("-m", "bench.engine", "HEAD", ".", "--rows", "2000", "--oltp", "300",
               "--repeat", "1", "--tuned", "--exclude", "body", "--results", str(results))
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    assert [r["shape"] for r in lines] == ["engine-bulk-without-body", "engine-oltp-without-body"]
    for r in lines:
        assert (r["a"], r["b"], r["repeat"], r["tuned"], r["exclude"]) == (
            "HEAD", ".", 1, True, ["body"])
        assert all(r[f"{s}_{p}_us_per_row"] > 0 for s in "ab" for p in ("cold", "warm"))
    assert re.search(r"engine oltp warm: HEAD [\d.]+ µs/row, \. [\d.]+ \([+-][\d.]+ %\)",
                     out.stderr), out.stderr[-2000:]
    # Its worktree is gone again.
    listed = subprocess.run(["git", "worktree", "list"], cwd=env.ROOT, capture_output=True,
                            text=True).stdout
    assert "streamer-engine-" not in listed
