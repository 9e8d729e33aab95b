/*
 * Key groups and keyed state: the key -> group -> subtask mapping against fixed vectors (computed
 * apart from the library: FNV-1a 64 of the key bytes modulo max-parallelism, contiguous ranges),
 * a keyed running total (value state) and a count per residue (map state) restored at parallelism
 * 1 -> 4 -> 2 -> 3 with every key's value and map intact, value and map state read before any put
 * (empty, no error), map get/put/delete/iterate, keyed state refused behind any edge but a hash
 * edge (also at parallelism 1, where every key is the subtask's), and a changed max-parallelism
 * refused. Incremental checkpoints: chains restored over 2 -> 3 -> 1 (also across aborted
 * checkpoints, two in flight), their files, compaction and retention, a damaged or missing link
 * refused. A million keys restored from a full snapshot. Timers: check_keyed_timers.c.
 */
#include "runtime_internal.h"
#include "tpc_test_check.h"
#include "tpc_test_ops.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N    20000
#define KEYS 97

START_TEST(test_mapping_vectors)
{
    static const struct {
        const char *key;
        size_t len;
        int group128, group1000;
    } v[] = {{"", 0, 3, 603}, {"a", 1, 6, 366}, {"user-42", 7, 49, 249}, {"\0\1\2", 3, 62, 702}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        ck_assert_int_eq(tpc_key_group(v[i].key, v[i].len, 128), v[i].group128);
        ck_assert_int_eq(tpc_key_group(v[i].key, v[i].len, 1000), v[i].group1000);
    }
    /* Contiguous ranges: 128 groups over 3 subtasks are 0..42, 43..85, 86..127. */
    ck_assert_int_eq(tpc_key_group_subtask(0, 128, 3), 0);
    ck_assert_int_eq(tpc_key_group_subtask(42, 128, 3), 0);
    ck_assert_int_eq(tpc_key_group_subtask(43, 128, 3), 1);
    ck_assert_int_eq(tpc_key_group_subtask(85, 128, 3), 1);
    ck_assert_int_eq(tpc_key_group_subtask(86, 128, 3), 2);
    ck_assert_int_eq(tpc_key_group_subtask(127, 128, 3), 2);
    ck_assert_int_eq(tpc_key_group_subtask(5, 128, 1), 0);
    ck_assert_int_eq(tpc_key_group_subtask(127, 128, 128), 127);
    ck_assert_int_eq(tpc_key_group_subtask(128, 128, 3), -1);
    ck_assert_int_eq(tpc_key_group_subtask(0, 128, 129), -1);
    ck_assert_int_eq(tpc_key_group(NULL, 1, 128), -1);
    ck_assert_int_eq(tpc_key_group("a", 1, 0), -1);
}
END_TEST

/* ---- the job: sequence -> rekey ("k<seq % KEYS>") -> hash -> keyed total ------------------- */

static tpc_error_t *rekey_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)self;
    for (size_t i = 0; i < tpc_batch_count(batch); i++) {
        tpc_record_t r;
        tpc_batch_get(batch, i, &r);
        int sub;
        uint64_t seq;
        if (!tpc_test_seq_decode(r.key, r.key_len, &sub, &seq))
            return tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL, "not a sequence record");
        char key[16];
        int n = snprintf(key, sizeof key, "k%llu", (unsigned long long)(seq % KEYS));
        tpc_record_t out = {.key = key, .key_len = (size_t)n, .value = r.key, .value_len = 8};
        if (tpc_emit(ctx, &out) != TPC_OK)
            return tpc_error_new(TPC_ERR_CANCELED, 0, "canceled");
    }
    return NULL;
}

static tpc_error_t *no_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx;
    *self = arg;
    return NULL;
}

static const tpc_operator_ops_t rekey_ops = {
    .version = TPC_OPERATOR_OPS_VERSION, .open = no_open, .process = rekey_process};

#define MODS 5 /* map state "mod": per key, seq % MODS -> records with that residue */

typedef struct {
    atomic_ullong total[KEYS], count[KEYS];
    atomic_ullong mod[KEYS][MODS];
    atomic_int reported[KEYS], mod_entries[KEYS];
    atomic_int odd_len[KEYS];                 /* value state "odd": 0 when absent */
    atomic_ullong odd_byte[KEYS], flip[KEYS]; /* map state "flip": 1 + its value, 0 when absent */
} totals_t;

typedef struct {
    uint64_t total, count;
} sum_t;

static tpc_error_t *sum_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)self;
    for (size_t i = 0; i < tpc_batch_count(batch); i++) {
        tpc_record_t r;
        tpc_batch_get(batch, i, &r);
        int sub;
        uint64_t seq;
        tpc_test_seq_decode(r.value, r.value_len, &sub, &seq);
        const void *v;
        size_t len;
        sum_t s = {0, 0};
        tpc_error_t *err = tpc_keyed_get(ctx, "sum", r.key, r.key_len, &v, &len);
        if (err)
            return err;
        if (v) {
            ck_assert_uint_eq(len, sizeof s);
            memcpy(&s, v, sizeof s);
        }
        s.total += seq;
        s.count++;
        err = tpc_keyed_put(ctx, "sum", r.key, r.key_len, &s, sizeof s);
        if (err)
            return err;
        uint8_t m = (uint8_t)(seq % MODS);
        uint64_t c = 0;
        if ((err = tpc_keyed_map_get(ctx, "mod", r.key, r.key_len, &m, 1, &v, &len)))
            return err;
        if (v) {
            ck_assert_uint_eq(len, sizeof c);
            memcpy(&c, v, sizeof c);
        }
        c++;
        if ((err = tpc_keyed_map_put(ctx, "mod", r.key, r.key_len, &m, 1, &c, sizeof c)))
            return err;
        /* State that comes and goes, in values of changing size, so that checkpoints (written
         * while records go on) meet deletes and moves. By the key's count of records, which does
         * not depend on their order (two rekey subtasks may pass one key's records in either
         * order): "odd" holds 1 + count % 40 bytes of count at an odd count and is gone at an even
         * one; map "flip" the other way round. */
        uint8_t bytes[40];
        memset(bytes, (int)(s.count & 0xff), sizeof bytes);
        if (s.count % 2)
            err = tpc_keyed_put(ctx, "odd", r.key, r.key_len, bytes, 1 + s.count % 40);
        else
            err = tpc_keyed_delete(ctx, "odd", r.key, r.key_len);
        if (!err && s.count % 2)
            err = tpc_keyed_map_delete(ctx, "flip", r.key, r.key_len, "f", 1);
        else if (!err)
            err =
                tpc_keyed_map_put(ctx, "flip", r.key, r.key_len, "f", 1, &s.count, sizeof s.count);
        if (err)
            return err;
    }
    return NULL;
}

