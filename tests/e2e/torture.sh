#!/usr/bin/env bash
# Crash torture of exactly_once_pipeline: the evidence for "exactly once".
#
#   torture.sh [RUNS]          (make torture RUNS=n; default 5 runs)
#
# Each run writes a fresh input topic, then runs the pipeline into a fresh output topic and table and
# kills it with kill -9 at random moments, one to four times, restarting it after each kill from its
# checkpoint directory, until a run ends by itself with the input exhausted. In some runs the Kafka
# broker is killed and restarted, or PostgreSQL is restarted with `pg_ctl restart -m immediate`, while
# the pipeline runs. Then verify_output reads both outputs as independent readers (read_committed
# consumer, SQL) and compares them with the input: every record once, nothing else, per-key order in
# Kafka. The first violation stops the torture with its seed and keeps its logs.
#
# Operator faults (on unless TORTURE_FAULTS=0), chosen at random after each kill: a new parallelism
# for the source and for each sink (1 to 3 each); the newest checkpoint file damaged (truncated or one
# byte changed); every checkpoint file removed. A damaged or removed checkpoint that the sinks may
# have committed must be refused at once (exit status 4, a "refused: TPC_ERR_CORRUPT" or
# "TPC_ERR_NOT_FOUND" line); the torture then does what the message says, copies the checkpoints back
# from its backup, and goes on. If the restore may go on (no sink was told of the damaged checkpoint,
# or none had completed), the run simply continues. And after some runs ended and verified, a start
# over: the pipeline runs again from scratch with --restore-mode fresh on the same outputs, killed
# too (restarted with fresh again until its first checkpoint completes, then resuming), and the
# verifier then wants every record exactly twice. Either way the verifier accepts nothing but every
# record exactly once (twice after a start over): a refusal never hides a duplicate or a gap.
#
# Keyed runs: with TORTURE_EXAMPLE=keyed every run, with TORTURE_EXAMPLE=mixed (the default) one
# run in three (seeds divisible by 3), and with TORTURE_EXAMPLE=records none, runs keyed_totals
# instead: a running total per user in keyed state, upserted into PostgreSQL and written to Kafka.
# Every kill of a keyed run is followed by a rescale: a new parallelism for the keyed vertex (1 to
# 4, never the one before) and for the source and each sink (1 to 3); damaged and removed
# checkpoints and starts over come on top as above. Keyed runs take incremental checkpoints
# (state.incremental, through TWOPC_STATE_INCREMENTAL) with chains of 2 to 5 checkpoints (from the
# seed), so that kills land while increments and compactions are written and every restore reads a
# chain, split or merged by the rescale. `verify_output --totals` then wants, per user,
# every running total in the topic exactly once and in input order (the prefix sums of the user's
# amounts: no gap, no repeat, no wrong total), and each user's final total in the table.
#
# Growth runs: one run in four that is not keyed (seeds with remainder 1 mod 4) runs the pipeline
# unbounded, with partition discovery every 300 ms, and gives its input topic one or two more
# partitions at a random moment while the pipeline runs (before one of its kills, or after the last),
# writing the records of the new partitions then (exactly_once_pipeline --fill --grow-to F --grow: each
# key stays in one partition, so per-key order still holds). The run ends with SIGINT (a savepoint)
# once verify_output finds every record, of old and new partitions, exactly once; then it is verified
# again.
#
# PostgreSQL layouts: in runs that are not keyed, one run in five (seeds with remainder 2 mod 5)
# writes the table as a changelog (exactly_once_pipeline --pg-layout changelog: one row per key,
# each record an upsert of it or, one in seven, a delete; pg.mode=changelog), and one in five
# (remainder 4) writes each record into two tables of one sink (--pg-layout two-tables). The
# verifier then wants the changelog applied once (each key's last record, or no row after a
# delete), or both tables holding exactly the same rows besides every record exactly once.
#
# Every run prints its seed and its time. The seed fixes the run's plan (parallelism, checkpoint
# interval, pace, number of kills, the delay before each kill, which server is restarted and when);
# the moment a delay lands in the pipeline's work still depends on timing, so a seed reproduces the
# plan, not the exact interleaving. TORTURE_SEED=s makes the first run use seed s (then s+1, ...).
#
# Environment: TWOPC_TEST_PG_CONNINFO and TWOPC_TEST_KAFKA_BOOTSTRAP name the servers (with-services.sh
# sets them); TWOPC_TEST_PG_RESTART and TWOPC_TEST_KAFKA_RESTART, when set, are the commands that
# restart them (set by with-services.sh for the servers it started); TORTURE_RECORDS (default 20000)
# is the number of input records per run.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/e2e_lib.sh"

