/*
 * Aborted checkpoints: a checkpoint that does not complete within checkpoint.timeout.ms is
 * aborted, every subtask hears notify_checkpoint_aborted, and the job goes on and finishes; past
 * checkpoint.tolerable-failures consecutive failures the attempt fails with a clear error.
 */
#include "runtime_internal.h"
#include "tpc_test_ops.h"
#include "tpc_test_sink.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

/* A sink whose snapshot is slow for the checkpoint ids in `slow` (all of them when slow_all). */
typedef struct {
    tpc_test_rec_t rec;
    uint64_t slow_from, slow_to;
    uint32_t slow_us;
} slow_t;

static tpc_error_t *slow_snapshot(void *self, tpc_ctx_t *ctx, uint64_t id, tpc_state_writer_t *w)
{
    slow_t *s = (slow_t *)self;
    if (id >= s->slow_from && id <= s->slow_to)
        tpc__sleep_us(s->slow_us);
    return tpc_test_rec_sink_ops.snapshot_state(&s->rec, ctx, id, w);
}

static tpc_error_t *slow_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx;
    *self = arg;
    return NULL;
}

static tpc_error_t *slow_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *b)
{
    return tpc_test_rec_sink_ops.process(&((slow_t *)self)->rec, ctx, b);
}

static tpc_error_t *slow_notify(void *self, tpc_ctx_t *ctx, uint64_t id)
{
    return tpc_test_rec_sink_ops.notify_checkpoint_complete(&((slow_t *)self)->rec, ctx, id);
}

static tpc_error_t *slow_aborted(void *self, tpc_ctx_t *ctx, uint64_t id)
{
    return tpc_test_rec_sink_ops.notify_checkpoint_aborted(&((slow_t *)self)->rec, ctx, id);
}

static tpc_error_t *slow_finish(void *self, tpc_ctx_t *ctx)
{
    return tpc_test_rec_sink_ops.finish(&((slow_t *)self)->rec, ctx);
}

static const tpc_operator_ops_t slow_ops = {.version = TPC_OPERATOR_OPS_VERSION,
                                            .open = slow_open,
                                            .process = slow_process,
                                            .snapshot_state = slow_snapshot,
                                            .notify_checkpoint_complete = slow_notify,
                                            .notify_checkpoint_aborted = slow_aborted,
                                            .finish = slow_finish};

static tpc_job_t *slow_job(const char *dir, tpc_test_seq_conf_t *src, slow_t *sink)
{
    tpc_job_t *job = tpc_job_new("timeouts");
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.dir", dir));
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.interval.ms", "10"));
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.timeout.ms", "40"));
    int s, k;
    ck_assert_ptr_null(tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, src, &s));
    ck_assert_ptr_null(tpc_job_add_vertex(job, "sink", 1, &slow_ops, sink, &k));
    ck_assert_ptr_null(tpc_job_connect(job, s, k, TPC_EDGE_FORWARD));
    return job;
}

START_TEST(test_timed_out_checkpoint_aborts_and_job_goes_on)
{
    char *dir = tpc_test_tmpdir("timeout");
    tpc_test_seq_conf_t src = {.count_default = 3000, .per_poll = 10, .sleep_us = 1000};
    slow_t sink = {.slow_from = 3, .slow_to = 3, .slow_us = 150000};
    tpc_test_rec_init(&sink.rec, 3000);
    tpc_job_t *job = slow_job(dir, &src, &sink);
    /* The slow snapshot holds the next checkpoints up too: on a busy machine more than the
     * default three in a row time out, which is not what this test is about. */
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.tolerable-failures", "1000"));
    tpc_error_t *err = tpc_job_run(job, NULL);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    tpc_job_stats_t st;
    tpc_job_get_stats(job, &st);
    ck_assert_uint_ge(st.checkpoints_aborted, 1);
    ck_assert_uint_eq(st.restarts, 0);
    ck_assert_int_ge(sink.rec.naborts, 1);
    ck_assert_uint_eq(sink.rec.aborts[0], 3);
    for (int i = 0; i < sink.rec.nnotifies; i++)
        ck_assert_uint_ne(sink.rec.notifies[i], 3); /* never notified complete */
    ck_assert_uint_eq(sink.rec.records, 3000);
    ck_assert_uint_eq(sink.rec.duplicates, 0);
    ck_assert_uint_ne(sink.rec.first_notify_after_finish, 0);
    tpc_job_destroy(job);
    tpc_test_rec_free(&sink.rec);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

START_TEST(test_too_many_consecutive_failures_fail_the_job)
{
    char *dir = tpc_test_tmpdir("timeout-fail");
    tpc_test_seq_conf_t src = {.count_default = 100000, .per_poll = 10, .sleep_us = 1000};
    slow_t sink = {.slow_from = 1, .slow_to = UINT64_MAX, .slow_us = 60000};
    tpc_test_rec_init(&sink.rec, 100000);
    tpc_job_t *job = slow_job(dir, &src, &sink);
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.tolerable-failures", "2"));
    ck_assert_ptr_null(tpc_job_set(job, "restart.attempts", "0"));
    tpc_error_t *err = tpc_job_run(job, NULL);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CHECKPOINT);
    ck_assert_msg(strstr(tpc_error_message(err), "3 consecutive checkpoints failed"), "%s",
                  tpc_error_message(err));
    ck_assert_msg(strstr(tpc_error_message(err), "timed out"), "%s", tpc_error_message(err));
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    tpc_test_rec_free(&sink.rec);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("checkpoint_abort");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_timed_out_checkpoint_aborts_and_job_goes_on);
    tcase_add_test(tc, test_too_many_consecutive_failures_fail_the_job);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
