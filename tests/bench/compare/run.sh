#!/usr/bin/env bash
# `make bench-compare`: the same bounded Kafka -> transform -> Kafka job with exactly-once output on
# twopc (twopc_job.c) and on Apache Flink in a local MiniCluster with KafkaSink EXACTLY_ONCE
# (FlinkKafkaJob.java, built here with Maven), on the same broker, over the same input topic, with
# the same producer settings and 1 s checkpoints, in interleaved rounds (the side that goes first
# alternates). Each run's output is read back by an independent read_committed consumer
# (topic_tool.c) and must hold every input record exactly once, upper-cased; a run that does not
# fails the benchmark. The same job also writes into PostgreSQL (FlinkPgJob.java: JdbcSink exactly
# once with XA transactions; twopc's PostgreSQL sink), and runs unbounded for visibility latency.
#
#   tests/bench/compare/run.sh BUILD_DIR
#
# Environment: TWOPC_TEST_KAFKA_BOOTSTRAP (required), COMPARE_SIZES (records, default
# "1000000 5000000"), COMPARE_PARALLELISM (default "1 2"), COMPARE_ROUNDS (default 3),
# COMPARE_LATENCY_RATE (records a second of the visibility latency part, default 50000; 0 skips
# it), COMPARE_LATENCY_SECONDS (its measured seconds, default 10) and COMPARE_PG_SIZES (records of
# the Kafka -> PostgreSQL runs, default 1000000; 0 skips them, and so does an unset
# TWOPC_TEST_PG_CONNINFO). COMPARE_SIZES=0 skips the Kafka -> Kafka runs.
# Prints, per side, size and parallelism, the median over the rounds:
#   bench compare <side>_<metric>_p<P>_<size> <value> <unit>
# with metrics rec_per_s (start of the process to its exit), steady_rec_per_s (first to last output
# record, by the broker's append times), cpu_s_per_m (user + system CPU seconds per million
# records), rss_mb (peak resident memory), end_ms (last output record appended to process exit),
# and the ratios twopc / flink; the same with sides twopc_pg and flink_pg for Kafka -> PostgreSQL
# (steady: first to last row written; end_ms: last row written to exit; a job that fails is
# counted in pg_job_failures, and COMPARE_TIMEOUT, default 900 s, bounds every job); then, from the visibility latency part (each side's job unbounded
# at parallelism 1, records appended at COMPARE_LATENCY_RATE a second, the time from a record's
# append to its first sight by a read_committed consumer of the output), <side>_visibility_p50_ms_
# <rate> and <side>_visibility_p99_ms_<rate> (medians over the rounds) and their ratio. The raw
# rows go to BUILD_DIR/compare/results.tsv and latency.tsv, and with gnuplot
# installed BUILD_DIR/compare/*.png are drawn from the medians (BUILD_DIR/compare/medians.tsv) by
# tests/bench/compare/plot.gp.
#
# The keyed part runs the keyed totals job (purchases keyed by user -> running count and total per
# user in keyed state -> Kafka, exactly once) on twopc (twopc_keyed_job.c) with full checkpoints
# (side twopc) and with incremental ones (twopc_incremental), and on Flink (FlinkKeyedJob.java)
# with the HashMap state backend (flink_hashmap) and with RocksDB and incremental checkpoints
# (flink_rocksdb); COMPARE_KEYED_SIDES chooses among them (default: all four). COMPARE_KEYED lists
# its runs as RECORDS:KEYS (default
# "5000000:1000000 20000000:10000000": purchase i is user i % KEYS's), at the parallelisms of
# COMPARE_KEYED_PARALLELISM (default: COMPARE_PARALLELISM), COMPARE_ROUNDS rounds with the side
# going first rotating. Each run's output is checked by topic_tool totals: every user's counts
# 1..n once each and the last total the sum of the user's amounts, or the benchmark fails; a job
# that fails is counted in keyed_job_failures and left out. It prints the medians
#   bench compare keyed_<side>_<metric>_p<P>_<keys>keys <value> <unit>
# with the metrics above plus ckpt_ms (mean checkpoint duration, trigger to completion) and
# ckpt_mb (mean bytes a checkpoint wrote: the new files in the checkpoint folder for twopc, the
# checkpointed size of Flink's checkpoint statistics, only the new SST files with RocksDB
# incremental), and the ratios keyed_ratio_<twopc side>_<metric>_..._vs_<flink side>. Raw rows
# in BUILD_DIR/compare/keyed.tsv, medians in keyed_medians.tsv, plots compare_keyed_*.png.
#
# COMPARE_PARTS chooses the parts (default "kafka pg latency keyed"): e.g. COMPARE_PARTS=keyed runs
# only the keyed part.
set -euo pipefail

