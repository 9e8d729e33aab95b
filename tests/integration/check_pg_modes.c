/*
 * What the PostgreSQL sink writes and what it refuses, on a real server: every supported type
 * through binary COPY read back with SQL, insert mode in batches, upsert mode (the latest record
 * of a key wins, also within one checkpoint and across a checkpoint still prepared, whose
 * successor's rows reach the server meanwhile instead of waiting in memory), and the
 * errors at configuration and at open — unknown keys and bad values, a missing table or column,
 * columns the default mapping cannot fill, rows that do not fit the table (which end a job without
 * restarts), an unreachable server (without its password in the
 * message), missing privileges and an upsert without a unique index. A server without prepared
 * transactions is check_pg_write_ahead.c's.
 */
#include "tpc_test_check.h"
#include "tpc_pg.h"
#include "tpc_test_env.h"
#include "tpc_test_ops.h"
#include "tpc_test_pg.h"
#include "tpc_test_txn_drive.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static PGconn *pg;
static char table[96], prefix[96], marker[96];
static tpc_test_txn_sub_t sub;

static void setup(void)
{
    pg = tpc_test_pg_connect();
    ck_assert_msg(pg != NULL, "no test server: TWOPC_TEST_PG_CONNINFO");
    tpc_test_unique_name(table, sizeof table, "pgmodes", '_');
    tpc_test_unique_name(prefix, sizeof prefix, "pgmodes", '-');
    tpc_test_unique_name(marker, sizeof marker, "pgmodes_markers", '_');
}

static void teardown(void)
{
    tpc_test_pg_rollback_prefix(pg, prefix);
    tpc_test_pg_exec(pg, "DROP TABLE IF EXISTS %s", table);
    tpc_test_pg_exec(pg, "DROP TABLE IF EXISTS %s", marker);
    PQfinish(pg);
}

static tpc_txn_sink_t *new_sink(const char *conninfo)
{
    tpc_txn_sink_t *s = NULL;
    TPC_TEST_OK(tpc_pg_sink_new(&s));
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.conninfo",
                                 conninfo ? conninfo : tpc_test_env("TWOPC_TEST_PG_CONNINFO")));
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.table", table));
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.gid-prefix", prefix));
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.marker-table", marker));
    return s;
}

static void write_range(uint64_t first, uint64_t n)
{
    for (uint64_t i = 0; i < n; i += 64)
        TPC_TEST_OK(tpc_test_txn_sub_write(&sub, first + i, n - i < 64 ? n - i : 64));
}

static void run_checkpoint(uint64_t id)
{
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, id, NULL));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, id));
}

static uint64_t key_of(const tpc_record_t *r)
{
    uint64_t v = 0;
    for (size_t i = 0; i < r->key_len; i++)
        v = v << 8 | ((const unsigned char *)r->key)[i];
    return v;
}

/* Row i: a NULL in every column when i is 1; numeric from the list; fixed values otherwise. */
static const char *const numerics[] = {
    "-12.340", "0",      "1e-5",  "123456789012345678901234567890.12345",
    "NaN",     "0.0001", "10000", "-0.5e3"};
static const char *const numerics_out[] = {
    "-12.340", NULL,     "0.00001", "123456789012345678901234567890.12345",
    "NaN",     "0.0001", "10000",   "-500"};

static tpc_error_t *all_types(void *opaque, const tpc_record_t *r, tpc_pg_row_t *row)
{
    (void)opaque;
    uint64_t i = key_of(r);
    tpc_pg_row_int8(row, (int64_t)i);
    if (i == 1) {
        for (int c = 0; c < 12; c++)
            tpc_pg_row_null(row);
        return NULL;
    }
    tpc_pg_row_int2(row, -32768);
    tpc_pg_row_int4(row, 2147483647);
    tpc_pg_row_float4(row, 1.5f);
    tpc_pg_row_float8(row, -2.25e10);
    tpc_pg_row_numeric(row, numerics[i % 8]);
    tpc_pg_row_text(row, "h\xc3\xa9llo w\xc3\xb6rld", 13);
    tpc_pg_row_text(row, "abc", 3);
    tpc_pg_row_bytea(row, "\x00\xff\x10", 3);
    tpc_pg_row_bool(row, i % 2 == 0);
    tpc_pg_row_timestamptz(row, 1614834367123456LL);
    tpc_pg_row_jsonb(row, "{\"a\": [1, 2]}", 13);
    tpc_pg_row_jsonb(row, "{\"b\":true}", 10);
    return NULL;
}

