/*
 * The hand-driven checks of the connector conformance suite (tpc_conformance.h), each a chain of
 * steps (tpc_conformance_steps.h): a fresh namespace and sink, sink subtasks driven through one
 * order of checkpoint events (crashed, restored, rescaled on the way), and after every step what
 * is visible compared with what must be, record by record. The kill -9 check is in
 * tpc_conformance_kill.c.
 */
#include "tpc_conformance_steps.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Visible only after the notification of the checkpoint that pre-committed it; close() drops
 * what was written since and leaves nothing behind. */
static bool check_checkpoint_then_notify(const tpc_conformance_t *c, char *why, size_t len)
{
    TPC_CONF_CHECK_BEGIN(c, why, len);
    tpc_test_txn_sub_t s;
    bool passed = tpc_conf_fresh(x, &s) && tpc_conf_put(x, &s, 0, 100) &&
                  tpc_conf_visible(x, "written, no checkpoint yet") &&
                  tpc_conf_snap(x, &s, 1, NULL) &&
                  tpc_conf_visible(x, "pre-committed in checkpoint 1") &&
                  tpc_conf_notify(x, &s, 1) && tpc_conf_expect(x, 0, 100) &&
                  tpc_conf_visible(x, "checkpoint 1 complete") && tpc_conf_put(x, &s, 100, 50) &&
                  tpc_conf_snap(x, &s, 2, NULL) && tpc_conf_notify(x, &s, 2) &&
                  tpc_conf_expect(x, 100, 50) && tpc_conf_visible(x, "checkpoint 2 complete") &&
                  tpc_conf_put(x, &s, 150, 30) && tpc_conf_close_sub(x, &s) &&
                  tpc_conf_visible(x, "closed with records written after checkpoint 2") &&
                  tpc_conf_clean(x, "after close");
    return tpc_conf_ctx_close(x, passed);
}

/* A notification commits every pending transaction up to its checkpoint, and no later one. */
static bool check_partial_notification(const tpc_conformance_t *c, char *why, size_t len)
{
    TPC_CONF_CHECK_BEGIN(c, why, len);
    tpc_test_txn_sub_t s;
    bool passed = tpc_conf_fresh(x, &s);
    for (uint64_t id = 1; passed && id <= 3; id++)
        passed = tpc_conf_put(x, &s, id * 100, 40) && tpc_conf_snap(x, &s, id, NULL);
    passed = passed && tpc_conf_visible(x, "checkpoints 1 to 3 pre-committed") &&
             tpc_conf_notify(x, &s, 2) && tpc_conf_expect(x, 100, 40) &&
             tpc_conf_expect(x, 200, 40) &&
             tpc_conf_visible(x, "notification of 2 with 3 pending") && tpc_conf_notify(x, &s, 3) &&
             tpc_conf_expect(x, 300, 40) && tpc_conf_visible(x, "notification of 3") &&
             tpc_conf_close_sub(x, &s) && tpc_conf_clean(x, "after close");
    return tpc_conf_ctx_close(x, passed);
}

/* A notification that subsumes earlier ones commits them all, once; the late ones change
 * nothing. */
static bool check_subsumed_notification(const tpc_conformance_t *c, char *why, size_t len)
{
    TPC_CONF_CHECK_BEGIN(c, why, len);
    tpc_test_txn_sub_t s;
    bool passed = tpc_conf_fresh(x, &s);
    for (uint64_t id = 1; passed && id <= 3; id++)
        passed = tpc_conf_put(x, &s, id * 100, 40) && tpc_conf_snap(x, &s, id, NULL);
    passed = passed && tpc_conf_notify(x, &s, 3) && tpc_conf_expect(x, 100, 40) &&
             tpc_conf_expect(x, 200, 40) && tpc_conf_expect(x, 300, 40) &&
             tpc_conf_visible(x, "notification of 3 only") && tpc_conf_notify(x, &s, 1) &&
             tpc_conf_notify(x, &s, 2) && tpc_conf_notify(x, &s, 3) &&
             tpc_conf_visible(x, "late notifications of 1, 2, 3") && tpc_conf_close_sub(x, &s) &&
             tpc_conf_clean(x, "after close");
    return tpc_conf_ctx_close(x, passed);
}

