"""The start-up helper that runs one step in a thread while another step runs."""
import threading

import pymysql
import pytest

from streamer.engine.start import Ahead


def test_result_is_the_value_computed_in_another_thread():
    ahead = Ahead(lambda: threading.current_thread().name, "probe-thread")
    assert ahead.result() == "probe-thread"
    assert threading.current_thread().name != "probe-thread"


def test_result_raises_the_threads_exception_to_the_caller():
    def refused() -> None:
        raise pymysql.err.OperationalError(2003, "Can't connect to MySQL server")

    ahead = Ahead(refused, "probe-thread")
    with pytest.raises(pymysql.err.OperationalError) as err:
        ahead.result()
    assert err.value.args[0] == 2003


def test_both_steps_run_at_once():
    started = threading.Event()
    release = threading.Event()

    def waits() -> str:
        started.set()
        assert release.wait(10)
        return "done"

    ahead = Ahead(waits, "probe-thread")
    # The caller goes on while the step is still running, and can unblock it.
    assert started.wait(10)
    release.set()
    assert ahead.result() == "done"
