/*
 * Failure and recovery: a failed task or a failed checkpoint write restarts the job from the
 * latest completed checkpoint with state exactly once; a new job on the same checkpoint.dir
 * resumes; vertices that had finished are not run again; graphs that contradict the finished
 * state are refused; stop with savepoint with and without drain.
 */
#include "runtime_internal.h"
#include "tpc_test_job.h"
#include "tpc_test_ops.h"
#include "tpc_test_sink.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define N 20000

static void assert_exact(tpc_test_count_t *cnt, int src, uint64_t n)
{
    uint64_t count, sum;
    tpc_test_count_total(cnt, src, &count, &sum);
    ck_assert_msg(count == n, "source %d: counted %llu records, expected %llu", src,
                  (unsigned long long)count, (unsigned long long)n);
    ck_assert_uint_eq(sum, n * (n - 1) / 2);
}

/* source(2) -hash-> count(2) */
static tpc_job_t *count_job(const char *dir, tpc_test_seq_conf_t *src, tpc_test_count_t *cnt,
                            int count_par)
{
    tpc_job_t *job = tpc_job_new("recovery");
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.dir", dir));
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.interval.ms", "10"));
    ck_assert_ptr_null(tpc_job_set(job, "restart.delay.ms", "10"));
    int s, c;
    ck_assert_ptr_null(tpc_job_add_vertex(job, "source", 2, &tpc_test_seq_source_ops, src, &s));
    ck_assert_ptr_null(tpc_job_add_vertex(job, "count", count_par, &tpc_test_count_ops, cnt, &c));
    ck_assert_ptr_null(tpc_job_connect(job, s, c, TPC_EDGE_HASH));
    return job;
}

