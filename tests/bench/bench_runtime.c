/*
 * Runtime benchmark: generator -> map -> discarding sink with 16-byte records.
 * Prints `bench runtime <metric> <value> <unit>` lines:
 *   throughput with checkpointing off and every 100 ms at parallelism 1 and 2, and their ratio;
 *   checkpoint duration (trigger -> complete) p50/p99 with small state;
 *   end latency: last record -> tpc_job_run() returns, with checkpoint.interval.ms=10000;
 *   peak RSS of a child process running 10 M and 100 M records (memory must not grow with count);
 *   keyed state: a keyed sum (16-byte values) behind a hash edge at parallelism 1 over 1 M distinct
 *   keys (keyed_rec_per_s, and keyed_ratio against throughput_p1_off), alternated with the same
 *   job whose last operator keeps no state (keyed_stateless_rec_per_s): keyed_state_ratio, the
 *   keyed sum's rate over that one, is the cost of the state alone, without the shuffle's (and
 *   keyed_cpu_ns_per_rec, keyed_stateless_cpu_ns_per_rec: processor time per record); then
 *   4 M records over those 1 M keys with a checkpoint every 500 ms: once all 1 M keys hold state,
 *   the longest checkpoint that completed (keyed_ckpt_ms_1m, out of keyed_ckpts_1m), the longest
 *   pause between two batches of the keyed operator (keyed_stall_ms_1m), and heap memory in use
 *   per key (keyed_bytes_per_key). BENCH_SCALE (default 1) scales the record counts of the
 *   throughput runs and of the keyed rate runs (their keys stay 1 M).
 * Backpressure: generator -> map passing 1,000 records a second -> discard, 8,000 records, a
 * checkpoint every second: checkpoint duration p50/p99/max (ckpt_duration_backpressure_*) against
 * the same job with a fast map (ckpt_duration_unloaded_p99), and the goal 2 x unloaded + one
 * interval. TWOPC_BENCH_PART=backpressure runs only this part; TWOPC_BENCH_PART=keyed only
 * throughput_p1_off (the best of five) and the keyed parts.
 * Incremental checkpoints (state.incremental, max-chain 10): the keyed sum over 10 M keys
 * (x BENCH_SCALE), filled once, then 1 % of the keys changed per 1 s interval for 25 intervals:
 * bytes of an incremental checkpoint against a full one (incr_ckpt_bytes_ratio, medians), the
 * duration of the incremental ones (incr_ckpt_ms p50 and max) and of the full ones, and the time
 * a restart takes to restore the chain the job ended with (incr_restore_ms, from tpc_job_run() to
 * the operator's finish(), with the chain's length). TWOPC_BENCH_PART=incremental runs only this;
 * BENCH_INCR_MAX_CHAIN sets state.incremental.max-chain.
 */
#include "tpc_runtime.h"
#include "tpc_test_env.h"
#include "tpc_test_ops.h"

#include <inttypes.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    double durations_ms[100000];
    int n;
} durations_t;

static void on_ckpt(void *opaque, uint64_t id, bool completed, uint64_t us, const char *reason)
{
    (void)id;
    (void)reason;
    durations_t *d = opaque;
    if (completed && d->n < 100000)
        d->durations_ms[d->n++] = (double)us / 1000.0;
}

static void check(tpc_error_t *err)
{
    if (err) {
        fprintf(stderr, "bench_runtime: %s\n", tpc_error_message(err));
        exit(1);
    }
}

