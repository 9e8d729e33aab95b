/*
 * Checkpoints after tasks finish, and the final checkpoint (FLINK-2491, FLIP-147):
 * Source(2) -> Sink(1) where one source ends long before the other must keep completing
 * checkpoints, snapshot the sink for each of them, notify the sink of the final checkpoint, and
 * end right after it even with a long checkpoint interval.
 */
#include "tpc_runtime.h"
#include "tpc_test_ops.h"
#include "tpc_test_sink.h"

#include <check.h>
#include <stdlib.h>

typedef struct {
    uint64_t completed[4096], aborted[4096];
    int ncompleted, naborted;
    tpc_test_rec_t *rec;
    int finishes_at_completion[4096]; /* sink finish count when each checkpoint completed */
} ckpt_log_t;

static void on_checkpoint(void *opaque, uint64_t id, bool completed, uint64_t us,
                          const char *reason)
{
    (void)us;
    (void)reason;
    ckpt_log_t *l = opaque;
    if (completed && l->ncompleted < 4096) {
        l->completed[l->ncompleted++] = id;
    } else if (!completed && l->naborted < 4096) {
        l->aborted[l->naborted++] = id;
    }
}

static tpc_job_t *two_sources_job(tpc_test_seq_conf_t *src, tpc_test_rec_t *rec, const char *dir,
                                  const char *interval)
{
    tpc_job_t *job = tpc_job_new("flink-2491");
    ck_assert_ptr_nonnull(job);
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.dir", dir));
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.interval.ms", interval));
    int s, k;
    ck_assert_ptr_null(tpc_job_add_vertex(job, "source", 2, &tpc_test_seq_source_ops, src, &s));
    ck_assert_ptr_null(tpc_job_add_vertex(job, "sink", 1, &tpc_test_rec_sink_ops, rec, &k));
    ck_assert_ptr_null(tpc_job_connect(job, s, k, TPC_EDGE_REBALANCE));
    return job;
}

START_TEST(test_one_source_ends_early)
{
    char *dir = tpc_test_tmpdir("final");
    tpc_test_seq_conf_t src = {.per_poll = 10, .sleep_us = 300};
    src.count[0] = 10;
    src.count[1] = 10000;
    tpc_test_rec_t rec;
    tpc_test_rec_init(&rec, 10000);
    ckpt_log_t log = {.rec = &rec};
    tpc_job_t *job = two_sources_job(&src, &rec, dir, "20");
    tpc_job_set_checkpoint_callback(job, on_checkpoint, &log);
    tpc_job_result_t result;
    tpc_error_t *err = tpc_job_run(job, &result);
    ck_assert_msg(err == NULL, "run failed: %s", tpc_error_message(err));
    ck_assert_int_eq(result, TPC_JOB_FINISHED);

    /* Checkpoints kept completing after source 0 ended (it ends within a few ms). */
    ck_assert_int_ge(log.ncompleted, 5);
    /* The sink snapshotted for every completed checkpoint. */
    for (int i = 0; i < log.ncompleted; i++) {
        bool found = false;
        for (int j = 0; j < rec.nsnapshots; j++)
            found |= rec.snapshots[j] == log.completed[i];
        ck_assert_msg(found, "sink did not snapshot completed checkpoint %llu",
                      (unsigned long long)log.completed[i]);
    }
    /* The final checkpoint's notify reached the sink after its finish(): the sink was notified of
     * a checkpoint it snapshotted after finish(). (A checkpoint triggered just before that notify
     * may complete after the sink closed; it holds nothing the notified one did not.) */
    ck_assert_int_eq(rec.finishes, 1);
    ck_assert(rec.snapshot_after_finish);
    ck_assert_uint_ne(rec.first_notify_after_finish, 0);
    ck_assert_msg(rec.notifies[rec.nnotifies - 1] >= rec.first_snapshot_after_finish,
                  "last notify %llu, first snapshot after finish %llu",
                  (unsigned long long)rec.notifies[rec.nnotifies - 1],
                  (unsigned long long)rec.first_snapshot_after_finish);
    bool notified_completed = false;
    for (int i = 0; i < log.ncompleted; i++)
        notified_completed |= log.completed[i] == rec.notifies[rec.nnotifies - 1];
    ck_assert(notified_completed);
    ck_assert_int_eq(rec.closes, 1);
    /* Every record exactly once. */
    ck_assert_uint_eq(rec.records, 10010);
    ck_assert_uint_eq(rec.duplicates, 0);
    ck_assert_uint_eq(tpc_test_rec_missing(&rec, 0, 10), 0);
    ck_assert_uint_eq(tpc_test_rec_missing(&rec, 1, 10000), 0);

    tpc_job_destroy(job);
    tpc_test_rec_free(&rec);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* With a 10 s interval, the job must still end right after its input: the final checkpoint is
 * triggered when everything has finished, not an interval later. */
START_TEST(test_final_checkpoint_is_immediate)
{
    char *dir = tpc_test_tmpdir("final-fast");
    tpc_test_seq_conf_t src = {.count_default = 1000};
    tpc_test_rec_t rec;
    tpc_test_rec_init(&rec, 1000);
    ckpt_log_t log = {.rec = &rec};
    tpc_job_t *job = two_sources_job(&src, &rec, dir, "10000");
    tpc_job_set_checkpoint_callback(job, on_checkpoint, &log);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tpc_error_t *err = tpc_job_run(job, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ck_assert_msg(err == NULL, "run failed: %s", tpc_error_message(err));
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    ck_assert_msg(secs < 5.0, "job took %.1f s: final checkpoint waited for the interval", secs);
    ck_assert_int_eq(log.ncompleted, 1);
    ck_assert_uint_eq(rec.first_notify_after_finish, log.completed[0]);
    ck_assert_uint_eq(rec.records, 2000);
    tpc_job_destroy(job);
    tpc_test_rec_free(&rec);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* The old behaviour, for comparison: with checkpoint.after-finish=false, once a source finished
 * every checkpoint declines, so the sink never sees a snapshot after that. */
START_TEST(test_after_finish_switch_off)
{
    char *dir = tpc_test_tmpdir("final-off");
    tpc_test_seq_conf_t src = {.per_poll = 10, .sleep_us = 300};
    src.count[0] = 10;
    src.count[1] = 5000;
    tpc_test_rec_t rec;
    tpc_test_rec_init(&rec, 5000);
    ckpt_log_t log = {.rec = &rec};
    tpc_job_t *job = two_sources_job(&src, &rec, dir, "20");
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.after-finish", "false"));
    tpc_job_set_checkpoint_callback(job, on_checkpoint, &log);
    tpc_error_t *err = tpc_job_run(job, NULL);
    ck_assert_msg(err == NULL, "run failed: %s", tpc_error_message(err));
    ck_assert_int_ge(log.naborted, 3);
    ck_assert_uint_eq(rec.first_notify_after_finish, 0);
    ck_assert(!rec.snapshot_after_finish);
    ck_assert_uint_eq(rec.records, 5010);
    tpc_job_destroy(job);
    tpc_test_rec_free(&rec);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("final_checkpoint");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_one_source_ends_early);
    tcase_add_test(tc, test_final_checkpoint_is_immediate);
    tcase_add_test(tc, test_after_finish_switch_off);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
