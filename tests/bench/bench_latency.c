/*
 * Visibility latency of an exactly-once pipeline: how long after a record is appended to the
 * input topic can a reader see its result?
 *
 *   Kafka source (unbounded) -> transform -> Kafka sink (output topic)
 *                                         -> PostgreSQL sink (table, binary COPY)
 *
 * One subtask per vertex, one partition per topic. A producer thread appends records at a fixed
 * rate; a record's append time is when the broker acknowledged it (its delivery report). A
 * read_committed consumer of the output topic and a separate SQL session polling the table (every
 * POLL_MS) note when each record becomes visible there. Latency = visible - appended, per record,
 * over the records appended after the first WARMUP_S seconds.
 *
 * For each checkpoint interval, 100 ms and 1 s, first the sustainable rate is measured: the same
 * job, bounded, over records written in advance, with both readers running (they share the
 * machine with the job): records / seconds from the job's start until the last record is visible
 * in both outputs (start-up and final checkpoint included, so a little low). Then the unbounded
 * job runs at 50 % and 90 % of it.
 * Prints `bench latency <metric> <value> <unit>`, metrics named
 * <interval>_<load>_<kafka|pg>_<p50|p99|p999|max>, <interval>_<load>_ckpt_<p50|p99> (checkpoint
 * durations, trigger to complete, sampled every 5 ms: one part of every record's latency), and per
 * interval the goal set for it: p99 <= 1.5 x interval + 50 ms at 50 % load (goal_*: 1 when it
 * holds for both outputs). Environment: TWOPC_TEST_KAFKA_BOOTSTRAP and TWOPC_TEST_PG_CONNINFO
 * (required), TWOPC_BENCH_SECONDS (input seconds per run, default 10), TWOPC_BENCH_RECORDS (records
 * of the sustainable-rate run, default 500000), TWOPC_BENCH_RATE (skip that run and take this
 * rate), TWOPC_BENCH_INTERVALS and TWOPC_BENCH_LOADS (the checkpoint intervals in ms and the
 * loads in percent to run, default "100 1000" and "50 90"; e.g. TWOPC_BENCH_INTERVALS=100
 * TWOPC_BENCH_LOADS=50 runs the goal's case alone), TWOPC_BENCH_OUT (a folder: each run's latency
 * distribution goes there as latency_i<interval>ms_load<load>.tsv, percentile and milliseconds
 * per output, for tests/bench/latency_plot.gp).
 */
#include "tpc_kafka.h"
#include "tpc_pg.h"
#include "tpc_test_bench.h"
#include "tpc_test_env.h"
#include "tpc_test_ops.h"
#include "tpc_test_pg.h"

#include <librdkafka/rdkafka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VALUE_BYTES 100
#define POLL_MS     2
#define WARMUP_S    2.0
#define DRAIN_S     20.0 /* how long to wait for the last records to become visible */

static const char *bootstrap, *conninfo;

static void die(const char *what, const char *why)
{
    fprintf(stderr, "bench_latency: %s: %s\n", what, why ? why : "failed");
    exit(1);
}

/* Record values: the record's number, 8 bytes big-endian, then zero bytes. */
static uint64_t number_of(const void *value, size_t len)
{
    const unsigned char *b = value;
    uint64_t n = 0;
    for (size_t i = 0; i < 8 && i < len; i++)
        n = n << 8 | b[i];
    return n;
}

/* ---- one run -------------------------------------------------------------------------------- */

typedef struct {
    char input[128], output[128], table[64];
    uint64_t total;     /* records the producer appends */
    double rate;        /* per second; 0: as fast as it can (the pre-filled input) */
    double *appended;   /* per record: seconds, delivery report */
    double *seen_kafka; /* per record: first seen by the read_committed consumer */
    double *seen_pg;    /* per record: first seen by the SQL session */
    atomic_uint_fast64_t kafka_count, pg_max; /* pg_max: 1 + highest id visible */
    atomic_bool stop, produced;
} run_t;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    (void)rk;
    run_t *r = opaque;
    if (msg->err)
        die("input producer", rd_kafka_err2str(msg->err));
    uint64_t n = number_of(msg->payload, msg->len);
    if (n < r->total)
        r->appended[n] = tpc_test_now_s();
}

