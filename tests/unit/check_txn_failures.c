/*
 * What the two-phase-commit sink does when its connector fails at each phase: the error names the
 * transaction and checkpoint, a pending transaction is never dropped or aborted, retriable commit
 * errors are retried until a deadline, an expired transaction on recovery is a failure or a loud
 * data-loss event by configuration, and the sink's own configuration and ops checks speak clearly.
 */
#include "tpc_test_check.h"
#include "tpc_test_txn_conn.h"
#include "tpc_test_txn_drive.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static tpc_test_txn_rec_t rec;
static tpc_txn_sink_t *sink;
static tpc_test_txn_sub_t sub;

static void setup(void)
{
    sink = tpc_test_txn_rec_sink_new(&rec, 4096);
    ck_assert_ptr_nonnull(sink);
}

static void teardown(void)
{
    tpc_test_txn_rec_sink_free(&rec, sink);
}

/* Assert @err is an error whose message contains @part; free it. */
static void expect_error(tpc_error_t *err, const char *part)
{
    ck_assert_msg(err != NULL, "expected an error containing \"%s\"", part);
    ck_assert_msg(strstr(tpc_error_message(err), part) != NULL, "\"%s\" not in \"%s\"", part,
                  tpc_error_message(err));
    tpc_error_destroy(err);
}

static void start(void)
{
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
}

static void no_violation(void)
{
    ck_assert_msg(rec.violations == 0, "contract violated: %s", rec.first_violation);
}

START_TEST(test_commit_failure_keeps_pending_in_order)
{
    start();
    tpc_test_txn_fail(&rec, TPC_TEST_TXN_COMMIT, 1, 1, false);
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 0, 10));
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    tpc_error_t *err = tpc__txn_task_complete(sub.task, 1);
    ck_assert_ptr_nonnull(err);
    ck_assert_str_eq(tpc_error_message(err), "could not commit transaction \"rec-1\" of "
                                             "checkpoint 1: injected failure in commit");
    ck_assert_ptr_nonnull(tpc_error_hint_text(err));
    tpc_error_destroy(err);
    tpc_txn_sink_stats_t st;
    tpc_txn_sink_get_stats(sink, &st);
    ck_assert_uint_eq(st.pending, 1);
    /* Still pending, still in the state, committed first by the next notification. */
    tpc_test_txn_state_t state = {.count = 0};
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 10, 10));
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 2, &state));
    ck_assert_uint_eq(state.count, 3);
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 2));
    tpc_test_txn_sub_close(&sub);
    char *trace = tpc_test_txn_trace(&rec, -1);
    ck_assert_ptr_nonnull(strstr(trace, "begin:3@3 commit:1 commit:2 close"));
    free(trace);
    ck_assert_uint_eq(tpc_test_txn_missing(&rec, 0, 20), 0);
    no_violation();
    tpc_test_txn_state_free(&state);
}
END_TEST

START_TEST(test_retriable_commit_is_retried)
{
    start();
    tpc_test_txn_fail(&rec, TPC_TEST_TXN_COMMIT, 1, 3, true);
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 0, 10));
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1));
    tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_stats_t st;
    tpc_txn_sink_get_stats(sink, &st);
    ck_assert_uint_eq(st.commit_retries, 3);
    ck_assert_uint_eq(st.commits, 1);
    ck_assert_int_eq(tpc_test_txn_count(&rec, TPC_TEST_TXN_COMMIT), 4);
    ck_assert_ptr_nonnull(strstr(sub.log, "retrying in"));
    no_violation();
}
END_TEST

START_TEST(test_retries_stop_at_deadline)
{
    TPC_TEST_OK(tpc_txn_sink_set(sink, "commit.retry.deadline.ms", "40"));
    start();
    tpc_test_txn_fail(&rec, TPC_TEST_TXN_COMMIT, 1, 1000000, true);
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 0, 10));
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tpc_error_t *err = tpc__txn_task_complete(sub.task, 1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    ck_assert_msg(ms < 2000, "retried for %.0f ms", ms);
    ck_assert_ptr_nonnull(err);
    ck_assert_ptr_nonnull(strstr(tpc_error_message(err), "gave up after retrying"));
    ck_assert_ptr_nonnull(strstr(tpc_error_message(err), "\"rec-1\" of checkpoint 1"));
    ck_assert_ptr_nonnull(strstr(tpc_error_hint_text(err), "commit.retry.deadline.ms"));
    tpc_error_destroy(err);
    tpc_test_txn_sub_close(&sub);
    ck_assert_int_eq(tpc_test_txn_count(&rec, TPC_TEST_TXN_ABORT), 0);
    no_violation();
}
END_TEST

