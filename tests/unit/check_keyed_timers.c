/*
 * Processing-time timers per key: each key arms one timer when its first record arrives
 * (registered twice, plus a second time that is deleted again). Run 1 (parallelism 2) is canceled
 * after a checkpoint holds every armed timer and before any is due; the timers come due while the
 * job is down; run 2 (parallelism 3) fires each of them once, soon after the restore, on the
 * subtask that owns the key's group at parallelism 3, and is canceled after a checkpoint taken
 * after the fires; run 3 (parallelism 1) finishes the input and fires nothing again: each key's
 * keyed count of fires is 1 and so is the count of on_timer calls the test saw over all runs.
 * Also: a timer in an operator without on_timer is refused, and so is a restore that brings
 * timers to a vertex whose operator has none (they would fire into nothing).
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

#define KEYS     40
#define DELAY_MS 1500

static atomic_int fires[KEYS], wrong_owner, reported[KEYS];
static atomic_llong late_ms; /* the longest delay past its time of a fire */
static atomic_ullong fired_state[KEYS];

static int key_index(const void *key, size_t len)
{
    char k[16] = {0};
    ck_assert_uint_lt(len, sizeof k);
    memcpy(k, key, len);
    int i = atoi(k + 1);
    ck_assert(i >= 0 && i < KEYS);
    return i;
}

static tpc_error_t *no_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx;
    *self = arg;
    return NULL;
}

/* sequence record -> key "k<seq % KEYS>" */
static tpc_error_t *rekey_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)self;
    for (size_t i = 0; i < tpc_batch_count(batch); i++) {
        tpc_record_t r;
        tpc_batch_get(batch, i, &r);
        int sub;
        uint64_t seq;
        ck_assert(tpc_test_seq_decode(r.key, r.key_len, &sub, &seq));
        char key[16];
        int n = snprintf(key, sizeof key, "k%llu", (unsigned long long)(seq % KEYS));
        tpc_record_t out = {.key = key, .key_len = (size_t)n, .value = r.key, .value_len = 8};
        if (tpc_emit(ctx, &out) != TPC_OK)
            return tpc_error_new(TPC_ERR_CANCELED, 0, "canceled");
    }
    return NULL;
}

static const tpc_operator_ops_t rekey_ops = {
    .version = TPC_OPERATOR_OPS_VERSION, .open = no_open, .process = rekey_process};

static tpc_error_t *arm_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)self;
    for (size_t i = 0; i < tpc_batch_count(batch); i++) {
        tpc_record_t r;
        tpc_batch_get(batch, i, &r);
        const void *v;
        size_t len;
        tpc_error_t *err = tpc_keyed_get(ctx, "armed", r.key, r.key_len, &v, &len);
        if (err || v)
            return err;
        int64_t at = tpc_processing_time_ms() + DELAY_MS;
        if ((err = tpc_keyed_put(ctx, "armed", r.key, r.key_len, &at, sizeof at)) ||
            (err = tpc_timer_register(ctx, r.key, r.key_len, at)) ||
            (err = tpc_timer_register(ctx, r.key, r.key_len, at)) || /* the same timer */
            (err = tpc_timer_register(ctx, r.key, r.key_len, at + 7)) ||
            (err = tpc_timer_delete(ctx, r.key, r.key_len, at + 7)) ||
            (err = tpc_timer_delete(ctx, r.key, r.key_len, at + 9))) /* none: fine */
            return err;
    }
    return NULL;
}

static tpc_error_t *arm_on_timer(void *self, tpc_ctx_t *ctx, const void *key, size_t key_len,
                                 int64_t at_ms)
{
    (void)self;
    int k = key_index(key, key_len);
    const void *v;
    size_t len;
    int64_t armed = 0;
    uint64_t n = 0;
    tpc_error_t *err = tpc_keyed_get(ctx, "armed", key, key_len, &v, &len);
    if (err)
        return err;
    ck_assert_ptr_nonnull(v);
    memcpy(&armed, v, sizeof armed);
    ck_assert_int_eq(armed, at_ms);
    long long late = tpc_processing_time_ms() - at_ms, was = atomic_load(&late_ms);
    ck_assert_int_ge(late, 0);
    while (late > was && !atomic_compare_exchange_weak(&late_ms, &was, late))
        ;
    int group = tpc_key_group(key, key_len, tpc_ctx_max_parallelism(ctx));
    if (tpc_key_group_subtask(group, tpc_ctx_max_parallelism(ctx), tpc_ctx_parallelism(ctx)) !=
        tpc_ctx_subtask(ctx))
        atomic_fetch_add(&wrong_owner, 1);
    if ((err = tpc_keyed_get(ctx, "fired", key, key_len, &v, &len)))
        return err;
    if (v)
        memcpy(&n, v, sizeof n);
    n++;
    atomic_fetch_add(&fires[k], 1);
    return tpc_keyed_put(ctx, "fired", key, key_len, &n, sizeof n);
}

