#!/usr/bin/env bash
# Run a command with a PostgreSQL server and an Apache Kafka broker for it, and exit with its status.
#
#   with-services.sh CMD [ARGS...]
#
# Servers named by TWOPC_TEST_PG_CONNINFO / TWOPC_TEST_KAFKA_BOOTSTRAP are used as they are. For each
# one not set, a throwaway server is started in a folder of its own under build/services/ (so that
# several runs can go on at once), its variable is exported, and the server is stopped when the command
# ends, fails or is interrupted. After a success the folder is deleted; after a failure it is kept for
# its logs. A run that was killed outright leaves servers behind: the next run stops them.
#
# When it starts PostgreSQL, it also exports TWOPC_TEST_PG_RESTART, a shell command that restarts that
# server the way a crash would (pg_ctl restart -m immediate); when it starts Kafka, TWOPC_TEST_KAFKA_RESTART,
# which kills the broker with kill -9 and starts it again on the same ports and storage. For outages
# that last as long as a test wants, TWOPC_TEST_PG_STOP / TWOPC_TEST_PG_RESUME and
# TWOPC_TEST_KAFKA_STOP / TWOPC_TEST_KAFKA_RESUME stop a server and start it again on its ports and
# storage. Servers started elsewhere get none of these: a test never stops servers it did not start.
#
# With TWOPC_TEST_KAFKA_V1=1 (make test sets it) and TWOPC_TEST_KAFKA_V1_BOOTSTRAP unset, a second broker
# is started beside the first, formatted with transaction protocol v1, and TWOPC_TEST_KAFKA_V1_BOOTSTRAP
# names it: tests/run-tests.sh runs the binaries that tests/matrix gives the v1 pairs against it.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ $# -ge 1 ] || tpc_die "usage: with-services.sh CMD [ARGS...]"

wanted=()
[ -n "${TWOPC_TEST_PG_CONNINFO:-}" ] || wanted+=(pg)
[ -n "${TWOPC_TEST_KAFKA_BOOTSTRAP:-}" ] || wanted+=(kafka)
[ "${TWOPC_TEST_KAFKA_V1:-}" != 1 ] || [ -n "${TWOPC_TEST_KAFKA_V1_BOOTSTRAP:-}" ] || wanted+=(kafka-v1)
if [ ${#wanted[@]} -eq 0 ]; then
    exec "$@"
fi

# Stop servers of runs whose owner is gone, and keep only the three newest of their folders.
reap_orphans() {
    local run runs kept=0
    mapfile -t runs < <(ls -1dt -- "$TPC_STATE_ROOT"/run.* 2>/dev/null)
    for run in "${runs[@]}"; do
        tpc_pidfile_alive "$run/owner.pid" && continue
        # A folder another run made a moment ago and has not yet written its owner into.
        [ -e "$run/owner.pid" ] || [ -z "$(find "$run" -maxdepth 0 -mmin -2)" ] || continue
        tpc_services_stop "$run" stop
        kept=$((kept + 1))
        [ "$kept" -le 3 ] || tpc_services_stop "$run" destroy
        [ "$kept" -le 3 ] || rm -rf "$run"
    done
}

mkdir -p "$TPC_STATE_ROOT"
reap_orphans
run=$(mktemp -d "$TPC_STATE_ROOT/run.XXXXXX")
chmod 755 "$run"
echo $$ >"$run/owner.pid"

cleanup() {
    local rc=$?
    trap - EXIT INT TERM HUP
    if [ "$rc" -eq 0 ]; then
        tpc_services_stop "$run" destroy
        rm -rf "$run"
    else
        tpc_services_stop "$run" stop
        tpc_log "servers stopped; their files and logs are kept in $run"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

tpc_services_start "$run" "${wanted[@]}" || tpc_die "test servers did not start"

for what in "${wanted[@]}"; do
    [ "$what" != kafka-v1 ] || continue
    # shellcheck disable=SC1090
    source "$run/$what/env"
done
if [ -f "$run/kafka-v1/port" ]; then
    export TWOPC_TEST_KAFKA_V1_BOOTSTRAP="127.0.0.1:$(cat "$run/kafka-v1/port")"
fi
if [ -f "$run/pg/env" ]; then
    TWOPC_TEST_PG_RESTART="$(printf '%q restart-immediate %q' "$TPC_SERVICES_DIR/pg.sh" "$run/pg")"
    TWOPC_TEST_PG_STOP="$(printf '%q stop %q' "$TPC_SERVICES_DIR/pg.sh" "$run/pg")"
    TWOPC_TEST_PG_RESUME="$(printf '%q resume %q' "$TPC_SERVICES_DIR/pg.sh" "$run/pg")"
    export TWOPC_TEST_PG_RESTART TWOPC_TEST_PG_STOP TWOPC_TEST_PG_RESUME
fi
if [ -f "$run/kafka/env" ]; then
    TWOPC_TEST_KAFKA_RESTART="$(printf '%q restart-kill %q' "$TPC_SERVICES_DIR/kafka.sh" "$run/kafka")"
    TWOPC_TEST_KAFKA_STOP="$(printf '%q stop %q' "$TPC_SERVICES_DIR/kafka.sh" "$run/kafka")"
    TWOPC_TEST_KAFKA_RESUME="$(printf '%q resume %q' "$TPC_SERVICES_DIR/kafka.sh" "$run/kafka")"
    export TWOPC_TEST_KAFKA_RESTART TWOPC_TEST_KAFKA_STOP TWOPC_TEST_KAFKA_RESUME
fi

"$@"