START_TEST(test_pre_commit_failure_aborts_only_current)
{
    start();
    tpc_test_txn_fail(&rec, TPC_TEST_TXN_PRE_COMMIT, 2, 1, false);
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 0, 10));
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 10, 10));
    expect_error(tpc_test_txn_sub_snapshot(&sub, 2, NULL),
                 "could not pre-commit transaction \"rec-2\" for checkpoint 2: injected");
    tpc_test_txn_sub_close(&sub);
    char *trace = tpc_test_txn_trace(&rec, -1);
    ck_assert_str_eq(trace, "open lingering@0 begin:1@1 write:1 pre_commit:1@1 begin:2@2 "
                            "write:2 pre_commit:2@2 abort:2 close");
    free(trace);
    no_violation();
}
END_TEST

START_TEST(test_begin_failure_keeps_pending)
{
    start();
    tpc_test_txn_fail(&rec, TPC_TEST_TXN_BEGIN, 2, 1, false);
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 0, 10));
    expect_error(tpc_test_txn_sub_snapshot(&sub, 1, NULL), "could not begin a transaction");
    tpc_test_txn_sub_close(&sub);
    char *trace = tpc_test_txn_trace(&rec, -1);
    ck_assert_str_eq(trace, "open lingering@0 begin:1@1 write:1 pre_commit:1@1 begin:2@2 close");
    free(trace);
    no_violation();
}
END_TEST

START_TEST(test_write_and_flush_failures)
{
    start();
    tpc_test_txn_fail(&rec, TPC_TEST_TXN_WRITE, 2, 1, false);
    tpc_test_txn_fail(&rec, TPC_TEST_TXN_FLUSH, 1, 1, false);
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 0, 10));
    expect_error(tpc_test_txn_sub_write(&sub, 10, 10),
                 "could not write to transaction \"rec-1\": injected failure in write");
    expect_error(tpc__txn_task_finish(sub.task), "could not flush transaction \"rec-1\"");
    tpc_test_txn_sub_close(&sub);
    ck_assert_int_eq(tpc_test_txn_count(&rec, TPC_TEST_TXN_ABORT), 1);
    /* The subtask failed: its records come again after the restart, nothing is lost. */
    ck_assert_ptr_null(strstr(sub.log, "never pre-committed"));
    no_violation();
}
END_TEST

/* Build the state of a checkpoint holding one pending transaction, then close. */
static void pending_state(tpc_test_txn_state_t *state)
{
    start();
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 0, 10));
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, state));
    tpc_test_txn_sub_close(&sub);
}

START_TEST(test_recovery_commit_failure)
{
    tpc_test_txn_state_t state = {.count = 0};
    pending_state(&state);
    tpc_test_txn_fail(&rec, TPC_TEST_TXN_RECOVER_COMMIT, 1, 1, false);
    TPC_TEST_OK(tpc_test_txn_sub_open(&sub, sink, 0, 1, 1));
    expect_error(tpc__txn_task_initialize(sub.task, state.entries, state.count),
                 "could not commit transaction \"rec-1\" of checkpoint 1 during recovery");
    tpc_test_txn_sub_close(&sub);
    ck_assert_int_eq(tpc_test_txn_count(&rec, TPC_TEST_TXN_BEGIN), 2); /* none after recovery */
    ck_assert_int_eq(tpc_test_txn_count(&rec, TPC_TEST_TXN_LINGERING), 1);
    no_violation();
    tpc_test_txn_state_free(&state);
}
END_TEST

START_TEST(test_recovery_abort_and_lingering_failures)
{
    tpc_test_txn_state_t state = {.count = 0};
    pending_state(&state);
    tpc_test_txn_fail(&rec, TPC_TEST_TXN_RECOVER_ABORT, 1, 1, false);
    TPC_TEST_OK(tpc_test_txn_sub_open(&sub, sink, 0, 1, 1));
    expect_error(tpc__txn_task_initialize(sub.task, state.entries, state.count),
                 "could not abort transaction \"rec-2\" restored from checkpoint 1");
    tpc_test_txn_sub_close(&sub);
    tpc_test_txn_fail(&rec, TPC_TEST_TXN_LINGERING, 2, 1, false);
    TPC_TEST_OK(tpc_test_txn_sub_open(&sub, sink, 0, 1, 1));
    expect_error(tpc__txn_task_initialize(sub.task, state.entries, state.count),
                 "could not abort lingering transactions of sink \"sink\"");
    tpc_test_txn_sub_close(&sub);
    no_violation();
    tpc_test_txn_state_free(&state);
}
END_TEST