/* Run the pipeline; returns records/s (total over all source subtasks). */
static double run_pipeline(int par, uint64_t per_subtask, const char *interval, durations_t *d)
{
    tpc_test_seq_conf_t src = {.count_default = per_subtask, .per_poll = 256};
    char *dir = NULL;
    tpc_job_t *job = tpc_job_new("bench");
    if (interval) {
        dir = tpc_test_tmpdir("bench");
        check(tpc_job_set(job, "checkpoint.dir", dir));
        check(tpc_job_set(job, "checkpoint.interval.ms", interval));
    }
    int g, m, k;
    check(tpc_job_add_vertex(job, "generator", par, &tpc_test_seq_source_ops, &src, &g));
    check(tpc_job_add_vertex(job, "map", par, &tpc_test_identity_ops, NULL, &m));
    check(tpc_job_add_vertex(job, "sink", par, &tpc_test_discard_ops, NULL, &k));
    check(tpc_job_connect(job, g, m, TPC_EDGE_FORWARD));
    check(tpc_job_connect(job, m, k, TPC_EDGE_FORWARD));
    if (d)
        tpc_job_set_checkpoint_callback(job, on_ckpt, d);
    double t0 = tpc_test_now_s();
    check(tpc_job_run(job, NULL));
    double secs = tpc_test_now_s() - t0;
    tpc_job_destroy(job);
    if (dir) {
        tpc_test_rmdir(dir);
        free(dir);
    }
    return (double)per_subtask * par / secs;
}

/* ---- backpressure: a slow operator ------------------------------------------------------- */

#define SLOW_RATE    1000 /* records a second per subtask */
#define SLOW_RECORDS 8000

typedef struct {
    double started;
    uint64_t passed;
} slow_t;

static tpc_error_t *slow_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx;
    (void)arg;
    slow_t *s = calloc(1, sizeof *s);
    if (!s)
        return tpc_error_new(TPC_ERR_NOMEM, 0, "out of memory");
    *self = s;
    return NULL;
}

/* Passes records on at SLOW_RATE, record by record, as an operator that calls a slow service. */
static tpc_error_t *slow_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    slow_t *s = self;
    if (s->started == 0)
        s->started = tpc_test_now_s();
    for (size_t i = 0; i < tpc_batch_count(batch); i++) {
        double due = s->started + (double)s->passed / SLOW_RATE;
        double now = tpc_test_now_s();
        if (due > now)
            usleep((useconds_t)((due - now) * 1e6));
        tpc_record_t rec;
        tpc_batch_get(batch, i, &rec);
        if (tpc_emit(ctx, &rec) != TPC_OK)
            break;
        s->passed++;
    }
    return NULL;
}

static void slow_close(void *self, tpc_ctx_t *ctx)
{
    (void)ctx;
    free(self);
}

static const tpc_operator_ops_t slow_ops = {.version = TPC_OPERATOR_OPS_VERSION,
                                            .open = slow_open,
                                            .process = slow_process,
                                            .close = slow_close};

/* generator -> map (@slow: SLOW_RATE records/s) -> discard, SLOW_RECORDS records, a checkpoint
 * every second: the checkpoint durations in @d. */
static void run_backpressure(bool slow, durations_t *d)
{
    tpc_test_seq_conf_t src = {.count_default = SLOW_RECORDS, .per_poll = 256};
    char *dir = tpc_test_tmpdir("bench-bp");
    tpc_job_t *job = tpc_job_new("bench-backpressure");
    check(tpc_job_set(job, "checkpoint.dir", dir));
    check(tpc_job_set(job, "checkpoint.interval.ms", "1000"));
    int g, m, k;
    check(tpc_job_add_vertex(job, "generator", 1, &tpc_test_seq_source_ops, &src, &g));
    check(tpc_job_add_vertex(job, "map", 1, slow ? &slow_ops : &tpc_test_identity_ops, NULL, &m));
    check(tpc_job_add_vertex(job, "sink", 1, &tpc_test_discard_ops, NULL, &k));
    check(tpc_job_connect(job, g, m, TPC_EDGE_FORWARD));
    check(tpc_job_connect(job, m, k, TPC_EDGE_FORWARD));
    tpc_job_set_checkpoint_callback(job, on_ckpt, d);
    check(tpc_job_run(job, NULL));
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}

/* ---- keyed state ------------------------------------------------------------------------- */

#define KEYED_KEYS 1000000u

typedef struct {
    uint64_t records;
    double last_batch, max_gap_ms;
    atomic_bool full; /* every key has state: gaps and checkpoints count from here */
    long rss_before_kb, rss_full_kb;
    double longest_ckpt_ms; /* of the checkpoints that completed once full */
    int ckpts;
    uint64_t sum; /* the stateless operator's total */
    double cpu_s; /* processor time of the whole process (every thread) over the run */
} keyed_bench_t;

