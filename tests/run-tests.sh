#!/usr/bin/env bash
# Run Check test binaries side by side, show each one's output whole, and close with one line
#
#   N passed, N failed
#
# that adds up the "Checks: N, Failures: F, Errors: E" summaries of all runs. A run that ends without
# such a summary (a crash, a timeout) counts as one failed check, and so does one that exits non-zero
# although its summary shows no failure (a sanitizer report at exit, say). Every run goes on after a
# failure, so that the closing line is complete. Exits non-zero if anything failed.
#
#   tests/run-tests.sh LABEL BIN... [-- BIN...]
#
# LABEL names the run in the output; "--" only separates groups (unit tests, then integration tests).
# Each binary runs as tests/matrix says: on the shared servers or on servers of its own, and once per
# (broker protocol, librdkafka) pair it takes. A pair that cannot be had here is not run, and the
# output says so: a current librdkafka comes from TWOPC_TEST_RDKAFKA_CURRENT_LIB (a folder holding
# librdkafka.so.1), a broker of transaction protocol v1 from TWOPC_TEST_KAFKA_V1_BOOTSTRAP.
#
# TWOPC_TEST_JOBS runs that many at once (default 1, one after the other in the order
# given). Outputs are shown in that order too, each once its run and all runs before it ended.
# TWOPC_TEST_TIMEOUT bounds each run's wall time in seconds (default 1800). The runs' wall times
# go to build/test-times (the next run starts the longest first) and the 15 longest are shown.
set -uo pipefail

[ $# -ge 1 ] || {
    echo "usage: run-tests.sh LABEL BIN... [-- BIN...]" >&2
    exit 2
}
label=$1
shift

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
matrix=$here/matrix
times_file=${TWOPC_TEST_TIMES:-build/test-times}
jobs=${TWOPC_TEST_JOBS:-1}
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || {
    echo "run-tests.sh: TWOPC_TEST_JOBS is \"$jobs\"; it takes a number of runs at once, 1 or more" >&2
    exit 2
}

# Which servers this run owns (with-services.sh started them and can restart them).
pg_owned=${TWOPC_TEST_PG_RESTART:+1}
kafka_owned=${TWOPC_TEST_KAFKA_RESTART:+1}

# The matrix: servers and pairs by binary name.
declare -A m_servers m_pairs
while read -r name servers pairs _; do
    [ -n "$name" ] && [ "${name:0:1}" != "#" ] || continue
    m_servers[$name]=$servers
    m_pairs[$name]=$pairs
done <"$matrix"

# Expand the binaries into runs: run_bin[i], run_pair[i] ("v2" / "v2 current" / "v1" / "v1 current"),
# run_servers[i].
run_bin=()
run_pair=()
run_servers=()
skipped=()
add_run() {
    local bin=$1 pair=$2 servers=$3 why=
    case "$pair" in
    *current*) [ -n "${TWOPC_TEST_RDKAFKA_CURRENT_LIB:-}" ] ||
        why="no current librdkafka (TWOPC_TEST_RDKAFKA_CURRENT_LIB)" ;;
    esac
    # A broker of protocol v1: the run's own, or the shared one with-services.sh started beside
    # the v2 broker.
    if [ -z "$why" ] && [[ "$pair" == v1* ]] && [ -z "${TWOPC_TEST_KAFKA_V1_BOOTSTRAP:-}" ] &&
        [ "$servers" != own-kafka ] && [ "$servers" != own ]; then
        why="no broker of transaction protocol v1 (TWOPC_TEST_KAFKA_V1_BOOTSTRAP)"
    fi
    if [ -n "$why" ]; then
        skipped+=("$(basename "$bin") ($pair): $why")
        return
    fi
    run_bin+=("$bin")
    run_pair+=("$pair")
    run_servers+=("$servers")
}
for arg in "$@"; do
    [ "$arg" != "--" ] || continue
    name=$(basename "$arg")
    servers=${m_servers[$name]:-shared}
    # Servers started elsewhere are never stopped or restarted: the binary runs on them and skips
    # those parts, saying so.
    case "$servers" in
    own-pg) [ -n "$pg_owned" ] || servers=shared ;;
    own-kafka) [ -n "$kafka_owned" ] || servers=shared ;;
    own) [ -n "$pg_owned" ] && [ -n "$kafka_owned" ] || servers=shared ;;
    esac
    case "${m_pairs[$name]:-one}" in
    one) add_run "$arg" v2 "$servers" ;;
    clients)
        add_run "$arg" v2 "$servers"
        add_run "$arg" "v2 current" "$servers"
        ;;
    all)
        add_run "$arg" v2 "$servers"
        add_run "$arg" "v2 current" "$servers"
        add_run "$arg" v1 "$servers"
        add_run "$arg" "v1 current" "$servers"
        ;;
    *)
        echo "run-tests.sh: tests/matrix gives $name the pairs \"${m_pairs[$name]}\"; it takes one, clients or all" >&2
        exit 2
        ;;
    esac
