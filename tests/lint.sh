#!/usr/bin/env bash
# The structure of the tree, checked (make lint; CI runs it): the rules of docs/architecture.md's map
# of rooms that the compiler's include paths do not already enforce.
#
# - Rooms: kit/, runtime/, txn/, each folder of connectors/ (kafka/ counts as its three rooms
#   sink/, source/ and wire/), tools/. A room X depends on room Y when a file of X includes a header
#   that lives in Y. The arrows between rooms must not close a circle, and must point down the
#   layers (connectors -> txn -> runtime -> kit; tools on top). A connector's rooms never include
#   each other, except the Kafka sink and source, which may include the wire client's header.
# - cluster/ (a job run as units over several processes) sits above the runtime and the connectors:
#   public headers and the Kafka wire client's header only.
# - The tools include public headers (include/twopc/), their own, and the Kafka wire client's
#   header only: never a connector's or a layer's internal header.
# - Plumbing has one home, the kit (include/twopc/tpc_kit.h, kit/): no monotonic clock, no
#   condition-variable clock setting, no hand-written byte loads or stores, no hand-written doubling
#   array and no private hash table outside it.
# - The test matrix (tests/matrix) names existing binaries, and docs/testing.md's table says the same.
#
# Prints every violation with its file and line; exits 1 if there is one.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

ROOMS=(kit runtime txn connectors/file connectors/postgres connectors/kafka/sink
    connectors/kafka/source connectors/kafka/wire connectors/s3 cluster tools)
# The rooms each room may include headers of (besides include/twopc/ and itself).
declare -A MAY=(
    [kit]=""
    [runtime]=""
    [txn]=""
    [connectors/file]=""
    [connectors/postgres]=""
    [connectors/kafka/sink]="connectors/kafka/wire"
    [connectors/kafka/source]="connectors/kafka/wire"
    [connectors/kafka/wire]=""
    [connectors/s3]=""
    [cluster]="connectors/kafka/wire"
    [tools]="connectors/kafka/wire"
)
bad=0
say() {
    echo "lint: $*" >&2
    bad=1
}

# The room that holds a header, by its name (headers' names are unique across the tree).
declare -A HOME_OF=()
for room in "${ROOMS[@]}"; do
    for h in "$room"/*.h; do
        [ -e "$h" ] && HOME_OF[$(basename "$h")]=$room
    done
done

declare -A EDGE=()
for room in "${ROOMS[@]}"; do
    for f in "$room"/*.c "$room"/*.h; do
        [ -e "$f" ] || continue
        while IFS=: read -r line inc; do
            name=$(sed -E 's/.*#include *"([^"]+)".*/\1/' <<<"$inc")
            target=${HOME_OF[$(basename "$name")]:-}
            [ -n "$target" ] && [ "$target" != "$room" ] || continue
            EDGE["$room $target"]=1
            case " ${MAY[$room]} " in
            *" $target "*) ;;
            *) say "$f:$line: includes \"$name\", a private header of $target/ ($room/ may include" \
                "public headers${MAY[$room]:+ and those of ${MAY[$room]}/} only)" ;;
            esac
        done < <(grep -n '^ *# *include *"' "$f")
    done
done

# No circle: take away rooms that depend on no remaining room until none is left.
left=("${ROOMS[@]}")
while :; do
    keep=()
    for r in "${left[@]}"; do
        for s in "${left[@]}"; do
            if [ "$r" != "$s" ] && [ -n "${EDGE["$r $s"]:-}" ]; then
                keep+=("$r")
                break
            fi
        done
    done
    [ "${#keep[@]}" -lt "${#left[@]}" ] || break
    left=("${keep[@]}")
    [ "${#left[@]}" -gt 0 ] || break
done
[ "${#left[@]}" -eq 0 ] || say "rooms that include each other in a circle: ${left[*]}"

# One home for plumbing.
PLUMBING_DIRS=(runtime txn connectors cluster tools include)
while IFS= read -r hit; do
    say "$hit: a clock or a condition variable's clock outside the kit (use tpc_clock_ms/us," \
        "tpc_cond_init, tpc_cond_wait_us from tpc_kit.h)"
done < <(grep -rnE 'CLOCK_MONOTONIC|pthread_condattr_setclock' "${PLUMBING_DIRS[@]}" --include='*.[ch]' |
    grep -v '^include/twopc/tpc_kit.h:')
while IFS= read -r hit; do
    say "$hit: a hand-written byte codec outside the kit (use the loads, stores, tpc_buf_t and" \
        "tpc_reader_t of tpc_kit.h)"
done < <(grep -rnE '<< *8\)? *\| *[a-z_]+\[|>> *\(8 \*|>>= *8\b|\] *<< *(8|16|24|32|40|48|56)\b|\(uint8_t\) *\([^)]*>> *(8|16|24|32|40|48|56)\)|\b(htonl|ntohl|htobe(16|32|64)|be(16|32|64)toh)\(' \
    "${PLUMBING_DIRS[@]}" --include='*.[ch]' | grep -v '^include/twopc/tpc_kit.h:' |
    grep -vE '^[^:]+:[0-9]+: *(/?\*|//)')

