#!/usr/bin/env bash
# Records tests/unit/binlogs/NAME.binlog (NAME: engine by default, or compressed), or PATH.binlog
# for an argument PATH.sql elsewhere (streamer/engine/warmup.sql): the scenario run on
# a private, throwaway MariaDB (the project's own deploy/local/mysql.sh, on its own port and
# directory), and the one binlog file it wrote, copied byte for byte. Needs mariadb-server
# (`make up` installs it). With --mysql first, the scenario runs on the source matrix's MySQL
# 8.0 instead (`deploy/local/sources.sh up mysql-8.0` starts it), between two binlog rotations,
# and must leave nothing behind. The tests only read the recorded files; run this again when a
# scenario changes.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
MYSQL=""
if [ "${1:-}" = "--mysql" ]; then MYSQL=1; shift; fi
NAME="${1:-engine}"
case "$NAME" in
    *.sql) SCENARIO="$(cd "$(dirname "$NAME")" && pwd)/$(basename "$NAME")"; OUT="${SCENARIO%.sql}.binlog" ;;
    *) SCENARIO="$HERE/$NAME.sql"; OUT="$HERE/$NAME.binlog" ;;
esac
[ -f "$SCENARIO" ] || { echo "record.sh: no scenario $SCENARIO" >&2; exit 2; }
ROOT="$(cd "$HERE/../../.." && pwd)"
if [ -n "$MYSQL" ]; then
    DIR="$ROOT/.local/mysql-8.0"
    [ -S "$DIR/mysqld.sock" ] || { echo "record.sh: MySQL 8.0 is not up (deploy/local/sources.sh up mysql-8.0)" >&2; exit 2; }
    SERVER="MySQL 8.0's "
else
    DIR="$(mktemp -d)"
    export STREAMER_MYSQL_DIR="$DIR" STREAMER_MYSQL_PORT="${RECORD_PORT:-13399}"
    trap '"$ROOT/deploy/local/mysql.sh" down >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT
    "$ROOT/deploy/local/mysql.sh" up >/dev/null
    SERVER=""
fi
sql() { mariadb --no-defaults --socket="$DIR/mysqld.sock" -uroot --batch "$@"; }
sql -e "FLUSH BINARY LOGS"
file="$(sql -N -e "SHOW MASTER STATUS" | cut -f1)"
sql < "$SCENARIO"
sql -e "FLUSH BINARY LOGS"
cp "$DIR/binlog/$file" "$OUT"
chmod 644 "$OUT"
echo "recorded $OUT ($(stat -c %s "$OUT") bytes, from $SERVER$file)"
