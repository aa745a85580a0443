"""bench.targets: each target judged on the median of its group's lines."""
import json

import pytest

from bench import targets


def _catchup(shape, interp, **kw):
    rec = {"shape": shape, "interpreter": interp, "quick": False, "repeat": 3, "ratio": 0.9,
           "e2e_rows_s": 90000.0, "rss_mb": 120.0, "rss_growth_mb": 1.0}
    if interp == "pypy":
        rec.update(pypy_over_cpython=3.5, pypy_over_cpython_warm=5.0)
    rec.update(kw)
    return rec


def _share(shape, p50, p99, held=True, **kw):
    rec = {"shape": f"{shape}-live", "interpreter": "pypy", "quick": False, "repeat": 1,
           "saturation_share": 0.5, "load_held": held, "p50_ms": p50, "p99_ms": p99,
           "busy_pct": 50.0, "rss_mb": 125.0}
    rec.update(kw)
    return rec


def _live(shape, rate, p50, p99, max_ms=40.0):
    return {"shape": shape, "interpreter": "pypy", "quick": False, "repeat": 1,
            "offered_rows_s": rate, "p50_ms": p50, "p99_ms": p99, "max_ms": max_ms}


def _all_met():
    lines = [_catchup(s, i) for s in targets.SHAPES for i in ("pypy", "cpython")]
    return lines + [_share(s, 10.0, 60.0) for s in targets.LIVE_SHAPES] + \
        [_share("bulk", 10.0, 60.0, source_engine="blackhole"),
         _share("oltp", 10.0, 60.0, source_engine="memory"),
         {"shape": "snapshot", "interpreter": "pypy", "quick": False, "repeat": 1,
          "rows_s": 160000.0, "rss_mb": 150.0, "rss_growth_mb": 0.5},
         {"shape": "snapshot-wide", "interpreter": "pypy", "quick": False, "repeat": 1,
          "rows_s": 220000.0, "launch_rows_s": 205000.0, "rss_mb": 180.0}] + \
        [_live(shape, rate, 3.0, 12.0) for shape in ("floor", "latency") for rate in targets.LATENCY_RATES]


def _by_name(rows):
    return {row[0]: row for row in rows}


def test_lines_that_meet_every_target_miss_none():
    rows, missed, quick = targets.judge(_all_met())
    assert missed == 0 and not quick
    # Peak RSS, flat RSS per interpreter, and per live rate p50 and p99 over the floor and max.
    assert len(rows) == len(targets.TARGETS) + 3 + 3 * len(targets.LATENCY_RATES)
    assert {row[5] for row in rows} == {"yes"}


def test_a_snapshot_under_150k_rows_s_misses_its_target():
    lines = [r for r in _all_met() if r["shape"] != "snapshot"] + [
        {"shape": "snapshot", "interpreter": "pypy", "quick": False, "repeat": 1,
         "rows_s": 120000.0, "rss_mb": 150.0}]
    rows, missed, _ = targets.judge(lines)
    assert _by_name(rows)["PyPy snapshot rows/s"][5] == "NO" and missed == 1


def test_a_wide_snapshot_is_judged_from_launch_to_done():
    # Its rate between the log's begins and done lines meets 200k; from launch it does not.
    lines = [r for r in _all_met() if r["shape"] != "snapshot-wide"] + [
        {"shape": "snapshot-wide", "interpreter": "pypy", "quick": False, "repeat": 1,
         "rows_s": 219000.0, "launch_rows_s": 190000.0, "rss_mb": 177.0}]
    rows, missed, _ = targets.judge(lines)
    row = _by_name(rows)["PyPy snapshot-wide rows/s, launch to done"]
    assert row[3:6] == ["190.0k", ">= 200.0k", "NO"] and missed == 1
    assert _by_name(rows)["PyPy snapshot-wide peak RSS MB"][5] == "yes"


def test_a_target_is_judged_on_the_median_of_its_lines():
    lines = _all_met() + [_share("bulk", 30.0, 150.0), _share("bulk", 25.0, 140.0)]
    rows, missed, _ = targets.judge(lines)
    p99 = _by_name(rows)["PyPy p99 ms at half of saturation, bulk"]
    assert p99[1:6] == ["3", "3", "140.0", "<= 100.0", "NO"]
    p50 = _by_name(rows)["PyPy p50 ms at half of saturation, bulk"]
    assert p50[3] == "25.0" and p50[5] == "NO"
    assert missed == 2


def test_a_load_sysbench_could_not_hold_is_left_out_and_said():
    lines = _all_met() + [_share("bulk", 900.0, 3000.0, held=False)]
    rows, missed, _ = targets.judge(lines)
    p99 = _by_name(rows)["PyPy p99 ms at half of saturation, bulk"]
    assert missed == 0 and p99[3] == "60.0"
    assert "1 not held, left out" in p99[6] and "host 50 % busy" in p99[6]


def test_a_slow_bulk_catch_up_and_a_low_speedup_are_misses():
    lines = [r for r in _all_met() if not (r["shape"] == "bulk" and r["interpreter"] == "pypy")]
    lines.append(_catchup("bulk", "pypy", e2e_rows_s=51800.0, pypy_over_cpython=2.9))
    rows, missed, _ = targets.judge(lines)
    named = _by_name(rows)
    assert named["PyPy bulk e2e rows/s (start-up included)"][3:6] == ["51.8k", ">= 70.0k", "NO"]
    assert named["PyPy / CPython cold, bulk"][5] == "NO"
    assert named["PyPy / CPython warm, bulk"][5] == "yes"
    assert missed == 2