RUNS=${1:-5}
RECORDS=${TORTURE_RECORDS:-20000}
FAULTS=${TORTURE_FAULTS:-1}
EXAMPLE=${TORTURE_EXAMPLE:-mixed}
[[ "$EXAMPLE" =~ ^(mixed|keyed|records)$ ]] || e2e_die "TORTURE_EXAMPLE is mixed, keyed or records"
[[ "$RUNS" =~ ^[0-9]+$ && "$RUNS" -ge 1 ]] || e2e_die "usage: torture.sh [RUNS]"
[[ -n "${TWOPC_TEST_PG_CONNINFO:-}" && -n "${TWOPC_TEST_KAFKA_BOOTSTRAP:-}" ]] ||
    e2e_die "TWOPC_TEST_PG_CONNINFO and TWOPC_TEST_KAFKA_BOOTSTRAP are not set; run 'make torture'"
e2e_check_programs
E2E_RECORDS_PIPELINE=$E2E_PIPELINE
E2E_KEYED_PIPELINE="$E2E_BIN/keyed_totals"
[ "$EXAMPLE" = records ] || [ -x "$E2E_KEYED_PIPELINE" ] ||
    e2e_die "keyed_totals not found in $E2E_BIN; run 'make examples'"
export TWOPC_PG_CONNINFO="$TWOPC_TEST_PG_CONNINFO" TWOPC_KAFKA_BOOTSTRAP="$TWOPC_TEST_KAFKA_BOOTSTRAP"

WORK="$E2E_ROOT/build/torture/$$"
mkdir -p "$WORK"
trap 'e2e_pipeline_kill' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

FIRST_SEED=${TORTURE_SEED:-$(((RANDOM << 15 | RANDOM) % 1000000))}

# Restart the server named in $1 ("pg" or "kafka"); returns 1 when there is no command for it.
restart_server() {
    local cmd
    case "$1" in
    pg) cmd=${TWOPC_TEST_PG_RESTART:-} ;;
    kafka) cmd=${TWOPC_TEST_KAFKA_RESTART:-} ;;
    esac
    [ -n "$cmd" ] || return 1
    eval "$cmd" >>"$dir/servers.log" 2>&1 || fail "could not restart $1 (see $dir/servers.log)"
}

# The one known fault of the broker itself (docs/examples.md, seed 348048): after a kill -9 its
# transaction coordinator may skip the commit markers of a transaction it had decided to commit,
# leaving Kafka partitions stuck behind it. True only when the broker logged exactly that and the
# verifier found nothing else: PostgreSQL exact, no Kafka duplicate or foreign record.
broker_skipped_markers() {
    local words=() kdir
    eval "words=(${TWOPC_TEST_KAFKA_RESTART:-})"
    [ "${#words[@]}" -gt 0 ] || return 1
    kdir=${words[-1]}
    # The broker log is shared by all runs: only a line naming this run's output topic counts.
    skipped=$(grep -sF 'likely deleted already and hence can be skipped' "$kdir/logs/server.log" |
        grep -F "$name-out") || return 1
    grep -q 'Kafka partitions stuck behind a transaction that never ended' "$dir/verify.txt" ||
        return 1
    awk '$1 == "duplicates" && ($2 != 0 || $3 != 0) { bad = 1 }
         $1 == "missing" && $2 != 0 { bad = 1 }
         /^not from the input/ && ($(NF - 1) != 0 || $NF != 0) { bad = 1 }
         /^wrong key or value/ && ($(NF - 1) != 0 || $NF != 0) { bad = 1 }
         END { exit bad }' "$dir/verify.txt"
}

fail() {
    e2e_log "VIOLATION in run $run, seed $seed: $*"
    [ ! -f "$dir/verify.txt" ] || cat "$dir/verify.txt" >&2
    e2e_log "last lines of the pipeline's log ($dir/pipeline.log):"
    tail -n 20 "$dir/pipeline.log" >&2
    e2e_log "reproduce the plan with: make torture RUNS=1 TORTURE_SEED=$seed"
    exit 1
}

