/*
 * The two-phase-commit sink hosted by the real runtime: jobs from the sequence source into a sink
 * over the recording connector. Whatever the timing, every record becomes visible exactly once,
 * nothing is begun after finish(), the final checkpoint commits the last transaction, a checkpoint
 * aborted after finish() leaves it pending for the next one, and a failure at any connector call
 * is recovered by the restart with nothing lost or doubled.
 */
#include "tpc_test_ops.h"
#include "tpc_test_txn_conn.h"
#include "tpc_test_txn_drive.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t completed[1024], aborted[1024];
    int ncompleted, naborted;
    /* Of the aborted: those triggered just as a subtask finished ("... before taking part"), which
     * the runtime aborts without counting them as failures (docs/architecture.md). */
    int nraced;
} ckpt_log_t;

static void on_checkpoint(void *opaque, uint64_t id, bool completed, uint64_t us,
                          const char *reason)
{
    (void)us;
    ckpt_log_t *l = opaque;
    if (completed && l->ncompleted < 1024)
        l->completed[l->ncompleted++] = id;
    else if (!completed && l->naborted < 1024)
        l->aborted[l->naborted++] = id;
    if (!completed && reason && strstr(reason, "before taking part"))
        l->nraced++;
}

typedef struct {
    tpc_test_seq_conf_t src;
    int src_parallelism, sink_parallelism;
    bool forward;             /* source subtask i -> sink subtask i instead of round robin */
    const char *settings[16]; /* key, value, ..., NULL */
    tpc_job_result_t result;
    tpc_job_stats_t stats;
    ckpt_log_t log;
    char errors[4096]; /* error log lines */
    size_t nerrors;
} run_t;

/* Injected failures make warnings by design: keep errors for assertions, show all when asked. */
static void quiet_log(void *opaque, tpc_log_level_t level, const char *message)
{
    run_t *run = opaque;
    if (level == TPC_LOG_ERROR && run->nerrors < sizeof run->errors - 1) {
        int n = snprintf(run->errors + run->nerrors, sizeof run->errors - run->nerrors, "%s\n",
                         message);
        if (n > 0)
            run->nerrors += (size_t)n;
    }
    if (getenv("TWOPC_TEST_VERBOSE"))
        fprintf(stderr, "%d: %s\n", (int)level, message);
}

static tpc_error_t *run_job(run_t *run, tpc_txn_sink_t *sink)
{
    char *dir = tpc_test_tmpdir("txn-job");
    tpc_job_t *job = tpc_job_new("txn-job");
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.dir", dir));
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.interval.ms", "10"));
    ck_assert_ptr_null(tpc_job_set(job, "restart.delay.ms", "5"));
    for (int i = 0; run->settings[i]; i += 2)
        ck_assert_ptr_null(tpc_job_set(job, run->settings[i], run->settings[i + 1]));
    tpc_job_set_checkpoint_callback(job, on_checkpoint, &run->log);
    tpc_job_set_logger(job, quiet_log, run, TPC_LOG_DEBUG);
    int s, k;
    ck_assert_ptr_null(tpc_job_add_vertex(job, "source",
                                          run->src_parallelism ? run->src_parallelism : 1,
                                          &tpc_test_seq_source_ops, &run->src, &s));
    ck_assert_ptr_null(tpc_txn_sink_add_to_job(
        sink, job, "sink", run->sink_parallelism ? run->sink_parallelism : 1, &k));
    ck_assert_ptr_null(
        tpc_job_connect(job, s, k, run->forward ? TPC_EDGE_FORWARD : TPC_EDGE_REBALANCE));
    tpc_error_t *err = tpc_job_run(job, &run->result);
    tpc_job_get_stats(job, &run->stats);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
    return err;
}