/* A notification of a checkpoint this subtask never snapshotted, of one older than anything
 * pending, and an aborted checkpoint change nothing; the transaction of the aborted checkpoint
 * is committed by the next one that completes. */
static bool check_unknown_and_aborted_checkpoints(const tpc_conformance_t *c, char *why, size_t len)
{
    TPC_CONF_CHECK_BEGIN(c, why, len);
    tpc_test_txn_sub_t s;
    bool passed =
        tpc_conf_fresh(x, &s) && tpc_conf_put(x, &s, 0, 50) && tpc_conf_notify(x, &s, 1) &&
        tpc_conf_visible(x, "notification of checkpoint 1, never snapshotted") &&
        tpc_conf_snap(x, &s, 2, NULL) && tpc_conf_notify(x, &s, 2) && tpc_conf_expect(x, 0, 50) &&
        tpc_conf_visible(x, "checkpoint 2 complete") && tpc_conf_put(x, &s, 50, 50) &&
        tpc_conf_snap(x, &s, 3, NULL) && tpc_conf_aborted(x, &s, 3) && tpc_conf_notify(x, &s, 2) &&
        tpc_conf_visible(x, "checkpoint 3 aborted, notification of 2 again") &&
        tpc_conf_put(x, &s, 100, 50) && tpc_conf_snap(x, &s, 4, NULL) &&
        tpc_conf_notify(x, &s, 4) && tpc_conf_expect(x, 50, 100) &&
        tpc_conf_visible(x, "checkpoint 4 complete after 3 aborted") && tpc_conf_close_sub(x, &s) &&
        tpc_conf_clean(x, "after close");
    return tpc_conf_ctx_close(x, passed);
}

/* After finish() no transaction is begun; the final checkpoint commits the last one, also when
 * the first checkpoint after finish() aborts. */
static bool check_finish_then_final_checkpoint(const tpc_conformance_t *c, char *why, size_t len)
{
    TPC_CONF_CHECK_BEGIN(c, why, len);
    tpc_test_txn_sub_t s;
    tpc_test_txn_state_t st2 = {.count = 0}, st4 = {.count = 0};
    tpc_txn_sink_stats_t before, after;
    bool passed = tpc_conf_fresh(x, &s) && tpc_conf_put(x, &s, 0, 60) &&
                  tpc_conf_snap(x, &s, 1, NULL) && tpc_conf_notify(x, &s, 1) &&
                  tpc_conf_expect(x, 0, 60) && tpc_conf_put(x, &s, 60, 60) &&
                  tpc_conf_ok(x, "finish", tpc__txn_task_finish(s.task)) &&
                  tpc_conf_visible(x, "finished before the final checkpoint");
    tpc_conf_stats(x, &before);
    passed = passed && tpc_conf_snap(x, &s, 2, &st2) && tpc_conf_aborted(x, &s, 2) &&
             tpc_conf_visible(x, "first checkpoint after finish aborted") &&
             tpc_conf_snap(x, &s, 3, NULL) && tpc_conf_notify(x, &s, 3) &&
             tpc_conf_expect(x, 60, 60) && tpc_conf_visible(x, "final checkpoint complete") &&
             tpc_conf_snap(x, &s, 4, &st4) && tpc_conf_notify(x, &s, 4) &&
             tpc_conf_visible(x, "a checkpoint after the end");
    tpc_conf_stats(x, &after);
    if (passed && after.begun != before.begun)
        passed = tpc_conf_fail(x, "%" PRIu64 " transactions begun after finish()",
                               (uint64_t)(after.begun - before.begun));
    if (passed && (st2.count != 1 || st4.count != 0))
        passed =
            tpc_conf_fail(x,
                          "a finished subtask's state holds %zu entries at the final checkpoint "
                          "(1 expected: the last transaction, no new one) and %zu after it (0 "
                          "expected)",
                          st2.count, st4.count);
    passed = passed && tpc_conf_close_sub(x, &s) && tpc_conf_visible(x, "after close") &&
             tpc_conf_clean(x, "after close");
    tpc_test_txn_state_free(&st2);
    tpc_test_txn_state_free(&st4);
    return tpc_conf_ctx_close(x, passed);
}