START_TEST(test_copy_every_type)
{
    ck_assert(tpc_test_pg_exec(pg,
                               "CREATE TABLE %s (i int8, a int2, b int4, c float4, d float8, "
                               "e numeric, f text, g varchar(20), h bytea, j bool, k timestamptz, "
                               "l jsonb, m json)",
                               table));
    tpc_txn_sink_t *sink = new_sink(NULL);
    TPC_TEST_OK(tpc_pg_sink_set_encoder(sink, all_types, NULL));
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    write_range(0, 8);
    run_checkpoint(1);
    tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);
    ck_assert(tpc_test_pg_exec(pg, "SET TimeZone = 'UTC'"));
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT a::text, b::text, c::text, d::text, e::text, f, g, h::text, j::text, "
             "k::text, l::text, m::text, (a IS NULL AND m IS NULL AND e IS NULL)::text "
             "FROM %s ORDER BY i",
             table);
    PGresult *res = PQexec(pg, sql);
    ck_assert_int_eq(PQresultStatus(res), PGRES_TUPLES_OK);
    ck_assert_int_eq(PQntuples(res), 8);
    for (int i = 0; i < 8; i++) {
        if (i == 1) {
            ck_assert_str_eq(PQgetvalue(res, i, 12), "true");
            continue;
        }
        const char *want[] = {"-32768",
                              "2147483647",
                              "1.5",
                              "-22500000000",
                              numerics_out[i],
                              "h\xc3\xa9llo w\xc3\xb6rld",
                              "abc",
                              "\\x00ff10",
                              i % 2 == 0 ? "true" : "false",
                              "2021-03-04 05:06:07.123456+00",
                              "{\"a\": [1, 2]}",
                              "{\"b\":true}"};
        for (int c = 0; c < 12; c++)
            ck_assert_msg(strcmp(PQgetvalue(res, i, c), want[c]) == 0,
                          "row %d column %d: \"%s\", expected \"%s\"", i, c, PQgetvalue(res, i, c),
                          want[c]);
    }
    PQclear(res);
}
END_TEST

static tpc_error_t *wrong_type(void *opaque, const tpc_record_t *r, tpc_pg_row_t *row)
{
    (void)opaque;
    (void)r;
    tpc_pg_row_int4(row, 1); /* the column is bigint */
    return NULL;
}

START_TEST(test_value_of_wrong_type_is_named)
{
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (big int8)", table));
    tpc_txn_sink_t *sink = new_sink(NULL);
    TPC_TEST_OK(tpc_pg_sink_set_encoder(sink, wrong_type, NULL));
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    tpc_error_t *err = tpc_test_txn_sub_write(&sub, 0, 1);
    ck_assert_ptr_nonnull(err);
    ck_assert_msg(strstr(tpc_error_message(err), "column \"big\" has type bigint, not integer"),
                  "%s", tpc_error_message(err));
    tpc_error_destroy(err);
    tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);
}
END_TEST

/* A job whose rows cannot fit the table: no restart can mend that, so the job ends at its first
 * failure, with the error that names the column. @returns that error. */
static tpc_error_t *run_mismatched_job(tpc_pg_encoder_t encoder, uint64_t *restarts)
{
    char *dir = tpc_test_tmpdir("pgmodes-mismatch");
    tpc_test_seq_conf_t src = {.count_default = 1000, .per_poll = 50};
    tpc_job_t *job = tpc_job_new("pgmismatch");
    TPC_TEST_OK(tpc_job_set(job, "checkpoint.dir", dir));
    TPC_TEST_OK(tpc_job_set(job, "checkpoint.interval.ms", "50"));
    TPC_TEST_OK(tpc_job_set(job, "restart.attempts", "3"));
    TPC_TEST_OK(tpc_job_set(job, "restart.delay.ms", "100"));
    tpc_job_set_logger(job, NULL, NULL, TPC_LOG_ERROR);
    tpc_txn_sink_t *sink = new_sink(NULL);
    if (encoder)
        TPC_TEST_OK(tpc_pg_sink_set_encoder(sink, encoder, NULL));
    int s, k;
    TPC_TEST_OK(tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s));
    TPC_TEST_OK(tpc_txn_sink_add_to_job(sink, job, "rows", 1, &k));
    TPC_TEST_OK(tpc_job_connect(job, s, k, TPC_EDGE_FORWARD));
    tpc_error_t *err = tpc_job_run(job, NULL);
    tpc_job_stats_t st;
    tpc_job_get_stats(job, &st);
    *restarts = st.restarts;
    ck_assert_int_eq(atomic_load(&src.opens), 1 + (int)st.restarts);
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(sink);
    tpc_test_rmdir(dir);
    free(dir);
    ck_assert_msg(err != NULL, "the job wrote rows that do not fit the table");
    return err;
}