typedef struct {
    totals_t *t;
    int key;
} mod_visit_t;

static tpc_error_t *report_mod(void *opaque, const void *map_key, size_t map_key_len,
                               const void *value, size_t value_len)
{
    mod_visit_t *mv = opaque;
    ck_assert_uint_eq(map_key_len, 1);
    uint8_t m = *(const uint8_t *)map_key;
    ck_assert_uint_lt(m, MODS);
    uint64_t c;
    ck_assert_uint_eq(value_len, sizeof c);
    memcpy(&c, value, sizeof c);
    atomic_store(&mv->t->mod[mv->key][m], c);
    atomic_fetch_add(&mv->t->mod_entries[mv->key], 1);
    return NULL;
}

typedef struct {
    totals_t *t;
    tpc_ctx_t *ctx;
} report_t;

static tpc_error_t *report(void *opaque, const void *key, size_t key_len, const void *value,
                           size_t value_len)
{
    report_t *rp = opaque;
    totals_t *t = rp->t;
    char k[16] = {0};
    ck_assert_uint_lt(key_len, sizeof k);
    memcpy(k, key, key_len);
    int i = atoi(k + 1);
    ck_assert(i >= 0 && i < KEYS);
    sum_t s;
    ck_assert_uint_eq(value_len, sizeof s);
    memcpy(&s, value, sizeof s);
    atomic_store(&t->total[i], s.total);
    atomic_store(&t->count[i], s.count);
    atomic_fetch_add(&t->reported[i], 1);
    mod_visit_t mv = {t, i};
    tpc_error_t *err = tpc_keyed_map_foreach(rp->ctx, "mod", key, key_len, report_mod, &mv);
    const void *v;
    size_t len;
    if (!err)
        err = tpc_keyed_get(rp->ctx, "odd", key, key_len, &v, &len);
    if (!err && v) {
        atomic_store(&t->odd_len[i], (int)len);
        atomic_store(&t->odd_byte[i], ((const uint8_t *)v)[len - 1]);
    }
    if (!err)
        err = tpc_keyed_map_get(rp->ctx, "flip", key, key_len, "f", 1, &v, &len);
    if (!err && v) {
        uint64_t f;
        ck_assert_uint_eq(len, sizeof f);
        memcpy(&f, v, sizeof f);
        atomic_store(&t->flip[i], f + 1);
    }
    return err;
}

static tpc_error_t *sum_finish(void *self, tpc_ctx_t *ctx)
{
    report_t rp = {self, ctx};
    return tpc_keyed_foreach(ctx, "sum", report, &rp);
}

/* Subtask 0 of "sum" takes this long over the snapshot of every third checkpoint (0: no delay),
 * past checkpoint.timeout.ms: the other subtasks' snapshots of it are taken and then aborted. */
static int slow_snapshot_ms;

static tpc_error_t *sum_snapshot(void *self, tpc_ctx_t *ctx, uint64_t id, tpc_state_writer_t *w)
{
    (void)self;
    (void)w;
    if (slow_snapshot_ms && tpc_ctx_subtask(ctx) == 0 && id % 3 == 0)
        tpc__sleep_us((uint64_t)slow_snapshot_ms * 1000u);
    return NULL;
}

static const tpc_operator_ops_t sum_ops = {.version = TPC_OPERATOR_OPS_VERSION,
                                           .open = no_open,
                                           .process = sum_process,
                                           .snapshot_state = sum_snapshot,
                                           .finish = sum_finish};

/* For the jobs of totals_job(): incremental checkpoints with this longest chain ("0": off) and
 * this many retained checkpoints. */
static const char *max_chain = "0", *retained = "3";

static tpc_job_t *totals_job(const char *dir, tpc_test_seq_conf_t *src, totals_t *t, int par,
                             tpc_edge_t edge)
{
    tpc_job_t *job = tpc_job_new("keyed");
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.dir", dir));
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.interval.ms", "10"));
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.retained", retained));
    if (strcmp(max_chain, "0") != 0) {
        ck_assert_ptr_null(tpc_job_set(job, "state.incremental", "true"));
        ck_assert_ptr_null(tpc_job_set(job, "state.incremental.max-chain", max_chain));
    }
    if (slow_snapshot_ms) {
        char ms[16];
        snprintf(ms, sizeof ms, "%d", slow_snapshot_ms / 3);
        ck_assert_ptr_null(tpc_job_set(job, "checkpoint.timeout.ms", ms));
        ck_assert_ptr_null(tpc_job_set(job, "checkpoint.max-concurrent", "2"));
        ck_assert_ptr_null(tpc_job_set(job, "checkpoint.min-pause.ms", "0"));
        ck_assert_ptr_null(tpc_job_set(job, "checkpoint.tolerable-failures", "1000000"));
        ck_assert_ptr_null(tpc_job_set(job, "restart.attempts", "0"));
    }
    int s, r, k;
    ck_assert_ptr_null(tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, src, &s));
    ck_assert_ptr_null(tpc_job_add_vertex(job, "rekey", par, &rekey_ops, NULL, &r));
    ck_assert_ptr_null(tpc_job_add_vertex(job, "sum", par, &sum_ops, t, &k));
    ck_assert_ptr_null(tpc_job_connect(job, s, r, TPC_EDGE_REBALANCE));
    ck_assert_ptr_null(tpc_job_connect(job, r, k, edge));
    return job;
}

