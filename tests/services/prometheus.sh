#!/usr/bin/env bash
# A throwaway Prometheus server (Debian's prometheus package) on 127.0.0.1 that scrapes one target
# every second, for the metrics test.
#
#   prometheus.sh start DIR TARGET    TARGET is host:port of a /metrics endpoint; prints the server's
#                                     base URL (http://127.0.0.1:PORT) once it is ready
#   prometheus.sh stop DIR            stop it and delete DIR
#
# Configuration, storage, log and pid file live in DIR.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || tpc_die "usage: prometheus.sh start DIR TARGET | stop DIR"

case "$cmd" in
start)
    target=${3:-}
    [[ "$target" == 127.0.0.1:* ]] || tpc_die "the target must be on 127.0.0.1, not \"$target\""
    command -v prometheus >/dev/null || tpc_die "prometheus is not installed (tests/services/deps.sh all)"
    mkdir -p "$dir/data"
    cat >"$dir/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: twopc
    static_configs:
      - targets: ['$target']
YAML
    start=$(tpc_now_ms)
    for attempt in 1 2 3; do
        port=$(tpc_pick_port)
        prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
            --web.listen-address="127.0.0.1:$port" --log.level=warn \
            >>"$dir/prometheus.log" 2>&1 &
        echo $! >"$dir/pid"
        for ((i = 0; i < 200; i++)); do
            tpc_pidfile_alive "$dir/pid" || break
            if { exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null; then
                printf 'GET /-/ready HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
                if head -n 1 <&3 | grep -q ' 200 '; then
                    exec 3>&-
                    tpc_log "Prometheus ready on 127.0.0.1:$port in $(($(tpc_now_ms) - start)) ms"
                    echo "http://127.0.0.1:$port"
                    exit 0
                fi
                exec 3>&-
            fi
            sleep 0.1
        done
        tpc_pidfile_stop "$dir/pid" 5
        tpc_log "Prometheus did not start on port $port (attempt $attempt); log: $dir/prometheus.log"
    done
    tpc_die "Prometheus did not start"
    ;;
stop)
    [ ! -e "$dir/pid" ] || tpc_pidfile_stop "$dir/pid" 10
    rm -rf "$dir"
    ;;
*)
    tpc_die "usage: prometheus.sh start DIR TARGET | stop DIR"
    ;;
esac
