/*
 * The PostgreSQL sink under owners (checkpoint.owner=claim), against the real server: owner A is
 * held inside checkpoint n (an operator before the sink blocks in its snapshot, so the sink has
 * not prepared n yet) while owner B takes the job over, restores and completes a checkpoint.
 * Resumed, A prepares its transaction of n (a gid of owner epoch 1, beside B's of epoch 2: two
 * owners never share a gid), cannot complete n and ends with TPC_ERR_FENCED, leaving that gid
 * prepared. B's next commit rolls it back (a gid of an older epoch that no restorable checkpoint
 * lists), never one of its own; at the end every record is in the table exactly once and no gid
 * of the sink is left in pg_prepared_xacts.
 */
#include "tpc_pg.h"
#include "tpc_test_check.h"
#include "tpc_test_env.h"
#include "tpc_test_ops.h"
#include "tpc_test_pg.h"
#include "tpc_txn.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECORDS 3000

static char table[96], prefix[96], marker[96], dir[512];
static PGconn *pg;

typedef struct {
    tpc_job_t *job;
    tpc_txn_sink_t *sink;
    tpc_test_seq_conf_t seq;
    tpc_test_hold_t hold;
    pthread_t thread;
    tpc_error_t *err;
    tpc_job_result_t result;
    bool ended;
} owner_t;

static void owner_new(owner_t *o, const char *interval_ms, uint32_t sleep_us)
{
    memset(o, 0, sizeof *o);
    tpc_test_hold_init(&o->hold, true);
    o->seq.count_default = RECORDS;
    o->seq.per_poll = 8;
    o->seq.sleep_us = sleep_us;
    o->job = tpc_job_new("owned-pg");
    TPC_TEST_OK(tpc_job_set(o->job, "checkpoint.dir", dir));
    TPC_TEST_OK(tpc_job_set(o->job, "checkpoint.owner", "claim"));
    TPC_TEST_OK(tpc_job_set(o->job, "checkpoint.interval.ms", interval_ms));
    TPC_TEST_OK(tpc_job_set(o->job, "restart.attempts", "3"));
    TPC_TEST_OK(tpc_job_set(o->job, "restart.delay.ms", "10"));
    TPC_TEST_OK(tpc_pg_sink_new(&o->sink));
    TPC_TEST_OK(tpc_txn_sink_set(o->sink, "pg.conninfo", tpc_test_env("TWOPC_TEST_PG_CONNINFO")));
    TPC_TEST_OK(tpc_txn_sink_set(o->sink, "pg.table", table));
    TPC_TEST_OK(tpc_txn_sink_set(o->sink, "pg.gid-prefix", prefix));
    TPC_TEST_OK(tpc_txn_sink_set(o->sink, "pg.marker-table", marker));
    int src, hold, sink;
    TPC_TEST_OK(tpc_job_add_vertex(o->job, "source", 1, &tpc_test_seq_source_ops, &o->seq, &src));
    TPC_TEST_OK(tpc_job_add_vertex(o->job, "hold", 1, &tpc_test_hold_ops, &o->hold, &hold));
    TPC_TEST_OK(tpc_txn_sink_add_to_job(o->sink, o->job, "pg", 1, &sink));
    TPC_TEST_OK(tpc_job_connect(o->job, src, hold, TPC_EDGE_FORWARD));
    TPC_TEST_OK(tpc_job_connect(o->job, hold, sink, TPC_EDGE_FORWARD));
}

static void *owner_main(void *arg)
{
    owner_t *o = arg;
    tpc_error_t *err = tpc_job_run(o->job, &o->result);
    pthread_mutex_lock(&o->hold.mu);
    o->err = err;
    o->ended = true;
    pthread_cond_broadcast(&o->hold.cv);
    pthread_mutex_unlock(&o->hold.mu);
    return NULL;
}

static void owner_free(owner_t *o)
{
    tpc_error_destroy(o->err);
    tpc_job_destroy(o->job);
    tpc_txn_sink_destroy(o->sink);
    tpc_test_hold_destroy(&o->hold);
}

static bool wait_until(owner_t *o, bool (*cond)(owner_t *), int seconds)
{
    for (int i = 0; i < seconds * 100; i++) {
        pthread_mutex_lock(&o->hold.mu);
        bool held = cond(o);
        pthread_mutex_unlock(&o->hold.mu);
        if (held)
            return true;
        tpc_sleep_ms(10, NULL, NULL);
    }
    return false;
}

