/*
 * Smoke test of the PostgreSQL server the integration tests run against: the two-phase commit that
 * the PostgreSQL sink is built on works there. A transaction prepared on one connection is
 * committed from another, and a prepared transaction survives a crash-like restart (pg_ctl restart
 * -m immediate, run through the command in TWOPC_TEST_PG_RESTART; skipped, with a message, for a
 * server started elsewhere).
 */
#include "tpc_test_env.h"

#include <check.h>
#include <libpq-fe.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NAME_LEN 128

static PGconn *connect_db(void)
{
    const char *conninfo = tpc_test_env_require("TWOPC_TEST_PG_CONNINFO");
    ck_assert_msg(conninfo != NULL, "TWOPC_TEST_PG_CONNINFO is not set");
    PGconn *conn = PQconnectdb(conninfo);
    ck_assert_msg(PQstatus(conn) == CONNECTION_OK, "could not connect to \"%s\": %s", conninfo,
                  PQerrorMessage(conn));
    return conn;
}

/* Run one statement with text parameters; fail the test unless it succeeds. The result is the
 * caller's to PQclear. */
static PGresult *run(PGconn *conn, const char *sql, int n_params, const char *const *params)
{
    PGresult *res = PQexecParams(conn, sql, n_params, NULL, params, NULL, NULL, 0);
    ExecStatusType status = PQresultStatus(res);
    ck_assert_msg(status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK, "%s: %s", sql,
                  PQerrorMessage(conn));
    return res;
}

static void exec_ok(PGconn *conn, const char *sql)
{
    PQclear(run(conn, sql, 0, NULL));
}

static long query_long(PGconn *conn, const char *sql, int n_params, const char *const *params)
{
    PGresult *res = run(conn, sql, n_params, params);
    ck_assert_msg(PQntuples(res) == 1 && PQnfields(res) == 1, "%s: expected one value", sql);
    long value = atol(PQgetvalue(res, 0, 0));
    PQclear(res);
    return value;
}

/* Build "<verb> <quoted name><rest>" with the name quoted as an identifier or a literal. */
static void build_sql(char *sql, size_t len, PGconn *conn, const char *verb, const char *name,
                      int literal, const char *rest)
{
    char *quoted = literal ? PQescapeLiteral(conn, name, strlen(name))
                           : PQescapeIdentifier(conn, name, strlen(name));
    ck_assert_msg(quoted != NULL, "could not quote \"%s\": %s", name, PQerrorMessage(conn));
    snprintf(sql, len, "%s %s%s", verb, quoted, rest);
    PQfreemem(quoted);
}

/* Create a fresh table and prepare a transaction that inserts `rows` rows into it. */
static void prepare_insert(PGconn *conn, const char *table, const char *gid, int rows)
{
    char sql[512], count[16];
    const char *params[] = {count};

    build_sql(sql, sizeof sql, conn, "CREATE TABLE", table, 0, " (id int PRIMARY KEY, v text)");
    exec_ok(conn, sql);
    exec_ok(conn, "BEGIN");
    snprintf(count, sizeof count, "%d", rows);
    build_sql(sql, sizeof sql, conn, "INSERT INTO", table, 0,
              " SELECT g, 'row ' || g FROM generate_series(1, $1::int) AS g");
    PQclear(run(conn, sql, 1, params));
    build_sql(sql, sizeof sql, conn, "PREPARE TRANSACTION", gid, 1, "");
    exec_ok(conn, sql);
}

static long count_rows(PGconn *conn, const char *table)
{
    char sql[256];
    build_sql(sql, sizeof sql, conn, "SELECT count(*) FROM", table, 0, "");
    return query_long(conn, sql, 0, NULL);
}

static long count_prepared(PGconn *conn, const char *gid)
{
    const char *params[] = {gid};
    return query_long(conn, "SELECT count(*) FROM pg_prepared_xacts WHERE gid = $1", 1, params);
}

static void finish_gid(PGconn *conn, const char *verb, const char *gid)
{
    char sql[256];
    build_sql(sql, sizeof sql, conn, verb, gid, 1, "");
    exec_ok(conn, sql);
}