# A doubling array: a realloc (tpc__xrealloc too) whose size counts elements (sizeof, on its line or
# the next), with a capacity doubled (x * 2, 2 * x, x *= 2, x <<= 1) on its line, the line after or
# the four before. A byte buffer's realloc counts bytes (no sizeof) and is not matched here: the
# next rule finds its doubling loop. Comments are skipped.
while IFS= read -r hit; do
    say "$hit: a hand-written doubling array outside the kit (use tpc_array_grow from tpc_kit.h;" \
        "the runtime's tpc__xgrow aborts when memory runs out)"
done < <(find "${PLUMBING_DIRS[@]}" -name '*.[ch]' | sort | while IFS= read -r f; do
    awk -v f="$f" '
        { line[NR] = $0 }
        END {
            for (i = 1; i <= NR; i++) {
                if (line[i] !~ /realloc\(/ || line[i] ~ /^ *(\/\*|\*\/|\* |\*$|\/\/)/)
                    continue
                if ((line[i] " " line[i + 1]) !~ /sizeof/)
                    continue
                win = "\n"
                for (j = i - 4; j <= i + 1; j++)
                    if (j >= 1 && j <= NR) {
                        t = line[j]
                        gsub(/sizeof/, "", t)
                        win = win t "\n"
                    }
                if (win ~ /[A-Za-z0-9_\]] *(\*= *2|<<= *1|\* *2[^0-9.]|<< *1[^0-9])/ ||
                    win ~ /[^A-Za-z0-9_.]2 *\* *[A-Za-z_(]/)
                    printf "%s:%d:%s\n", f, i, line[i]
            }
        }' "$f"
done)
# A hand-grown byte buffer: a capacity doubled in place (x *= 2, x <<= 1) outside the kit, the loop
# of a buffer that grows by hand (tpc_array_grow with size 1, or tpc_array_next_cap for one that
# must move by hand).
while IFS= read -r hit; do
    say "$hit: a hand-grown buffer outside the kit (use tpc_array_grow or tpc_array_next_cap from" \
        "tpc_kit.h)"
done < <(grep -rnE '(\*= *2|<<= *1) *[;)]' "${PLUMBING_DIRS[@]}" --include='*.[ch]' |
    grep -v '^include/twopc/tpc_kit.h:' | grep -vE '^[^:]+:[0-9]+: *(/\*|\*/|\* |\*$|//)')
# A private hash table: a slot taken as a hash masked to a power of two (x[h & (n - 1)], a mask
# made as n - 1, an index ANDed with it), or a chained table's array of bucket pointers.
while IFS= read -r hit; do
    say "$hit: a private hash table outside the kit (use tpc_hash_t or tpc_slots_t from tpc_kit.h)"
done < <(grep -rnE '\[[^]]*& *\( *[A-Za-z_][A-Za-z0-9_>.-]* *- *1 *\) *\]|\bmask *= *[^;=]*- *1 *;|& *mask\b|\*\* *[a-z_]*buckets\b|% *[A-Za-z_>.-]*buckets\b' \
    "${PLUMBING_DIRS[@]}" --include='*.[ch]' | grep -v '^include/twopc/tpc_kit.h:' |
    grep -vE '^[^:]+:[0-9]+: *(/\*|\*/|\* |\*$|//)')

# The test matrix is stated once, in tests/matrix; docs/testing.md shows it as a table, which must say
# the same, and every binary it names must exist.
matrix_rows=$(awk '$1 !~ /^#/ && NF >= 3 {print $1, $2, $3}' tests/matrix)
doc_rows=$(sed -n '/^### The test matrix/,/^## /p' docs/testing.md |
    sed -n 's/^| `\(check_[a-z0-9_]*\)` | \([a-z-]*\) | \([a-z]*\) |$/\1 \2 \3/p')
if [ "$matrix_rows" != "$doc_rows" ]; then
    say "docs/testing.md: the table under \"The test matrix\" differs from tests/matrix:"
    diff <(echo "$matrix_rows") <(echo "$doc_rows") | sed 's/^/lint:   /' >&2
    bad=1
fi
while read -r name _; do
    [ -z "$name" ] || [ -f "tests/integration/$name.c" ] || [ -f "tests/unit/$name.c" ] || {
        say "tests/matrix: $name is not a test binary (no tests/unit/$name.c or tests/integration/$name.c)"
        bad=1
    }
done <<<"$matrix_rows"

if [ "$bad" -eq 0 ]; then
    echo "lint: ok (${#ROOMS[@]} rooms, ${#EDGE[@]} arrows between them, no circle, no private" \
        "include, no plumbing outside the kit)"
fi
exit "$bad"
