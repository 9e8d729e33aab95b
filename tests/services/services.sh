#!/usr/bin/env bash
# Long-running test servers for trying twopc or debugging a test by hand.
#
#   services.sh up      start PostgreSQL and Apache Kafka (if not already up) and print the export
#                       lines of the tests (TWOPC_TEST_*) and of the examples (TWOPC_PG_CONNINFO,
#                       TWOPC_KAFKA_BOOTSTRAP):
#                       eval "$(tests/services/services.sh up)"
#   services.sh env     print the export lines again
#   services.sh down    stop both and delete their files
#
# State and logs: build/services/session/. With both variables exported, with-services.sh (and so
# `make test`) uses these servers instead of starting its own.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SESSION="$TPC_STATE_ROOT/session"

session_running() {
    [ -f "$SESSION/pg/env" ] && [ -f "$SESSION/kafka/env" ] &&
        [ -f "$SESSION/pg/data/postmaster.pid" ] &&
        tpc_pid_alive "$(head -n 1 "$SESSION/pg/data/postmaster.pid")" &&
        tpc_pidfile_alive "$SESSION/kafka/pid"
}

print_env() {
    cat "$SESSION/pg/env" "$SESSION/kafka/env"
    # The same servers under the names the examples and the docs read.
    sed -e 's/TWOPC_TEST_PG_CONNINFO=/TWOPC_PG_CONNINFO=/' "$SESSION/pg/env"
    sed -e 's/TWOPC_TEST_KAFKA_BOOTSTRAP=/TWOPC_KAFKA_BOOTSTRAP=/' "$SESSION/kafka/env"
}

case "${1:-}" in
up)
    if session_running; then
        tpc_log "already running"
    else
        tpc_services_stop "$SESSION" destroy
        rm -rf "$SESSION"
        mkdir -p "$SESSION"
        if ! tpc_services_start "$SESSION" pg kafka; then
            tpc_services_stop "$SESSION" stop
            tpc_die "test servers did not start (logs in $SESSION)"
        fi
    fi
    print_env
    tpc_log "stop them with 'make services-down'"
    ;;
env)
    session_running || tpc_die "test servers are not running; start them with 'make services-up'"
    print_env
    ;;
down)
    tpc_services_stop "$SESSION" destroy
    rm -rf "$SESSION"
    ;;
*) tpc_die "usage: services.sh up|env|down" ;;
esac
