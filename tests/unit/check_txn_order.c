/*
 * The order of connector calls the two-phase-commit sink makes, for each checkpoint event, driven
 * by hand so that every scenario is exact: a normal run, finish() and the final checkpoint, empty
 * transactions, late and subsumed notifications, aborted checkpoints (also after finish()),
 * close(), restore, and the weaker guarantees. Each trace is what a connector author can rely on.
 */
#include "tpc_test_check.h"
#include "tpc_test_txn_conn.h"
#include "tpc_test_txn_drive.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

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

static void assert_trace(const char *expected)
{
    char *trace = tpc_test_txn_trace(&rec, -1);
    ck_assert_str_eq(trace, expected);
    free(trace);
    ck_assert_msg(rec.violations == 0, "contract violated: %s", rec.first_violation);
}

static void start(uint64_t restored)
{
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, restored, NULL));
}

START_TEST(test_normal_run)
{
    start(0);
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 0, 10));
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1));
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 10, 10));
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 2, NULL));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 2));
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 20, 10));
    TPC_TEST_OK(tpc__txn_task_finish(sub.task));
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 3, NULL));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 3));
    tpc_test_txn_sub_close(&sub);
    assert_trace("open lingering@0 begin:1@1 write:1 pre_commit:1@1 begin:2@2 commit:1 "
                 "write:2 pre_commit:2@2 begin:3@3 commit:2 write:3 flush:3 pre_commit:3@3 "
                 "commit:3 close");
    ck_assert_uint_eq(tpc_test_txn_missing(&rec, 0, 30), 0);
    tpc_txn_sink_stats_t st;
    tpc_txn_sink_get_stats(sink, &st);
    ck_assert_uint_eq(st.begun, 3);
    ck_assert_uint_eq(st.pre_commits, 3);
    ck_assert_uint_eq(st.commits, 3);
    ck_assert_uint_eq(st.pending, 0);
    ck_assert_uint_eq(st.records, 30);
}
END_TEST

START_TEST(test_empty_transactions_cost_nothing)
{
    start(0);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL)); /* nothing written: no pre-commit */
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1));
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 0, 5));
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 2, NULL));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 2));
    tpc_test_txn_sub_close(&sub); /* the current one is empty: no abort */
    assert_trace("open lingering@0 begin:1@1 begin:2@2 write:2 pre_commit:2@2 begin:3@3 "
                 "commit:2 close");
    tpc_txn_sink_stats_t st;
    tpc_txn_sink_get_stats(sink, &st);
    ck_assert_uint_eq(st.empty_skipped, 2);
    ck_assert_uint_eq(st.commits, 1);
}
END_TEST

START_TEST(test_subsumed_notification_commits_all_older)
{
    start(0);
    for (uint64_t id = 1; id <= 3; id++) {
        TPC_TEST_OK(tpc_test_txn_sub_write(&sub, id * 10, 10));
        TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, id, NULL));
    }
    TPC_TEST_OK(tpc__txn_task_aborted(sub.task, 1));
    /* Checkpoint 3 completed; notifications of 1 and 2 never come, or come late. */
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 3));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 2));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1));
    tpc_test_txn_sub_close(&sub);
    assert_trace("open lingering@0 begin:1@1 write:1 pre_commit:1@1 begin:2@2 write:2 "
                 "pre_commit:2@2 begin:3@3 write:3 pre_commit:3@3 begin:4@4 commit:1 commit:2 "
                 "commit:3 close");
}
END_TEST

START_TEST(test_notification_commits_only_up_to_its_checkpoint)
{
    start(0);
    for (uint64_t id = 1; id <= 3; id++) {
        TPC_TEST_OK(tpc_test_txn_sub_write(&sub, id * 10, 10));
        TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, id, NULL));
    }
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 2));
    char *trace = tpc_test_txn_trace(&rec, -1);
    ck_assert_ptr_nonnull(strstr(trace, " commit:1 commit:2"));
    ck_assert_ptr_null(strstr(trace, " commit:3"));
    free(trace);
    /* An id between snapshots, never seen by this subtask, is just as good. */
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 7));
    tpc_test_txn_sub_close(&sub);
    ck_assert_int_eq(tpc_test_txn_count(&rec, TPC_TEST_TXN_COMMIT), 3);
    ck_assert_int_eq(tpc_test_txn_count(&rec, TPC_TEST_TXN_ABORT), 0);
}
END_TEST

