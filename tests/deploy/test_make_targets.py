"""What the Makefile's test targets run (read from `make -n`, which runs nothing), and how
make test's lanes split the suite (read from pytest's collection, which runs no test)."""
import os
import platform
import re
import subprocess
import sys

import pytest

from streamer.ops import gcpacing

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def recipes(*targets):
    # -o: the venv and the servers count as made, so only the targets' own commands print.
    out = subprocess.run(["make", "-n", "--no-print-directory", "-o", "venv", "-o", "up", *targets],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return out.replace("\\\n", " ").splitlines()


def test_every_pypy_run_of_the_suite_marks_each_major_collection_in_one_step_as_the_streamer():
    pypy = [line for line in recipes("unit", "test-pypy")
            if re.search(r"\.venv-pypy/bin/python -m pytest\b", line)]
    assert len(pypy) == 2, pypy  # unit's and test-pypy's
    # make test's lanes (tests/lanes.sh) run PyPy in the environment make gives them.
    lanes = [line for line in recipes("test") if "tests/lanes.sh" in line]
    assert len(lanes) == 1, lanes
    for line in pypy + lanes:
        assert f"PYPY_GC_INCREMENT_STEP={gcpacing.GC_MARKING_STEP} " in line, line


def _collected(lane):
    env = dict(os.environ, STREAMER_TEST_LANE=lane)
    env.pop("STREAMER_TEST_SOURCES", None)
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only",
                          "-p", "no:cacheprovider", "tests"],
                         cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout
    return {line for line in out.splitlines() if "::" in line}


# The tests of one server of the matrix only (marked on_source).
_ON_SOURCE = {"test_full_nodup_updates_are_published_whole_as_full_ones_are",
              "test_mysql_without_gtids_sigkills_lose_and_double_nothing",
              "test_mysql_8s_own_login_without_tls_streams",
              "test_read_only_mode_is_refused_and_its_chunks_put_off_on_a_mysql_committing_out_of_order",
              "test_gb18030_reads_as_mysql_reads_it_its_2005_edition"}
# Tests of the default server's flavour on private servers only (marked private_servers).
_PRIVATE = {"test_a_binlog_a_crash_cut_off_inside_an_event_is_read_on_from_the_next",
            "test_the_guard_warns_before_the_server_purges_the_checkpoints_file"}


@pytest.mark.skipif(platform.python_implementation() == "PyPy",
                    reason="the suite's lanes, not the runtime: collected once, under CPython")
def test_make_tests_two_lanes_run_every_test_once_each_server_in_one_lane():
    whole, default, other = _collected(""), _collected("default"), _collected("other")
    assert whole and not default & other and default | other == whole
    # The default lane: the e2e tests of the default server only; the unit tests, those of the
    # other servers (by parameter or marker) and those of private servers are the other's.
    assert all(t.startswith("tests/e2e/") for t in default)
    assert not any(re.search(r"\[.*(mysql-8\.0|mariadb-11\.4)", t)
                   or t.split("::")[-1].split("[")[0] in _ON_SOURCE | _PRIVATE for t in default)
    names = {t.split("::")[-1].split("[")[0] for t in other}
    assert names >= _ON_SOURCE | _PRIVATE
    assert any(t.startswith("tests/unit/") for t in other)
    # The default server's tests are most of the e2e tests: none was sent away by mistake.
    assert {"test_truncate_is_published_as_op_t_between_the_rows",
            "test_a_broker_paused_across_a_commit_loses_and_doubles_nothing_and_the_wait_is_idle"} \
        <= {t.split("::")[-1].split("[")[0] for t in default}