/* Heap bytes in use, in KiB: unlike the resident set it does not keep what earlier runs freed. */
static long rss_kb(void)
{
    struct mallinfo2 mi = mallinfo2();
    return (long)(mi.uordblks / 1024);
}

static tpc_error_t *keyed_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx;
    *self = arg;
    return NULL;
}

static tpc_error_t *keyed_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    keyed_bench_t *b = self;
    double now = tpc_test_now_s();
    if (atomic_load(&b->full) && b->last_batch > 0 &&
        (now - b->last_batch) * 1000.0 > b->max_gap_ms)
        b->max_gap_ms = (now - b->last_batch) * 1000.0;
    for (size_t i = 0; i < tpc_batch_count(batch); i++) {
        tpc_record_t r;
        tpc_batch_get(batch, i, &r);
        uint64_t v[2] = {0, 0};
        const void *old;
        size_t len;
        tpc_error_t *err = tpc_keyed_get(ctx, "sum", r.key, r.key_len, &old, &len);
        if (err)
            return err;
        if (old && len == sizeof v)
            memcpy(v, old, sizeof v);
        v[0] += r.value_len;
        v[1]++;
        if ((err = tpc_keyed_put(ctx, "sum", r.key, r.key_len, v, sizeof v)))
            return err;
        if (++b->records == KEYED_KEYS) {
            b->rss_full_kb = rss_kb();
            atomic_store(&b->full, true);
        }
    }
    b->last_batch = tpc_test_now_s();
    return NULL;
}

static const tpc_operator_ops_t keyed_sum_ops = {
    .version = TPC_OPERATOR_OPS_VERSION, .open = keyed_open, .process = keyed_process};

/* The keyed sum's twin without state: it reads the same records behind the same hash edge and
 * folds them into one total, so that its rate is the shuffle's alone. */
static tpc_error_t *stateless_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)ctx;
    keyed_bench_t *b = self;
    for (size_t i = 0; i < tpc_batch_count(batch); i++) {
        tpc_record_t r;
        tpc_batch_get(batch, i, &r);
        uint64_t k = 0;
        memcpy(&k, r.key, r.key_len < sizeof k ? r.key_len : sizeof k);
        b->sum += k + r.value_len;
        b->records++;
    }
    return NULL;
}

static const tpc_operator_ops_t stateless_ops = {
    .version = TPC_OPERATOR_OPS_VERSION, .open = keyed_open, .process = stateless_process};

/* A key of 8 bytes: record number modulo KEYED_KEYS. */
static tpc_error_t *rekey_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)self;
    for (size_t i = 0; i < tpc_batch_count(batch); i++) {
        tpc_record_t r;
        tpc_batch_get(batch, i, &r);
        int sub;
        uint64_t k;
        if (!tpc_test_seq_decode(r.key, r.key_len, &sub, &k))
            return tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL, "not a sequence record");
        k %= KEYED_KEYS;
        tpc_record_t out = {
            .key = &k, .key_len = sizeof k, .value = r.value, .value_len = r.value_len};
        if (tpc_emit(ctx, &out) != TPC_OK)
            return tpc_error_new(TPC_ERR_CANCELED, 0, "canceled");
    }
    return NULL;
}

static const tpc_operator_ops_t rekey_ops = {
    .version = TPC_OPERATOR_OPS_VERSION, .open = keyed_open, .process = rekey_process};

/* Checkpoints that completed once every key held state (the coordinator's thread). */
static void on_keyed_ckpt(void *opaque, uint64_t id, bool completed, uint64_t us,
                          const char *reason)
{
    (void)id, (void)reason;
    keyed_bench_t *b = opaque;
    if (!completed || !atomic_load(&b->full))
        return;
    b->ckpts++;
    if ((double)us / 1000.0 > b->longest_ckpt_ms)
        b->longest_ckpt_ms = (double)us / 1000.0;
}