/* Empty transactions cost nothing: no pre-commit, no commit, nothing in the external system, at
 * a checkpoint, after finish() and at close. */
static bool check_empty_checkpoints(const tpc_conformance_t *c, char *why, size_t len)
{
    TPC_CONF_CHECK_BEGIN(c, why, len);
    tpc_test_txn_sub_t s;
    long long f0 = 0, f1 = 0;
    tpc_txn_sink_stats_t st;
    bool passed = tpc_conf_fresh(x, &s) && tpc_conf_footprint(x, &f0) &&
                  tpc_conf_snap(x, &s, 1, NULL) && tpc_conf_notify(x, &s, 1) &&
                  tpc_conf_snap(x, &s, 2, NULL) && tpc_conf_notify(x, &s, 2) &&
                  tpc_conf_same_footprint(x, f0, "two empty checkpoints") &&
                  tpc_conf_visible(x, "two empty checkpoints");
    tpc_conf_stats(x, &st);
    if (passed && (st.pre_commits || st.commits || st.empty_skipped != 2))
        passed = tpc_conf_fail(x,
                               "two empty checkpoints made %" PRIu64 " pre-commits and %" PRIu64
                               " commits, skipped %" PRIu64 " (0, 0, 2 expected)",
                               (uint64_t)st.pre_commits, (uint64_t)st.commits,
                               (uint64_t)st.empty_skipped);
    passed = passed && tpc_conf_put(x, &s, 0, 30) && tpc_conf_snap(x, &s, 3, NULL) &&
             tpc_conf_notify(x, &s, 3) && tpc_conf_expect(x, 0, 30) &&
             tpc_conf_visible(x, "checkpoint 3 complete") && tpc_conf_footprint(x, &f1) &&
             tpc_conf_snap(x, &s, 4, NULL) && tpc_conf_notify(x, &s, 4) &&
             tpc_conf_ok(x, "finish", tpc__txn_task_finish(s.task)) &&
             tpc_conf_snap(x, &s, 5, NULL) && tpc_conf_notify(x, &s, 5) &&
             tpc_conf_close_sub(x, &s) &&
             tpc_conf_same_footprint(x, f1, "empty checkpoints, finish and close") &&
             tpc_conf_visible(x, "after close") && tpc_conf_clean(x, "after close");
    return tpc_conf_ctx_close(x, passed);
}

/* close() aborts the current transaction and never touches a pending one, which a restore from
 * its checkpoint commits. */
static bool check_close_keeps_pending(const tpc_conformance_t *c, char *why, size_t len)
{
    TPC_CONF_CHECK_BEGIN(c, why, len);
    tpc_test_txn_sub_t s;
    tpc_test_txn_state_t st = {.count = 0};
    tpc_test_txn_origin_t from = {.restored = 1, .first_checkpoint = 2};
    bool passed = tpc_conf_fresh(x, &s) && tpc_conf_put(x, &s, 0, 40) &&
                  tpc_conf_snap(x, &s, 1, &st) && tpc_conf_put(x, &s, 40, 40) &&
                  tpc_conf_close_sub(x, &s) &&
                  tpc_conf_visible(x, "closed before the notification of checkpoint 1") &&
                  tpc_conf_start(x, &s, 0, 1, &from, st.entries, st.count) &&
                  tpc_conf_expect(x, 0, 40) && tpc_conf_visible(x, "restored from checkpoint 1") &&
                  tpc_conf_clean(x, "after recovery") && tpc_conf_close_sub(x, &s);
    tpc_test_txn_state_free(&st);
    return tpc_conf_ctx_close(x, passed);
}

static bool write_and_snapshot_1(tpc_conf_ctx_t *x, tpc_test_txn_state_t *states)
{
    tpc_test_txn_sub_t s;
    return tpc_conf_fresh(x, &s) && tpc_conf_put(x, &s, 0, 70) &&
           tpc_conf_snap(x, &s, 1, &states[0]) && tpc_conf_put(x, &s, 70, 20);
}

/* Killed after checkpoint 1 completed and before its notification: the restore commits the
 * pending transaction, and a second restore from the same checkpoint commits nothing twice. */
