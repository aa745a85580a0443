#!/usr/bin/env bash
# Private MariaDB with a ROW binlog for the streamer: up | down | status. Idempotent.
# State under .local/mariadb (or $STREAMER_MYSQL_DIR); passwords are generated into files under
# secrets/ and fed to the client on stdin, never in argv.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DIR="${STREAMER_MYSQL_DIR:-$ROOT/.local/mariadb}"
PORT="${STREAMER_MYSQL_PORT:-13306}"
EXTRA="${STREAMER_MYSQL_EXTRA_ARGS:-}"
if [ -n "${STREAMER_MYSQL_DIR:-}" ]; then SECRETS="$DIR/secrets"; else SECRETS="$ROOT/.local/secrets"; fi
SOCK="$DIR/mysqld.sock"
USER_NAME="$(id -un)"

running() { [ -S "$SOCK" ] && mariadb-admin --no-defaults --socket="$SOCK" -uroot ping >/dev/null 2>&1; }

install() {
    if ! command -v mariadbd >/dev/null 2>&1; then
        echo "mariadb: installing mariadb-server"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server >/dev/null
    fi
}

password() {
    local f="$SECRETS/$1.password"
    if [ ! -s "$f" ]; then
        mkdir -p "$SECRETS"
        chmod 700 "$SECRETS"
        (umask 077 && head -c 18 /dev/urandom | base64 | tr -d '/+=' > "$f")
    fi
    cat "$f"
}

up() {
    install
    if running; then return 0; fi
    mkdir -p "$DIR/binlog"
    if [ ! -d "$DIR/data/mysql" ]; then
        mariadb-install-db --no-defaults --datadir="$DIR/data" --user="$USER_NAME" \
            --auth-root-authentication-method=normal --skip-test-db --skip-name-resolve \
            > "$DIR/install.log" 2>&1 || { cat "$DIR/install.log" >&2; exit 1; }
    fi
    # shellcheck disable=SC2086
    nohup mariadbd --no-defaults --datadir="$DIR/data" --user="$USER_NAME" \
        --bind-address=127.0.0.1 --port="$PORT" --socket="$SOCK" --pid-file="$DIR/mysqld.pid" \
        --log-error="$DIR/error.log" --skip-name-resolve --server-id=1 \
        --log-bin="$DIR/binlog/mysql-bin" --binlog-format=ROW --binlog-row-image=FULL \
        --binlog-row-metadata=FULL --log-slave-updates --max-allowed-packet=64M \
        --innodb-buffer-pool-size=256M --innodb-flush-log-at-trx-commit=2 --sync-binlog=0 \
        $EXTRA > /dev/null 2>&1 &
    for _ in $(seq 1 150); do
        if running; then break; fi
        sleep 0.2
    done
    if ! running; then
        echo "mariadb: did not answer ping within 30 s; error log tail:" >&2
        tail -n 30 "$DIR/error.log" >&2 || true
        exit 1
    fi
    local admin_pw streamer_pw
    admin_pw="$(password admin)"
    streamer_pw="$(password streamer)"
    mariadb --no-defaults --socket="$SOCK" -uroot <<SQL
CREATE USER IF NOT EXISTS 'admin'@'127.0.0.1' IDENTIFIED BY '$admin_pw';
GRANT ALL PRIVILEGES ON *.* TO 'admin'@'127.0.0.1' WITH GRANT OPTION;
CREATE USER IF NOT EXISTS 'streamer'@'127.0.0.1' IDENTIFIED BY '$streamer_pw';
GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'streamer'@'127.0.0.1';
CREATE DATABASE IF NOT EXISTS demo;
SQL
    echo "mariadb: up on 127.0.0.1:$PORT (data in $DIR)"
}

down() {
    if ! running; then return 0; fi
    local pid
    pid="$(cat "$DIR/mysqld.pid" 2>/dev/null || true)"
    mariadb-admin --no-defaults --socket="$SOCK" -uroot shutdown
    if [ -n "$pid" ]; then
        for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    fi
    echo "mariadb: stopped"
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    status) running ;;
    *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
