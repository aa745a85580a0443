#!/usr/bin/env bash
# Apicurio Registry 3.0.9 (Confluent-compatible API at /apis/ccompat/v7): up | down | status.
# Idempotent. Not started by up.sh; stopped by down.sh. Storage is in memory: a restart forgets
# every schema.
#
# State lives under .local/registry (or $STREAMER_REGISTRY_DIR): app/ (the tar.gz from Maven Central,
# fetched once with mvn dependency:copy and unpacked), registry.pid and registry.log.
# Env: STREAMER_REGISTRY_DIR, STREAMER_REGISTRY_PORT (8081), STREAMER_REGISTRY_MANAGEMENT_PORT (9001).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DIR="${STREAMER_REGISTRY_DIR:-$ROOT/.local/registry}"
PORT="${STREAMER_REGISTRY_PORT:-8081}"
MPORT="${STREAMER_REGISTRY_MANAGEMENT_PORT:-9001}"
VERSION=3.0.9
TGZ="$DIR/apicurio-registry-app-$VERSION-all.tar.gz"
APP="$DIR/app"
PIDFILE="$DIR/registry.pid"
LOG="$DIR/registry.log"
URL="http://127.0.0.1:$PORT/apis/ccompat/v7/subjects"
TIMEOUT_S=${STREAMER_REGISTRY_START_TIMEOUT_S:-180}

log() { echo "registry: $*"; }
die() { echo "registry: $*" >&2; exit 1; }

pid() {
    # The pid from the pid file, only if that process is still this directory's registry.
    local p
    p="$(cat "$PIDFILE" 2>/dev/null || true)"
    if [ -n "$p" ] && kill -0 "$p" 2>/dev/null \
        && tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -qF -- "-jar $APP/"; then
        echo "$p"
    fi
}
running() { [ -n "$(pid)" ]; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
http_code() { curl -s -o /dev/null -m 2 -w '%{http_code}' "$URL" 2>/dev/null || true; }

ensure_tools() {
    local need=()
    command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
    command -v mvn >/dev/null 2>&1 || need+=(maven)
    command -v curl >/dev/null 2>&1 || need+=(curl)
    if [ "${#need[@]}" -gt 0 ]; then
        log "installing ${need[*]} (apt)"
        apt-get update -qq || die "apt-get update failed"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null \
            || die "apt-get install ${need[*]} failed"
    fi
}

runner_jar() {
    local jar
    jar="$(find "$APP" -maxdepth 3 -name "apicurio-registry-app-$VERSION-runner.jar" -print -quit 2>/dev/null || true)"
    echo "$jar"
}

fetch() {
    if [ -f "$APP/.complete" ]; then return 0; fi
    mkdir -p "$DIR"
    if [ ! -s "$TGZ" ]; then
        log "fetching apicurio-registry-app $VERSION (mvn, ~109 MB)"
        mvn -q -B -Dstyle.color=never dependency:copy \
            -Dartifact="io.apicurio:apicurio-registry-app:$VERSION:tar.gz:all" \
            -DoutputDirectory="$DIR" > "$DIR/mvn.log" 2>&1 \
            || { tail -n 30 "$DIR/mvn.log" >&2; die "mvn dependency:copy failed"; }
        [ -s "$TGZ" ] || die "expected $TGZ after mvn dependency:copy"
    fi
    rm -rf "$APP"
    mkdir -p "$APP"
    tar -xzf "$TGZ" -C "$APP" || die "could not unpack $TGZ"
    [ -n "$(runner_jar)" ] || die "no apicurio-registry-app-$VERSION-runner.jar inside $TGZ"
    touch "$APP/.complete"
    rm -f "$TGZ"   # unpacked; mvn keeps its own copy in the local maven repository
}

up() {
    if running; then
        log "already running on 127.0.0.1:$PORT (pid $(pid))"
        return 0
    fi
    local p
    for p in "$PORT" "$MPORT"; do
        if port_open "$p"; then die "port 127.0.0.1:$p is already taken by another process"; fi
    done
    ensure_tools
    fetch
    local jar
    jar="$(runner_jar)"
    local offset=0
    if [ -f "$LOG" ]; then offset="$(stat -c %s "$LOG")"; fi
    # Run from the jar's directory: Quarkus resolves its lib/ relative to the runner jar. Not
    # holding the lock (fd 9) this script takes.
    (cd "$(dirname "$jar")" && exec nohup java -Xms256m -Xmx512m \
        -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$PORT" \
        -Dquarkus.management.host=127.0.0.1 -Dquarkus.management.port="$MPORT" \
        -jar "$jar" >> "$LOG" 2>&1 < /dev/null 9>&-) &
    local rpid=$!
    echo "$rpid" > "$PIDFILE"
    local deadline=$((SECONDS + TIMEOUT_S))
    until [ "$(http_code)" = 200 ]; do
        if ! kill -0 "$rpid" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
            echo "registry: $URL did not answer 200 within ${TIMEOUT_S} s (pid $rpid); log tail:" >&2
            tail -c "+$((offset + 1))" "$LOG" 2>/dev/null | tail -n 30 >&2 || true
            kill -TERM "$rpid" 2>/dev/null || true
            rm -f "$PIDFILE"
            exit 1
        fi
        sleep 0.3
    done
    log "up on http://127.0.0.1:$PORT/apis/ccompat/v7 (management $MPORT, pid $rpid)"
}

down() {
    local p
    p="$(pid)"
    if [ -z "$p" ]; then rm -f "$PIDFILE"; return 0; fi
    kill -TERM "$p" 2>/dev/null || true
    local deadline=$((SECONDS + 30))
    while kill -0 "$p" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
    if kill -0 "$p" 2>/dev/null; then
        echo "registry: pid $p ignored SIGTERM for 30 s; sending SIGKILL" >&2
        kill -KILL "$p" 2>/dev/null || true
        while kill -0 "$p" 2>/dev/null; do sleep 0.1; done
    fi
    rm -f "$PIDFILE"
    log "stopped"
}

# One up or down at a time: two test lanes asking for the registry in the same seconds both
# found it not running, both started one, and the loser's failure removed the winner's pid file.
locked() {
    mkdir -p "$DIR"
    exec 9>"$DIR/.lock"
    flock 9
    "$@"
}

case "${1:-}" in
    up) locked up ;;
    down) locked down ;;
    status)
        if running; then log "running on 127.0.0.1:$PORT (pid $(pid))"; else log "not running"; exit 1; fi ;;
    *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
