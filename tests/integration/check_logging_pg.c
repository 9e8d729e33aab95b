/*
 * libpq's notices go through the job's logger: a PostgreSQL sink writes into a table whose trigger
 * raises a NOTICE and a WARNING for every row; with stderr captured, the job's logger gets them as
 * the sink subtask's lines (info and warn), and nothing of them reaches stderr, where libpq's
 * default notice processor would print them.
 */
#include "tpc_pg.h"
#include "tpc_test_capture.h"
#include "tpc_test_check.h"
#include "tpc_test_env.h"
#include "tpc_test_ops.h"
#include "tpc_test_pg.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static int levels[4];

static void count_and_capture(void *opaque, tpc_log_level_t level, const char *message)
{
    if (strstr(message, "twopc-trigger-says"))
        __atomic_fetch_add(&levels[level], 1, __ATOMIC_RELAXED);
    tpc_test_capture_log(opaque, level, message);
}

START_TEST(test_server_notices_reach_the_job_logger)
{
    const char *conninfo = tpc_test_env_require("TWOPC_TEST_PG_CONNINFO");
    ck_assert_ptr_nonnull(conninfo);
    char table[96], gprefix[96];
    tpc_test_unique_name(table, sizeof table, "notices", '_');
    tpc_test_unique_name(gprefix, sizeof gprefix, "notices", '-');
    PGconn *pg = tpc_test_pg_connect();
    ck_assert_ptr_nonnull(pg);
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea, v bytea)", table));
    ck_assert(tpc_test_pg_exec(pg,
                               "CREATE FUNCTION %s_say() RETURNS trigger LANGUAGE plpgsql AS $$ "
                               "BEGIN RAISE NOTICE 'twopc-trigger-says hello'; "
                               "RAISE WARNING 'twopc-trigger-says careful'; RETURN NEW; END $$",
                               table));
    ck_assert(tpc_test_pg_exec(pg,
                               "CREATE TRIGGER say BEFORE INSERT ON %s FOR EACH STATEMENT "
                               "EXECUTE FUNCTION %s_say()",
                               table, table));
    char *dir = tpc_test_tmpdir("notices");
    tpc_test_seq_conf_t src = {.count_default = 100, .per_poll = 10};
    tpc_job_t *job = tpc_job_new("notices");
    tpc_txn_sink_t *sink = NULL;
    int s, p;
    tpc_job_set_logger(job, count_and_capture, NULL, TPC_LOG_INFO);
    TPC_TEST_OK(tpc_job_set(job, "checkpoint.dir", dir));
    TPC_TEST_OK(tpc_pg_sink_new(&sink));
    TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.conninfo", conninfo));
    TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.table", table));
    TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.gid-prefix", gprefix));
    TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.mode", "insert"));
    TPC_TEST_OK(tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s));
    TPC_TEST_OK(tpc_txn_sink_add_to_job(sink, job, "rows", 1, &p));
    TPC_TEST_OK(tpc_job_connect(job, s, p, TPC_EDGE_FORWARD));
    ck_assert(tpc_test_capture_start());
    tpc_error_t *err = tpc_job_run(job, NULL);
    const char *said = tpc_test_capture_stop(NULL);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(*) FROM %s", table), 100);
    ck_assert_msg(levels[TPC_LOG_INFO] > 0 && levels[TPC_LOG_WARN] > 0,
                  "notices %d, warnings %d in the job's log:\n%s", levels[TPC_LOG_INFO],
                  levels[TPC_LOG_WARN], said);
    ck_assert_ptr_nonnull(strstr(said, "log: \"rows\"[0]: postgresql NOTICE: twopc-trigger-says"));
    for (const char *l = said; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        const char *end = strchr(l, '\n'), *at = strstr(l, "twopc-trigger-says");
        ck_assert_msg(strncmp(l, "stderr: ", 8) != 0 || !at || (end && at > end),
                      "a notice reached stderr: %.200s", l);
    }
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(sink);
    tpc_test_pg_exec(pg, "DROP TABLE %s", table);
    tpc_test_pg_exec(pg, "DROP FUNCTION %s_say()", table);
    PQfinish(pg);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("logging_pg");
    TCase *tc = tcase_create("notices");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_server_notices_reach_the_job_logger);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
