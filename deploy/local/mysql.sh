#!/usr/bin/env bash
# A private MySQL-compatible server with a ROW binlog for the streamer: up | down | status.
# Idempotent.
#
# STREAMER_MYSQL_FLAVOUR picks the server: mariadb-10.11 (the default: Debian's package, installed
# with apt), mariadb-11.4 or mysql-8.0 (from Maven Central, deploy/local/dist.sh). MySQL runs with
# gtid_mode=ON, as most MySQL sources do.
#
# State lives under .local/mariadb (or $STREAMER_MYSQL_DIR). Passwords are generated once into
# .local/secrets/{admin,streamer}.password (or $STREAMER_MYSQL_DIR/secrets/ when the dir is
# overridden), mode 600, and reach the server only as SQL on the client's stdin over the root unix
# socket: never in argv, never in a log, and never in the binlog (sql_log_bin=0 for account SQL).
#
# Env: STREAMER_MYSQL_DIR, STREAMER_MYSQL_PORT (13306), STREAMER_MYSQL_EXTRA_ARGS (appended to the
# server's arguments, so later options win, e.g. "--binlog-format=STATEMENT"),
# STREAMER_MYSQL_SERVER_ID (1), STREAMER_MYSQL_SECRETS (the password files' directory).
#
# A replica: STREAMER_MYSQL_REPLICA_OF=<port of a primary on 127.0.0.1> makes the server a GTID
# replica of it (log_slave_updates, so its binlog has the primary's transactions under their
# GTIDs), replicating as the primary's admin user. Give it the primary's secrets directory, so
# that the streamer's password works on both: `make up-replica` does. The databases and tables
# come from the primary's binlog; only the accounts (never binlogged) are made here. A replica
# that can't replicate (the primary's oldest binlogs purged, say) reports the replica's error.
#
# Binlog files expire after a day (at a rotation or a restart), so tests and loads run for weeks
# don't fill the disk; a streamer stopped longer than that is told its start file was purged.
# make bench purges the binlog after each run (bench/binlogs.py).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DIR="${STREAMER_MYSQL_DIR:-$ROOT/.local/mariadb}"
PORT="${STREAMER_MYSQL_PORT:-13306}"
EXTRA="${STREAMER_MYSQL_EXTRA_ARGS:-}"
SERVER_ID="${STREAMER_MYSQL_SERVER_ID:-1}"
REPLICA_OF="${STREAMER_MYSQL_REPLICA_OF:-}"
FLAVOUR="${STREAMER_MYSQL_FLAVOUR:-mariadb-10.11}"
case "$FLAVOUR" in
    mariadb-10.11|mariadb-11.4|mysql-8.0) ;;
    *) echo "mysql: unknown STREAMER_MYSQL_FLAVOUR '$FLAVOUR' (mariadb-10.11, mariadb-11.4 or mysql-8.0)" >&2; exit 2 ;;
esac
BASE=""  # the unpacked server of a flavour from Maven Central (dist.sh)
if [ -n "${STREAMER_MYSQL_SECRETS:-}" ]; then SECRETS="$STREAMER_MYSQL_SECRETS"
elif [ -n "${STREAMER_MYSQL_DIR:-}" ]; then SECRETS="$DIR/secrets"; else SECRETS="$ROOT/.local/secrets"; fi
SOCK="$DIR/mysqld.sock"
PIDFILE="$DIR/mysqld.pid"
ERRLOG="$DIR/error.log"
USER_NAME="$(id -un)"
TIMEOUT_S=${STREAMER_MARIADB_START_TIMEOUT_S:-90}

log() { echo "$FLAVOUR: $*"; }
die() { echo "$FLAVOUR: $*" >&2; exit 1; }

running() {
    [ -S "$SOCK" ] && mariadb-admin --no-defaults --socket="$SOCK" -uroot --connect-timeout=2 ping >/dev/null 2>&1
}