build=${1:?usage: run.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
boot=${TWOPC_TEST_KAFKA_BOOTSTRAP:?TWOPC_TEST_KAFKA_BOOTSTRAP is not set}
sizes=${COMPARE_SIZES:-1000000 5000000}
pars=${COMPARE_PARALLELISM:-1 2}
rounds=${COMPARE_ROUNDS:-3}
limit=${COMPARE_TIMEOUT:-900} # seconds one job may take
[ "$sizes" != 0 ] || sizes= # COMPARE_SIZES=0: no Kafka -> Kafka runs
parts=${COMPARE_PARTS:-kafka pg latency keyed}
for part in $parts; do
    case $part in
    kafka | pg | latency | keyed) ;;
    *)
        echo "bench-compare: unknown part \"$part\" in COMPARE_PARTS (kafka, pg, latency, keyed)" >&2
        exit 2
        ;;
    esac
done
# part NAME: whether COMPARE_PARTS has it
part() { [[ " $parts " == *" $1 "* ]]; }
part kafka || sizes=
out=$build/compare
mkdir -p "$out"
out=$(cd "$out" && pwd)
tool=$build/bench/compare_topic_tool
job=$build/bench/compare_twopc_job
keyed_job=$build/bench/compare_twopc_keyed_job

echo "bench-compare: building the Flink side with Maven" >&2
mvn -q -B -f "$here/pom.xml" -Dcompare.out="$out/flink" package >&2
cp="$out/flink/flink-compare-1.jar:$out/flink/lib/*"

tag=$(date +%s)-$$
results=$out/results.tsv
printf 'side\trecords\tparallelism\tround\trec_per_s\tsteady_rec_per_s\tcpu_s_per_m\trss_mb\tend_ms\n' \
    > "$results"

# record_row SIDE RECORDS PARALLELISM ROUND START_MS END_MS FIRST_MS LAST_MS: one row of
# results.tsv from the run's times (START/END: process, FIRST/LAST: output) and GNU time's figures.
record_row() {
    local user sys rss_kb
    read -r _ user sys rss_kb < "$out/time.txt"
    awk -v s="$1" -v n="$2" -v p="$3" -v r="$4" -v t0="$5" -v t1="$6" -v f="$7" -v l="$8" \
        -v u="$user" -v y="$sys" -v k="$rss_kb" 'BEGIN {
        steady = l > f ? n * 1000 / (l - f) : 0
        printf "%s\t%d\t%d\t%d\t%.0f\t%.0f\t%.2f\t%.1f\t%d\n", s, n, p, r, n * 1000 / (t1 - t0),
               steady, (u + y) / (n / 1e6), k / 1024, t1 - l }' >> "$results"
    tail -1 "$results" >&2
}

# over_rounds FUNCTION INPUT_PREFIX WHAT SIZES: for each size a filled input topic, then FUNCTION
# SIDE RECORDS PARALLELISM ROUND INPUT for every parallelism and round, the side going first
# alternating.
over_rounds() {
    local fn=$1 prefix=$2 what=$3 n p r side order input
    for n in $4; do
        input=$prefix-$n-$tag
        echo "bench-compare: writing $n records into $input ($what)" >&2
        "$tool" fill "$boot" "$input" 2 "$n"
        for p in $pars; do
            for ((r = 1; r <= rounds; r++)); do
                if ((r % 2)); then order="twopc flink"; else order="flink twopc"; fi
                for side in $order; do "$fn" "$side" "$n" "$p" "$r" "$input"; done
            done
        done
    done
}