static bool check_recovery_commits_pending(const tpc_conformance_t *c, char *why, size_t len)
{
    TPC_CONF_CHECK_BEGIN(c, why, len);
    tpc_test_txn_sub_t s;
    tpc_test_txn_state_t st = {.count = 0};
    tpc_test_txn_origin_t from = {.restored = 1, .first_checkpoint = 2};
    bool passed =
        tpc_conf_crash_after(x, write_and_snapshot_1, &st, 1) &&
        tpc_conf_visible(x, "killed before the notification") &&
        tpc_conf_start(x, &s, 0, 1, &from, st.entries, st.count) && tpc_conf_expect(x, 0, 70) &&
        tpc_conf_visible(x, "restored from checkpoint 1") && tpc_conf_clean(x, "after recovery") &&
        tpc_conf_close_sub(x, &s) && tpc_conf_start(x, &s, 0, 1, &from, st.entries, st.count) &&
        tpc_conf_visible(x, "restored from checkpoint 1 again") && tpc_conf_put(x, &s, 100, 10) &&
        tpc_conf_snap(x, &s, 2, NULL) && tpc_conf_notify(x, &s, 2) && tpc_conf_expect(x, 100, 10) &&
        tpc_conf_visible(x, "checkpoint 2 complete after recovery") && tpc_conf_close_sub(x, &s) &&
        tpc_conf_clean(x, "after close");
    tpc_test_txn_state_free(&st);
    return tpc_conf_ctx_close(x, passed);
}

static bool commit_and_crash(tpc_conf_ctx_t *x, tpc_test_txn_state_t *states)
{
    tpc_test_txn_sub_t s;
    return tpc_conf_fresh(x, &s) && tpc_conf_put(x, &s, 0, 70) &&
           tpc_conf_snap(x, &s, 1, &states[0]) && tpc_conf_notify(x, &s, 1) &&
           tpc_conf_put(x, &s, 70, 20);
}

/* Recovery commit is idempotent: killed after the notification of checkpoint 1 committed it,
 * restored from checkpoint 1 (the newest) twice, and recover_and_commit called twice more on the
 * same restored handle: the records are visible once. */
static bool check_recovery_commit_idempotent(const tpc_conformance_t *c, char *why, size_t len)
{
    TPC_CONF_CHECK_BEGIN(c, why, len);
    tpc_test_txn_sub_t s;
    tpc_test_txn_state_t st = {.count = 0};
    tpc_test_txn_origin_t from = {.restored = 1, .first_checkpoint = 2};
    tpc__txn_entry_t e = {0};
    void *txn = NULL;
    bool passed = tpc_conf_crash_after(x, commit_and_crash, &st, 1) && tpc_conf_expect(x, 0, 70) &&
                  tpc_conf_visible(x, "committed, then killed") &&
                  tpc_conf_start(x, &s, 0, 1, &from, st.entries, st.count) &&
                  tpc_conf_visible(x, "restored from checkpoint 1") && tpc_conf_close_sub(x, &s) &&
                  tpc_conf_start(x, &s, 0, 1, &from, st.entries, st.count) &&
                  tpc_conf_visible(x, "restored from checkpoint 1 again");
    for (size_t i = 0; passed && i < st.count; i++) {
        passed = tpc_conf_ok(x, "decode a state entry",
                             tpc__txn_entry_decode(st.entries[i].bytes, st.entries[i].len, &e));
        if (!passed || e.kind != TPC__TXN_PENDING)
            continue;
        const tpc_txn_connector_ops_t *ops = s.task->ops;
        passed = tpc_conf_ok(x, "deserialize",
                             ops->deserialize(s.task->conn, e.handle, e.handle_len, &txn)) &&
                 tpc_conf_ok(x, "recover_and_commit of a committed handle",
                             ops->recover_and_commit(s.task->conn, txn)) &&
                 tpc_conf_ok(x, "recover_and_commit of it again",
                             ops->recover_and_commit(s.task->conn, txn));
        ops->free_txn(s.task->conn, txn);
    }
    passed = passed && tpc_conf_visible(x, "recover_and_commit twice more") &&
             tpc_conf_put(x, &s, 100, 10) && tpc_conf_snap(x, &s, 2, NULL) &&
             tpc_conf_notify(x, &s, 2) && tpc_conf_expect(x, 100, 10) &&
             tpc_conf_visible(x, "checkpoint 2 complete") && tpc_conf_close_sub(x, &s) &&
             tpc_conf_clean(x, "after close");
    tpc_test_txn_state_free(&st);
    return tpc_conf_ctx_close(x, passed);
}