server_pid() {
    local p
    p="$(cat "$PIDFILE" 2>/dev/null || true)"
    if [ -n "$p" ] && kill -0 "$p" 2>/dev/null && grep -qaE 'mariadbd|mysqld' "/proc/$p/cmdline" 2>/dev/null; then
        echo "$p"
    fi
}

install_server() {
    # Debian's MariaDB client tools talk to every flavour here, so they are installed for all.
    if [ "$FLAVOUR" != mariadb-10.11 ]; then
        BASE="$("$ROOT/deploy/local/dist.sh" "$FLAVOUR")" || die "cannot fetch the $FLAVOUR server"
    fi
    if command -v mariadbd >/dev/null 2>&1; then return 0; fi
    log "installing mariadb-server (apt)"
    apt-get update -qq || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server >/dev/null \
        || die "apt-get install mariadb-server failed"
    command -v mariadbd >/dev/null 2>&1 || die "mariadbd still missing after installing mariadb-server"
}

password_file() {
    # Creates the password file once (mode 600); prints its path.
    local f="$SECRETS/$1.password"
    mkdir -p "$SECRETS"
    chmod 700 "$SECRETS"
    if [ ! -s "$f" ]; then
        local pw
        pw="$(head -c 48 /dev/urandom | base64 -w0 | tr -dc 'A-Za-z0-9')"
        pw="${pw:0:24}"
        [ "${#pw}" -eq 24 ] || die "could not generate a password"
        (umask 077 && printf '%s' "$pw" > "$f.tmp") && mv "$f.tmp" "$f"
    fi
    chmod 600 "$f"
    echo "$f"
}

init_datadir() {
    if [ -d "$DIR/data/mysql" ]; then return 0; fi
    mkdir -p "$DIR"
    rm -rf "$DIR/data"   # a half-initialised dir from an interrupted run
    log "initialising $DIR/data"
    mkdir -p "$DIR/tmp"
    # TMPDIR: the bootstrap's temporary tables in the instance's own directory (see up()).
    TMPDIR="$DIR/tmp"
    export TMPDIR
    case "$FLAVOUR" in
        mariadb-10.11)
            mariadb-install-db --no-defaults --datadir="$DIR/data" --user="$USER_NAME" \
                --auth-root-authentication-method=normal --skip-test-db --skip-name-resolve \
                > "$DIR/install.log" 2>&1 ;;
        mariadb-11.4)
            LD_LIBRARY_PATH="$BASE/libs" "$BASE/scripts/mariadb-install-db" --no-defaults \
                --basedir="$BASE" --datadir="$DIR/data" --user="$USER_NAME" \
                --auth-root-authentication-method=normal --skip-test-db --skip-name-resolve \
                > "$DIR/install.log" 2>&1 ;;
        mysql-8.0)
            # root@localhost without a password, reachable on the socket only.
            "$BASE/bin/mysqld" --no-defaults --initialize-insecure --basedir="$BASE" \
                --datadir="$DIR/data" --user="$USER_NAME" > "$DIR/install.log" 2>&1 ;;
    esac || { tail -n 30 "$DIR/install.log" >&2; rm -rf "$DIR/data"; die "initialising the $FLAVOUR data directory failed"; }
}

server_command() {
    # The server and the options of this flavour; the shared ones follow in up().
    case "$FLAVOUR" in
        mariadb-10.11) echo mariadbd --no-defaults ;;
        mariadb-11.4) echo "$BASE/bin/mariadbd" --no-defaults --basedir="$BASE" ;;
        # gtid_mode=ON, as MySQL sources mostly run; native passwords spare PyMySQL the RSA
        # exchange caching_sha2_password needs on a plain TCP connection.
        mysql-8.0) echo "$BASE/bin/mysqld" --no-defaults --basedir="$BASE" --mysqlx=OFF \
                --gtid-mode=ON --enforce-gtid-consistency=ON \
                --default-authentication-plugin=mysql_native_password ;;
    esac
}

