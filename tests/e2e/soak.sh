#!/usr/bin/env bash
# Soak test of exactly_once_pipeline: does anything grow while an unbounded job runs for a long time?
#
#   soak.sh [MINUTES]          (make soak MINUTES=n; default 3, at least 3)
#
# One unbounded job (Kafka -> PostgreSQL and Kafka, parallelism 2, checkpoints every 500 ms) runs for
# MINUTES minutes in cycles of a busy phase and an idle phase: at the start of each cycle SOAK_BUSY_S
# seconds' worth of input (at SOAK_RATE records a second, the pace the job is held to) is written into
# the input topic; once the job has read it, it has nothing to do but checkpoint until the next cycle.
# Halfway through, in a busy phase, the job is killed with kill -9 and started again from its
# checkpoint folder. Every SOAK_SAMPLE_S seconds a sample of the running process is taken:
#
#   rss_kb    resident memory (VmRSS of /proc/PID/status)
#   fds       open file descriptors (/proc/PID/fd)
#   threads   threads (/proc/PID/task)
#   rdkafka   librdkafka clients, producers and consumers (threads named rdk:main)
#   pg_conns  PostgreSQL connections of the job (application_name set to the soak's name)
#   prepared  prepared transactions of the job's table sink (pg_prepared_xacts)
#   ckpt_kb   size of the checkpoint folder
#
# Each of the two processes is judged on its own samples after a warm-up (its first cycle, at least
# 30 s), split into quarters of time, each at least one cycle long (so each holds a busy phase; in a
# short run the first and last quarter then overlap). The soak fails when
#   - the peak resident memory of the last quarter is more than 10 % above the first quarter's,
#   - the last quarter's maximum of fds is more than 8 above the first quarter's, of threads more
#     than 4, of rdkafka clients or pg_conns above it at all,
#   - prepared transactions ever exceed 2 per sink subtask,
#   - the checkpoint folder's last-quarter maximum exceeds 1.5 times the first quarter's + 64 kB,
# or when the job fails, or when, after the job is stopped with SIGINT (a savepoint) once PostgreSQL
# holds every record written, verify_output finds a record missing or repeated in either output.
#
# It prints the series (every sample; for long runs every n-th, at most 150 lines) and the verdicts;
# the whole series is in build/soak/<pid>/series.tsv, and when gnuplot is installed, a plot of it in
# soak.png next to it (kept; the pipeline's log is there too).
#
# Environment: TWOPC_TEST_PG_CONNINFO and TWOPC_TEST_KAFKA_BOOTSTRAP name the servers (with-services.sh
# sets them); SOAK_RATE (default 4000), SOAK_BUSY_S (10), SOAK_IDLE_S (20), SOAK_SAMPLE_S (2).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/e2e_lib.sh"

MINUTES=${1:-3}
RATE=${SOAK_RATE:-4000}
BUSY_S=${SOAK_BUSY_S:-10}
IDLE_S=${SOAK_IDLE_S:-20}
SAMPLE_S=${SOAK_SAMPLE_S:-2}
PAR=2
for v in MINUTES RATE BUSY_S IDLE_S SAMPLE_S; do
    [[ "${!v}" =~ ^[0-9]+$ && "${!v}" -ge 1 ]] || e2e_die "$v must be a positive number"
done
[ "$MINUTES" -ge 3 ] || e2e_die "usage: soak.sh [MINUTES], at least 3"
[[ -n "${TWOPC_TEST_PG_CONNINFO:-}" && -n "${TWOPC_TEST_KAFKA_BOOTSTRAP:-}" ]] ||
    e2e_die "TWOPC_TEST_PG_CONNINFO and TWOPC_TEST_KAFKA_BOOTSTRAP are not set; run 'make soak'"