/* After finish() nothing is begun; a checkpoint aborted after finish() leaves the last
 * transaction pending and the next completed one commits it. */
START_TEST(test_checkpoint_aborted_after_finish)
{
    start(0);
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 0, 10));
    TPC_TEST_OK(tpc__txn_task_finish(sub.task));
    tpc_test_txn_state_t st1 = {.count = 0}, st2 = {.count = 0};
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, &st1));
    TPC_TEST_OK(tpc__txn_task_aborted(sub.task, 1));
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 2, &st2));
    /* The pending transaction is still in the state of checkpoint 2, and nothing else. */
    ck_assert_uint_eq(st1.count, 1);
    ck_assert_uint_eq(st2.count, 1);
    ck_assert_uint_eq(st2.entries[0].len, st1.entries[0].len);
    ck_assert_int_eq(memcmp(st1.entries[0].bytes, st2.entries[0].bytes, st1.entries[0].len), 0);
    ck_assert_int_eq(tpc_test_txn_count(&rec, TPC_TEST_TXN_COMMIT), 0);
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 2));
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 3, NULL));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 3));
    tpc_test_txn_sub_close(&sub);
    assert_trace("open lingering@0 begin:1@1 write:1 flush:1 pre_commit:1@1 commit:1 close");
    ck_assert_uint_eq(tpc_test_txn_missing(&rec, 0, 10), 0);
    tpc_test_txn_state_free(&st1);
    tpc_test_txn_state_free(&st2);
}
END_TEST

START_TEST(test_close_aborts_current_never_pending)
{
    start(0);
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 0, 10));
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 10, 10));
    tpc_test_txn_sub_close(&sub); /* a failure elsewhere: checkpoint 1 never completed here */
    assert_trace("open lingering@0 begin:1@1 write:1 pre_commit:1@1 begin:2@2 write:2 abort:2 "
                 "close");
    tpc_txn_sink_stats_t st;
    tpc_txn_sink_get_stats(sink, &st);
    ck_assert_uint_eq(st.pending, 0);
    ck_assert_uint_eq(st.aborts, 1);
    ck_assert_ptr_nonnull(strstr(sub.log, "not yet committed"));
}
END_TEST

/* A normal end that leaves records uncommitted (no checkpoint after finish()) is an error. */
START_TEST(test_end_without_checkpoint_is_loud)
{
    start(0);
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 0, 10));
    TPC_TEST_OK(tpc__txn_task_finish(sub.task));
    tpc_test_txn_sub_close(&sub);
    assert_trace("open lingering@0 begin:1@1 write:1 flush:1 abort:1 close");
    ck_assert_msg(strstr(sub.log, "error: sink ends with transaction \"rec-1\" never "
                                  "pre-committed") != NULL,
                  "%s", sub.log);
}
END_TEST

/* Restore: pending ones are committed oldest first, whatever order the state lists them in,
 * then the current one is aborted, then lingering ones, then a new transaction begins. */
START_TEST(test_restore_order)
{
    start(0);
    tpc_test_txn_state_t st = {.count = 0};
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 0, 10));
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1));
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 10, 10));
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 2, NULL));
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 20, 10));
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 3, &st)); /* pending 2 and 3, current 4 */
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 30, 10));
    tpc_test_txn_sub_close(&sub); /* the crash: 2 and 3 stay pending, 4 is lost */
    ck_assert_uint_eq(st.count, 3);
    tpc__txn_bytes_t shuffled[3] = {st.entries[2], st.entries[1], st.entries[0]};

    tpc_test_txn_rec_t *r = &rec;
    size_t before = r->nevents;
    TPC_TEST_OK(tpc_test_txn_sub_open(&sub, sink, 0, 1, 3));
    TPC_TEST_OK(tpc__txn_task_initialize(sub.task, shuffled, 3));
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 30, 10));
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 4, NULL));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 4));
    tpc_test_txn_sub_close(&sub);
    char *trace = tpc_test_txn_trace(&rec, -1);
    size_t skip = 0;
    for (size_t i = 0, words = 0; trace[i] && words < before; i++)
        if (trace[i] == ' ' && ++words == before)
            skip = i + 1;
    ck_assert_str_eq(trace + skip, "open recover_commit:2 recover_commit:3 recover_abort:4 "
                                   "lingering@3 begin:5@4 write:5 pre_commit:5@4 begin:6@5 "
                                   "commit:5 close");
    free(trace);
    ck_assert_msg(rec.violations == 0, "%s", rec.first_violation);
    ck_assert_uint_eq(tpc_test_txn_missing(&rec, 0, 40), 0);
    tpc_txn_sink_stats_t stats;
    tpc_txn_sink_get_stats(sink, &stats);
    ck_assert_uint_eq(stats.recovered_commits, 2);
    tpc_test_txn_state_free(&st);
}
END_TEST

