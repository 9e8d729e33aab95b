#!/usr/bin/env bash
# make bench-cluster: the keyed pipeline of examples/cluster_totals.c run as units over member
# processes on this machine (docs/cluster.md, "Measured here"). Prints
#   bench cluster <metric> <value> <unit>
# and, beside each part, the load average (uptime) while it ran.
#
#   throughput  ingest -> repartition topic -> keyed totals over U units on 1, 2 and 3 member
#               processes, and on one process without the repartition topic (cluster_totals
#               --direct: each unit's parse feeds its totals), in rounds that take turns at the
#               order. Each run starts its members over an empty input, waits until the group
#               has dealt every unit and each member runs its share, then writes N purchases into
#               the input; the rate is that of the committed totals (the sum of the table's
#               counts, read every 250 ms) between 10 % and 90 % of N, so that start-up and the
#               last checkpoint do not count. cpu_us_per_record is the members' processor time
#               (user and system, from /proc) over the same records; the brokers' and
#               PostgreSQL's are not in it. Figures: the median over the rounds, its min and max.
#   takeover    two members (static membership, session timeout 6 s, paced input so that every
#               unit keeps working): kill -9 of one; its units' take-over by the survivor, then
#               the same member killed with kill -9 and started again at once with the same
#               group.instance.id. Per unit: detect_ms (the kill to "unit u assigned" in the new
#               owner's log), claim_ms (to the new owner's raise of the owner epoch in the unit's
#               completion record, which it does before it restores), first_ckpt_ms (to the first
#               checkpoint the new owner completed: the record names a newer checkpoint under the
#               new epoch). Medians over every unit taken over in all rounds, min and max.
#               TWOPC_BENCH_CLUSTER_PROTOCOL=consumer: KIP-848's protocol (librdkafka 2.12 or
#               later, TWOPC_LIBRDKAFKA=current; without the restart, which that protocol refuses
#               until the broker ends the dead member's session).
#   storage     the checkpoint duration on the local S3 server against a folder, the same keyed
#               job and state (tests/bench/bench_cluster_storage.c).
#
# Environment: TWOPC_TEST_KAFKA_BOOTSTRAP and TWOPC_TEST_PG_CONNINFO (or TWOPC_KAFKA_BOOTSTRAP and
# TWOPC_PG_CONNINFO; make bench-cluster starts throwaway servers for those not set),
# TWOPC_BENCH_CLUSTER_PARTS (default throughput,takeover,storage), TWOPC_BENCH_ROUNDS (default
# 3), TWOPC_BENCH_RECORDS (throughput: purchases per run, default 600000), TWOPC_BENCH_UNITS
# (default 6). The runs' logs and checkpoints stay in build/bench-cluster/.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/e2e_lib.sh"

CT="$E2E_BIN/cluster_totals"
STORAGE_BENCH="${TWOPC_BENCH_DIR:-$E2E_ROOT/build/default/bench}/bench_cluster_storage"
[ -x "$CT" ] || e2e_die "cluster_totals not found in $E2E_BIN; run 'make examples'"
export TWOPC_KAFKA_BOOTSTRAP="${TWOPC_TEST_KAFKA_BOOTSTRAP:-${TWOPC_KAFKA_BOOTSTRAP:-}}"
export TWOPC_PG_CONNINFO="${TWOPC_TEST_PG_CONNINFO:-${TWOPC_PG_CONNINFO:-}}"
[[ -n "$TWOPC_KAFKA_BOOTSTRAP" && -n "$TWOPC_PG_CONNINFO" ]] ||
    e2e_die "name the servers: TWOPC_TEST_KAFKA_BOOTSTRAP and TWOPC_TEST_PG_CONNINFO"
PARTS=${TWOPC_BENCH_CLUSTER_PARTS:-throughput,takeover,storage}
ROUNDS=${TWOPC_BENCH_ROUNDS:-3}
RECORDS=${TWOPC_BENCH_RECORDS:-600000}
UNITS=${TWOPC_BENCH_UNITS:-6}
PROTOCOL=${TWOPC_BENCH_CLUSTER_PROTOCOL:-classic}
USERS=300
SESSION_MS=6000
WORK="$E2E_ROOT/build/bench-cluster"
mkdir -p "$WORK"
rm -f "$WORK/stop_ms"