static void expire_and_restore(tpc_test_txn_state_t *state)
{
    TPC_TEST_OK(tpc_txn_sink_set(sink, "transaction.timeout.ms", "1"));
    pending_state(state);
    tpc_test_txn_expire(&rec, 1);
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
    TPC_TEST_OK(tpc_test_txn_sub_open(&sub, sink, 0, 1, 1));
}

START_TEST(test_expired_on_recovery_fails_by_default)
{
    tpc_test_txn_state_t state = {.count = 0};
    expire_and_restore(&state);
    tpc_error_t *err = tpc__txn_task_initialize(sub.task, state.entries, state.count);
    ck_assert_ptr_nonnull(err);
    ck_assert_ptr_nonnull(strstr(tpc_error_hint_text(err), "recovery.expired=log"));
    ck_assert_ptr_nonnull(strstr(tpc_error_message(err), "transaction 1 expired"));
    tpc_error_destroy(err);
    tpc_test_txn_sub_close(&sub);
    tpc_test_txn_state_free(&state);
}
END_TEST

START_TEST(test_expired_on_recovery_can_be_logged)
{
    TPC_TEST_OK(tpc_txn_sink_set(sink, "recovery.expired", "log"));
    tpc_test_txn_state_t state = {.count = 0};
    expire_and_restore(&state);
    TPC_TEST_OK(tpc__txn_task_initialize(sub.task, state.entries, state.count));
    tpc_test_txn_sub_close(&sub);
    ck_assert_ptr_nonnull(strstr(sub.log, "error: data loss: transaction \"rec-1\""));
    tpc_txn_sink_stats_t st;
    tpc_txn_sink_get_stats(sink, &st);
    ck_assert_uint_eq(st.expired_lost, 1);
    ck_assert_int_eq(tpc_test_txn_count(&rec, TPC_TEST_TXN_BEGIN), 3);
    tpc_test_txn_state_free(&state);
}
END_TEST

START_TEST(test_warns_before_timeout)
{
    TPC_TEST_OK(tpc_txn_sink_set(sink, "transaction.timeout.ms", "30"));
    TPC_TEST_OK(tpc_txn_sink_set(sink, "transaction.timeout.warn-ratio", "0.5"));
    start();
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 0, 10));
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    ck_assert_ptr_null(strstr(sub.log, "transaction.timeout.ms"));
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 2, NULL));
    ck_assert_ptr_nonnull(strstr(sub.log, "warn: transaction \"rec-1\" of checkpoint 1 has been "
                                          "open for"));
    tpc_test_txn_sub_close(&sub);
}
END_TEST

/* A transaction committed after more than warn-ratio of its timeout, on notify or during
 * recovery, is reported: it came close to being lost. */
START_TEST(test_warns_when_committed_late)
{
    TPC_TEST_OK(tpc_txn_sink_set(sink, "transaction.timeout.ms", "60"));
    TPC_TEST_OK(tpc_txn_sink_set(sink, "transaction.timeout.warn-ratio", "0.5"));
    start();
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 0, 10));
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1)); /* at once: no warning */
    ck_assert_msg(!strstr(sub.log, "was committed"), "%s", sub.log);
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 10, 10));
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 2, NULL));
    struct timespec ts = {0, 40 * 1000000L};
    nanosleep(&ts, NULL);
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 2));
    ck_assert_msg(strstr(sub.log, "warn: transaction \"rec-2\" of checkpoint 2 was committed ") &&
                      strstr(sub.log, "more than 50% of transaction.timeout.ms 60"),
                  "%s", sub.log);
    tpc_test_txn_sub_close(&sub);

    tpc_test_txn_state_t state = {.count = 0};
    pending_state(&state);
    nanosleep(&ts, NULL);
    TPC_TEST_OK(tpc_test_txn_sub_open(&sub, sink, 0, 1, 1));
    TPC_TEST_OK(tpc__txn_task_initialize(sub.task, state.entries, state.count));
    ck_assert_msg(strstr(sub.log, "was committed during recovery "), "%s", sub.log);
    tpc_test_txn_sub_close(&sub);
    tpc_test_txn_state_free(&state);

    /* Older than its whole timeout, a transaction that recovery finds committable was committed
     * before (an open one would have timed out): no false alarm at every restart. */
    state = (tpc_test_txn_state_t){.count = 0};
    pending_state(&state);
    struct timespec past = {0, 100 * 1000000L};
    nanosleep(&past, NULL);
    TPC_TEST_OK(tpc_test_txn_sub_open(&sub, sink, 0, 1, 1));
    TPC_TEST_OK(tpc__txn_task_initialize(sub.task, state.entries, state.count));
    ck_assert_msg(!strstr(sub.log, "was committed during recovery"), "%s", sub.log);
    tpc_test_txn_sub_close(&sub);
    tpc_test_txn_state_free(&state);
}
END_TEST