# Growth runs: more partitions for the input topic while the pipeline runs, and their records.
grow_input() {
    "$E2E_PIPELINE" --fill "${args[@]}" --grow-to "$grow_to" --grow >>"$dir/pipeline.log" 2>&1 ||
        fail "could not add partitions to the input topic"
    grown=1 grow_runs=$((grow_runs + 1)) grown_partitions=$((grown_partitions + grow_to - par))
    faults="$faults g$grow_to"
    echo "---- operator: input topic grown to $grow_to partitions" >>"$dir/pipeline.log"
}

# Growth runs read for ever: once the verifier finds every record, stop the pipeline with SIGINT (a
# savepoint). Returns 0 when it stopped, 1 when it ended by itself before (then it is started again).
stop_when_verified() {
    local until_ms=$(($(e2e_now_ms) + 180000))
    while [ "$(e2e_now_ms)" -lt "$until_ms" ]; do
        if e2e_pipeline_wait_ms 1000; then
            ended && return 0
            return 1
        fi
        if "$E2E_VERIFY" "${verify_args[@]}" >/dev/null 2>&1; then
            kill -INT "$E2E_PID"
            e2e_pipeline_wait_ms 60000 || fail "the unbounded pipeline did not stop after SIGINT"
            ended && return 0
            return 1
        fi
    done
    fail "the unbounded pipeline did not deliver every record within 180 s"
}

# A pipeline run ended by itself: 0 = input exhausted, everything committed. Returns 0 when done.
ended() {
    case "$E2E_STATUS" in
    0) return 0 ;;
    3) fail "the pipeline reported lost data" ;;
    4) fail "the pipeline refused to restore although no operator fault was made" ;;
    1)
        # The runtime cannot spread the state of a partly finished vertex (a source subtask with
        # no partition ends at once) over another parallelism and refuses: do what the hint says.
        if [ "${#prev_args[@]}" -gt 0 ] &&
            tail -n 8 "$dir/pipeline.log" |
            grep -qE 'is partly finished in the checkpoint and its parallelism changed|had finished all its work in the checkpoint'; then
            run_args=("${prev_args[@]}")
            prev_args=()
            rescale_refusals=$((rescale_refusals + 1)) faults="${faults}!"
            echo "---- operator: back to the parallelism of the checkpoint" >>"$dir/pipeline.log"
            return 1
        fi
        ;;
    esac
    errors=$((errors + 1))
    [ "$errors" -le 5 ] || fail "the pipeline failed $errors times without a kill"
    return 1
}

# The newest checkpoint file name in the run's folder, "" when none.
newest_checkpoint() {
    find "$dir/checkpoints" -maxdepth 1 -name 'chk-*' -printf '%f\n' 2>/dev/null | sort | tail -n 1
}

# A new parallelism for every vertex in run_args (the one before kept in prev_args). A keyed run's
# keyed vertex always gets another one than it had.
rescale() {
    local tp
    prev_args=("${run_args[@]}")
    sp=$((1 + RANDOM % 3)) pp=$((1 + RANDOM % 3)) kp=$((1 + RANDOM % 3))
    f_rescale=$((f_rescale + 1))
    if [ "$keyed" = 1 ]; then
        tp=$((1 + (keyed_par + RANDOM % 3) % 4)) # 1 to 4, not keyed_par
        keyed_par=$tp
        run_args=("${args[@]}" --source-parallelism "$sp" --totals-parallelism "$tp"
            --pg-parallelism "$pp" --kafka-parallelism "$kp")
        faults="$faults r$sp$tp$pp$kp"
        echo "---- operator: parallelism source $sp, totals $tp, postgres $pp, kafka $kp" \
            >>"$dir/pipeline.log"
        return
    fi
    run_args=("${args[@]}" --source-parallelism "$sp" --pg-parallelism "$pp"
        --kafka-parallelism "$kp")
    faults="$faults r$sp$pp$kp"
    echo "---- operator: parallelism source $sp, postgres $pp, kafka $kp" >>"$dir/pipeline.log"
}