schema_sql() {
    # A primary's databases and tables, binlogged: its replicas get them from there.
    cat <<'SQL'
SET SESSION sql_log_bin = 1;
CREATE DATABASE IF NOT EXISTS demo;
CREATE DATABASE IF NOT EXISTS streamer_heartbeat;
CREATE TABLE IF NOT EXISTS streamer_heartbeat.heartbeat (source VARCHAR(64) PRIMARY KEY, ts_us BIGINT UNSIGNED NOT NULL);
CREATE TABLE IF NOT EXISTS streamer_heartbeat.snapshot_watermark (streamer VARCHAR(191) PRIMARY KEY, mark VARCHAR(64) NOT NULL);
CREATE TABLE IF NOT EXISTS streamer_heartbeat.snapshot_signal (id BIGINT AUTO_INCREMENT PRIMARY KEY, streamer VARCHAR(191) NOT NULL, request TEXT NOT NULL, requested_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6));
SQL
}

replicate() {
    # Once: a replica set up before is left as it is (stopped or promoted on purpose). The
    # password goes in the SQL on stdin.
    if [ -f "$DIR/replica.configured" ]; then return 0; fi
    if [ "$FLAVOUR" = mysql-8.0 ]; then replicate_mysql; return 0; fi
    local admin_pw cnf="$DIR/primary.cnf" dbs
    admin_pw="$(cat "$(password_file admin)")"
    # Seeded from a consistent copy of the primary's databases at a GTID position (the dump sets
    # gtid_slave_pos), not from the primary's first binlog, which may have expired.
    (umask 077 && printf '[client]\nuser=admin\npassword=%s\nhost=127.0.0.1\nport=%s\n' \
        "$admin_pw" "$REPLICA_OF" > "$cnf")
    dbs="$(mariadb --defaults-file="$cnf" -N --batch -e "SHOW DATABASES" \
        | grep -vxE 'mysql|information_schema|performance_schema|sys' | tr '\n' ' ')" \
        || { rm -f "$cnf"; die "cannot list the databases of the primary on 127.0.0.1:$REPLICA_OF"; }
    log "copying $(echo "$dbs" | wc -w) databases from the primary on 127.0.0.1:$REPLICA_OF"
    # $dbs is split on purpose: one database name per word ([A-Za-z0-9_] names).
    # shellcheck disable=SC2086
    mariadb-dump --defaults-file="$cnf" --single-transaction --gtid --master-data=1 \
        --databases $dbs 2>"$DIR/seed.err" \
        | mariadb --no-defaults --socket="$SOCK" -uroot --init-command="SET SESSION sql_log_bin=0" \
        || { rm -f "$cnf"; cat "$DIR/seed.err" >&2; die "copying the primary's databases failed"; }
    rm -f "$cnf" "$DIR/seed.err"
    # The binlog starts at the copy's GTID state, every domain included: a GTID resume (a
    # streamer failing over to this server) needs each domain it names in the binlog's state.
    # (A literal: setting it from @@gtid_slave_pos in the same statement hangs the server.)
    local seeded
    seeded="$(mariadb --no-defaults --socket="$SOCK" -uroot -N --batch -e "SELECT @@GLOBAL.gtid_slave_pos")"
    [[ "$seeded" =~ ^[0-9,-]*$ ]] || die "unexpected gtid_slave_pos after the copy: $seeded"
    mariadb --no-defaults --socket="$SOCK" -uroot --batch >/dev/null <<SQL || die "CHANGE MASTER TO failed"
RESET MASTER;
SET GLOBAL gtid_binlog_state = '$seeded';
CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=$REPLICA_OF, MASTER_USER='admin', MASTER_PASSWORD='$admin_pw', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1;
START SLAVE;
SQL
    wait_replicating
    touch "$DIR/replica.configured"
}