declare -A PID=()
cleanup() {
    local id
    for id in "${!PID[@]}"; do kill -KILL "${PID[$id]}" 2>/dev/null; done
    wait 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

out() { echo "bench cluster $*"; }
load() { uptime | sed 's/.*load average: //'; }

# median, min and max of the numbers on stdin: "MEDIAN MIN MAX"
stats() {
    sort -g | awk '{ v[NR] = $1 } END {
        if (NR == 0) { print "- - -"; exit }
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.6g %.6g %.6g\n", m, v[1], v[NR] }'
}

# Print "bench cluster METRIC median UNIT" and its _min and _max from the numbers on stdin.
out_stats() {
    local metric=$1 unit=$2 m lo hi
    read -r m lo hi < <(stats)
    out "$metric $m $unit"
    out "${metric}_min $lo $unit"
    out "${metric}_max $hi $unit"
}

median_of() { tr ' ' '\n' <<<"$1" | grep . | stats | cut -d' ' -f1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f\n", a / b; else print "-" }'; }

table_of() { echo "${1//[-.]/_}_totals"; }
committed() { # the sum of the counts in the totals table of application $1 (0 before any)
    psql "$TWOPC_PG_CONNINFO" -Atqc "SELECT coalesce(sum(n), 0) FROM $(table_of "$1")" 2>/dev/null ||
        echo 0
}
# Drop application $1's table, after rolling back what its members left prepared (a run that
# failed, whose prepared transactions would hold the table's locks), once its members are gone.
drop_table() {
    local gid
    for gid in $(psql "$TWOPC_PG_CONNINFO" -Atqc \
        "SELECT gid FROM pg_prepared_xacts WHERE starts_with(gid, '$1-u')" 2>/dev/null); do
        psql "$TWOPC_PG_CONNINFO" -qc "ROLLBACK PREPARED '$gid'" >/dev/null 2>&1
    done
    psql "$TWOPC_PG_CONNINFO" -qc "SET lock_timeout = '10s'" \
        -c "DROP TABLE IF EXISTS $(table_of "$1")" >/dev/null 2>&1 ||
        e2e_log "could not drop the table of $1"
}
cpu_ticks() { # user + system clock ticks of the processes $@
    local p sum=0 f
    for p in "$@"; do
        f=$(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null) || continue
        read -r -a f <<<"$f"
        sum=$((sum + f[11] + f[12]))
    done
    echo "$sum"
}

member_start() { # NAME ID [cluster_totals options...]
    local name=$1 id=$2
    shift 2
    echo "--- $id started" >>"$WORK/$name/$id.log"
    setsid "$CT" --name "$name" --units "$UNITS" --users "$USERS" --interval 500 \
        --checkpoint-dir "$WORK/$name/checkpoints" --protocol "$PROTOCOL" \
        --session-timeout "$SESSION_MS" --instance "$id" "$@" >>"$WORK/$name/$id.log" 2>&1 &
    PID[$id]=$!
}
member_units() { # the units a member's log says it runs now
    awk '/^--- / { delete on }
         $5 == "unit" && $7 == "assigned:" { on[$6] = 1 }
         $5 == "unit" && ($7 == "released" || $7 == "lost:") { delete on[$6] }
         END { for (u in on) printf "%s ", u }' "$1" 2>/dev/null
}
# SIGTERM to every member, and the time each took to stop its units with savepoints and leave
# (SIGTERM to exit) appended to $WORK/stop_ms.
members_stop() {
    local id t0
    t0=$(e2e_now_ms)
    for id in "${!PID[@]}"; do kill -TERM "${PID[$id]}" 2>/dev/null; done
    for id in "${!PID[@]}"; do
        if wait "${PID[$id]}"; then
            echo $(($(e2e_now_ms) - t0)) >>"$WORK/stop_ms"
        else
            e2e_log "member $id ended with status $? (see its log)"
        fi
        unset "PID[$id]"
    done
}

# Wait until the members $@ of application $name run every unit between them, each its share,
# the same for two looks a second apart. Dies after two minutes.
wait_dealt() {
    local name=$1 want_each=$((UNITS / ($# - 1))) prev= now id units all n
    shift
    local deadline=$(($(e2e_now_ms) + 120000))
    while :; do
        now= all=0
        for id in "$@"; do
            units=$(member_units "$WORK/$name/$id.log")
            n=$(wc -w <<<"$units")
            [ "$n" -ge "$want_each" ] || all=-999
            all=$((all + n))
            now+="$id:$units;"
        done
        [[ "$all" -eq "$UNITS" && "$now" == "$prev" ]] && return 0
        prev=$now
        [ "$(e2e_now_ms)" -lt "$deadline" ] || e2e_die "$name: the units were not dealt to $* ($now)"
        sleep 1
    done
}

# ---- throughput -----------------------------------------------------------------------------

# One run: $1 members, $2 "hop" or "direct". Sets RESULT to "RATE CPU_US_PER_RECORD", or to
# "failed" when the committed count stood still for 90 s (the run's logs say why).
RESULT=
throughput_run() {
    local procs=$1 mode=$2 name i ids=() extra=()
    RESULT=
    name="twopc-bench-cluster-$(date +%H%M%S)-$$-$mode$procs"
    mkdir -p "$WORK/$name"
    [ "$mode" = direct ] && extra=(--direct)
    # The topics and the table, with one purchase in the input: the members start over it.
    "$CT" --fill --name "$name" --units "$UNITS" --users "$USERS" --records 1 \
        >"$WORK/$name/fill.log" 2>&1 || e2e_die "$name: could not make the topics ($WORK/$name)"
    for ((i = 1; i <= procs; i++)); do
        member_start "$name" "m$i" "${extra[@]}"
        ids+=("m$i")
    done
    wait_dealt "$name" "${ids[@]}"
    local deadline=$(($(e2e_now_ms) + 120000))
    until [ "$(committed "$name")" -ge 1 ]; do
        [ "$(e2e_now_ms)" -lt "$deadline" ] || e2e_die "$name: the first purchase was not committed"
        sleep 0.25
    done
    local pids=() target=$((RECORDS + 1)) c t t10= t90= c10 c90 cpu0 cpu1= last=-1 moved
    for i in "${ids[@]}"; do pids+=("${PID[$i]}"); done
    cpu0=$(cpu_ticks "${pids[@]}")
    "$CT" --fill --name "$name" --units "$UNITS" --users "$USERS" --records "$RECORDS" \
        >>"$WORK/$name/fill.log" 2>&1 &
    local fill=$!
    while :; do
        t=$(e2e_now_ms)
        c=$(committed "$name")
        if [ "$c" != "$last" ]; then last=$c moved=$t; fi
        if [ -z "$t10" ] && [ "$c" -ge $((RECORDS / 10)) ]; then t10=$t c10=$c; fi
        if [ -z "$t90" ] && [ "$c" -ge $((RECORDS * 9 / 10)) ]; then t90=$t c90=$c; fi
        if [ "$c" -ge "$target" ]; then
            cpu1=$(cpu_ticks "${pids[@]}")
            break
        fi
        if [ $((t - moved)) -gt 90000 ]; then
            e2e_log "$name: FAILED: $c of $target purchases committed, none for 90 s" \
                "(logs in $WORK/$name)"
            RESULT=failed
            break
        fi
        sleep 0.25
    done
    wait "$fill" || e2e_die "$name: writing the input failed ($WORK/$name/fill.log)"
    members_stop
    drop_table "$name"
    [ "$RESULT" = failed ] && return
    local hz
    hz=$(getconf CLK_TCK)
    [ "$RESULT" = failed ] && return
    RESULT=$(awk -v n=$((c90 - c10)) -v ms=$((t90 - t10)) -v ticks=$((cpu1 - cpu0)) -v hz="$hz" \
        -v r="$RECORDS" 'BEGIN { printf "%.0f %.1f\n", n * 1000 / ms, ticks / hz * 1e6 / r }')
}

part_throughput() {
    local configs=("1 hop" "2 hop" "3 hop" "1 direct") round k cfg rate cpu
    declare -A rates=() cpus=() fails=()
    local loads=()
    for ((round = 0; round < ROUNDS; round++)); do
        for ((k = 0; k < ${#configs[@]}; k++)); do
            # Each round starts at another configuration, so that none always runs first.
            cfg=${configs[$(((k + round) % ${#configs[@]}))]}
            # shellcheck disable=SC2086  # members and mode, two words
            throughput_run $cfg
            if [ "$RESULT" = failed ]; then
                fails[$cfg]=$((${fails[$cfg]:-0} + 1))
                continue
            fi
            read -r rate cpu <<<"$RESULT"
            e2e_log "round $((round + 1)), $cfg: $rate records/s, $cpu us CPU per record (load $(load))"
            rates[$cfg]+="$rate "
            cpus[$cfg]+="$cpu "
            loads+=("$(load)")
        done
    done
    local procs mode
    for cfg in "${configs[@]}"; do
        read -r procs mode <<<"$cfg"
        local tag="p$procs"
        [ "$mode" = direct ] && tag="p${procs}_direct"
        tr ' ' '\n' <<<"${rates[$cfg]:-}" | grep . | out_stats "throughput_${tag}_rec_per_s" records/s
        tr ' ' '\n' <<<"${cpus[$cfg]:-}" | grep . | out_stats "cpu_${tag}_us_per_record" us
        out "failed_${tag} ${fails[$cfg]:-0} runs"
    done
    # Ratios of the medians.
    local r1
    r1=$(median_of "${rates[1 hop]:-}")
    for procs in 2 3; do
        out "ratio_p${procs}_to_p1 $(ratio "$(median_of "${rates[$procs hop]:-}")" "$r1") ratio"
    done
    out "ratio_hop_to_direct $(ratio "$r1" "$(median_of "${rates[1 direct]:-}")") ratio"
    printf 'bench cluster throughput_load %s load-1-5-15\n' "${loads[*]// /}"
}

# ---- take-over ------------------------------------------------------------------------------

# Watch the completion records of units $3... under folder $1 and print, for each,
# "UNIT CLAIM_MS FIRST_CKPT_MS" relative to the epoch ms that file $2 holds once it is there (the
# kill), after the unit's record was claimed by a newer owner epoch than it had when the watch
# began, and then named a newer checkpoint; "-" for what did not happen within 90 s. It prints
# "watching" on stderr once it has read where each record stands. The record: magic, u32
# version, job name (u32 length + bytes), u64 newest, u64 first, u64 owner epoch, little-endian
# (runtime/record.c).
watch_records() {
    python3 - "$@" <<'EOF'
import struct, sys, time
root, t0_file, units = sys.argv[1], sys.argv[2], sys.argv[3:]
def read(u):
    try:
        b = open(f"{root}/unit-{u}/completed", "rb").read()
        n = struct.unpack_from("<I", b, 12)[0]
        newest, first, epoch = struct.unpack_from("<QQQ", b, 16 + n)
        return newest, epoch
    except (OSError, struct.error):
        return None
start = {u: read(u) for u in units}
print("watching", file=sys.stderr, flush=True)
claim, ckpt = {}, {}
deadline = time.time() + 90
while len(ckpt) < len(units) and time.time() < deadline:
    now = int(time.time() * 1000)
    for u in units:
        r, s = read(u), start[u]
        if r is None or s is None or u in ckpt:
            continue
        if u not in claim and r[1] > s[1]:
            claim[u] = (now, r[0])
        if u in claim and r[1] > s[1] and r[0] > claim[u][1]:
            ckpt[u] = now
    time.sleep(0.01)
t0 = int(open(t0_file).read())
for u in units:
    c = claim.get(u)
    print(u, c[0] - t0 if c else "-", ckpt[u] - t0 if u in ckpt else "-")
EOF
}

log_ms() { # the epoch ms of the first line of log $1 saying "unit $2 assigned" after line $3
    local when
    when=$(tail -n +"$(($3 + 1))" "$1" |
        awk -v u="$2" '$5 == "unit" && $6 == u && $7 == "assigned:" { print $1; exit }')
    [ -n "$when" ] && date -d "$when" +%s%3N
}

# kill -9 member $2 of application $1; when $3 is "restart", start it again at once with the
# same identity. Appends "HOW UNIT DETECT_MS CLAIM_MS FIRST_CKPT_MS" per unit it ran to
# $WORK/$1/takeover.
kill_and_measure() {
    local name=$1 victim=$2 how=$3 units survivor owner_log lines u claim ckpt assigned t0
    local dir="$WORK/$name" watch
    units=$(member_units "$dir/$victim.log")
    survivor=m2
    [ "$victim" = m2 ] && survivor=m1
    owner_log="$dir/$survivor.log"
    [ "$how" = restart ] && owner_log="$dir/$victim.log"
    rm -f "$dir/t0" "$dir/watch.out"
    # shellcheck disable=SC2086  # the units, one word each
    watch_records "$dir/checkpoints" "$dir/t0" $units >"$dir/watch.out" 2>"$dir/watch.err" &
    watch=$!
    until grep -q watching "$dir/watch.err" 2>/dev/null; do sleep 0.05; done
    lines=$(wc -l <"$owner_log")
    t0=$(e2e_now_ms)
    kill -KILL "${PID[$victim]}"
    echo "$t0" >"$dir/t0"
    wait "${PID[$victim]}" 2>/dev/null
    unset "PID[$victim]"
    [ "$how" = restart ] && member_start "$name" "$victim" --rate 400
    wait "$watch"
    while read -r u claim ckpt; do
        assigned=$(log_ms "$owner_log" "$u" "$lines")
        echo "$how $u $([ -n "$assigned" ] && echo $((assigned - t0)) || echo -) $claim $ckpt" |
            tee -a "$dir/takeover" >&2
    done <"$dir/watch.out"
}

part_takeover() {
    local round name loads=()
    : >"$WORK/takeover-all"
    for ((round = 0; round < ROUNDS; round++)); do
        name="twopc-bench-takeover-$(date +%H%M%S)-$$"
        mkdir -p "$WORK/$name"
        "$CT" --fill --name "$name" --units "$UNITS" --users "$USERS" --records 200000 \
            >"$WORK/$name/fill.log" 2>&1 || e2e_die "$name: could not write the input"
        member_start "$name" m1 --rate 400
        member_start "$name" m2 --rate 400
        wait_dealt "$name" m1 m2
        sleep 3
        kill_and_measure "$name" m1 survivor
        loads+=("$(load)")
        if [ "$PROTOCOL" = classic ]; then
            member_start "$name" m1 --rate 400
            wait_dealt "$name" m1 m2
            sleep 3
            kill_and_measure "$name" m1 restart
            loads+=("$(load)")
        fi
        members_stop
        drop_table "$name"
        cat "$WORK/$name/takeover" >>"$WORK/takeover-all"
    done
    local how col metric
    for how in survivor restart; do
        grep -q "^$how " "$WORK/takeover-all" || continue
        for col in 3:detect 4:claim 5:first_ckpt; do
            metric=${col#*:}
            awk -v c="${col%%:*}" -v h="$how" '$1 == h && $c != "-" { print $c }' \
                "$WORK/takeover-all" | out_stats "takeover_${PROTOCOL}_${how}_${metric}_ms" ms
        done
        out "takeover_${PROTOCOL}_${how}_units $(grep -c "^$how " "$WORK/takeover-all") count"
        out "takeover_${PROTOCOL}_${how}_incomplete $(awk -v h="$how" '$1 == h && /-/' "$WORK/takeover-all" | wc -l) count"
    done
    printf 'bench cluster takeover_load %s load-1-5-15\n' "${loads[*]// /}"
}

# ---- storage --------------------------------------------------------------------------------

part_storage() {
    [ -x "$STORAGE_BENCH" ] || e2e_die "$STORAGE_BENCH not found; run 'make $STORAGE_BENCH'"
    local dir="$WORK/s3" endpoint
    export AWS_ACCESS_KEY_ID=twopc-bench AWS_SECRET_ACCESS_KEY=twopc-bench-secret
    endpoint=$("$E2E_ROOT/tests/services/s3.sh" start "$dir" twopc-bench) ||
        e2e_die "no local S3 server (tests/services/s3.sh start failed)"
    TWOPC_TEST_S3_ENDPOINT=$endpoint TWOPC_BENCH_S3_BUCKET=twopc-bench "$STORAGE_BENCH"
    local rc=$?
    "$E2E_ROOT/tests/services/s3.sh" stop "$dir"
    [ "$rc" -eq 0 ] || e2e_die "bench_cluster_storage failed"
    out "storage_load $(load | tr -d ' ') load-1-5-15"
}

for part in ${PARTS//,/ }; do
    case "$part" in
    throughput | takeover | storage) "part_$part" ;;
    *) e2e_die "unknown part \"$part\" (throughput, takeover, storage)" ;;
    esac
done
# How long a member took from SIGTERM to its exit (its units' savepoints, the group left), over
# every member stopped above: what a Kubernetes pod's terminationGracePeriodSeconds must exceed.
if [ -s "$WORK/stop_ms" ]; then out_stats member_stop_ms ms <"$WORK/stop_ms"; fi