static void *cancel_after_checkpoints(void *arg)
{
    tpc_job_t *job = arg;
    tpc_job_stats_t st;
    int waited = 0;
    do {
        tpc__sleep_us(2000);
        tpc_job_get_stats(job, &st);
    } while (st.checkpoints_completed < 3 && ++waited < 5000);
    tpc_job_cancel(job);
    return NULL;
}

START_TEST(test_totals_survive_rescaling)
{
    char *dir = tpc_test_tmpdir("keyed");
    /* 1250 polls of at least 1 ms: the runs that are canceled end long before the input, also
     * under ThreadSanitizer. */
    tpc_test_seq_conf_t src = {.count_default = N, .per_poll = 16, .sleep_us = 1000};
    static totals_t t;
    memset(&t, 0, sizeof t);
    const int pars[] = {1, 4, 2, 3};
    for (int run = 0; run < 4; run++) {
        tpc_job_t *job = totals_job(dir, &src, &t, pars[run], TPC_EDGE_HASH);
        pthread_t th;
        if (run < 3)
            pthread_create(&th, NULL, cancel_after_checkpoints, job);
        tpc_job_result_t res;
        tpc_error_t *err = tpc_job_run(job, &res);
        if (run < 3)
            pthread_join(th, NULL);
        ck_assert_msg(err == NULL, "run %d: %s", run, tpc_error_message(err));
        ck_assert_int_eq(res, run < 3 ? TPC_JOB_CANCELED : TPC_JOB_FINISHED);
        tpc_job_stats_t st;
        tpc_job_get_stats(job, &st);
        ck_assert_msg(st.restarts == 0, "run %d restarted %llu times", run,
                      (unsigned long long)st.restarts);
        tpc_job_destroy(job);
    }
    for (int k = 0; k < KEYS; k++) {
        uint64_t total = 0, count = 0, mod[MODS] = {0};
        for (uint64_t i = (uint64_t)k; i < N; i += KEYS)
            total += i, count++, mod[i % MODS]++;
        ck_assert_int_eq(atomic_load(&t.odd_len[k]), count % 2 ? (int)(1 + count % 40) : 0);
        if (count % 2)
            ck_assert_uint_eq(atomic_load(&t.odd_byte[k]), count & 0xff);
        ck_assert_uint_eq(atomic_load(&t.flip[k]), count % 2 ? 0 : count + 1);
        ck_assert_int_eq(atomic_load(&t.reported[k]), 1);
        ck_assert_uint_eq(atomic_load(&t.count[k]), count);
        ck_assert_uint_eq(atomic_load(&t.total[k]), total);
        ck_assert_int_eq(atomic_load(&t.mod_entries[k]), MODS);
        for (int m = 0; m < MODS; m++)
            ck_assert_uint_eq(atomic_load(&t.mod[k][m]), mod[m]);
    }
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* The expected state of every key after all N records. */
static void check_totals(totals_t *t)
{
    for (int k = 0; k < KEYS; k++) {
        uint64_t total = 0, count = 0, mod[MODS] = {0};
        for (uint64_t i = (uint64_t)k; i < N; i += KEYS)
            total += i, count++, mod[i % MODS]++;
        ck_assert_int_eq(atomic_load(&t->odd_len[k]), count % 2 ? (int)(1 + count % 40) : 0);
        if (count % 2)
            ck_assert_uint_eq(atomic_load(&t->odd_byte[k]), count & 0xff);
        ck_assert_uint_eq(atomic_load(&t->flip[k]), count % 2 ? 0 : count + 1);
        ck_assert_int_eq(atomic_load(&t->reported[k]), 1);
        ck_assert_uint_eq(atomic_load(&t->count[k]), count);
        ck_assert_uint_eq(atomic_load(&t->total[k]), total);
        ck_assert_int_eq(atomic_load(&t->mod_entries[k]), MODS);
        for (int m = 0; m < MODS; m++)
            ck_assert_uint_eq(atomic_load(&t->mod[k][m]), mod[m]);
    }
}

/* The refs (links) of the checkpoint the record names. */
static uint32_t newest_refs(const char *dir, uint64_t *newest, uint64_t **refs)
{
    tpc__record_t rec;
    bool found;
    TPC_TEST_OK(tpc__record_read(dir, &rec, &found));
    ck_assert(found && rec.newest > 0);
    *newest = rec.newest;
    tpc__record_free(&rec);
    char path[4200];
    snprintf(path, sizeof path, "%s/chk-%020llu", dir, (unsigned long long)*newest);
    uint32_t n;
    TPC_TEST_OK(tpc__checkpoint_read_refs(path, refs, &n));
    return n;
}

/* Incremental checkpoints (every one after the first builds on the chain before it, one
 * checkpoint retained besides the chain) restored at parallelism 2 -> 3 -> 1, each restore from
 * a chain: every key's value and map are exact, deletes included. */
START_TEST(test_incremental_chain_survives_rescaling)
{
    char *dir = tpc_test_tmpdir("keyed-incr");
    tpc_test_seq_conf_t src = {.count_default = N, .per_poll = 16, .sleep_us = 1000};
    static totals_t t;
    memset(&t, 0, sizeof t);
    max_chain = "1000";
    retained = "1";
    const int pars[] = {2, 3, 1};
    for (int run = 0; run < 3; run++) {
        tpc_job_t *job = totals_job(dir, &src, &t, pars[run], TPC_EDGE_HASH);
        pthread_t th;
        if (run < 2)
            pthread_create(&th, NULL, cancel_after_checkpoints, job);
        tpc_job_result_t res;
        tpc_error_t *err = tpc_job_run(job, &res);
        if (run < 2)
            pthread_join(th, NULL);
        ck_assert_msg(err == NULL, "run %d: %s", run, tpc_error_message(err));
        ck_assert_int_eq(res, run < 2 ? TPC_JOB_CANCELED : TPC_JOB_FINISHED);
        tpc_job_stats_t st;
        tpc_job_get_stats(job, &st);
        ck_assert_msg(st.restarts == 0, "run %d restarted %llu times", run,
                      (unsigned long long)st.restarts);
        tpc_job_destroy(job);
        /* What the next run restores is a chain: its newest checkpoint has links. */
        uint64_t newest, *refs;
        uint32_t n = newest_refs(dir, &newest, &refs);
        ck_assert_msg(n > 0, "run %d: checkpoint %llu is not incremental", run,
                      (unsigned long long)newest);
        free(refs);
    }
    max_chain = "0";
    retained = "3";
    check_totals(&t);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* Cancel the job once a checkpoint aborted and three completed. */
static void *cancel_after_abort(void *arg)
{
    tpc_job_t *job = arg;
    tpc_job_stats_t st;
    int waited = 0;
    do {
        tpc__sleep_us(2000);
        tpc_job_get_stats(job, &st);
    } while ((st.checkpoints_completed < 3 || !st.checkpoints_aborted) && ++waited < 10000);
    tpc_job_cancel(job);
    return NULL;
}

/* Checkpoints aborted after some subtasks took their snapshots (a timeout), two in flight at once,
 * one retained: each increment still holds what the aborted ones held, and restores over
 * parallelism 2 -> 3 -> 1 give every key its exact value and map. */
START_TEST(test_incremental_chain_survives_aborts)
{
    char *dir = tpc_test_tmpdir("keyed-abort");
    /* 5000 polls of at least 1 ms: the canceled runs end well before the input, also under
     * ThreadSanitizer and with the slow snapshots. */
    tpc_test_seq_conf_t src = {.count_default = N, .per_poll = 4, .sleep_us = 1000};
    static totals_t t;
    memset(&t, 0, sizeof t);
    max_chain = "1000";
    retained = "1";
    const int pars[] = {2, 3, 1};
    for (int run = 0; run < 3; run++) {
        slow_snapshot_ms = run < 2 ? 150 : 0; /* the last run only restores and finishes */
        tpc_job_t *job = totals_job(dir, &src, &t, pars[run], TPC_EDGE_HASH);
        pthread_t th;
        if (run < 2)
            pthread_create(&th, NULL, cancel_after_abort, job);
        tpc_job_result_t res;
        tpc_error_t *err = tpc_job_run(job, &res);
        if (run < 2)
            pthread_join(th, NULL);
        ck_assert_msg(err == NULL, "run %d: %s", run, tpc_error_message(err));
        ck_assert_int_eq(res, run < 2 ? TPC_JOB_CANCELED : TPC_JOB_FINISHED);
        tpc_job_stats_t st;
        tpc_job_get_stats(job, &st);
        ck_assert_msg(st.restarts == 0, "run %d restarted %llu times", run,
                      (unsigned long long)st.restarts);
        ck_assert_msg(run == 2 || st.checkpoints_aborted > 0, "run %d: no checkpoint aborted", run);
        tpc_job_destroy(job);
    }
    slow_snapshot_ms = 0;
    max_chain = "0";
    retained = "3";
    check_totals(&t);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* Stop with a savepoint (no drain) once a chain runs. */
static void *stop_after_checkpoints(void *arg)
{
    tpc_job_t *job = arg;
    tpc_job_stats_t st;
    int waited = 0;
    do {
        tpc__sleep_us(2000);
        tpc_job_get_stats(job, &st);
    } while (st.checkpoints_completed < 3 && ++waited < 5000);
    char *path = NULL;
    tpc_error_t *err = tpc_job_stop_with_savepoint(job, false, &path);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    return path;
}

/* A savepoint taken while a chain runs is incremental; the next run restores it at parallelism 3
 * with one checkpoint retained, which keeps the savepoint's links; a last run at parallelism 1
 * finishes with every key's value and map exact. */
START_TEST(test_incremental_savepoint_restored)
{
    char *dir = tpc_test_tmpdir("keyed-savepoint");
    tpc_test_seq_conf_t src = {.count_default = N, .per_poll = 16, .sleep_us = 1000};
    static totals_t t;
    memset(&t, 0, sizeof t);
    max_chain = "1000";
    retained = "1";
    char *savepoint = NULL;
    uint64_t *refs = NULL;
    uint32_t nrefs = 0;
    const int pars[] = {2, 3, 1};
    for (int run = 0; run < 3; run++) {
        tpc_job_t *job = totals_job(dir, &src, &t, pars[run], TPC_EDGE_HASH);
        pthread_t th;
        if (run < 2)
            pthread_create(&th, NULL, run ? cancel_after_checkpoints : stop_after_checkpoints, job);
        tpc_job_result_t res;
        tpc_error_t *err = tpc_job_run(job, &res);
        if (run < 2)
            pthread_join(th, run ? NULL : (void **)&savepoint);
        ck_assert_msg(err == NULL, "run %d: %s", run, tpc_error_message(err));
        ck_assert_int_eq(res, run == 0   ? TPC_JOB_STOPPED
                              : run == 1 ? TPC_JOB_CANCELED
                                         : TPC_JOB_FINISHED);
        tpc_job_destroy(job);
        if (run == 0) {
            ck_assert_ptr_nonnull(savepoint);
            TPC_TEST_OK(tpc__checkpoint_read_refs(savepoint, &refs, &nrefs));
            ck_assert_msg(nrefs > 0, "savepoint %s is not incremental", savepoint);
        } else if (run == 1) { /* retention kept the savepoint and its chain */
            tpc__checkpoint_file_t *files;
            size_t n;
            TPC_TEST_OK(tpc__checkpoint_list(dir, &files, &n));
            for (uint32_t r = 0; r < nrefs; r++) {
                bool found = false;
                for (size_t i = 0; i < n; i++)
                    found |= files[i].id == refs[r];
                ck_assert_msg(found, "link %llu of the savepoint is gone",
                              (unsigned long long)refs[r]);
            }
            tpc__checkpoint_files_free(files, n);
        }
    }
    free(refs);
    free(savepoint);
    max_chain = "0";
    retained = "3";
    check_totals(&t);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* A slow input, so that few keys change between checkpoints; every checkpoint kept. */
static void run_slow(const char *dir, totals_t *t, const char *chain)
{
    tpc_test_seq_conf_t src = {.count_default = 600, .per_poll = 1, .sleep_us = 3000};
    max_chain = chain;
    retained = "1000";
    tpc_job_t *job = totals_job(dir, &src, t, 2, TPC_EDGE_HASH);
    tpc_job_result_t res;
    tpc_error_t *err = tpc_job_run(job, &res);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    ck_assert_int_eq(res, TPC_JOB_FINISHED);
    tpc_job_destroy(job);
    max_chain = "0";
    retained = "3";
}

/* Chains of at most 3 checkpoints: each increment holds fewer entries than the full snapshots, a
 * full snapshot comes again after two increments (compaction), each file's links are the chain
 * of the one before it; retention then keeps exactly the newest checkpoint and its chain. */
START_TEST(test_incremental_chain_files)
{
    char *dir = tpc_test_tmpdir("keyed-chain");
    static totals_t t;
    memset(&t, 0, sizeof t);
    run_slow(dir, &t, "3");
    tpc__checkpoint_file_t *files;
    size_t n;
    TPC_TEST_OK(tpc__checkpoint_list(dir, &files, &n));
    ck_assert_uint_gt(n, 8);
    /* Per subtask: each one's chain starts at its first snapshot with entries, which need not be
     * the other's (a subtask whose table was still empty at the first checkpoint starts one
     * later), so the compactions of the two need not fall on the same checkpoint. */
    int full_after_first = 0, increments = 0;
    bool started[2] = {false, false};
    uint32_t last_full_entries[2] = {0, 0};
    uint64_t incr_entries = 0, full_entries = 0;
    for (size_t i = n; i-- > 0;) { /* oldest first */
        tpc__checkpoint_t c;
        TPC_TEST_OK(tpc__checkpoint_read(files[i].path, &c));
        const tpc__vertex_snapshot_t *vs = NULL;
        for (int v = 0; v < c.nvertices; v++)
            if (strcmp(c.vertices[v].name, "sum") == 0)
                vs = &c.vertices[v];
        ck_assert_ptr_nonnull(vs);
        ck_assert_int_eq(vs->parallelism, 2);
        for (int s = 0; s < vs->parallelism; s++) {
            const tpc_state_writer_t *w = &vs->subtasks[s].state;
            ck_assert_uint_le(w->nlinks, 2);
            for (uint32_t l = 0; l < w->nlinks; l++)
                ck_assert_uint_lt(w->links[l], c.id);
            if (w->nlinks == 0 && w->nkeyed) {
                full_after_first += started[s];
                started[s] = true;
                last_full_entries[s] = w->nkeyed;
            } else if (w->nlinks && last_full_entries[s] >= 2 * KEYS) {
                /* all its keys are in state: an increment holds the few that changed */
                incr_entries += w->nkeyed;
                full_entries += last_full_entries[s];
                increments++;
            }
        }
        tpc__checkpoint_free(&c);
    }
    ck_assert_int_gt(full_after_first, 1);
    ck_assert_int_gt(increments, 1);
    ck_assert_msg(incr_entries * 5 < full_entries, "increments: %llu entries, full: %llu",
                  (unsigned long long)incr_entries, (unsigned long long)full_entries);
    tpc__checkpoint_files_free(files, n);

    uint64_t newest, *refs;
    uint32_t nrefs = newest_refs(dir, &newest, &refs);
    tpc__checkpoint_retain(dir, 1);
    TPC_TEST_OK(tpc__checkpoint_list(dir, &files, &n));
    ck_assert_uint_eq(n, 1 + nrefs);
    ck_assert_uint_eq(files[0].id, newest);
    for (uint32_t r = 0; r < nrefs; r++)
        ck_assert_uint_eq(files[n - 1 - r].id, refs[r]);
    tpc__checkpoint_files_free(files, n);
    free(refs);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* A damaged or missing link of the chain of the completed checkpoint is refused like a damaged
 * checkpoint, with what to do. */
START_TEST(test_incremental_damaged_link_refused)
{
    char *dir = tpc_test_tmpdir("keyed-link");
    static totals_t t;
    memset(&t, 0, sizeof t);
    run_slow(dir, &t, "1000");
    uint64_t newest, *refs;
    uint32_t nrefs = newest_refs(dir, &newest, &refs);
    ck_assert_uint_gt(nrefs, 1);
    char path[4200];
    snprintf(path, sizeof path, "%s/chk-%020llu", dir, (unsigned long long)refs[nrefs / 2]);
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    fseek(f, -40, SEEK_END);
    int ch = fgetc(f);
    fseek(f, -40, SEEK_END);
    fputc(ch ^ 0x5a, f);
    fclose(f);
    char want[200];
    snprintf(want, sizeof want, "builds on checkpoint %llu, which is damaged",
             (unsigned long long)refs[nrefs / 2]);
    for (int round = 0; round < 2; round++) {
        tpc_test_seq_conf_t src = {.count_default = 600, .per_poll = 1, .sleep_us = 3000};
        max_chain = "1000";
        tpc_job_t *job = totals_job(dir, &src, &t, 2, TPC_EDGE_HASH);
        ck_assert_ptr_null(tpc_job_set(job, "restart.attempts", "0"));
        tpc_error_t *err = tpc_job_run(job, NULL);
        max_chain = "0";
        ck_assert_ptr_nonnull(err);
        ck_assert_int_eq(tpc_error_code(err), round ? TPC_ERR_NOT_FOUND : TPC_ERR_CORRUPT);
        ck_assert_msg(strstr(tpc_error_message(err), want), "%s", tpc_error_message(err));
        ck_assert_msg(strstr(tpc_error_message(err), "refuses to restore"), "%s",
                      tpc_error_message(err));
        ck_assert_ptr_nonnull(strstr(tpc_error_hint_text(err), "restore.fallback"));
        tpc_error_destroy(err);
        tpc_job_destroy(job);
        if (round == 0) /* then the link is gone */
            ck_assert_msg(remove(path) == 0, "%s: %s", path, strerror(errno));
        snprintf(want, sizeof want, "builds on checkpoint %llu, which is missing",
                 (unsigned long long)refs[nrefs / 2]);
    }
    free(refs);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

START_TEST(test_keyed_state_without_hash_edge_refused)
{
    char *dir = tpc_test_tmpdir("keyed-edge");
    tpc_test_seq_conf_t src = {.count_default = 2000, .per_poll = 16};
    static totals_t t;
    memset(&t, 0, sizeof t);
    tpc_job_t *job = totals_job(dir, &src, &t, 2, TPC_EDGE_REBALANCE);
    tpc_error_t *err = tpc_job_run(job, NULL);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(tpc_error_hint_text(err), "hash edge"));
    tpc_job_stats_t st;
    tpc_job_get_stats(job, &st);
    ck_assert_uint_eq(st.restarts, 0); /* fatal: no restart can mend it */
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    /* At parallelism 1 every key is the subtask's, but a forward edge is still no hash edge: the
     * state would be wrong at the first rescale, so it is refused from the start. */
    job = totals_job(dir, &src, &t, 1, TPC_EDGE_FORWARD);
    err = tpc_job_run(job, NULL);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_STATE);
    ck_assert_msg(strstr(tpc_error_message(err), "its input from \"rekey\" is not a hash edge"),
                  "%s", tpc_error_message(err));
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* ---- the API on one key: empty before any put, map get/put/delete/iterate ------------------ */

static tpc_error_t *count_visit(void *opaque, const void *k, size_t kl, const void *v, size_t vl)
{
    (void)k, (void)kl, (void)v, (void)vl;
    (*(int *)opaque)++;
    return NULL;
}

static atomic_int api_checked;

static tpc_error_t *api_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)self;
    for (size_t i = 0; i < tpc_batch_count(batch); i++) {
        tpc_record_t r;
        tpc_batch_get(batch, i, &r);
        const void *v = &r;
        size_t len = 99;
        int visits = 0;
        /* Nothing was ever put for this key (each record has a key of its own). */
        ck_assert_ptr_null(tpc_keyed_get(ctx, "v", r.key, r.key_len, &v, &len));
        ck_assert_ptr_null(v);
        ck_assert_uint_eq(len, 0);
        ck_assert_ptr_null(tpc_keyed_map_get(ctx, "m", r.key, r.key_len, "a", 1, &v, &len));
        ck_assert_ptr_null(v);
        ck_assert_ptr_null(tpc_keyed_map_foreach(ctx, "m", r.key, r.key_len, count_visit, &visits));
        ck_assert_int_eq(visits, 0);
        ck_assert_ptr_null(tpc_keyed_foreach(ctx, "never", count_visit, &visits));
        ck_assert_int_eq(visits, 0);
        ck_assert_ptr_null(tpc_keyed_delete(ctx, "v", r.key, r.key_len));
        ck_assert_ptr_null(tpc_keyed_map_delete(ctx, "m", r.key, r.key_len, "a", 1));

        ck_assert_ptr_null(tpc_keyed_map_put(ctx, "m", r.key, r.key_len, "a", 1, "1", 1));
        ck_assert_ptr_null(tpc_keyed_map_put(ctx, "m", r.key, r.key_len, "b", 1, "22", 2));
        ck_assert_ptr_null(tpc_keyed_map_put(ctx, "m", r.key, r.key_len, "", 0, "e", 1));
        ck_assert_ptr_null(tpc_keyed_map_put(ctx, "m", r.key, r.key_len, "b", 1, "333", 3));
        ck_assert_ptr_null(tpc_keyed_map_get(ctx, "m", r.key, r.key_len, "b", 1, &v, &len));
        ck_assert_uint_eq(len, 3);
        ck_assert_int_eq(memcmp(v, "333", 3), 0);
        ck_assert_ptr_null(tpc_keyed_map_delete(ctx, "m", r.key, r.key_len, "a", 1));
        ck_assert_ptr_null(tpc_keyed_map_get(ctx, "m", r.key, r.key_len, "a", 1, &v, &len));
        ck_assert_ptr_null(v);
        ck_assert_ptr_null(tpc_keyed_map_foreach(ctx, "m", r.key, r.key_len, count_visit, &visits));
        ck_assert_int_eq(visits, 2); /* "b" and the empty map key */
        /* A state is value or map state, by its first use. */
        tpc_error_t *err = tpc_keyed_get(ctx, "m", r.key, r.key_len, &v, &len);
        ck_assert_ptr_nonnull(err);
        ck_assert_int_eq(tpc_error_code(err), TPC_ERR_INVALID_ARG);
        ck_assert_ptr_nonnull(strstr(tpc_error_message(err), "is a map state"));
        tpc_error_destroy(err);
        /* Deleting the key removes its whole map; the last map entry's delete does the same. */
        ck_assert_ptr_null(tpc_keyed_delete(ctx, "m", r.key, r.key_len));
        ck_assert_ptr_null(tpc_keyed_map_get(ctx, "m", r.key, r.key_len, "b", 1, &v, &len));
        ck_assert_ptr_null(v);
        ck_assert_ptr_null(tpc_keyed_map_put(ctx, "m", r.key, r.key_len, "z", 1, "", 0));
        ck_assert_ptr_null(tpc_keyed_map_delete(ctx, "m", r.key, r.key_len, "z", 1));
        visits = 0;
        ck_assert_ptr_null(tpc_keyed_foreach(ctx, "m", count_visit, &visits));
        ck_assert_int_eq(visits, 0);
        ck_assert_ptr_null(tpc_keyed_put(ctx, "v", r.key, r.key_len, "x", 1));
        atomic_fetch_add(&api_checked, 1);
    }
    return NULL;
}

static const tpc_operator_ops_t api_ops = {
    .version = TPC_OPERATOR_OPS_VERSION, .open = no_open, .process = api_process};

START_TEST(test_state_api_on_one_key)
{
    tpc_test_seq_conf_t src = {.count_default = 300, .per_poll = 16};
    tpc_job_t *job = tpc_job_new("keyed-api");
    int s, k;
    ck_assert_ptr_null(tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s));
    ck_assert_ptr_null(tpc_job_add_vertex(job, "api", 2, &api_ops, NULL, &k));
    ck_assert_ptr_null(tpc_job_connect(job, s, k, TPC_EDGE_HASH));
    ck_assert_ptr_null(tpc_job_run(job, NULL));
    ck_assert_int_eq(atomic_load(&api_checked), 300);
    tpc_job_destroy(job);
}
END_TEST

START_TEST(test_changed_max_parallelism_refused)
{
    char *dir = tpc_test_tmpdir("keyed-maxp");
    tpc_test_seq_conf_t src = {.count_default = N, .per_poll = 16, .sleep_us = 300};
    static totals_t t;
    memset(&t, 0, sizeof t);
    tpc_job_t *job = totals_job(dir, &src, &t, 2, TPC_EDGE_HASH);
    pthread_t th;
    pthread_create(&th, NULL, cancel_after_checkpoints, job);
    ck_assert_ptr_null(tpc_job_run(job, NULL));
    pthread_join(th, NULL);
    tpc_job_destroy(job);
    job = totals_job(dir, &src, &t, 2, TPC_EDGE_HASH);
    ck_assert_ptr_null(tpc_job_set(job, "max-parallelism", "64"));
    tpc_error_t *err = tpc_job_run(job, NULL);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    ck_assert_msg(strstr(tpc_error_message(err), "max-parallelism 128"), "%s",
                  tpc_error_message(err));
    ck_assert_ptr_nonnull(strstr(tpc_error_hint_text(err), "back to 128"));
    tpc_error_destroy(err);
    /* And a parallelism above max-parallelism is refused before anything runs. */
    ck_assert_ptr_null(tpc_job_set(job, "max-parallelism", "1"));
    err = tpc_job_run(job, NULL);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(tpc_error_message(err), "above max-parallelism 1"));
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    /* Refused at another parallelism as well; set back as the hint says, the job goes on from
     * its checkpoint (at parallelism 3 now) to the end. */
    job = totals_job(dir, &src, &t, 3, TPC_EDGE_HASH);
    ck_assert_ptr_null(tpc_job_set(job, "max-parallelism", "256"));
    err = tpc_job_run(job, NULL);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    tpc_error_destroy(err);
    ck_assert_ptr_null(tpc_job_set(job, "max-parallelism", "128"));
    tpc_job_result_t res;
    err = tpc_job_run(job, &res);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    ck_assert_int_eq(res, TPC_JOB_FINISHED);
    for (int k = 0; k < KEYS; k++) { /* each key's count went on from the checkpoint */
        uint64_t count = 0;
        for (uint64_t i = (uint64_t)k; i < N; i += KEYS)
            count++;
        ck_assert_int_eq(atomic_load(&t.reported[k]), 1);
        ck_assert_uint_eq(atomic_load(&t.count[k]), count);
    }
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* A keyed entry whose key group is not its key's (a crafted or damaged checkpoint with a valid
 * checksum) is refused at restore, not put where no lookup of its key goes. */
START_TEST(test_entry_in_the_wrong_group_refused)
{
    char *dir = tpc_test_tmpdir("keyed-group");
    tpc_test_seq_conf_t src = {.count_default = N, .per_poll = 16, .sleep_us = 300};
    static totals_t t;
    memset(&t, 0, sizeof t);
    tpc_job_t *job = totals_job(dir, &src, &t, 2, TPC_EDGE_HASH);
    pthread_t th;
    pthread_create(&th, NULL, cancel_after_checkpoints, job);
    ck_assert_ptr_null(tpc_job_run(job, NULL));
    pthread_join(th, NULL);
    tpc_job_destroy(job);

    /* The restored checkpoint again, under the next id, with its first keyed entry moved to
     * another group; the record names it, so a restart decodes it. */
    tpc__record_t rec;
    bool found;
    TPC_TEST_OK(tpc__record_read(dir, &rec, &found));
    ck_assert(found && rec.newest > 0);
    char path[4200];
    snprintf(path, sizeof path, "%s/chk-%020llu", dir, (unsigned long long)rec.newest);
    tpc__checkpoint_t c;
    TPC_TEST_OK(tpc__checkpoint_read(path, &c));
    bool moved = false;
    for (int v = 0; v < c.nvertices && !moved; v++)
        for (int i = 0; i < c.vertices[v].parallelism && !moved; i++) {
            tpc__buf_t *keyed = &c.vertices[v].subtasks[i].state.keyed;
            if (keyed->len < 8)
                continue;
            uint32_t word; /* after the entry's u32 length: u32 group | kind << 24 */
            memcpy(&word, keyed->data + 4, 4);
            uint32_t group = word & 0xffffff;
            word = (word & ~0xffffffu) | ((group + 1) % c.max_parallelism);
            memcpy(keyed->data + 4, &word, 4);
            moved = true;
        }
    ck_assert(moved);
    c.id = rec.newest + 1;
    char *written;
    TPC_TEST_OK(tpc__checkpoint_write(dir, &c, &written));
    free(written);
    tpc__checkpoint_free(&c);
    rec.newest++;
    TPC_TEST_OK(tpc__record_write(dir, &rec));
    tpc__record_free(&rec);

    job = totals_job(dir, &src, &t, 2, TPC_EDGE_HASH);
    ck_assert_ptr_null(tpc_job_set(job, "restart.attempts", "0"));
    tpc_error_t *err = tpc_job_run(job, NULL);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CORRUPT);
    ck_assert_msg(strstr(tpc_error_message(err), "but its key belongs to group"), "%s",
                  tpc_error_message(err));
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* ---- a large state restored: sequence -> key <seq> (8 bytes) -> hash -> value <seq> -------- */

#define LARGE_KEYS 1000000

static tpc_error_t *seq_key_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)self;
    for (size_t i = 0; i < tpc_batch_count(batch); i++) {
        tpc_record_t r;
        tpc_batch_get(batch, i, &r);
        int sub;
        uint64_t seq;
        if (!tpc_test_seq_decode(r.key, r.key_len, &sub, &seq))
            return tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL, "not a sequence record");
        tpc_record_t out = {.key = &seq, .key_len = sizeof seq};
        if (tpc_emit(ctx, &out) != TPC_OK)
            return tpc_error_new(TPC_ERR_CANCELED, 0, "canceled");
    }
    return NULL;
}

