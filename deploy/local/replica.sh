#!/usr/bin/env bash
# The local primary's GTID replica, for failover tests and demos: up | down | status. Idempotent.
# A second MariaDB (deploy/local/mysql.sh) on 127.0.0.1:13307 (STREAMER_REPLICA_PORT), state
# under .local/mariadb-replica, server_id 2, replicating from the local primary on 13306 with
# the same passwords, so one streamer config can list both in mysql.hosts.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
export STREAMER_MYSQL_DIR="$ROOT/.local/mariadb-replica"
export STREAMER_MYSQL_PORT="${STREAMER_REPLICA_PORT:-13307}"
export STREAMER_MYSQL_SERVER_ID=2
export STREAMER_MYSQL_SECRETS="$ROOT/.local/secrets"
export STREAMER_MYSQL_REPLICA_OF="${STREAMER_PRIMARY_PORT:-13306}"
if [ "${1:-}" != "up" ] && [ ! -d "$STREAMER_MYSQL_DIR" ]; then
    [ "${1:-}" = "down" ] && exit 0
fi
exec "$ROOT/deploy/local/mysql.sh" "$@"