/* Processor time (user and system) of every thread of the process so far, in seconds. */
static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* generator -> rekey (forward) -> @p ops (hash); returns records/s. */
static double run_hash_job(const tpc_operator_ops_t *ops, uint64_t records, const char *interval,
                           keyed_bench_t *b)
{
    tpc_test_seq_conf_t src = {.count_default = records, .per_poll = 256};
    char *dir = interval ? tpc_test_tmpdir("bench-keyed") : NULL;
    tpc_job_t *job = tpc_job_new("bench-keyed");
    if (dir) {
        check(tpc_job_set(job, "checkpoint.dir", dir));
        check(tpc_job_set(job, "checkpoint.interval.ms", interval));
    }
    int g, r, k;
    check(tpc_job_add_vertex(job, "generator", 1, &tpc_test_seq_source_ops, &src, &g));
    check(tpc_job_add_vertex(job, "rekey", 1, &rekey_ops, NULL, &r));
    check(tpc_job_add_vertex(job, "sum", 1, ops, b, &k));
    check(tpc_job_connect(job, g, r, TPC_EDGE_FORWARD));
    check(tpc_job_connect(job, r, k, TPC_EDGE_HASH));
    if (interval)
        tpc_job_set_checkpoint_callback(job, on_keyed_ckpt, b);
    b->rss_before_kb = rss_kb();
    double cpu0 = cpu_s();
    double t0 = tpc_test_now_s();
    check(tpc_job_run(job, NULL));
    double secs = tpc_test_now_s() - t0;
    tpc_job_destroy(job);
    b->cpu_s = cpu_s() - cpu0;
    if (dir) {
        tpc_test_rmdir(dir);
        free(dir);
    }
    if (b->records != records) {
        fprintf(stderr, "bench_runtime: the keyed job saw %llu of %llu records\n",
                (unsigned long long)b->records, (unsigned long long)records);
        exit(1);
    }
    return (double)records / secs;
}

/* generator -> rekey (forward) -> keyed sum (hash); returns records/s. */
static double run_keyed(uint64_t records, const char *interval, keyed_bench_t *b)
{
    return run_hash_job(&keyed_sum_ops, records, interval, b);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- incremental checkpoints ------------------------------------------------------------ */

#define INCR_ROUNDS 25

typedef struct {
    uint64_t keys;
    const char *dir;
    double phase2_at; /* when the fill ended: 0 before */
    uint64_t polled;  /* records the source emitted */
    /* Checkpoints completed after the fill: duration, bytes, and whether incremental. */
    double ms[1000];
    double bytes[1000];
    bool incr[1000];
    int n;
    double finished_at;
} incr_bench_t;

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static incr_bench_t *incr_b;

/* The sequence source, paced once the fill is done: 1 % of the keys per second. Pacing at the
 * source keeps the channels short, so that a barrier does not wait behind paced records. */
static tpc_error_t *incr_poll(void *self, tpc_ctx_t *ctx, tpc_poll_result_t *result)
{
    incr_bench_t *b = incr_b;
    if (b->polled >= b->keys) {
        double now = tpc_test_now_s();
        if (b->phase2_at == 0)
            b->phase2_at = now;
        double due = b->phase2_at + (double)(b->polled - b->keys) / (double)(b->keys / 100);
        if (due > now)
            usleep((useconds_t)((due - now) * 1e6));
    }
    b->polled += 256; /* per_poll */
    return tpc_test_seq_source_ops.poll(self, ctx, result);
}

/* Record n < keys: key n (the fill); after that a random key. */
static tpc_error_t *incr_rekey_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    incr_bench_t *b = self;
    for (size_t i = 0; i < tpc_batch_count(batch); i++) {
        tpc_record_t r;
        tpc_batch_get(batch, i, &r);
        int sub;
        uint64_t k;
        if (!tpc_test_seq_decode(r.key, r.key_len, &sub, &k))
            return tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL, "not a sequence record");
        if (k >= b->keys)
            k = mix64(k) % b->keys;
        tpc_record_t out = {
            .key = &k, .key_len = sizeof k, .value = r.value, .value_len = r.value_len};
        if (tpc_emit(ctx, &out) != TPC_OK)
            return tpc_error_new(TPC_ERR_CANCELED, 0, "canceled");
    }
    return NULL;
}

