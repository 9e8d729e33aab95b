#!/usr/bin/env bash
# A throwaway S3-compatible server on 127.0.0.1 for the checkpoint storage tests: moto's server
# (moto[server] from PyPI), with one empty bucket.
#
#   s3.sh start DIR BUCKET   prints the endpoint (http://127.0.0.1:PORT) once it answers
#   s3.sh stop DIR           stop it and delete DIR
#
# moto comes from the virtual environment that `tests/services/deps.sh s3 VENV` makes (VENV:
# $TWOPC_S3_VENV, default build/s3-venv), or from a python3 that has it already. When there is none
# (no pip, no network to fetch it) start says why on stderr and exits 1; the tests then say that
# they ran without S3.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || tpc_die "usage: s3.sh start DIR BUCKET | stop DIR"

case "$cmd" in
start)
    bucket=${3:?usage: s3.sh start DIR BUCKET}
    venv=${TWOPC_S3_VENV:-build/s3-venv}
    py=
    if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import moto.server' 2>/dev/null; then
        py=$venv/bin/python
    elif command -v python3 >/dev/null && python3 -c 'import moto.server, flask' 2>/dev/null; then
        py=python3
    elif ! py=$("$(dirname "${BASH_SOURCE[0]}")/deps.sh" s3 "$venv"); then
        echo "s3.sh: no moto server to run (tests/services/deps.sh s3 could not install it)" >&2
        exit 1
    fi
    # moto's own server answers each request on a thread of its own, and its conditional PUT
    # checks the ETag and then writes without a lock: two PUTs with the same If-Match can both
    # succeed when a thread switch falls between the two (seen once under load in the
    # compare-and-set race). S3 applies a conditional write atomically, so the server runs one
    # request at a time, which makes each condition and its write one step as they are on S3.
    serial_moto='import sys, moto.server as m
run = m.run_simple
m.run_simple = lambda *a, **k: run(*a, **dict(k, threaded=False))
m.main(["-H", "127.0.0.1", "-p", sys.argv[1]])'
    mkdir -p "$dir"
    start=$(tpc_now_ms)
    for attempt in 1 2 3; do
        port=$(tpc_pick_port)
        "$py" -c "$serial_moto" "$port" >>"$dir/moto.log" 2>&1 &
        echo $! >"$dir/pid"
        for ((i = 0; i < 300; i++)); do
            tpc_pidfile_alive "$dir/pid" || break
            if { exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null; then
                printf 'PUT /%s HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n' "$bucket" >&3
                if head -n 1 <&3 | grep -q ' 200 '; then
                    exec 3>&-
                    tpc_log "moto S3 server ready on 127.0.0.1:$port in $(($(tpc_now_ms) - start)) ms"
                    echo "http://127.0.0.1:$port"
                    exit 0
                fi
                exec 3>&-
            fi
            sleep 0.1
        done
        tpc_pidfile_stop "$dir/pid" 5
        tpc_log "moto did not start on port $port (attempt $attempt); log: $dir/moto.log"
    done
    tpc_die "moto did not start"
    ;;
stop)
    [ ! -e "$dir/pid" ] || tpc_pidfile_stop "$dir/pid" 10
    rm -rf "$dir"
    ;;
*)
    tpc_die "usage: s3.sh start DIR BUCKET | stop DIR"
    ;;
esac
