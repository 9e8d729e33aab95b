#!/usr/bin/env bash
# The install as a new user meets it: `make install PREFIX=<temporary prefix>`, then
# examples/minimal.c built outside the source tree exactly as the README says,
#
#   cc app.c $(pkg-config --cflags --libs twopc)
#
# with only PKG_CONFIG_PATH pointing at the prefix, and run without LD_LIBRARY_PATH: it must find
# the installed libtwopc.so (from the prefix, not from elsewhere) and write its 1000 records. The
# installed `twopc` command must answer --help. Prints one line; exits non-zero on any failure.
#
#   install_test.sh       (from the repository root; MAKE and SANITIZE as the calling make has them)
set -euo pipefail

src=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
    echo "install test: FAILED: $*" >&2
    exit 1
}

${MAKE:-make} -s --no-print-directory -C "$src" install PREFIX="$tmp/prefix" >"$tmp/install.log" 2>&1 ||
    fail "make install PREFIX=$tmp/prefix: $(tail -n 20 "$tmp/install.log")"

mkdir "$tmp/app"
cp "$src/examples/minimal.c" "$tmp/app/app.c"
cd "$tmp/app"
unset LD_LIBRARY_PATH
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
# A sanitized library needs its runtime in the program too; nothing else is added to the README's line.
extra=()
[ -z "${SANITIZE:-}" ] || extra=(-fsanitize="$SANITIZE")
# shellcheck disable=SC2046 # the README's line, word splitting intended
cc app.c $(pkg-config --cflags --libs twopc) "${extra[@]}" -o app 2>"$tmp/cc.log" ||
    fail "cc app.c \$(pkg-config --cflags --libs twopc): $(cat "$tmp/cc.log")"
# Into a file first: grep -q stops reading at its match, and ldd, cut off, would fail the pipe.
ldd ./app >"$tmp/ldd.txt"
grep -q "libtwopc.so.0 => $tmp/prefix/lib/libtwopc.so.0" "$tmp/ldd.txt" ||
    fail "the program does not load libtwopc from the prefix: $(grep twopc "$tmp/ldd.txt" || echo 'not linked')"
mkdir out && ./app out ckpt >"$tmp/run.log" 2>&1 || fail "the program failed: $(cat "$tmp/run.log")"
records=$(cat out/* | grep -c '^record ' || true)
[ "$records" -eq 1000 ] || fail "the program wrote $records records instead of 1000"
"$tmp/prefix/bin/twopc" --help >"$tmp/help.log" 2>&1 || fail "twopc --help: $(cat "$tmp/help.log")"
grep -q "twopc checkpoints" "$tmp/help.log" || fail "twopc --help does not list its commands"
echo "install test: ok (make install into a new prefix, pkg-config build from outside the tree, 1000 records, twopc --help)"