# An operator fault between two starts, drawn from RANDOM. A rescale changes run_args (in a keyed
# run after every kill, before any other fault); a damaged or removed checkpoint starts the
# pipeline and expects a refusal, then copies the folder back. Leaves the pipeline running when it
# accepted the restore. Returns 1 when the job ended by itself.
operator_fault() {
    local kind newest size at byte
    case $((RANDOM % 6)) in
    0 | 1) kind=rescale ;;
    2) kind=damage ;;
    3) kind=remove ;;
    *) kind=none ;;
    esac
    prev_args=()
    if [ "$keyed" = 1 ]; then
        rescale
        [ "$kind" != rescale ] || kind=none
    elif [ "$kind" = rescale ]; then
        rescale
        return 0
    fi
    [ "$kind" != none ] || return 0
    newest=$(newest_checkpoint)
    [ -n "$newest" ] || return 0
    rm -rf "$dir/backup"
    cp -a "$dir/checkpoints" "$dir/backup"
    if [ "$kind" = damage ]; then
        size=$(stat -c %s "$dir/checkpoints/$newest")
        if [ $((RANDOM % 2)) -eq 0 ]; then
            truncate -s $((size / 2)) "$dir/checkpoints/$newest"
        else
            at=$((RANDOM * 32768 + RANDOM))
            at=$((at % size))
            byte=$(od -An -tu1 -j "$at" -N1 "$dir/checkpoints/$newest" | tr -d ' ')
            printf "\\$(printf '%03o' $((byte ^ 90)))" |
                dd of="$dir/checkpoints/$newest" bs=1 seek="$at" conv=notrunc status=none
        fi
        f_damage=$((f_damage + 1)) faults="$faults d"
    else
        rm -f "$dir/checkpoints"/chk-*
        f_remove=$((f_remove + 1)) faults="$faults x"
    fi
    echo "---- operator: $kind $newest" >>"$dir/pipeline.log"
    e2e_pipeline_start "${run_args[@]}" 2>>"$dir/pipeline.log"
    if ! e2e_pipeline_wait_ms 8000; then
        accepted=$((accepted + 1))
        return 0 # no sink was told of that checkpoint: the restore may go on
    fi
    if [ "$E2E_STATUS" = 4 ]; then
        local want=TPC_ERR_CORRUPT
        [ "$kind" = damage ] || want=TPC_ERR_NOT_FOUND
        tail -n 8 "$dir/pipeline.log" | grep -q "refused: $want" ||
            fail "the pipeline refused after '$kind' without saying $want"
        refusals=$((refusals + 1)) faults="${faults}!"
        rm -rf "$dir/checkpoints"
        mv "$dir/backup" "$dir/checkpoints"
        echo "---- operator: copied the checkpoints back" >>"$dir/pipeline.log"
        return 0
    fi
    ended && return 1
    return 0
}

# Run the pipeline again from scratch on the same outputs (--restore-mode fresh), killed 0 to 2
# times and started again with the default restore mode, as an operator would: the runs after the
# first resume the new state (or start over again if none of its checkpoints completed), never the
# state from before the start over.
start_over() {
    local old mode=fresh kills=0 planned=$((RANDOM % 3)) delay
    old=$(newest_checkpoint)
    f_startover=$((f_startover + 1)) faults="$faults s"
    echo "---- operator: start over (newest checkpoint $old)" >>"$dir/pipeline.log"
    errors=0
    while :; do
        e2e_pipeline_start "${run_args[@]}" --restore-mode "$mode" 2>>"$dir/pipeline.log"
        if [ "$kills" -lt "$planned" ]; then
            delay=$((50 + RANDOM % 2700))
            if e2e_pipeline_wait_ms "$delay"; then
                ended && break
            else
                e2e_pipeline_kill
                kills=$((kills + 1))
                echo "---- kill -9 after $delay ms (start over)" >>"$dir/pipeline.log"
                mode=auto
            fi
        else
            e2e_pipeline_wait_ms 180000 || fail "the started-over pipeline did not finish in 180 s"
            ended && break
        fi
    done
    "$E2E_VERIFY" "${verify_args[@]}" --times 2 >"$dir/verify.txt" 2>&1 ||
        fail "verify_output --times 2 found a mismatch after the start over"
}