replicate_mysql() {
    # MySQL: GTID auto-positioning from the primary's first transaction, so the primary must
    # still hold its whole binlog (a private primary of a test does).
    local admin_pw
    admin_pw="$(cat "$(password_file admin)")"
    mariadb --no-defaults --socket="$SOCK" -uroot --batch >/dev/null <<SQL || die "CHANGE MASTER TO failed"
CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=$REPLICA_OF, MASTER_USER='admin', MASTER_PASSWORD='$admin_pw', MASTER_AUTO_POSITION=1, MASTER_CONNECT_RETRY=1;
START SLAVE;
SQL
    wait_replicating
    touch "$DIR/replica.configured"
}

wait_replicating() {
    local deadline=$((SECONDS + 30)) io sql
    while :; do
        io="$(slave_field Slave_IO_Running)"; sql="$(slave_field Slave_SQL_Running)"
        if [ "$io" = "Yes" ] && [ "$sql" = "Yes" ]; then break; fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            die "not replicating from 127.0.0.1:$REPLICA_OF (IO thread $io, SQL thread $sql): $(slave_field Last_IO_Error) $(slave_field Last_SQL_Error)"
        fi
        sleep 0.2
    done
}

slave_field() {
    mariadb --no-defaults --socket="$SOCK" -uroot --batch -e "SHOW SLAVE STATUS\G" 2>/dev/null \
        | sed -n "s/^ *$1: //p"
}

provision() {
    # Idempotent: users, grants, the demo database, the heartbeat table and the snapshots'
    # watermark and request tables (signals.tables_sql; the streamer user may
    # write only that database: heartbeat.user null reuses the streamer's own credentials). Passwords are read from their files by the
    # shell and sent inside the SQL on stdin. The files only ever hold [A-Za-z0-9].
    local admin_pw streamer_pw
    admin_pw="$(cat "$(password_file admin)")"
    streamer_pw="$(cat "$(password_file streamer)")"
    if [ -z "$admin_pw" ] || [ -z "$streamer_pw" ]; then die "empty password file under $SECRETS"; fi
    (umask 077 && : > "$DIR/provision.err")   # may quote SQL: owner-only, deleted below
    # REPLICATION CLIENT is BINLOG MONITOR on MariaDB >= 10.5 (SHOW MASTER STATUS / SHOW BINARY LOGS);
    # REPLICATION SLAVE allows the binlog dump. SHOW GLOBAL VARIABLES needs no privilege.
    mariadb --no-defaults --socket="$SOCK" -uroot --batch >/dev/null 2>"$DIR/provision.err" <<SQL || {
SET SESSION sql_log_bin = 0;
CREATE USER IF NOT EXISTS 'admin'@'127.0.0.1';
ALTER USER 'admin'@'127.0.0.1' IDENTIFIED BY '$admin_pw';
GRANT ALL PRIVILEGES ON *.* TO 'admin'@'127.0.0.1' WITH GRANT OPTION;
CREATE USER IF NOT EXISTS 'streamer'@'127.0.0.1';
ALTER USER 'streamer'@'127.0.0.1' IDENTIFIED BY '$streamer_pw';
GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'streamer'@'127.0.0.1';
GRANT INSERT, UPDATE ON streamer_heartbeat.* TO 'streamer'@'127.0.0.1';
$(if [ -z "$REPLICA_OF" ]; then schema_sql; fi)
SQL
        # The client's error text can quote SQL; keep only the error codes in the output.
        grep -o 'ERROR [0-9]* ([0-9A-Z]*)' "$DIR/provision.err" >&2 || true
        rm -f "$DIR/provision.err"
        die "provisioning users failed"
    }
    rm -f "$DIR/provision.err"
}

