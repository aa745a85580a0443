#!/usr/bin/env bash
# Kafka Connect 4.1 (a standalone worker) with Debezium's JDBC sink connector and Apicurio's Avro
# converter on its plugin path, all from Maven Central: up | down | status. Idempotent. The
# consumers the streamer's format: debezium is checked against (tests/e2e/test_debezium_sink.py);
# not started by up.sh (the test starts it), stopped by down.sh. fetch: the jars only.
#
# State lives under .local/connect (or $STREAMER_CONNECT_DIR): libs/ (the worker's jars), plugins/
# (jdbc-sink/, avro-converter/), worker.properties, offsets, connect.log.
# Env: STREAMER_CONNECT_DIR, STREAMER_CONNECT_PORT (8083), STREAMER_KAFKA_PORT (9092).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
HERE="$ROOT/deploy/local/connect"
DIR="${STREAMER_CONNECT_DIR:-$ROOT/.local/connect}"
PORT="${STREAMER_CONNECT_PORT:-8083}"
KAFKA_PORT="${STREAMER_KAFKA_PORT:-9092}"
PIDFILE="$DIR/connect.pid"
LOG="$DIR/connect.log"
TIMEOUT_S=${STREAMER_CONNECT_START_TIMEOUT_S:-180}

log() { echo "connect: $*"; }
die() { echo "connect: $*" >&2; exit 1; }

pid() {
    local p
    p="$(cat "$PIDFILE" 2>/dev/null || true)"
    if [ -n "$p" ] && kill -0 "$p" 2>/dev/null \
        && tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -qF "ConnectStandalone $DIR/worker.properties"; then
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

# copy POM OUT: the runtime dependencies of POM into OUT, once.
copy() {
    local pom="$1" out="$2" sum
    sum="$(sha256sum "$pom" | cut -d' ' -f1)"
    # Fetched once per version of the pom: a dependency added to it is fetched on the next up.
    if [ "$(cat "$out/.complete" 2>/dev/null)" = "$sum" ]; then return 0; fi
    log "fetching $(basename "$pom" .xml) into $out (mvn)"
    rm -rf "$out"
    mkdir -p "$out"
    mvn -q -B -Dstyle.color=never -f "$pom" dependency:copy-dependencies -DoutputDirectory="$out" \
        -DincludeScope=runtime > "$DIR/mvn.log" 2>&1 \
        || { tail -n 30 "$DIR/mvn.log" >&2; die "mvn dependency:copy-dependencies ($pom) failed"; }
    echo "$sum" > "$out/.complete"
}

fetch() {
    mkdir -p "$DIR"
    copy "$HERE/worker-pom.xml" "$DIR/libs"
    copy "$HERE/jdbc-sink-pom.xml" "$DIR/plugins/jdbc-sink"
    copy "$HERE/avro-converter-pom.xml" "$DIR/plugins/avro-converter"
    # A plugin brings its own copy of what the worker has: Kafka's client and Connect API jars,
    # loaded twice, make the worker's classes and the plugin's differ.
    # Jackson too: the worker's ServiceLoader finds its own modules (jdk8) for the plugin's
    # ObjectMapper, which a second copy makes a foreign type ("not a subtype").
    rm -f "$DIR"/plugins/*/kafka-clients-*.jar "$DIR"/plugins/*/connect-api-*.jar \
        "$DIR"/plugins/*/connect-json-*.jar "$DIR"/plugins/*/slf4j-api-*.jar \
        "$DIR"/plugins/*/jackson-*.jar
}

configure() {
    cat > "$DIR/worker.properties" <<PROPS
# Written by deploy/local/connect.sh on every 'up'; edit the script, not this file.
bootstrap.servers=127.0.0.1:$KAFKA_PORT
listeners=http://127.0.0.1:$PORT
plugin.path=$DIR/plugins
offset.storage.file.filename=$DIR/offsets
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
# A connector may set its own consumer's settings (read_committed, the streamer's promise).
connector.client.config.override.policy=All
offset.flush.interval.ms=1000
PROPS
    cat > "$DIR/log4j2.properties" <<PROPS
rootLogger.level=INFO
rootLogger.appenderRef.file.ref=FILE
appender.file.type=RollingFile
appender.file.name=FILE
appender.file.fileName=$LOG
appender.file.filePattern=$LOG.%i
appender.file.layout.type=PatternLayout
appender.file.layout.pattern=[%d] %p %m (%c)%n
appender.file.policies.type=Policies
appender.file.policies.size.type=SizeBasedTriggeringPolicy
appender.file.policies.size.size=20MB
appender.file.strategy.type=DefaultRolloverStrategy
appender.file.strategy.max=2
logger.hibernate.name=org.hibernate
logger.hibernate.level=WARN
PROPS
}

up() {
    if running; then
        log "already running on 127.0.0.1:$PORT (pid $(pid))"
        return 0
    fi
    if port_open "$PORT"; then die "port 127.0.0.1:$PORT is already taken by another process"; fi
    port_open "$KAFKA_PORT" || die "Kafka is not up on 127.0.0.1:$KAFKA_PORT (deploy/local/up.sh)"
    ensure_tools
    fetch
    configure
    nohup java -Xms256m -Xmx768m -Dlog4j2.configurationFile="$DIR/log4j2.properties" \
        -cp "$DIR/libs/*" org.apache.kafka.connect.cli.ConnectStandalone "$DIR/worker.properties" \
        > "$DIR/stdout.log" 2>&1 < /dev/null &
    local jpid=$!
    echo "$jpid" > "$PIDFILE"
    local deadline=$((SECONDS + TIMEOUT_S))
    until curl -sf -m 2 "http://127.0.0.1:$PORT/connector-plugins" 2>/dev/null | grep -q JdbcSinkConnector; do
        if ! kill -0 "$jpid" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
            echo "connect: not ready within ${TIMEOUT_S} s (pid $jpid); log tail:" >&2
            tail -n 30 "$LOG" >&2 2>/dev/null || true
            tail -n 20 "$DIR/stdout.log" >&2 || true
            kill -TERM "$jpid" 2>/dev/null || true
            rm -f "$PIDFILE"
            exit 1
        fi
        sleep 0.5
    done
    log "up on http://127.0.0.1:$PORT (pid $jpid, plugins: Debezium JDBC sink, Apicurio Avro converter)"
}

down() {
    local p
    p="$(pid)"
    if [ -z "$p" ]; then rm -f "$PIDFILE"; return 0; fi
    kill -TERM "$p" 2>/dev/null || true
    local deadline=$((SECONDS + 30))
    while kill -0 "$p" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
    kill -KILL "$p" 2>/dev/null || true
    rm -f "$PIDFILE"
    log "stopped"
}

case "${1:-}" in
    fetch) ensure_tools; fetch ;;
    up) up ;;
    down) down ;;
    status) if running; then log "running on 127.0.0.1:$PORT (pid $(pid))"; else log "not running"; fi ;;
    *) echo "usage: $0 fetch|up|down|status" >&2; exit 2 ;;
esac
