#!/usr/bin/env bash
# Single-node KRaft Kafka 4.1 from Maven Central jars: up | down | status. Idempotent.
#
# State lives under .local/kafka (or $STREAMER_KAFKA_DIR): libs/ (jars, fetched once with mvn from
# deploy/local/kafka-pom.xml), data/ (log.dirs, formatted once), server.properties, server.log.
# Env: STREAMER_KAFKA_DIR, STREAMER_KAFKA_PORT (9092), STREAMER_KAFKA_CONTROLLER_PORT (9093),
# STREAMER_KAFKA_LOG_ROLL_MB (50); STREAMER_KAFKA_SSL_PORT with STREAMER_KAFKA_SSL_PEM (a PEM file
# holding the broker's private key, unencrypted PKCS#8, and its certificate) adds a TLS listener.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DIR="${STREAMER_KAFKA_DIR:-$ROOT/.local/kafka}"
PORT="${STREAMER_KAFKA_PORT:-9092}"
CPORT="${STREAMER_KAFKA_CONTROLLER_PORT:-9093}"
SSL_PORT="${STREAMER_KAFKA_SSL_PORT:-}"
SSL_PEM="${STREAMER_KAFKA_SSL_PEM:-}"
PIDFILE="$DIR/kafka.pid"
LOG="$DIR/server.log"
# The broker logs at INFO for every topic and transaction coordinator change, and a day of tests
# and benchmarks wrote 100 MB: the log rolls at this size and keeps two old files (server.log.1, .2).
LOG_ROLL_MB=${STREAMER_KAFKA_LOG_ROLL_MB:-50}
# Generous: a first start on a busy shared host took over a minute (the JVM starved of CPU).
TIMEOUT_S=${STREAMER_KAFKA_START_TIMEOUT_S:-180}

log() { echo "kafka: $*"; }
die() { echo "kafka: $*" >&2; exit 1; }

