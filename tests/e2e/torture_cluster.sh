#!/usr/bin/env bash
# make torture-cluster RUNS=n: n runs of examples/cluster_totals as members of one application
# (six units, three members to start with), under random faults until its input has gone through:
# kill -9 of a member (started again, with its static identity or a new one), SIGSTOP of a member
# for up to twice its session timeout then SIGCONT, SIGTERM of a member, a member added. After each
# run the members stop and verify_output --totals reads the outputs (read_committed consumer, SQL):
# every running total once and in order, every final total right. Every other run takes
# incremental checkpoints of the keyed state (state.incremental, chains of 2 to 5), so that kills,
# freezes and hand-offs meet chains of increments and their compactions.
#
#   torture_cluster.sh [RUNS]     default 5; TORTURE_CLUSTER_RECORDS (default 12000) per run;
#                                 TORTURE_CLUSTER_PROTOCOL=consumer: KIP-848's group protocol
#                                 (librdkafka 2.12 or later: TWOPC_LIBRDKAFKA=current)
#
# Servers: with-services.sh's (make torture-cluster), or TWOPC_TEST_PG_CONNINFO and
# TWOPC_TEST_KAFKA_BOOTSTRAP. Prints one line per run and a summary; exit status 0 when every run
# was exact.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/e2e_lib.sh"

RUNS=${1:-5}
RECORDS=${TORTURE_CLUSTER_RECORDS:-12000}
[[ "$RUNS" =~ ^[0-9]+$ && "$RECORDS" =~ ^[0-9]+$ ]] || e2e_die "usage: torture_cluster.sh [RUNS]"
CT="$E2E_BIN/cluster_totals"
[[ -x "$CT" && -x "$E2E_VERIFY" ]] ||
    e2e_die "cluster_totals and verify_output not found in $E2E_BIN; run 'make examples'"
export TWOPC_PG_CONNINFO="${TWOPC_TEST_PG_CONNINFO:?}" TWOPC_KAFKA_BOOTSTRAP="${TWOPC_TEST_KAFKA_BOOTSTRAP:?}"

UNITS=6
USERS=300
SESSION_MS=6000
declare -A PID=()
next_member=0

member_start() { # [instance]
    local id=${1:-m$((next_member++))}
    # A session of its own: a member frozen with SIGSTOP in a process group that another exit
    # leaves orphaned would get SIGHUP from the kernel.
    setsid "$CT" "${args[@]}" --instance "$id" >>"$work/$id.log" 2>&1 &
    PID[$id]=$!
}
some_member() {
    local ids=("${!PID[@]}")
    echo "${ids[RANDOM % ${#ids[@]}]}"
}
stop_all() {
    local id bad=0
    for id in "${!PID[@]}"; do
        kill -CONT "${PID[$id]}" 2>/dev/null
        kill -TERM "${PID[$id]}" 2>/dev/null
    done
    for id in "${!PID[@]}"; do
        wait "${PID[$id]}" || {
            echo "   member $id ended with status $? ($work/$id.log)" >&2
            bad=1
        }
        unset "PID[$id]"
    done
    return "$bad"
}
trap 'for id in "${!PID[@]}"; do kill -KILL "${PID[$id]}" 2>/dev/null; done' EXIT

