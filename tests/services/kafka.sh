#!/usr/bin/env bash
# A real single-node Apache Kafka broker (KRaft, combined broker + controller) for the integration tests.
#
#   kafka.sh fetch          resolve the broker's jars with Maven into the cache (once); print their folder
#   kafka.sh start DIR      format storage in DIR, start the broker, wait until it is ready, write DIR/env
#   kafka.sh stop DIR       stop the broker
#   kafka.sh resume DIR     start a stopped broker again on its ports and storage, wait until ready
#                           (stop, then resume: an outage of the broker)
#   kafka.sh restart-kill DIR  kill -9 the broker, start it again on its ports and storage, wait
#   kafka.sh destroy DIR    stop the broker and delete DIR
#
# The version is pinned in kafka/pom.xml. The jars live in a cache outside the checkout, shared by all
# checkouts and runs: $TWOPC_CACHE_DIR (default ${XDG_CACHE_HOME:-~/.cache}/twopc)/kafka-<version>/lib,
# with Maven's own repository in .../m2. Broker and controller listen on 127.0.0.1 only.
# TWOPC_TEST_KAFKA_TRANSACTION_VERSION=0|1|2 formats the cluster with that transaction protocol
# version (the feature transaction.version; unset: the release's default, 2 for Kafka 4.x), so the
# tests can run against a broker of either protocol.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KAFKA_POM="$TPC_SERVICES_DIR/kafka/pom.xml"
KAFKA_VERSION=$(sed -n 's|.*<kafka.version>\(.*\)</kafka.version>.*|\1|p' "$KAFKA_POM")
CACHE_DIR="${TWOPC_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/twopc}"
KAFKA_LIB="$CACHE_DIR/kafka-$KAFKA_VERSION/lib"
# C1 only (TieredStopAtLevel=1) starts the broker about a quarter faster on a small machine; a
# benchmark that needs the broker's full speed sets TWOPC_TEST_KAFKA_JVM_OPTS="-Xms128m -Xmx512m".
KAFKA_JVM_OPTS="${TWOPC_TEST_KAFKA_JVM_OPTS:--Xms128m -Xmx512m -XX:TieredStopAtLevel=1}"
READY_PROBE="$TPC_STATE_ROOT/bin/kafka_ready"