static const tpc_operator_ops_t incr_rekey_ops = {
    .version = TPC_OPERATOR_OPS_VERSION, .open = keyed_open, .process = incr_rekey_process};

static tpc_error_t *incr_sum_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)self;
    for (size_t i = 0; i < tpc_batch_count(batch); i++) {
        tpc_record_t r;
        tpc_batch_get(batch, i, &r);
        uint64_t v[2] = {0, 0};
        const void *old;
        size_t len;
        tpc_error_t *err = tpc_keyed_get(ctx, "sum", r.key, r.key_len, &old, &len);
        if (err)
            return err;
        if (old && len == sizeof v)
            memcpy(v, old, sizeof v);
        v[0] += r.value_len;
        v[1]++;
        if ((err = tpc_keyed_put(ctx, "sum", r.key, r.key_len, v, sizeof v)))
            return err;
    }
    return NULL;
}

static tpc_error_t *incr_sum_finish(void *self, tpc_ctx_t *ctx)
{
    (void)ctx;
    incr_bench_t *b = self;
    b->finished_at = tpc_test_now_s();
    return NULL;
}

static const tpc_operator_ops_t incr_sum_ops = {.version = TPC_OPERATOR_OPS_VERSION,
                                                .open = keyed_open,
                                                .process = incr_sum_process,
                                                .finish = incr_sum_finish};

/* The format version of a checkpoint file (3: incremental keyed state) and its size; with
 * @p refs, the number of checkpoints it builds on. */
static uint32_t ckpt_file(const char *dir, uint64_t id, double *bytes, uint32_t *refs)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/chk-%020" PRIu64, dir, id);
    FILE *f = fopen(path, "rb");
    uint8_t h[37] = {0};
    if (!f)
        return 0;
    size_t got = fread(h, 1, sizeof h, f);
    fseek(f, 0, SEEK_END);
    *bytes = (double)ftell(f);
    fclose(f);
    uint32_t version = got >= 12 ? (uint32_t)h[8] | (uint32_t)h[9] << 8 : 0;
    if (refs)
        *refs = version == 3 && got == sizeof h ? (uint32_t)h[33] | (uint32_t)h[34] << 8 : 0;
    return version;
}

static void on_incr_ckpt(void *opaque, uint64_t id, bool completed, uint64_t us, const char *reason)
{
    (void)reason;
    incr_bench_t *b = opaque;
    if (!completed || b->phase2_at == 0 || b->n == 1000)
        return;
    double bytes = 0;
    uint32_t version = ckpt_file(b->dir, id, &bytes, NULL);
    b->ms[b->n] = (double)us / 1000.0;
    b->bytes[b->n] = bytes;
    b->incr[b->n] = version == 3;
    b->n++;
}

static tpc_job_t *incr_job(const char *dir, tpc_test_seq_conf_t *src, incr_bench_t *b)
{
    tpc_job_t *job = tpc_job_new("bench-incremental");
    check(tpc_job_set(job, "checkpoint.dir", dir));
    check(tpc_job_set(job, "checkpoint.interval.ms", "1000"));
    check(tpc_job_set(job, "state.incremental", "true"));
    const char *chain = getenv("BENCH_INCR_MAX_CHAIN");
    if (chain)
        check(tpc_job_set(job, "state.incremental.max-chain", chain));
    int g, r, k;
    static tpc_operator_ops_t paced;
    paced = tpc_test_seq_source_ops;
    paced.poll = incr_poll;
    incr_b = b;
    check(tpc_job_add_vertex(job, "generator", 1, &paced, src, &g));
    check(tpc_job_add_vertex(job, "rekey", 1, &incr_rekey_ops, b, &r));
    check(tpc_job_add_vertex(job, "sum", 1, &incr_sum_ops, b, &k));
    check(tpc_job_connect(job, g, r, TPC_EDGE_FORWARD));
    check(tpc_job_connect(job, r, k, TPC_EDGE_HASH));
    return job;
}