START_TEST(test_schema_mismatch_ends_job_without_restarts)
{
    /* Caught by the sink: the encoder gives an int4 for a bigint column. */
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (big int8)", table));
    uint64_t restarts;
    tpc_error_t *err = run_mismatched_job(wrong_type, &restarts);
    ck_assert_msg(restarts == 0, "a column-type mismatch restarted the job %llu times: %s",
                  (unsigned long long)restarts, tpc_error_message(err));
    ck_assert_msg(strstr(tpc_error_message(err), "column \"big\" has type bigint, not integer"),
                  "%s", tpc_error_message(err));
    ck_assert(tpc_error_is_fatal(err));
    tpc_error_destroy(err);

    /* Caught by the server: the default mapping sends the value bytes (which hold NULs) to a
     * text column, which PostgreSQL refuses (SQLSTATE 22021). */
    ck_assert(tpc_test_pg_exec(pg, "DROP TABLE %s", table));
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea, v text)", table));
    err = run_mismatched_job(NULL, &restarts);
    ck_assert_msg(restarts == 0, "a value the column cannot hold restarted the job %llu times: %s",
                  (unsigned long long)restarts, tpc_error_message(err));
    ck_assert_msg(strstr(tpc_error_message(err), "SQLSTATE 22021"), "%s", tpc_error_message(err));
    tpc_error_destroy(err);
}
END_TEST

START_TEST(test_insert_mode_in_batches)
{
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea, v bytea)", table));
    tpc_txn_sink_t *sink = new_sink(NULL);
    TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.mode", "insert"));
    TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.batch-size", "7"));
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    write_range(0, 100);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(*) FROM %s", table), 0);
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1));
    tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(DISTINCT k) FROM %s WHERE k = v", table),
                     100);
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(*) FROM %s", table), 100);
}
END_TEST

/* Key = sequence number modulo 10 (one byte), value = the sequence number. */
static tpc_error_t *mod10(void *opaque, const tpc_record_t *r, tpc_pg_row_t *row)
{
    (void)opaque;
    uint64_t i = key_of(r);
    unsigned char k = (unsigned char)(i % 10);
    tpc_pg_row_bytea(row, &k, 1);
    tpc_pg_row_int8(row, (int64_t)i);
    return NULL;
}

START_TEST(test_upsert_latest_wins)
{
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea PRIMARY KEY, v int8)", table));
    tpc_txn_sink_t *sink = new_sink(NULL);
    TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.mode", "upsert"));
    TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.key-columns", "k"));
    TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.batch-size", "8"));
    TPC_TEST_OK(tpc_pg_sink_set_encoder(sink, mod10, NULL));
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    write_range(0, 100); /* each key ten times, several times in one statement */
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    write_range(100, 25); /* keys the prepared transaction holds: must not wait for it */
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1));
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT sum(v) FROM %s", table), 945); /* 90..99 */
    run_checkpoint(2);
    tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(*) FROM %s", table), 10);
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT sum(v) FROM %s", table), 1195); /* 115..124 */
}
END_TEST

/* Checkpoint 1 is aborted after the sink prepared its upserts; checkpoint 2 upserts the same keys,
 * which the prepared transaction holds and only this subtask could release. The pre-commit fails
 * within seconds (retriable, saying why) instead of waiting for ever; the restart from the start
 * writes both checkpoints once. */
