# shellcheck shell=bash
# Shared by the test-server scripts in this folder (sourced, not run). Everything here binds or probes
# 127.0.0.1 only.

TPC_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TPC_SERVICES_DIR="$TPC_ROOT/tests/services"
# shellcheck disable=SC2034  # used by the scripts that source this file
TPC_STATE_ROOT="$TPC_ROOT/build/services"

tpc_log() {
    printf '%s: %s\n' "$(basename "$0")" "$*" >&2
}

tpc_die() {
    tpc_log "$*"
    exit 1
}

# Milliseconds since the epoch, for start-up timings.
tpc_now_ms() {
    date +%s%3N
}

# True if some local TCP socket (listening or not, IPv4 or IPv6) uses the port.
tpc_port_in_use() {
    local hex
    hex=$(printf '%04X' "$1")
    awk -v p=":$hex" 'NR > 1 && substr($2, length($2) - 4) == p { found = 1 } END { exit !found }' \
        /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# Print a port in 20000..59999 that nothing on this machine uses right now. Servers still retry on a
# bind failure, since another process may take the port between this check and their bind.
tpc_pick_port() {
    local port i
    for i in $(seq 1 200); do
        port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
        if ! tpc_port_in_use "$port"; then
            echo "$port"
            return 0
        fi
    done
    tpc_die "no free TCP port found on 127.0.0.1"
}

# True while the process exists and is not a zombie (a zombie whose parent does not reap it would
# otherwise look alive forever).
tpc_pid_alive() {
    local state
    kill -0 "$1" 2>/dev/null || return 1
    state=$(sed -e 's/^.*) //' -e 's/ .*//' "/proc/$1/stat" 2>/dev/null) || return 1
    [ "$state" != Z ]
}

# True while the process whose id is in the file is alive.
tpc_pidfile_alive() {
    [ -s "$1" ] && tpc_pid_alive "$(cat "$1")"
}

# Send SIGTERM to the process in the pid file, wait up to $2 seconds, then SIGKILL.
tpc_pidfile_stop() {
    local file=$1 grace=$2 pid i
    tpc_pidfile_alive "$file" || {
        rm -f "$file"
        return 0
    }
    pid=$(cat "$file")
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < grace * 10; i++)); do
        tpc_pid_alive "$pid" || break
        sleep 0.1
    done
    if tpc_pid_alive "$pid"; then
        tpc_log "process $pid did not stop within ${grace}s; killing it"
        kill -KILL "$pid" 2>/dev/null || true
        while tpc_pid_alive "$pid"; do sleep 0.1; done
    fi
    rm -f "$file"
}

# Start the servers that are asked for ("pg", "kafka", and "kafka-v1": a second broker, of transaction
# protocol v1) in the state folder $1, side by side, and wait for all. Kafka's jars are fetched first, on their own, so that Maven's messages are not interleaved.
tpc_services_start() {
    local dir=$1 what pids=() failed=0 pid
    shift
    mkdir -p "$dir"
    for what in "$@"; do
        [ "${what%-v1}" != kafka ] || "$TPC_SERVICES_DIR/kafka.sh" fetch >/dev/null || return 1
    done
    for what in "$@"; do
        case "$what" in
        pg) "$TPC_SERVICES_DIR/pg.sh" start "$dir/pg" & ;;
        kafka) "$TPC_SERVICES_DIR/kafka.sh" start "$dir/kafka" & ;;
        kafka-v1) TWOPC_TEST_KAFKA_TRANSACTION_VERSION=1 "$TPC_SERVICES_DIR/kafka.sh" start "$dir/kafka-v1" & ;;
        esac
        pids+=($!)
    done
    for pid in "${pids[@]}"; do
        wait "$pid" || failed=1
    done
    return "$failed"
}

# Stop the servers in state folder $1; with "destroy" as $2 also delete their files.
tpc_services_stop() {
    local dir=$1 how=${2:-stop}
    [ ! -e "$dir/kafka" ] || "$TPC_SERVICES_DIR/kafka.sh" "$how" "$dir/kafka" &
    [ ! -e "$dir/kafka-v1" ] || "$TPC_SERVICES_DIR/kafka.sh" "$how" "$dir/kafka-v1" &
    [ ! -e "$dir/pg" ] || "$TPC_SERVICES_DIR/pg.sh" "$how" "$dir/pg" &
    wait
}
