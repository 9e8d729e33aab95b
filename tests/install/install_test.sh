#!/usr/bin/env bash
# The install as a new user meets it: `make install PREFIX=<temporary prefix>`, then
# examples/minimal.c built outside the source tree exactly as the README says,
#
#   cc app.c $(pkg-config --cflags --libs twopc)
#
# with only PKG_CONFIG_PATH pointing at the prefix, and run without LD_LIBRARY_PATH: it must find
# the installed libtwopc.so (from the prefix, not from elsewhere) and write its 1000 records. The
# installed `twopc` command must answer --help. Then the previous release's side of the ABI: the
# same program as that release shipped it, compiled against that release's headers (taken from git
# at the commit named in tests/install/previous-release), must run against the new library, and
# every function those headers declare must still be exported by it. Prints one line a part; exits
# non-zero on any failure.
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

# ---- the previous release's program and headers against the new library ----------------------
read -r prev_version prev_commit <"$src/tests/install/previous-release"
if ! git -C "$src" cat-file -e "$prev_commit^{commit}" 2>/dev/null; then
    echo "install test: previous release $prev_version not checked: commit $prev_commit is not in this" \
        "checkout's history (a shallow clone?); fetch it to run this part"
    exit 0
fi
mkdir -p "$tmp/prev/include" "$tmp/prev/app"
for h in $(git -C "$src" ls-tree --name-only "$prev_commit" include/twopc/); do
    git -C "$src" show "$prev_commit:$h" >"$tmp/prev/include/$(basename "$h")"
done
git -C "$src" show "$prev_commit:examples/minimal.c" >"$tmp/prev/app/app.c"
cd "$tmp/prev/app"
# shellcheck disable=SC2046 # pkg-config's words, split on purpose; only the library, not the new headers
cc app.c -I"$tmp/prev/include" $(pkg-config --libs twopc) "${extra[@]}" -o app 2>"$tmp/cc-prev.log" ||
    fail "the previous release's minimal.c against its own headers: $(cat "$tmp/cc-prev.log")"
mkdir out && ./app out ckpt >"$tmp/run-prev.log" 2>&1 ||
    fail "the previous release's program failed against the new library: $(cat "$tmp/run-prev.log")"
records=$(cat out/* | grep -c '^record ' || true)
[ "$records" -eq 1000 ] || fail "the previous release's program wrote $records records instead of 1000"
# Every function the old headers declare (TPC_API ... name(...)) must still be exported.
nm -D --defined-only "$tmp/prefix/lib/libtwopc.so.0" | awk '{print $3}' | sort -u >"$tmp/exported.txt"
grep -hv "^ *#" "$tmp/prev/include/"*.h | tr '\n' ' ' | grep -oE 'TPC_API[^;{(]*\(' |
    sed -E 's/.*[^A-Za-z0-9_]([A-Za-z_][A-Za-z0-9_]*) *\($/\1/' | sort -u >"$tmp/declared.txt"
[ -s "$tmp/declared.txt" ] || fail "found no TPC_API declaration in the previous release's headers"
missing=$(comm -23 "$tmp/declared.txt" "$tmp/exported.txt" | tr '\n' ' ')
[ -z "$missing" ] || fail "functions of release $prev_version no longer exported: $missing"
echo "install test: ok (release $prev_version's minimal.c built with its own headers runs against the" \
    "new library; its $(wc -l <"$tmp/declared.txt") functions are all exported)"