command -v psql >/dev/null || e2e_die "psql not found (Debian package postgresql-client)"
e2e_check_programs
NAME="soak-$$"
# The job's PostgreSQL connections carry the name of this soak, which tells them from any other
# program's on the same server.
case "$TWOPC_TEST_PG_CONNINFO" in
postgres://*\?* | postgresql://*\?*) TWOPC_PG_CONNINFO="$TWOPC_TEST_PG_CONNINFO&application_name=$NAME" ;;
postgres://* | postgresql://*) TWOPC_PG_CONNINFO="$TWOPC_TEST_PG_CONNINFO?application_name=$NAME" ;;
*) TWOPC_PG_CONNINFO="$TWOPC_TEST_PG_CONNINFO application_name=$NAME" ;;
esac
export TWOPC_PG_CONNINFO TWOPC_KAFKA_BOOTSTRAP="$TWOPC_TEST_KAFKA_BOOTSTRAP"

TOTAL_S=$((MINUTES * 60))
CYCLE_S=$((BUSY_S + IDLE_S))
WARMUP_S=$((CYCLE_S > 30 ? CYCLE_S : 30))
# The kill: in the middle of the busy phase of the cycle that starts nearest to half-time.
KILL_S=$(((TOTAL_S / 2 + CYCLE_S / 2) / CYCLE_S * CYCLE_S + BUSY_S / 2))
TABLE="soak_$$_out"
WORK="$E2E_ROOT/build/soak/$$"
CKPT="$WORK/checkpoints"
SERIES="$WORK/series.tsv"
LOG="$WORK/pipeline.log"
mkdir -p "$WORK"
FILL_PID=
trap 'e2e_pipeline_kill; [ -z "$FILL_PID" ] || kill "$FILL_PID" 2>/dev/null' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail() {
    e2e_log "FAILED: $*"
    e2e_log "last lines of the pipeline's log ($LOG):"
    tail -n 15 "$LOG" >&2
    exit 1
}

pg() {
    psql "$TWOPC_TEST_PG_CONNINFO" -XAtq -F ' ' -c "$1" 2>>"$LOG"
}

written=0
# Write the next busy phase's input in the background: records written .. written + RATE * BUSY_S.
fill_next() {
    if [ -n "$FILL_PID" ]; then
        wait "$FILL_PID" || fail "could not write input into the topic"
    fi
    local n=$((RATE * BUSY_S))
    "$E2E_PIPELINE" --fill --name "$NAME" --parallelism "$PAR" --first "$written" --records "$n" \
        >>"$LOG" 2>&1 &
    FILL_PID=$!
    written=$((written + n))
}

start_pipeline() {
    e2e_pipeline_start --name "$NAME" --unbounded --parallelism "$PAR" --rate "$RATE" \
        --checkpoint-dir "$CKPT" --progress lines 2>>"$LOG"
    proc=$((proc + 1))
    proc_started=$(e2e_now_ms)
}

