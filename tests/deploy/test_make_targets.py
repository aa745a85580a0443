"""What the Makefile's test targets run (read from `make -n`, which runs nothing), and how
make test's lanes split the suite (read from pytest's collection, which runs no test)."""
import functools
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


def test_the_venv_target_compiles_the_project_under_both_runtimes_for_every_target_after_it():
    # Where PYTHONDONTWRITEBYTECODE is set (CI), no streamer the suite starts keeps its bytecode.
    out = subprocess.run(["make", "-n", "--no-print-directory", "-o", ".venv-pypy/.stamp",
                          "-o", ".venv-cpy/.stamp", "venv"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert [line for line in out if "compileall" in line] == [
        f"{venv}/bin/python -m compileall -q streamer bench" for venv in (".venv-pypy", ".venv-cpy")]
    for target in ("run", "test", "test-pypy", "test-cpython", "soak", "unit", "bench"):
        rule = subprocess.run(["make", "-p", "-n", "--no-print-directory", target], cwd=ROOT,
                              capture_output=True, text=True).stdout
        prereqs = re.search(rf"^{re.escape(target)}:(.*)$", rule, re.M)
        assert prereqs and "venv" in prereqs.group(1).split(), (target, prereqs)


@functools.lru_cache(maxsize=None)
def _collected(lane, **env_extra):
    env = dict(os.environ, STREAMER_TEST_LANE=lane, **env_extra)
    env.pop("STREAMER_TEST_SOURCES", None)
    if not env_extra:
        env.pop("STREAMER_TEST_KAFKA_SIDE", None)
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
            "test_the_guard_warns_before_the_server_purges_the_checkpoints_file",
            "test_verify_identity_streams_over_tls_only_and_a_wrong_ca_or_name_is_refused"}
# Tests of the stream's Kafka side, on any source (marked kafka_side).
_KAFKA_SIDE = {"test_a_broker_paused_across_a_commit_loses_and_doubles_nothing_and_the_wait_is_idle",
               "test_kafka_over_tls_streams_with_the_documented_settings_and_a_wrong_ca_is_refused"}


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
    # The default server's tests are most of the e2e tests: none was sent away by mistake. Run
    # alone, the Kafka side's use the default server too.
    assert {"test_truncate_is_published_as_op_t_between_the_rows"} | _KAFKA_SIDE \
        <= {t.split("::")[-1].split("[")[0] for t in default}


@pytest.mark.skipif(platform.python_implementation() == "PyPy",
                    reason="the suite's lanes, not the runtime: collected once, under CPython")
def test_the_lanes_run_the_kafka_sides_tests_on_mariadb_11_4_beside_the_default_servers():
    # The default server's tests under both runtimes are the longer lane (~50 of CI's ~53 min):
    # lanes.sh sends the Kafka side's to MariaDB 11.4 when the matrix has it.
    with open(os.path.join(ROOT, "tests", "lanes.sh")) as fh:
        assert "export STREAMER_TEST_KAFKA_SIDE=mariadb-11.4" in fh.read()
    side = dict(STREAMER_TEST_KAFKA_SIDE="mariadb-11.4")
    default, other = _collected("default", **side), _collected("other", **side)
    assert not default & other and default | other == _collected("")
    names = lambda tests: {t.split("::")[-1].split("[")[0] for t in tests}  # noqa: E731
    assert _KAFKA_SIDE <= names(other) and not _KAFKA_SIDE & names(default)
    assert "test_truncate_is_published_as_op_t_between_the_rows" in names(default)