static bool leave_lingering(tpc_conf_ctx_t *x, tpc_test_txn_state_t *states)
{
    tpc_test_txn_sub_t s;
    return tpc_conf_fresh(x, &s) && tpc_conf_put(x, &s, 0, 50) &&
           tpc_conf_snap(x, &s, 1, &states[0]) && tpc_conf_notify(x, &s, 1) &&
           tpc_conf_put(x, &s, 50, 50) && tpc_conf_snap(x, &s, 2, NULL) &&
           tpc_conf_put(x, &s, 100, 50);
}

/* Killed with a transaction pre-committed in checkpoint 2, which never completed, and one open:
 * restored from checkpoint 1, both are gone, nothing is left open and nothing blocks what comes
 * after. */
static bool check_lingering_cleanup(const tpc_conformance_t *c, char *why, size_t len)
{
    TPC_CONF_CHECK_BEGIN(c, why, len);
    tpc_test_txn_sub_t s;
    tpc_test_txn_state_t st = {.count = 0};
    tpc_test_txn_origin_t from = {.restored = 1, .first_checkpoint = 3};
    bool passed = tpc_conf_crash_after(x, leave_lingering, &st, 1) && tpc_conf_expect(x, 0, 50) &&
                  tpc_conf_visible(x, "killed with checkpoint 2 pending and a transaction open") &&
                  tpc_conf_start(x, &s, 0, 1, &from, st.entries, st.count) &&
                  tpc_conf_visible(x, "restored from checkpoint 1") &&
                  tpc_conf_clean(x, "after recovery") && tpc_conf_put(x, &s, 200, 50) &&
                  tpc_conf_snap(x, &s, 3, NULL) && tpc_conf_notify(x, &s, 3) &&
                  tpc_conf_expect(x, 200, 50) &&
                  tpc_conf_visible(x, "checkpoint 3 complete after recovery") &&
                  tpc_conf_close_sub(x, &s) && tpc_conf_clean(x, "after close");
    tpc_test_txn_state_free(&st);
    return tpc_conf_ctx_close(x, passed);
}

static bool never_complete(tpc_conf_ctx_t *x, tpc_test_txn_state_t *states)
{
    (void)states;
    tpc_test_txn_sub_t s;
    return tpc_conf_fresh(x, &s) && tpc_conf_put(x, &s, 0, 50) && tpc_conf_snap(x, &s, 1, NULL) &&
           tpc_conf_put(x, &s, 50, 50);
}

/* Killed before any checkpoint completed, with one transaction pre-committed and one open: a
 * start without state cleans up both. */
static bool check_lingering_cleanup_fresh_start(const tpc_conformance_t *c, char *why, size_t len)
{
    TPC_CONF_CHECK_BEGIN(c, why, len);
    tpc_test_txn_sub_t s;
    tpc_test_txn_state_t none = {.count = 0};
    tpc_test_txn_origin_t from = {.first_checkpoint = 2};
    bool passed = tpc_conf_crash_after(x, never_complete, &none, 0) &&
                  tpc_conf_visible(x, "killed before any checkpoint completed") &&
                  tpc_conf_start(x, &s, 0, 1, &from, NULL, 0) &&
                  tpc_conf_visible(x, "started without state") &&
                  tpc_conf_clean(x, "after the start") && tpc_conf_put(x, &s, 200, 50) &&
                  tpc_conf_snap(x, &s, 2, NULL) && tpc_conf_notify(x, &s, 2) &&
                  tpc_conf_expect(x, 200, 50) && tpc_conf_visible(x, "checkpoint 2 complete") &&
                  tpc_conf_close_sub(x, &s) && tpc_conf_clean(x, "after close");
    return tpc_conf_ctx_close(x, passed);
}

/* Rescale: old subtask i writes records [i * 1000, +40) pre-committed in checkpoint 1, which
 * completes (subtask 0 alone gets the notification), [i * 1000 + 500, +20) pre-committed in
 * checkpoint 2, which does not, and [i * 1000 + 700, +20) into its open transaction. */