START_TEST(test_configuration_errors)
{
    tpc_error_t *err = tpc_txn_sink_set(sink, "guarantee", "twice");
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    ck_assert_str_eq(tpc_error_message(err), "invalid value \"twice\" for \"guarantee\"");
    ck_assert_ptr_nonnull(strstr(tpc_error_hint_text(err), "exactly-once, at-least-once or none"));
    tpc_error_destroy(err);
    expect_error(tpc_txn_sink_set(sink, "commit.retry.backoff.ms", "0"),
                 "invalid value \"0\" for \"commit.retry.backoff.ms\"");
    expect_error(tpc_txn_sink_set(sink, "transaction.timeout.ms", "-5"), "invalid value");
    expect_error(tpc_txn_sink_set(sink, "transaction.timeout.warn-ratio", "1.5"), "invalid value");
    err = tpc_txn_sink_set(sink, "no.such.key", "1");
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    ck_assert_str_eq(tpc_error_message(err),
                     "unknown configuration key \"no.such.key\" for a \"recorder\" sink");
    tpc_error_destroy(err);

    tpc_job_t *job = tpc_job_new("config");
    int v;
    TPC_TEST_OK(tpc_txn_sink_add_to_job(sink, job, "sink", 1, &v));
    err = tpc_txn_sink_set(sink, "guarantee", "none");
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_STATE);
    tpc_error_destroy(err);
    expect_error(tpc_txn_sink_add_to_job(sink, job, "again", 1, &v), "already part of a job");
    tpc_job_destroy(job);
}
END_TEST

START_TEST(test_connector_ops_are_checked)
{
    tpc_txn_connector_ops_t ops = tpc_test_txn_ops;
    ops.commit = NULL;
    tpc_txn_sink_t *s = NULL;
    expect_error(tpc_txn_sink_new(&ops, &rec, &s),
                 "connector \"recorder\" does not implement \"commit\"");
    ck_assert_ptr_null(s);
    ops = tpc_test_txn_ops;
    ops.version = TPC_TXN_CONNECTOR_OPS_VERSION + 1;
    tpc_error_t *err = tpc_txn_sink_new(&ops, &rec, &s);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(tpc_error_hint_text(err));
    tpc_error_destroy(err);
    tpc_txn_sink_destroy(NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("txn_failures");
    TCase *tc = tcase_create("failures");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_commit_failure_keeps_pending_in_order);
    tcase_add_test(tc, test_retriable_commit_is_retried);
    tcase_add_test(tc, test_retries_stop_at_deadline);
    tcase_add_test(tc, test_pre_commit_failure_aborts_only_current);
    tcase_add_test(tc, test_begin_failure_keeps_pending);
    tcase_add_test(tc, test_write_and_flush_failures);
    tcase_add_test(tc, test_recovery_commit_failure);
    tcase_add_test(tc, test_recovery_abort_and_lingering_failures);
    tcase_add_test(tc, test_expired_on_recovery_fails_by_default);
    tcase_add_test(tc, test_warns_when_committed_late);
    tcase_add_test(tc, test_expired_on_recovery_can_be_logged);
    tcase_add_test(tc, test_warns_before_timeout);
    tcase_add_test(tc, test_configuration_errors);
    tcase_add_test(tc, test_connector_ops_are_checked);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
