#!/usr/bin/env bash
# The README's two commands in a row, as a new user runs them: `make run` (a demo load streamed,
# then Ctrl-C), `make test`, then `make run` again, which must resume from the first run's
# checkpoint and stream. .ci/run runs this. The test suite purges the default server's binlog
# (the bench), keeping what the local streamer's checkpoint needs (bench/binlogs.py).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
LOGS="$ROOT/.local/two-commands"
mkdir -p "$LOGS"

say() { echo "two-commands: $*"; }
die() { echo "two-commands: $*" >&2; exit 1; }

# `make run` in its own process group until its log shows `want`, with a demo load written while
# it streams; then Ctrl-C (SIGINT to the group) and a clean exit.
run_until() {
    local name="$1" want="$2" log="$LOGS/$1.log" pid i
    setsid make run >"$log" 2>&1 &
    pid=$!
    for i in $(seq 1 900); do
        grep -q "reading the binlog" "$log" && break
        kill -0 "$pid" 2>/dev/null || { tail -50 "$log"; die "$name: make run exited before streaming"; }
        sleep 1
    done
    grep -q "reading the binlog" "$log" || { tail -50 "$log"; die "$name: not streaming after 15 min"; }
    make demo-load >"$LOGS/$name-load.log" 2>&1 || { tail -20 "$LOGS/$name-load.log"; die "$name: demo load failed"; }
    sleep 3  # a linger and a commit
    kill -INT -- "-$pid" 2>/dev/null || true
    wait "$pid" || true
    grep -q "$want" "$log" || { tail -50 "$log"; die "$name: the log lacks '$want'"; }
    if grep -q "Traceback\|exit code [1-9]" "$log"; then
        tail -50 "$log"; die "$name: make run failed"
    fi
    say "$name: streamed, stopped cleanly ($log)"
}

run_until first "reading the binlog"
make test
run_until again "resuming from committed checkpoint"
say "make run, make test, make run: all three worked"