/* The median of those of @p n values @p v whose @p incr is @p want; 0 for none. */
static double median_of(const double *v, const bool *incr, int n, bool want, double *max)
{
    static double pick[1000];
    int m = 0;
    for (int i = 0; i < n; i++)
        if (incr[i] == want)
            pick[m++] = v[i];
    if (!m)
        return 0;
    qsort(pick, (size_t)m, sizeof *pick, cmp_double);
    if (max)
        *max = pick[m - 1];
    return pick[m / 2];
}

static int incremental(double scale)
{
    static incr_bench_t b;
    memset(&b, 0, sizeof b);
    b.keys = (uint64_t)(10000000 * scale);
    char *dir = tpc_test_tmpdir("bench-incremental");
    b.dir = dir;
    tpc_test_seq_conf_t src = {.count_default = b.keys + b.keys / 100 * INCR_ROUNDS,
                               .per_poll = 256};
    tpc_job_t *job = incr_job(dir, &src, &b);
    tpc_job_set_checkpoint_callback(job, on_incr_ckpt, &b);
    check(tpc_job_run(job, NULL));
    tpc_job_destroy(job);
    double incr_max = 0, full_max = 0;
    double incr_bytes = median_of(b.bytes, b.incr, b.n, true, NULL);
    double full_bytes = median_of(b.bytes, b.incr, b.n, false, NULL);
    double incr_ms = median_of(b.ms, b.incr, b.n, true, &incr_max);
    double full_ms = median_of(b.ms, b.incr, b.n, false, &full_max);
    int nincr = 0;
    for (int i = 0; i < b.n; i++)
        nincr += b.incr[i];
    printf("bench runtime incr_keys %" PRIu64 " keys\n", b.keys);
    printf("bench runtime incr_changed_per_s %" PRIu64 " keys\n", b.keys / 100);
    printf("bench runtime incr_ckpts %d count\n", nincr);
    printf("bench runtime incr_full_ckpts %d count\n", b.n - nincr);
    printf("bench runtime incr_ckpt_bytes %.0f B\n", incr_bytes);
    printf("bench runtime incr_full_ckpt_bytes %.0f B\n", full_bytes);
    printf("bench runtime incr_ckpt_bytes_ratio %.4f ratio\n",
           full_bytes > 0 ? incr_bytes / full_bytes : 0);
    printf("bench runtime incr_ckpt_ms %.1f ms\n", incr_ms);
    printf("bench runtime incr_ckpt_ms_max %.1f ms\n", incr_max);
    printf("bench runtime incr_full_ckpt_ms %.1f ms\n", full_ms);
    printf("bench runtime incr_full_ckpt_ms_max %.1f ms\n", full_max);
    fflush(stdout);

    /* A restart restores the chain the job ended with; its input has ended, so it finishes. */
    tpc_checkpoint_folder_t folder;
    check(tpc_checkpoint_folder_read(dir, false, &folder));
    uint32_t links = 0;
    double bytes = 0;
    if (folder.restore_index >= 0)
        ckpt_file(dir, folder.files[folder.restore_index].id, &bytes, &links);
    tpc_checkpoint_folder_free(&folder);
    job = incr_job(dir, &src, &b);
    check(tpc_job_set(job, "checkpoint.after-finish", "false"));
    b.finished_at = 0;
    double t0 = tpc_test_now_s();
    check(tpc_job_run(job, NULL));
    tpc_job_destroy(job);
    printf("bench runtime incr_restore_ms %.1f ms\n", (b.finished_at - t0) * 1000.0);
    printf("bench runtime incr_restore_links %u count\n", links);
    tpc_test_rmdir(dir);
    free(dir);
    return 0;
}

/* A source that notes when it emitted its last record. */
static _Atomic double last_record_at;

static tpc_error_t *timed_poll(void *self, tpc_ctx_t *ctx, tpc_poll_result_t *result)
{
    tpc_error_t *err = tpc_test_seq_source_ops.poll(self, ctx, result);
    if (!err && *result == TPC_POLL_END)
        atomic_store(&last_record_at, tpc_test_now_s());
    return err;
}