pid() {
    # The pid from the pid file, only if that process is still this directory's broker.
    local p
    p="$(cat "$PIDFILE" 2>/dev/null || true)"
    if [ -n "$p" ] && kill -0 "$p" 2>/dev/null \
        && tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -qF "kafka.Kafka $DIR/server.properties"; then
        echo "$p"
    fi
}
running() { [ -n "$(pid)" ]; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

ensure_tools() {
    if ! command -v java >/dev/null 2>&1 || ! command -v mvn >/dev/null 2>&1; then
        log "installing java/maven (apt)"
        apt-get update -qq || die "apt-get update failed"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless maven >/dev/null \
            || die "apt-get install openjdk-17-jre-headless maven failed"
    fi
}

fetch() {
    if [ -f "$DIR/libs/.complete" ]; then return 0; fi
    log "fetching jars into $DIR/libs (mvn)"
    rm -rf "$DIR/libs"
    mkdir -p "$DIR/libs"
    mvn -q -B -Dstyle.color=never -f "$ROOT/deploy/local/kafka-pom.xml" dependency:copy-dependencies \
        -DoutputDirectory="$DIR/libs" -DincludeScope=runtime > "$DIR/mvn.log" 2>&1 \
        || { tail -n 30 "$DIR/mvn.log" >&2; die "mvn dependency:copy-dependencies failed"; }
    ls "$DIR"/libs/kafka_2.13-4.1.0.jar "$DIR"/libs/log4j-slf4j-impl-2.24.3.jar >/dev/null \
        || die "expected jars missing in $DIR/libs"
    touch "$DIR/libs/.complete"
}

configure() {
    # The start must fit in one file, since the readiness check reads the newest: a start with
    # ~600 partitions logged 4 MB.
    [[ "$LOG_ROLL_MB" =~ ^[0-9]+$ ]] && [ "$LOG_ROLL_MB" -ge 10 ] \
        || die "STREAMER_KAFKA_LOG_ROLL_MB must be a whole number of MB, 10 or more, not '$LOG_ROLL_MB'"
    mkdir -p "$DIR/data"
    local listeners="PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CPORT"
    local advertised="PLAINTEXT://127.0.0.1:$PORT"
    local protocols="PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
    local tls=""
    if [ -n "$SSL_PORT" ]; then
        [ -f "$SSL_PEM" ] || die "STREAMER_KAFKA_SSL_PORT needs STREAMER_KAFKA_SSL_PEM: a PEM file with the broker's private key and certificate"
        listeners+=",SSL://127.0.0.1:$SSL_PORT"
        advertised+=",SSL://127.0.0.1:$SSL_PORT"
        protocols+=",SSL:SSL"
        tls=$'ssl.keystore.type=PEM\nssl.keystore.location='"$SSL_PEM"
    fi
    cat > "$DIR/server.properties.tmp" <<PROPS
# Written by deploy/local/kafka.sh on every 'up'; edit the script, not this file.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$CPORT
listeners=$listeners
advertised.listeners=$advertised
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=$protocols
log.dirs=$DIR/data
num.partitions=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.segment.bytes=67108864
message.max.bytes=16777216
# The log cleaner looks for compactable logs every second (15 s by default): the compacted
# topic test waits for two of its passes.
log.cleaner.backoff.ms=1000
$tls
PROPS
    mv "$DIR/server.properties.tmp" "$DIR/server.properties"
    # Tools log WARN to stderr: INFO on stdout would end up inside the generated cluster id.
    cat > "$DIR/tools-log4j2.properties" <<'PROPS'
rootLogger.level=WARN
rootLogger.appenderRef.stderr.ref=STDERR
appender.stderr.type=Console
appender.stderr.name=STDERR
appender.stderr.target=SYSTEM_ERR
appender.stderr.layout.type=PatternLayout
appender.stderr.layout.pattern=%d %p %c: %m%n
PROPS
    cat > "$DIR/server-log4j2.properties" <<PROPS
rootLogger.level=INFO
rootLogger.appenderRef.file.ref=FILE
appender.file.type=RollingFile
appender.file.name=FILE
appender.file.fileName=$LOG
appender.file.filePattern=$LOG.%i
appender.file.append=true
appender.file.layout.type=PatternLayout
appender.file.layout.pattern=[%d] %p %m (%c)%n
appender.file.policies.type=Policies
appender.file.policies.size.type=SizeBasedTriggeringPolicy
appender.file.policies.size.size=${LOG_ROLL_MB}MB
appender.file.strategy.type=DefaultRolloverStrategy
appender.file.strategy.max=2
logger.state.name=state.change.logger
logger.state.level=WARN
PROPS
}

format_storage() {
    if [ -f "$DIR/data/meta.properties" ]; then return 0; fi
    local tools=(java -Dlog4j2.configurationFile="$DIR/tools-log4j2.properties" -cp "$DIR/libs/*")
    local id
    id="$("${tools[@]}" kafka.tools.StorageTool random-uuid)" || die "StorageTool random-uuid failed"
    [[ "$id" =~ ^[A-Za-z0-9_-]{22}$ ]] || die "unexpected cluster id from StorageTool: '$id'"
    log "formatting $DIR/data (cluster id $id)"
    "${tools[@]}" kafka.tools.StorageTool format -t "$id" -c "$DIR/server.properties" >"$DIR/format.log" 2>&1 \
        || { cat "$DIR/format.log" >&2; die "StorageTool format failed"; }
    echo "$id" > "$DIR/cluster.id"
}

# Whether the log holds "Kafka Server started" past byte $1. grep reads to the end (-c, not -q): under
# pipefail, a grep that quit at the match would SIGPIPE a tail with more to write, and a start that
# logs much after the line (thousands of partitions loading) would never be seen as done.
started_since() {
    local n
    n="$(tail -c "+$(($1 + 1))" "$LOG" 2>/dev/null | grep -c "Kafka Server started" || true)"
    [ "${n:-0}" -gt 0 ]
}

up() {
    if running; then
        log "already running on 127.0.0.1:$PORT (pid $(pid))"
        return 0
    fi
    local p
    for p in "$PORT" "$CPORT"; do
        if port_open "$p"; then die "port 127.0.0.1:$p is already taken by another process"; fi
    done
    ensure_tools
    fetch
    configure
    format_storage
    local offset=0
    if [ -f "$LOG" ]; then offset="$(stat -c %s "$LOG")"; fi
    nohup java -Xms512m -Xmx512m -Dlog4j2.configurationFile="$DIR/server-log4j2.properties" \
        -cp "$DIR/libs/*" kafka.Kafka "$DIR/server.properties" > "$DIR/stdout.log" 2>&1 < /dev/null &
    local jpid=$!
    echo "$jpid" > "$PIDFILE"
    local deadline=$((SECONDS + TIMEOUT_S))
    until started_since "$offset" && port_open "$PORT"; do
        # A log that rolled since the start holds only this start's lines: read it from the top.
        if [ "$(stat -c %s "$LOG" 2>/dev/null || echo 0)" -lt "$offset" ]; then offset=0; fi
        if ! kill -0 "$jpid" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
            echo "kafka: not ready within ${TIMEOUT_S} s (pid $jpid); log tail:" >&2
            tail -c "+$((offset + 1))" "$LOG" 2>/dev/null | tail -n 30 >&2 || true
            tail -n 20 "$DIR/stdout.log" >&2 || true
            kill -TERM "$jpid" 2>/dev/null || true
            rm -f "$PIDFILE"
            exit 1
        fi
        sleep 0.2
    done
    log "up on 127.0.0.1:$PORT (controller $CPORT, pid $jpid, data $DIR)"
}

down() {
    local p
    p="$(pid)"
    if [ -z "$p" ]; then rm -f "$PIDFILE"; return 0; fi
    kill -TERM "$p" 2>/dev/null || true
    local deadline=$((SECONDS + 30))
    while kill -0 "$p" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
    if kill -0 "$p" 2>/dev/null; then
        echo "kafka: pid $p ignored SIGTERM for 30 s; sending SIGKILL" >&2
        kill -KILL "$p" 2>/dev/null || true
        while kill -0 "$p" 2>/dev/null; do sleep 0.1; done
    fi
    rm -f "$PIDFILE"
    log "stopped"
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    status)
        if running; then log "running on 127.0.0.1:$PORT (pid $(pid))"; else log "not running"; exit 1; fi ;;
    *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