/* Append r->total records to the input topic at r->rate (0: unpaced). */
static void produce(run_t *r)
{
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, errstr, sizeof errstr) ||
        rd_kafka_conf_set(conf, "linger.ms", r->rate > 0 ? "1" : "5", errstr, sizeof errstr))
        die("input producer", errstr);
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_conf_set_opaque(conf, r);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    if (!rk)
        die("input producer", errstr);
    unsigned char value[VALUE_BYTES] = {0};
    double t0 = tpc_test_now_s();
    for (uint64_t i = 0; i < r->total; i++) {
        if (r->rate > 0) {
            double due = t0 + (double)i / r->rate;
            while (tpc_test_now_s() < due)
                rd_kafka_poll(rk, 1);
        }
        for (int b = 0; b < 8; b++)
            value[b] = (unsigned char)(i >> (8 * (7 - b)));
        while (rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(r->input), RD_KAFKA_V_KEY(value, 8),
                                 RD_KAFKA_V_VALUE(value, VALUE_BYTES),
                                 RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                 RD_KAFKA_V_END) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(rk, 1);
        if ((i & 63) == 0)
            rd_kafka_poll(rk, 0);
    }
    if (rd_kafka_flush(rk, 60000))
        die("input producer", "flush timed out");
    rd_kafka_destroy(rk);
}

static void *produce_main(void *arg)
{
    run_t *r = arg;
    produce(r);
    atomic_store(&r->produced, true);
    return NULL;
}

/* The read_committed consumer of the output topic. */
static void *consume_main(void *arg)
{
    run_t *r = arg;
    char errstr[512], group[128];
    tpc_test_unique_name(group, sizeof group, "twopc-bench-latency", '-');
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, errstr, sizeof errstr) ||
        rd_kafka_conf_set(conf, "group.id", group, errstr, sizeof errstr) ||
        rd_kafka_conf_set(conf, "isolation.level", "read_committed", errstr, sizeof errstr) ||
        rd_kafka_conf_set(conf, "enable.auto.commit", "false", errstr, sizeof errstr) ||
        rd_kafka_conf_set(conf, "fetch.wait.max.ms", "5", errstr, sizeof errstr))
        die("output consumer", errstr);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    if (!rk)
        die("output consumer", errstr);
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, r->output, 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
    if (rd_kafka_assign(rk, list))
        die("output consumer", "assign");
    rd_kafka_topic_partition_list_destroy(list);
    while (!atomic_load(&r->stop)) {
        rd_kafka_message_t *msg = rd_kafka_consumer_poll(rk, 10);
        if (!msg)
            continue;
        if (!msg->err) {
            uint64_t n = number_of(msg->payload, msg->len);
            if (n < r->total && r->seen_kafka[n] == 0) {
                r->seen_kafka[n] = tpc_test_now_s();
                atomic_fetch_add(&r->kafka_count, 1);
            }
        }
        rd_kafka_message_destroy(msg);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return NULL;
}

/* The SQL session: rows commit in order of their ids (one sink subtask, one transaction per
 * checkpoint, committed in order), so max(id) tells every id that became visible since. */
static void *poll_pg_main(void *arg)
{
    run_t *r = arg;
    PGconn *pg = tpc_test_pg_connect();
    uint64_t visible = 0;
    while (!atomic_load(&r->stop)) {
        long long max = tpc_test_pg_long(pg, "SELECT coalesce(max(id), -1) FROM %s", r->table);
        double now = tpc_test_now_s();
        for (uint64_t n = visible; (long long)n <= max && n < r->total; n++)
            r->seen_pg[n] = now;
        if (max + 1 > (long long)visible)
            visible = (uint64_t)(max + 1);
        atomic_store(&r->pg_max, visible);
        usleep(POLL_MS * 1000);
    }
    PQfinish(pg);
    return NULL;
}

