/*
 * The twopc side of the keyed part of `make bench-compare`: the same bounded job as
 * FlinkKeyedJob.java. Kafka (read_committed, from the first offsets to the end offsets taken at
 * start; key: the user, 8 bytes big-endian; value: the amount, 8 bytes big-endian) -> hash edge on
 * the user -> running count and total per user in keyed value state -> Kafka with the exactly-once
 * sink (key: the user; value: count and total, 8 bytes big-endian each), checkpoints every second,
 * every vertex at the given parallelism (the sink behind a forward edge, as Flink chains it).
 *
 *   twopc_keyed_job BOOTSTRAP INPUT_TOPIC OUTPUT_TOPIC PARALLELISM TRANSACTIONAL_ID_PREFIX CKPT_DIR
 *                   [full|incremental]
 *
 * "full" (the default) writes the whole keyed state at each checkpoint; "incremental"
 * (state.incremental) only the entries put since the last completed one, with a full snapshot
 * every state.incremental.max-chain (10) checkpoints.
 * Producer settings are those of the Flink side (linger.ms 5, batch.size 1000000, no compression,
 * transaction timeout 60 s). At the end it prints
 *   checkpoints C avg_ms D avg_bytes B
 * with the mean duration (trigger to completion, from tpc_job_get_stats() read every 10 ms) and the
 * bytes written into CKPT_DIR per completed checkpoint (every file that appeared there, at its
 * size when first seen, over the checkpoints; hidden temporary files and the completion record
 * left out). Exit status 0 when the job finished, 1 with the error otherwise.
 */
#include "tpc_kafka.h"

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

typedef struct {
    uint64_t n, total;
} total_t;

static void put_be64(unsigned char *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (56 - 8 * i));
}

static uint64_t get_be64(const unsigned char *b)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | b[i];
    return v;
}

static tpc_error_t *totals_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)self;
    for (size_t i = 0; i < tpc_batch_count(batch); i++) {
        tpc_record_t in;
        tpc_batch_get(batch, i, &in);
        if (in.value_len != 8)
            return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL,
                                 "a purchase of %zu bytes, not an 8-byte amount", in.value_len);
        total_t t = {0, 0};
        const void *v;
        size_t len;
        tpc_error_t *err = tpc_keyed_get(ctx, "total", in.key, in.key_len, &v, &len);
        if (err)
            return err;
        if (v && len == sizeof t) /* absent until the user's first purchase */
            memcpy(&t, v, sizeof t);
        t.n++;
        t.total += get_be64(in.value);
        if ((err = tpc_keyed_put(ctx, "total", in.key, in.key_len, &t, sizeof t)))
            return err;
        unsigned char value[16];
        put_be64(value, t.n);
        put_be64(value + 8, t.total);
        tpc_record_t out = {.key = in.key,
                            .key_len = in.key_len,
                            .value = value,
                            .value_len = sizeof value,
                            .timestamp = in.timestamp};
        if (tpc_emit(ctx, &out) != TPC_OK)
            return NULL; /* canceled */
    }
    return NULL;
}

static tpc_error_t *totals_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx, (void)arg;
    *self = NULL;
    return NULL;
}

static const tpc_operator_ops_t totals_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = totals_open,
    .process = totals_process,
};

/* ---- checkpoint figures: a thread beside the job --------------------------------------------- */

typedef struct {
    tpc_job_t *job;
    const char *dir;
    atomic_bool stop;
    uint64_t seen_ckpts, duration_us_sum, bytes;
    char **names; /* files of the checkpoint folder already counted */
    size_t count, cap;
} watch_t;

static bool counted(watch_t *w, const char *path)
{
    for (size_t i = 0; i < w->count; i++)
        if (strcmp(w->names[i], path) == 0)
            return true;
    if (w->count == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 64;
        char **names = realloc(w->names, w->cap * sizeof *names);
        if (!names)
            abort();
        w->names = names;
    }
    w->names[w->count++] = strdup(path);
    return false;
}

/* Add the size of every file under @dir not counted before. */
static void scan(watch_t *w, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue; /* ".", "..", temporary files, the completion record */
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode))
            scan(w, path);
        else if (!counted(w, path))
            w->bytes += (uint64_t)st.st_size;
    }
    closedir(d);
}