#define RESCALE_MAX 4

static bool rescale_crash(tpc_conf_ctx_t *x, tpc_test_txn_state_t *states)
{
    tpc_test_txn_sub_t s[RESCALE_MAX];
    bool passed = true;
    int from = x->crash_parallelism;
    for (int i = 0; passed && i < from; i++)
        passed = tpc_conf_start(x, &s[i], i, from, NULL, NULL, 0);
    for (int i = 0; passed && i < from; i++)
        passed = tpc_conf_put(x, &s[i], (uint64_t)i * 1000, 40) &&
                 tpc_conf_snap(x, &s[i], 1, &states[i]);
    passed = passed && tpc_conf_notify(x, &s[0], 1);
    for (int i = 0; passed && i < from; i++)
        passed = tpc_conf_put(x, &s[i], (uint64_t)i * 1000 + 500, 20) &&
                 tpc_conf_snap(x, &s[i], 2, NULL) &&
                 tpc_conf_put(x, &s[i], (uint64_t)i * 1000 + 700, 20);
    return passed;
}

/* Restored at another parallelism, each old subtask's transactions are recovered by its new
 * owner: pending ones committed once, open ones dropped, whatever the order in which the new
 * subtasks start (subtask 0 cleans up before the others recover). */
static bool rescale(const tpc_conformance_t *c, char *why, size_t len, int from_p, int to_p)
{
    TPC_CONF_CHECK_BEGIN(c, why, len);
    tpc_test_txn_state_t st[RESCALE_MAX] = {{.count = 0}};
    tpc_test_txn_sub_t s[RESCALE_MAX];
    tpc__txn_bytes_t entries[TPC_TEST_TXN_MAX_ENTRIES];
    int high = from_p > to_p ? from_p : to_p;
    tpc_test_txn_origin_t from = {.restored = 1,
                                  .restored_parallelism = from_p,
                                  .highest_parallelism = high,
                                  .first_checkpoint = 3};
    char when[96];
    snprintf(when, sizeof when, "restored at parallelism %d from %d", to_p, from_p);
    x->crash_parallelism = from_p;
    bool passed = tpc_conf_crash_after(x, rescale_crash, st, from_p);
    tpc_conf_expect(x, 0, 40);
    passed =
        passed && tpc_conf_visible(x, "killed after checkpoint 1 completed, subtask 0 committed");
    for (int j = 0; passed && j < to_p; j++) {
        size_t n = tpc_conf_owned(st, from_p, j, to_p, entries, TPC_TEST_TXN_MAX_ENTRIES);
        passed = tpc_conf_start(x, &s[j], j, to_p, &from, entries, n);
    }
    for (int i = 1; i < from_p; i++)
        tpc_conf_expect(x, (uint64_t)i * 1000, 40);
    passed = passed && tpc_conf_visible(x, when) && tpc_conf_clean(x, when);
    for (int j = 0; passed && j < to_p; j++)
        passed = tpc_conf_put(x, &s[j], 10000 + (uint64_t)j * 100, 30) &&
                 tpc_conf_snap(x, &s[j], 2, NULL);
    for (int j = 0; passed && j < to_p; j++)
        passed = tpc_conf_notify(x, &s[j], 2) && tpc_conf_expect(x, 10000 + (uint64_t)j * 100, 30);
    passed = passed && tpc_conf_visible(x, "checkpoint 2 complete after the rescale");
    for (int j = 0; passed && j < to_p; j++)
        tpc_conf_close_sub(x, &s[j]);
    passed = passed && tpc_conf_clean(x, "after close");
    tpc_conf_states_free(st, RESCALE_MAX);
    return tpc_conf_ctx_close(x, passed);
}

static bool check_rescale_down(const tpc_conformance_t *c, char *why, size_t len)
{
    return rescale(c, why, len, 3, 2);
}

static bool check_rescale_up(const tpc_conformance_t *c, char *why, size_t len)
{
    return rescale(c, why, len, 2, 3);
}

static bool leave_pending_2(tpc_conf_ctx_t *x, tpc_test_txn_state_t *states)
{
    tpc_test_txn_sub_t s;
    return tpc_conf_fresh(x, &s) && tpc_conf_put(x, &s, 0, 50) && tpc_conf_snap(x, &s, 1, NULL) &&
           tpc_conf_notify(x, &s, 1) && tpc_conf_put(x, &s, 50, 50) &&
           tpc_conf_snap(x, &s, 2, &states[0]) && tpc_conf_put(x, &s, 100, 20);
}