static tpc_error_t *value_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)self;
    for (size_t i = 0; i < tpc_batch_count(batch); i++) {
        tpc_record_t r;
        tpc_batch_get(batch, i, &r);
        tpc_error_t *err = tpc_keyed_put(ctx, "v", r.key, r.key_len, r.key, r.key_len);
        if (err)
            return err;
    }
    return NULL;
}

static tpc_error_t *count_value(void *opaque, const void *key, size_t key_len, const void *value,
                                size_t value_len)
{
    uint64_t *n = opaque;
    ck_assert_uint_eq(key_len, 8);
    ck_assert_uint_eq(value_len, 8);
    ck_assert_int_eq(memcmp(key, value, 8), 0);
    uint64_t k;
    memcpy(&k, key, sizeof k);
    ck_assert_uint_lt(k, LARGE_KEYS);
    (*n)++;
    return NULL;
}

static tpc_error_t *value_finish(void *self, tpc_ctx_t *ctx)
{
    return tpc_keyed_foreach(ctx, "v", count_value, self);
}

static const tpc_operator_ops_t seq_key_ops = {
    .version = TPC_OPERATOR_OPS_VERSION, .open = no_open, .process = seq_key_process};
static const tpc_operator_ops_t value_ops = {.version = TPC_OPERATOR_OPS_VERSION,
                                             .open = no_open,
                                             .process = value_process,
                                             .finish = value_finish};