/* Properties of one subtask's calls that hold in every run. */
static void check_trace(tpc_test_txn_rec_t *rec, int subtask)
{
    char *all = tpc_test_txn_trace(rec, subtask);
    /* The last attempt's calls: earlier ones failed on purpose. */
    char *trace = all;
    for (char *p = all; (p = strstr(p, "open")) != NULL; p++)
        trace = p;
    const char *flush = strstr(trace, "flush:");
    ck_assert_msg(flush != NULL, "subtask %d never finished: %s", subtask, trace);
    ck_assert_msg(strstr(flush, "begin:") == NULL, "begin after finish: %s", flush);
    const char *last_pre = NULL;
    for (const char *p = trace; (p = strstr(p, "pre_commit:")) != NULL; p++)
        last_pre = p;
    ck_assert_ptr_nonnull(last_pre);
    unsigned long long txn = strtoull(last_pre + strlen("pre_commit:"), NULL, 10);
    char want[64];
    snprintf(want, sizeof want, " commit:%llu close", txn);
    size_t tl = strlen(trace), wl = strlen(want);
    ck_assert_msg(tl >= wl && strcmp(trace + tl - wl, want) == 0,
                  "the last transaction was not committed at the end: %s", trace);
    free(all);
}

START_TEST(test_job_exactly_once)
{
    tpc_test_txn_rec_t rec;
    tpc_test_txn_rec_init(&rec, 8000);
    tpc_txn_sink_t *sink = tpc_test_txn_sink(&rec);
    run_t run = {.src = {.count_default = 8000, .per_poll = 40, .sleep_us = 300}};
    tpc_error_t *err = run_job(&run, sink);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    ck_assert_int_eq(run.result, TPC_JOB_FINISHED);
    ck_assert_int_ge(run.log.ncompleted, 3);
    ck_assert_uint_eq(tpc_test_txn_missing(&rec, 0, 8000), 0);
    ck_assert_uint_eq(rec.visible_records, 8000);
    ck_assert_msg(rec.violations == 0, "%s", rec.first_violation);
    check_trace(&rec, 0);
    char *trace = tpc_test_txn_trace(&rec, 0);
    ck_assert_msg(strncmp(trace, "open lingering@0 begin:1@1 ", 27) == 0, "%s", trace);
    free(trace);
    tpc_txn_sink_stats_t st;
    tpc_txn_sink_get_stats(sink, &st);
    ck_assert_uint_eq(st.commits, st.pre_commits);
    ck_assert_uint_eq(st.pending, 0);
    ck_assert_uint_eq(st.records, 8000);
    tpc_txn_sink_destroy(sink);
    tpc_test_txn_rec_free(&rec);
}
END_TEST

START_TEST(test_job_parallel_sink)
{
    tpc_test_txn_rec_t rec;
    tpc_test_txn_rec_init(&rec, 5000);
    tpc_txn_sink_t *sink = tpc_test_txn_sink(&rec);
    run_t run = {.src = {.count_default = 5000, .per_poll = 50, .sleep_us = 200},
                 .src_parallelism = 2,
                 .sink_parallelism = 3};
    tpc_error_t *err = run_job(&run, sink);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    for (int sub = 0; sub < 2; sub++)
        ck_assert_uint_eq(tpc_test_txn_missing(&rec, sub, 5000), 0);
    ck_assert_msg(rec.violations == 0, "%s", rec.first_violation);
    for (int sub = 0; sub < 3; sub++)
        check_trace(&rec, sub);
    tpc_txn_sink_destroy(sink);
    tpc_test_txn_rec_free(&rec);
}
END_TEST

/* FLINK-2491 with sinks: Source(2) -> exactly-once sink(2), forward, one source ends early. Its
 * sink subtask finishes and closes; the other keeps running, and checkpoints must keep completing
 * (and committing its transactions) while the sink vertex is partly closed, not only at the end. */
START_TEST(test_job_partly_finished_sink_keeps_checkpointing)
{
    tpc_test_txn_rec_t rec;
    tpc_test_txn_rec_init(&rec, 20000);
    tpc_txn_sink_t *sink = tpc_test_txn_sink(&rec);
    run_t run = {.src = {.count = {200, 20000}, .per_poll = 20, .sleep_us = 300},
                 .src_parallelism = 2,
                 .sink_parallelism = 2,
                 .forward = true};
    tpc_error_t *err = run_job(&run, sink);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    ck_assert_int_eq(run.result, TPC_JOB_FINISHED);
    ck_assert_uint_eq(tpc_test_txn_missing(&rec, 0, 200), 0);
    ck_assert_uint_eq(tpc_test_txn_missing(&rec, 1, 20000), 0);
    ck_assert_msg(rec.violations == 0, "%s", rec.first_violation);
    ck_assert_int_ge(run.log.ncompleted, 10);
    /* No checkpoint fails while the sink vertex is partly finished. The only aborts allowed are
     * those of a checkpoint triggered the moment a subtask finished, at most one per subtask. */
    ck_assert_msg(run.log.naborted == run.log.nraced && run.log.nraced <= 4,
                  "%d checkpoints aborted (%d as a subtask finished), %d completed",
                  run.log.naborted, run.log.nraced, run.log.ncompleted);
    check_trace(&rec, 0);
    check_trace(&rec, 1);
    tpc_txn_sink_stats_t st;
    tpc_txn_sink_get_stats(sink, &st);
    ck_assert_uint_ge(st.commits, 10); /* committed along the way, not all at the end */
    tpc_txn_sink_destroy(sink);
    tpc_test_txn_rec_free(&rec);
}
END_TEST