static double end_latency_ms(void)
{
    tpc_operator_ops_t ops = tpc_test_seq_source_ops;
    ops.poll = timed_poll;
    tpc_test_seq_conf_t src = {.count_default = 100000, .per_poll = 256};
    char *dir = tpc_test_tmpdir("bench-end");
    tpc_job_t *job = tpc_job_new("bench-end");
    check(tpc_job_set(job, "checkpoint.dir", dir));
    check(tpc_job_set(job, "checkpoint.interval.ms", "10000"));
    int g, m, k;
    check(tpc_job_add_vertex(job, "generator", 1, &ops, &src, &g));
    check(tpc_job_add_vertex(job, "map", 1, &tpc_test_identity_ops, NULL, &m));
    check(tpc_job_add_vertex(job, "sink", 1, &tpc_test_discard_ops, NULL, &k));
    check(tpc_job_connect(job, g, m, TPC_EDGE_FORWARD));
    check(tpc_job_connect(job, m, k, TPC_EDGE_FORWARD));
    check(tpc_job_run(job, NULL));
    double end = tpc_test_now_s();
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
    return (end - atomic_load(&last_record_at)) * 1000.0;
}

/* Peak RSS (MB) of a child process that runs @p records through the pipeline with checkpoints. */
static double child_rss_mb(uint64_t records)
{
    pid_t pid = fork();
    if (pid == 0) {
        run_pipeline(1, records, "100", NULL);
        _exit(0);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench_runtime: rss child failed\n");
        exit(1);
    }
    return (double)ru.ru_maxrss / 1024.0;
}

/* Checkpoints of a job whose operator passes SLOW_RATE records a second, against the same job
 * with a fast one: how long a barrier waits behind the records buffered before it. */
static int backpressure(void)
{
    static durations_t slow, fast;
    run_backpressure(false, &fast);
    run_backpressure(true, &slow);
    qsort(fast.durations_ms, (size_t)fast.n, sizeof(double), cmp_double);
    qsort(slow.durations_ms, (size_t)slow.n, sizeof(double), cmp_double);
    double unloaded = fast.n ? fast.durations_ms[(fast.n * 99) / 100] : 0;
    printf("bench runtime ckpt_duration_unloaded_p99 %.2f ms\n", unloaded);
    if (slow.n) {
        printf("bench runtime ckpt_duration_backpressure_p50 %.2f ms\n",
               slow.durations_ms[slow.n / 2]);
        printf("bench runtime ckpt_duration_backpressure_p99 %.2f ms\n",
               slow.durations_ms[(slow.n * 99) / 100]);
        printf("bench runtime ckpt_duration_backpressure_max %.2f ms\n",
               slow.durations_ms[slow.n - 1]);
    }
    printf("bench runtime ckpt_backpressure_checkpoints %d checkpoints\n", slow.n);
    printf("bench runtime ckpt_backpressure_goal %.2f ms\n", 2 * unloaded + 1000);
    return 0;
}

/* The keyed parts: the keyed sum and the stateless operator behind the same hash edge, alternated,
 * the best of five of each (no checkpoints, as @p p1_off); then the keyed sum with checkpoints. */
