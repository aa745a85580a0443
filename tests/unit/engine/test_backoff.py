"""The reconnect delays shared by start-up and a dropped stream."""
from streamer.engine.supervisor import Backoff


def test_delays_double_up_to_the_cap_without_a_limit():
    b = Backoff({"reconnect_backoff_s": 0.5, "reconnect_backoff_max_s": 3.0, "reconnect_max_attempts": 0})
    assert [b.next() for _ in range(6)] == [0.5, 1.0, 2.0, 3.0, 3.0, 3.0]


def test_attempts_beyond_the_limit_get_no_delay():
    b = Backoff({"reconnect_backoff_s": 0.2, "reconnect_backoff_max_s": 1.0, "reconnect_max_attempts": 2})
    assert [b.next(), b.next(), b.next()] == [0.2, 0.4, None]
    assert b.attempts - 1 == 2  # what the "gave up after N reconnect attempts" error says


def test_a_connection_that_worked_starts_the_delays_and_the_attempts_over():
    b = Backoff({"reconnect_backoff_s": 0.2, "reconnect_backoff_max_s": 1.0, "reconnect_max_attempts": 2})
    assert [b.next(), b.next()] == [0.2, 0.4]
    b.succeeded()
    # A blip after a long good run is a first attempt again, not the third (given up).
    assert [b.next(), b.next(), b.next()] == [0.2, 0.4, None]
