/*
 * One PostgreSQL sink, several tables (pg.table lists them), on the real server: each record
 * gives an order row and two line rows (tpc_pg_row_table()), and every table of a checkpoint
 * commits in the sink's one prepared transaction, in each mode. A reader polling both tables in
 * one REPEATABLE READ snapshot while a job runs never sees the lines of a checkpoint without its
 * orders or the other way round; the COPY buffers are small, so a transaction's rows alternate
 * between the tables many times. Also the errors of a table list that does not fit.
 */
#include "tpc_test_check.h"
#include "tpc_pg.h"
#include "tpc_test_env.h"
#include "tpc_test_ops.h"
#include "tpc_test_pg.h"
#include "tpc_test_txn_drive.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JOB_RECORDS 20000

static PGconn *pg;
static char schema[96], tables[300], prefix[96], marker[200];
static tpc_test_txn_sub_t sub;

static void setup(void)
{
    pg = tpc_test_pg_connect();
    ck_assert_msg(pg != NULL, "no test server: TWOPC_TEST_PG_CONNINFO");
    tpc_test_unique_name(schema, sizeof schema, "pgtables", '_');
    tpc_test_unique_name(prefix, sizeof prefix, "pgtables", '-');
    snprintf(tables, sizeof tables, "%s.orders, %s.lines", schema, schema);
    snprintf(marker, sizeof marker, "%s.markers", schema);
    ck_assert(tpc_test_pg_exec(pg, "CREATE SCHEMA %s", schema));
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s.orders (id int8 PRIMARY KEY, n int4)", schema));
    ck_assert(tpc_test_pg_exec(
        pg, "CREATE TABLE %s.lines (order_id int8, line int4, PRIMARY KEY (order_id, line))",
        schema));
}

static void teardown(void)
{
    tpc_test_pg_rollback_prefix(pg, prefix);
    tpc_test_pg_exec(pg, "DROP SCHEMA %s CASCADE", schema);
    PQfinish(pg);
}

/* Record i: order i with 2 lines, 0 and 1. */
static tpc_error_t *order_with_lines(void *opaque, const tpc_record_t *r, tpc_pg_row_t *row)
{
    (void)opaque;
    int subtask;
    uint64_t i = 0;
    tpc_test_seq_decode(r->key, r->key_len, &subtask, &i);
    tpc_pg_row_int8(row, (int64_t)i);
    tpc_pg_row_int4(row, 2);
    for (int line = 0; line < 2; line++) {
        tpc_pg_row_table(row, 1);
        tpc_pg_row_int8(row, (int64_t)i);
        tpc_pg_row_int4(row, line);
    }
    return NULL;
}

static tpc_txn_sink_t *new_sink(const char *mode)
{
    tpc_txn_sink_t *s = NULL;
    TPC_TEST_OK(tpc_pg_sink_new(&s));
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.conninfo", tpc_test_env("TWOPC_TEST_PG_CONNINFO")));
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.table", tables));
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.gid-prefix", prefix));
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.marker-table", marker));
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.mode", mode));
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.copy-buffer", "4096"));
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.batch-size", "7"));
    if (strcmp(mode, "upsert") == 0 || strcmp(mode, "changelog") == 0)
        TPC_TEST_OK(tpc_txn_sink_set(s, "pg.key-columns", "id; order_id, line"));
    TPC_TEST_OK(tpc_pg_sink_set_encoder(s, order_with_lines, NULL));
    return s;
}

static void expect_counts(long long orders, const char *why)
{
    long long o = tpc_test_pg_long(pg, "SELECT count(*) FROM %s.orders", schema);
    long long l = tpc_test_pg_long(pg, "SELECT count(*) FROM %s.lines", schema);
    long long joined = tpc_test_pg_long(
        pg, "SELECT count(*) FROM %s.lines l JOIN %s.orders o ON o.id = l.order_id", schema,
        schema);
    ck_assert_msg(o == orders && l == 2 * orders && joined == l,
                  "%s: %lld orders, %lld lines (%lld with their order), expected %lld and %lld",
                  why, o, l, joined, orders, 2 * orders);
}

static const char *const modes[] = {"copy", "insert", "upsert", "changelog"};

START_TEST(test_tables_of_a_checkpoint_commit_together)
{
    const char *mode = modes[_i];
    tpc_txn_sink_t *sink = new_sink(mode);
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    for (uint64_t i = 0; i < 500; i += 50)
        TPC_TEST_OK(tpc_test_txn_sub_write(&sub, i, 50));
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    expect_counts(0, mode);
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1));
    expect_counts(500, mode);
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 500, 10));
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 2, NULL));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 2));
    expect_counts(510, mode);
    tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);
    ck_assert_int_eq(tpc_test_pg_prepared(pg, prefix), 0);
}
END_TEST

typedef struct {
    tpc_txn_sink_t *sink;
    char *dir;
    tpc_error_t *err;
    atomic_bool done;
} job_t;

