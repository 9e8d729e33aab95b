/*
 * Union list state with finished subtasks: while a vertex that writes union state has some
 * subtasks closed and others still running, checkpoints decline with a reason that names the
 * vertex (its closed subtasks' entries are gone, a restore could not give every subtask all of
 * them); once every subtask has finished its operator they succeed again and the job ends with
 * its final checkpoint. Also: union entries reach every subtask on restore.
 */
#include "runtime_internal.h"
#include "tpc_test_ops.h"
#include "tpc_test_sink.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    atomic_int completed_after_union_abort;
    atomic_int union_aborts;
} outcome_t;

static void on_ckpt(void *opaque, uint64_t id, bool completed, uint64_t us, const char *reason)
{
    (void)id;
    (void)us;
    outcome_t *o = opaque;
    if (completed) {
        if (atomic_load(&o->union_aborts))
            atomic_fetch_add(&o->completed_after_union_abort, 1);
    } else if (reason && strstr(reason, "vertex \"count\" uses union list state and is only "
                                        "partly finished")) {
        atomic_fetch_add(&o->union_aborts, 1);
    }
}

typedef struct {
    tpc_job_t *job;
    outcome_t *o;
    tpc_error_t *err;
    char *path;
} drainer_t;

/* Once checkpoints have declined a few times, end the long source with a drain. */
static void *drain_after_aborts(void *arg)
{
    drainer_t *d = arg;
    while (atomic_load(&d->o->union_aborts) < 3)
        tpc__sleep_us(1000);
    d->err = tpc_job_stop_with_savepoint(d->job, true, &d->path);
    return NULL;
}

START_TEST(test_partly_finished_union_state_declines_then_recovers)
{
    char *dir = tpc_test_tmpdir("union");
    tpc_test_seq_conf_t src = {.per_poll = 10, .sleep_us = 500};
    src.count[0] = 10;
    src.count[1] = 100000000;
    tpc_test_count_t cnt;
    tpc_test_count_init(&cnt);
    cnt.use_union = true;
    outcome_t o = {0};
    tpc_job_t *job = tpc_job_new("union");
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.dir", dir));
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.interval.ms", "10"));
    int s, c;
    ck_assert_ptr_null(tpc_job_add_vertex(job, "source", 2, &tpc_test_seq_source_ops, &src, &s));
    ck_assert_ptr_null(tpc_job_add_vertex(job, "count", 2, &tpc_test_count_ops, &cnt, &c));
    ck_assert_ptr_null(tpc_job_connect(job, s, c, TPC_EDGE_FORWARD));
    tpc_job_set_checkpoint_callback(job, on_ckpt, &o);
    drainer_t d = {.job = job, .o = &o};
    pthread_t th;
    pthread_create(&th, NULL, drain_after_aborts, &d);
    tpc_job_result_t res;
    tpc_error_t *err = tpc_job_run(job, &res);
    pthread_join(th, NULL);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    ck_assert_msg(d.err == NULL, "%s", tpc_error_message(d.err));
    ck_assert_int_eq(res, TPC_JOB_STOPPED);
    ck_assert_int_ge(atomic_load(&o.union_aborts), 3);
    /* Once every subtask finished, the final savepoint completed. */
    ck_assert_int_ge(atomic_load(&o.completed_after_union_abort), 1);
    ck_assert_ptr_nonnull(d.path);
    free(d.path);
    uint64_t count, sum;
    tpc_test_count_total(&cnt, 0, &count, &sum);
    ck_assert_uint_eq(count, 10);
    tpc_test_count_total(&cnt, 1, &count, &sum);
    ck_assert_uint_gt(count, 0);
    ck_assert_uint_eq(sum, count * (count - 1) / 2); /* a prefix, each record once */
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* An operator that checks, on restore, that it received every subtask's union entry. */
static tpc_error_t *u_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx;
    *self = arg;
    return NULL;
}

static tpc_error_t *u_init(void *self, tpc_ctx_t *ctx, const tpc_state_reader_t *st)
{
    int *seen = self;
    if (st)
        __atomic_fetch_add(&seen[tpc_ctx_subtask(ctx)], (int)tpc_state_count(st, TPC_STATE_UNION),
                           __ATOMIC_SEQ_CST);
    return NULL;
}

static tpc_error_t *u_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *b)
{
    (void)self;
    (void)ctx;
    (void)b;
    return NULL;
}

static tpc_error_t *u_snap(void *self, tpc_ctx_t *ctx, uint64_t id, tpc_state_writer_t *w)
{
    (void)self;
    (void)id;
    int me = tpc_ctx_subtask(ctx);
    return tpc_state_add(w, TPC_STATE_UNION, &me, sizeof me);
}

static const tpc_operator_ops_t union_ops = {.version = TPC_OPERATOR_OPS_VERSION,
                                             .open = u_open,
                                             .initialize_state = u_init,
                                             .process = u_process,
                                             .snapshot_state = u_snap};

static void *cancel_after_checkpoints(void *arg)
{
    tpc_job_t *job = arg;
    tpc_job_stats_t st;
    do {
        tpc__sleep_us(2000);
        tpc_job_get_stats(job, &st);
    } while (st.checkpoints_completed < 3);
    tpc_job_cancel(job);
    return NULL;
}

START_TEST(test_union_entries_reach_every_subtask)
{
    char *dir = tpc_test_tmpdir("union-restore");
    tpc_test_seq_conf_t src = {.count_default = 1000000, .per_poll = 10, .sleep_us = 1000};
    int seen[3] = {0};
    for (int round = 0; round < 2; round++) {
        tpc_job_t *job = tpc_job_new("union-restore");
        ck_assert_ptr_null(tpc_job_set(job, "checkpoint.dir", dir));
        ck_assert_ptr_null(tpc_job_set(job, "checkpoint.interval.ms", "10"));
        int s, u;
        ck_assert_ptr_null(
            tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s));
        /* Three subtasks in the first round, two in the second: union state spans both. */
        ck_assert_ptr_null(tpc_job_add_vertex(job, "u", 3 - round, &union_ops, seen, &u));
        ck_assert_ptr_null(tpc_job_connect(job, s, u, TPC_EDGE_REBALANCE));
        pthread_t th;
        pthread_create(&th, NULL, cancel_after_checkpoints, job);
        tpc_error_t *err = tpc_job_run(job, NULL);
        pthread_join(th, NULL);
        ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
        tpc_job_destroy(job);
    }
    /* Second round: each of the 2 subtasks got the 3 entries written by the first round. */
    ck_assert_int_eq(seen[0], 3);
    ck_assert_int_eq(seen[1], 3);
    ck_assert_int_eq(seen[2], 0);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("union_state");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_partly_finished_union_state_declines_then_recovers);
    tcase_add_test(tc, test_union_entries_reach_every_subtask);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
