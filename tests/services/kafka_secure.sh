#!/usr/bin/env bash
# A throwaway single-node Apache Kafka broker with TLS and SASL listeners, for the tests of the
# Kafka-protocol client that ends transactions of crashed producers (check_kafka_secure). The shared
# test broker (kafka.sh) stays plaintext; this one runs beside it, from the same cached jars.
#
#   kafka_secure.sh start DIR     make TLS files, format storage, start the broker, wait, write DIR/env
#   kafka_secure.sh stop DIR      stop the broker
#   kafka_secure.sh destroy DIR   stop the broker and delete DIR
#
# Listeners, all on 127.0.0.1 and free ports:
#   PLAINTEXT       inter-broker traffic, and the tests' topic creation and read_committed reads
#   SSL             TLS; the client must show a certificate signed by the test CA
#   SASL_PLAINTEXT  SASL PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512
#   SASL_SSL        the same over TLS, no client certificate
# TLS files (DIR/tls), made with the openssl command at each start: ca.pem (the test CA), cadir/ (the
# same CA in a folder prepared with openssl rehash), server.pem (key and certificate for localhost and
# 127.0.0.1, in the PEM keystore the broker reads), client.pem and client.key (a client certificate
# whose key is encrypted with the key password), other-ca.pem (a CA that signed nothing here). SASL
# users: one for PLAIN in the listeners' JAAS configuration, and the same name and password as SCRAM
# credentials of both hashes, added by the storage tool when it formats. DIR/env exports the ports,
# the TLS folder and the credentials as TWOPC_TEST_SECURE_*.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SASL_USER=twopc-test
SASL_PASSWORD=twopc-test-secret
KEY_PASSWORD=twopc-test-key
JVM_OPTS="${TWOPC_TEST_KAFKA_JVM_OPTS:--Xms128m -Xmx512m -XX:TieredStopAtLevel=1}"

secure_java() {
    if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
        echo "$JAVA_HOME/bin/java"
    else
        command -v java || tpc_die "java not found; run 'make deps' (needs a Java 17 runtime)"
    fi
}

# Sign the request $2 with the test CA into certificate $3, with the extensions in $4.
secure_sign() {
    local tls=$1 csr=$2 crt=$3 ext=$4
    openssl x509 -req -in "$csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -days 2 \
        -set_serial "0x$(openssl rand -hex 8)" -extfile <(printf '%s\n' "$ext") -out "$crt" 2>/dev/null
}

secure_make_tls() {
    local tls=$1/tls
    rm -rf "$tls"
    mkdir -p "$tls/cadir"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tls/ca.key" -out "$tls/ca.pem" -days 2 \
        -subj "/CN=twopc test CA" 2>/dev/null
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tls/other-ca.key" -out "$tls/other-ca.pem" \
        -days 2 -subj "/CN=twopc unrelated CA" 2>/dev/null
    cp "$tls/ca.pem" "$tls/cadir/"
    openssl rehash "$tls/cadir" >/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout "$tls/server.key" -out "$tls/server.csr" \
        -subj "/CN=localhost" 2>/dev/null
    secure_sign "$tls" "$tls/server.csr" "$tls/server.crt" \
        "subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth"
    cat "$tls/server.key" "$tls/server.crt" "$tls/ca.pem" >"$tls/server.pem"
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -aes-256-cbc \
        -pass "pass:$KEY_PASSWORD" -out "$tls/client.key" 2>/dev/null
    openssl req -new -key "$tls/client.key" -passin "pass:$KEY_PASSWORD" -out "$tls/client.csr" \
        -subj "/CN=twopc-test-client" 2>/dev/null
    secure_sign "$tls" "$tls/client.csr" "$tls/client.pem" "extendedKeyUsage=clientAuth"
}

secure_write_config() {
    local dir=$1 plain=$2 ctrl=$3 ssl=$4 sasl=$5 sasl_ssl=$6 l m
    {
        cat <<EOF
# Written by tests/services/kafka_secure.sh for a throwaway single-node test broker.
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$ctrl
listeners=PLAINTEXT://127.0.0.1:$plain,CONTROLLER://127.0.0.1:$ctrl,SSL://127.0.0.1:$ssl,SASL_PLAINTEXT://127.0.0.1:$sasl,SASL_SSL://127.0.0.1:$sasl_ssl
advertised.listeners=PLAINTEXT://127.0.0.1:$plain,SSL://127.0.0.1:$ssl,SASL_PLAINTEXT://127.0.0.1:$sasl,SASL_SSL://127.0.0.1:$sasl_ssl
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
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
ssl.keystore.type=PEM
ssl.keystore.location=$dir/tls/server.pem
ssl.truststore.type=PEM
ssl.truststore.location=$dir/tls/ca.pem
listener.name.ssl.ssl.client.auth=required
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
EOF
        for l in sasl_plaintext sasl_ssl; do
            echo "listener.name.$l.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$SASL_USER=\"$SASL_PASSWORD\";"
            for m in scram-sha-256 scram-sha-512; do
                echo "listener.name.$l.$m.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;"
            done
        done
    } >"$dir/server.properties"
}

