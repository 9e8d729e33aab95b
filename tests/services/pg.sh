#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the integration tests.
#
#   pg.sh start DIR              initdb into DIR (once), start, wait for pg_isready, write DIR/env
#   pg.sh stop DIR               fast shutdown (immediate if that hangs)
#   pg.sh resume DIR             start a stopped cluster again on its port and data, wait until ready
#                                (stop, then resume: an outage of the server)
#   pg.sh restart-immediate DIR  crash-like restart (pg_ctl restart -m immediate), then wait until ready
#   pg.sh destroy DIR            stop and delete the cluster's files
#
# The server listens on 127.0.0.1 only (plus a unix socket in DIR), trusts connections from there, and
# allows prepared transactions. PostgreSQL refuses to run as root, so under root it runs as the system
# user twopc-test, created on first use.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PG_OS_USER=twopc-test
PG_ROLE=twopc
PG_DATABASE=twopc_test
PG_MAX_PREPARED=128

pg_bindir() {
    local dir
    dir=$(pg_config --bindir 2>/dev/null || true)
    if [ -z "$dir" ] || [ ! -x "$dir/initdb" ]; then
        dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    fi
    [ -n "$dir" ] && [ -x "$dir/initdb" ] ||
        tpc_die "PostgreSQL server binaries (initdb, pg_ctl) not found; run 'make deps'"
    echo "$dir"
}

# Run a command as the user that owns the cluster, from a directory that user can enter.
pg_as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        (cd / && runuser -u "$PG_OS_USER" -- "$@")
    else
        (cd / && "$@")
    fi
}

pg_ensure_os_user() {
    [ "$(id -u)" -eq 0 ] || return 0
    id "$PG_OS_USER" >/dev/null 2>&1 && return 0
    useradd --system --user-group --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin "$PG_OS_USER" 2>/dev/null ||
        id "$PG_OS_USER" >/dev/null 2>&1 ||
        tpc_die "could not create system user \"$PG_OS_USER\" to run PostgreSQL"
}

# Create DIR so that the cluster owner can use it. When the owner cannot reach DIR (a checkout under a
# private home folder, say), DIR becomes a link to a private folder under /tmp.
pg_prepare_dir() {
    local dir=$1 real
    # Already moved to a place the cluster user can reach (a second start on the same folder).
    [ -L "$dir" ] && return 0
    mkdir -p "$dir"
    [ "$(id -u)" -eq 0 ] || return 0
    chown "$PG_OS_USER:" "$dir"
    if ! pg_as_owner test -w "$dir/."; then
        real=$(mktemp -d /tmp/twopc-pg.XXXXXX)
        chown "$PG_OS_USER:" "$real"
        rmdir "$dir"
        ln -s "$real" "$dir"
    fi
}

