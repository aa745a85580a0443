#!/usr/bin/env bash
# `make test`'s suites, in two lanes at once (usage: tests/lanes.sh [pytest args...]).
#
# Every test runs on one set of shared servers (tests/e2e/conftest.py, server_of): a test may SET
# GLOBAL, PURGE or load its server, so two tests never share one at the same time. The lanes:
#   default: MariaDB 10.11 and every test of no server, under PyPy, then under CPython;
#   matrix:  the tests of MySQL 8.0 and MariaDB 11.4, under PyPy, beside it, its output kept in
#            .local/tests-matrix.log and shown when both are done.
# Kafka, the registry and the private servers tests start on free ports are shared safely (each
# test has its own topics, databases and ports). The exit status is non-zero if either failed.
set -uo pipefail
cd "$(dirname "$0")/.."

# PyPy's GC setting comes from make's environment (the Makefile's PYPY_GC; CPython ignores it).
PYPY=(.venv-pypy/bin/python -m pytest)
CPYTHON=(.venv-cpy/bin/python -m pytest)
MATRIX_LOG=.local/tests-matrix.log

# Started once here, not by both lanes' first tests at the same moment.
deploy/local/up.sh || exit 1
others="$(.venv-cpy/bin/python -c 'from tests import support
print(" ".join(s.name for s in support.enabled_sources() if s is not support.DEFAULT))')" || exit 1
if [ -n "$others" ]; then
    # shellcheck disable=SC2086
    deploy/local/sources.sh up $others || exit 1
    STREAMER_TEST_PART=matrix "${PYPY[@]}" -q tests/e2e "$@" > "$MATRIX_LOG" 2>&1 &
    matrix=$!
    # Stopped with this script (a background pytest ignores SIGINT: TERM).
    trap 'kill -TERM "$matrix" 2>/dev/null' EXIT
fi

STREAMER_TEST_PART=default "${PYPY[@]}" -q tests "$@"
pypy=$?
STREAMER_TEST_SOURCES="${STREAMER_TEST_SOURCES:-mariadb-10.11}" "${CPYTHON[@]}" -q tests "$@"
cpython=$?

matrix_rc=0
if [ -n "$others" ]; then
    wait "$matrix"
    matrix_rc=$?
    echo
    echo "==== the matrix lane (PyPy; $others), beside the default lane: $MATRIX_LOG"
    cat "$MATRIX_LOG"
fi
echo
echo "lanes: PyPy default rc=$pypy, CPython default rc=$cpython, PyPy matrix rc=$matrix_rc"
[ "$pypy" = 0 ] && [ "$cpython" = 0 ] && [ "$matrix_rc" = 0 ]
