#!/usr/bin/env bash
# Records tests/unit/binlogs/NAME.binlog (NAME: engine by default, or compressed), or PATH.binlog
# for an argument PATH.sql elsewhere (streamer/engine/warmup.sql): the scenario run on
# a private, throwaway MariaDB (the project's own deploy/local/mysql.sh, on its own port and
# directory), and the one binlog file it wrote, copied byte for byte. Needs mariadb-server
# (`make up` installs it). The tests only read the recorded files; run this again when a
# scenario changes.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
NAME="${1:-engine}"
case "$NAME" in
    *.sql) SCENARIO="$(cd "$(dirname "$NAME")" && pwd)/$(basename "$NAME")"; OUT="${SCENARIO%.sql}.binlog" ;;
    *) SCENARIO="$HERE/$NAME.sql"; OUT="$HERE/$NAME.binlog" ;;
esac
[ -f "$SCENARIO" ] || { echo "record.sh: no scenario $SCENARIO" >&2; exit 2; }
ROOT="$(cd "$HERE/../../.." && pwd)"
DIR="$(mktemp -d)"
export STREAMER_MYSQL_DIR="$DIR" STREAMER_MYSQL_PORT="${RECORD_PORT:-13399}"
trap '"$ROOT/deploy/local/mysql.sh" down >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT
"$ROOT/deploy/local/mysql.sh" up >/dev/null
sql() { mariadb --no-defaults --socket="$DIR/mysqld.sock" -uroot --batch "$@"; }
sql -e "FLUSH BINARY LOGS"
file="$(sql -N -e "SHOW MASTER STATUS" | cut -f1)"
sql < "$SCENARIO"
sql -e "FLUSH BINARY LOGS"
cp "$DIR/binlog/$file" "$OUT"
chmod 644 "$OUT"
echo "recorded $OUT ($(stat -c %s "$OUT") bytes, from $file)"