# Unix socket paths are limited to 107 bytes; a deep checkout gets its socket under /tmp instead.
pg_socket_dir() {
    local dir=$1 sock
    if [ -s "$dir/socket_dir" ]; then
        cat "$dir/socket_dir"
        return
    fi
    sock="$(readlink -f "$dir")/run"
    if [ $((${#sock} + 20)) -gt 107 ]; then
        sock=$(mktemp -d /tmp/twopc-pgsock.XXXXXX)
    else
        mkdir -p "$sock"
    fi
    [ "$(id -u)" -ne 0 ] || chown "$PG_OS_USER:" "$sock"
    echo "$sock" >"$dir/socket_dir"
    echo "$sock"
}

pg_write_config() {
    local data=$1 port=$2 sock=$3
    cat >"$data/twopc.conf" <<EOF
# Written by tests/services/pg.sh for a throwaway test cluster.
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$sock'
max_connections = 200
max_prepared_transactions = $PG_MAX_PREPARED
fsync = on
synchronous_commit = on
full_page_writes = on
logging_collector = off
log_line_prefix = '%m [%p] '
EOF
    cat >"$data/pg_hba.conf" <<EOF
# Written by tests/services/pg.sh: trust local socket and 127.0.0.1 only.
local all all trust
host  all all 127.0.0.1/32 trust
EOF
    grep -q "^include 'twopc.conf'" "$data/postgresql.conf" ||
        echo "include 'twopc.conf'" >>"$data/postgresql.conf"
    [ "$(id -u)" -ne 0 ] || chown "$PG_OS_USER:" "$data/twopc.conf" "$data/pg_hba.conf"
}

pg_wait_ready() {
    local bin=$1 port=$2 i
    for ((i = 0; i < 600; i++)); do
        if "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -d postgres -U "$PG_ROLE" -t 1; then
            return 0
        fi
        sleep 0.1
    done
    tpc_die "PostgreSQL on 127.0.0.1:$port is not ready after 60 s"
}

pg_quote() {
    printf "'%s'" "${1//\'/\'\\\'\'}"
}

pg_start() {
    local dir=$1 bin data sock port attempt started_ms
    started_ms=$(tpc_now_ms)
    bin=$(pg_bindir)
    pg_ensure_os_user
    pg_prepare_dir "$dir"
    dir=$(readlink -f "$dir")
    data="$dir/data"
    pg_as_owner mkdir -p "$dir/log"
    if [ ! -f "$data/PG_VERSION" ]; then
        pg_as_owner "$bin/initdb" -D "$(readlink -f "$dir")/data" -U "$PG_ROLE" -A trust -E UTF8 \
            --locale=C --no-instructions --no-sync >"$dir/initdb.log" 2>&1 ||
            {
                cat "$dir/initdb.log" >&2
                tpc_die "initdb failed"
            }
    fi
    sock=$(pg_socket_dir "$dir")
    for attempt in 1 2 3 4 5; do
        port=$(tpc_pick_port)
        pg_write_config "$data" "$port" "$sock"
        if pg_as_owner "$bin/pg_ctl" -D "$(readlink -f "$data")" \
            -l "$(readlink -f "$dir")/log/postgresql.log" -w -t 60 start >"$dir/pg_ctl.log" 2>&1; then
            break
        fi
        if [ "$attempt" -lt 5 ] && tail -n 20 "$dir/log/postgresql.log" | grep -q 'could not bind'; then
            tpc_log "port $port was taken; trying another"
            continue
        fi
        tail -n 20 "$dir/log/postgresql.log" >&2 || true
        tpc_die "PostgreSQL did not start (log: $dir/log/postgresql.log)"
    done
    echo "$port" >"$dir/port"
    pg_wait_ready "$bin" "$port"
    if [ -z "$("$bin/psql" -h 127.0.0.1 -p "$port" -U "$PG_ROLE" -d postgres -Atq \
        -c "SELECT 1 FROM pg_database WHERE datname = '$PG_DATABASE'")" ]; then
        "$bin/createdb" -h 127.0.0.1 -p "$port" -U "$PG_ROLE" "$PG_DATABASE"
    fi
    printf 'export TWOPC_TEST_PG_CONNINFO=%s\n' \
        "$(pg_quote "host=127.0.0.1 port=$port dbname=$PG_DATABASE user=$PG_ROLE")" >"$dir/env"
    tpc_log "PostgreSQL $("$bin/postgres" --version | awk '{ print $3 }') ready on 127.0.0.1:$port" \
        "in $(($(tpc_now_ms) - started_ms)) ms"
}

pg_running() {
    [ -f "$1/data/postmaster.pid" ] && tpc_pid_alive "$(head -n 1 "$1/data/postmaster.pid")"
}

pg_stop() {
    local dir=$1 bin
    pg_running "$dir" || return 0
    bin=$(pg_bindir)
    pg_as_owner "$bin/pg_ctl" -D "$(readlink -f "$dir/data")" -m fast -w -t 30 stop >/dev/null 2>&1 ||
        pg_as_owner "$bin/pg_ctl" -D "$(readlink -f "$dir/data")" -m immediate -w -t 30 stop >/dev/null
}

pg_restart_immediate() {
    local dir=$1 bin started_ms
    started_ms=$(tpc_now_ms)
    bin=$(pg_bindir)
    pg_running "$dir" || tpc_die "no PostgreSQL running in $dir"
    pg_as_owner "$bin/pg_ctl" -D "$(readlink -f "$dir/data")" -l "$(readlink -f "$dir")/log/postgresql.log" \
        -m immediate -w -t 60 restart >"$dir/pg_ctl.log" 2>&1 ||
        {
            tail -n 20 "$dir/log/postgresql.log" >&2 || true
            tpc_die "pg_ctl restart -m immediate failed"
        }
    pg_wait_ready "$bin" "$(cat "$dir/port")"
    tpc_log "PostgreSQL restarted (immediate) in $(($(tpc_now_ms) - started_ms)) ms"
}

pg_resume() {
    local dir=$1 bin started_ms
    started_ms=$(tpc_now_ms)
    bin=$(pg_bindir)
    [ -s "$dir/port" ] || tpc_die "no PostgreSQL was started in $dir"
    if ! pg_running "$dir"; then
        pg_as_owner "$bin/pg_ctl" -D "$(readlink -f "$dir/data")" \
            -l "$(readlink -f "$dir")/log/postgresql.log" -w -t 60 start >"$dir/pg_ctl.log" 2>&1 ||
            {
                tail -n 20 "$dir/log/postgresql.log" >&2 || true
                tpc_die "PostgreSQL did not start again (log: $dir/log/postgresql.log)"
            }
    fi
    pg_wait_ready "$bin" "$(cat "$dir/port")"
    tpc_log "PostgreSQL started again in $(($(tpc_now_ms) - started_ms)) ms"
}

pg_destroy() {
    local dir=$1 target sock
    [ -e "$dir" ] || return 0
    pg_stop "$dir"
    if [ -s "$dir/socket_dir" ]; then
        sock=$(cat "$dir/socket_dir")
        case "$sock" in /tmp/twopc-pgsock.*) rm -rf "$sock" ;; esac
    fi
    if [ -L "$dir" ]; then
        target=$(readlink -f "$dir")
        case "$target" in /tmp/twopc-pg.*) rm -rf "$target" ;; esac
    fi
    rm -rf "$dir"
}

[ $# -eq 2 ] || tpc_die "usage: pg.sh start|stop|resume|restart-immediate|destroy DIR"
mkdir -p "$(dirname "$2")"
dir="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
case "$1" in
start) pg_start "$dir" ;;
stop) pg_stop "$dir" ;;
resume) pg_resume "$dir" ;;
restart-immediate) pg_restart_immediate "$dir" ;;
destroy) pg_destroy "$dir" ;;
*) tpc_die "unknown command \"$1\"" ;;
esac
