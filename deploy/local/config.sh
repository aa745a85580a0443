#!/usr/bin/env bash
# Writes the local default config (once) for `make run`: the private MariaDB and Kafka that
# deploy/local/up.sh starts. The password stays in a file next to it, never in the config or argv.
set -euo pipefail
out="${1:?usage: config.sh OUTPUT.yaml}"
if [ -f "$out" ]; then
    exit 0
fi
mkdir -p "$(dirname "$out")"
cat > "$out" <<YAML
# Local default setup, written by deploy/local/config.sh. Edit freely; it is not overwritten.
namespace: local
source:
  name: local-mariadb
mysql:
  host: 127.0.0.1
  port: ${STREAMER_MYSQL_PORT:-13306}
  user: streamer
  password_file: secrets/streamer.password
  server_id: 4201
kafka:
  bootstrap.servers: 127.0.0.1:${STREAMER_KAFKA_PORT:-9092}
tables:
  include: ["demo.*"]
start:
  initial: end
heartbeat:
  enabled: auto   # µs latency: the local streamer user may write streamer_heartbeat
YAML
echo "wrote $out"