# run SIDE RECORDS PARALLELISM ROUND INPUT
run() {
    local side=$1 n=$2 p=$3 round=$4 input=$5
    local topic=cmp-out-$side-$n-$p-$round-$tag prefix=cmp-$side-$n-$p-$round-$tag
    local times=$out/time.txt ckpt=$out/ckpt-$side-$tag
    "$tool" create "$boot" "$topic" 2
    rm -rf "$ckpt" && mkdir -p "$ckpt"
    local start end
    start=$(date +%s%3N)
    if [ "$side" = twopc ]; then
        /usr/bin/time -f '%e %U %S %M' -o "$times" timeout "$limit" "$job" "$boot" "$input" "$topic" "$p" "$prefix" "$ckpt" \
            > "$out/$side.log" 2>&1
    else
        /usr/bin/time -f '%e %U %S %M' -o "$times" timeout "$limit" java -cp "$cp" twopc.bench.FlinkKafkaJob \
            "$boot" "$input" "$topic" "$p" "$prefix" > "$out/$side.log" 2>&1
    fi || { echo "bench-compare: the $side job failed, see $out/$side.log" >&2; exit 1; }
    end=$(date +%s%3N)
    rm -rf "$ckpt"
    local m
    m=$("$tool" measure "$boot" "$topic" "$n")
    read -r _ count _ distinct _ foreign _ upper _ first _ last <<< "$m"
    if [ "$count" != "$n" ] || [ "$distinct" != "$n" ] || [ "$upper" != "$n" ] || [ "$foreign" != 0 ]; then
        echo "bench-compare: $side wrote $m for $n input records (not exactly once)" >&2
        exit 1
    fi
    record_row "$side" "$n" "$p" "$round" "$start" "$end" "$first" "$last"
}

over_rounds run cmp-in "Kafka -> Kafka" "$sizes"

# Kafka -> PostgreSQL: the same job into a table (id bigint primary key, v bytea, and the time each
# row was written), Flink with JdbcSink exactly once (XA) and twopc with its PostgreSQL sink (COPY);
# rows of sides "twopc_pg" and "flink_pg" in results.tsv, steady rate from the first to the last
# row written. Every row must be there once, upper-cased.
pg_sizes=${COMPARE_PG_SIZES:-1000000}
conninfo=${TWOPC_TEST_PG_CONNINFO:-}
if ! part pg; then
    pg_sizes=
elif [ -z "$conninfo" ] || [ "$pg_sizes" = 0 ]; then
    echo "bench-compare: no Kafka -> PostgreSQL part (TWOPC_TEST_PG_CONNINFO unset or COMPARE_PG_SIZES=0)" >&2
    pg_sizes=
