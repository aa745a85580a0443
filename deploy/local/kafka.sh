#!/usr/bin/env bash
# Single-node KRaft Kafka from Maven Central jars: up | down | status. Idempotent.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DIR="${STREAMER_KAFKA_DIR:-$ROOT/.local/kafka}"
PORT="${STREAMER_KAFKA_PORT:-9092}"
CPORT="${STREAMER_KAFKA_CONTROLLER_PORT:-9093}"

pid() { cat "$DIR/kafka.pid" 2>/dev/null || true; }
running() { local p; p="$(pid)"; [ -n "$p" ] && kill -0 "$p" 2>/dev/null; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; }

fetch() {
    if [ -f "$DIR/libs/.complete" ]; then return 0; fi
    command -v mvn >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven >/dev/null; }
    mkdir -p "$DIR/libs"
    mvn -q -B -f "$ROOT/deploy/local/kafka-pom.xml" dependency:copy-dependencies \
        -DoutputDirectory="$DIR/libs" -DincludeScope=runtime
    touch "$DIR/libs/.complete"
}

configure() {
    mkdir -p "$DIR/data"
    cat > "$DIR/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$CPORT
listeners=PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CPORT
advertised.listeners=PLAINTEXT://127.0.0.1:$PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
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
PROPS
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
appender.file.type=File
appender.file.name=FILE
appender.file.fileName=$DIR/server.log
appender.file.layout.type=PatternLayout
appender.file.layout.pattern=[%d] %p %m (%c)%n
logger.kafka.name=kafka
logger.kafka.level=INFO
logger.state.name=state.change.logger
logger.state.level=WARN
PROPS
    if [ ! -f "$DIR/data/meta.properties" ]; then
        local id
        id="$(java -Dlog4j2.configurationFile="$DIR/tools-log4j2.properties" -cp "$DIR/libs/*" kafka.tools.StorageTool random-uuid)"
        java -Dlog4j2.configurationFile="$DIR/tools-log4j2.properties" -cp "$DIR/libs/*" \
            kafka.tools.StorageTool format -t "$id" -c "$DIR/server.properties" >/dev/null
    fi
}

up() {
    if running; then return 0; fi
    command -v java >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null; }
    fetch
    configure
    : > "$DIR/server.log"
    nohup java -Xms512m -Xmx512m -Dlog4j2.configurationFile="$DIR/server-log4j2.properties" \
        -cp "$DIR/libs/*" kafka.Kafka "$DIR/server.properties" > "$DIR/stdout.log" 2>&1 &
    echo $! > "$DIR/kafka.pid"
    for _ in $(seq 1 300); do
        if grep -q "Kafka Server started" "$DIR/server.log" 2>/dev/null && port_open; then
            echo "kafka: up on 127.0.0.1:$PORT (data in $DIR)"
            return 0
        fi
        if ! running; then break; fi
        sleep 0.2
    done
    echo "kafka: not ready within 60 s; log tail:" >&2
    tail -n 30 "$DIR/server.log" "$DIR/stdout.log" >&2 || true
    exit 1
}

down() {
    if ! running; then return 0; fi
    local p
    p="$(pid)"
    kill -TERM "$p"
    for _ in $(seq 1 150); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$p" 2>/dev/null; then kill -KILL "$p"; fi
    rm -f "$DIR/kafka.pid"
    echo "kafka: stopped"
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    status) running ;;
    *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