static void drop_table(PGconn *conn, const char *table)
{
    char sql[256];
    build_sql(sql, sizeof sql, conn, "DROP TABLE", table, 0, "");
    exec_ok(conn, sql);
}

START_TEST(test_commit_prepared_from_another_connection)
{
    char table[NAME_LEN], gid[NAME_LEN], sql[256];
    PGconn *data = connect_db();
    PGconn *control = connect_db();

    ck_assert_msg(query_long(control, "SELECT current_setting('max_prepared_transactions')::int", 0,
                             NULL) > 0,
                  "prepared transactions are disabled; set max_prepared_transactions > 0");

    tpc_test_unique_name(table, sizeof table, "twopc_smoke", '_');
    tpc_test_unique_name(gid, sizeof gid, "twopc-smoke", '-');
    prepare_insert(data, table, gid, 3);

    /* The data connection is free again, and nobody sees the rows before the commit. */
    ck_assert_int_eq(count_rows(data, table), 0);
    ck_assert_int_eq(count_prepared(control, gid), 1);

    finish_gid(control, "COMMIT PREPARED", gid);
    ck_assert_int_eq(count_rows(data, table), 3);
    ck_assert_int_eq(count_prepared(control, gid), 0);

    /* A second commit of the same gid fails with undefined_object: what tells a retried commit that
     * the transaction is gone. */
    build_sql(sql, sizeof sql, control, "COMMIT PREPARED", gid, 1, "");
    PGresult *res = PQexec(control, sql);
    ck_assert_int_eq(PQresultStatus(res), PGRES_FATAL_ERROR);
    ck_assert_str_eq(PQresultErrorField(res, PG_DIAG_SQLSTATE), "42704");
    PQclear(res);

    drop_table(control, table);
    PQfinish(data);
    PQfinish(control);
}
END_TEST

START_TEST(test_prepared_transaction_survives_immediate_restart)
{
    char table[NAME_LEN], gid[NAME_LEN];
    const char *restart = tpc_test_env("TWOPC_TEST_PG_RESTART");
    PGconn *conn = connect_db();

    tpc_test_unique_name(table, sizeof table, "twopc_smoke", '_');
    tpc_test_unique_name(gid, sizeof gid, "twopc-smoke", '-');
    prepare_insert(conn, table, gid, 5);
    PQfinish(conn);

    if (restart) {
        int status = system(restart);
        ck_assert_msg(status == 0, "restart command \"%s\" failed (status %d)", restart, status);
    } else {
        fprintf(stderr, "check_pg_smoke: TWOPC_TEST_PG_RESTART is not set (the server was started "
                        "elsewhere), so the restart part of this test is skipped\n");
    }

    /* A new connection: the server may still be finishing crash recovery. */
    time_t deadline = time(NULL) + 30;
    do {
        conn = PQconnectdb(tpc_test_env("TWOPC_TEST_PG_CONNINFO"));
        if (PQstatus(conn) == CONNECTION_OK)
            break;
        PQfinish(conn);
        conn = NULL;
        struct timespec pause = {0, 200 * 1000 * 1000};
        nanosleep(&pause, NULL);
    } while (time(NULL) < deadline);
    ck_assert_msg(conn != NULL, "server did not accept connections within 30 s of the restart");

    ck_assert_int_eq(count_prepared(conn, gid), 1);
    ck_assert_int_eq(count_rows(conn, table), 0);
    finish_gid(conn, "COMMIT PREPARED", gid);
    ck_assert_int_eq(count_rows(conn, table), 5);

    drop_table(conn, table);
    PQfinish(conn);
}
END_TEST

static Suite *pg_smoke_suite(void)
{
    Suite *s = suite_create("pg_smoke");
    TCase *tc = tcase_create("two_phase_commit");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_commit_prepared_from_another_connection);
    tcase_add_test(tc, test_prepared_transaction_survives_immediate_restart);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(pg_smoke_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
