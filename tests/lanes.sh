#!/usr/bin/env bash
# `make test`'s suites, in two lanes at once (usage: tests/lanes.sh [pytest args...]).
#
# A test may SET GLOBAL, PURGE or load its server, so no two tests share a server at the same
# time; tests/conftest.py puts each test in one lane (STREAMER_TEST_LANE):
#   default: the tests of the default server (MariaDB 10.11);
#   other:   the rest: the tests of MySQL 8.0 and MariaDB 11.4, those of private servers or Kafka
#            alone, and the unit tests. Its output is kept in .local/tests-other.log and shown
#            when both lanes are done.
# The default server's tests, under both runtimes, are the longer lane: those of the stream's
# Kafka side (marked kafka_side), which any source serves, run on MariaDB 11.4 when the matrix
# has it (STREAMER_TEST_KAFKA_SIDE), in the other lane, under both runtimes too.
# Each lane runs its tests under PyPy on every enabled server (STREAMER_TEST_SOURCES), then under
# CPython on the default server. Kafka and the registry are shared safely (each test has its own
# topics, databases and ports). The exit status is non-zero if any of the four runs failed.
set -uo pipefail
cd "$(dirname "$0")/.."

# PyPy's GC setting comes from make's environment (the Makefile's PYPY_GC; CPython ignores it).
PYPY=(.venv-pypy/bin/python -m pytest)
CPYTHON=(.venv-cpy/bin/python -m pytest)
OTHER_LOG=.local/tests-other.log

# One pytest run's status, a run whose lane has no test of the selection (5) counting as passed.
passed() {
    "$@"
    local rc=$?
    [ "$rc" = 5 ] && return 0
    return "$rc"
}

lane() {
    local name=$1 pypy cpython
    shift
    STREAMER_TEST_LANE=$name passed "${PYPY[@]}" -q tests "$@"
    pypy=$?
    STREAMER_TEST_LANE=$name STREAMER_TEST_SOURCES="${STREAMER_TEST_SOURCES:-mariadb-10.11}" \
        passed "${CPYTHON[@]}" -q tests "$@"
    cpython=$?
    echo "lane $name: PyPy rc=$pypy, CPython rc=$cpython"
    [ "$pypy" = 0 ] && [ "$cpython" = 0 ]
}

# Started once here, not by both lanes' first tests at the same moment.
deploy/local/up.sh || exit 1
others="$(.venv-cpy/bin/python -c 'from tests import support
print(" ".join(s.name for s in support.enabled_sources() if s is not support.DEFAULT))')" || exit 1
if [ -n "$others" ]; then
    # shellcheck disable=SC2086
    deploy/local/sources.sh up $others || exit 1
fi

case " $others " in
    *" mariadb-11.4 "*) export STREAMER_TEST_KAFKA_SIDE=mariadb-11.4 ;;
esac

lane other "$@" > "$OTHER_LOG" 2>&1 &
other=$!
# Stopped with this script: its pytest too (which, in the background, ignores SIGINT: TERM).
trap 'pkill -TERM -P "$other" 2>/dev/null; kill -TERM "$other" 2>/dev/null' EXIT

lane default "$@"
default_rc=$?
wait "$other"
other_rc=$?
echo
echo "==== the other lane, beside the default one ($OTHER_LOG):"
cat "$OTHER_LOG"
echo
echo "lanes: default rc=$default_rc, other rc=$other_rc"
[ "$default_rc" = 0 ] && [ "$other_rc" = 0 ]