one_run() {
    RANDOM=$seed
    local name par interval rate kills_planned disrupt disrupt_at server delay started ms sp pp kp
    local faults= keyed=0 keyed_par example=records grow=0 grow_to=0 grow_at=-1 grown=0 layout=rows
    prev_args=()
    case "$EXAMPLE" in
    keyed) keyed=1 ;;
    mixed) [ $((seed % 3)) -ne 0 ] || keyed=1 ;;
    esac
    name="torture-$seed-$$-$run"
    dir="$WORK/$name"
    mkdir -p "$dir"
    par=$((1 + RANDOM % 3))
    interval=$((100 + RANDOM % 400))
    rate=$((RECORDS / (3 + RANDOM % 3)))
    kills_planned=$((1 + RANDOM % 4))
    disrupt=$((RANDOM % 8))
    disrupt_at=$((RANDOM % kills_planned))
    server=none
    case "$disrupt" in
    0) server=pg ;;
    1) server=kafka ;;
    esac
    [ "$keyed" = 1 ] || [ $((seed % 4)) -ne 1 ] || grow=1
    local args=(--name "$name" --checkpoint-dir "$dir/checkpoints" --parallelism "$par"
        --interval "$interval" --rate "$rate" --records "$RECORDS")
    verify_args=(--name "$name" --records "$RECORDS")
    E2E_PIPELINE=$E2E_RECORDS_PIPELINE
    if [ "$keyed" = 1 ]; then
        example=keyed keyed_par=$par keyed_runs=$((keyed_runs + 1))
        E2E_PIPELINE=$E2E_KEYED_PIPELINE
        # From the seed, not RANDOM, as below; read by the pipeline's configuration only.
        local -x TWOPC_STATE_INCREMENTAL=true TWOPC_STATE_INCREMENTAL_MAX_CHAIN=$((2 + seed % 4))
        verify_args+=(--totals)
    else
        args+=(--progress lines)
        # From the seed, not RANDOM, so that every other choice of a seed stays what it was.
        case $((seed % 5)) in
        2) layout=changelog changelog_runs=$((changelog_runs + 1)) ;;
        4) layout=two-tables two_table_runs=$((two_table_runs + 1)) ;;
        esac
        if [ "$layout" != rows ]; then
            example=$layout
            args+=(--pg-layout "$layout")
            verify_args+=(--pg-layout "$layout")
        fi
    fi
    local fill_args=()
    if [ "$grow" = 1 ]; then
        example=growth grow_to=$((par + 1 + RANDOM % 2)) grow_at=$((RANDOM % (kills_planned + 1)))
        args+=(--unbounded --discovery-ms 300)
        fill_args=(--grow-to "$grow_to")
    fi
    run_args=("${args[@]}")
    started=$(e2e_now_ms)
    "$E2E_PIPELINE" --fill "${args[@]}" "${fill_args[@]}" >>"$dir/pipeline.log" 2>&1 ||
        fail "could not fill the input"

    local kills=0 restarted=none rescales_before=$f_rescale
    errors=0
    while :; do
        [ -n "$E2E_PID" ] || e2e_pipeline_start "${run_args[@]}" 2>>"$dir/pipeline.log"
        if [ "$grow" = 1 ] && [ "$grown" = 0 ] && [ "$kills" -ge "$grow_at" ]; then
            grow_input
        fi
        if [ "$kills" -lt "$kills_planned" ]; then
            delay=$((50 + RANDOM % 2700))
            if [ "$kills" -eq "$disrupt_at" ] && [ "$server" != none ]; then
                if ! e2e_pipeline_wait_ms $((delay / 2)); then
                    restart_server "$server" && restarted=$server
                fi
            fi
            if e2e_pipeline_wait_ms "$delay"; then
                ended && break
            else
                e2e_pipeline_kill
                kills=$((kills + 1)) total_kills=$((total_kills + 1))
                [ "$keyed" = 0 ] || keyed_kills=$((keyed_kills + 1))
                echo "---- kill -9 after $delay ms" >>"$dir/pipeline.log"
                if [ "$FAULTS" = 1 ] && ! operator_fault; then
                    break
                fi
            fi
        elif [ "$grow" = 1 ]; then
            stop_when_verified && break
        else
            e2e_pipeline_wait_ms 180000 || fail "the pipeline did not finish within 180 s"
            ended && break
        fi
    done

    if ! "$E2E_VERIFY" "${verify_args[@]}" >"$dir/verify.txt" 2>&1; then
        if [ "$restarted" != kafka ] || ! broker_skipped_markers; then
            fail "verify_output found a mismatch"
        fi
        broker_faults=$((broker_faults + 1))
        e2e_log "run $run, seed $seed: the Kafka broker skipped the commit markers of a decided" \
            "transaction after its kill -9 (its log says so); PostgreSQL holds every row once and" \
            "Kafka holds no duplicate: counted as a broker fault, not a violation (docs/examples.md)"
        e2e_log "broker log: $skipped"
    fi
    if [ "$keyed" = 1 ]; then
        keyed_rescales=$((keyed_rescales + f_rescale - rescales_before))
        # Sums of the verifier's table: Kafka's running totals, PostgreSQL's final ones.
        read -r -a sums < <(awk '$1 == "rows" { r = $NF } /^records in Kafka/ { k = $NF }
            $1 == "duplicates" { d = $2 + $3 } $1 == "missing" { m = $2 + $3 }
            /^wrong key or value/ { w = $(NF - 1) + $NF } END { print r, k, d, m, w }' "$dir/verify.txt")
        keyed_finals=$((keyed_finals + sums[0])) keyed_totals=$((keyed_totals + sums[1]))
        keyed_dups=$((keyed_dups + sums[2])) keyed_missing=$((keyed_missing + sums[3]))
        keyed_wrong=$((keyed_wrong + sums[4]))
    fi
    if [ "$FAULTS" = 1 ] && [ $((RANDOM % 4)) -eq 0 ] && [ "$grow" = 0 ]; then
        start_over
    fi
    ms=$(($(e2e_now_ms) - started))
    printf 'torture: run %d/%d seed %d: %-7s parallelism %d, interval %3d ms, %d kills, restart %-5s, %d errors, faults [%s]: ok in %d.%01d s\n' \
        "$run" "$RUNS" "$seed" "$example" "$par" "$interval" "$kills" "$restarted" "$errors" \
        "${faults# }" $((ms / 1000)) $((ms % 1000 / 100))
    total_ms=$((total_ms + ms))
    rm -rf "$dir"
}