runs_bad=0 kills=0 freezes=0 leaves=0 joins=0 dups=0 missing=0 wrong=0 releases=0 losts=0
incremental_runs=0
for run in $(seq 1 "$RUNS"); do
    if ((run % 2 == 0)); then
        export TWOPC_STATE_INCREMENTAL=true TWOPC_STATE_INCREMENTAL_MAX_CHAIN=$((2 + RANDOM % 4))
        incremental_runs=$((incremental_runs + 1))
    else
        unset TWOPC_STATE_INCREMENTAL TWOPC_STATE_INCREMENTAL_MAX_CHAIN
    fi
    name="twopc-tc-$(date +%Y%m%d-%H%M%S)-$$-$run"
    work="$E2E_ROOT/build/torture-cluster/$name"
    mkdir -p "$work"
    rate=$((RECORDS / UNITS / 20 > 20 ? RECORDS / UNITS / 20 : 20))
    args=(--name "$name" --units "$UNITS" --users "$USERS" --records "$RECORDS" --rate "$rate"
        --checkpoint-dir "$work/checkpoints" --session-timeout "$SESSION_MS" --interval 300
        --protocol "${TORTURE_CLUSTER_PROTOCOL:-classic}")
    "$CT" --fill "${args[@]}" >"$work/fill.log" 2>&1 || e2e_die "could not write the input ($work)"
    next_member=0
    members_bad=0
    member_start
    member_start
    member_start
    started=$(e2e_now_ms)
    faults=""
    # Faults for about 25 s, while the input goes through (about 20 s of it).
    while [ $(($(e2e_now_ms) - started)) -lt 25000 ]; do
        sleep "$((1 + RANDOM % 3))"
        victim=$(some_member)
        case $((RANDOM % 4)) in
        0) # kill -9, then back with its static identity or a new one
            kill -KILL "${PID[$victim]}" 2>/dev/null
            wait "${PID[$victim]}" 2>/dev/null
            unset "PID[$victim]"
            kills=$((kills + 1)) faults+="k"
            sleep "$((RANDOM % 4))"
            if ((RANDOM % 2)); then member_start "$victim"; else member_start; fi
            ;;
        1) # frozen past (or not quite) its session timeout
            kill -STOP "${PID[$victim]}"
            sleep "$((2 + RANDOM % (2 * SESSION_MS / 1000)))"
            kill -CONT "${PID[$victim]}"
            freezes=$((freezes + 1)) faults+="s"
            ;;
        2) # leaves, if another stays
            if [ "${#PID[@]}" -gt 1 ]; then
                kill -TERM "${PID[$victim]}"
                wait "${PID[$victim]}" || {
                    e2e_log "run $run: $victim left with status $?"
                    members_bad=1
                }
                unset "PID[$victim]"
                leaves=$((leaves + 1)) faults+="l"
            fi
            ;;
        3) # one more, up to four
            if [ "${#PID[@]}" -lt 4 ]; then
                member_start
                joins=$((joins + 1)) faults+="j"
            fi
            ;;
        esac
    done
    [ "${#PID[@]}" -gt 0 ] || member_start
    deadline=$(($(e2e_now_ms) + 240000))
    until "$E2E_VERIFY" --totals --name "$name" --records "$RECORDS" --keys "$USERS" >/dev/null 2>&1; do
        [ "$(e2e_now_ms)" -lt "$deadline" ] || break
        sleep 3
    done
    stop_all || members_bad=1
    "$E2E_VERIFY" --totals --name "$name" --records "$RECORDS" --keys "$USERS" >"$work/verify.txt" 2>&1
    rc=$?
    read -r d m w < <(awk '/^duplicates/ { d = $(NF - 1) + $NF } /^missing/ { m = $(NF - 1) + $NF }
        /^wrong key or value/ { w = $(NF - 1) + $NF } END { print d + 0, m + 0, w + 0 }' "$work/verify.txt")
    r=$(cat "$work"/*.log | grep -c 'released after savepoint')
    l=$(cat "$work"/*.log | grep -c 'lost: its job was canceled')
    dups=$((dups + d)) missing=$((missing + m)) wrong=$((wrong + w)) releases=$((releases + r)) losts=$((losts + l))
    # A member that crashed (an assertion, a signal other than ours, a sanitizer's report) fails
    # the run however exact its outputs are.
    crash='assert\|Assertion\|double free\|corrupted\|AddressSanitizer\|runtime error\|SUMMARY:'
    crashed=$(grep -l "$crash" "$work"/*.log 2>/dev/null)
    if [ -n "$crashed" ] || [ "$members_bad" -ne 0 ]; then
        runs_bad=$((runs_bad + 1))
        echo "run $run: a member crashed or did not stop cleanly (kept in $work): $crashed"
        grep -h "$crash" "$work"/*.log | head -n 5
    elif [ "$rc" -eq 0 ]; then
        echo "run $run: exact (faults $faults; $r releases with a savepoint, $l units lost)"
        rm -rf "$work"
    else
        runs_bad=$((runs_bad + 1))
        echo "run $run: NOT EXACT: $d duplicated, $m missing, $w wrong (faults $faults; kept in $work)"
        cat "$work/verify.txt"
    fi
done
echo "torture-cluster: $RUNS runs, $kills kill -9, $freezes SIGSTOP, $leaves left, $joins joined;" \
    "$releases releases with a savepoint, $losts units lost; $dups duplicated, $missing missing," \
    "$wrong wrong totals; $incremental_runs runs with incremental keyed checkpoints;" \
    "$runs_bad runs not exact"
[ "$runs_bad" -eq 0 ]