static tpc_error_t *report(void *opaque, const void *key, size_t key_len, const void *value,
                           size_t value_len)
{
    (void)opaque;
    int k = key_index(key, key_len);
    uint64_t n;
    ck_assert_uint_eq(value_len, sizeof n);
    memcpy(&n, value, sizeof n);
    atomic_store(&fired_state[k], n);
    atomic_fetch_add(&reported[k], 1);
    return NULL;
}

static tpc_error_t *arm_finish(void *self, tpc_ctx_t *ctx)
{
    return tpc_keyed_foreach(ctx, "fired", report, self);
}

static const tpc_operator_ops_t arm_ops = {.version = TPC_OPERATOR_OPS_VERSION,
                                           .open = no_open,
                                           .process = arm_process,
                                           .finish = arm_finish,
                                           .on_timer = arm_on_timer};

static tpc_job_t *timers_job(const char *dir, tpc_test_seq_conf_t *src, int par,
                             const tpc_operator_ops_t *ops)
{
    tpc_job_t *job = tpc_job_new("timers");
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.dir", dir));
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.interval.ms", "20"));
    int s, r, k;
    ck_assert_ptr_null(tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, src, &s));
    ck_assert_ptr_null(tpc_job_add_vertex(job, "rekey", par, &rekey_ops, NULL, &r));
    ck_assert_ptr_null(tpc_job_add_vertex(job, "arm", par, ops, NULL, &k));
    ck_assert_ptr_null(tpc_job_connect(job, s, r, TPC_EDGE_REBALANCE));
    ck_assert_ptr_null(tpc_job_connect(job, r, k, TPC_EDGE_HASH));
    return job;
}

typedef struct {
    tpc_job_t *job;
    int want_fires; /* cancel once this many on_timer calls happened in all (and 3 checkpoints) */
    int64_t started_ms, fired_after_ms;
} canceler_t;

static int total_fires(void)
{
    int n = 0;
    for (int k = 0; k < KEYS; k++)
        n += atomic_load(&fires[k]);
    return n;
}

/* Every key arms its timer within the first KEYS records; then wait for the fires wanted and for
 * three more completed checkpoints (so the restored one holds what happened), and cancel. */
static void *canceler(void *arg)
{
    canceler_t *c = arg;
    tpc_job_stats_t st;
    int waited = 0;
    do {
        tpc__sleep_us(2000);
        tpc_job_get_stats(c->job, &st);
    } while ((st.vertex_count < 3 || st.vertices[2].records_in < 4 * KEYS ||
              total_fires() < c->want_fires) &&
             ++waited < 5000);
    c->fired_after_ms = tpc_processing_time_ms() - c->started_ms;
    uint64_t done = st.checkpoints_completed;
    do {
        tpc__sleep_us(2000);
        tpc_job_get_stats(c->job, &st);
    } while (st.checkpoints_completed < done + 3 && ++waited < 5000);
    tpc_job_cancel(c->job);
    return NULL;
}

static void run_canceled(const char *dir, tpc_test_seq_conf_t *src, int par, canceler_t *c)
{
    tpc_job_t *job = timers_job(dir, src, par, &arm_ops);
    c->job = job;
    c->started_ms = tpc_processing_time_ms();
    pthread_t th;
    pthread_create(&th, NULL, canceler, c);
    tpc_job_result_t res;
    tpc_error_t *err = tpc_job_run(job, &res);
    pthread_join(th, NULL);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    ck_assert_int_eq(res, TPC_JOB_CANCELED);
    tpc_job_destroy(job);
}

