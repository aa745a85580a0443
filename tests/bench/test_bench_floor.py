"""The floor benchmark's statistics (bench.floor): nearest-rank percentiles and shares."""
from bench.floor import percentiles


def test_percentiles_are_nearest_rank_and_shares_count_what_is_over():
    values = [float(v) for v in range(1, 1001)]  # 1..1000 ms
    p = percentiles(values)
    assert (p["p50"], p["p90"], p["p99"], p["p999"], p["max"]) == (500.0, 900.0, 990.0, 999.0,
                                                                   1000.0)
    assert p["over_50ms"] == 0.95 and p["over_100ms"] == 0.9
    assert percentiles([7.0])["p999"] == 7.0
    assert percentiles([])["p50"] is None