/* transform: value unchanged but for its ninth byte, to stand for a real computation. */
static tpc_error_t *transform_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)self;
    for (size_t i = 0; i < tpc_batch_count(batch); i++) {
        tpc_record_t rec;
        tpc_batch_get(batch, i, &rec);
        unsigned char value[VALUE_BYTES];
        size_t len = rec.value_len < VALUE_BYTES ? rec.value_len : VALUE_BYTES;
        memcpy(value, rec.value, len);
        if (len > 8)
            value[8] ^= 0x5a;
        rec.value = value;
        rec.value_len = len;
        if (tpc_emit(ctx, &rec) != TPC_OK)
            break;
    }
    return NULL;
}

static tpc_error_t *transform_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx;
    *self = arg;
    return NULL;
}

static const tpc_operator_ops_t transform_ops = {
    .version = TPC_OPERATOR_OPS_VERSION, .open = transform_open, .process = transform_process};

static tpc_error_t *encode(void *opaque, const tpc_record_t *rec, tpc_pg_row_t *row)
{
    (void)opaque;
    tpc_pg_row_int8(row, (int64_t)number_of(rec->value, rec->value_len));
    tpc_pg_row_bytea(row, rec->value, rec->value_len);
    return NULL;
}

typedef struct {
    tpc_job_t *job;
    tpc_kafka_source_t *src;
    tpc_txn_sink_t *kafka, *pg;
    char *ckpt;
} job_t;

static void build(job_t *j, run_t *r, int interval_ms, bool bounded)
{
    char interval[32], prefix[128];
    snprintf(interval, sizeof interval, "%d", interval_ms);
    tpc_test_unique_name(prefix, sizeof prefix, "twopc-bench-lat", '-');
    j->ckpt = tpc_test_tmpdir("bench-latency");
    j->job = tpc_job_new("bench-latency");
    int s, x, k, p;
    tpc_error_t *err = tpc_job_set(j->job, "checkpoint.dir", j->ckpt);
    if (!err)
        err = tpc_job_set(j->job, "checkpoint.interval.ms", interval);
    if (!err)
        err = tpc_kafka_source_new(bootstrap, r->input, &j->src);
    if (!err)
        err = tpc_kafka_source_set(j->src, "bounded", bounded ? "true" : "false");
    if (!err)
        err = tpc_kafka_sink_new(bootstrap, r->output, &j->kafka);
    if (!err)
        err = tpc_txn_sink_set(j->kafka, "transactional.id.prefix", prefix);
    if (!err)
        err = tpc_txn_sink_set(j->kafka, "kafka.linger.ms", "5");
    if (!err)
        err = tpc_pg_sink_new(&j->pg);
    const char *pg_kv[][2] = {{"pg.conninfo", conninfo},
                              {"pg.table", r->table},
                              {"pg.columns", "id,v"},
                              {"pg.gid-prefix", r->table},
                              {"pg.mode", "copy"}};
    for (size_t i = 0; !err && i < sizeof pg_kv / sizeof pg_kv[0]; i++)
        err = tpc_txn_sink_set(j->pg, pg_kv[i][0], pg_kv[i][1]);
    if (!err)
        err = tpc_pg_sink_set_encoder(j->pg, encode, NULL);
    if (!err)
        err = tpc_kafka_source_add_to_job(j->src, j->job, "source", 1, &s);
    if (!err)
        err = tpc_job_add_vertex(j->job, "transform", 1, &transform_ops, NULL, &x);
    if (!err)
        err = tpc_txn_sink_add_to_job(j->kafka, j->job, "kafka", 1, &k);
    if (!err)
        err = tpc_txn_sink_add_to_job(j->pg, j->job, "postgres", 1, &p);
    if (!err)
        err = tpc_job_connect(j->job, s, x, TPC_EDGE_FORWARD);
    if (!err)
        err = tpc_job_connect(j->job, x, k, TPC_EDGE_FORWARD);
    if (!err)
        err = tpc_job_connect(j->job, x, p, TPC_EDGE_FORWARD);
    if (err)
        die("job", tpc_error_message(err));
}