# One line of the series for the running process.
sample() {
    local t=$1 pid=$E2E_PID age rss fds threads rdk pgs ckpt phase
    age=$((($(e2e_now_ms) - proc_started) / 1000))
    rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null) || return 0
    [ -n "$rss" ] || return 0
    fds=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
    threads=$(find "/proc/$pid/task" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
    rdk=$(cat /proc/"$pid"/task/*/comm 2>/dev/null | grep -c '^rdk:main$')
    pgs=$(pg "SELECT (SELECT count(*) FROM pg_stat_activity WHERE application_name = '$NAME'),
                     (SELECT count(*) FROM pg_prepared_xacts WHERE starts_with(gid, '$TABLE'))")
    [ -n "$pgs" ] || pgs="- -"
    ckpt=$(du -sk "$CKPT" 2>/dev/null | cut -f1)
    phase=idle
    [ $((t % CYCLE_S)) -ge "$BUSY_S" ] || phase=busy
    printf '%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$proc" "$age" "$phase" "$rss" \
        "$fds" "$threads" "$rdk" "${pgs% *}" "${pgs#* }" "${ckpt:-0}" >>"$SERIES"
}

printf 't_s\tproc\tage_s\tphase\trss_kb\tfds\tthreads\trdkafka\tpg_conns\tprepared\tckpt_kb\n' \
    >"$SERIES"
e2e_log "$MINUTES min: cycles of ${BUSY_S} s busy ($RATE records/s) and ${IDLE_S} s idle, kill -9 at" \
    "${KILL_S} s, a sample every ${SAMPLE_S} s, warm-up ${WARMUP_S} s per process; work in $WORK"
fill_next
wait "$FILL_PID" || fail "could not write the first input into the topic"
FILL_PID=
proc=0
start_pipeline
t0=$(e2e_now_ms)
next_cycle=$CYCLE_S
next_sample=0
killed=0
while :; do
    now_s=$((($(e2e_now_ms) - t0) / 1000))
    [ "$now_s" -lt "$TOTAL_S" ] || break
    if ! kill -0 "$E2E_PID" 2>/dev/null; then
        e2e_pipeline_wait_ms 1000
        fail "the pipeline ended by itself at $now_s s (exit status $E2E_STATUS)"
    fi
    if [ "$now_s" -ge "$next_cycle" ]; then
        fill_next
        next_cycle=$((next_cycle + CYCLE_S))
    fi
    if [ "$killed" -eq 0 ] && [ "$now_s" -ge "$KILL_S" ]; then
        e2e_pipeline_kill
        echo "---- kill -9 at $now_s s" >>"$LOG"
        killed=1
        start_pipeline
    fi
    if [ "$now_s" -ge "$next_sample" ]; then
        sample "$now_s"
        next_sample=$((next_sample + SAMPLE_S))
    fi
    sleep 0.2
done
if [ -n "$FILL_PID" ]; then
    wait "$FILL_PID" || fail "could not write input into the topic"
    FILL_PID=
fi

# Let the job take in everything written, then stop it with a savepoint and read both outputs.
deadline=$(($(e2e_now_ms) + 180000))
while rows=$(pg "SELECT count(*) FROM \"$TABLE\""); [ "${rows:-0}" -lt "$written" ]; do
    [ "$(e2e_now_ms)" -lt "$deadline" ] ||
        fail "PostgreSQL holds ${rows:-0} of $written records 180 s after the soak's end"
    kill -0 "$E2E_PID" 2>/dev/null || fail "the pipeline ended by itself while catching up"
    sleep 1
done
kill -INT "$E2E_PID"
e2e_pipeline_wait_ms 60000 || fail "the pipeline did not stop within 60 s of SIGINT"
[ "$E2E_STATUS" -eq 0 ] || fail "the pipeline stopped with exit status $E2E_STATUS"
"$E2E_VERIFY" --name "$NAME" --records "$written" >"$WORK/verify.txt" 2>&1 ||
    { cat "$WORK/verify.txt" >&2; fail "verify_output found a mismatch"; }

# The series: every sample, or every n-th for a long run.
lines=$(($(wc -l <"$SERIES") - 1))
every=$(((lines + 149) / 150))
echo "soak: the series ($lines samples$([ "$every" -le 1 ] || echo ", every ${every}th shown"); kill -9 at ${KILL_S} s)"
awk -v every="$every" 'NR == 1 || (NR - 2) % every == 0' "$SERIES" | column -t

if command -v gnuplot >/dev/null; then
    gnuplot <<EOF 2>>"$LOG" && echo "soak: plot in $WORK/soak.png" || e2e_log "gnuplot failed (see $LOG)"
set terminal png size 1200,900
set output '$WORK/soak.png'
set datafile separator '\t'
set key top left
set offsets graph 0, graph 0, graph 0.15, graph 0
set yrange [0:*]
set xlabel 'seconds'
set arrow from $KILL_S, graph 0 to $KILL_S, graph 1 nohead dashtype 2
set multiplot layout 2,2 title 'exactly\_once\_pipeline soak, $MINUTES min (kill -9 at the dashed line)'
plot '$SERIES' using 1:(\$5/1024) with lines title 'RSS MB'
plot '$SERIES' using 1:6 with lines title 'fds', '' using 1:7 with lines title 'threads'
plot '$SERIES' using 1:8 with steps title 'librdkafka clients', '' using 1:9 with steps title 'pg connections', '' using 1:10 with steps title 'prepared'
plot '$SERIES' using 1:11 with lines title 'checkpoint folder kB'
unset multiplot
EOF
else
    echo "soak: no plot (install gnuplot for one)"
fi

# The verdicts, per process, over its samples after the warm-up.
awk -F '\t' -v warm="$WARMUP_S" -v cycle="$CYCLE_S" -v max_prepared=$((2 * PAR)) '
NR == 1 || $9 == "-" { next } # the header; a sample PostgreSQL did not answer
$3 >= warm {
    p = $2; i = ++n[p]
    age[p, i] = $3; rss[p, i] = $5; fd[p, i] = $6; thr[p, i] = $7; rdk[p, i] = $8
    pgc[p, i] = $9; ck[p, i] = $11
    if ($10 > prep_max) prep_max = $10
}
# The maximum of a[p, i] over the samples whose age is in [from, to].
function wmax(a, from, to,    i, m) {
    m = -1
    for (i = 1; i <= n[p]; i++)
        if (age[p, i] >= from && age[p, i] <= to && a[p, i] > m) m = a[p, i]
    return m
}
function verdict(ok, text) {
    printf "soak: %s: %s %s\n", p ? "process " p : "both processes", text, ok ? "ok" : "FAILED"
    if (!ok) bad = 1
}
END {
    for (p = 1; p <= 2; p++) {
        if (n[p] < 4) { printf "soak: process %d: too few samples after the warm-up\n", p; bad = 1; continue }
        # Quarters of the time after the warm-up, each at least one cycle long so that each
        # holds a busy phase: memory is compared peak with peak.
        first = age[p, 1]; last = age[p, n[p]]
        if (last - first < cycle) { printf "soak: process %d: watched for %d s after the warm-up, less than a cycle\n", p, last - first; bad = 1; continue }
        q = (last - first) / 4
        if (q < cycle) q = cycle
        f1 = first; f2 = first + q; l1 = last - q; l2 = last
        printf "soak: process %d: first quarter %d-%d s, last quarter %d-%d s of its life\n", p, f1, f2, l1, l2
        a = wmax(rss, f1, f2); b = wmax(rss, l1, l2)
        verdict(b <= 1.10 * a, sprintf("peak rss %.1f -> %.1f MB (%+.1f %%, bound +10 %%)", a / 1024, b / 1024, 100 * (b - a) / a))
        a = wmax(fd, f1, f2); b = wmax(fd, l1, l2)
        verdict(b <= a + 8, sprintf("fds %d -> %d (bound +8)", a, b))
        a = wmax(thr, f1, f2); b = wmax(thr, l1, l2)
        verdict(b <= a + 4, sprintf("threads %d -> %d (bound +4)", a, b))
        a = wmax(rdk, f1, f2); b = wmax(rdk, l1, l2)
        verdict(b <= a, sprintf("librdkafka clients %d -> %d (bound +0)", a, b))
        a = wmax(pgc, f1, f2); b = wmax(pgc, l1, l2)
        verdict(b <= a, sprintf("pg connections %d -> %d (bound +0)", a, b))
        a = wmax(ck, f1, f2); b = wmax(ck, l1, l2)
        verdict(b <= 1.5 * a + 64, sprintf("checkpoint folder %d -> %d kB (bound x1.5 + 64 kB)", a, b))
    }
    p = 0
    verdict(prep_max <= max_prepared, sprintf("prepared transactions at most %d (bound %d)", prep_max, max_prepared))
    exit bad
}' "$SERIES" || fail "a resource grew beyond its bound (series in $SERIES)"
echo "soak: $MINUTES min, $written records, one kill -9: nothing grew beyond its bound; verify_output:" \
    "every record exactly once in both outputs"