done
total=${#run_bin[@]}

tmp=$(mktemp -d)
trap 'kill -- $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

run_title() {
    local i=$1 title=${run_bin[$1]}
    [ "${run_pair[$i]}" = v2 ] || title+=" (${run_pair[$i]})"
    [ "${run_servers[$i]}" = shared ] || title+=" [${run_servers[$i]} servers]"
    echo "$title"
}

# One run, in a subshell of its own: its environment as its pair and servers say, its output and
# status into $tmp/<i>.
run_one() {
    local i=$1 bin=${run_bin[$1]} pair=${run_pair[$1]} servers=${run_servers[$1]} start end rc
    local cmd=("$bin")
    start=$(date +%s%N)
    (
        # No run may stop or restart the servers others use; a run on servers of its own gets the
        # commands for those from its own with-services.sh.
        unset TWOPC_TEST_PG_RESTART TWOPC_TEST_PG_STOP TWOPC_TEST_PG_RESUME \
            TWOPC_TEST_KAFKA_RESTART TWOPC_TEST_KAFKA_STOP TWOPC_TEST_KAFKA_RESUME
        case "$pair" in
        v1*)
            export TWOPC_TEST_KAFKA_TRANSACTION_VERSION=1
            [ -z "${TWOPC_TEST_KAFKA_V1_BOOTSTRAP:-}" ] ||
                export TWOPC_TEST_KAFKA_BOOTSTRAP=$TWOPC_TEST_KAFKA_V1_BOOTSTRAP
            ;;
        *) unset TWOPC_TEST_KAFKA_TRANSACTION_VERSION ;;
        esac
        case "$pair" in
        *current*) export LD_LIBRARY_PATH="$TWOPC_TEST_RDKAFKA_CURRENT_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
        esac
        case "$servers" in
        own-pg) unset TWOPC_TEST_PG_CONNINFO ;;
        own-kafka) unset TWOPC_TEST_KAFKA_BOOTSTRAP ;;
        own) unset TWOPC_TEST_PG_CONNINFO TWOPC_TEST_KAFKA_BOOTSTRAP ;;
        esac
        [ "$servers" = shared ] || cmd=("$here/services/with-services.sh" "$bin")
        exec timeout -k 10 "${TWOPC_TEST_TIMEOUT:-1800}" "${cmd[@]}"
    ) >"$tmp/$i.out" 2>&1 </dev/null
    rc=$?
    end=$(date +%s%N)
    echo "$rc $(((end - start) / 1000000))" >"$tmp/$i.done"
}

# Start first the binaries whose runs take longest together (their runs never overlap, so they
# form a chain that bounds the whole run), by the wall times of the last run (a run not measured
# yet counts 100 s); within a binary, the longest run first. With one job at a time, exactly in the
# order given.
declare -A last_ms chain_ms
if [ "$jobs" -gt 1 ] && [ -r "$times_file" ]; then
    while read -r ms key; do
        last_ms[$key]=$ms
    done <"$times_file"
fi
run_key() { echo "$(basename "${run_bin[$1]}")${run_pair[$1]:+/${run_pair[$1]// /-}}"; }
order=()
if [ "$jobs" -gt 1 ]; then
    for ((i = 0; i < total; i++)); do
        ms=${last_ms[$(run_key "$i")]:-100000}
        chain_ms[${run_bin[$i]}]=$((${chain_ms[${run_bin[$i]}]:-0} + ms))
    done
    mapfile -t order < <(for ((i = 0; i < total; i++)); do
        echo "${chain_ms[${run_bin[$i]}]} ${last_ms[$(run_key "$i")]:-100000} $i"
    done | sort -s -k1,1nr -k2,2nr | cut -d' ' -f3)
else
    for ((i = 0; i < total; i++)); do order+=("$i"); done
fi

passed=0
failed=0
failures=()
shown=0
declare -A ms_of