def test_rss_past_the_peak_or_growing_over_the_long_run_is_a_miss():
    lines = [r for r in _all_met() if r["shape"] != "long"]
    lines += [_catchup("long", "pypy", rss_mb=310.0, rss_growth_mb=40.0), _catchup("long", "cpython")]
    rows, missed, _ = targets.judge(lines)
    named = _by_name(rows)
    assert named["peak RSS MB, every line"][3:6] == ["310", "<= 300", "NO"]
    assert named["pypy RSS growth MB, 2nd half of 1M rows"][3:6] == ["40.0", "<= 15.5", "NO"]
    assert named["cpython RSS growth MB, 2nd half of 1M rows"][5] == "yes"
    assert missed == 2


def test_what_was_not_measured_is_shown_and_not_counted_as_missed():
    rows, missed, _ = targets.judge([_catchup("bulk", "pypy")])
    named = _by_name(rows)
    assert missed == 0
    assert named["PyPy p99 ms at half of saturation, bulk"][1:6] == ["0", "0", "-", "<= 100.0", "-"]
    assert named["PyPy bulk e2e rows/s (start-up included)"][5] == "yes"


def test_quick_lines_count_only_when_there_is_nothing_else():
    slow_quick = dict(_catchup("bulk", "pypy", e2e_rows_s=1000.0), quick=True)
    rows, missed, quick = targets.judge(_all_met() + [slow_quick])
    assert missed == 0 and not quick
    rows, missed, quick = targets.judge([slow_quick])
    assert quick and _by_name(rows)["PyPy bulk e2e rows/s (start-up included)"][5] == "NO"
    assert "QUICK" in targets.render([slow_quick])


def test_the_command_judges_a_results_file_and_refuses_an_unknown_commit(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(dict(r, commit="ab" * 20)) + "\n" for r in _all_met()))
    assert targets.main([str(path)]) == 0
    assert "0 missed" in capsys.readouterr().out
    assert targets.main(["--results", str(path)]) == 0  # the newest commit in it
    assert f"{'ab' * 6} ({len(_all_met())} lines)" in capsys.readouterr().out
    assert targets.main(["--results", str(path), "cdcdcdcd"]) == 2
    assert "no results for 'cdcdcdcd'" in capsys.readouterr().err


@pytest.mark.parametrize("shape, engine", [("bulk", "blackhole"), ("oltp", "memory")])
def test_a_lighter_source_is_judged_on_its_own_rows_never_pooled_with_innodb(shape, engine):
    lines = [r for r in _all_met() if "source_engine" not in r]
    lines.append(_share(shape, 30.0, 200.0, source_engine=engine))
    rows, missed, _ = targets.judge(lines)
    named = _by_name(rows)
    assert named[f"PyPy p99 ms at half of saturation, {shape}"][1:6] == ["1", "1", "60.0", "<= 100.0", "yes"]
    light = named[f"PyPy p99 ms at half of saturation, {shape}, source in {engine.upper()}"]
    assert light[1:6] == ["1", "1", "200.0", "<= 100.0", "NO"]
    assert missed == 2  # its p50 and p99


def test_a_load_too_big_for_the_host_says_how_many_cores_it_needs():
    lines = [r for r in _all_met() if r["shape"] != "oltp-live"] + \
        [_share("oltp", 40.0, 430.0, held=False, cores_needed=3.31, host_cores=2),
         _share("oltp", 80.0, 570.0, held=False, cores_needed=2.5, host_cores=2)]
    rows, missed, _ = targets.judge(lines)
    p99 = _by_name(rows)["PyPy p99 ms at half of saturation, oltp"]
    assert p99[3] == "-" and p99[5] == "-" and missed == 0
    assert p99[6] == "2 not held, left out: the load needs ~2.9 cores, the host has 2"


def test_a_load_that_fits_the_host_but_was_not_held_says_so():
    lines = _all_met() + [_share("bulk", 900.0, 3000.0, held=False, cores_needed=1.4, host_cores=2)]
    rows, _, _ = targets.judge(lines)
    note = _by_name(rows)["PyPy p99 ms at half of saturation, bulk"][6]
    assert "1 not held, left out (the load needs ~1.4 of the host's 2 cores)" in note


def test_live_latency_is_judged_against_the_floor_at_the_same_rate():
    lines = [r for r in _all_met() if r["shape"] not in ("floor", "latency")]
    lines += [_live("floor", 1000.0, 3.0, 12.0), _live("floor", 1000.0, 3.2, 14.0),
              _live("latency", 1000.0, 4.0, 25.0), _live("latency", 1000.0, 4.2, 29.0, 120.0),
              _live("latency", 1000.0, 4.4, 30.0, 130.0)]
    rows, missed, _ = targets.judge(lines)
    by = _by_name(rows)
    p50 = by["PyPy live p50 ms at 1000 rows/s, <= 1.5x the floor's"]
    p99 = by["PyPy live p99 ms at 1000 rows/s, <= 2x the floor's"]
    assert p50[3:6] == ["4.2", "<= 4.7", "yes"]  # 1.5 x the floor's median p50 of 3.1
    assert p99[3:6] == ["29.0", "<= 26.0", "NO"] and p99[6] == "floor 2 lines"
    assert by["PyPy live max ms at 1000 rows/s, warm"][3:6] == ["120.0", "<= 100.0", "NO"]
    # No lines at 5k rows/s: not measured, not missed.
    assert by["PyPy live p50 ms at 5000 rows/s, <= 1.5x the floor's"][5] == "-"
    assert missed == 2


def test_without_floor_lines_the_live_latency_is_not_judged():
    lines = [r for r in _all_met() if r["shape"] != "floor"]
    rows, missed, _ = targets.judge(lines)
    row = _by_name(rows)["PyPy live p99 ms at 5000 rows/s, <= 2x the floor's"]
    assert row[5] == "-" and row[6] == "no floor lines" and missed == 0