fi
ci_field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<< "$conninfo"; }
jdbc_url="jdbc:postgresql://$(ci_field host):$(ci_field port)/$(ci_field dbname)"
jdbc_user=$(ci_field user)
upper_hex=$(awk 'BEGIN { for (i = 0; i < 100; i++) printf "%02x", 65 + i % 26 }')
# pg_run SIDE RECORDS PARALLELISM ROUND INPUT
pg_run() {
    local side=$1 n=$2 p=$3 round=$4 input=$5
    local table=cmp_pg_${side}_${n}_${p}_${round}_${tag//-/_} prefix=cmp-pg-$side-$n-$p-$round-$tag
    local times=$out/time.txt ckpt=$out/ckpt-pg-$side-$tag start end m
    psql "$conninfo" -qXc "CREATE TABLE $table (id bigint PRIMARY KEY, v bytea NOT NULL,
                           at timestamptz NOT NULL DEFAULT clock_timestamp())"
    rm -rf "$ckpt" && mkdir -p "$ckpt"
    start=$(date +%s%3N)
    if [ "$side" = twopc ]; then
        /usr/bin/time -f '%e %U %S %M' -o "$times" timeout "$limit" "$job" "$boot" "$input" "pg:$table" "$p" "$prefix" \
            "$ckpt" > "$out/$side-pg.log" 2>&1
    else
        /usr/bin/time -f '%e %U %S %M' -o "$times" timeout "$limit" java -cp "$cp" twopc.bench.FlinkPgJob "$boot" \
            "$input" "$jdbc_url" "$jdbc_user" "$table" "$p" > "$out/$side-pg.log" 2>&1
    fi || {
        # A side's own failure (Flink's XA sink gave up once at parallelism 2) is reported and
        # counted, not taken for a result; a wrong result below still fails the benchmark.
        echo "bench-compare: the $side PostgreSQL job failed (p$p, round $round), see $out/$side-pg-failed-$p-$round.log:" >&2
        cp "$out/$side-pg.log" "$out/$side-pg-failed-$p-$round.log"
        grep -m3 -i "exception\|error" "$out/$side-pg.log" >&2 || true
        pg_failures=$((pg_failures + 1))
        psql "$conninfo" -qXc "DROP TABLE $table"
        return 0
    }
    end=$(date +%s%3N)
    rm -rf "$ckpt"
    m=$(psql "$conninfo" -AtXF ' ' -c "SELECT count(*), count(DISTINCT id),
            count(*) FILTER (WHERE id < 0 OR id >= $n), count(*) FILTER (WHERE v = '\\x$upper_hex'),
            (extract(epoch FROM min(at)) * 1000)::bigint, (extract(epoch FROM max(at)) * 1000)::bigint
            FROM $table")
    local count distinct foreign upper first last
    read -r count distinct foreign upper first last <<< "$m"
    if [ "$count" != "$n" ] || [ "$distinct" != "$n" ] || [ "$upper" != "$n" ] || [ "$foreign" != 0 ]; then
        echo "bench-compare: $side wrote rows (count distinct foreign upper) $m for $n records" >&2
        exit 1
    fi
    psql "$conninfo" -qXc "DROP TABLE $table"
    record_row "${side}_pg" "$n" "$p" "$round" "$start" "$end" "$first" "$last"
}
pg_failures=0
over_rounds pg_run cmp-pgin "Kafka -> PostgreSQL" "$pg_sizes"

[ -z "$pg_sizes" ] || echo "bench compare pg_job_failures $pg_failures runs"

# Visibility latency: each side's job unbounded, parallelism 1, 1 s checkpoints, while topic_tool
# appends records at a fixed rate and a read_committed consumer notes when each becomes visible.
lrate=${COMPARE_LATENCY_RATE:-50000}
lsecs=${COMPARE_LATENCY_SECONDS:-10}
latencies=$out/latency.tsv
printf 'side\tround\tp50_ms\tp99_ms\tmax_ms\n' > "$latencies"
# latency_run SIDE ROUND
latency_run() {
    local side=$1 round=$2
    local input=cmp-lin-$side-$round-$tag output=cmp-lout-$side-$round-$tag
    local prefix=cmp-lat-$side-$round-$tag ckpt=$out/ckpt-lat-$side-$tag pid m
    "$tool" fill "$boot" "$input" 2 0
    "$tool" create "$boot" "$output" 2
    rm -rf "$ckpt" && mkdir -p "$ckpt"
    if [ "$side" = twopc ]; then
        "$job" "$boot" "$input" "$output" 1 "$prefix" "$ckpt" unbounded > "$out/$side-latency.log" 2>&1 &
    else
        java -cp "$cp" twopc.bench.FlinkKafkaJob "$boot" "$input" "$output" 1 "$prefix" unbounded \
            > "$out/$side-latency.log" 2>&1 &
    fi
    pid=$!
    m=$("$tool" latency "$boot" "$input" "$output" "$lrate" "$lsecs") || {
        kill -9 "$pid" 2> /dev/null || true
        echo "bench-compare: the $side latency run failed, see $out/$side-latency.log" >&2
        exit 1
    }
    kill -9 "$pid" 2> /dev/null || true
    wait "$pid" 2> /dev/null || true
    rm -rf "$ckpt"
    local p50 p99 max visible total
    read -r _ p50 _ p99 _ max _ visible _ total <<< "$m"
    if [ "$visible" != "$total" ] || [ "$total" = 0 ]; then
        echo "bench-compare: $side made only $visible of $total records visible" >&2
        exit 1
    fi
    printf '%s\t%d\t%s\t%s\t%s\n' "$side" "$round" "$p50" "$p99" "$max" >> "$latencies"
    tail -1 "$latencies" >&2
}
if [ "$lrate" != 0 ] && part latency; then
    echo "bench-compare: visibility latency at $lrate records a second" >&2
    for ((r = 1; r <= rounds; r++)); do
        if ((r % 2)); then order="twopc flink"; else order="flink twopc"; fi
        for side in $order; do latency_run "$side" "$r"; done
    done
    awk -F'\t' -v rate="$lrate" 'NR > 1 { n[$1]++; p50[$1, n[$1]] = $3; p99[$1, n[$1]] = $4 }
    function median(a, side,    k, m, j, i, t, v) {
        m = n[side]
        for (j = 1; j <= m; j++) v[j] = a[side, j]
        for (j = 1; j <= m; j++) for (i = j + 1; i <= m; i++) if (v[i] < v[j]) { t = v[j]; v[j] = v[i]; v[i] = t }
        return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
    }
    END {
        for (side in n) {
            printf "bench compare %s_visibility_p50_ms_%d %s ms\n", side, rate, median(p50, side)
            printf "bench compare %s_visibility_p99_ms_%d %s ms\n", side, rate, median(p99, side)
        }
        if (("flink" in n) && ("twopc" in n) && median(p99, "flink") > 0)
            printf "bench compare ratio_visibility_p99_%d %.2f twopc/flink\n", rate,
                   median(p99, "twopc") / median(p99, "flink")
    }' "$latencies" | sort
fi

# The keyed part: purchases keyed by user -> running count and total per user in keyed state ->
# Kafka, on twopc and on Flink with each of its two state backends.
keyed_runs=${COMPARE_KEYED:-5000000:1000000 20000000:10000000}
keyed_pars=${COMPARE_KEYED_PARALLELISM:-$pars}
read -ra keyed_sides <<< "${COMPARE_KEYED_SIDES:-twopc twopc_incremental flink_hashmap flink_rocksdb}"
for side in "${keyed_sides[@]}"; do
    case $side in
    twopc | twopc_incremental | flink_hashmap | flink_rocksdb) ;;
    *)
        echo "bench-compare: unknown side \"$side\" in COMPARE_KEYED_SIDES (twopc, twopc_incremental, flink_hashmap, flink_rocksdb)" >&2
        exit 2
        ;;
    esac