/* Another sink in the same namespace (another job): its start does not touch this sink's pending
 * or open transactions, and this sink's restore does not touch the other's. */
static bool check_other_sink_untouched(const tpc_conformance_t *c, char *why, size_t len)
{
    TPC_CONF_CHECK_BEGIN(c, why, len);
    tpc_test_txn_sub_t a, b;
    tpc_test_txn_state_t st = {.count = 0};
    tpc_test_txn_origin_t from = {.restored = 2, .first_checkpoint = 3};
    /* The other job is further on: its transactions are above this sink's restored checkpoint,
     * where this sink's cleanup looks for its own. */
    tpc_test_txn_origin_t other_from = {.first_checkpoint = 10};
    bool other = c->other_visible;
    bool passed =
        tpc_conf_other_open(x) && tpc_conf_crash_after(x, leave_pending_2, &st, 1) &&
        tpc_conf_expect(x, 0, 50) && tpc_conf_visible(x, "killed with checkpoint 2 pending") &&
        tpc_conf_start_sink(x, x->other, &b, 0, 1, &other_from, NULL, 0) &&
        tpc_conf_put(x, &b, 5000, 30) && tpc_conf_snap(x, &b, 10, NULL) &&
        tpc_conf_notify(x, &b, 10) && (!other || tpc_conf_expect(x, 5000, 30)) &&
        tpc_conf_put(x, &b, 5030, 20) && tpc_conf_snap(x, &b, 11, NULL) &&
        tpc_conf_put(x, &b, 5050, 10) && tpc_conf_start(x, &a, 0, 1, &from, st.entries, st.count) &&
        tpc_conf_expect(x, 50, 50) &&
        tpc_conf_visible(x, "restored from checkpoint 2 after another sink started next to it") &&
        tpc_conf_clean(x, "after recovery next to another sink") && tpc_conf_notify(x, &b, 11) &&
        (!other || tpc_conf_expect(x, 5030, 20)) &&
        tpc_conf_visible(x, "the other sink's pending transaction committed after this restore") &&
        tpc_conf_close_sub(x, &a) && tpc_conf_close_sub(x, &b) &&
        tpc_conf_visible(x, "both closed") && tpc_conf_clean(x, "both closed");
    tpc_test_txn_state_free(&st);
    return tpc_conf_ctx_close(x, passed);
}

/* One handle's bytes: deserialize then serialize gives them back; every shorter prefix, and the
 * bytes with one more at the end, are refused as corrupt, not read as another handle. */
static bool handle_bytes(tpc_conf_ctx_t *x, tpc_test_txn_sub_t *s, const tpc__txn_bytes_t *entry)
{
    const tpc_txn_connector_ops_t *ops = s->task->ops;
    void *conn = s->task->conn, *txn = NULL;
    tpc__txn_entry_t e;
    tpc_txn_buf_t again = {0};
    if (!tpc_conf_ok(x, "decode a state entry",
                     tpc__txn_entry_decode(entry->bytes, entry->len, &e)) ||
        !tpc_conf_ok(x, "deserialize", ops->deserialize(conn, e.handle, e.handle_len, &txn)))
        return false;
    bool passed = tpc_conf_ok(x, "serialize again", ops->serialize(conn, txn, &again));
    char name[256] = "";
    ops->describe(conn, txn, name, sizeof name);
    ops->free_txn(conn, txn);
    if (passed && (again.len != e.handle_len || memcmp(again.data, e.handle, e.handle_len) != 0))
        passed = tpc_conf_fail(x, "handle \"%s\" of %zu bytes serializes to %zu other bytes", name,
                               e.handle_len, again.len);
    tpc__txn_buf_free(&again);
    if (passed && !*name)
        passed = tpc_conf_fail(x, "describe gives an empty name");
    unsigned char *copy = malloc(e.handle_len + 1);
    memcpy(copy, e.handle, e.handle_len);
    copy[e.handle_len] = 0x5a;
    for (size_t n = 0; passed && n <= e.handle_len + 1; n++) {
        if (n == e.handle_len)
            continue;
        txn = NULL;
        tpc_error_t *err = ops->deserialize(conn, copy, n, &txn);
        if (!err) {
            ops->free_txn(conn, txn);
            passed = tpc_conf_fail(x, "handle \"%s\" of %zu bytes is read from %zu of them", name,
                                   e.handle_len, n);
        } else if (tpc_error_code(err) != TPC_ERR_CORRUPT) {
            passed =
                tpc_conf_fail(x, "%zu bytes of handle \"%s\" give %s, not TPC_ERR_CORRUPT: %s", n,
                              name, tpc_err_name(tpc_error_code(err)), tpc_error_message(err));
        }
        tpc_error_destroy(err);
    }
    free(copy);
    return passed;
}