static void *run_job(void *arg)
{
    job_t *j = arg;
    tpc_test_seq_conf_t src = {.count_default = JOB_RECORDS, .per_poll = 16, .sleep_us = 300};
    tpc_job_t *job = tpc_job_new("pgtables");
    int s, k;
    tpc_error_t *err = tpc_job_set(job, "checkpoint.dir", j->dir);
    if (!err)
        err = tpc_job_set(job, "checkpoint.interval.ms", "50");
    if (!err)
        err = tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s);
    if (!err)
        err = tpc_txn_sink_add_to_job(j->sink, job, "rows", 1, &k);
    if (!err)
        err = tpc_job_connect(job, s, k, TPC_EDGE_FORWARD);
    if (!err)
        err = tpc_job_run(job, NULL);
    tpc_job_destroy(job);
    j->err = err;
    atomic_store(&j->done, true);
    return NULL;
}

/* Count both tables in one REPEATABLE READ snapshot. */
static void snapshot_counts(PGconn *reader, long long *orders, long long *lines)
{
    ck_assert(tpc_test_pg_exec(reader, "BEGIN ISOLATION LEVEL REPEATABLE READ"));
    *orders = tpc_test_pg_long(reader, "SELECT count(*) FROM %s.orders", schema);
    *lines = tpc_test_pg_long(reader, "SELECT count(*) FROM %s.lines", schema);
    ck_assert(tpc_test_pg_exec(reader, "COMMIT"));
}

START_TEST(test_reader_sees_every_table_of_a_checkpoint_or_none)
{
    const char *mode = _i ? "changelog" : "copy";
    job_t j = {.sink = new_sink(mode), .dir = tpc_test_tmpdir("pgtables")};
    PGconn *reader = tpc_test_pg_connect();
    ck_assert_ptr_nonnull(reader);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, run_job, &j), 0);
    long long orders = 0, lines = 0, last = -1;
    int polls = 0, states = 0;
    while (!atomic_load(&j.done)) {
        snapshot_counts(reader, &orders, &lines);
        ck_assert_msg(orders >= 0 && lines == 2 * orders,
                      "%s: a snapshot holds %lld orders but %lld lines", mode, orders, lines);
        states += orders != last && orders > 0 && orders < JOB_RECORDS;
        last = orders;
        polls++;
    }
    pthread_join(th, NULL);
    ck_assert_msg(j.err == NULL, "job: %s", tpc_error_message(j.err));
    snapshot_counts(reader, &orders, &lines);
    ck_assert_int_eq(orders, JOB_RECORDS);
    ck_assert_int_eq(lines, 2 * JOB_RECORDS);
    /* The reader must have looked while the job was half-way, or it proved nothing. */
    ck_assert_msg(states >= 3, "%s: only %d partial states in %d polls", mode, states, polls);
    printf("pg tables (%s): %d snapshots, %d partial states, none half-committed\n", mode, polls,
           states);
    PQfinish(reader);
    tpc_txn_sink_destroy(j.sink);
    tpc_test_rmdir(j.dir);
    free(j.dir);
}
END_TEST

static void expect_open_error(tpc_txn_sink_t *sink, const char *part)
{
    tpc_error_t *err = tpc_test_txn_sub_open(&sub, sink, 0, 1, 0);
    if (!err)
        tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);
    ck_assert_msg(err != NULL, "open succeeded");
    ck_assert_msg(tpc_error_code(err) == TPC_ERR_CONFIG && strstr(tpc_error_message(err), part) &&
                      tpc_error_hint_text(err),
                  "%s", tpc_error_message(err));
    tpc_error_destroy(err);
}

START_TEST(test_table_lists_that_do_not_fit)
{
    tpc_txn_sink_t *s = new_sink("copy");
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.columns", "id, n"));
    expect_open_error(s, "\"pg.columns\" has 1 lists for the 2 tables of pg.table");
    s = new_sink("changelog");
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.key-columns", "id"));
    expect_open_error(s, "\"pg.key-columns\" has 1 lists for the 2 tables");
    /* One table and two lists: not the first list silently. */
    char one[200];
    snprintf(one, sizeof one, "%s.orders", schema);
    s = new_sink("copy");
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.table", one));
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.columns", "id, total; order_id, line"));
    expect_open_error(s, "\"pg.columns\" has 2 lists for the 1 tables");
    s = new_sink("changelog");
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.table", one));
    expect_open_error(s, "\"pg.key-columns\" has 2 lists for the 1 tables");
    s = new_sink("copy");
    TPC_TEST_OK(tpc_pg_sink_set_encoder(s, NULL, NULL));
    expect_open_error(s, "no encoder to choose a record's table");
    s = new_sink("copy");
    char missing[300];
    snprintf(missing, sizeof missing, "%s.orders,%s.nope", schema, schema);
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.table", missing));
    expect_open_error(s, ".nope\" does not exist");
    tpc_txn_sink_t *bad = NULL;
    TPC_TEST_OK(tpc_pg_sink_new(&bad));
    tpc_error_t *err = tpc_txn_sink_set(bad, "pg.table", "a,,b");
    ck_assert_ptr_nonnull(err);
    ck_assert_msg(strstr(tpc_error_message(err), "\"pg.table\""), "%s", tpc_error_message(err));
    tpc_error_destroy(err);
    tpc_txn_sink_destroy(bad);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pg_tables");
    TCase *tc = tcase_create("tables");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_tables_of_a_checkpoint_commit_together, 0, 4);
    tcase_add_loop_test(tc, test_reader_sees_every_table_of_a_checkpoint_or_none, 0, 2);
    tcase_add_test(tc, test_table_lists_that_do_not_fit);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
