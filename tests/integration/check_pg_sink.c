/*
 * The PostgreSQL sink's transactions on a real server, one sink subtask driven by hand: a
 * checkpoint leaves a prepared transaction and invisible rows, its completion commits them, an
 * empty transaction costs nothing, committing an already committed gid succeeds, a prepared
 * transaction rolled back behind the sink's back is reported as data loss, restore commits pending
 * and drops current transactions, and the cleanup at start rolls back only this sink's dead gids.
 */
#include "tpc_test_check.h"
#include "tpc_pg.h"
#include "tpc_test_env.h"
#include "tpc_test_pg.h"
#include "tpc_test_txn_drive.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static PGconn *pg;
static char table[96], prefix[96], marker[96];
/* The sink's sessions carry the test's own application_name, so that the test can end them on a
 * server where other tests run beside it. */
static char conninfo[1024];
static tpc_txn_sink_t *sink;
static tpc_test_txn_sub_t sub;

static tpc_txn_sink_t *new_sink(void)
{
    tpc_txn_sink_t *s = NULL;
    TPC_TEST_OK(tpc_pg_sink_new(&s));
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.conninfo", conninfo));
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.table", table));
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.gid-prefix", prefix));
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.marker-table", marker));
    TPC_TEST_OK(tpc_txn_sink_set(s, "commit.retry.backoff.ms", "1"));
    TPC_TEST_OK(tpc_txn_sink_set(s, "commit.retry.deadline.ms", "200"));
    return s;
}

static void setup(void)
{
    pg = tpc_test_pg_connect();
    ck_assert_msg(pg != NULL, "no test server: TWOPC_TEST_PG_CONNINFO");
    tpc_test_unique_name(table, sizeof table, "pgsink", '_');
    tpc_test_unique_name(prefix, sizeof prefix, "pgsink", '-');
    tpc_test_unique_name(marker, sizeof marker, "pgsink_markers", '_');
    snprintf(conninfo, sizeof conninfo, "%s application_name=%s",
             tpc_test_env("TWOPC_TEST_PG_CONNINFO"), prefix);
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea, v bytea)", table));
    sink = new_sink();
}

static void teardown(void)
{
    tpc_txn_sink_destroy(sink);
    tpc_test_pg_rollback_prefix(pg, prefix);
    tpc_test_pg_exec(pg, "DROP TABLE IF EXISTS %s", table);
    tpc_test_pg_exec(pg, "DROP TABLE IF EXISTS %s", marker);
    PQfinish(pg);
}

static void start(uint64_t restored, const tpc_test_txn_state_t *state)
{
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, restored, state));
}

static void write_range(uint64_t first, uint64_t n)
{
    for (uint64_t i = 0; i < n; i += 64)
        TPC_TEST_OK(tpc_test_txn_sub_write(&sub, first + i, n - i < 64 ? n - i : 64));
}

static long long rows(void)
{
    return tpc_test_pg_long(pg, "SELECT count(*) FROM %s", table);
}

/* Every key 0 .. n-1 exactly once (keys are 8-byte big-endian numbers, values equal keys). */
static void expect_exactly(long long n)
{
    ck_assert_int_eq(rows(), n);
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(DISTINCT k) FROM %s WHERE k = v", table),
                     n);
    if (n)
        ck_assert_int_eq(
            tpc_test_pg_long(pg, "SELECT max(('x' || encode(k, 'hex'))::bit(64)::bigint) FROM %s",
                             table),
            n - 1);
}

static bool gid_prepared(const char *suffix)
{
    return tpc_test_pg_long(pg, "SELECT count(*) FROM pg_prepared_xacts WHERE gid = '%s%s'", prefix,
                            suffix) == 1;
}

START_TEST(test_checkpoint_prepares_and_completion_commits)
{
    start(0, NULL);
    write_range(0, 100);
    ck_assert_int_eq(tpc_test_pg_prepared(pg, prefix), 0);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    ck_assert(gid_prepared(":0:1:1"));
    ck_assert_int_eq(rows(), 0); /* prepared: durable, invisible */
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1));
    ck_assert_int_eq(tpc_test_pg_prepared(pg, prefix), 0);
    expect_exactly(100);
    ck_assert_int_eq(
        tpc_test_pg_long(pg, "SELECT count(*) FROM %s WHERE gid = '%s:0:1:1' AND checkpoint = 1",
                         marker, prefix),
        1);

    /* An empty transaction: no PREPARE, nothing to commit. */
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 2, NULL));
    ck_assert_int_eq(tpc_test_pg_prepared(pg, prefix), 0);
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 2));

    write_range(100, 50);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 3, NULL));
    write_range(150, 10);
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 3));
    expect_exactly(150);
    tpc_test_txn_sub_close(&sub); /* the current transaction is rolled back */
    expect_exactly(150);
    ck_assert_int_eq(tpc_test_pg_prepared(pg, prefix), 0);
}
END_TEST

/* The commit went through before the crash; recovery commits the same gid again. */
START_TEST(test_commit_of_committed_gid_succeeds)
{
    tpc_test_txn_state_t state = {.count = 0};
    start(0, NULL);
    write_range(0, 40);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, &state));
    tpc_test_txn_sub_close(&sub);
    ck_assert(tpc_test_pg_exec(pg, "COMMIT PREPARED '%s:0:1:1'", prefix));
    start(1, &state);
    ck_assert_msg(strstr(sub.log, "was committed before") != NULL, "log: %s", sub.log);
    tpc_test_txn_sub_close(&sub);
    start(1, &state); /* and once more */
    tpc_test_txn_sub_close(&sub);
    expect_exactly(40);
    tpc_test_txn_state_free(&state);
}
END_TEST

