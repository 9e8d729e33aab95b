#!/usr/bin/env bash
# make demo-cluster: keyed totals as an application of six units over several processes
# (examples/cluster_totals.c, docs/cluster.md), through the faults a cluster meets, with every
# total exactly once at the end.
#
#   demo_cluster.sh [RECORDS]     default 40000
#
# Servers as in demo.sh (TWOPC_PG_CONNINFO and TWOPC_KAFKA_BOOTSTRAP, or local ones started for
# the demo). Three member processes start over six units; then one is killed with kill -9, one is
# frozen with SIGSTOP past its session timeout and resumed, a fourth joins and one leaves with
# SIGTERM. Once the input has gone through, the members stop and verify_output --totals, a reader
# that uses only librdkafka and libpq, reads the output topic (read_committed) and table and
# compares them with the input: every running total once and in order, every final total right.
# Exit status: 0 when it finds them so.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/e2e_lib.sh"

RECORDS=${1:-40000}
[[ "$RECORDS" =~ ^[0-9]+$ ]] || e2e_die "usage: demo_cluster.sh [RECORDS]"
CT="$E2E_BIN/cluster_totals"
[[ -x "$CT" && -x "$E2E_VERIFY" ]] ||
    e2e_die "cluster_totals and verify_output not found in $E2E_BIN; run 'make examples'"

if [ "${E2E_DEMO_INNER:-}" != 1 ]; then
    export TWOPC_TEST_PG_CONNINFO="${TWOPC_PG_CONNINFO:-}"
    export TWOPC_TEST_KAFKA_BOOTSTRAP="${TWOPC_KAFKA_BOOTSTRAP:-}"
    [[ -n "$TWOPC_TEST_PG_CONNINFO" && -n "$TWOPC_TEST_KAFKA_BOOTSTRAP" ]] ||
        e2e_log "starting local test servers (the first time, Kafka is fetched with Maven)"
    E2E_DEMO_INNER=1 exec "$E2E_ROOT/tests/services/with-services.sh" "$0" "$RECORDS"
fi

export TWOPC_PG_CONNINFO="$TWOPC_TEST_PG_CONNINFO" TWOPC_KAFKA_BOOTSTRAP="$TWOPC_TEST_KAFKA_BOOTSTRAP"
name="twopc-cluster-$(date +%Y%m%d-%H%M%S)-$$"
work="$E2E_ROOT/build/demo/$name"
mkdir -p "$work"
UNITS=6
USERS=300
SESSION_MS=6000
# About 30 s of input through the six units together.
rate=$((RECORDS / UNITS / 30 > 50 ? RECORDS / UNITS / 30 : 50))
args=(--name "$name" --units "$UNITS" --users "$USERS" --records "$RECORDS" --rate "$rate"
    --checkpoint-dir "$work/checkpoints" --session-timeout "$SESSION_MS" --interval 500)

declare -A PID=()
member_start() {
    # A session of its own: a member frozen with SIGSTOP in a process group that another exit
    # leaves orphaned would get SIGHUP from the kernel.
    setsid "$CT" "${args[@]}" --instance "$1" >"$work/$1.log" 2>&1 &
    PID[$1]=$!
    echo "   $1 started (pid ${PID[$1]})"
}
member_units() { # the units a member's log says it runs now
    awk '$5 == "unit" && $7 == "assigned:" { on[$6] = 1 }
         $5 == "unit" && ($7 == "released" || $7 == "lost:") { delete on[$6] }
         END { for (u in on) printf "%s ", u }' "$work/$1.log" 2>/dev/null
}
show_members() {
    local id
    for id in $(printf '%s\n' "${!PID[@]}" | sort); do
        echo "   $id runs units: $(member_units "$id")"
    done
}
cleanup() {
    local id
    for id in "${!PID[@]}"; do
        kill -CONT "${PID[$id]}" 2>/dev/null
        kill -KILL "${PID[$id]}" 2>/dev/null
    done
    wait 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "== 1. the topics ($UNITS partitions each), the table, and $RECORDS purchases of $USERS users in $name-in"
"$CT" --fill "${args[@]}" || e2e_die "could not write the input"

echo "== 2. three members join the group \"$name\""
member_start p1
member_start p2
member_start p3
sleep 8
show_members

echo "== 3. kill -9 p1: its units move once its ${SESSION_MS} ms session has run out"
kill -KILL "${PID[p1]}"
wait "${PID[p1]}" 2>/dev/null
unset 'PID[p1]'
sleep $((SESSION_MS / 1000 + 4))
show_members

echo "== 4. SIGSTOP p2 for $((2 * SESSION_MS / 1000)) s, past its session; then SIGCONT"
kill -STOP "${PID[p2]}"
sleep $((2 * SESSION_MS / 1000))
show_members
kill -CONT "${PID[p2]}"
sleep 5
show_members

echo "== 5. a fourth member, p4, joins"
member_start p4
sleep 8
show_members

echo "== 6. p3 leaves (SIGTERM): its units stop with savepoints and move"
kill -TERM "${PID[p3]}"
wait "${PID[p3]}" || e2e_die "p3 did not stop cleanly (exit status $?; $work/p3.log)"
unset 'PID[p3]'
sleep $((SESSION_MS / 1000 + 3))
show_members

echo "== 7. wait until the outputs hold every total (at most 5 minutes)"
deadline=$(($(e2e_now_ms) + 300000))
until "$E2E_VERIFY" --totals --name "$name" --records "$RECORDS" --keys "$USERS" >/dev/null 2>&1; do
    [ "$(e2e_now_ms)" -lt "$deadline" ] || break
    sleep 3
done

echo "== 8. the members stop (SIGTERM)"
for id in "${!PID[@]}"; do
    kill -TERM "${PID[$id]}"
    wait "${PID[$id]}" || e2e_die "$id did not stop cleanly (exit status $?; $work/$id.log)"
    unset "PID[$id]"
done
echo "   releases with a savepoint: $(grep -h 'released after savepoint' "$work"/p*.log | wc -l)," \
    "units lost (canceled): $(grep -h 'lost: its job was canceled' "$work"/p*.log | wc -l)"

echo "== 9. read both outputs back (read_committed consumer, SQL) and compare with the input"
"$E2E_VERIFY" --totals --name "$name" --records "$RECORDS" --keys "$USERS"
rc=$?
echo "(the members' logs and the units' checkpoints stay in ${work#"$E2E_ROOT"/})"
exit "$rc"
