#!/usr/bin/env bash
# Make sure the Debian packages twopc needs are installed.
#
#   deps.sh build   what building the library and its tests needs
#   deps.sh all     also what the integration tests' servers need, clang-format and spin
#   deps.sh model   what `make model` needs (spin, a C compiler)
#   deps.sh plot    gnuplot, which only draws the soak test's series: installed when possible, a
#                   note when not, never a failure
#   deps.sh fuzz    what building the library and the libFuzzer harnesses (clang) needs
#   deps.sh compare what `make bench-compare` needs besides the servers: a JDK to build the Apache
#                   Flink side, and GNU time to measure both sides
#   deps.sh s3 VENV a Python virtual environment in VENV with moto[server] from PyPI, the local S3
#                   server of the checkpoint storage tests (tests/services/s3.sh); prints its
#                   python, or says why it cannot be had (no python3 venv, no pip, no network) and
#                   fails
#
# Installs what is missing with apt-get when run as root; otherwise prints the apt-get line to run and
# fails. Runs on every `make`, so the common case (nothing missing) is one dpkg-query call.
set -euo pipefail

BUILD_PACKAGES=(librdkafka-dev libpq-dev libssl-dev libmicrohttpd-dev libcurl4-openssl-dev check pkg-config gcc
    make)
SERVER_PACKAGES=(postgresql openjdk-17-jre-headless maven openssl clang-format prometheus)
FUZZ_PACKAGES=(clang libclang-rt-14-dev)
MODEL_PACKAGES=(spin gcc)
COMPARE_PACKAGES=(openjdk-17-jdk-headless maven time)

MOTO_RELEASE=${TWOPC_MOTO_RELEASE:-5.2.1}

case "${1:-}" in
s3)
    venv=${2:?usage: deps.sh s3 VENV}
    if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import moto.server' 2>/dev/null; then
        echo "$venv/bin/python"
        exit 0
    fi
    if ! python3 -c 'import venv, ensurepip' 2>/dev/null && [ "$(id -u)" -eq 0 ]; then
        { DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv ||
            { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv; }; } >&2 || true
    fi
    if ! python3 -m venv "$venv" >&2; then
        echo "deps.sh: could not make a Python virtual environment in $venv (apt-get install python3-venv)" >&2
        exit 1
    fi
    if ! "$venv/bin/python" -m pip install -q "moto[server]==$MOTO_RELEASE" >&2; then
        echo "deps.sh: pip could not install moto[server] $MOTO_RELEASE from PyPI into $venv" >&2
        exit 1
    fi
    echo "$venv/bin/python"
    exit 0
    ;;
build) wanted=("${BUILD_PACKAGES[@]}") ;;
all) wanted=("${BUILD_PACKAGES[@]}" "${SERVER_PACKAGES[@]}" "${MODEL_PACKAGES[@]}") ;;
model) wanted=("${MODEL_PACKAGES[@]}") ;;
fuzz) wanted=("${BUILD_PACKAGES[@]}" "${FUZZ_PACKAGES[@]}") ;;
compare) wanted=("${BUILD_PACKAGES[@]}" "${SERVER_PACKAGES[@]}" "${COMPARE_PACKAGES[@]}") ;;
plot)
    command -v gnuplot >/dev/null && exit 0
    if [ "$(id -u)" -ne 0 ]; then
        echo "deps.sh: no gnuplot, so no plot of the soak series (apt-get install gnuplot-nox)" >&2
        exit 0
    fi
    echo "deps.sh: installing gnuplot-nox (optional: only for the soak test's plot)" >&2
    { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends gnuplot-nox ||
        { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends gnuplot-nox; }; } >&2 ||
        echo "deps.sh: could not install gnuplot-nox: no plot of the soak series" >&2
    exit 0
    ;;
*)
    echo "usage: deps.sh build|all|model|plot|fuzz|compare|s3 VENV" >&2
    exit 2
    ;;
esac

installed=$(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' "${wanted[@]}" 2>/dev/null || true)
missing=()
for pkg in "${wanted[@]}"; do
    grep -q "^$pkg ii" <<<"$installed" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "deps.sh: missing Debian packages: ${missing[*]}" >&2
    echo "deps.sh: install them as root with:" >&2
    echo "apt-get update && apt-get install -y ${missing[*]}" >&2
    exit 1
fi

echo "deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >&2
# Prometheus without what it recommends (node exporter services): the metrics test starts it itself,
# and runs the package's promtool on the job's page and on docs/prometheus/'s alert rules.
plain=() bare=()
for pkg in "${missing[@]}"; do
    if [ "$pkg" = prometheus ]; then bare+=("$pkg"); else plain+=("$pkg"); fi
done
[ ${#plain[@]} -eq 0 ] || apt-get install -y -q "${plain[@]}" >&2
[ ${#bare[@]} -eq 0 ] || apt-get install -y -q --no-install-recommends "${bare[@]}" >&2
