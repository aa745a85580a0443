"""bench.latency's arithmetic: the cold/warm split at the stamp and the line's fields."""
from bench import latency


def test_rows_stamped_before_the_warm_mark_are_cold_and_latency_is_arrival_minus_stamp():
    pairs = [(1_005_000.0, 1_000_000.0), (2_002_000.0, 2_000_000.0), (3_150_000.0, 3_000_000.0)]
    cold, warm = latency.split(pairs, warm_from_us=2_000_000.0)
    assert cold == [5.0] and warm == [2.0, 150.0]


def test_the_line_s_fields_name_each_percentile_and_give_the_shares_in_percent():
    out = latency.stats("cold_", [1.0] * 97 + [60.0, 120.0, 130.0])
    assert out["cold_p50_ms"] == 1.0 and out["cold_p99_ms"] == 120.0 and out["cold_max_ms"] == 130.0
    assert out["cold_over_50ms_pct"] == 3.0 and out["cold_over_100ms_pct"] == 2.0
    assert latency.stats("", []) == {"p50_ms": None, "p90_ms": None, "p99_ms": None,
                                     "p999_ms": None, "max_ms": None, "over_50ms_pct": None,
                                     "over_100ms_pct": None}


def test_the_loader_spreads_a_rate_over_enough_connections():
    assert latency.Loader("db", 1000, 1).connections == 1
    assert latency.Loader("db", 5000, 1).connections == 4


def test_a_cli_result_is_printed_and_appended_when_a_file_is_named(tmp_path, capsys):
    import json

    from bench import results
    out = tmp_path / "r.jsonl"
    results.emit({"b": 1, "a": 2}, str(out))
    results.emit({"c": 3}, None)
    assert capsys.readouterr().out.splitlines() == ['{"a": 2, "b": 1}', '{"c": 3}']
    assert [json.loads(x) for x in out.read_text().splitlines()] == [{"a": 2, "b": 1}]
