#!/usr/bin/env bash
# Check the Promela models of twopc's commit protocol with Spin: the job (model/twopc.pml), one
# Kafka transactional id against the transaction coordinator of protocol v1 and v2
# (model/kafka_txn.pml), the owners of a unit, a zombie beside the owner that took it over
# (model/owner.pml), and incremental checkpoints of keyed state, their chains and retention
# (model/chain.pml).
#
#   model/check.sh [BUILD_DIR]
#   MODEL_LARGE=1 model/check.sh     also rescale 2 -> 3 (PMAX 3): a bitstate (supertrace) search of
#                                    about 22 million states, not exhaustive, a few minutes; not in CI
#
# The model must pass every configuration below, searched exhaustively (no state left out: the
# run fails if Spin reaches its memory bound). Then each mutant, a model with one rule broken on
# purpose, must yield a counterexample: if one stops failing, the model no longer sees that rule
# and has become vacuous there. Prints the state counts and times. Exit status 0 = all as expected.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${1:-build/model}
mkdir -p "$out"
command -v spin >/dev/null || {
    echo "model: spin is not installed (make deps installs it)" >&2
    exit 1
}

# Bounds common to every run are in twopc.pml (pool size 2, checkpoint ids < 10, ...); these vary.
declare -A CONF=(
    [crash]="-DPA=2 -DPB=1 -DLEN=1 -DMAXCRASH=1 -DMAXABORT=0 -DMAXDAMAGE=1 -DPERMAX=2"
    [rescale]="-DPA=1 -DPB=2 -DLEN=1 -DMAXCRASH=1 -DMAXABORT=1 -DMAXDAMAGE=0 -DPERMAX=2"
    [reuse]="-DPA=2 -DPB=2 -DLEN=2 -DMAXCRASH=0 -DMAXABORT=1 -DMAXDAMAGE=0 -DPERMAX=3"
    [twocrash]="-DPA=1 -DPB=1 -DLEN=1 -DMAXCRASH=2 -DMAXABORT=0 -DMAXDAMAGE=1 -DPERMAX=2"
)
CONF[rescale3]="-DPA=2 -DPB=3 -DPMAX=3 -DLEN=1 -DMAXCRASH=1 -DMAXABORT=0 -DMAXDAMAGE=0 -DPERMAX=2"
# the same with the PostgreSQL sink in place of the Kafka one
for c in crash rescale twocrash; do CONF[pg-$c]="-DSINK_PG ${CONF[$c]}"; done
# one transactional id, the world touching it (3 faults), the sink beginning 3 transactions on it
CONF[kafka-v1]="-DNT=3 -DMAXFAULT=3"
CONF[kafka-v2]="-DTV2 -DNT=3 -DMAXFAULT=3"
# owners of a unit: two (the first a zombie after the take-over) with 3 records and 2 periodic
# checkpoints per owner, or three with 1 record and only the final checkpoint
CONF[owner]="-DNOWN=2 -DNSEG=3 -DPERIODIC=2"
CONF[owner3]="-DNOWN=3 -DNSEG=1 -DPERIODIC=0"
for c in owner owner3; do CONF[$c-pg]="-DSINK_PG ${CONF[$c]}"; done
# incremental keyed checkpoints: 2 keys, 2 changes, 5 checkpoints, 2 in flight, chains of 3 (or 2)
CONF[chain]="-DK=2 -DNV=1 -DMAXUPD=2 -DMAXCK=5 -DCONC=2 -DMAXCHAIN=3 -DRETAIN=1"
CONF[chain2]="-DK=2 -DNV=1 -DMAXUPD=2 -DMAXCK=5 -DCONC=2 -DMAXCHAIN=2 -DRETAIN=1"
declare -A MODEL=([kafka-v1]=kafka_txn [kafka-v2]=kafka_txn
    [owner]=owner [owner-pg]=owner [owner3]=owner [owner3-pg]=owner
    [chain]=chain [chain2]=chain) # the others: twopc
MAIN=(crash rescale reuse twocrash pg-crash pg-rescale pg-twocrash kafka-v1 kafka-v2
    owner owner-pg owner3 owner3-pg chain chain2)
LIVE=(crash pg-crash)
# mutant:configuration; a mutant's search stops at its first counterexample.
MUTANTS=(INIT_EARLY:rescale OLDER:crash SNAPSHOT_COMMIT:crash BEGIN_AFTER_FINISH:crash
    NO_RECORD_ON_RESTORE:twocrash OLDER:pg-crash PG_CLEAN_ALL:pg-rescale STRICT_NEWER:crash
    INFER_COMMITTED:kafka-v1 EPOCH_BEFORE_BUMP:kafka-v2 TRUST_SUCCESS:kafka-v1
    NO_CAS:owner NO_CAS:owner-pg NEWER_ANY:owner3 NEWER_ANY:owner3-pg SHARED_IDS:owner
    PG_ROLLBACK_ANY:owner-pg OVERWRITE_FILE:owner3 OVERWRITE_FILE:owner3-pg
    NO_REF_CHECK:chain RETAIN_NEWEST:chain FORGET_AT_BARRIER:chain)

