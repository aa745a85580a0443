"""bench.compare's groups: only lines that measured the same thing share a median."""
from bench import compare


def _live(rate: float, p99: float, quick: bool = False) -> dict:
    return {"shape": "live", "interpreter": "pypy", "offered_rows_s": rate, "p99_ms": p99,
            "quick": quick}


def test_live_runs_at_other_offered_rates_are_compared_rate_by_rate():
    before = compare.medians([_live(550.0, 30.0), _live(12050.0, 50.0), _live(12050.0, 60.0)])
    after = compare.medians([_live(550.0, 33.0), _live(12050.0, 110.0)])
    assert set(before) == {("live@550/s", "pypy"), ("live@12050/s", "pypy")}
    assert before[("live@12050/s", "pypy")]["p99_ms"] == 55.0
    rows = {(r[0], r[2]): r[5:] for r in compare.compare(before, after, threshold=10.0)}
    assert rows[("live@550/s", "p99_ms")] == ["+10.0%", "WORSE"]
    assert rows[("live@12050/s", "p99_ms")] == ["+100.0%", "WORSE"]


def test_catchup_lines_group_by_shape_and_quick_runs_stay_apart():
    bulk = {"shape": "bulk", "interpreter": "pypy", "e2e_rows_s": 100.0}
    assert compare.group_of(bulk) == ("bulk", "pypy")
    assert compare.group_of(dict(bulk, quick=True)) == ("bulk/quick", "pypy")
    assert compare.group_of(_live(100.0, 1.0, quick=True)) == ("live@100/s/quick", "pypy")


def test_lines_of_another_message_format_stay_apart():
    bulk = {"shape": "bulk", "interpreter": "pypy", "e2e_rows_s": 100.0}
    assert compare.group_of(dict(bulk, format="debezium-avro")) == ("bulk/debezium-avro", "pypy")
    assert compare.group_of(bulk) == ("bulk", "pypy")  # the streamer's own format: as before


def test_each_bench_format_is_a_config_the_streamer_accepts():
    from bench import env
    from streamer import config
    for name, sections in env.FORMATS.items():
        cfg = config.validate(config._merge(config.DEFAULTS, dict(
            {"mysql": {"server_id": 9}}, **sections)))
        assert cfg["format"] == (sections.get("format") or "streamer"), name
