"""A results line's `repeat` is the number of runs behind its numbers, not the suite's flag."""
from bench import live, results, startup, suite


def _no_servers(monkeypatch):
    monkeypatch.setattr(suite, "interpreter_of",
                        lambda python: {"interpreter": "pypy", "version": "3.9"})
    monkeypatch.setattr(live, "run", lambda *a: {"rows_s": 550.0, "p50_ms": 7.0,
                                                "p99_ms": 30.0, "max_ms": 60.0})
    monkeypatch.setattr(startup, "run", lambda python, workdir, runs: {
        "runs": runs, "fresh_start_s": 0.4, "restart_s": 0.39})


def test_a_live_line_says_one_run_whatever_repeat_the_suite_ran_with(monkeypatch):
    _no_servers(monkeypatch)
    args = suite.parse_args(["--repeat", "3"])
    header = results.run_header(args.quick, args.repeat)
    rec = suite.measure_live(args.python[0], args, "/nonexistent")
    line = dict(header, **rec)
    assert header["repeat"] == 3
    assert (line["shape"], line["repeat"], line["p99_ms"]) == ("live", 1, 30.0)


def test_a_startup_line_says_how_many_starts_its_medians_are_of(monkeypatch):
    _no_servers(monkeypatch)
    header = results.run_header(False, 3)
    line = dict(header, **suite.measure_startup("python", 5, "/nonexistent"))
    assert (line["shape"], line["repeat"], line["runs"]) == ("startup", 5, 5)