static bool is_paused(owner_t *o)
{
    return o->hold.paused_id != 0;
}

static bool has_ended(owner_t *o)
{
    return o->ended;
}

static uint64_t completed(owner_t *o)
{
    tpc_job_stats_t st;
    ck_assert_int_eq(tpc_job_get_stats(o->job, &st), TPC_OK);
    return st.checkpoints_completed;
}

static long long prepared_of_epoch(int epoch)
{
    return tpc_test_pg_long(pg, "SELECT count(*) FROM pg_prepared_xacts WHERE gid LIKE '%s:%%:e%d'",
                            prefix, epoch);
}

START_TEST(test_zombie_gid)
{
    owner_t a, b;
    owner_new(&a, "50", 2000);
    a.hold.pause_from = 4;
    ck_assert_int_eq(pthread_create(&a.thread, NULL, owner_main, &a), 0);
    ck_assert_msg(wait_until(&a, is_paused, 60), "owner 1 never reached checkpoint 4");

    owner_new(&b, "300", 10000);
    ck_assert_int_eq(pthread_create(&b.thread, NULL, owner_main, &b), 0);
    for (int i = 0; i < 6000 && completed(&b) < 1; i++)
        tpc_sleep_ms(10, NULL, NULL);
    ck_assert_uint_ge(completed(&b), 1);

    /* Owner 1 resumes: it prepares its transaction of the held checkpoint, and is fenced. */
    pthread_mutex_lock(&a.hold.mu);
    a.hold.release = true;
    pthread_cond_broadcast(&a.hold.cv);
    pthread_mutex_unlock(&a.hold.mu);
    ck_assert_msg(wait_until(&a, has_ended, 60), "owner 1 did not end");
    pthread_join(a.thread, NULL);
    ck_assert_ptr_nonnull(a.err);
    fprintf(stderr, "check_owner_pg: owner 1 ended with: %s\n", tpc_error_message(a.err));
    ck_assert_int_eq(tpc_error_code(a.err), TPC_ERR_FENCED);
    long long left = prepared_of_epoch(1);
    fprintf(stderr, "check_owner_pg: owner 1 left %lld prepared gids\n", left);
    ck_assert_int_ge(left, 1); /* what the test is about: its transaction of checkpoint 4 */

    /* Owner 2's next commits roll them back, and it finishes the input. */
    uint64_t at = completed(&b);
    for (int i = 0; i < 6000 && completed(&b) < at + 2 && !b.ended; i++)
        tpc_sleep_ms(10, NULL, NULL);
    ck_assert_int_eq(prepared_of_epoch(1), 0);
    pthread_join(b.thread, NULL);
    ck_assert_msg(b.err == NULL, "%s", tpc_error_message(b.err));
    ck_assert_int_eq(b.result, TPC_JOB_FINISHED);
    tpc_job_stats_t st;
    ck_assert_int_eq(tpc_job_get_stats(b.job, &st), TPC_OK);
    ck_assert_uint_eq(st.restarts, 0); /* no wait on the locks of owner 1's prepared gid */
    ck_assert_int_eq(tpc_test_pg_prepared(pg, prefix), 0);
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(*) FROM %s", table), RECORDS);
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(DISTINCT k) FROM %s", table), RECORDS);
    owner_free(&a);
    owner_free(&b);
}
END_TEST

static void setup(void)
{
    pg = tpc_test_pg_connect();
    ck_assert_msg(pg != NULL, "no test server: TWOPC_TEST_PG_CONNINFO");
    tpc_test_unique_name(table, sizeof table, "owner", '_');
    tpc_test_unique_name(prefix, sizeof prefix, "owner", '-');
    tpc_test_unique_name(marker, sizeof marker, "owner_markers", '_');
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea, v bytea)", table));
    char *d = tpc_test_tmpdir("owner-pg");
    snprintf(dir, sizeof dir, "%s", d);
    free(d);
}

static void teardown(void)
{
    tpc_test_pg_rollback_prefix(pg, prefix);
    tpc_test_pg_exec(pg, "DROP TABLE IF EXISTS %s", table);
    tpc_test_pg_exec(pg, "DROP TABLE IF EXISTS %s", marker);
    PQfinish(pg);
    tpc_test_rmdir(dir);
}

int main(void)
{
    Suite *s = suite_create("owner_pg");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_zombie_gid);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
