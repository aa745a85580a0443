#!/usr/bin/env bash
# Records tests/unit/binlogs/engine.binlog: engine.sql run on a private, throwaway MariaDB (the
# project's own deploy/local/mariadb.sh, on its own port and directory), and the one binlog file
# it wrote, copied byte for byte. Needs mariadb-server (`make up` installs it). The tests only
# read the recorded file; run this again when the scenario changes.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
DIR="$(mktemp -d)"
export STREAMER_MYSQL_DIR="$DIR" STREAMER_MYSQL_PORT="${RECORD_PORT:-13399}"
trap '"$ROOT/deploy/local/mariadb.sh" down >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT
"$ROOT/deploy/local/mariadb.sh" up >/dev/null
sql() { mariadb --no-defaults --socket="$DIR/mysqld.sock" -uroot --batch "$@"; }
sql -e "FLUSH BINARY LOGS"
file="$(sql -N -e "SHOW MASTER STATUS" | cut -f1)"
sql < "$HERE/engine.sql"
sql -e "FLUSH BINARY LOGS"
cp "$DIR/binlog/$file" "$HERE/engine.binlog"
echo "recorded $HERE/engine.binlog ($(stat -c %s "$HERE/engine.binlog") bytes, from $file)"