START_TEST(test_lost_prepared_transaction_is_data_loss)
{
    tpc_test_txn_state_t state = {.count = 0};
    start(0, NULL);
    write_range(0, 40);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, &state));
    tpc_test_txn_sub_close(&sub);
    ck_assert(tpc_test_pg_exec(pg, "ROLLBACK PREPARED '%s:0:1:1'", prefix));
    TPC_TEST_OK(tpc_test_txn_sub_open(&sub, sink, 0, 1, 1));
    tpc_error_t *err = tpc__txn_task_initialize(sub.task, state.entries, state.count);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_DATA_LOSS);
    char gid[160];
    snprintf(gid, sizeof gid, "\"%s:0:1:1\" of checkpoint 1", prefix);
    ck_assert_msg(strstr(tpc_error_message(err), gid), "%s", tpc_error_message(err));
    ck_assert_ptr_nonnull(tpc_error_hint_text(err));
    tpc_error_destroy(err);
    tpc_test_txn_sub_close(&sub);
    expect_exactly(0);
    tpc_test_txn_state_free(&state);
}
END_TEST

/* Checkpoint 1 completed but was never notified; checkpoint 2 was prepared but never completed.
 * Restoring 1 commits the first and rolls back the second. */
START_TEST(test_restore_commits_pending_and_rolls_back_current)
{
    tpc_test_txn_state_t state = {.count = 0};
    start(0, NULL);
    write_range(0, 30);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, &state));
    write_range(30, 20);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 2, NULL));
    tpc_test_txn_sub_close(&sub);
    ck_assert_int_eq(tpc_test_pg_prepared(pg, prefix), 2);
    start(1, &state);
    ck_assert_int_eq(tpc_test_pg_prepared(pg, prefix), 0);
    expect_exactly(30);
    write_range(30, 20);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 2, NULL));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 2));
    tpc_test_txn_sub_close(&sub);
    expect_exactly(50);
    tpc_test_txn_state_free(&state);
}
END_TEST

static void prepare_empty(PGconn *conn, const char *gid)
{
    ck_assert(tpc_test_pg_exec(conn, "BEGIN"));
    ck_assert(tpc_test_pg_exec(conn, "PREPARE TRANSACTION '%s'", gid));
}

START_TEST(test_lingering_rollback_touches_only_own_dead_gids)
{
    char other[128], gid[200];
    tpc_test_unique_name(other, sizeof other, "other", '-');
    const char *mine[] = {":0:1:7", ":0:1:3", ":1:2:3", ":0:2:4", ":1:2:9"};
    /* Subtask 0 of 1 owns every subtask of any earlier run (tpc_txn_owns()), and it got back
     * every handle they stored (none here): all of them are dead, whatever their parallelism or
     * checkpoint, so nothing is left prepared after a rescale. */
    const bool dead[] = {true, true, true, true, true};
    for (int i = 0; i < 5; i++) {
        snprintf(gid, sizeof gid, "%s%s", prefix, mine[i]);
        prepare_empty(pg, gid);
    }
    snprintf(gid, sizeof gid, "%s:0:1:9", other);
    prepare_empty(pg, gid);
    snprintf(gid, sizeof gid, "%sx:0:1:9", prefix); /* a longer prefix that starts like ours */
    prepare_empty(pg, gid);
    start(5, NULL);
    tpc_test_txn_sub_close(&sub);
    for (int i = 0; i < 5; i++)
        ck_assert_msg(gid_prepared(mine[i]) == !dead[i], "%s%s", prefix, mine[i]);
    ck_assert_int_eq(tpc_test_pg_prepared(pg, other), 1);
    ck_assert(gid_prepared("x:0:1:9"));
    tpc_test_pg_rollback_prefix(pg, other);
    snprintf(gid, sizeof gid, "%sx", prefix);
    tpc_test_pg_rollback_prefix(pg, gid);
}
END_TEST

/* Commits after a lost control connection are retried once the server is back; here the
 * connection is killed from the server side between prepare and commit. */
START_TEST(test_commit_survives_lost_connection)
{
    start(0, NULL);
    write_range(0, 25);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    ck_assert_int_ge(tpc_test_pg_long(pg,
                                      "SELECT count(pg_terminate_backend(pid)) FROM "
                                      "pg_stat_activity WHERE application_name = '%s'",
                                      prefix),
                     1);
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1));
    expect_exactly(25);
    write_range(25, 5); /* the data connection was lost between transactions: reconnects */
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 2, NULL));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 2));
    tpc_test_txn_sub_close(&sub);
    expect_exactly(30);
}
END_TEST

/* Markers that no checkpoint can ask about are deleted as the sink goes. */
START_TEST(test_old_markers_are_deleted)
{
    start(0, NULL);
    for (uint64_t ck = 1; ck <= 6; ck++) {
        write_range(ck * 10, 10);
        TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, ck, NULL));
        TPC_TEST_OK(tpc__txn_task_complete(sub.task, ck));
    }
    tpc_test_txn_sub_close(&sub);
    ck_assert_int_le(tpc_test_pg_long(pg, "SELECT count(*) FROM %s", marker), 3);
    ck_assert_int_eq(rows(), 60);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("pg_sink");
    TCase *tc = tcase_create("transactions");
    tcase_set_timeout(tc, 30);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_checkpoint_prepares_and_completion_commits);
    tcase_add_test(tc, test_commit_of_committed_gid_succeeds);
    tcase_add_test(tc, test_lost_prepared_transaction_is_data_loss);
    tcase_add_test(tc, test_restore_commits_pending_and_rolls_back_current);
    tcase_add_test(tc, test_lingering_rollback_touches_only_own_dead_gids);
    tcase_add_test(tc, test_commit_survives_lost_connection);
    tcase_add_test(tc, test_old_markers_are_deleted);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
