#!/usr/bin/env bash
# The one-command demo (make demo): exactly_once_pipeline survives a kill -9 without losing or
# repeating a record, in PostgreSQL and in Kafka.
#
#   demo.sh [RECORDS]          default 60000
#
# It uses the servers named by TWOPC_PG_CONNINFO and TWOPC_KAFKA_BOOTSTRAP, and starts a local
# PostgreSQL and a local Kafka broker (127.0.0.1 only, tests/services/) for whichever is not set,
# stopping them again at the end, also on failure or Ctrl-C. It writes RECORDS records into a new input
# topic, runs the pipeline with its progress line, kills it with kill -9 about half-way, starts it
# again, and when the input is exhausted reads both outputs back with verify_output and prints its
# summary table, then runs the `twopc` commands that show its checkpoints and transactions. Exit status: 0 when every record is in the table and in the topic exactly once.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/e2e_lib.sh"

RECORDS=${1:-60000}
[[ "$RECORDS" =~ ^[0-9]+$ ]] || e2e_die "usage: demo.sh [RECORDS]"

if [ "${E2E_DEMO_INNER:-}" != 1 ]; then
    e2e_check_programs
    # with-services.sh starts a server for each TWOPC_TEST_* variable that is empty.
    export TWOPC_TEST_PG_CONNINFO="${TWOPC_PG_CONNINFO:-}"
    export TWOPC_TEST_KAFKA_BOOTSTRAP="${TWOPC_KAFKA_BOOTSTRAP:-}"
    [[ -z "$TWOPC_TEST_PG_CONNINFO" || -z "$TWOPC_TEST_KAFKA_BOOTSTRAP" ]] || export TWOPC_DEMO_OWN_SERVERS=1
    [ -z "$TWOPC_TEST_PG_CONNINFO" ] || e2e_log "PostgreSQL: $TWOPC_TEST_PG_CONNINFO"
    [ -z "$TWOPC_TEST_KAFKA_BOOTSTRAP" ] || e2e_log "Kafka: $TWOPC_TEST_KAFKA_BOOTSTRAP"
    [[ -n "$TWOPC_TEST_PG_CONNINFO" && -n "$TWOPC_TEST_KAFKA_BOOTSTRAP" ]] ||
        e2e_log "starting local test servers (the first time, Kafka is fetched with Maven)"
    E2E_DEMO_INNER=1 exec "$E2E_ROOT/tests/services/with-services.sh" "$0" "$RECORDS"
fi

export TWOPC_PG_CONNINFO="$TWOPC_TEST_PG_CONNINFO" TWOPC_KAFKA_BOOTSTRAP="$TWOPC_TEST_KAFKA_BOOTSTRAP"
name="twopc-demo-$(date +%Y%m%d-%H%M%S)-$$"
work="$E2E_ROOT/build/demo/$name"
mkdir -p "$work"
trap 'e2e_pipeline_kill' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# About eight seconds of work, so that there is a half-way to kill it at.
rate=$((RECORDS / 8 > 1000 ? RECORDS / 8 : 1000))
progress=lines
[ ! -t 2 ] || progress="tty"
# The job's settings come from a file, as an operator would give them (docs/examples.md, --config);
# the servers from TWOPC_PG_CONNINFO and TWOPC_KAFKA_BOOTSTRAP.
cat >"$work/pipeline.conf" <<EOF
# exactly_once_pipeline's job and its vertices (docs/configuration.md)
checkpoint.dir = $work/checkpoints
checkpoint.interval.ms = 500
restart.attempts = 20

[kafka]
kafka.linger.ms = 5
EOF
args=(--name "$name" --config "$work/pipeline.conf" --parallelism 2
    --records "$RECORDS" --rate "$rate" --progress "$progress")

echo "== 1. write $RECORDS records into the input topic $name-in"
"$E2E_PIPELINE" --fill "${args[@]}" || e2e_die "could not write the input topic"

echo "== 2. run the pipeline, configured by ${work#"$E2E_ROOT"/}/pipeline.conf, and kill -9 it half-way"
# Its stderr (the progress line) also goes to a file, to see how far it got.
"$E2E_PIPELINE" "${args[@]}" 2> >(tee "$work/first-run.log" >&2) &
E2E_PID=$!
deadline=$(($(e2e_now_ms) + 120000))
while :; do
    if e2e_pipeline_wait_ms 200; then
        e2e_die "the pipeline ended before it could be killed (exit status $E2E_STATUS)"
    fi
    done_records=$(tr '\r' '\n' <"$work/first-run.log" | sed -n 's/.* records *\([0-9]*\) .*/\1/p' | tail -n 1)
    [ "${done_records:-0}" -lt $((RECORDS / 2)) ] || break
    [ "$(e2e_now_ms)" -lt "$deadline" ] || e2e_die "the pipeline made no progress in 120 s"
done
e2e_pipeline_kill
echo
echo "== kill -9 after ${done_records} records: the pipeline is gone; its open transactions are neither committed nor aborted"

echo "== 3. start it again: it restores its last checkpoint, commits what that checkpoint covered, and goes on"
e2e_pipeline_start "${args[@]}"
e2e_pipeline_wait_ms 600000 || e2e_die "the pipeline did not finish within 10 minutes"
[ "$E2E_STATUS" -eq 0 ] || e2e_die "the pipeline failed (exit status $E2E_STATUS)"

echo "== 4. read both outputs back (read_committed consumer, SQL) and compare with the input"
"$E2E_VERIFY" --name "$name" --records "$RECORDS"
rc=$?
[ "$rc" -eq 0 ] || exit "$rc"
rm -f "$work/first-run.log"

# The operator's view of the same run: its checkpoints (kept in build/demo/) and what its
# transactions left in Kafka and PostgreSQL, judged by the checkpoint a restart would restore.
twopc="${TWOPC_COMMAND:-$E2E_ROOT/build/default/bin/twopc}"
shown=${twopc#"$E2E_ROOT"/}
ckpt=${work#"$E2E_ROOT"/}/checkpoints
table=${name//-/_}_out
echo
echo "== 5. the same run as the twopc command shows it (docs/twopc-command.md):"
cmds=("checkpoints $ckpt"
    "checkpoint $ckpt"
    "kafka transactions --bootstrap $TWOPC_KAFKA_BOOTSTRAP --prefix $name-out --checkpoint-dir $ckpt --all"
    "pg transactions --conninfo '$TWOPC_PG_CONNINFO' --prefix $table --checkpoint-dir $ckpt")
for c in "${cmds[@]}"; do
    echo
    echo "\$ $shown $c"
    (cd "$E2E_ROOT" && eval "\"\$twopc\" $c") || rc=1
done
echo
if [ -n "${TWOPC_DEMO_OWN_SERVERS:-}" ]; then
    echo "(run them again while the servers are up; the checkpoints stay in $ckpt)"
else
    echo "(the demo's servers stop now; with servers of your own, TWOPC_PG_CONNINFO and"
    echo " TWOPC_KAFKA_BOOTSTRAP, the commands above work after the demo too; the checkpoints stay in $ckpt)"
fi
exit "$rc"
