/*
 * Checkpoint duration on S3-compatible storage against the local folder: the same job with the
 * same keyed state, its checkpoints written once to a folder and once to an S3 server (part of
 * make bench-cluster, tests/bench/cluster_bench.sh, which starts the local one).
 *
 *   job: sequence source (paced) -> rekey (record number modulo KEYS) -hash-> keyed sum
 *        (an 8-byte key and a 16-byte value each), a full checkpoint every 250 ms
 *
 * Only checkpoints that complete once every key holds state count, so each one writes the whole
 * state. The duration is the coordinator's, trigger to completion record (the state written, the
 * completion record's compare-and-set on S3 or its rename in the folder), as the job's checkpoint
 * callback reports it. Both sides run in rounds, taking turns at going first; the figures are
 * those of every checkpoint of all rounds of a side. Prints
 *   bench cluster <metric> <value> <unit>
 * Environment: TWOPC_TEST_S3_ENDPOINT (required: the S3 server, with a bucket
 * TWOPC_BENCH_S3_BUCKET, default twopc-bench; credentials from AWS_ACCESS_KEY_ID and
 * AWS_SECRET_ACCESS_KEY), TWOPC_BENCH_S3_KEYS (default 100000), TWOPC_BENCH_S3_SECONDS (each run,
 * default 8), TWOPC_BENCH_ROUNDS (default 3).
 */
#include "tpc_s3.h"
#include "tpc_test_bench.h"
#include "tpc_test_env.h"
#include "tpc_test_ops.h"

#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_CKPTS   4096
#define INTERVAL_MS "250"
/* The source's pace: 256 records a poll, a poll every 5 ms, about 50,000 records a second. */
#define PER_POLL 256
#define SLEEP_US 5000

typedef struct {
    uint64_t keys, records;
    atomic_bool full; /* every key holds state: checkpoints count from here */
    double ms[MAX_CKPTS];
    int n, aborted;
} side_t;

static tpc_error_t *bench_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx;
    *self = arg;
    return NULL;
}

/* The record number modulo the key count, as an 8-byte key. */
static tpc_error_t *rekey_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    side_t *s = self;
    for (size_t i = 0; i < tpc_batch_count(batch); i++) {
        tpc_record_t r;
        tpc_batch_get(batch, i, &r);
        int sub;
        uint64_t k;
        if (!tpc_test_seq_decode(r.key, r.key_len, &sub, &k))
            return tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL, "not a sequence record");
        k %= s->keys;
        tpc_record_t out = {
            .key = &k, .key_len = sizeof k, .value = r.value, .value_len = r.value_len};
        if (tpc_emit(ctx, &out) != TPC_OK)
            return tpc_error_new(TPC_ERR_CANCELED, 0, "canceled");
    }
    return NULL;
}

static tpc_error_t *sum_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    side_t *s = self;
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
        if (++s->records == s->keys)
            atomic_store(&s->full, true);
    }
    return NULL;
}

static const tpc_operator_ops_t rekey_ops = {
    .version = TPC_OPERATOR_OPS_VERSION, .open = bench_open, .process = rekey_process};
static const tpc_operator_ops_t sum_ops = {
    .version = TPC_OPERATOR_OPS_VERSION, .open = bench_open, .process = sum_process};

static void on_ckpt(void *opaque, uint64_t id, bool completed, uint64_t us, const char *reason)
{
    (void)id, (void)reason;
    side_t *s = opaque;
    if (!atomic_load(&s->full))
        return;
    if (!completed)
        s->aborted++;
    else if (s->n < MAX_CKPTS)
        s->ms[s->n++] = (double)us / 1000.0;
}

/* The largest file under @dir: the size of one full checkpoint. */
static long largest_file(const char *dir)
{
    long best = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (e->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > best)
            best = st.st_size;
    }
    if (d)
        closedir(d);
    return best;
}

static const char *endpoint, *bucket;
static long ckpt_bytes;

