#!/usr/bin/env bash
# Render docs/img/twopc-dashboard.png with real data: run tests/bench/dashboard_job.c (a Kafka
# source into an exactly-once Kafka sink and PostgreSQL sink, through slow phases, a stall and
# failing checkpoint writes) against the test servers, with a throwaway Prometheus
# (tests/services/prometheus.sh) scraping its metrics endpoint every second; then ask Prometheus
# for the very PromQL expressions of docs/grafana/twopc-dashboard.json over the run, and draw each
# panel with gnuplot (tests/bench/dashboard_plot.py). Grafana plays no part.
#
#   tests/bench/dashboard_png.sh [SECONDS]      (make dashboard-png; default 150 s)
#
# Needs TWOPC_TEST_KAFKA_BOOTSTRAP and TWOPC_TEST_PG_CONNINFO (make services-up prints them),
# Debian's prometheus, gnuplot with the pngcairo terminal, and python3.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source tests/services/lib.sh

seconds=${1:-150}
build=${BUILD:-build/default}
out=${TWOPC_DASHBOARD_PNG:-docs/img/twopc-dashboard.png}
[ -n "${TWOPC_TEST_KAFKA_BOOTSTRAP:-}" ] && [ -n "${TWOPC_TEST_PG_CONNINFO:-}" ] ||
    tpc_die "no test servers: run make services-up and export what it prints"
for tool in prometheus gnuplot python3; do
    command -v "$tool" >/dev/null || tpc_die "$tool is not installed"
done

work=$(mktemp -d "${TMPDIR:-/tmp}/twopc-dashboard-XXXXXX")
cleanup() {
    tests/services/prometheus.sh stop "$work/prometheus" || true
    rm -rf "$work"
}
trap cleanup EXIT
port=$(tpc_pick_port)
url=$(tests/services/prometheus.sh start "$work/prometheus" "127.0.0.1:$port")
start=$(date +%s)
tpc_log "dashboard job for $seconds s, metrics on 127.0.0.1:$port, Prometheus at $url"
"$build/bench/dashboard_job" "127.0.0.1:$port" "$work/checkpoints" "$seconds"
end=$(date +%s)
mkdir -p "$(dirname "$out")"
python3 tests/bench/dashboard_plot.py "$url" "$start" "$end" docs/grafana/twopc-dashboard.json \
    "$work/plot" "$out"
tpc_log "wrote $out"
