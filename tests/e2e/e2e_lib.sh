# shellcheck shell=bash disable=SC2034  # E2E_STATUS is set here and read by the scripts
# Shared by demo.sh and torture.sh (sourced, not run): where the example programs are, and how to run
# exactly_once_pipeline in the background, kill it with kill -9, and wait for it.

E2E_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# The Makefile says which build to use (build/<variant>/examples); by hand, the default build.
E2E_BIN="${TWOPC_EXAMPLES_DIR:-$E2E_ROOT/build/default/examples}"
E2E_PIPELINE="$E2E_BIN/exactly_once_pipeline"
E2E_VERIFY="$E2E_BIN/verify_output"
E2E_PID=
E2E_STATUS= # exit status of the last pipeline run that ended by itself

e2e_log() {
    printf '%s: %s\n' "$(basename "$0")" "$*" >&2
}

e2e_die() {
    e2e_log "$*"
    exit 1
}

e2e_now_ms() {
    date +%s%3N
}

e2e_check_programs() {
    [[ -x "$E2E_PIPELINE" && -x "$E2E_VERIFY" ]] ||
        e2e_die "exactly_once_pipeline and verify_output not found in $E2E_BIN; run 'make examples'"
}

# Start the pipeline in the background with the arguments given; its pid goes to E2E_PID.
e2e_pipeline_start() {
    "$E2E_PIPELINE" "$@" &
    E2E_PID=$!
}

# Wait up to $1 milliseconds for the pipeline to end. Returns 0 and sets E2E_STATUS when it ended,
# 1 when it is still running.
e2e_pipeline_wait_ms() {
    local until_ms=$(($(e2e_now_ms) + $1))
    while kill -0 "$E2E_PID" 2>/dev/null; do
        [ "$(e2e_now_ms)" -lt "$until_ms" ] || return 1
        sleep 0.05
    done
    E2E_STATUS=0
    wait "$E2E_PID" || E2E_STATUS=$?
    E2E_PID=
    return 0
}

# kill -9 the pipeline and reap it.
e2e_pipeline_kill() {
    [ -n "$E2E_PID" ] || return 0
    kill -KILL "$E2E_PID" 2>/dev/null || true
    wait "$E2E_PID" 2>/dev/null || true
    E2E_PID=
}