static void destroy(job_t *j)
{
    tpc_job_destroy(j->job);
    tpc_txn_sink_destroy(j->kafka);
    tpc_txn_sink_destroy(j->pg);
    tpc_kafka_source_destroy(j->src);
    tpc_test_rmdir(j->ckpt);
    free(j->ckpt);
}

static void *job_main(void *arg)
{
    job_t *j = arg;
    tpc_job_result_t result;
    tpc_error_t *err = tpc_job_run(j->job, &result);
    if (err)
        die("job", tpc_error_message(err));
    return NULL;
}

static run_t *run_new(uint64_t total, double rate)
{
    run_t *r = calloc(1, sizeof *r);
    if (!r)
        die("run", "out of memory");
    r->total = total;
    r->rate = rate;
    r->appended = calloc(total, sizeof *r->appended);
    r->seen_kafka = calloc(total, sizeof *r->seen_kafka);
    r->seen_pg = calloc(total, sizeof *r->seen_pg);
    if (!r->appended || !r->seen_kafka || !r->seen_pg)
        die("run", "out of memory");
    tpc_test_unique_name(r->input, sizeof r->input, "twopc-bench-lat-in", '-');
    tpc_test_unique_name(r->output, sizeof r->output, "twopc-bench-lat-out", '-');
    tpc_test_unique_name(r->table, sizeof r->table, "bench_lat", '_');
    tpc_test_bench_create_topic(bootstrap, r->input, 1);
    tpc_test_bench_create_topic(bootstrap, r->output, 1);
    PGconn *pg = tpc_test_pg_connect();
    if (!tpc_test_pg_exec(pg, "CREATE TABLE %s (id bigint PRIMARY KEY, v bytea NOT NULL)",
                          r->table))
        die("create table", r->table);
    PQfinish(pg);
    return r;
}

static void run_free(run_t *r)
{
    PGconn *pg = tpc_test_pg_connect();
    tpc_test_pg_exec(pg, "DROP TABLE IF EXISTS %s", r->table);
    PQfinish(pg);
    free(r->appended);
    free(r->seen_kafka);
    free(r->seen_pg);
    free(r);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    pthread_t consumer, poller;
} readers_t;

static void readers_start(readers_t *rd, run_t *r)
{
    pthread_create(&rd->consumer, NULL, consume_main, r);
    pthread_create(&rd->poller, NULL, poll_pg_main, r);
}

static void readers_stop(readers_t *rd, run_t *r)
{
    atomic_store(&r->stop, true);
    pthread_join(rd->consumer, NULL);
    pthread_join(rd->poller, NULL);
}

/* Until every record is visible in both outputs, or @deadline (seconds, tpc_test_now_s). */
static bool wait_visible(run_t *r, double deadline)
{
    while (atomic_load(&r->kafka_count) < r->total || atomic_load(&r->pg_max) < r->total) {
        if (tpc_test_now_s() > deadline)
            return false;
        usleep(5000);
    }
    return true;
}

/* The bounded job over records written in advance, checkpoints every @interval_ms, both readers
 * running: records per second from the job's start until the last record is visible in both
 * outputs. */
static double sustainable_rate(uint64_t records, int interval_ms)
{
    run_t *r = run_new(records, 0);
    produce(r);
    job_t j = {0};
    build(&j, r, interval_ms, true);
    readers_t rd;
    readers_start(&rd, r);
    sleep(1); /* the readers are up */
    double t0 = tpc_test_now_s();
    job_main(&j);
    bool all = wait_visible(r, tpc_test_now_s() + DRAIN_S);
    readers_stop(&rd, r);
    if (!all)
        die("sustainable rate", "not every record became visible");
    double last = 0;
    for (uint64_t i = 0; i < records; i++) {
        double both = r->seen_kafka[i] > r->seen_pg[i] ? r->seen_kafka[i] : r->seen_pg[i];
        last = both > last ? both : last;
    }
    destroy(&j);
    run_free(r);
    return (double)records / (last - t0);
}