/* The final checkpoint times out (the sink's last pre-commit is slow), so it is aborted after the
 * sink finished; the transaction stays pending and the next checkpoint commits it. */
START_TEST(test_job_checkpoint_aborted_after_finish)
{
    tpc_test_txn_rec_t rec;
    tpc_test_txn_rec_init(&rec, 2000);
    rec.slow_final_pre_commit_ms = 500;
    tpc_txn_sink_t *sink = tpc_test_txn_sink(&rec);
    run_t run = {.src = {.count_default = 2000, .per_poll = 50, .sleep_us = 200},
                 .settings = {"checkpoint.timeout.ms", "150", NULL}};
    tpc_error_t *err = run_job(&run, sink);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    ck_assert_int_eq(run.result, TPC_JOB_FINISHED);
    char *trace = tpc_test_txn_trace(&rec, 0);
    const char *last = strstr(trace, "flush:");
    ck_assert_ptr_nonnull(last);
    unsigned long long txn, ckpt;
    ck_assert_msg(sscanf(last, "flush:%llu", &txn) == 1, "%s", last);
    char want[64];
    snprintf(want, sizeof want, "pre_commit:%llu@", txn);
    const char *pre = strstr(last, want);
    ck_assert_msg(pre != NULL, "%s", last);
    ckpt = strtoull(pre + strlen(want), NULL, 10);
    bool aborted = false;
    for (int i = 0; i < run.log.naborted; i++)
        aborted |= run.log.aborted[i] == ckpt;
    ck_assert_msg(aborted, "checkpoint %llu of the last pre-commit was not aborted: %s", ckpt,
                  trace);
    ck_assert_uint_gt(run.log.completed[run.log.ncompleted - 1], ckpt);
    free(trace);
    check_trace(&rec, 0);
    ck_assert_uint_eq(tpc_test_txn_missing(&rec, 0, 2000), 0);
    ck_assert_msg(rec.violations == 0, "%s", rec.first_violation);
    tpc_txn_sink_destroy(sink);
    tpc_test_txn_rec_free(&rec);
}
END_TEST

START_TEST(test_job_commit_retried_without_restart)
{
    tpc_test_txn_rec_t rec;
    tpc_test_txn_rec_init(&rec, 3000);
    tpc_test_txn_fail(&rec, TPC_TEST_TXN_COMMIT, 1, 3, true);
    tpc_txn_sink_t *sink = tpc_test_txn_sink(&rec);
    run_t run = {.src = {.count_default = 3000, .per_poll = 50, .sleep_us = 300}};
    tpc_error_t *err = run_job(&run, sink);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    ck_assert_uint_eq(run.stats.restarts, 0);
    tpc_txn_sink_stats_t st;
    tpc_txn_sink_get_stats(sink, &st);
    ck_assert_uint_eq(st.commit_retries, 3);
    ck_assert_uint_eq(tpc_test_txn_missing(&rec, 0, 3000), 0);
    ck_assert_msg(rec.violations == 0, "%s", rec.first_violation);
    tpc_txn_sink_destroy(sink);
    tpc_test_txn_rec_free(&rec);
}
END_TEST

/* Without checkpoints after finish() the last transaction could never be committed: an
 * exactly-once sink refuses to start, before any record is written. */