START_TEST(test_upsert_beside_a_prepared_transaction_fails_soon)
{
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea PRIMARY KEY, v int8)", table));
    tpc_txn_sink_t *sink = new_sink(NULL);
    TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.mode", "upsert"));
    TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.key-columns", "k"));
    TPC_TEST_OK(tpc_pg_sink_set_encoder(sink, mod10, NULL));
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    write_range(0, 20);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    TPC_TEST_OK(tpc__txn_task_aborted(sub.task, 1));
    write_range(20, 10);
    double t0 = tpc_test_now_s();
    tpc_error_t *err = tpc_test_txn_sub_snapshot(&sub, 2, NULL);
    double took = tpc_test_now_s() - t0;
    ck_assert_msg(err != NULL, "the upserts went past the prepared transaction's keys");
    ck_assert_msg(strstr(tpc_error_message(err), "still prepared") &&
                      strstr(tpc_error_message(err), "55P03"),
                  "%s", tpc_error_message(err));
    ck_assert(tpc_error_is_retriable(err));
    tpc_error_destroy(err);
    ck_assert_msg(took < 10, "the upserts waited %.1f s", took);
    tpc_test_txn_sub_close(&sub);
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    write_range(0, 30);
    run_checkpoint(3);
    tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(*) FROM %s", table), 10);
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT sum(v) FROM %s", table), 245); /* 20..29 */
}
END_TEST

/* While checkpoint 1 is prepared, the upserts of checkpoint 2 go to the server as they come (COPY
 * into the transaction's staging table, which locks no key) instead of waiting in memory for the
 * commit: memory stays within pg.copy-buffer however long a checkpoint takes to complete, and the
 * next transaction is not one burst of every record that arrived meanwhile. The server's COPY
 * progress on the sink's connections (an application name of the test's own) shows the rows
 * arriving. */
START_TEST(test_upserts_reach_the_server_while_prepared)
{
    char app[96], conninfo[512];
    tpc_test_unique_name(app, sizeof app, "pgmodes_app", '_');
    snprintf(conninfo, sizeof conninfo, "%s application_name=%s",
             tpc_test_env("TWOPC_TEST_PG_CONNINFO"), app);
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea PRIMARY KEY, v int8)", table));
    tpc_txn_sink_t *sink = new_sink(conninfo);
    TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.mode", "upsert"));
    TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.key-columns", "k"));
    TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.copy-buffer", "4096"));
    TPC_TEST_OK(tpc_pg_sink_set_encoder(sink, mod10, NULL));
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    write_range(0, 100);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    write_range(100, 2000); /* about 74 KB of tuples: 18 buffers */
    long long arrived = 0;
    for (double t0 = tpc_test_now_s(); arrived < 1000 && tpc_test_now_s() - t0 < 20;) {
        arrived = tpc_test_pg_long(pg,
                                   "SELECT coalesce(max(p.tuples_processed), 0) FROM "
                                   "pg_stat_progress_copy p JOIN pg_stat_activity a USING (pid) "
                                   "WHERE a.application_name = '%s'",
                                   app);
        if (arrived < 1000)
            usleep(50000);
    }
    ck_assert_msg(arrived >= 1000, "%lld rows of 2000 reached the server while 1 was prepared",
                  arrived);
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1));
    run_checkpoint(2);
    tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(*) FROM %s", table), 10);
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT sum(v) FROM %s", table), 20945); /* 2090.. */
}
END_TEST

static void expect_set_error(const char *key, const char *value, const char *part)
{
    tpc_txn_sink_t *sink = NULL;
    TPC_TEST_OK(tpc_pg_sink_new(&sink));
    tpc_error_t *err = tpc_txn_sink_set(sink, key, value);
    ck_assert_msg(err != NULL, "%s=%s accepted", key, value);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    ck_assert_msg(strstr(tpc_error_message(err), part), "%s", tpc_error_message(err));
    tpc_error_destroy(err);
    tpc_txn_sink_destroy(sink);
}

START_TEST(test_configuration_errors)
{
    expect_set_error("pg.nonsense", "1", "\"pg.nonsense\"");
    expect_set_error("pg.mode", "merge", "\"merge\" for \"pg.mode\"");
    expect_set_error("pg.batch-size", "0", "\"pg.batch-size\"");
    expect_set_error("pg.gid-prefix", "a:b", "\"pg.gid-prefix\"");
    expect_set_error("pg.conninfo", "nonsense", "pg.conninfo");
    expect_set_error("pg.connect.deadline.ms", "-1", "pg.connect.deadline.ms");
}
END_TEST