START_TEST(test_task_failure_restarts_exactly_once)
{
    char *dir = tpc_test_tmpdir("rec-fail");
    tpc_test_seq_conf_t src = {
        .count_default = N, .per_poll = 50, .sleep_us = 200, .fail_at = N / 2, .fail_subtask = 1};
    tpc_test_count_t cnt;
    tpc_test_count_init(&cnt);
    tpc_job_t *job = count_job(dir, &src, &cnt, 2);
    tpc_error_t *err = tpc_job_run(job, NULL);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    tpc_job_stats_t st;
    tpc_job_get_stats(job, &st);
    ck_assert_uint_eq(st.restarts, 1);
    ck_assert_uint_gt(st.checkpoints_completed, 2);
    assert_exact(&cnt, 0, N);
    assert_exact(&cnt, 1, N);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

static int fault_calls;
static tpc_error_t *fail_third_write(uint64_t id)
{
    (void)id;
    if (++fault_calls == 3)
        return tpc_error_new(TPC_ERR_IO, 0, "injected write failure");
    return NULL;
}

START_TEST(test_checkpoint_write_failure_restarts)
{
    char *dir = tpc_test_tmpdir("rec-write");
    tpc_test_seq_conf_t src = {.count_default = N, .per_poll = 50, .sleep_us = 200};
    tpc_test_count_t cnt;
    tpc_test_count_init(&cnt);
    tpc_job_t *job = count_job(dir, &src, &cnt, 1);
    fault_calls = 0;
    tpc__checkpoint_write_fault = fail_third_write;
    tpc_error_t *err = tpc_job_run(job, NULL);
    tpc__checkpoint_write_fault = NULL;
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    tpc_job_stats_t st;
    tpc_job_get_stats(job, &st);
    ck_assert_uint_eq(st.restarts, 1);
    assert_exact(&cnt, 0, N);
    assert_exact(&cnt, 1, N);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

START_TEST(test_restart_limit_reports_cause)
{
    char *dir = tpc_test_tmpdir("rec-limit");
    tpc_test_seq_conf_t src = {.count_default = N, .per_poll = 50, .fail_at = 100};
    tpc_test_count_t cnt;
    tpc_test_count_init(&cnt);
    tpc_job_t *job = count_job(dir, &src, &cnt, 1);
    ck_assert_ptr_null(tpc_job_set(job, "restart.attempts", "0"));
    tpc_error_t *err = tpc_job_run(job, NULL);
    ck_assert_ptr_nonnull(err);
    ck_assert_ptr_nonnull(strstr(tpc_error_message(err), "injected failure"));
    ck_assert_ptr_nonnull(strstr(tpc_error_message(err), "\"source\"[0]"));
    ck_assert_ptr_nonnull(tpc_error_hint_text(err));
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* ---- stop with savepoint from another thread ---------------------------------------------- */

static tpc_job_result_t run_with_stopper(tpc_job_t *job, tpc_test_stopper_t *s)
{
    tpc_job_result_t result = TPC_JOB_FINISHED;
    tpc_error_t *err = tpc_test_job_run_stopped(job, s, &result);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    ck_assert_msg(s->err == NULL, "stop: %s", tpc_error_message(s->err));
    ck_assert_ptr_nonnull(s->path);
    return result;
}

START_TEST(test_stop_without_drain_then_resume)
{
    char *dir = tpc_test_tmpdir("rec-resume");
    /* Slow enough (at least 0.6 s per subtask) that the job is still running when the stop comes
     * after 5 checkpoints, however loaded the machine. */
    tpc_test_seq_conf_t src = {.count_default = N, .per_poll = 10, .sleep_us = 300};
    tpc_test_count_t cnt;
    tpc_test_count_init(&cnt);
    tpc_job_t *job = count_job(dir, &src, &cnt, 2);
    tpc_test_stopper_t s = {.after_checkpoints = 5, .delay_us = 20000};
    ck_assert_int_eq(run_with_stopper(job, &s), TPC_JOB_STOPPED);
    ck_assert_int_eq(cnt.finishes, 0); /* no drain: finish() never ran */
    ck_assert_ptr_nonnull(strstr(s.path, "savepoint-"));
    free(s.path);
    tpc_job_destroy(job);

    /* A new job on the same directory resumes where the savepoint left off. */
    job = count_job(dir, &src, &cnt, 2);
    tpc_error_t *err = tpc_job_run(job, NULL);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    assert_exact(&cnt, 0, N);
    assert_exact(&cnt, 1, N);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

START_TEST(test_stop_with_drain)
{
    char *dir = tpc_test_tmpdir("rec-drain");
    tpc_test_seq_conf_t src = {.count_default = 1000000, .per_poll = 10, .sleep_us = 500};
    tpc_test_rec_t rec;
    tpc_test_rec_init(&rec, 1000000);
    tpc_job_t *job = tpc_job_new("drain");
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.dir", dir));
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.interval.ms", "20"));
    int a, k;
    ck_assert_ptr_null(tpc_job_add_vertex(job, "source", 2, &tpc_test_seq_source_ops, &src, &a));
    ck_assert_ptr_null(tpc_job_add_vertex(job, "sink", 1, &tpc_test_rec_sink_ops, &rec, &k));
    ck_assert_ptr_null(tpc_job_connect(job, a, k, TPC_EDGE_REBALANCE));
    tpc_test_stopper_t s = {.after_checkpoints = 3, .drain = true, .delay_us = 20000};
    ck_assert_int_eq(run_with_stopper(job, &s), TPC_JOB_STOPPED);
    ck_assert_int_eq(rec.finishes, 1);
    ck_assert(rec.snapshot_after_finish);
    ck_assert_uint_ne(rec.first_notify_after_finish, 0);
    ck_assert_uint_eq(rec.duplicates, 0);
    ck_assert_uint_lt(rec.records, 2000000);
    /* The savepoint is the last completed checkpoint and is a valid file. */
    tpc__checkpoint_t ck;
    tpc_error_t *err = tpc__checkpoint_read(s.path, &ck);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    ck_assert(ck.savepoint);
    ck_assert_uint_eq(ck.id, rec.notifies[rec.nnotifies - 1]);
    tpc__checkpoint_free(&ck);
    free(s.path);
    tpc_job_destroy(job);
    tpc_test_rec_free(&rec);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* ---- finished vertices on restore --------------------------------------------------------- */

/* short(1) -> count(1) <- long(1): `short` finishes and closes early. */
static tpc_job_t *two_inputs_job(const char *dir, tpc_test_seq_conf_t *sh, tpc_test_seq_conf_t *lg,
                                 tpc_test_count_t *cnt, int long_par)
{
    tpc_job_t *job = tpc_job_new("finished-vertices");
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.dir", dir));
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.interval.ms", "10"));
    int a, b, c;
    ck_assert_ptr_null(tpc_job_add_vertex(job, "short", 1, &tpc_test_seq_source_ops, sh, &a));
    ck_assert_ptr_null(tpc_job_add_vertex(job, "long", long_par, &tpc_test_seq_source_ops, lg, &b));
    ck_assert_ptr_null(tpc_job_add_vertex(job, "count", 1, &tpc_test_count_ops, cnt, &c));
    ck_assert_ptr_null(tpc_job_connect(job, a, c, TPC_EDGE_REBALANCE));
    ck_assert_ptr_null(tpc_job_connect(job, b, c, TPC_EDGE_REBALANCE));
    return job;
}

/* Run two_inputs_job() until @vertex has a finished subtask and 3 more checkpoints completed,
 * then stop it with a savepoint, without drain. */
static void stop_two_inputs(const char *dir, tpc_test_seq_conf_t *sh, tpc_test_seq_conf_t *lg,
                            tpc_test_count_t *cnt, int long_par, int vertex)
{
    tpc_job_t *job = two_inputs_job(dir, sh, lg, cnt, long_par);
    tpc_test_stopper_t s = {
        .after_checkpoints = 3, .vertex = vertex, .finished = 1, .delay_us = 20000};
    run_with_stopper(job, &s);
    free(s.path);
    tpc_job_destroy(job);
}

START_TEST(test_finished_vertex_not_run_again)
{
    char *dir = tpc_test_tmpdir("rec-skip");
    tpc_test_seq_conf_t sh = {.count_default = 100};
    tpc_test_seq_conf_t lg = {.count_default = N, .per_poll = 20, .sleep_us = 500};
    tpc_test_count_t cnt;
    tpc_test_count_init(&cnt);
    stop_two_inputs(dir, &sh, &lg, &cnt, 1, 0);
    /* Give `short` time to close after the checkpoint following its finish. */
    tpc__checkpoint_file_t *files;
    size_t n;
    ck_assert_ptr_null(tpc__checkpoint_list(dir, &files, &n));
    tpc__checkpoint_t ck;
    ck_assert_ptr_null(tpc__checkpoint_read(files[0].path, &ck));
    bool short_closed = tpc__vertex_fully_closed(&ck.vertices[0]);
    tpc__checkpoint_free(&ck);
    tpc__checkpoint_files_free(files, n);
    ck_assert_msg(short_closed, "the savepoint does not record \"short\" as finished");

    int opens_before = atomic_load(&sh.opens);
    tpc_job_t *job = two_inputs_job(dir, &sh, &lg, &cnt, 1);
    tpc_error_t *err = tpc_job_run(job, NULL);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    ck_assert_int_eq(atomic_load(&sh.opens), opens_before); /* not opened again */
    /* Both sources are subtask 0, so their records share source index 0. */
    uint64_t count, sum;
    tpc_test_count_total(&cnt, 0, &count, &sum);
    ck_assert_uint_eq(count, N + 100);
    ck_assert_uint_eq(sum, (uint64_t)N * (N - 1) / 2 + 100 * 99 / 2);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

START_TEST(test_graph_contradicting_finished_state_refused)
{
    char *dir = tpc_test_tmpdir("rec-graph");
    tpc_test_seq_conf_t sh = {.count_default = 100};
    tpc_test_seq_conf_t lg = {.count_default = N, .per_poll = 20, .sleep_us = 500};
    tpc_test_count_t cnt;
    tpc_test_count_init(&cnt);
    stop_two_inputs(dir, &sh, &lg, &cnt, 1, 0);

    /* "short" is fully finished; giving it an input that is not is a contradiction. */
    tpc_job_t *job = tpc_job_new("finished-vertices");
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.dir", dir));
    int a, b, c, m;
    ck_assert_ptr_null(tpc_job_add_vertex(job, "feeder", 1, &tpc_test_seq_source_ops, &lg, &m));
    ck_assert_ptr_null(tpc_job_add_vertex(job, "short", 1, &tpc_test_identity_ops, NULL, &a));
    ck_assert_ptr_null(tpc_job_add_vertex(job, "long", 1, &tpc_test_seq_source_ops, &lg, &b));
    ck_assert_ptr_null(tpc_job_add_vertex(job, "count", 1, &tpc_test_count_ops, &cnt, &c));
    ck_assert_ptr_null(tpc_job_connect(job, m, a, TPC_EDGE_FORWARD));
    ck_assert_ptr_null(tpc_job_connect(job, a, c, TPC_EDGE_REBALANCE));
    ck_assert_ptr_null(tpc_job_connect(job, b, c, TPC_EDGE_REBALANCE));
    tpc_error_t *err = tpc_job_run(job, NULL);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    ck_assert_msg(strstr(tpc_error_message(err), "\"short\" finished in the checkpoint but its "
                                                 "input \"feeder\" did not"),
                  "%s", tpc_error_message(err));
    tpc_error_destroy(err);
    tpc_job_destroy(job);

    /* A vertex that is not in the checkpoint's graph any more is refused too. */
    job = tpc_job_new("finished-vertices");
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.dir", dir));
    ck_assert_ptr_null(tpc_job_add_vertex(job, "long", 1, &tpc_test_seq_source_ops, &lg, &b));
    ck_assert_ptr_null(tpc_job_add_vertex(job, "count", 1, &tpc_test_count_ops, &cnt, &c));
    ck_assert_ptr_null(tpc_job_connect(job, b, c, TPC_EDGE_REBALANCE));
    err = tpc_job_run(job, NULL);
    ck_assert_ptr_nonnull(err);
    ck_assert_ptr_nonnull(strstr(tpc_error_message(err), "\"short\""));
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

START_TEST(test_partly_finished_parallelism_change_refused)
{
    char *dir = tpc_test_tmpdir("rec-par");
    tpc_test_seq_conf_t sh = {.count_default = N, .per_poll = 20, .sleep_us = 500};
    tpc_test_seq_conf_t lg = {.count_default = N, .per_poll = 20, .sleep_us = 500};
    lg.count[0] = 50; /* subtask 0 of "long" ends early: the vertex is partly finished */
    tpc_test_count_t cnt;
    tpc_test_count_init(&cnt);
    stop_two_inputs(dir, &sh, &lg, &cnt, 2, 1);
    tpc_job_t *job = two_inputs_job(dir, &sh, &lg, &cnt, 3);
    tpc_error_t *err = tpc_job_run(job, NULL);
    ck_assert_ptr_nonnull(err);
    ck_assert_msg(strstr(tpc_error_message(err), "\"long\" is partly finished"), "%s",
                  tpc_error_message(err));
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("recovery");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_task_failure_restarts_exactly_once);
    tcase_add_test(tc, test_checkpoint_write_failure_restarts);
    tcase_add_test(tc, test_restart_limit_reports_cause);
    tcase_add_test(tc, test_stop_without_drain_then_resume);
    tcase_add_test(tc, test_stop_with_drain);
    tcase_add_test(tc, test_finished_vertex_not_run_again);
    tcase_add_test(tc, test_graph_contradicting_finished_state_refused);
    tcase_add_test(tc, test_partly_finished_parallelism_change_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
