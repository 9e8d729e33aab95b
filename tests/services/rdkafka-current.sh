#!/usr/bin/env bash
# Fetch a current librdkafka for running the Kafka tests against it, beside Debian's 2.0.2.
#
#   rdkafka-current.sh DIR
#
# Debian 12 ships librdkafka 2.0.2. A current release is taken from the one binary distribution of it
# that this machine's registries carry: the manylinux wheel of confluent-kafka on PyPI bundles the
# shared library (librdkafka-<hash>.so.1, with OpenSSL, SASL and the compression libraries linked
# in: it needs only the C library). The library's C ABI is stable across 2.x, so programs linked against Debian's
# librdkafka.so.1 run with it when it comes first in LD_LIBRARY_PATH.
#
# On success prints the absolute path of DIR/<version>/lib (holding librdkafka.so.1) and exits 0; a second call finds it
# there without a download. When it cannot be had (no pip, no network, a refused download) it says
# why on stderr and exits 1: the caller skips those runs and says so.
#
# TWOPC_RDKAFKA_CURRENT picks the confluent-kafka release (default below); "off" skips the download.
set -euo pipefail

dir=${1:?usage: rdkafka-current.sh DIR}
release=${TWOPC_RDKAFKA_CURRENT:-2.16.1}
if [ "$release" = off ]; then
    echo "rdkafka-current.sh: TWOPC_RDKAFKA_CURRENT=off" >&2
    exit 1
fi
lib=$dir/$release/lib
if [ -e "$lib/librdkafka.so.1" ]; then
    cd "$lib" && pwd
    exit 0
fi

py=$(command -v python3 || true)
if [ -z "$py" ] || ! "$py" -m pip --version >/dev/null 2>&1; then
    echo "rdkafka-current.sh: no python3 with pip to download confluent-kafka $release from PyPI" >&2
    echo "rdkafka-current.sh: (apt-get install python3-pip)" >&2
    exit 1
fi

work=$dir/$release/download
rm -rf "$work" && mkdir -p "$work"
# The wheel for CPython 3.11 on glibc 2.28+ x86-64; its shared library does not depend on Python.
if ! "$py" -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
    --python-version 3.11 --implementation cp --dest "$work" "confluent-kafka==$release" >&2; then
    echo "rdkafka-current.sh: pip could not download confluent-kafka $release from PyPI" >&2
    exit 1
fi
wheel=$(ls "$work"/confluent_kafka-*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || {
    echo "rdkafka-current.sh: no wheel of confluent-kafka $release in $work" >&2
    exit 1
}
"$py" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
    "$wheel" "$work/x"
so=$(ls "$work"/x/confluent_kafka.libs/librdkafka-*.so* 2>/dev/null | head -1)
[ -n "$so" ] || {
    echo "rdkafka-current.sh: the wheel $wheel holds no librdkafka shared library" >&2
    exit 1
}
mkdir -p "$lib"
cp "$so" "$lib"/
ln -sf "$(basename "$so")" "$lib/librdkafka.so.1"
rm -rf "$work"
cd "$lib" && pwd
