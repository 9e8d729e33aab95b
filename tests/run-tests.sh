#!/usr/bin/env bash
# Run Check test binaries one after the other, show their output, and close with one line
#
#   N passed, N failed
#
# that adds up the "Checks: N, Failures: F, Errors: E" summaries of all binaries. A binary that ends
# without such a summary (a crash, a timeout) counts as one failed check, and so does one that exits
# non-zero although its summary shows no failure (a sanitizer report at exit, say). Every binary runs
# even after a failure, so that the closing line is complete. Exits non-zero if anything failed.
#
#   tests/run-tests.sh LABEL BIN... [-- BIN...] [--env=NAME=VALUE BIN...]
#
# LABEL names the run in the output; "--" separates groups (unit tests, then integration tests).
# --env=NAME=VALUE exports NAME=VALUE for the binaries that follow it, which are listed with it (the
# Kafka tests run a second time against another librdkafka with --env=LD_LIBRARY_PATH=...).
# TWOPC_TEST_TIMEOUT bounds each binary's wall time in seconds (default 1800).
set -uo pipefail

[ $# -ge 1 ] || {
    echo "usage: run-tests.sh LABEL BIN... [-- BIN...]" >&2
    exit 2
}
label=$1
shift

passed=0
failed=0
binaries=0
failures=()
envs=
log=$(mktemp)
trap 'rm -f "$log"' EXIT

run_binary() {
    local bin=$1 rc checks=0 fails=0 errors=0 summaries=0 line c f e
    binaries=$((binaries + 1))
    echo "--- $bin${envs:+ ($envs)}"
    timeout -k 10 "${TWOPC_TEST_TIMEOUT:-1800}" "$bin" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    while IFS= read -r line; do
        if [[ "$line" =~ Checks:\ ([0-9]+),\ Failures:\ ([0-9]+),\ Errors:\ ([0-9]+) ]]; then
            c=${BASH_REMATCH[1]} f=${BASH_REMATCH[2]} e=${BASH_REMATCH[3]}
            checks=$((checks + c)) fails=$((fails + f)) errors=$((errors + e))
            summaries=$((summaries + 1))
        fi
    done <"$log"

    if [ "$summaries" -eq 0 ]; then
        if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
            echo "--- $bin: timed out without a Check summary"
        else
            echo "--- $bin: exited with status $rc without a Check summary"
        fi
        failed=$((failed + 1))
        failures+=("$bin${envs:+ ($envs)}")
        return
    fi
    passed=$((passed + checks - fails - errors))
    failed=$((failed + fails + errors))
    if [ $((fails + errors)) -gt 0 ]; then
        failures+=("$bin${envs:+ ($envs)}")
    elif [ "$rc" -ne 0 ]; then
        echo "--- $bin: all checks passed but it exited with status $rc"
        failed=$((failed + 1))
        failures+=("$bin${envs:+ ($envs)}")
    fi
}

for arg in "$@"; do
    if [ "$arg" = "--" ]; then
        continue
    fi
    if [[ "$arg" == --env=*=* ]]; then
        export "${arg#--env=}"
        envs="${envs:+$envs }${arg#--env=}"
        continue
    fi
    run_binary "$arg"
done

echo "=== $label: $binaries test binaries"
for bin in "${failures[@]}"; do
    echo "=== failed: $bin"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
