/*
 * Edge cases of the runtime's protocol, each a race that once made a job hang or report the
 * wrong outcome: stop with savepoint while a producer is blocked on a full channel, while the
 * attempt fails and restarts, when the savepoint aborts, and while the job finishes by itself;
 * a cancel before the run starts and one during the pause before a restart.
 */
#include "runtime_internal.h"
#include "tpc_test_env.h"
#include "tpc_test_job.h"
#include "tpc_test_ops.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A sink with knobs: slow batches, failures in attempt 0, a slow first snapshot, and a hook that
 * runs in the first snapshot taken after finish(). One instance shared by its subtasks. */
typedef struct sink_conf {
    uint32_t process_sleep_us;
    bool fail_finish_attempt0;
    bool fail_snapshot_attempt0;
    uint32_t first_snapshot_sleep_us;
    void (*after_finish_snapshot)(struct sink_conf *);
    void *opaque;
    atomic_int snapshots, finishes, closes;
    atomic_bool finished, hook_ran;
} sink_conf_t;

static tpc_error_t *sink_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx;
    *self = arg;
    return NULL;
}

static tpc_error_t *sink_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *b)
{
    (void)ctx;
    (void)b;
    sink_conf_t *s = self;
    if (s->process_sleep_us)
        tpc__sleep_us(s->process_sleep_us);
    return NULL;
}

static tpc_error_t *sink_snapshot(void *self, tpc_ctx_t *ctx, uint64_t id, tpc_state_writer_t *w)
{
    (void)w;
    sink_conf_t *s = self;
    if (s->fail_snapshot_attempt0 && tpc_ctx_attempt(ctx) == 0)
        return tpc_error_new(TPC_ERR_TASK, 0, "injected snapshot failure at %llu",
                             (unsigned long long)id);
    if (atomic_fetch_add(&s->snapshots, 1) == 0 && s->first_snapshot_sleep_us)
        tpc__sleep_us(s->first_snapshot_sleep_us);
    if (atomic_load(&s->finished) && s->after_finish_snapshot &&
        !atomic_exchange(&s->hook_ran, true))
        s->after_finish_snapshot(s);
    return NULL;
}

static tpc_error_t *sink_finish(void *self, tpc_ctx_t *ctx)
{
    sink_conf_t *s = self;
    atomic_fetch_add(&s->finishes, 1);
    if (s->fail_finish_attempt0 && tpc_ctx_attempt(ctx) == 0)
        return tpc_error_new(TPC_ERR_TASK, 0, "injected finish failure");
    atomic_store(&s->finished, true);
    return NULL;
}

static void sink_close(void *self, tpc_ctx_t *ctx)
{
    (void)ctx;
    atomic_fetch_add(&((sink_conf_t *)self)->closes, 1);
}

static const tpc_operator_ops_t sink_ops = {.version = TPC_OPERATOR_OPS_VERSION,
                                            .open = sink_open,
                                            .process = sink_process,
                                            .snapshot_state = sink_snapshot,
                                            .finish = sink_finish,
                                            .close = sink_close};

/* source(1) -forward-> sink(1) */
static tpc_job_t *edge_job(const char *dir, tpc_test_seq_conf_t *src, sink_conf_t *sink,
                           const char *interval_ms)
{
    tpc_job_t *job = tpc_job_new("edge");
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.dir", dir));
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.interval.ms", interval_ms));
    ck_assert_ptr_null(tpc_job_set(job, "restart.delay.ms", "10"));
    int s, k;
    ck_assert_ptr_null(tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, src, &s));
    ck_assert_ptr_null(tpc_job_add_vertex(job, "sink", 1, &sink_ops, sink, &k));
    ck_assert_ptr_null(tpc_job_connect(job, s, k, TPC_EDGE_FORWARD));
    return job;
}

static tpc_job_result_t run_and_stop(tpc_job_t *job, tpc_test_stopper_t *s)
{
    tpc_job_result_t result = TPC_JOB_FINISHED;
    tpc_error_t *err = tpc_test_job_run_stopped(job, s, &result);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    return result;
}