START_TEST(test_timers_fire_once_across_restores)
{
    char *dir = tpc_test_tmpdir("timers");
    tpc_test_seq_conf_t src = {.count_default = 6000, .per_poll = 8, .sleep_us = 1000};

    /* Run 1: every key armed and checkpointed, nothing due yet. */
    canceler_t c1 = {.want_fires = 0};
    int64_t t0 = tpc_processing_time_ms();
    run_canceled(dir, &src, 2, &c1);
    ck_assert_msg(tpc_processing_time_ms() - t0 < DELAY_MS, "run 1 took too long to test");
    ck_assert_int_eq(total_fires(), 0);

    /* Down past every timer's time; run 2 fires them at once, each on its owner at 3. */
    tpc__sleep_us((DELAY_MS + 200) * 1000);
    canceler_t c2 = {.want_fires = KEYS};
    run_canceled(dir, &src, 3, &c2);
    ck_assert_int_eq(total_fires(), KEYS);
    ck_assert_msg(c2.fired_after_ms < 3000, "timers due during downtime fired %lld ms after start",
                  (long long)c2.fired_after_ms);
    ck_assert_int_eq(atomic_load(&wrong_owner), 0);

    /* Run 3: to the end of the input; no timer fires again. */
    tpc_job_t *job = timers_job(dir, &src, 1, &arm_ops);
    tpc_job_result_t res;
    tpc_error_t *err = tpc_job_run(job, &res);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    ck_assert_int_eq(res, TPC_JOB_FINISHED);
    tpc_job_destroy(job);
    for (int k = 0; k < KEYS; k++) {
        ck_assert_int_eq(atomic_load(&fires[k]), 1);
        ck_assert_int_eq(atomic_load(&reported[k]), 1);
        ck_assert_uint_eq(atomic_load(&fired_state[k]), 1);
    }
    ck_assert_int_eq(atomic_load(&wrong_owner), 0);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* A timer that fires while the job runs: on time, once. */
START_TEST(test_timer_fires_while_running)
{
    tpc_test_seq_conf_t src = {.count_default = 20000, .per_poll = 8, .sleep_us = 1000};
    tpc_job_t *job = tpc_job_new("timers-live");
    int s, r, k;
    ck_assert_ptr_null(tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s));
    ck_assert_ptr_null(tpc_job_add_vertex(job, "rekey", 2, &rekey_ops, NULL, &r));
    ck_assert_ptr_null(tpc_job_add_vertex(job, "arm", 2, &arm_ops, NULL, &k));
    ck_assert_ptr_null(tpc_job_connect(job, s, r, TPC_EDGE_REBALANCE));
    ck_assert_ptr_null(tpc_job_connect(job, r, k, TPC_EDGE_HASH));
    ck_assert_ptr_null(tpc_job_run(job, NULL)); /* 2500 polls of 1 ms: past DELAY_MS */
    tpc_job_destroy(job);
    for (int i = 0; i < KEYS; i++) {
        ck_assert_int_eq(atomic_load(&fires[i]), 1);
        ck_assert_uint_eq(atomic_load(&fired_state[i]), 1);
    }
    ck_assert_int_lt(atomic_load(&late_ms), 500);
}
END_TEST

static const tpc_operator_ops_t no_timer_ops = {
    .version = 1, .open = no_open, .process = arm_process};

START_TEST(test_timer_without_on_timer_refused)
{
    tpc_test_seq_conf_t src = {.count_default = 100, .per_poll = 8};
    char *dir = tpc_test_tmpdir("timers-refused");
    tpc_job_t *job = timers_job(dir, &src, 2, &no_timer_ops);
    tpc_error_t *err = tpc_job_run(job, NULL);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tpc_error_message(err), "no on_timer callback"));
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

static tpc_error_t *count_only(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)self, (void)ctx, (void)batch;
    return NULL;
}

static const tpc_operator_ops_t timerless_ops = {
    .version = TPC_OPERATOR_OPS_VERSION, .open = no_open, .process = count_only};

/* What the bytes after a version-1 table may hold: a version-1 operator has no on_timer, whatever
 * lies where version 2 keeps it, and it is never called. */
static tpc_error_t *stray_on_timer(void *self, tpc_ctx_t *ctx, const void *key, size_t key_len,
                                   int64_t at_ms)
{
    (void)self, (void)ctx, (void)key, (void)key_len, (void)at_ms;
    abort();
}

static const tpc_operator_ops_t version1_ops = {
    .version = 1, .open = no_open, .process = count_only, .on_timer = stray_on_timer};

/* _i: 0, an operator of version 2 without on_timer; 1, one of version 1. */
START_TEST(test_restored_timers_need_on_timer)
{
    char *dir = tpc_test_tmpdir("timers-restored");
    tpc_test_seq_conf_t src = {.count_default = 6000, .per_poll = 8, .sleep_us = 1000};
    canceler_t c1 = {.want_fires = 0};
    run_canceled(dir, &src, 2, &c1); /* every key's timer armed and checkpointed */
    tpc_job_t *job = timers_job(dir, &src, 2, _i ? &version1_ops : &timerless_ops);
    ck_assert_ptr_null(tpc_job_set(job, "restart.attempts", "0"));
    tpc_error_t *err = tpc_job_run(job, NULL);
    ck_assert_ptr_nonnull(err);
    ck_assert_msg(strstr(tpc_error_message(err), "holds timers of vertex \"arm\"") &&
                      strstr(tpc_error_message(err), "no on_timer"),
                  "%s", tpc_error_message(err));
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("keyed_timers");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_timers_fire_once_across_restores);
    tcase_add_test(tc, test_timer_fires_while_running);
    tcase_add_test(tc, test_timer_without_on_timer_refused);
    tcase_add_loop_test(tc, test_restored_timers_need_on_timer, 0, 2);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