total_ms=0 total_kills=0
keyed_runs=0 keyed_kills=0 keyed_rescales=0 keyed_finals=0 keyed_totals=0 keyed_dups=0
keyed_missing=0 keyed_wrong=0 sums=() verify_args=()
broker_faults=0 grow_runs=0 grown_partitions=0 changelog_runs=0 two_table_runs=0
f_rescale=0 f_damage=0 f_remove=0 f_startover=0 refusals=0 accepted=0 rescale_refusals=0
run_args=() prev_args=()
skipped=
for ((run = 1; run <= RUNS; run++)); do
    seed=$((FIRST_SEED + run - 1))
    one_run
done
printf 'torture: %d runs, %d kills, 0 violations, %d broker faults, %d.%01d s per run on average\n' \
    "$RUNS" "$total_kills" "$broker_faults" $((total_ms / RUNS / 1000)) $((total_ms / RUNS % 1000 / 100))
printf 'torture: operator faults: %d rescales (%d refused: partly finished source), %d damaged and %d removed newest checkpoints (%d refused and copied back, %d restores allowed to go on), %d starts over; 0 silent duplicates, 0 losses\n' \
    "$f_rescale" "$rescale_refusals" "$f_damage" "$f_remove" "$refusals" "$accepted" "$f_startover"
printf 'torture: growth runs: %d input topics grew by %d partitions while their unbounded pipeline ran; every record of old and new partitions verified exactly once\n' \
    "$grow_runs" "$grown_partitions"
printf 'torture: PostgreSQL layouts: %d changelog runs (upserts and deletes by key, verified as the changelog applied once), %d runs into two tables of one sink (verified to hold the same rows)\n' \
    "$changelog_runs" "$two_table_runs"
printf 'torture: keyed runs: %d (%d kills, %d rescales); verified (first verification of each run) %d running totals in Kafka and %d final totals in PostgreSQL: %d wrong totals, %d duplicates, %d missing\n' \
    "$keyed_runs" "$keyed_kills" "$keyed_rescales" "$keyed_totals" "$keyed_finals" "$keyed_wrong" \
    "$keyed_dups" "$keyed_missing"
rm -rf "$WORK"
