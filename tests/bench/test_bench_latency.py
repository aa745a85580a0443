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


class _Clock:
    """A clock the loader's thread advances only by sleeping, and a connection that costs
    ``connect_s`` of it to open: a row's stamp is the clock's time when it is sent."""

    def __init__(self, connect_s):
        self.now = 100.0
        self.connect_s = connect_s
        self.sent = []

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds

    def time_ns(self):
        return int(self.now * 1e9)

    def connect(self, db):
        self.now += self.connect_s
        clock = self

        class Cursor:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

            def execute(self, sql, args):
                clock.sent.append(clock.now)

        class Conn:
            def cursor(self):
                return Cursor()

            def close(self):
                pass

        return Conn()


def test_the_loader_s_clock_starts_once_its_connection_is_open_so_its_first_rows_are_no_burst(
        monkeypatch):
    clock = _Clock(connect_s=0.5)
    monkeypatch.setattr(latency, "time", clock)
    loader = latency.Loader("db", 1000, 1, connect=clock.connect)
    assert abs(loader.run() - 1000) <= 1  # the float sum of 1000 intervals may let one more in
    gaps = [b - a for a, b in zip(clock.sent, clock.sent[1:])]
    # A connection opened after the clock started found its first 500 rows overdue and sent
    # them back to back (gaps of 0); now each row waits for its turn, one every 1/rate s.
    assert min(gaps) > 0.000999 and clock.sent[0] == 100.5


def test_a_cli_result_is_printed_and_appended_when_a_file_is_named(tmp_path, capsys):
    import json

    from bench import results
    out = tmp_path / "r.jsonl"
    results.emit({"b": 1, "a": 2}, str(out))
    results.emit({"c": 3}, None)
    assert capsys.readouterr().out.splitlines() == ['{"a": 2, "b": 1}', '{"c": 3}']
    assert [json.loads(x) for x in out.read_text().splitlines()] == [{"a": 2, "b": 1}]


def test_a_driver_not_under_cpython_is_told_its_own_pauses_count_as_latency():
    assert latency.driver_warning("cpython") is None
    told = latency.driver_warning("pypy")
    assert "under pypy" in told and "run it under CPython" in told and "make bench" in told


def test_a_run_of_its_own_names_the_commit_it_measured(tmp_path, monkeypatch):
    import json

    from bench import env
    monkeypatch.setattr(latency, "interpreter_of", lambda python: {"interpreter": "pypy"})
    monkeypatch.setattr(latency, "run", lambda *args: {"p50_ms": 5.0, "max_ms": 40.0})
    out = tmp_path / "r.jsonl"
    assert latency.main(["--python", "py", "--rate", "5000", "--after-start", "1.5",
                         "--results", str(out)]) == 0
    line = json.loads(out.read_text())
    assert line["commit"] == env.commit()[0] and len(line["commit"]) == 40
    assert (line["shape"], line["interpreter"], line["max_ms"]) == ("latency-restart", "pypy", 40.0)


def test_the_line_says_when_the_worst_and_the_slow_rows_came():
    # (arrival_us, stamp_us): rows at 0 s and 1 s fast (5 and 6 ms), one at 2.5 s 150 ms late, one at 4 s
    # 120 ms late.
    pairs = [(5_000, 0), (1_006_000, 1_000_000), (2_650_000, 2_500_000), (4_120_000, 4_000_000)]
    assert latency.slow_at(pairs) == {"all_max_at_s": 2.5, "all_over_100ms_from_s": 2.5,
                                      "all_over_100ms_to_s": 4.0}
    assert latency.slow_at(pairs[:2]) == {"all_max_at_s": 1.0, "all_over_100ms_from_s": None,
                                          "all_over_100ms_to_s": None}
    assert latency.slow_at([])["all_max_at_s"] is None
