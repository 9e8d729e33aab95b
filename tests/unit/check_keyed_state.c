/*
 * Key groups and keyed state: the key -> group -> subtask mapping against fixed vectors (computed
 * apart from the library: FNV-1a 64 of the key bytes modulo max-parallelism, contiguous ranges),
 * a keyed running total restored at parallelism 1 -> 4 -> 2 -> 3 with every key's total and count
 * intact, keyed state used without a hash edge refused, and a changed max-parallelism refused.
 */
#include "runtime_internal.h"
#include "tpc_test_check.h"
#include "tpc_test_ops.h"

#include <check.h>
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

typedef struct {
    atomic_ullong total[KEYS], count[KEYS];
    atomic_int reported[KEYS];
    bool strict; /* keyed state behind any edge: to see the refusal */
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
    }
    return NULL;
}

static tpc_error_t *report(void *opaque, const void *key, size_t key_len, const void *value,
                           size_t value_len)
{
    totals_t *t = opaque;
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
    return NULL;
}

static tpc_error_t *sum_finish(void *self, tpc_ctx_t *ctx)
{
    return tpc_keyed_foreach(ctx, "sum", report, self);
}

static const tpc_operator_ops_t sum_ops = {.version = TPC_OPERATOR_OPS_VERSION,
                                           .open = no_open,
                                           .process = sum_process,
                                           .finish = sum_finish};

static tpc_job_t *totals_job(const char *dir, tpc_test_seq_conf_t *src, totals_t *t, int par,
                             tpc_edge_t edge)
{
    tpc_job_t *job = tpc_job_new("keyed");
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.dir", dir));
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.interval.ms", "10"));
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
    } while (st.checkpoints_completed < 5 && ++waited < 5000);
    tpc_job_cancel(job);
    return NULL;
}

START_TEST(test_totals_survive_rescaling)
{
    char *dir = tpc_test_tmpdir("keyed");
    tpc_test_seq_conf_t src = {.count_default = N, .per_poll = 16, .sleep_us = 300};
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
        tpc_job_destroy(job);
    }
    for (int k = 0; k < KEYS; k++) {
        uint64_t total = 0, count = 0;
        for (uint64_t i = (uint64_t)k; i < N; i += KEYS)
            total += i, count++;
        ck_assert_int_eq(atomic_load(&t.reported[k]), 1);
        ck_assert_uint_eq(atomic_load(&t.count[k]), count);
        ck_assert_uint_eq(atomic_load(&t.total[k]), total);
    }
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
    tpc_test_rmdir(dir);
    free(dir);
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
    tcase_add_test(tc, test_changed_max_parallelism_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