/* Open a subtask of @sink and return the error (the test asserts it is there). */
static tpc_error_t *open_error(tpc_txn_sink_t *sink)
{
    tpc_error_t *err = tpc_test_txn_sub_open(&sub, sink, 0, 1, 0);
    if (!err)
        tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);
    ck_assert_msg(err != NULL, "open succeeded");
    ck_assert_ptr_nonnull(tpc_error_hint_text(err));
    return err;
}

static void expect_open_error(tpc_txn_sink_t *sink, tpc_err_t code, const char *part)
{
    tpc_error_t *err = open_error(sink);
    ck_assert_msg(tpc_error_code(err) == code && strstr(tpc_error_message(err), part), "%s: %s",
                  tpc_err_name(tpc_error_code(err)), tpc_error_message(err));
    tpc_error_destroy(err);
}

START_TEST(test_open_errors)
{
    expect_open_error(new_sink(NULL), TPC_ERR_CONFIG, "does not exist");
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k int4, v bytea, w text)", table));
    expect_open_error(new_sink(NULL), TPC_ERR_CONFIG, "default mapping needs two columns");
    tpc_txn_sink_t *s = new_sink(NULL);
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.columns", "v, nope"));
    expect_open_error(s, TPC_ERR_CONFIG, "column \"nope\"");
    s = new_sink(NULL);
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.columns", "v,w"));
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.mode", "upsert"));
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.key-columns", "v"));
    expect_open_error(s, TPC_ERR_CONFIG, "no unique index");

    s = new_sink("host=127.0.0.1 port=1 dbname=nowhere user=nobody password=sekrit");
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.connect.deadline.ms", "0"));
    tpc_error_t *err = open_error(s);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONNECT);
    ck_assert_msg(strstr(tpc_error_message(err), "port=1") &&
                      !strstr(tpc_error_message(err), "sekrit"),
                  "%s", tpc_error_message(err));
    tpc_error_destroy(err);

    /* A role that may log in but not write to the table, then not create the marker table. */
    char role[96], conninfo[512];
    tpc_test_unique_name(role, sizeof role, "pgmodes_role", '_');
    ck_assert(tpc_test_pg_exec(pg, "CREATE ROLE %s LOGIN", role));
    snprintf(conninfo, sizeof conninfo, "%s user=%s", tpc_test_env("TWOPC_TEST_PG_CONNINFO"), role);
    s = new_sink(conninfo);
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.columns", "v,w"));
    expect_open_error(s, TPC_ERR_CONFIG, "permission denied for table");
    ck_assert(tpc_test_pg_exec(pg, "GRANT INSERT ON %s TO %s", table, role));
    ck_assert(tpc_test_pg_exec(pg, "REVOKE CREATE ON SCHEMA public FROM PUBLIC"));
    s = new_sink(conninfo);
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.columns", "v,w"));
    err = open_error(s);
    ck_assert_msg(strstr(tpc_error_message(err), "marker table") &&
                      strstr(tpc_error_hint_text(err), "CREATE TABLE"),
                  "%s", tpc_error_message(err));
    tpc_error_destroy(err);
    tpc_test_pg_exec(pg, "DROP OWNED BY %s", role);
    tpc_test_pg_exec(pg, "DROP ROLE %s", role);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("pg_modes");
    TCase *tc = tcase_create("modes");
    tcase_set_timeout(tc, 30);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_copy_every_type);
    tcase_add_test(tc, test_value_of_wrong_type_is_named);
    tcase_add_test(tc, test_schema_mismatch_ends_job_without_restarts);
    tcase_add_test(tc, test_insert_mode_in_batches);
    tcase_add_test(tc, test_upsert_latest_wins);
    tcase_add_test(tc, test_upsert_beside_a_prepared_transaction_fails_soon);
    tcase_add_test(tc, test_upserts_reach_the_server_while_prepared);
    tcase_add_test(tc, test_configuration_errors);
    tcase_add_test(tc, test_open_errors);
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
