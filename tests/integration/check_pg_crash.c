/*
 * Exactly-once into PostgreSQL under crashes, with the real server:
 *
 * - kill -9: a separate process runs sequence source -> pg sink (checkpoints every 50 to 200 ms,
 *   chosen per scenario) and is killed with SIGKILL at random moments, then started again on the
 *   same checkpoint folder, until a run ends on its own. Then SQL must show every input record
 *   exactly once and no prepared transaction of the sink may be left. Kills land anywhere: at
 *   start and recovery, while copying, around PREPARE, between a checkpoint's completion and its
 *   COMMIT PREPARED. The child is this test binary, run again with "--crash-child"; the random
 *   seed is printed, TWOPC_CRASH_SEED repeats a run.
 * - a server restart (TWOPC_TEST_PG_RESTART, pg_ctl restart -m immediate) in the middle of a run:
 *   the job fails over to a restart, waits for the server, and ends with nothing lost or doubled.
 * - two sources into one sink, one ending long before the other: all rows are committed at the
 *   end (the final checkpoint).
 */
#include "tpc_pg.h"
#include "tpc_test_crash.h"
#include "tpc_test_env.h"
#include "tpc_test_ops.h"
#include "tpc_test_pg.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define KILLS_WANTED       33
#define KILLS_PER_SCENARIO 11
#define RECORDS            20000

typedef struct {
    const char *ckpt, *table, *prefix, *marker, *interval;
    tpc_test_seq_conf_t src;
    int sources;
    const char *attempts;
} job_args_t;

static tpc_error_t *run_job(job_args_t *a)
{
    tpc_job_t *job = tpc_job_new("pgcrash");
    tpc_txn_sink_t *sink = NULL;
    int s, k;
    tpc_error_t *err = tpc_job_set(job, "checkpoint.dir", a->ckpt);
    if (!err)
        err = tpc_job_set(job, "checkpoint.interval.ms", a->interval);
    if (!err)
        err = tpc_job_set(job, "restart.delay.ms", "200");
    if (!err)
        err = tpc_job_set(job, "restart.attempts", a->attempts);
    if (!err)
        err = tpc_pg_sink_new(&sink);
    const char *kv[][2] = {{"pg.conninfo", tpc_test_env("TWOPC_TEST_PG_CONNINFO")},
                           {"pg.table", a->table},
                           {"pg.gid-prefix", a->prefix},
                           {"pg.marker-table", a->marker},
                           {"commit.retry.backoff.ms", "20"}};
    for (size_t i = 0; i < sizeof kv / sizeof *kv && !err; i++)
        err = tpc_txn_sink_set(sink, kv[i][0], kv[i][1]);
    if (!err)
        err = tpc_job_add_vertex(job, "source", a->sources, &tpc_test_seq_source_ops, &a->src, &s);
    if (!err)
        err = tpc_txn_sink_add_to_job(sink, job, "rows", 1, &k);
    if (!err)
        err = tpc_job_connect(job, s, k, a->sources == 1 ? TPC_EDGE_FORWARD : TPC_EDGE_REBALANCE);
    tpc_job_result_t result = TPC_JOB_CANCELED;
    if (!err)
        err = tpc_job_run(job, &result);
    if (!err && result != TPC_JOB_FINISHED)
        err = tpc_error_new(TPC_ERR_STATE, 0, "job did not finish");
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(sink);
    return err;
}

static int child_main(char **argv)
{
    job_args_t a = {.ckpt = argv[2],
                    .table = argv[3],
                    .prefix = argv[4],
                    .marker = argv[5],
                    .interval = argv[6],
                    .src = {.count_default = RECORDS, .per_poll = 16, .sleep_us = 500},
                    .sources = 1,
                    .attempts = "3"};
    tpc_error_t *err = run_job(&a);
    if (err)
        fprintf(stderr, "crash child: %s\n", tpc_error_message(err));
    int rc = err ? 1 : 0;
    tpc_error_destroy(err);
    return rc;
}

/* The table holds keys of source subtask @sub 0 .. n-1 exactly once each, and nothing else. */
static void expect_exactly(PGconn *pg, const char *table, long long total, const char *why)
{
    long long rows = tpc_test_pg_long(pg, "SELECT count(*) FROM %s", table);
    long long distinct = tpc_test_pg_long(pg, "SELECT count(DISTINCT k) FROM %s", table);
    long long clean = tpc_test_pg_long(pg, "SELECT count(*) FROM %s WHERE k = v", table);
    ck_assert_msg(rows == total && distinct == total && clean == total,
                  "%s: %lld rows, %lld distinct keys, expected %lld each", why, rows, distinct,
                  total);
}

