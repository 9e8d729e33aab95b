#!/usr/bin/env bash
# Run a command with the librdkafka that TWOPC_LIBRDKAFKA names:
#
#   TWOPC_LIBRDKAFKA=system|current tests/services/with-rdkafka.sh COMMAND [ARGS...]
#
# "system" (the default) changes nothing: programs load the librdkafka they were linked against
# (Debian's 2.0.2). "current" fetches a current release (tests/services/rdkafka-current.sh) and
# puts it first in LD_LIBRARY_PATH, or fails when it cannot be had. The benchmarks use it to
# measure with both: make bench-kafka TWOPC_LIBRDKAFKA=current.
set -euo pipefail

case "${TWOPC_LIBRDKAFKA:-system}" in
system) ;;
current)
    here=$(cd "$(dirname "$0")" && pwd)
    lib=$("$here/rdkafka-current.sh" build/rdkafka)
    export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "with-rdkafka.sh: librdkafka from $lib" >&2
    ;;
*)
    echo "with-rdkafka.sh: TWOPC_LIBRDKAFKA is \"$TWOPC_LIBRDKAFKA\"; it takes system or current" >&2
    exit 2
    ;;
esac
exec "$@"