# One attempt, as kafka.sh makes them. Returns 2 if a port was taken (worth retrying), 1 otherwise.
secure_start_once() {
    local dir=$1 java=$2 lib=$3 ports=() cluster_id pid started_ms
    for _ in 1 2 3 4 5; do
        ports+=("$(tpc_pick_port)")
    done
    [ "$(printf '%s\n' "${ports[@]}" | sort -u | wc -l)" -eq 5 ] || return 2
    rm -rf "$dir/data" "$dir/logs"
    mkdir -p "$dir/data" "$dir/logs"
    secure_write_config "$dir" "${ports[@]}"
    cluster_id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
    cluster_id="${cluster_id/#-/A}"
    if ! "$java" -Xmx256m -XX:TieredStopAtLevel=1 \
        -Dlog4j2.configurationFile="$TPC_SERVICES_DIR/kafka/log4j2.properties" \
        -Dkafka.logs.dir="$dir/logs" -cp "$lib/*" kafka.tools.StorageTool format \
        --config "$dir/server.properties" --cluster-id "$cluster_id" --standalone \
        --add-scram "SCRAM-SHA-256=[name=$SASL_USER,password=$SASL_PASSWORD]" \
        --add-scram "SCRAM-SHA-512=[name=$SASL_USER,password=$SASL_PASSWORD]" \
        >"$dir/logs/format.log" 2>&1; then
        cat "$dir/logs/format.log" >&2
        return 1
    fi
    # shellcheck disable=SC2086
    setsid "$java" $JVM_OPTS -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
        -Djava.net.preferIPv4Stack=true \
        -Dlog4j2.configurationFile="$TPC_SERVICES_DIR/kafka/log4j2.properties" \
        -Dkafka.logs.dir="$dir/logs" -cp "$lib/*" kafka.Kafka "$dir/server.properties" \
        </dev/null >"$dir/logs/stdout.log" 2>&1 &
    pid=$!
    echo "$pid" >"$dir/pid"
    started_ms=$(tpc_now_ms)
    while tpc_pid_alive "$pid"; do
        if grep -qs 'Address already in use' "$dir/logs/server.log" "$dir/logs/stdout.log"; then
            tpc_pidfile_stop "$dir/pid" 5
            return 2
        fi
        if grep -qs 'Kafka Server started' "$dir/logs/server.log"; then
            cat >"$dir/env" <<EOF
export TWOPC_TEST_SECURE_PLAINTEXT_PORT=${ports[0]}
export TWOPC_TEST_SECURE_SSL_PORT=${ports[2]}
export TWOPC_TEST_SECURE_SASL_PLAINTEXT_PORT=${ports[3]}
export TWOPC_TEST_SECURE_SASL_SSL_PORT=${ports[4]}
export TWOPC_TEST_SECURE_TLS_DIR='$dir/tls'
export TWOPC_TEST_SECURE_KEY_PASSWORD='$KEY_PASSWORD'
export TWOPC_TEST_SECURE_USER='$SASL_USER'
export TWOPC_TEST_SECURE_PASSWORD='$SASL_PASSWORD'
EOF
            return 0
        fi
        if [ $(($(tpc_now_ms) - started_ms)) -gt 120000 ]; then
            tpc_log "broker not ready after 120 s (logs: $dir/logs)"
            tpc_pidfile_stop "$dir/pid" 20
            return 1
        fi
        sleep 0.2
    done
    rm -f "$dir/pid"
    tail -n 30 "$dir/logs/server.log" "$dir/logs/stdout.log" >&2 || true
    tpc_log "broker exited during start-up (logs: $dir/logs)"
    return 1
}

secure_start() {
    local dir=$1 java lib attempt rc started_ms
    started_ms=$(tpc_now_ms)
    command -v openssl >/dev/null || tpc_die "openssl not found"
    java=$(secure_java)
    lib=$("$TPC_SERVICES_DIR/kafka.sh" fetch)
    mkdir -p "$dir"
    secure_make_tls "$dir"
    for attempt in 1 2 3; do
        rc=0
        secure_start_once "$dir" "$java" "$lib" || rc=$?
        if [ "$rc" -eq 0 ]; then
            tpc_log "Apache Kafka with TLS and SASL listeners ready in $(($(tpc_now_ms) - started_ms)) ms"
            return 0
        fi
        if [ "$rc" -ne 2 ] || [ "$attempt" -ge 3 ]; then
            break
        fi
        tpc_log "a port was taken; trying other ports"
    done
    tpc_die "Apache Kafka with TLS and SASL listeners did not start"
}

case "${1:-}" in
start | stop | destroy)
    [ $# -eq 2 ] || tpc_die "usage: kafka_secure.sh $1 DIR"
    mkdir -p "$(dirname "$2")"
    dir="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
    case "$1" in
    start) secure_start "$dir" ;;
    stop) tpc_pidfile_stop "$dir/pid" 30 ;;
    destroy)
        tpc_pidfile_stop "$dir/pid" 30
        rm -rf "$dir"
        ;;
    esac
    ;;
*) tpc_die "usage: kafka_secure.sh start|stop|destroy DIR" ;;
esac