static void keyed_parts(double p1_off, double scale)
{
    uint64_t records = (uint64_t)(KEYED_KEYS * scale);
    if (records < 1000)
        records = 1000;
    double keyed = 0, stateless = 0, keyed_cpu = 1e9, stateless_cpu = 1e9;
    for (int rep = 0; rep < 5; rep++) {
        static keyed_bench_t b;
        memset(&b, 0, sizeof b);
        double rate = run_keyed(records, NULL, &b);
        keyed = rate > keyed ? rate : keyed;
        keyed_cpu = b.cpu_s < keyed_cpu ? b.cpu_s : keyed_cpu;
        memset(&b, 0, sizeof b);
        rate = run_hash_job(&stateless_ops, records, NULL, &b);
        stateless = rate > stateless ? rate : stateless;
        stateless_cpu = b.cpu_s < stateless_cpu ? b.cpu_s : stateless_cpu;
    }
    printf("bench runtime keyed_rec_per_s %.0f rec/s\n", keyed);
    printf("bench runtime keyed_ratio %.3f ratio\n", keyed / p1_off);
    printf("bench runtime keyed_stateless_rec_per_s %.0f rec/s\n", stateless);
    printf("bench runtime keyed_state_ratio %.3f ratio\n", keyed / stateless);
    /* Processor time per record over all threads, the least of five: what other load changes
     * least. */
    printf("bench runtime keyed_cpu_ns_per_rec %.0f ns\n", keyed_cpu * 1e9 / (double)records);
    printf("bench runtime keyed_stateless_cpu_ns_per_rec %.0f ns\n",
           stateless_cpu * 1e9 / (double)records);
    fflush(stdout);
    static keyed_bench_t b;
    memset(&b, 0, sizeof b);
    run_keyed(4 * KEYED_KEYS, "500", &b);
    printf("bench runtime keyed_ckpt_ms_1m %.1f ms\n", b.longest_ckpt_ms);
    printf("bench runtime keyed_ckpts_1m %d count\n", b.ckpts);
    printf("bench runtime keyed_stall_ms_1m %.1f ms\n", b.max_gap_ms);
    printf("bench runtime keyed_bytes_per_key %.0f B\n",
           (double)(b.rss_full_kb - b.rss_before_kb) * 1024.0 / KEYED_KEYS);
    fflush(stdout);
}

int main(void)
{
    const char *scale_env = getenv("BENCH_SCALE");
    double scale = scale_env ? atof(scale_env) : 1.0;
    uint64_t n = (uint64_t)(10000000 * scale);
    const char *part = getenv("TWOPC_BENCH_PART");
    if (part && strcmp(part, "backpressure") == 0)
        return backpressure();
    if (part && strcmp(part, "incremental") == 0)
        return incremental(scale);

    if (part && strcmp(part, "keyed") == 0) {
        /* The plain pipeline beside the keyed jobs, each the best of five. */
        double p1_off = 0;
        run_pipeline(1, n / 10, NULL, NULL);
        for (int rep = 0; rep < 5; rep++) {
            double a = run_pipeline(1, n, NULL, NULL);
            p1_off = a > p1_off ? a : p1_off;
        }
        printf("bench runtime throughput_p1_off %.0f rec/s\n", p1_off);
        keyed_parts(p1_off, scale);
        return 0;
    }

    double p1_off = 1;
    /* Warm up once so the first measured run does not pay for page faults. */
    run_pipeline(1, n / 10, NULL, NULL);
    for (int par = 1; par <= 2; par++) {
        /* Alternate the two modes and keep the best of five of each: other load only slows runs
         * down. */
        double off = 0, on = 0;
        for (int rep = 0; rep < 5; rep++) {
            double a = run_pipeline(par, n / (uint64_t)par, NULL, NULL);
            double b = run_pipeline(par, n / (uint64_t)par, "100", NULL);
            off = a > off ? a : off;
            on = b > on ? b : on;
        }
        printf("bench runtime throughput_p%d_off %.0f rec/s\n", par, off);
        printf("bench runtime throughput_p%d_ckpt100 %.0f rec/s\n", par, on);
        printf("bench runtime ckpt_ratio_p%d %.3f ratio\n", par, on / off);
        fflush(stdout);
        if (par == 1)
            p1_off = off;
    }

    keyed_parts(p1_off, scale);
    fflush(stdout);

    static durations_t d;
    run_pipeline(1, n, "100", &d);
    if (d.n > 0) {
        qsort(d.durations_ms, (size_t)d.n, sizeof(double), cmp_double);
        printf("bench runtime ckpt_duration_p50 %.2f ms\n", d.durations_ms[d.n / 2]);
        printf("bench runtime ckpt_duration_p99 %.2f ms\n", d.durations_ms[(d.n * 99) / 100]);
    }
    printf("bench runtime end_latency %.2f ms\n", end_latency_ms());
    fflush(stdout);
    printf("bench runtime rss_10m %.1f MB\n", child_rss_mb(10000000));
    fflush(stdout);
    printf("bench runtime rss_100m %.1f MB\n", child_rss_mb(100000000));
    fflush(stdout);
    return incremental(scale);
}