done
keyed=$out/keyed.tsv
printf 'side\trecords\tkeys\tparallelism\tround\trec_per_s\tsteady_rec_per_s\tcpu_s_per_m\trss_mb\tend_ms\tcheckpoints\tckpt_ms\tckpt_mb\n' \
    > "$keyed"
keyed_failures=0
# keyed_run SIDE RECORDS KEYS PARALLELISM ROUND INPUT
keyed_run() {
    local side=$1 n=$2 keys=$3 p=$4 round=$5 input=$6
    local topic=cmp-kout-$side-$n-$keys-$p-$round-$tag prefix=cmp-k-$side-$n-$keys-$p-$round-$tag
    local times=$out/time.txt ckpt=$out/ckpt-keyed-$side-$tag log=$out/$side-keyed.log start end
    "$tool" create "$boot" "$topic" 2
    rm -rf "$ckpt" && mkdir -p "$ckpt"
    start=$(date +%s%3N)
    if [[ $side == twopc* ]]; then
        /usr/bin/time -f '%e %U %S %M' -o "$times" timeout "$limit" "$keyed_job" "$boot" "$input" \
            "$topic" "$p" "$prefix" "$ckpt" "$([ "$side" = twopc ] && echo full || echo incremental)" \
            > "$log" 2>&1
    else
        /usr/bin/time -f '%e %U %S %M' -o "$times" timeout "$limit" java -cp "$cp" twopc.bench.FlinkKeyedJob \
            "$boot" "$input" "$topic" "$p" "$prefix" "${side#flink_}" "$ckpt" > "$log" 2>&1
    fi || {
        # A side that fails (out of memory, a timeout) is reported and counted; a wrong result
        # below fails the benchmark.
        echo "bench-compare: the $side keyed job failed ($keys keys, p$p, round $round), see $out/$side-keyed-failed-$keys-$p-$round.log:" >&2
        cp "$log" "$out/$side-keyed-failed-$keys-$p-$round.log"
        grep -m3 -i "exception\|error" "$log" >&2 || true
        keyed_failures=$((keyed_failures + 1))
        rm -rf "$ckpt"
        return 0
    }
    end=$(date +%s%3N)
    rm -rf "$ckpt"
    local m ck count users wrong first last checkpoints ckpt_ms ckpt_bytes
    m=$("$tool" totals "$boot" "$topic" "$n" "$keys")
    read -r _ count _ users _ wrong _ first _ last <<< "$m"
    if [ "$count" != "$n" ] || [ "$users" != $((n < keys ? n : keys)) ] || [ "$wrong" != 0 ]; then
        echo "bench-compare: the $side keyed job wrote $m for $n purchases of $keys users (not exact)" >&2
        exit 1
    fi
    ck=$(grep -m1 '^checkpoints ' "$log") || {
        echo "bench-compare: the $side keyed job printed no checkpoint figures, see $log" >&2
        exit 1
    }
    read -r _ checkpoints _ ckpt_ms _ ckpt_bytes <<< "$ck"
    local user sys rss_kb
    read -r _ user sys rss_kb < "$times"
    awk -v s="$side" -v n="$n" -v k="$keys" -v p="$p" -v r="$round" -v t0="$start" -v t1="$end" \
        -v f="$first" -v l="$last" -v u="$user" -v y="$sys" -v kb="$rss_kb" -v c="$checkpoints" \
        -v cm="$ckpt_ms" -v cb="$ckpt_bytes" 'BEGIN {
        steady = l > f ? n * 1000 / (l - f) : 0
        printf "%s\t%d\t%d\t%d\t%d\t%.0f\t%.0f\t%.2f\t%.1f\t%d\t%d\t%.1f\t%.2f\n", s, n, k, p, r,
               n * 1000 / (t1 - t0), steady, (u + y) / (n / 1e6), kb / 1024, t1 - l, c, cm, cb / 1e6 }' \
        >> "$keyed"
    tail -1 "$keyed" >&2
}
if part keyed; then
    for run in $keyed_runs; do
        n=${run%%:*} keys=${run#*:}
        input=cmp-kin-$n-$keys-$tag
        echo "bench-compare: writing $n purchases of $keys users into $input (keyed)" >&2
        "$tool" fill-keyed "$boot" "$input" 2 "$n" "$keys"
        for p in $keyed_pars; do
            for ((r = 1; r <= rounds; r++)); do
                # The side that goes first rotates from round to round.
                for ((i = 0; i < ${#keyed_sides[@]}; i++)); do
                    side=${keyed_sides[(i + r - 1) % ${#keyed_sides[@]}]}
                    keyed_run "$side" "$n" "$keys" "$p" "$r" "$input"
                done
            done
        done
    done
    echo "bench compare keyed_job_failures $keyed_failures runs"
    # Medians per side, keys and parallelism, the ratios twopc / each Flink side, and the table
    # the plots read.
    awk -F'\t' 'NR > 1 {
        key = $1 "\t" $3 "\t" $4
        for (i = 6; i <= 13; i++) v[key, i, ++cnt[key, i]] = $i
        keys[key] = 1; cases[$3 "\t" $4] = 1
    }
    function median(key, i,    n, a, j, k, t) {
        n = cnt[key, i]
        for (j = 1; j <= n; j++) a[j] = v[key, i, j]
        for (j = 1; j <= n; j++) for (k = j + 1; k <= n; k++) if (a[k] < a[j]) { t = a[j]; a[j] = a[k]; a[k] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    function label(k) { return k >= 1000000 ? k / 1000000 "m" : k >= 1000 ? k / 1000 "k" : k }
    END {
        split("rec_per_s steady_rec_per_s cpu_s_per_m rss_mb end_ms checkpoints ckpt_ms ckpt_mb", name, " ")
        split("rec/s rec/s s MB ms checkpoints ms MB", unit, " ")
        for (key in keys) {
            split(key, f, "\t")
            for (i = 6; i <= 13; i++) {
                med[key, i] = median(key, i)
                printf "bench compare keyed_%s_%s_p%d_%skeys %s %s\n", f[1], name[i - 5], f[3],
                       label(f[2]), med[key, i], unit[i - 5]
            }
        }
        split("twopc twopc_incremental", twopc, " ")
        split("flink_hashmap flink_rocksdb", flink, " ")
        split("twopc twopc_incremental flink_hashmap flink_rocksdb", all, " ")
        wide = outdir "/keyed_medians.tsv"
        print "# case\tper metric: twopc, twopc incremental, Flink HashMap, Flink RocksDB;" \
              " steady\tcpu\trss\tckpt_ms\tckpt_mb" > wide
        for (c in cases) {
            split(c, f, "\t")
            for (w = 1; w <= 2; w++) for (s = 1; s <= 2; s++) {
                t = twopc[w] "\t" c; k = flink[s] "\t" c
                if (!((t, 7) in med) || !((k, 7) in med)) continue
                split("6 7 8 9 12 13", m, " ")
                for (j = 1; j <= 6; j++)
                    if (med[k, m[j]] > 0)
                        printf "bench compare keyed_ratio_%s_%s_p%d_%skeys_vs_%s %.2f twopc/flink\n",
                               twopc[w], name[m[j] - 5], f[2], label(f[1]), substr(flink[s], 7),
                               med[t, m[j]] / med[k, m[j]]
            }
            row = label(f[1]) " keys,p" f[2]
            split("7 8 9 12 13", m, " ")
            for (j = 1; j <= 5; j++)
                for (s = 1; s <= 4; s++)
                    row = row "\t" (0 + med[all[s] "\t" c, m[j]])
            print row > wide
        }
    }' outdir="$out" "$keyed" | sort
    { head -1 "$out/keyed_medians.tsv"; tail -n +2 "$out/keyed_medians.tsv" | sort -k1,1n -t, -k2,2; } \
        > "$out/keyed_medians.sorted"
    mv "$out/keyed_medians.sorted" "$out/keyed_medians.tsv"
fi

# Medians per side, size and parallelism, then the ratios.
awk -F'\t' 'NR > 1 {
    key = $1 "\t" $2 "\t" $3
    for (i = 5; i <= 9; i++) v[key, i, ++cnt[key, i]] = $i
    keys[key] = 1
}
function median(key, i,    n, a, j, k, t) {
    n = cnt[key, i]
    for (j = 1; j <= n; j++) a[j] = v[key, i, j]
    for (j = 1; j <= n; j++) for (k = j + 1; k <= n; k++) if (a[k] < a[j]) { t = a[j]; a[j] = a[k]; a[k] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
END {
    split("rec_per_s steady_rec_per_s cpu_s_per_m rss_mb end_ms", name, " ")
    split("rec/s rec/s s MB ms", unit, " ")
    for (key in keys) {
        split(key, f, "\t")
        size = f[2] >= 1000000 ? f[2] / 1000000 "m" : f[2]
        for (i = 5; i <= 9; i++) {
            m = median(key, i)
            med[f[1], f[2], f[3], i] = m
            printf "bench compare %s_%s_p%d_%s %s %s\n", f[1], name[i - 4], f[3], size, m, unit[i - 4]
        }
        if (f[1] ~ /^twopc/) pairs[substr(f[1], 6) "\t" f[2] "\t" f[3]] = 1
    }
    wide = outdir "/medians.tsv"
    print "# case\ttwopc_steady\tflink_steady\ttwopc_rate\tflink_rate\ttwopc_cpu\tflink_cpu\ttwopc_rss\tflink_rss" > wide
    for (pk in pairs) {
        split(pk, f, "\t")
        # f[1]: "" for Kafka -> Kafka, "_pg" for Kafka -> PostgreSQL
        t = "twopc" f[1]; k = "flink" f[1]
        size = f[2] >= 1000000 ? f[2] / 1000000 "m" : f[2]
        if (f[1] == "")
            printf "%s,p%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", size, f[3],
                   med[t, f[2], f[3], 6], med[k, f[2], f[3], 6],
                   med[t, f[2], f[3], 5], med[k, f[2], f[3], 5],
                   med[t, f[2], f[3], 7], med[k, f[2], f[3], 7],
                   med[t, f[2], f[3], 8], med[k, f[2], f[3], 8] > wide
        for (i = 5; i <= 8; i++)
            if (med[k, f[2], f[3], i] > 0)
                printf "bench compare ratio%s_%s_p%d_%s %.2f twopc/flink\n", f[1], name[i - 4], f[3],
                       size, med[t, f[2], f[3], i] / med[k, f[2], f[3], i]
    }
}' outdir="$out" "$results" | sort
# Rows by size, then parallelism, for the plots.
{ head -1 "$out/medians.tsv"; tail -n +2 "$out/medians.tsv" | sort -t, -k1,1n -k2,2; } > "$out/medians.sorted"
mv "$out/medians.sorted" "$out/medians.tsv"

# The plots of the parts that ran (a table with rows beside its header).
plots="outdir='$out'"
[ "$(wc -l < "$out/medians.tsv")" -lt 2 ] || plots+="; medians='$out/medians.tsv'"
! part keyed || [ "$(wc -l < "$out/keyed_medians.tsv")" -lt 2 ] || plots+="; keyed='$out/keyed_medians.tsv'"
if command -v gnuplot > /dev/null; then
    gnuplot -e "$plots" "$here/plot.gp" && echo "bench-compare: plots in $out" >&2
fi