# Show the outputs of every ended run not yet shown, in the order given, up to the first still
# running.
show_ended() {
    local i rc ms checks fails errors summaries line c f e title
    while [ "$shown" -lt "$total" ] && [ -f "$tmp/$shown.done" ]; do
        i=$shown
        read -r rc ms <"$tmp/$i.done"
        title=$(run_title "$i")
        ms_of[$i]=$ms
        echo "--- $title"
        cat "$tmp/$i.out"
        checks=0 fails=0 errors=0 summaries=0
        while IFS= read -r line; do
            if [[ "$line" =~ Checks:\ ([0-9]+),\ Failures:\ ([0-9]+),\ Errors:\ ([0-9]+) ]]; then
                c=${BASH_REMATCH[1]} f=${BASH_REMATCH[2]} e=${BASH_REMATCH[3]}
                checks=$((checks + c)) fails=$((fails + f)) errors=$((errors + e))
                summaries=$((summaries + 1))
            fi
        done <"$tmp/$i.out"
        if [ "$summaries" -eq 0 ]; then
            if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
                echo "--- $title: timed out without a Check summary"
            else
                echo "--- $title: exited with status $rc without a Check summary"
            fi
            failed=$((failed + 1))
            failures+=("$title")
        else
            passed=$((passed + checks - fails - errors))
            failed=$((failed + fails + errors))
            if [ $((fails + errors)) -gt 0 ]; then
                failures+=("$title")
            elif [ "$rc" -ne 0 ]; then
                echo "--- $title: all checks passed but it exited with status $rc"
                failed=$((failed + 1))
                failures+=("$title")
            fi
        fi
        echo "--- $title: $(printf '%d.%01d' $((ms / 1000)) $((ms % 1000 / 100))) s"
        shown=$((shown + 1))
    done
}

# Two runs of one binary never overlap (its pairs would load one broker with the same work at
# once), and at most two runs on servers of their own start brokers at a time.
declare -A busy_bin=() pid_run=()
own_running=0
can_start() {
    local i=$1
    [ -z "${busy_bin[${run_bin[$i]}]:-}" ] || return 1
    [ "${run_servers[$i]}" = shared ] || [ "$own_running" -lt 2 ] || return 1
}
reap_one() {
    local pid i
    wait -n -p pid
    i=${pid_run[$pid]}
    unset "pid_run[$pid]" "busy_bin[${run_bin[$i]}]"
    [ "${run_servers[$i]}" = shared ] || own_running=$((own_running - 1))
    show_ended
}
started_all=$(date +%s%N)
pending=("${order[@]}")
while [ "${#pending[@]}" -gt 0 ]; do
    next=-1
    if [ "${#pid_run[@]}" -lt "$jobs" ]; then
        for k in "${!pending[@]}"; do
            if can_start "${pending[$k]}"; then
                next=$k
                break
            fi
        done
    fi
    if [ "$next" -lt 0 ]; then
        reap_one
        continue
    fi
    i=${pending[$next]}
    unset "pending[$next]"
    pending=("${pending[@]}")
    run_one "$i" &
    pid_run[$!]=$i
    busy_bin[${run_bin[$i]}]=1
    [ "${run_servers[$i]}" = shared ] || own_running=$((own_running + 1))
done
while [ "${#pid_run[@]}" -gt 0 ]; do
    reap_one
done
wait
show_ended
wall_ms=$((($(date +%s%N) - started_all) / 1000000))

# The wall times, for the next run's order and for the reader: the 15 longest.
mkdir -p "$(dirname "$times_file")"
{
    for ((i = 0; i < total; i++)); do
        echo "${ms_of[$i]:-0} $(run_key "$i")"
    done
    # Keep what this run did not measure (another label's binaries).
    if [ -r "$times_file" ]; then cat "$times_file"; fi
} | awk '!seen[$2]++' >"$times_file.new" && mv "$times_file.new" "$times_file"

echo "=== $label: $total runs of $(printf '%s\n' "${run_bin[@]}" | sort -u | wc -l) test binaries," \
    "$jobs at once, in $((wall_ms / 60000)) min $((wall_ms % 60000 / 1000)) s"
echo "=== the 15 longest runs:"
for ((i = 0; i < total; i++)); do
    echo "${ms_of[$i]:-0} $(run_title "$i")"
done | sort -k1,1nr | head -n 15 | while read -r ms title; do
    printf '===   %5d.%01d s  %s\n' $((ms / 1000)) $((ms % 1000 / 100)) "$title"
done
for s in "${skipped[@]}"; do
    echo "=== NOT run: $s"
done
for t in "${failures[@]}"; do
    echo "=== failed: $t"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
