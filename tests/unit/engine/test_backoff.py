"""The reconnect delays shared by start-up and a dropped stream."""
from streamer import config
from streamer.engine.supervisor import Backoff


def _mysql(first, most, attempts):
    return config.build({"mysql": {"server_id": 9, "reconnect_backoff_s": first,
                                   "reconnect_backoff_max_s": most,
                                   "reconnect_max_attempts": attempts}}).mysql


def test_delays_double_up_to_the_cap_without_a_limit():
    b = Backoff(_mysql(0.5, 3.0, 0))
    assert [b.next() for _ in range(6)] == [0.5, 1.0, 2.0, 3.0, 3.0, 3.0]


def test_attempts_beyond_the_limit_get_no_delay():
    b = Backoff(_mysql(0.2, 1.0, 2))
    assert [b.next(), b.next(), b.next()] == [0.2, 0.4, None]
    assert b.attempts - 1 == 2  # what the "gave up after N reconnect attempts" error says


def test_a_connection_that_worked_starts_the_delays_and_the_attempts_over():
    b = Backoff(_mysql(0.2, 1.0, 2))
    assert [b.next(), b.next()] == [0.2, 0.4]
    b.succeeded()
    # A blip after a long good run is a first attempt again, not the third (given up).
    assert [b.next(), b.next(), b.next()] == [0.2, 0.4, None]
