#!/usr/bin/env bash
# Records tests/unit/binlogs/NAME.binlog (NAME: engine by default, or compressed): NAME.sql run on
# a private, throwaway MariaDB (the project's own deploy/local/mariadb.sh, on its own port and
# directory), and the one binlog file it wrote, copied byte for byte. Needs mariadb-server
# (`make up` installs it). The tests only read the recorded files; run this again when a
# scenario changes.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
NAME="${1:-engine}"
[ -f "$HERE/$NAME.sql" ] || { echo "record.sh: no scenario $HERE/$NAME.sql" >&2; exit 2; }
ROOT="$(cd "$HERE/../../.." && pwd)"
DIR="$(mktemp -d)"
export STREAMER_MYSQL_DIR="$DIR" STREAMER_MYSQL_PORT="${RECORD_PORT:-13399}"
trap '"$ROOT/deploy/local/mariadb.sh" down >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT
"$ROOT/deploy/local/mariadb.sh" up >/dev/null
sql() { mariadb --no-defaults --socket="$DIR/mysqld.sock" -uroot --batch "$@"; }
sql -e "FLUSH BINARY LOGS"
file="$(sql -N -e "SHOW MASTER STATUS" | cut -f1)"
sql < "$HERE/$NAME.sql"
sql -e "FLUSH BINARY LOGS"
cp "$DIR/binlog/$file" "$HERE/$NAME.binlog"
chmod 644 "$HERE/$NAME.binlog"
echo "recorded $HERE/$NAME.binlog ($(stat -c %s "$HERE/$NAME.binlog") bytes, from $file)"
