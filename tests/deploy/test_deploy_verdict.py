"""The canary verdict's rules, on /status bodies shaped as the endpoint serves them."""
from streamer.deploy.verify import Limits, judge


def status(pos=1000, rows=0, errors=0, lag_s=0.5, lag_bytes=0, file="mysql-bin.000001"):
    return {"position": {"file": file, "pos": pos, "gtid_set": None, "rows": 0},
            "lag_seconds": lag_s, "lag_bytes": lag_bytes,
            "counters": {"rows_total": rows, "errors_total": errors, "messages_total": rows,
                         "bytes_total": rows * 100, "batches_total": 1, "reconnects_total": 0}}


def window(*bodies, seconds=10.0):
    step = seconds / max(1, len(bodies) - 1)
    return [(i * step, b, "") for i, b in enumerate(bodies)]


def reasons(result):
    return " | ".join(text for _, text in result[1])


def test_advancing_canary_without_errors_passes():
    result = judge(window(status(1000, 0), status(5000, 400)), None, Limits())
    assert result[0], reasons(result)
    assert "advancing" in reasons(result)


def test_idle_canary_that_is_caught_up_passes():
    result = judge(window(status(1000, lag_s=None), status(1000, lag_s=None)), None, Limits())
    assert result[0], reasons(result)
    assert "idle and caught up" in reasons(result)


def test_canary_stuck_behind_the_source_fails_and_says_how_far():
    result = judge(window(status(1000, lag_bytes=9000, lag_s=None),
                          status(1000, lag_bytes=12000, lag_s=None)), None, Limits())
    assert not result[0]
    assert "stuck: position stayed at" in reasons(result) and "12000 bytes ahead" in reasons(result)


def test_rising_error_count_fails_even_while_advancing():
    result = judge(window(status(1000, 0, errors=2), status(2000, 50, errors=3)), None, Limits())
    assert not result[0]
    assert "errors_total rose from 2 to 3" in reasons(result)


def test_lag_over_the_limit_fails():
    result = judge(window(status(1000), status(2000, 10, lag_s=75.0, lag_bytes=500)), None,
                   Limits(max_lag_s=60))
    assert not result[0]
    assert "lag 75.0s over the 60s limit" in reasons(result)


def test_canary_much_slower_than_busy_main_fails():
    canary = window(status(1000, 0), status(2000, 500, lag_s=30, lag_bytes=10 ** 6))
    main = window(status(1000, 0), status(9000, 2000))
    result = judge(canary, main, Limits(max_slower_pct=25))
    assert not result[0]
    assert "throughput 50 rows/s vs main 200 rows/s (more than 25% below)" in reasons(result)


def test_canary_close_to_main_passes_and_idle_main_is_not_compared():
    canary = window(status(1000, 0), status(2000, 1900))
    assert judge(canary, window(status(1000, 0), status(2000, 2000)), Limits())[0]
    idle = judge(canary, window(status(1000, 0), status(1000, 0)), Limits())
    assert idle[0] and "main is idle" in reasons(idle)


def test_caught_up_canary_is_not_called_slower_over_a_short_window():
    canary = window(status(1000, 0), status(2000, 22, lag_s=0, lag_bytes=0))
    main = window(status(1000, 0), status(9000, 37))
    result = judge(canary, main, Limits(max_slower_pct=25, min_main_rows_per_s=1))
    assert result[0], reasons(result)
    assert "the canary is caught up" in reasons(result)


def test_unanswered_status_fails_with_the_error():
    result = judge([(0.0, status(), ""), (1.0, None, "Connection refused")], None, Limits())
    assert not result[0]
    assert "did not answer 1 of 2 times (Connection refused)" in reasons(result)


def test_an_unrecovered_error_fails_and_is_named_even_with_a_steady_error_count():
    # Between two reconnect attempts of a long backoff, errors_total stands still.
    down = dict(status(1000, errors=4, lag_bytes=3000, lag_s=None),
                health={"status": "error", "reason": "(4151, 'Access denied, this account is locked')"})
    result = judge(window(down, down), None, Limits())
    assert not result[0]
    assert "last error, still unrecovered: (4151, 'Access denied, this account is locked')" \
        in reasons(result)


def test_a_healthy_status_adds_no_error_line():
    ok = dict(status(1000), health={"status": "ok", "reason": "caught up"})
    result = judge(window(ok, dict(ok, position={"file": "mysql-bin.000001", "pos": 2000})),
                   None, Limits())
    assert result[0] and "last error" not in reasons(result), reasons(result)


def test_the_verdict_names_the_release_each_instance_runs():
    from streamer.deploy.verify import runs

    def built(release):
        return dict(status(), build={"version": "0.1.0", "release": release,
                                     "python": "PyPy 7.3.11 (Python 3.9.16)"})
    said = runs(window(status(), built("B")), window(built("A"), None))
    assert said == ("  canary runs streamer 0.1.0 (release B) on PyPy 7.3.11 (Python 3.9.16); "
                    "main runs streamer 0.1.0 (release A) on PyPy 7.3.11 (Python 3.9.16)")
    assert runs(window(status()), None) == ("  canary runs unknown (no answer, or a streamer "
                                            "from before /status said it)")
