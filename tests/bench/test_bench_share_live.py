"""The bench's newer lines: the live load at a share of saturation (its rate, its group in
bench-compare, its table) and the Kafka transaction timings (their table)."""
import json

import pytest

from bench import compare, live, loaded, report, suite
from bench.proc import BenchError
from bench.shapes import SHAPES, LiveStatement


def _line(shape: str, share: float, offered: float, p99: float, held: bool = True) -> dict:
    return {"shape": shape, "interpreter": "pypy", "python": ".venv-pypy/bin/python",
            "saturation_share": share, "saturation_rows_s": offered / share,
            "offered_rows_s": offered, "rows_s": offered if held else offered / 2,
            "load_held": held, "p50_ms": 10.0, "p99_ms": p99, "max_ms": p99 + 1}


def test_the_rate_is_whole_statements_per_second_closest_to_the_share():
    bulk = LiveStatement("INSERT ... FROM seq_{lo}_to_{hi}", 1000)
    assert loaded.events_per_second(217100.0, 0.5, bulk) == 109  # 108.55 statements/s
    assert loaded.events_per_second(4400.0, 0.5, LiveStatement("CALL churn(100, 10000, {lo})", 100)) == 22
    # A saturation too small for one statement a second still offers one, not zero.
    assert loaded.events_per_second(300.0, 0.5, bulk) == 1


def test_the_catchup_shapes_the_issue_names_have_a_live_statement_over_their_own_rows():
    assert SHAPES["bulk"].live.rows == 1000 and "{lo}" in SHAPES["bulk"].live.sql
    assert "{hi}" in SHAPES["bulk"].live.sql
    assert SHAPES["oltp"].live.sql.startswith("CALL churn(100,") and SHAPES["oltp"].live.rows == 100


def test_the_cores_a_load_needs_scale_what_each_process_took_a_row_to_the_rows_offered():
    facts = {"streamer_cores": 0.5, "mariadb_cores": 1.1, "kafka_cores": 0.2}
    # 1.8 cores for 27k rows/s is 3.2 cores at the 48k offered.
    assert loaded.cores_needed(facts, 27000.0, 48000.0) == pytest.approx(3.2)
    assert loaded.cores_needed(dict(facts, kafka_cores=None), 27000.0, 48000.0) is None
    assert loaded.cores_needed(facts, 0.0, 48000.0) is None


def test_share_runs_group_by_share_not_by_the_rate_the_host_gave_that_day():
    slow, fast = _line("bulk-live", 0.5, 73000.0, 80.0), _line("bulk-live", 0.5, 109000.0, 120.0)
    assert compare.group_of(slow) == compare.group_of(fast) == ("bulk-live@0.5sat", "pypy")
    assert compare.group_of(_line("bulk-live", 0.25, 50000.0, 1.0))[0] == "bulk-live@0.25sat"
    medians = compare.medians([slow, fast])
    assert medians[("bulk-live@0.5sat", "pypy")]["p99_ms"] == 100.0


def test_the_report_says_when_sysbench_could_not_hold_the_offered_rate():
    text = report.render([_line("bulk-live", 0.5, 109000.0, 90.0),
                          _line("oltp-live", 0.5, 27500.0, 300.0, held=False)])
    table = text.split("live load at a share", 1)[1].splitlines()
    bulk = next(r for r in table if r.strip().startswith("bulk-live"))
    oltp = next(r for r in table if r.strip().startswith("oltp-live"))
    assert " yes " in bulk and " NO " in oltp
    assert "109.0k" in bulk and "218.0k" in bulk  # offered, and the saturation it halves
    assert "catch-up (rows/s" not in text  # share lines are not catch-up lines


def test_txn_lines_get_their_own_table_and_stay_out_of_the_catchup_one():
    line = {"shape": "txn", "interpreter": "pypy", "library": ".venv-pypy/lib/streamer/librdkafka.so.1",
            "librdkafka": "2.0.2", "commits_s": 277.0, "cpu_ms_per_commit": 0.98,
            "rdk_main_ms_per_commit": 0.14, "commit_p50_ms": 2.8, "commit_p99_ms": 23.3}
    text = report.render([line, dict(line, shape="txn-system", library="librdkafka.so.1",
                                     rdk_main_ms_per_commit=2.03),
                          dict(line, shape="txn-batch", batch_ms=20.0, commit_p50_ms=2.4)])
    assert "catch-up (rows/s" not in text
    rows = text.split("Kafka transactions", 1)[1].splitlines()
    system = next(r for r in rows if r.strip().startswith("txn-system"))
    assert "2.0.2 librdkafka.so.1" in system and "2.03" in system
    batch = next(r for r in rows if r.strip().startswith("txn-batch"))
    assert " 2.4 " in batch and " 2.8 " not in batch
    assert compare.group_of(dict(line, shape="txn-batch"))[0] == "txn-batch"