MEMLIM=${MODEL_MEMLIM:-4000} # MB
fail=0

# build NAME FLAGS PANFLAGS [OPT] [MODEL]: compile a verifier for MODEL.pml (twopc) with FLAGS
# into $out/NAME
build() {
    local dir="$out/$1" pml=${5:-twopc}.pml
    rm -rf "$dir"
    mkdir -p "$dir"
    cp "model/$pml" "$dir/"
    (cd "$dir" && spin -a $2 "$pml" >spin.log 2>&1 &&
        cc ${4:--O2} -w $3 -DVECTORSZ=2048 -DMEMLIM=$MEMLIM -o pan pan.c) || {
        echo "model: could not build $1" >&2
        cat "$dir/spin.log" >&2
        return 1
    }
}

# field NAME PATTERN: a figure from the verifier's report
field() { sed -n "s/$2/\\1/p" "$out/$1/pan.out" | head -1; }

report() {
    local name=$1 verdict=$2
    printf '%-40s %-7s states %10s  transitions %10s  depth %4s  %6ss\n' "$name" "$verdict" \
        "$(field "$name" '^ *\([0-9e.+]*\) states, stored.*')" \
        "$(field "$name" '^ *\([0-9e.+]*\) transitions.*')" \
        "$(field "$name" '.*depth reached \([0-9]*\).*')" \
        "$(field "$name" '^pan: elapsed time \([0-9.e+]*\) seconds.*')"
}

if [ -n "${MODEL_LARGE:-}" ]; then
    MAIN+=(rescale3)
    MUTANTS+=(INIT_EARLY:rescale3)
fi

for c in "${MAIN[@]}"; do
    search="-DSAFETY -DCOLLAPSE" width=24
    [ "$c" = rescale3 ] && search="-DSAFETY -DBITSTATE" width=31
    build "$c" "${CONF[$c]}" "$search" -O2 "${MODEL[$c]:-}" || {
        fail=1
        continue
    }
    (cd "$out/$c" && ./pan -m100000 -w$width >pan.out 2>&1) || true
    if grep -q "errors: 0" "$out/$c/pan.out" && ! grep -q "reached -DMEMLIM\|Search not completed" "$out/$c/pan.out"; then
        report "$c" pass
    else
        report "$c" FAIL
        grep -E "^pan:|error" "$out/$c/pan.out" >&2 || true
        echo "model: see the counterexample with: (cd $out/$c && spin -t ${CONF[$c]} ${MODEL[$c]:-twopc}.pml | grep MSC)" >&2
        fail=1
    fi
done

# Liveness: every run ends (ltl ends, acceptance cycles under weak fairness).
for c in "${LIVE[@]}"; do
    dir="ends-$c"
    build "$dir" "${CONF[$c]} -DLTL_ENDS" "-DCOLLAPSE -DNOREDUCE -DNFAIR=4" || {
        fail=1
        continue
    }
    (cd "$out/$dir" && ./pan -a -f -m100000 -w24 >pan.out 2>&1) || true
    if grep -q "errors: 0" "$out/$dir/pan.out" && ! grep -q "reached -DMEMLIM\|Search not completed" "$out/$dir/pan.out"; then
        report "$dir" pass
    else
        report "$dir" FAIL
        grep -E "^pan:|error" "$out/$dir/pan.out" >&2 || true
        fail=1
    fi
done

for m in "${MUTANTS[@]}"; do
    mutant=${m%%:*} c=${m#*:}
    name="mutant $mutant ($c)"
    dir="mutant-$mutant-$c"
    build "$dir" "${CONF[$c]} -DMUTANT_$mutant" "-DSAFETY -DCOLLAPSE" -O1 "${MODEL[$c]:-}" || {
        fail=1
        continue
    }
    (cd "$out/$dir" && ./pan -m100000 -w24 >pan.out 2>&1) || true
    what=$(sed -n 's/^pan:1: \(.*\) (at depth.*/\1/p' "$out/$dir/pan.out" | head -1)
    if [ -n "$what" ]; then
        report "$dir" caught
        echo "    counterexample: $what; its last steps:"
        (cd "$out/$dir" && spin -t ${CONF[$c]} -DMUTANT_$mutant "${MODEL[$c]:-twopc}.pml" 2>/dev/null |
            sed -n 's/^ *MSC: /      /p' | tail -6)
    else
        report "$dir" MISSED
        echo "model: mutant $mutant gave no counterexample: the model has lost that rule" >&2
        fail=1
    fi
done

[ $fail -eq 0 ] && echo "model: ok" || echo "model: FAILED" >&2
exit $fail