static void sample(watch_t *w)
{
    tpc_job_stats_t st;
    if (tpc_job_get_stats(w->job, &st) != TPC_OK || st.checkpoints_completed <= w->seen_ckpts)
        return;
    /* One at a time at 1 s intervals: a 10 ms poll sees each completion's duration. */
    w->duration_us_sum +=
        st.last_checkpoint_duration_us * (st.checkpoints_completed - w->seen_ckpts);
    w->seen_ckpts = st.checkpoints_completed;
    scan(w, w->dir);
}

static void *watch(void *arg)
{
    watch_t *w = arg;
    while (!atomic_load(&w->stop)) {
        sample(w);
        nanosleep(&(struct timespec){0, 10 * 1000000}, NULL);
    }
    sample(w);
    return NULL;
}

static tpc_error_t *build(tpc_job_t *job, char **argv, int par, tpc_kafka_source_t **src,
                          tpc_txn_sink_t **sink)
{
    const char *bootstrap = argv[1], *input = argv[2], *output = argv[3], *prefix = argv[5];
    const char *job_kv[][2] = {
        {"checkpoint.dir", argv[6]},
        {"checkpoint.interval.ms", "1000"},
        {"restart.attempts", "0"},
        {"state.incremental", argv[7] && strcmp(argv[7], "incremental") == 0 ? "true" : "false"}};
    tpc_error_t *err = NULL;
    for (size_t i = 0; !err && i < sizeof job_kv / sizeof *job_kv; i++)
        err = tpc_job_set(job, job_kv[i][0], job_kv[i][1]);
    int s = 0, t = 0, k = 0;
    if (!err)
        err = tpc_kafka_source_new(bootstrap, input, src);
    if (!err)
        err = tpc_kafka_source_set(*src, "bounded", "true");
    if (!err)
        err = tpc_kafka_source_add_to_job(*src, job, "kafka-in", par, &s);
    if (!err)
        err = tpc_job_add_vertex(job, "totals", par, &totals_ops, NULL, &t);
    if (!err)
        err = tpc_kafka_sink_new(bootstrap, output, sink);
    const char *sink_kv[][2] = {
        {"transactional.id.prefix", prefix}, {"kafka.transaction.timeout.ms", "60000"},
        {"transaction.timeout.ms", "60000"}, {"kafka.linger.ms", "5"},
        {"kafka.batch.size", "1000000"},     {"kafka.compression.type", "none"}};
    for (size_t i = 0; !err && i < sizeof sink_kv / sizeof *sink_kv; i++)
        err = tpc_txn_sink_set(*sink, sink_kv[i][0], sink_kv[i][1]);
    if (!err)
        err = tpc_txn_sink_add_to_job(*sink, job, "kafka-out", par, &k);
    if (!err)
        err = tpc_job_connect(job, s, t, TPC_EDGE_HASH);
    if (!err)
        err = tpc_job_connect(job, t, k, TPC_EDGE_FORWARD);
    return err;
}

int main(int argc, char **argv)
{
    if (argc != 7 &&
        (argc != 8 || (strcmp(argv[7], "full") != 0 && strcmp(argv[7], "incremental") != 0))) {
        fprintf(stderr, "usage: twopc_keyed_job BOOTSTRAP INPUT OUTPUT PARALLELISM PREFIX CKPT_DIR "
                        "[full|incremental]\n");
        return 2;
    }
    int par = atoi(argv[4]);
    tpc_job_t *job = tpc_job_new("twopc-compare-keyed");
    tpc_kafka_source_t *src = NULL;
    tpc_txn_sink_t *sink = NULL;
    tpc_error_t *err = job ? build(job, argv, par, &src, &sink) : tpc_error_nomem();
    watch_t w = {.job = job, .dir = argv[6]};
    pthread_t watcher;
    bool watching = !err && pthread_create(&watcher, NULL, watch, &w) == 0;
    if (!err)
        err = tpc_job_run(job, NULL);
    if (watching) {
        atomic_store(&w.stop, true);
        pthread_join(watcher, NULL);
    }
    int rc = 0;
    if (err) {
        fprintf(stderr, "twopc_keyed_job: %s\n", tpc_error_message(err));
        rc = 1;
    } else {
        printf("checkpoints %llu avg_ms %.1f avg_bytes %.0f\n", (unsigned long long)w.seen_ckpts,
               w.seen_ckpts ? (double)w.duration_us_sum / 1e3 / (double)w.seen_ckpts : 0.0,
               w.seen_ckpts ? (double)w.bytes / (double)w.seen_ckpts : 0.0);
    }
    for (size_t i = 0; i < w.count; i++)
        free(w.names[i]);
    free(w.names);
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(sink);
    tpc_kafka_source_destroy(src);
    return rc;
}