def test_the_suite_times_a_commit_after_a_live_batch_as_well_as_back_to_back(monkeypatch):
    calls = []
    monkeypatch.setattr(suite, "run_json", lambda cmd, what, environ: calls.append(cmd) or json.dumps(
        {"library": "lib", "interpreter": "pypy", "commits_s": 40.0, "cpu_ms_per_commit": 1.0,
         "rdk_main_ms_per_commit": 0.1, "commit_p50_ms": 2.4, "commit_p99_ms": 5.0}))
    monkeypatch.setattr(suite, "delete_namespace", lambda ns: None)
    monkeypatch.setattr(suite.env, "write_streamer_config", lambda path, ns, include: path)
    rec = suite.measure_txn("py", False, 8.0, "/nowhere", suite.TXN_BATCH_MS)
    assert rec["shape"] == "txn-batch" and rec["batch_ms"] == 20.0
    assert calls[-1][-2:] == ["--batch-ms", "20.0"]
    assert suite.measure_txn("py", True, 8.0, "/nowhere")["shape"] == "txn-system"
    assert calls[-1][-2:] == ["--batch-ms", "0.0"]


def test_a_heartbeat_latency_splits_at_the_servers_acknowledgement_of_its_insert():
    # (id, stamped, visible) in µs; the writer saw rows 1 and 2 acknowledged, row 3 not.
    beats = [(1, 0.0, 30_000.0), (2, 1_000.0, 151_000.0), (3, 2_000.0, 9_000.0)]
    split = live.split_stats(beats, {1: 10_000.0, 2: 121_000.0})
    assert split == {"source_p50_ms": 10.0, "source_p99_ms": 120.0,
                     "after_source_p50_ms": 20.0, "after_source_p99_ms": 30.0}
    assert live.split_stats([], {}) == dict.fromkeys(live.SPLIT_KEYS)


def test_the_share_table_shows_the_split_beside_the_whole_latency():
    line = dict(_line("bulk-live", 0.5, 90000.0, 494.4), source_p50_ms=61.5, source_p99_ms=377.2,
                after_source_p50_ms=12.3, after_source_p99_ms=88.8)
    table = report.render([line]).split("live load at a share", 1)[1].splitlines()
    assert all(name in table[1] for name in ("source p50", "source p99", "after p50", "after p99"))
    row = table[3].split()
    for value in ("61.5", "377.2", "12.3", "88.8", "494.4"):
        assert value in row


def test_heartbeats_stamped_before_the_load_are_left_out_and_the_warm_ones_split():
    beats = live.Latencies(began_us=1_000_000.0, warm_from_us=2_000_000.0)
    assert not beats.add({"id": 1, "ts_us": 999_000.0}, 1_010_000.0)  # before the load
    assert beats.add({"id": 2, "ts_us": 1_500_000.0}, 1_540_000.0)  # cold only: 40 ms
    assert beats.add({"id": 3, "ts_us": 2_000_000.0}, 2_030_000.0)  # warm: 30 ms
    stats = beats.stats({3: 2_010_000.0})
    assert (stats["heartbeats"], stats["p50_ms"], stats["cold_max_ms"]) == (2, 30.0, 40.0)
    assert (stats["source_p50_ms"], stats["after_source_p50_ms"]) == (10.0, 20.0)


def test_only_a_load_that_inserts_may_use_a_blackhole_source_and_the_refusal_says_why():
    assert loaded.fits(SHAPES["bulk"], "blackhole") and loaded.fits(SHAPES["oltp"], "innodb")
    assert not loaded.fits(SHAPES["oltp"], "blackhole")
    with pytest.raises(BenchError, match="oltp live load changes existing rows.*--source-engine innodb"):
        loaded.check_engine(SHAPES["oltp"], "blackhole")
    with pytest.raises(BenchError, match="unknown source engine 'myisam'; use one of innodb, blackhole, memory"):
        loaded.check_engine(SHAPES["bulk"], "myisam")


def test_only_a_table_without_text_or_blob_may_use_a_memory_source_and_the_refusal_says_why():
    assert loaded.fits(SHAPES["oltp"], "memory") and not loaded.fits(SHAPES["bulk"], "memory")
    with pytest.raises(BenchError, match="bulk table has TEXT or BLOB columns.*innodb or blackhole"):
        loaded.check_engine(SHAPES["bulk"], "memory")
    args = suite.parse_args(["--source-engine", "memory"])
    assert args.share_live == ["oltp"]


def test_a_blackhole_source_is_its_own_group_and_column_and_innodb_joins_the_old_lines():
    old = _line("bulk-live", 0.5, 73000.0, 80.0)  # recorded before the engine was
    innodb = dict(_line("bulk-live", 0.5, 70000.0, 90.0), source_engine="innodb")
    hole = dict(_line("bulk-live", 0.5, 70000.0, 40.0), source_engine="blackhole")
    assert compare.group_of(old) == compare.group_of(innodb) == ("bulk-live@0.5sat", "pypy")
    assert compare.group_of(hole) == ("bulk-live@0.5sat/blackhole", "pypy")
    table = report.render([old, hole]).split("live load at a share", 1)[1].splitlines()
    assert "source" in table[1]
    assert [r.split()[2] for r in table[3:]] == ["innodb", "blackhole"]


def test_the_suite_offers_blackhole_only_to_the_shapes_it_fits(capsys):
    assert suite.parse_args([]).share_live == ["bulk", "oltp"]
    args = suite.parse_args(["--source-engine", "blackhole"])
    assert args.share_live == ["bulk"]  # oltp's updates would log nothing
    with pytest.raises(SystemExit):
        suite.parse_args(["--source-engine", "blackhole", "--share-live", "oltp"])
    assert "--share-live oltp: the oltp live load changes existing rows" in capsys.readouterr().err