static void assert_savepoint(const tpc_test_stopper_t *s)
{
    ck_assert_msg(s->err == NULL, "stop: %s", tpc_error_message(s->err));
    ck_assert_ptr_nonnull(s->path);
    ck_assert_ptr_nonnull(strstr(s->path, "savepoint-"));
    ck_assert_int_eq(access(s->path, R_OK), 0);
}

#define UNBOUNDED (1ull << 39)

/* No drain: the savepoint completes, then every subtask gets STOP. The sink leaves at once; the
 * source may be blocked in tpc_emit on the full channel to it and must not wait forever. */
START_TEST(test_stop_without_drain_under_backpressure)
{
    char *dir = tpc_test_tmpdir("edge-bp");
    tpc_test_seq_conf_t src = {.count_default = UNBOUNDED, .per_poll = 64};
    sink_conf_t sink = {.process_sleep_us = 300};
    tpc_job_t *job = edge_job(dir, &src, &sink, "20");
    ck_assert_ptr_null(tpc_job_set(job, "batch.size", "8"));
    ck_assert_ptr_null(tpc_job_set(job, "channel.capacity", "2"));
    for (int round = 0; round < 5; round++) {
        tpc_test_stopper_t s = {.drain = false, .after_checkpoints = 2};
        ck_assert_int_eq(run_and_stop(job, &s), TPC_JOB_STOPPED);
        assert_savepoint(&s);
        free(s.path);
    }
    ck_assert_int_eq(atomic_load(&sink.finishes), 0);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* Drain: sources end their input, the sink fails in finish() in attempt 0, the job restarts. The
 * stop is still pending: the new attempt must end its sources' input again. */
START_TEST(test_stop_with_drain_survives_restart)
{
    char *dir = tpc_test_tmpdir("edge-drain-restart");
    tpc_test_seq_conf_t src = {.count_default = UNBOUNDED, .per_poll = 1, .sleep_us = 1000};
    sink_conf_t sink = {.fail_finish_attempt0 = true};
    tpc_job_t *job = edge_job(dir, &src, &sink, "0");
    tpc_test_stopper_t s = {.drain = true, .delay_us = 50000};
    ck_assert_int_eq(run_and_stop(job, &s), TPC_JOB_STOPPED);
    assert_savepoint(&s);
    tpc_job_stats_t st;
    tpc_job_get_stats(job, &st);
    ck_assert_uint_eq(st.restarts, 1);
    ck_assert_int_eq(atomic_load(&sink.finishes), 2);
    free(s.path);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* No drain: the savepoint's snapshot fails in attempt 0, the job restarts. The stop is still
 * pending: the new attempt must take the savepoint (there are no periodic checkpoints). */
START_TEST(test_stop_without_drain_survives_restart)
{
    char *dir = tpc_test_tmpdir("edge-nodrain-restart");
    tpc_test_seq_conf_t src = {.count_default = UNBOUNDED, .per_poll = 1, .sleep_us = 1000};
    sink_conf_t sink = {.fail_snapshot_attempt0 = true};
    tpc_job_t *job = edge_job(dir, &src, &sink, "0");
    tpc_test_stopper_t s = {.drain = false, .delay_us = 50000};
    ck_assert_int_eq(run_and_stop(job, &s), TPC_JOB_STOPPED);
    assert_savepoint(&s);
    tpc_job_stats_t st;
    tpc_job_get_stats(job, &st);
    ck_assert_uint_eq(st.restarts, 1);
    ck_assert_int_eq(atomic_load(&sink.finishes), 0);
    free(s.path);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

typedef struct {
    tpc_job_t *job;
    tpc_job_result_t result;
    tpc_error_t *err;
} runner_t;

static void *runner(void *arg)
{
    runner_t *r = arg;
    r->err = tpc_job_run(r->job, &r->result);
    return NULL;
}

/* No drain: the savepoint times out. The stop must fail with the reason and the job go on, so
 * that a second stop succeeds. */
START_TEST(test_stop_without_drain_savepoint_aborted)
{
    char *dir = tpc_test_tmpdir("edge-sp-abort");
    tpc_test_seq_conf_t src = {.count_default = UNBOUNDED, .per_poll = 1, .sleep_us = 1000};
    sink_conf_t sink = {.first_snapshot_sleep_us = 300000};
    tpc_job_t *job = edge_job(dir, &src, &sink, "0");
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.timeout.ms", "100"));
    runner_t r = {.job = job};
    pthread_t th;
    pthread_create(&th, NULL, runner, &r);
    tpc__sleep_us(50000);
    char *path = NULL;
    tpc_error_t *err = tpc_job_stop_with_savepoint(job, false, &path);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CHECKPOINT);
    ck_assert_msg(strstr(tpc_error_message(err), "timed out"), "%s", tpc_error_message(err));
    ck_assert_ptr_null(path);
    tpc_error_destroy(err);

    tpc__sleep_us(400000); /* the slow snapshot is over */
    err = tpc_job_stop_with_savepoint(job, false, &path);
    ck_assert_msg(err == NULL, "second stop: %s", tpc_error_message(err));
    ck_assert_ptr_nonnull(path);
    ck_assert_int_eq(access(path, R_OK), 0);
    pthread_join(th, NULL);
    ck_assert_msg(r.err == NULL, "%s", tpc_error_message(r.err));
    ck_assert_int_eq(r.result, TPC_JOB_STOPPED);
    free(path);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* A stop while the job waits (a minute) to restart after a failure: the savepoint would come with
 * the next attempt, too late; past stop.timeout.ms the job is canceled, and the stop says so. It
 * used to wait for the next attempt, or for ever while attempts kept failing. */
START_TEST(test_stop_during_restart_pause)
{
    char *dir = tpc_test_tmpdir("edge-stop-pause");
    tpc_test_seq_conf_t src = {
        .count_default = UNBOUNDED, .per_poll = 1, .sleep_us = 1000, .fail_at = 50};
    sink_conf_t sink = {0};
    tpc_job_t *job = edge_job(dir, &src, &sink, "20");
    ck_assert_ptr_null(tpc_job_set(job, "restart.delay.ms", "60000"));
    ck_assert_ptr_null(tpc_job_set(job, "stop.timeout.ms", "500"));
    runner_t r = {.job = job};
    pthread_t th;
    pthread_create(&th, NULL, runner, &r);
    tpc_job_stats_t st = {0};
    for (int i = 0; i < 2000 && st.restarts == 0; i++) {
        tpc__sleep_us(5000);
        tpc_job_get_stats(job, &st);
    }
    ck_assert_uint_eq(st.restarts, 1);
    uint64_t t0 = tpc__now_us();
    char *path = NULL;
    tpc_error_t *err = tpc_job_stop_with_savepoint(job, false, &path);
    double took_s = (double)(tpc__now_us() - t0) / 1e6;
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_TIMEOUT);
    ck_assert_msg(strstr(tpc_error_hint_text(err), "nothing a checkpoint promised is lost"), "%s",
                  tpc_error_message(err));
    ck_assert_ptr_null(path);
    ck_assert_msg(took_s < 2, "the stop took %.1f s", took_s);
    tpc_error_destroy(err);
    pthread_join(th, NULL);
    ck_assert_ptr_null(r.err);
    ck_assert_int_eq(r.result, TPC_JOB_CANCELED);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* A savepoint that cannot be had within stop.timeout.ms: the job is canceled, the stop says so. */
START_TEST(test_stop_timeout_cancels)
{
    char *dir = tpc_test_tmpdir("edge-stop-timeout");
    tpc_test_seq_conf_t src = {.count_default = UNBOUNDED, .per_poll = 1, .sleep_us = 1000};
    sink_conf_t sink = {.first_snapshot_sleep_us = 1500000};
    tpc_job_t *job = edge_job(dir, &src, &sink, "0");
    ck_assert_ptr_null(tpc_job_set(job, "stop.timeout.ms", "200"));
    runner_t r = {.job = job};
    pthread_t th;
    pthread_create(&th, NULL, runner, &r);
    tpc__sleep_us(50000);
    uint64_t t0 = tpc__now_us();
    char *path = NULL;
    tpc_error_t *err = tpc_job_stop_with_savepoint(job, false, &path);
    double took_s = (double)(tpc__now_us() - t0) / 1e6;
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_TIMEOUT);
    ck_assert_msg(strstr(tpc_error_message(err), "stop.timeout.ms 200"), "%s",
                  tpc_error_message(err));
    ck_assert_ptr_null(path);
    /* bounded by the operator's own snapshot, which a cancel cannot cut short */
    ck_assert_msg(took_s < 3, "the stop took %.1f s", took_s);
    tpc_error_destroy(err);
    pthread_join(th, NULL);
    ck_assert_int_eq(r.result, TPC_JOB_CANCELED);
    tpc_error_destroy(r.err);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* A stop that meets a job finishing by itself either returns a savepoint that exists (and the
 * job ends STOPPED) or fails (and the job ends FINISHED): never success without a savepoint. */
static void assert_stop_consistent(const tpc_test_stopper_t *s, tpc_job_result_t result)
{
    if (s->err) {
        ck_assert_int_eq(result, TPC_JOB_FINISHED);
        ck_assert_ptr_null(s->path);
    } else {
        ck_assert_int_eq(result, TPC_JOB_STOPPED);
        assert_savepoint(s);
    }
}

typedef struct {
    tpc_test_stopper_t stop;
    pthread_t th;
    bool started;
} late_stop_t;

static void start_late_stop(late_stop_t *l)
{
    l->started = true;
    pthread_create(&l->th, NULL, tpc_test_stopper_main, &l->stop);
    tpc__sleep_us(100000); /* the request reaches the coordinator meanwhile */
}

static void stop_in_final_snapshot(sink_conf_t *sink)
{
    start_late_stop(sink->opaque);
}

/* Drain: the stop arrives while the job's own final checkpoint is in flight (the sink's snapshot
 * for it is running). That checkpoint must become the savepoint. */
START_TEST(test_stop_with_drain_during_final_checkpoint)
{
    char *dir = tpc_test_tmpdir("edge-final-inflight");
    tpc_test_seq_conf_t src = {.count_default = 1000, .per_poll = 100};
    late_stop_t late = {.stop = {.drain = true}};
    sink_conf_t sink = {.after_finish_snapshot = stop_in_final_snapshot, .opaque = &late};
    tpc_job_t *job = edge_job(dir, &src, &sink, "0");
    late.stop.job = job;
    tpc_job_result_t result = TPC_JOB_FINISHED;
    tpc_error_t *err = tpc_job_run(job, &result);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    ck_assert(late.started);
    pthread_join(late.th, NULL);
    assert_stop_consistent(&late.stop, result);
    ck_assert_int_eq(result, TPC_JOB_STOPPED);
    free(late.stop.path);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

static void stop_on_completion(void *opaque, uint64_t id, bool completed, uint64_t duration_us,
                               const char *reason)
{
    (void)id;
    (void)duration_us;
    (void)reason;
    late_stop_t *l = opaque;
    if (completed && !l->started)
        start_late_stop(l);
}

/* Drain: the stop arrives once the job's own final checkpoint completed, before its subtasks
 * closed. There is no savepoint to give: the stop must fail. */
START_TEST(test_stop_with_drain_after_final_checkpoint)
{
    char *dir = tpc_test_tmpdir("edge-final-done");
    tpc_test_seq_conf_t src = {.count_default = 1000, .per_poll = 100};
    late_stop_t late = {.stop = {.drain = true}};
    sink_conf_t sink = {0};
    tpc_job_t *job = edge_job(dir, &src, &sink, "0");
    late.stop.job = job;
    tpc_job_set_checkpoint_callback(job, stop_on_completion, &late);
    tpc_job_result_t result = TPC_JOB_STOPPED;
    tpc_error_t *err = tpc_job_run(job, &result);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    ck_assert(late.started);
    pthread_join(late.th, NULL);
    assert_stop_consistent(&late.stop, result);
    ck_assert_int_eq(atomic_load(&sink.closes), 1);
    tpc_error_destroy(late.stop.err);
    free(late.stop.path);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* A cancel that comes before tpc_job_run() cancels that run before anything opens, and is used
 * up by it: the next run of the same job runs to its end. */
START_TEST(test_cancel_before_run)
{
    char *dir = tpc_test_tmpdir("edge-cancel-early");
    tpc_test_seq_conf_t src = {.count_default = 1000, .per_poll = 100};
    sink_conf_t sink = {0};
    tpc_job_t *job = edge_job(dir, &src, &sink, "10");
    tpc_job_cancel(job);
    tpc_job_result_t result = TPC_JOB_FINISHED;
    tpc_error_t *err = tpc_job_run(job, &result);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    ck_assert_int_eq(result, TPC_JOB_CANCELED);
    ck_assert_int_eq(atomic_load(&src.opens), 0);
    ck_assert_int_eq(atomic_load(&sink.closes), 0);

    err = tpc_job_run(job, &result);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    ck_assert_int_eq(result, TPC_JOB_FINISHED);
    ck_assert_int_eq(atomic_load(&sink.finishes), 1);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

typedef struct {
    tpc_job_t *job;
    pthread_t th;
} canceler_t;

/* Cancel as soon as the job counts its first restart, i.e. during the pause before it. */
static void *cancel_in_restart_pause(void *arg)
{
    canceler_t *c = arg;
    tpc_job_stats_t st;
    do {
        tpc__sleep_us(1000);
        tpc_job_get_stats(c->job, &st);
    } while (st.restarts == 0);
    tpc_job_cancel(c->job);
    return NULL;
}

/* A cancel during a long restart.delay.ms ends the pause at once instead of waiting it out. */
START_TEST(test_cancel_during_restart_pause)
{
    char *dir = tpc_test_tmpdir("edge-cancel-pause");
    tpc_test_seq_conf_t src = {.count_default = 100000, .per_poll = 100, .fail_at = 500};
    sink_conf_t sink = {0};
    tpc_job_t *job = edge_job(dir, &src, &sink, "10");
    ck_assert_ptr_null(tpc_job_set(job, "restart.delay.ms", "600000"));
    canceler_t c = {.job = job};
    ck_assert_int_eq(pthread_create(&c.th, NULL, cancel_in_restart_pause, &c), 0);
    double started = tpc_test_now_s();
    tpc_job_result_t result = TPC_JOB_FINISHED;
    tpc_error_t *err = tpc_job_run(job, &result);
    double took = tpc_test_now_s() - started;
    pthread_join(c.th, NULL);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    ck_assert_int_eq(result, TPC_JOB_CANCELED);
    ck_assert_msg(took < 10.0, "tpc_job_run() returned %.1f s after the start", took);
    ck_assert_int_eq(atomic_load(&src.opens), 1); /* no second attempt */
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("runtime_edge_cases");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, test_stop_without_drain_under_backpressure);
    tcase_add_test(tc, test_stop_with_drain_survives_restart);
    tcase_add_test(tc, test_stop_without_drain_survives_restart);
    tcase_add_test(tc, test_stop_without_drain_savepoint_aborted);
    tcase_add_test(tc, test_stop_with_drain_during_final_checkpoint);
    tcase_add_test(tc, test_stop_with_drain_after_final_checkpoint);
    tcase_add_test(tc, test_cancel_before_run);
    tcase_add_test(tc, test_cancel_during_restart_pause);
    tcase_add_test(tc, test_stop_during_restart_pause);
    tcase_add_test(tc, test_stop_timeout_cancels);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
