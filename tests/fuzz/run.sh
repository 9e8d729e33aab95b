#!/usr/bin/env bash
# Run each libFuzzer harness for SECONDS seconds, starting from its seed corpus in
# tests/fuzz/corpus/<name>/ (every seed runs first, so a regression on a known input fails at
# once), with new inputs kept in build/fuzz-corpus/<name>/. Prints one line of figures per
# harness; exits non-zero if any harness found a crash, a leak or a timeout (its input and output
# stay in build/fuzz-corpus/<name>/).
#
#   tests/fuzz/run.sh SECONDS BIN...
set -uo pipefail

[ $# -ge 2 ] || {
    echo "usage: run.sh SECONDS BIN..." >&2
    exit 2
}
seconds=$1
shift
status=0
for bin in "$@"; do
    name=$(basename "$bin")
    seeds="tests/fuzz/corpus/$name"
    work="build/fuzz-corpus/$name"
    mkdir -p "$work" "$seeds"
    log="$work/last-run.log"
    "$bin" -max_total_time="$seconds" -timeout=2 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$work/" "$work" "$seeds" >"$log" 2>&1
    rc=$?
    done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$done_line")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$done_line")
    corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$done_line")
    seedn=$(find "$seeds" -type f | wc -l)
    if [ $rc -eq 0 ]; then
        printf 'fuzz %-26s %4ss  execs %10s  cov %5s  ft %6s  corpus %5s (seeds %s)  ok\n' \
            "$name" "$seconds" "${execs:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$seedn"
    else
        status=1
        printf 'fuzz %-26s FAILED (exit %s): see %s\n' "$name" "$rc" "$log"
        grep -E 'ERROR: |SUMMARY: |Test unit written' "$log" | head -n 5
    fi
done
exit $status