/* Latencies in ms of the records appended after the warm-up; sorted. */
static double *latencies(const run_t *r, const double *seen, double from, size_t *n)
{
    double *v = malloc(r->total * sizeof *v);
    if (!v)
        die("latencies", "out of memory");
    *n = 0;
    for (uint64_t i = 0; i < r->total; i++)
        if (r->appended[i] >= from && seen[i] > 0)
            v[(*n)++] = (seen[i] - r->appended[i]) * 1000.0;
    qsort(v, *n, sizeof *v, cmp_double);
    return v;
}

static double pct(const double *v, size_t n, double p)
{
    return n ? v[(size_t)(p * (double)(n - 1) + 0.5)] : 0;
}

/* With TWOPC_BENCH_OUT set: the run's latency distributions, 1000 quantiles and the maximum. */
static void write_distribution(int interval_ms, int load_pct, double *const dist[2],
                               const size_t n[2])
{
    const char *dir = tpc_test_env("TWOPC_BENCH_OUT");
    if (!dir)
        return;
    char path[4096];
    snprintf(path, sizeof path, "%s/latency_i%dms_load%d.tsv", dir, interval_ms, load_pct);
    FILE *f = fopen(path, "w");
    if (!f)
        die(path, "cannot write");
    fprintf(f, "# percentile\tkafka_ms\tpg_ms (interval %d ms, %d %% load)\n", interval_ms,
            load_pct);
    for (int q = 0; q <= 1000; q++)
        fprintf(f, "%.1f\t%.2f\t%.2f\n", q / 10.0, pct(dist[0], n[0], q / 1000.0),
                pct(dist[1], n[1], q / 1000.0));
    fclose(f);
}

/* One unbounded run; prints its lines. @returns the worse p99 of the two outputs. */
static double latency_run(int interval_ms, int load_pct, double rate, double seconds)
{
    run_t *r = run_new((uint64_t)(rate * seconds), rate);
    job_t j = {0};
    build(&j, r, interval_ms, false);
    pthread_t job_thread, producer;
    readers_t rd;
    pthread_create(&job_thread, NULL, job_main, &j);
    readers_start(&rd, r);
    sleep(1); /* the job and the readers are up before the first record */
    double started = tpc_test_now_s();
    pthread_create(&producer, NULL, produce_main, r);
    /* Checkpoint durations (trigger to complete) meanwhile: part of every record's latency. */
    size_t nckpt = 0, ckpt_cap = 4096;
    double *ckpt = malloc(ckpt_cap * sizeof *ckpt);
    uint64_t last_id = 0;
    double deadline = 0;
    while (!deadline ||
           ((atomic_load(&r->kafka_count) < r->total || atomic_load(&r->pg_max) < r->total) &&
            tpc_test_now_s() < deadline)) {
        if (!deadline && atomic_load(&r->produced))
            deadline = tpc_test_now_s() + DRAIN_S;
        tpc_job_stats_t st;
        tpc_job_get_stats(j.job, &st);
        if (st.last_checkpoint_id != last_id && ckpt && nckpt < ckpt_cap) {
            last_id = st.last_checkpoint_id;
            ckpt[nckpt++] = (double)st.last_checkpoint_duration_us / 1000.0;
        }
        usleep(5000);
    }
    pthread_join(producer, NULL);
    uint64_t got_kafka = atomic_load(&r->kafka_count), got_pg = atomic_load(&r->pg_max);
    readers_stop(&rd, r);
    tpc_error_destroy(tpc_job_stop_with_savepoint(j.job, false, NULL));
    pthread_join(job_thread, NULL);
    if (got_kafka < r->total || got_pg < r->total)
        fprintf(stderr,
                "bench_latency: only %llu (kafka) and %llu (pg) of %llu records visible "
                "after %.0f s\n",
                (unsigned long long)got_kafka, (unsigned long long)got_pg,
                (unsigned long long)r->total, DRAIN_S);
    double worst = 0;
    const char *names[] = {"kafka", "pg"};
    const double *seen[] = {r->seen_kafka, r->seen_pg};
    double *dist[2];
    size_t ndist[2];
    for (int o = 0; o < 2; o++) {
        size_t n;
        double *v = latencies(r, seen[o], started + WARMUP_S, &n);
        dist[o] = v, ndist[o] = n;
        char m[64];
        snprintf(m, sizeof m, "i%dms_load%d_%s", interval_ms, load_pct, names[o]);
        printf("bench latency %s_p50 %.1f ms\n", m, pct(v, n, 0.50));
        printf("bench latency %s_p99 %.1f ms\n", m, pct(v, n, 0.99));
        printf("bench latency %s_p999 %.1f ms\n", m, pct(v, n, 0.999));
        printf("bench latency %s_max %.1f ms\n", m, n ? v[n - 1] : 0);
        printf("bench latency %s_records %zu records\n", m, n);
        worst = pct(v, n, 0.99) > worst ? pct(v, n, 0.99) : worst;
    }
    write_distribution(interval_ms, load_pct, dist, ndist);
    free(dist[0]);
    free(dist[1]);
    if (ckpt && nckpt) {
        qsort(ckpt, nckpt, sizeof *ckpt, cmp_double);
        printf("bench latency i%dms_load%d_ckpt_p50 %.1f ms\n", interval_ms, load_pct,
               pct(ckpt, nckpt, 0.50));
        printf("bench latency i%dms_load%d_ckpt_p99 %.1f ms\n", interval_ms, load_pct,
               pct(ckpt, nckpt, 0.99));
    }
    free(ckpt);
    fflush(stdout);
    destroy(&j);
    run_free(r);
    return worst;
}