START_TEST(test_job_without_checkpoint_after_finish_is_refused)
{
    tpc_test_txn_rec_t rec;
    tpc_test_txn_rec_init(&rec, 2000);
    tpc_txn_sink_t *sink = tpc_test_txn_sink(&rec);
    run_t run = {.src = {.count_default = 2000, .per_poll = 50, .sleep_us = 200},
                 .settings = {"checkpoint.after-finish", "false", NULL}};
    tpc_error_t *err = run_job(&run, sink);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    ck_assert_msg(strstr(tpc_error_message(err), "is exactly-once but job"), "%s",
                  tpc_error_message(err));
    ck_assert_ptr_nonnull(strstr(tpc_error_hint_text(err), "checkpoint.after-finish"));
    ck_assert_uint_eq(run.stats.restarts, 0);
    ck_assert_uint_eq(rec.visible_records, 0);
    tpc_error_destroy(err);
    tpc_txn_sink_destroy(sink);
    tpc_test_txn_rec_free(&rec);
}
END_TEST

/* One failure (or two) injected into a connector call; the job restarts and ends exactly once. */
static const struct {
    tpc_test_txn_op_t op, op2;
    int call, call2;
} phases[] = {
    {TPC_TEST_TXN_OPEN, TPC_TEST_TXN_NOPS, 1, 0},
    {TPC_TEST_TXN_LINGERING, TPC_TEST_TXN_NOPS, 1, 0},
    {TPC_TEST_TXN_BEGIN, TPC_TEST_TXN_NOPS, 3, 0},
    {TPC_TEST_TXN_WRITE, TPC_TEST_TXN_NOPS, 20, 0},
    {TPC_TEST_TXN_PRE_COMMIT, TPC_TEST_TXN_NOPS, 2, 0},
    {TPC_TEST_TXN_COMMIT, TPC_TEST_TXN_NOPS, 2, 0},
    {TPC_TEST_TXN_FLUSH, TPC_TEST_TXN_NOPS, 1, 0},
    {TPC_TEST_TXN_COMMIT, TPC_TEST_TXN_RECOVER_COMMIT, 2, 1},
    {TPC_TEST_TXN_WRITE, TPC_TEST_TXN_RECOVER_ABORT, 60, 1},
};

START_TEST(test_job_failure_at_each_phase)
{
    tpc_test_txn_rec_t rec;
    tpc_test_txn_rec_init(&rec, 4000);
    tpc_test_txn_fail(&rec, phases[_i].op, phases[_i].call, 1, false);
    if (phases[_i].op2 != TPC_TEST_TXN_NOPS)
        tpc_test_txn_fail(&rec, phases[_i].op2, phases[_i].call2, 1, false);
    tpc_txn_sink_t *sink = tpc_test_txn_sink(&rec);
    run_t run = {.src = {.count_default = 4000, .per_poll = 40, .sleep_us = 300},
                 .settings = {"restart.attempts", "5", NULL}};
    tpc_error_t *err = run_job(&run, sink);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    ck_assert_int_eq(run.result, TPC_JOB_FINISHED);
    ck_assert_uint_ge(run.stats.restarts, 1);
    /* The injected calls happened, and later ones of the same kind succeeded. */
    ck_assert_int_gt(tpc_test_txn_count(&rec, phases[_i].op), phases[_i].call);
    if (phases[_i].op2 != TPC_TEST_TXN_NOPS)
        ck_assert_int_gt(tpc_test_txn_count(&rec, phases[_i].op2), phases[_i].call2);
    ck_assert_uint_eq(tpc_test_txn_missing(&rec, 0, 4000), 0);
    ck_assert_uint_eq(rec.visible_records, 4000);
    ck_assert_msg(rec.violations == 0, "%s", rec.first_violation);
    check_trace(&rec, 0);
    tpc_txn_sink_destroy(sink);
    tpc_test_txn_rec_free(&rec);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("txn_job");
    TCase *tc = tcase_create("job");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_job_exactly_once);
    tcase_add_test(tc, test_job_parallel_sink);
    tcase_add_test(tc, test_job_partly_finished_sink_keeps_checkpointing);
    tcase_add_test(tc, test_job_checkpoint_aborted_after_finish);
    tcase_add_test(tc, test_job_commit_retried_without_restart);
    tcase_add_test(tc, test_job_without_checkpoint_after_finish_is_refused);
    tcase_add_loop_test(tc, test_job_failure_at_each_phase, 0,
                        (int)(sizeof phases / sizeof phases[0]));
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