/* Handle bytes of a pending and an empty current transaction survive a round trip; damaged ones
 * are refused as corrupt. */
static bool check_handle_bytes(const tpc_conformance_t *c, char *why, size_t len)
{
    TPC_CONF_CHECK_BEGIN(c, why, len);
    tpc_test_txn_sub_t s;
    tpc_test_txn_state_t st = {.count = 0};
    bool passed =
        tpc_conf_fresh(x, &s) && tpc_conf_put(x, &s, 0, 20) && tpc_conf_snap(x, &s, 1, &st);
    if (passed && st.count != 2)
        passed = tpc_conf_fail(x,
                               "the state of checkpoint 1 holds %zu entries (2 expected: the "
                               "pending and the current transaction)",
                               st.count);
    for (size_t i = 0; passed && i < st.count; i++)
        passed = handle_bytes(x, &s, &st.entries[i]);
    passed = passed && tpc_conf_notify(x, &s, 1) && tpc_conf_expect(x, 0, 20) &&
             tpc_conf_close_sub(x, &s) && tpc_conf_visible(x, "after the round trips") &&
             tpc_conf_clean(x, "after close");
    tpc_test_txn_state_free(&st);
    return tpc_conf_ctx_close(x, passed);
}

const tpc_conformance_check_t tpc_conformance_checks[] = {
    {"checkpoint_then_notify", "visible after the notification, not before; close drops the rest",
     check_checkpoint_then_notify},
    {"partial_notification", "a notification commits up to its checkpoint, no later one",
     check_partial_notification},
    {"subsumed_notification",
     "a later notification commits earlier ones once; late ones are no-ops",
     check_subsumed_notification},
    {"unknown_and_aborted_checkpoints",
     "notifications without a snapshot change nothing; an aborted checkpoint's transaction waits",
     check_unknown_and_aborted_checkpoints},
    {"finish_then_final_checkpoint", "nothing begun after finish(); the final checkpoint commits",
     check_finish_then_final_checkpoint},
    {"empty_checkpoints", "empty transactions cost nothing and leave nothing",
     check_empty_checkpoints},
    {"handle_bytes", "handles survive serialize and deserialize; damaged bytes are refused",
     check_handle_bytes},
    {"close_keeps_pending", "close() aborts the open transaction, never a pending one",
     check_close_keeps_pending},
    {"recovery_commits_pending", "a restore commits what its checkpoint holds, once",
     check_recovery_commits_pending},
    {"recovery_commit_idempotent", "committing a restored handle again changes nothing",
     check_recovery_commit_idempotent},
    {"lingering_cleanup", "transactions of no completed checkpoint are dropped on restore",
     check_lingering_cleanup},
    {"lingering_cleanup_fresh_start", "a start without state drops what a killed run left",
     check_lingering_cleanup_fresh_start},
    {"other_sink_untouched", "another sink's start and this one's restore leave each other alone",
     check_other_sink_untouched},
    {"rescale_down", "parallelism 3 -> 2: each transaction recovered once by its new owner",
     check_rescale_down},
    {"rescale_up", "parallelism 2 -> 3: each transaction recovered once by its new owner",
     check_rescale_up},
    {"kill_9_at_every_phase", "jobs killed in every phase of a transaction: nothing lost or twice",
     tpc_conformance_kill_9},
};
const size_t tpc_conformance_check_count =
    sizeof tpc_conformance_checks / sizeof tpc_conformance_checks[0];