/* One run of the job for @seconds, its checkpoints in a new folder or under a new S3 prefix. */
static void run(side_t *s, bool s3, double seconds, int round)
{
    tpc_test_seq_conf_t src = {.count_default =
                                   s->keys + (uint64_t)(seconds * PER_POLL * 1e6 / SLEEP_US),
                               .per_poll = PER_POLL,
                               .sleep_us = SLEEP_US};
    s->records = 0;
    atomic_store(&s->full, false);
    char *dir = tpc_test_tmpdir("bench-cluster-storage");
    char prefix[128];
    snprintf(prefix, sizeof prefix, "bench-%ld-%d/", (long)getpid(), round);
    tpc_job_t *job = tpc_job_new("bench-cluster-storage");
    int g, r, k;
    tpc_error_t *err = tpc_job_set(job, "checkpoint.interval.ms", INTERVAL_MS);
    if (!err && s3)
        err = tpc_job_use_storage(job, tpc_s3_storage_backend());
    const char *const s3_keys[][2] = {{"checkpoint.storage", "s3"},
                                      {"checkpoint.s3.endpoint", endpoint},
                                      {"checkpoint.s3.bucket", bucket},
                                      {"checkpoint.s3.prefix", prefix},
                                      {"checkpoint.s3.region", "us-east-1"}};
    for (size_t i = 0; s3 && !err && i < sizeof s3_keys / sizeof *s3_keys; i++)
        err = tpc_job_set(job, s3_keys[i][0], s3_keys[i][1]);
    if (!err && !s3)
        err = tpc_job_set(job, "checkpoint.dir", dir);
    if (!err)
        err = tpc_job_add_vertex(job, "generator", 1, &tpc_test_seq_source_ops, &src, &g);
    if (!err)
        err = tpc_job_add_vertex(job, "rekey", 1, &rekey_ops, s, &r);
    if (!err)
        err = tpc_job_add_vertex(job, "sum", 1, &sum_ops, s, &k);
    if (!err)
        err = tpc_job_connect(job, g, r, TPC_EDGE_FORWARD);
    if (!err)
        err = tpc_job_connect(job, r, k, TPC_EDGE_HASH);
    if (!err)
        tpc_job_set_checkpoint_callback(job, on_ckpt, s);
    tpc_test_bench_run_job(job, err, s3 ? "the job on S3" : "the job on a folder");
    tpc_job_destroy(job);
    if (!s3 && largest_file(dir) > ckpt_bytes)
        ckpt_bytes = largest_file(dir);
    tpc_test_rmdir(dir);
    free(dir);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double percentile(const side_t *s, double p)
{
    return s->n ? s->ms[(int)(p * (s->n - 1) + 0.5)] : 0;
}

static void report(side_t *s, const char *name)
{
    qsort(s->ms, (size_t)s->n, sizeof *s->ms, cmp_double);
    printf("bench cluster %s_ckpt_p50_ms %.1f ms\n", name, percentile(s, 0.5));
    printf("bench cluster %s_ckpt_p99_ms %.1f ms\n", name, percentile(s, 0.99));
    printf("bench cluster %s_ckpt_max_ms %.1f ms\n", name, s->n ? s->ms[s->n - 1] : 0);
    printf("bench cluster %s_ckpts %d count\n", name, s->n);
    printf("bench cluster %s_ckpts_aborted %d count\n", name, s->aborted);
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 10) : dflt;
}

int main(void)
{
    endpoint = getenv("TWOPC_TEST_S3_ENDPOINT");
    if (!endpoint || !*endpoint) {
        fprintf(stderr, "bench_cluster_storage: set TWOPC_TEST_S3_ENDPOINT to an S3 server "
                        "(make bench-cluster starts one with tests/services/s3.sh)\n");
        return 1;
    }
    bucket = getenv("TWOPC_BENCH_S3_BUCKET") ? getenv("TWOPC_BENCH_S3_BUCKET") : "twopc-bench";
    static side_t folder, s3;
    folder.keys = s3.keys = env_u64("TWOPC_BENCH_S3_KEYS", 100000);
    double seconds = (double)env_u64("TWOPC_BENCH_S3_SECONDS", 8);
    int rounds = (int)env_u64("TWOPC_BENCH_ROUNDS", 3);
    if (folder.keys < 1 || seconds < 1 || rounds < 1) {
        fprintf(stderr, "bench_cluster_storage: keys, seconds and rounds must be at least 1\n");
        return 1;
    }
    for (int i = 0; i < rounds; i++) {
        bool s3_first = i % 2 == 1;
        run(s3_first ? &s3 : &folder, s3_first, seconds, 2 * i);
        run(s3_first ? &folder : &s3, !s3_first, seconds, 2 * i + 1);
    }
    printf("bench cluster storage_keys %llu count\n", (unsigned long long)folder.keys);
    printf("bench cluster storage_ckpt_bytes %ld bytes\n", ckpt_bytes);
    report(&folder, "folder");
    report(&s3, "s3");
    printf("bench cluster s3_vs_folder_p50 %.2f ratio\n",
           percentile(&folder, 0.5) > 0 ? percentile(&s3, 0.5) / percentile(&folder, 0.5) : 0);
    return 0;
}