/* The positive numbers the environment variable @name lists (at most 8, separated by spaces or
 * commas) into @out; without it, @out's first @def numbers. @returns how many. */
static int numbers(const char *name, int *out, int def)
{
    const char *env = tpc_test_env(name);
    if (!env)
        return def;
    int n = 0;
    for (const char *s = env; *s && n < 8;) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v <= 0 || v > 1000000) {
            fprintf(stderr, "bench_latency: %s=\"%s\": give positive numbers, e.g. \"100 1000\"\n",
                    name, env);
            exit(2);
        }
        out[n++] = (int)v;
        s = end + strspn(end, " ,");
    }
    return n;
}

int main(void)
{
    bootstrap = tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP");
    conninfo = tpc_test_env_require("TWOPC_TEST_PG_CONNINFO");
    if (!bootstrap || !conninfo)
        return 1;
    const char *env = tpc_test_env("TWOPC_BENCH_SECONDS");
    double seconds = env ? atof(env) : 10;
    env = tpc_test_env("TWOPC_BENCH_RECORDS");
    uint64_t records = env ? strtoull(env, NULL, 10) : 500000;
    int intervals[8] = {100, 1000}, loads[8] = {50, 90};
    int nintervals = numbers("TWOPC_BENCH_INTERVALS", intervals, 2);
    int nloads = numbers("TWOPC_BENCH_LOADS", loads, 2);
    env = tpc_test_env("TWOPC_BENCH_RATE");
    for (int i = 0; i < nintervals; i++) {
        double goal = 1.5 * intervals[i] + 50;
        double rate = env ? atof(env) : sustainable_rate(records, intervals[i]);
        printf("bench latency i%dms_sustainable_rec_per_s %.0f rec/s\n", intervals[i], rate);
        fflush(stdout);
        for (int l = 0; l < nloads; l++) {
            double p99 = latency_run(intervals[i], loads[l], rate * loads[l] / 100.0, seconds);
            if (loads[l] == 50) {
                printf("bench latency i%dms_goal_p99_ms %.0f ms\n", intervals[i], goal);
                printf("bench latency i%dms_goal_met %d bool\n", intervals[i], p99 <= goal);
            }
        }
    }
    return 0;
}
