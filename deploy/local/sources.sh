#!/usr/bin/env bash
# The servers of the source matrix beside the default MariaDB 10.11 (13306): MySQL 8.0 on 13316
# and MariaDB 11.4 on 13326 (STREAMER_MYSQL80_PORT, STREAMER_MARIADB114_PORT), state under
# .local/mysql-8.0 and .local/mariadb-11.4, with the default server's passwords, so one set of
# secrets opens all three: up | down | status [FLAVOUR...]. Idempotent. The suite starts them
# (tests/support.py); make down stops them. Both start at once: each waits on its own disk.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
action="${1:?usage: sources.sh up|down|status [mysql-8.0] [mariadb-11.4]}"
shift
flavours=("$@")
[ "${#flavours[@]}" -gt 0 ] || flavours=(mysql-8.0 mariadb-11.4)

port_of() {
    case "$1" in
        mysql-8.0) echo "${STREAMER_MYSQL80_PORT:-13316}" ;;
        mariadb-11.4) echo "${STREAMER_MARIADB114_PORT:-13326}" ;;
        *) echo "sources: unknown flavour '$1' (mysql-8.0 or mariadb-11.4)" >&2; exit 2 ;;
    esac
}

one() {
    local flavour="$1" dir="$ROOT/.local/$1"
    if [ "$action" != up ] && [ ! -d "$dir" ]; then
        [ "$action" = status ] && echo "$flavour: not running"
        return 0
    fi
    STREAMER_MYSQL_FLAVOUR="$flavour" STREAMER_MYSQL_DIR="$dir" \
        STREAMER_MYSQL_PORT="$(port_of "$flavour")" STREAMER_MYSQL_SECRETS="$ROOT/.local/secrets" \
        "$ROOT/deploy/local/mysql.sh" "$action"
}

# Fetched one after the other (two mvn runs would share one local repository), started together.
if [ "$action" = up ]; then
    for f in "${flavours[@]}"; do "$ROOT/deploy/local/dist.sh" "$f" >/dev/null; done
fi
pids=()
for f in "${flavours[@]}"; do
    port_of "$f" >/dev/null
    one "$f" & pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
exit "$status"