START_TEST(test_kill_9_and_restart)
{
    uint64_t seed = tpc_test_crash_seed();
    tpc_test_rng_t rng;
    tpc_test_rng_init(&rng, seed);
    char self[4096];
    ck_assert(tpc_test_self_path(self, sizeof self));
    PGconn *pg = tpc_test_pg_connect();
    ck_assert_ptr_nonnull(pg);

    int kills = 0, runs = 0, scenarios = 0;
    double t0 = tpc_test_now_s();
    while (kills < KILLS_WANTED) {
        char table[96], prefix[96], marker[96], interval[16], log[4200];
        tpc_test_unique_name(table, sizeof table, "pgcrash", '_');
        tpc_test_unique_name(prefix, sizeof prefix, "pgcrash", '-');
        tpc_test_unique_name(marker, sizeof marker, "pgcrash_markers", '_');
        snprintf(interval, sizeof interval, "%d", 50 + (int)(tpc_test_rng_next(&rng) % 151));
        ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea, v bytea)", table));
        char *ckpt = tpc_test_tmpdir("pgcrash-ckpt");
        snprintf(log, sizeof log, "%s.log", ckpt);
        const char *argv[] = {self, "--crash-child", ckpt, table, prefix, marker, interval, NULL};
        tpc_test_crash_plan_t plan = {.argv = argv,
                                      .log = log,
                                      .kills = KILLS_PER_SCENARIO < KILLS_WANTED - kills
                                                   ? KILLS_PER_SCENARIO
                                                   : KILLS_WANTED - kills,
                                      .early_one_in = 5,
                                      .early_ms = 30,
                                      .min_ms = 20,
                                      .span_ms = 300,
                                      .last_run_ms = 60000};
        tpc_test_crash_result_t res;
        bool ok = tpc_test_crash_run(&plan, &rng, &res);
        kills += res.kills;
        runs += res.runs;
        ck_assert_msg(ok, "child run %d (seed %llu) %s", runs, (unsigned long long)seed,
                      res.ended ? "failed" : "did not end");
        char why[128];
        snprintf(why, sizeof why, "after %d kills (seed %llu, interval %s ms)", res.kills,
                 (unsigned long long)seed, interval);
        expect_exactly(pg, table, RECORDS, why);
        ck_assert_msg(tpc_test_pg_prepared(pg, prefix) == 0, "prepared transactions left %s", why);
        tpc_test_pg_exec(pg, "DROP TABLE %s", table);
        tpc_test_pg_exec(pg, "DROP TABLE %s", marker);
        unlink(log);
        tpc_test_rmdir(ckpt);
        free(ckpt);
        scenarios++;
    }
    printf("pg crash test: %d kill -9 over %d runs in %d scenarios, %.1f s, seed %llu\n", kills,
           runs, scenarios, tpc_test_now_s() - t0, (unsigned long long)seed);
    fflush(stdout);
    PQfinish(pg);
}
END_TEST

typedef struct {
    job_args_t args;
    tpc_error_t *err;
} job_thread_t;

static void *job_thread(void *arg)
{
    job_thread_t *j = arg;
    j->err = run_job(&j->args);
    return NULL;
}

/* Run a job in-process; @during runs on this thread while it goes. */
static void run_scenario(const char *tag, tpc_test_seq_conf_t src, int sources, long long total,
                         void (*during)(void))
{
    PGconn *pg = tpc_test_pg_connect();
    ck_assert_ptr_nonnull(pg);
    char table[96], prefix[96], marker[96];
    tpc_test_unique_name(table, sizeof table, tag, '_');
    tpc_test_unique_name(prefix, sizeof prefix, tag, '-');
    tpc_test_unique_name(marker, sizeof marker, "pgcrash_markers", '_');
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea, v bytea)", table));
    char *ckpt = tpc_test_tmpdir(tag);
    job_thread_t j = {.args = {.ckpt = ckpt,
                               .table = table,
                               .prefix = prefix,
                               .marker = marker,
                               .interval = "100",
                               .src = src,
                               .sources = sources,
                               .attempts = "20"}};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, job_thread, &j), 0);
    if (during)
        during();
    pthread_join(th, NULL);
    ck_assert_msg(j.err == NULL, "job: %s", tpc_error_message(j.err));
    PQfinish(pg);
    pg = tpc_test_pg_connect();
    expect_exactly(pg, table, total, tag);
    ck_assert_int_eq(tpc_test_pg_prepared(pg, prefix), 0);
    tpc_test_pg_exec(pg, "DROP TABLE %s", table);
    tpc_test_pg_exec(pg, "DROP TABLE %s", marker);
    PQfinish(pg);
    tpc_test_rmdir(ckpt);
    free(ckpt);
}

static void restart_server(void)
{
    struct timespec ts = {0, 600 * 1000 * 1000};
    nanosleep(&ts, NULL);
    int rc = system(tpc_test_env("TWOPC_TEST_PG_RESTART"));
    ck_assert_msg(rc == 0, "restart command failed (%d)", rc);
}

START_TEST(test_server_restart_mid_run)
{
    if (!tpc_test_env("TWOPC_TEST_PG_RESTART")) {
        fprintf(stderr, "check_pg_crash: TWOPC_TEST_PG_RESTART is not set (the server was started "
                        "elsewhere), so the server restart test is skipped\n");
        return;
    }
    tpc_test_seq_conf_t src = {.count_default = 12000, .per_poll = 16, .sleep_us = 1000};
    run_scenario("pgrestart", src, 1, 12000, restart_server);
}
END_TEST

START_TEST(test_two_sources_one_ending_early)
{
    tpc_test_seq_conf_t src = {.count = {100, 3000}, .per_poll = 16, .sleep_us = 1000};
    run_scenario("pgtwosrc", src, 2, 3100, NULL);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc == 7 && strcmp(argv[1], "--crash-child") == 0)
        return child_main(argv);
    Suite *s = suite_create("pg_crash");
    TCase *tc = tcase_create("crash");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_kill_9_and_restart);
    tcase_add_test(tc, test_server_restart_mid_run);
    tcase_add_test(tc, test_two_sources_one_ending_early);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