START_TEST(test_restore_again_is_idempotent)
{
    start(0);
    tpc_test_txn_state_t st = {.count = 0};
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 0, 10));
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, &st));
    tpc_test_txn_sub_close(&sub);
    /* Two restores from the same checkpoint, as after a crash during the first recovery. */
    for (int i = 0; i < 2; i++) {
        TPC_TEST_OK(tpc_test_txn_sub_open(&sub, sink, 0, 1, 1));
        TPC_TEST_OK(tpc__txn_task_initialize(sub.task, st.entries, st.count));
        tpc_test_txn_sub_close(&sub);
    }
    ck_assert_int_eq(tpc_test_txn_count(&rec, TPC_TEST_TXN_RECOVER_COMMIT), 2);
    ck_assert_uint_eq(tpc_test_txn_missing(&rec, 0, 10), 0);
    ck_assert_msg(rec.violations == 0, "%s", rec.first_violation);
    tpc_test_txn_state_free(&st);
}
END_TEST

START_TEST(test_at_least_once_commits_at_snapshot)
{
    TPC_TEST_OK(tpc_txn_sink_set(sink, "guarantee", "at-least-once"));
    start(0);
    tpc_test_txn_state_t st = {.count = 0};
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 0, 10));
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, &st));
    ck_assert_uint_eq(st.count, 0); /* nothing to recover: no state */
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1));
    TPC_TEST_OK(tpc__txn_task_finish(sub.task));
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 2, &st));
    tpc_test_txn_sub_close(&sub);
    assert_trace(
        "open lingering@0 begin:1@1 write:1 pre_commit:1@1 commit:1 begin:2@2 flush:2 close");
}
END_TEST

START_TEST(test_state_entry_checks)
{
    TPC_TEST_OK(tpc_test_txn_sub_open(&sub, sink, 0, 1, 5));
    unsigned char junk[40] = {'T', 'P', 'C', 'X', 9};
    tpc__txn_bytes_t e = {junk, sizeof junk};
    tpc_error_t *err = tpc__txn_task_initialize(sub.task, &e, 1);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CORRUPT);
    ck_assert_ptr_nonnull(strstr(tpc_error_message(err), "sink \"sink\""));
    ck_assert_ptr_nonnull(strstr(tpc_error_message(err), "version 9"));
    ck_assert_ptr_nonnull(tpc_error_hint_text(err));
    tpc_error_destroy(err);
    junk[0] = 'X';
    err = tpc__txn_task_initialize(sub.task, &e, 1);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CORRUPT);
    tpc_error_destroy(err);
    tpc_test_txn_sub_close(&sub);
    ck_assert_int_eq(tpc_test_txn_count(&rec, TPC_TEST_TXN_BEGIN), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("txn_order");
    TCase *tc = tcase_create("order");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_normal_run);
    tcase_add_test(tc, test_empty_transactions_cost_nothing);
    tcase_add_test(tc, test_subsumed_notification_commits_all_older);
    tcase_add_test(tc, test_notification_commits_only_up_to_its_checkpoint);
    tcase_add_test(tc, test_checkpoint_aborted_after_finish);
    tcase_add_test(tc, test_close_aborts_current_never_pending);
    tcase_add_test(tc, test_end_without_checkpoint_is_loud);
    tcase_add_test(tc, test_restore_order);
    tcase_add_test(tc, test_restore_again_is_idempotent);
    tcase_add_test(tc, test_at_least_once_commits_at_snapshot);
    tcase_add_test(tc, test_state_entry_checks);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