up() {
    install_server
    if running; then
        provision   # idempotent; brings an older instance up to date (e.g. the heartbeat table)
        if [ -n "$REPLICA_OF" ]; then replicate; fi
        log "already running on 127.0.0.1:$PORT (socket $SOCK)"
        return 0
    fi
    local stale
    stale="$(server_pid)"
    [ -z "$stale" ] || die "a server (pid $stale) holds $DIR but does not answer ping; run '$0 down' first"
    if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
        die "port 127.0.0.1:$PORT is already taken by another process"
    fi
    init_datadir
    # Each instance's temporary tables in a directory of its own: a server that starts deletes
    # every "#sql*" file of its tmpdir as a crash's leftovers, and with the /tmp they all shared,
    # a private server starting took the files of live temporary tables from the others (a
    # query on information_schema failed: "Error on delete of '/tmp/#sql-temptable-...'",
    # and another instance's bootstrap: "Unknown table 'mysql.tmp_user_sys'").
    mkdir -p "$DIR/binlog" "$DIR/tmp"
    rm -f "$SOCK"
    local start_line=0
    if [ -f "$ERRLOG" ]; then start_line="$(wc -l < "$ERRLOG")"; fi
    local cmd
    read -r -a cmd <<< "$(server_command)"
    # $EXTRA is split on purpose: it carries several options.
    # shellcheck disable=SC2086
    env ${BASE:+LD_LIBRARY_PATH="$BASE/libs"} nohup "${cmd[@]}" --datadir="$DIR/data" --user="$USER_NAME" \
        --bind-address=127.0.0.1 --port="$PORT" --socket="$SOCK" --pid-file="$PIDFILE" \
        --log-error="$ERRLOG" --tmpdir="$DIR/tmp" --skip-name-resolve --server-id="$SERVER_ID" \
        --log-bin="$DIR/binlog/mysql-bin" --binlog-format=ROW --binlog-row-image=FULL \
        --binlog-row-metadata=FULL --log-slave-updates --max-allowed-packet=64M \
        --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci --innodb-buffer-pool-size=256M --innodb-flush-log-at-trx-commit=2 --sync-binlog=0 \
        --binlog-expire-logs-seconds=86400 \
        $EXTRA > "$DIR/server.out" 2>&1 < /dev/null &
    local pid=$!
    local deadline=$((SECONDS + TIMEOUT_S))
    until running; do
        if ! kill -0 "$pid" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
            if kill -0 "$pid" 2>/dev/null; then
                echo "$FLAVOUR: no answer to ping within ${TIMEOUT_S} s (pid $pid); error log tail:" >&2
            else
                echo "$FLAVOUR: the server (pid $pid) exited before answering ping; error log tail:" >&2
            fi
            tail -n "+$((start_line + 1))" "$ERRLOG" 2>/dev/null | tail -n 30 >&2 || true
            tail -n 10 "$DIR/server.out" >&2 || true
            kill -TERM "$pid" 2>/dev/null || true
            exit 1
        fi
        sleep 0.1
    done
    provision
    if [ -n "$REPLICA_OF" ]; then
        replicate
        log "up on 127.0.0.1:$PORT as a replica of 127.0.0.1:$REPLICA_OF (socket $SOCK, data $DIR)"
        return 0
    fi
    log "up on 127.0.0.1:$PORT (socket $SOCK, data $DIR, secrets $SECRETS)"
}

down() {
    local pid
    pid="$(server_pid)"
    if running; then
        mariadb-admin --no-defaults --socket="$SOCK" -uroot shutdown >/dev/null 2>&1 \
            || { [ -n "$pid" ] && kill -TERM "$pid"; } || die "could not stop the server"
    elif [ -n "$pid" ]; then
        kill -TERM "$pid" 2>/dev/null || true
    else
        return 0
    fi
    if [ -n "$pid" ]; then
        local deadline=$((SECONDS + 60))
        while kill -0 "$pid" 2>/dev/null; do
            [ "$SECONDS" -lt "$deadline" ] || die "pid $pid still alive 60 s after shutdown"
            sleep 0.1
        done
    else
        local deadline=$((SECONDS + 60))
        while running; do
            [ "$SECONDS" -lt "$deadline" ] || die "still answering ping 60 s after shutdown"
            sleep 0.1
        done
    fi
    log "stopped"
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    status)
        if running; then log "running on 127.0.0.1:$PORT (socket $SOCK)"; else log "not running"; exit 1; fi ;;
    *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