/* A million keys, written in one full snapshot (the final checkpoint) and restored: the restore
 * reads them in the order of the table's slots, which once piled them into one run of slots of a
 * table that grew on the way (every insertion probed to its end: minutes for a million keys). */
START_TEST(test_large_state_restored)
{
    char *dir = tpc_test_tmpdir("keyed-large");
    tpc_test_seq_conf_t src = {.count_default = LARGE_KEYS, .per_poll = 1024};
    uint64_t counted[2] = {0, 0};
    for (int run = 0; run < 2; run++) {
        tpc_job_t *job = tpc_job_new("keyed-large");
        ck_assert_ptr_null(tpc_job_set(job, "checkpoint.dir", dir));
        ck_assert_ptr_null(tpc_job_set(job, "checkpoint.interval.ms", "600000"));
        int s, r, k;
        ck_assert_ptr_null(
            tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s));
        ck_assert_ptr_null(tpc_job_add_vertex(job, "key", 1, &seq_key_ops, NULL, &r));
        ck_assert_ptr_null(tpc_job_add_vertex(job, "value", 1, &value_ops, &counted[run], &k));
        ck_assert_ptr_null(tpc_job_connect(job, s, r, TPC_EDGE_FORWARD));
        ck_assert_ptr_null(tpc_job_connect(job, r, k, TPC_EDGE_HASH));
        tpc_job_result_t res;
        tpc_error_t *err = tpc_job_run(job, &res);
        ck_assert_msg(err == NULL, "run %d: %s", run, tpc_error_message(err));
        ck_assert_int_eq(res, TPC_JOB_FINISHED);
        tpc_job_destroy(job);
    }
    /* The second run's input had ended in the checkpoint: its keys are the restored ones. */
    ck_assert_uint_eq(counted[0], LARGE_KEYS);
    ck_assert_uint_eq(counted[1], LARGE_KEYS);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("keyed_state");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_mapping_vectors);
    tcase_add_test(tc, test_totals_survive_rescaling);
    tcase_add_test(tc, test_keyed_state_without_hash_edge_refused);
    tcase_add_test(tc, test_state_api_on_one_key);
    tcase_add_test(tc, test_changed_max_parallelism_refused);
    tcase_add_test(tc, test_entry_in_the_wrong_group_refused);
    tcase_add_test(tc, test_incremental_chain_survives_rescaling);
    tcase_add_test(tc, test_incremental_chain_survives_aborts);
    tcase_add_test(tc, test_incremental_savepoint_restored);
    tcase_add_test(tc, test_incremental_chain_files);
    tcase_add_test(tc, test_incremental_damaged_link_refused);
    suite_add_tcase(s, tc);
    TCase *large = tcase_create("large");
    tcase_set_timeout(large, 300);
    tcase_add_test(large, test_large_state_restored);
    suite_add_tcase(s, large);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