java_bin() {
    local java major
    if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
        java="$JAVA_HOME/bin/java"
    else
        java=$(command -v java) || tpc_die "java not found; run 'make deps' (needs a Java 17 runtime)"
    fi
    major=$("$java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1)
    [ -n "$major" ] && [ "$major" -ge 17 ] ||
        tpc_die "$java is Java ${major:-of unknown version}; the Kafka broker needs Java 17 or newer"
    echo "$java"
}

# Resolve the jars once, under a lock so that concurrent first runs do not fetch twice, into a temporary
# folder renamed into place so that a cut-off download is never taken for a complete one.
kafka_fetch() {
    local tmp started_ms
    [ -f "$KAFKA_LIB/.complete" ] && return 0
    command -v mvn >/dev/null || tpc_die "mvn not found; run 'make deps'"
    mkdir -p "$CACHE_DIR"
    exec 9>"$CACHE_DIR/.lock"
    flock 9
    if [ ! -f "$KAFKA_LIB/.complete" ]; then
        started_ms=$(tpc_now_ms)
        tpc_log "fetching Apache Kafka $KAFKA_VERSION with Maven into $CACHE_DIR"
        tmp=$(mktemp -d "$CACHE_DIR/.fetch.XXXXXX")
        if ! mvn -B -q -f "$KAFKA_POM" -Dmaven.repo.local="$CACHE_DIR/m2" \
            dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$tmp/lib" \
            >"$tmp/mvn.log" 2>&1; then
            tail -n 30 "$tmp/mvn.log" >&2
            rm -rf "$tmp"
            tpc_die "could not fetch Apache Kafka $KAFKA_VERSION with Maven"
        fi
        touch "$tmp/lib/.complete"
        rm -rf "$KAFKA_LIB"
        mkdir -p "$(dirname "$KAFKA_LIB")"
        mv "$tmp/lib" "$KAFKA_LIB"
        rm -rf "$tmp"
        tpc_log "fetched $(ls "$KAFKA_LIB" | wc -l) jars in $(($(tpc_now_ms) - started_ms)) ms"
    fi
    flock -u 9
}

# The probe is built on demand so that this script works without the Makefile.
kafka_build_probe() {
    local src="$TPC_SERVICES_DIR/kafka_ready.c" tmp
    [ -x "$READY_PROBE" ] && [ "$READY_PROBE" -nt "$src" ] && return 0
    mkdir -p "$(dirname "$READY_PROBE")"
    tmp="$READY_PROBE.$$"
    # shellcheck disable=SC2046
    ${CC:-cc} -std=c11 -D_POSIX_C_SOURCE=200809L -O1 -Wall -Wextra -Werror -o "$tmp" "$src" \
        $(pkg-config --cflags --libs rdkafka) || tpc_die "could not build the Kafka readiness probe"
    mv -f "$tmp" "$READY_PROBE"
}

# log.retention.ms=-1: the tests' records carry made-up timestamps (the sequence source stamps
# record n with n ms after the epoch), and time-based retention deletes such records minutes after
# they are written: the first batch of a topic starts a segment that is "older" than segment.ms, so
# the next append rolls it, and the next retention check (every 5 minutes) deletes it. Exactly-once
# checks then found the head of a topic missing (9 and 12 records) with nothing wrong in twopc.
kafka_write_config() {
    local dir=$1 port=$2 cport=$3
    cat >"$dir/server.properties" <<EOF
# Written by tests/services/kafka.sh for a throwaway single-node test broker.
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$dir/data
num.partitions=1
default.replication.factor=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
transaction.max.timeout.ms=900000
log.retention.ms=-1
transaction.abort.timed.out.transaction.cleanup.interval.ms=1000
# KIP-848 consumer groups (the cluster tests): the session timeout is the broker's, so a member killed
# with kill -9 loses its units after 10 s instead of the default 45 s, and assignments travel with
# heartbeats every second instead of every 5 s.
group.consumer.min.session.timeout.ms=6000
group.consumer.session.timeout.ms=10000
group.consumer.min.heartbeat.interval.ms=1000
group.consumer.heartbeat.interval.ms=1000
EOF
}

# Start the broker of DIR in the background (config and storage must exist); its pid goes to DIR/pid.
kafka_launch() {
    local dir=$1 java=$2
    # setsid: the broker must not get the terminal's Ctrl-C; its owner stops it.
    # shellcheck disable=SC2086
    setsid "$java" $KAFKA_JVM_OPTS -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
        -Djava.net.preferIPv4Stack=true \
        -Dlog4j2.configurationFile="$TPC_SERVICES_DIR/kafka/log4j2.properties" \
        -Dkafka.logs.dir="$dir/logs" -cp "$KAFKA_LIB/*" kafka.Kafka "$dir/server.properties" \
        </dev/null >>"$dir/logs/stdout.log" 2>&1 &
    echo "$!" >"$dir/pid"
}

# One attempt: fresh storage, start, wait. Returns 2 if a port was taken (worth retrying), 1 otherwise.
kafka_start_once() {
    local dir=$1 java=$2 port cport cluster_id pid
    port=$(tpc_pick_port)
    cport=$(tpc_pick_port)
    [ "$cport" != "$port" ] || cport=$(tpc_pick_port)
    rm -rf "$dir/data" "$dir/logs"
    mkdir -p "$dir/data" "$dir/logs"
    kafka_write_config "$dir" "$port" "$cport"

    # A random cluster id: 16 random bytes in URL-safe base64 without padding, not starting with '-'
    # (the tool would take it for an option).
    cluster_id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
    cluster_id="${cluster_id/#-/A}"
    if ! "$java" -Xmx256m -XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile="$TPC_SERVICES_DIR/kafka/log4j2.properties" \
        -Dkafka.logs.dir="$dir/logs" -cp "$KAFKA_LIB/*" kafka.tools.StorageTool format \
        --config "$dir/server.properties" --cluster-id "$cluster_id" --standalone \
        ${TWOPC_TEST_KAFKA_TRANSACTION_VERSION:+--feature transaction.version=$TWOPC_TEST_KAFKA_TRANSACTION_VERSION} \
        >"$dir/logs/format.log" 2>&1; then
        cat "$dir/logs/format.log" >&2
        return 1
    fi

    kafka_launch "$dir" "$java"
    pid=$(cat "$dir/pid")

    while tpc_pid_alive "$pid"; do
        # After a failed bind the JVM can linger for many seconds; do not wait for it.
        if grep -qs 'Address already in use' "$dir/logs/server.log" "$dir/logs/stdout.log"; then
            tpc_pidfile_stop "$dir/pid" 5
            break
        fi
        if "$READY_PROBE" "127.0.0.1:$port" 2 2>"$dir/logs/probe.log"; then
            echo "$port" >"$dir/port"
            printf "export TWOPC_TEST_KAFKA_BOOTSTRAP='127.0.0.1:%s'\n" "$port" >"$dir/env"
            return 0
        fi
        if [ $(($(tpc_now_ms) - attempt_started_ms)) -gt 120000 ]; then
            cat "$dir/logs/probe.log" >&2
            tpc_log "broker not ready after 120 s (logs: $dir/logs)"
            tpc_pidfile_stop "$dir/pid" 20
            return 1
        fi
    done
    rm -f "$dir/pid"
    if grep -qs 'Address already in use' "$dir/logs/server.log" "$dir/logs/stdout.log"; then
        return 2
    fi
    tail -n 30 "$dir/logs/server.log" "$dir/logs/stdout.log" >&2 || true
    tpc_log "broker exited during start-up (logs: $dir/logs)"
    return 1
}

kafka_start() {
    local dir=$1 java started_ms attempt rc
    started_ms=$(tpc_now_ms)
    kafka_fetch
    kafka_build_probe
    java=$(java_bin)
    mkdir -p "$dir"
    for attempt in 1 2 3; do
        attempt_started_ms=$(tpc_now_ms)
        rc=0
        kafka_start_once "$dir" "$java" || rc=$?
        if [ "$rc" -eq 0 ]; then
            tpc_log "Apache Kafka $KAFKA_VERSION ready on 127.0.0.1:$(cat "$dir/port")" \
                "in $(($(tpc_now_ms) - started_ms)) ms"
            return 0
        fi
        [ "$rc" -eq 2 ] && [ "$attempt" -lt 3 ] || break
        tpc_log "a port was taken; trying other ports"
    done
    tpc_die "Apache Kafka did not start"
}

# Start the stopped broker of DIR again on its ports and storage, so that topics and transactions
# survive; wait until it is ready. $2: what to call it in the log line.
kafka_relaunch() {
    local dir=$1 what=$2 java started_ms
    started_ms=$(tpc_now_ms)
    [ -s "$dir/port" ] || tpc_die "no broker was started in $dir"
    java=$(java_bin)
    tpc_pidfile_alive "$dir/pid" || kafka_launch "$dir" "$java"
    until "$READY_PROBE" "127.0.0.1:$(cat "$dir/port")" 2 2>"$dir/logs/probe.log"; do
        tpc_pidfile_alive "$dir/pid" || tpc_die "broker exited during restart (logs: $dir/logs)"
        [ $(($(tpc_now_ms) - started_ms)) -lt 120000 ] ||
            tpc_die "broker not ready 120 s after restart (logs: $dir/logs)"
    done
    tpc_log "Apache Kafka $what in $(($(tpc_now_ms) - started_ms)) ms"
}

# Kill the broker as a crash would (SIGKILL) and start it again on the same ports and storage.
kafka_restart_kill() {
    local dir=$1 pid
    [ -s "$dir/port" ] || tpc_die "no broker was started in $dir"
    if tpc_pidfile_alive "$dir/pid"; then
        pid=$(cat "$dir/pid")
        kill -KILL "$pid" 2>/dev/null || true
        while tpc_pid_alive "$pid"; do sleep 0.1; done
    fi
    kafka_relaunch "$dir" "restarted (kill -9)"
}

kafka_resume() {
    kafka_relaunch "$1" "started again"
}

kafka_stop() {
    tpc_pidfile_stop "$1/pid" 30
}

kafka_destroy() {
    [ -e "$1" ] || return 0
    kafka_stop "$1"
    rm -rf "$1"
}

case "${1:-}" in
fetch)
    [ $# -eq 1 ] || tpc_die "usage: kafka.sh fetch"
    kafka_fetch
    echo "$KAFKA_LIB"
    ;;
start | stop | resume | destroy | restart-kill)
    [ $# -eq 2 ] || tpc_die "usage: kafka.sh $1 DIR"
    mkdir -p "$(dirname "$2")"
    dir="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
    "kafka_${1/-/_}" "$dir"
    ;;
*) tpc_die "usage: kafka.sh fetch|start|stop|resume|restart-kill|destroy [DIR]" ;;
esac
