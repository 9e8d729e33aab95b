/*
 * Changelogs into PostgreSQL (pg.mode=changelog), on the real server: upserts and deletes applied
 * by key, the latest operation of a key in a checkpoint winning (a delete after an upsert removes
 * the row, an upsert after a delete brings it back), nothing visible before the checkpoint
 * completes; Kafka tombstones as deletes (pg.tombstone=delete); records an encoder skips; the
 * errors of operations a mode cannot apply; a write-ahead move done again after a failed one; and
 * exactly once under kill -9.
 *
 * The changelog is a function of the record's sequence number i: key (i * 7919) mod KEYS, a delete
 * when i mod 5 is 2, else an upsert of value i. The expected table is that changelog applied once,
 * in order, computed here; the table read back by SQL must equal it.
 *
 * kill -9: a separate process runs sequence source -> changelog sink (checkpoints every 50 to 200
 * ms, small COPY buffers so that a transaction stages its rows in several pieces) and is killed
 * with SIGKILL at random moments (start and recovery, while staging, around the merge and PREPARE,
 * between a checkpoint's completion and its COMMIT PREPARED), then started again on the same
 * checkpoint folder, until a run ends on its own. The seed is printed; TWOPC_CRASH_SEED repeats it.
 * Each scenario has a schema of its own; no staging table may be left in it.
 */
#include "tpc_test_check.h"
#include "tpc_pg.h"
#include "tpc_test_crash.h"
#include "tpc_test_env.h"
#include "tpc_test_ops.h"
#include "tpc_test_pg.h"
#include "tpc_test_txn_drive.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KEYS          97
#define CRASH_RECORDS 20000
#define KILLS_WANTED  22
#define KILLS_PER_RUN 11

static PGconn *pg;
static char schema[96], table[200], prefix[96], marker[200];
static tpc_test_txn_sub_t sub;

static void names(void)
{
    tpc_test_unique_name(schema, sizeof schema, "pgchangelog", '_');
    tpc_test_unique_name(prefix, sizeof prefix, "pgchangelog", '-');
    snprintf(table, sizeof table, "%s.t", schema);
    snprintf(marker, sizeof marker, "%s.markers", schema);
}

static void setup(void)
{
    pg = tpc_test_pg_connect();
    ck_assert_msg(pg != NULL, "no test server: TWOPC_TEST_PG_CONNINFO");
    names();
    ck_assert(tpc_test_pg_exec(pg, "CREATE SCHEMA %s", schema));
}

static void teardown(void)
{
    tpc_test_pg_rollback_prefix(pg, prefix);
    tpc_test_pg_exec(pg, "DROP SCHEMA %s CASCADE", schema);
    PQfinish(pg);
}

static uint64_t seq_of(const tpc_record_t *r)
{
    int subtask;
    uint64_t seq = 0;
    tpc_test_seq_decode(r->key, r->key_len, &subtask, &seq);
    return seq;
}

static int64_t key_of(uint64_t i)
{
    return (int64_t)((i * 7919) % KEYS);
}

static bool is_delete(uint64_t i)
{
    return i % 5 == 2;
}

static tpc_error_t *changelog(void *opaque, const tpc_record_t *r, tpc_pg_row_t *row)
{
    (void)opaque;
    uint64_t i = seq_of(r);
    tpc_pg_row_op(row, is_delete(i) ? TPC_PG_OP_DELETE
                       : i % 3      ? TPC_PG_OP_UPSERT
                                    : TPC_PG_OP_INSERT);
    tpc_pg_row_int8(row, key_of(i));
    if (is_delete(i))
        tpc_pg_row_null(row);
    else
        tpc_pg_row_int8(row, (int64_t)i);
    return NULL;
}

/* The table must equal records 0 .. n-1 of the changelog applied once, in order. */
static void expect_applied(PGconn *conn, const char *tbl, uint64_t n, const char *why)
{
    bool present[KEYS] = {false};
    int64_t value[KEYS] = {0};
    for (uint64_t i = 0; i < n; i++) {
        present[key_of(i)] = !is_delete(i);
        value[key_of(i)] = (int64_t)i;
    }
    char sql[300];
    snprintf(sql, sizeof sql, "SELECT k, v FROM %s ORDER BY k", tbl);
    PGresult *res = PQexec(conn, sql);
    ck_assert_msg(PQresultStatus(res) == PGRES_TUPLES_OK, "%s", PQerrorMessage(conn));
    int row = 0, want = 0;
    for (int k = 0; k < KEYS; k++) {
        if (!present[k])
            continue;
        want++;
        ck_assert_msg(row < PQntuples(res) && atoll(PQgetvalue(res, row, 0)) == k,
                      "%s: key %d (value %lld) is missing; row %d holds key %s", why, k,
                      (long long)value[k], row,
                      row < PQntuples(res) ? PQgetvalue(res, row, 0) : "none");
        ck_assert_msg(atoll(PQgetvalue(res, row, 1)) == value[k],
                      "%s: key %d holds %s, expected %lld", why, k, PQgetvalue(res, row, 1),
                      (long long)value[k]);
        row++;
    }
    ck_assert_msg(PQntuples(res) == want, "%s: %d rows, expected %d (a deleted key is back)", why,
                  PQntuples(res), want);
    PQclear(res);
}

/* Staging tables left in the schema (none may be, once a transaction ends). */
static long long staging_tables(PGconn *conn)
{
    return tpc_test_pg_long(conn,
                            "SELECT count(*) FROM pg_class c JOIN pg_namespace n "
                            "ON n.oid = c.relnamespace WHERE n.nspname = '%s' "
                            "AND c.relname LIKE 'twopc_stage_%%'",
                            schema);
}

static tpc_txn_sink_t *new_sink(const char *mode, const char *keys)
{
    tpc_txn_sink_t *s = NULL;
    TPC_TEST_OK(tpc_pg_sink_new(&s));
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.conninfo", tpc_test_env("TWOPC_TEST_PG_CONNINFO")));
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.table", table));
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.gid-prefix", prefix));
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.marker-table", marker));
    if (mode)
        TPC_TEST_OK(tpc_txn_sink_set(s, "pg.mode", mode));
    if (keys)
        TPC_TEST_OK(tpc_txn_sink_set(s, "pg.key-columns", keys));
    return s;
}

static void write_range(uint64_t first, uint64_t n)
{
    for (uint64_t i = 0; i < n; i += 64)
        TPC_TEST_OK(tpc_test_txn_sub_write(&sub, first + i, n - i < 64 ? n - i : 64));
}

START_TEST(test_latest_operation_of_a_key_wins)
{
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k int8 PRIMARY KEY, v int8)", table));
    tpc_txn_sink_t *sink = new_sink("changelog", "k");
    TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.copy-buffer", "4096")); /* several pieces */
    TPC_TEST_OK(tpc_pg_sink_set_encoder(sink, changelog, NULL));
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    write_range(0, 1000); /* each key about ten times, deletes among them */
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(*) FROM %s", table), 0);
    write_range(1000, 700); /* staged while checkpoint 1 is prepared, keys it holds */
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1));
    expect_applied(pg, table, 1000, "after checkpoint 1");
    write_range(1700, 300);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 2, NULL));
    expect_applied(pg, table, 1000, "checkpoint 2 prepared");
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 2));
    expect_applied(pg, table, 2000, "after checkpoint 2");
    tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);
    ck_assert_int_eq(staging_tables(pg), 0);
}
END_TEST

/* The same changelog into two tables. */
static tpc_error_t *changelog_twice(void *opaque, const tpc_record_t *r, tpc_pg_row_t *row)
{
    tpc_error_t *err = changelog(opaque, r, row);
    tpc_pg_row_table(row, 1);
    return err ? err : changelog(opaque, r, row);
}

/* Write-ahead commit: a move that fails half-way (the second table's staging table cannot be made:
 * a table of its name is in the way) rolls back with the first table's staging table; the move
 * again, once the way is clear, makes both anew and applies the changelog once to each table. */
START_TEST(test_write_ahead_move_again_after_a_failed_one)
{
    char second[220], tables[450], ahead[220];
    snprintf(second, sizeof second, "%s.t2", schema);
    snprintf(tables, sizeof tables, "%s,%s", table, second);
    snprintf(ahead, sizeof ahead, "%s.ahead", schema);
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k int8 PRIMARY KEY, v int8)", table));
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k int8 PRIMARY KEY, v int8)", second));
    tpc_txn_sink_t *sink = new_sink("changelog", "k;k");
    TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.table", tables));
    TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.commit", "write-ahead"));
    TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.write-ahead-table", ahead));
    TPC_TEST_OK(tpc_pg_sink_set_encoder(sink, changelog_twice, NULL));
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    write_range(0, 500);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    /* The move names its staging tables after the transaction's gid (FNV-1a, 64 bits). */
    char gid[200];
    snprintf(gid, sizeof gid, "%s:0:1:1", prefix);
    uint64_t h = 14695981039346656037ull;
    for (const char *p = gid; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s.twopc_stage_%016llx_1 (x int)", schema,
                               (unsigned long long)h));
    tpc_error_t *err = tpc__txn_task_complete(sub.task, 1);
    ck_assert_msg(err != NULL, "the move made a staging table where a table was in the way");
    tpc_error_destroy(err);
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(*) FROM %s", table), 0);
    ck_assert(
        tpc_test_pg_exec(pg, "DROP TABLE %s.twopc_stage_%016llx_1", schema, (unsigned long long)h));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1));
    expect_applied(pg, table, 500, "first table, after the second move");
    expect_applied(pg, second, 500, "second table, after the second move");
    tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);
    ck_assert_int_eq(staging_tables(pg), 0);
}
END_TEST

/* Write records with these keys and values (NULL value: a tombstone). */
static void write_kv(const char *const (*kv)[2], size_t n)
{
    tpc_record_t recs[16];
    for (size_t i = 0; i < n; i++)
        recs[i] = (tpc_record_t){.key = kv[i][0],
                                 .key_len = strlen(kv[i][0]),
                                 .value = kv[i][1] ? kv[i][1] : "",
                                 .value_len = kv[i][1] ? strlen(kv[i][1]) : 0,
                                 .flags = kv[i][1] ? 0 : TPC_RECORD_NULL_VALUE};
    TPC_TEST_OK(tpc__txn_task_write(sub.task, recs, n));
}

static void expect_rows(const char *want)
{
    char sql[300], got[512] = "";
    snprintf(sql, sizeof sql,
             "SELECT coalesce(string_agg(convert_from(k, 'UTF8') || '=' || v, ' ' ORDER BY k), "
             "'') FROM %s",
             table);
    PGresult *res = PQexec(pg, sql);
    ck_assert_int_eq(PQresultStatus(res), PGRES_TUPLES_OK);
    snprintf(got, sizeof got, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    ck_assert_str_eq(got, want);
}

START_TEST(test_tombstone_deletes_its_key)
{
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea PRIMARY KEY, v text)", table));
    tpc_txn_sink_t *sink = new_sink("changelog", "k");
    TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.tombstone", "delete"));
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    const char *const first[][2] = {{"a", "1"}, {"b", "2"}, {"d", "3"}};
    write_kv(first, 3);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1));
    expect_rows("a=1 b=2 d=3");
    /* a goes; b changes; c comes and goes in one checkpoint; d goes and comes back. */
    const char *const second[][2] = {{"a", NULL}, {"b", "4"},  {"c", "5"},
                                     {"c", NULL}, {"d", NULL}, {"d", "6"}};
    write_kv(second, 6);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 2, NULL));
    expect_rows("a=1 b=2 d=3");
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 2));
    expect_rows("b=4 d=6");
    tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);

    /* Without pg.tombstone a tombstone is a row like any other: its value NULL. */
    sink = new_sink("changelog", "k");
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 2, NULL));
    const char *const third[][2] = {{"b", NULL}};
    write_kv(third, 1);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 3, NULL));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 3));
    tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);
    ck_assert_int_eq(
        tpc_test_pg_long(pg, "SELECT count(*) FROM %s WHERE k = 'b' AND v IS NULL", table), 1);
}
END_TEST

/* Odd records are skipped; even ones become rows. */
/* The error of a pre-commit made while an earlier transaction of the subtask is still prepared:
 * retriable, saying why. */
static void expect_prepared_refusal(tpc_error_t *err)
{
    ck_assert_msg(err != NULL, "pre-commit ran beside a prepared transaction of the subtask");
    ck_assert_msg(strstr(tpc_error_message(err), "still prepared"), "%s", tpc_error_message(err));
    ck_assert(tpc_error_is_retriable(err));
    tpc_error_destroy(err);
}

/* Checkpoint 2 is aborted after the sink prepared its transaction, which inserts c and updates b;
 * checkpoint 3 deletes c and updates b again. The merge of 3 would wait for ever on b's lock, or
 * its delete would miss the uncommitted c, which then survived both commits. The pre-commit of 3
 * fails instead (retriable), and the restart from checkpoint 1 rolls 2 back and replays both
 * checkpoints: the table is the changelog applied once. */
START_TEST(test_pre_commit_beside_a_prepared_transaction_restarts)
{
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea PRIMARY KEY, v text)", table));
    tpc_txn_sink_t *sink = new_sink("changelog", "k");
    TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.tombstone", "delete"));
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    const char *const first[][2] = {{"a", "1"}, {"b", "2"}};
    write_kv(first, 2);
    tpc_test_txn_state_t state1 = {0};
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, &state1));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1));
    const char *const second[][2] = {{"c", "3"}, {"b", "4"}};
    const char *const third[][2] = {{"c", NULL}, {"b", "5"}};
    write_kv(second, 2);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 2, NULL));
    TPC_TEST_OK(tpc__txn_task_aborted(sub.task, 2));
    write_kv(third, 2);
    double t0 = tpc_test_now_s();
    expect_prepared_refusal(tpc_test_txn_sub_snapshot(&sub, 3, NULL));
    ck_assert_msg(tpc_test_now_s() - t0 < 10, "the refusal took %.1f s", tpc_test_now_s() - t0);
    tpc_test_txn_sub_close(&sub);
    expect_rows("a=1 b=2");

    /* The restart: from checkpoint 1, both checkpoints written again. */
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 1, &state1));
    ck_assert_int_eq(tpc_test_pg_long(pg,
                                      "SELECT count(*) FROM pg_prepared_xacts WHERE "
                                      "starts_with(gid, '%s:')",
                                      prefix),
                     0);
    write_kv(second, 2);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 4, NULL));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 4));
    write_kv(third, 2);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 5, NULL));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 5));
    tpc_test_txn_sub_close(&sub);
    tpc_test_txn_state_free(&state1);
    tpc_txn_sink_destroy(sink);
    expect_rows("a=1 b=5");
    ck_assert_int_eq(staging_tables(pg), 0);
}
END_TEST

/* Upserts only: checkpoint 3 updates b, which the still prepared transaction of the aborted
 * checkpoint 2 holds. The merge waits a short while, then fails (retriable), saying why; the
 * restart applies the changelog once. */
START_TEST(test_upsert_beside_a_prepared_transaction_ends)
{
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea PRIMARY KEY, v text)", table));
    tpc_txn_sink_t *sink = new_sink("changelog", "k");
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    const char *const first[][2] = {{"a", "1"}, {"b", "2"}};
    write_kv(first, 2);
    tpc_test_txn_state_t state1 = {0};
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, &state1));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1));
    const char *const second[][2] = {{"b", "4"}};
    const char *const third[][2] = {{"b", "5"}, {"c", "6"}};
    write_kv(second, 1);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 2, NULL));
    TPC_TEST_OK(tpc__txn_task_aborted(sub.task, 2));
    write_kv(third, 2);
    double t0 = tpc_test_now_s();
    tpc_error_t *err = tpc_test_txn_sub_snapshot(&sub, 3, NULL);
    double took = tpc_test_now_s() - t0;
    ck_assert_msg(err != NULL, "the merge went past the prepared transaction's key");
    ck_assert_msg(strstr(tpc_error_message(err), "still prepared") &&
                      strstr(tpc_error_message(err), "55P03"),
                  "%s", tpc_error_message(err));
    ck_assert(tpc_error_is_retriable(err));
    tpc_error_destroy(err);
    ck_assert_msg(took < 10, "the merge waited %.1f s", took);
    tpc_test_txn_sub_close(&sub);
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 1, &state1));
    write_kv(second, 1);
    write_kv(third, 2);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 4, NULL));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 4));
    tpc_test_txn_sub_close(&sub);
    tpc_test_txn_state_free(&state1);
    tpc_txn_sink_destroy(sink);
    expect_rows("a=1 b=5 c=6");
}
END_TEST

/* Column names of '"' characters, which quote to twice their length and more: the statements
 * built from them (the merge's key match, ON CONFLICT ... DO UPDATE SET) hold them whole. */
START_TEST(test_names_of_quotes)
{
    char key[48], value[72], key_sql[100], value_sql[140], cols[130];
    memset(key, '"', 40);
    key[40] = '\0';
    memset(value, '"', 62);
    value[62] = '\0';
    key_sql[0] = '"';
    memset(key_sql + 1, '"', 80);
    key_sql[81] = '"';
    key_sql[82] = '\0';
    value_sql[0] = '"';
    memset(value_sql + 1, '"', 124);
    value_sql[125] = '"';
    value_sql[126] = '\0';
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (%s int8 PRIMARY KEY, %s int8)", table, key_sql,
                               value_sql));
    snprintf(cols, sizeof cols, "%s,%s", key, value);
    tpc_txn_sink_t *sink = new_sink("changelog", key);
    TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.columns", cols));
    TPC_TEST_OK(tpc_pg_sink_set_encoder(sink, changelog, NULL));
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    write_range(0, 300);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1));
    write_range(300, 200);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 2, NULL));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 2));
    tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);
    ck_assert(tpc_test_pg_exec(pg, "ALTER TABLE %s RENAME %s TO k", table, key_sql));
    ck_assert(tpc_test_pg_exec(pg, "ALTER TABLE %s RENAME %s TO v", table, value_sql));
    expect_applied(pg, table, 500, "columns named by quotes");
}
END_TEST

/* A row lock that another session holds ends the merge's wait after pg.lock-timeout.ms with a
 * retriable error, not never. */
START_TEST(test_lock_wait_ends_at_lock_timeout)
{
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea PRIMARY KEY, v text)", table));
    ck_assert(tpc_test_pg_exec(pg, "INSERT INTO %s VALUES ('b', '1')", table));
    tpc_txn_sink_t *sink = new_sink("changelog", "k");
    TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.lock-timeout.ms", "300"));
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    PGconn *other = tpc_test_pg_connect();
    ck_assert(other != NULL);
    ck_assert(tpc_test_pg_exec(other, "BEGIN"));
    ck_assert(tpc_test_pg_exec(other, "SELECT * FROM %s FOR UPDATE", table));
    const char *const kv[][2] = {{"b", "2"}};
    write_kv(kv, 1);
    double t0 = tpc_test_now_s();
    tpc_error_t *err = tpc_test_txn_sub_snapshot(&sub, 1, NULL);
    double took = tpc_test_now_s() - t0;
    ck_assert_msg(err != NULL, "the merge went past a locked row");
    ck_assert_msg(strstr(tpc_error_message(err), "55P03"), "%s", tpc_error_message(err));
    ck_assert(tpc_error_is_retriable(err));
    ck_assert_msg(took < 10, "the wait took %.1f s", took);
    tpc_error_destroy(err);
    tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);
    ck_assert(tpc_test_pg_exec(other, "ROLLBACK"));
    PQfinish(other);
    expect_rows("b=1");
}
END_TEST

static tpc_error_t *evens(void *opaque, const tpc_record_t *r, tpc_pg_row_t *row)
{
    (void)opaque;
    uint64_t i = seq_of(r);
    if (i % 2) {
        tpc_pg_row_op(row, TPC_PG_OP_SKIP);
        return NULL;
    }
    tpc_pg_row_int8(row, (int64_t)i);
    return NULL;
}

START_TEST(test_skipped_records_make_no_rows)
{
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (i int8)", table));
    for (int mode = 0; mode < 3; mode++) {
        const char *const modes[] = {"copy", "insert", "changelog"};
        ck_assert(tpc_test_pg_exec(pg, "TRUNCATE %s", table));
        if (mode == 2)
            ck_assert(tpc_test_pg_exec(pg, "ALTER TABLE %s ADD PRIMARY KEY (i)", table));
        tpc_txn_sink_t *sink = new_sink(modes[mode], mode == 2 ? "i" : NULL);
        TPC_TEST_OK(tpc_pg_sink_set_encoder(sink, evens, NULL));
        TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
        write_range(0, 100);
        TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
        TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1));
        /* A checkpoint of skipped records only is an empty transaction: no statement at all. */
        long long markers = tpc_test_pg_long(pg, "SELECT count(*) FROM %s", marker);
        TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 101, 1));
        TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 2, NULL));
        ck_assert_int_eq(tpc_test_pg_prepared(pg, prefix), 0);
        TPC_TEST_OK(tpc__txn_task_complete(sub.task, 2));
        ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(*) FROM %s", marker), markers);
        tpc_test_txn_sub_close(&sub);
        tpc_txn_sink_destroy(sink);
        ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(*) FROM %s", table), 50);
        ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(*) FROM %s WHERE i %% 2 = 0", table),
                         50);
    }
}
END_TEST

static tpc_error_t *deletes(void *opaque, const tpc_record_t *r, tpc_pg_row_t *row)
{
    (void)opaque;
    tpc_pg_row_op(row, TPC_PG_OP_DELETE);
    tpc_pg_row_int8(row, (int64_t)seq_of(r));
    return NULL;
}

static tpc_error_t *upserts(void *opaque, const tpc_record_t *r, tpc_pg_row_t *row)
{
    (void)opaque;
    tpc_pg_row_op(row, TPC_PG_OP_UPSERT);
    tpc_pg_row_int8(row, (int64_t)seq_of(r));
    return NULL;
}

static tpc_error_t *third_table(void *opaque, const tpc_record_t *r, tpc_pg_row_t *row)
{
    (void)opaque;
    tpc_pg_row_table(row, 2);
    tpc_pg_row_int8(row, (int64_t)seq_of(r));
    return NULL;
}

/* A write through @encoder in @mode fails, naming @part. */
static void expect_write_error(const char *mode, tpc_pg_encoder_t encoder, const char *part)
{
    tpc_txn_sink_t *sink = new_sink(mode, NULL);
    TPC_TEST_OK(tpc_pg_sink_set_encoder(sink, encoder, NULL));
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    tpc_error_t *err = tpc_test_txn_sub_write(&sub, 0, 1);
    ck_assert_msg(err != NULL, "%s accepted", part);
    ck_assert_msg(strstr(tpc_error_message(err), part), "%s", tpc_error_message(err));
    ck_assert(tpc_error_is_fatal(err));
    tpc_error_destroy(err);
    tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);
}

static void expect_open_error(tpc_txn_sink_t *sink, const char *part, const char *hint)
{
    TPC_TEST_OK(tpc_pg_sink_set_encoder(sink, upserts, NULL));
    tpc_error_t *err = tpc_test_txn_sub_open(&sub, sink, 0, 1, 0);
    if (!err)
        tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);
    ck_assert_msg(err != NULL, "open succeeded");
    ck_assert_msg(tpc_error_code(err) == TPC_ERR_CONFIG && strstr(tpc_error_message(err), part),
                  "%s", tpc_error_message(err));
    ck_assert_msg(tpc_error_hint_text(err) && strstr(tpc_error_hint_text(err), hint), "hint: %s",
                  tpc_error_hint_text(err));
    tpc_error_destroy(err);
}

START_TEST(test_operations_a_mode_cannot_apply)
{
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (i int8 PRIMARY KEY)", table));
    expect_write_error("copy", deletes, "a delete of a row of table");
    expect_write_error("copy", deletes, "deletes need pg.mode=changelog and pg.key-columns");
    expect_write_error("insert", upserts, "but pg.mode is insert");
    expect_write_error("copy", third_table, "table 2 is not one of the 1 tables of pg.table");

    /* A changelog without key columns cannot find a row to delete. */
    expect_open_error(new_sink("changelog", NULL), "pg.mode=changelog needs \"pg.key-columns\"",
                      "upserts and deletes find their row by them");
    tpc_txn_sink_t *s = new_sink(NULL, NULL);
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.tombstone", "delete"));
    expect_open_error(s, "pg.tombstone=delete needs pg.mode=changelog", "pg.mode=changelog");
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s.nokey (i int8)", schema));
    char nokey[200];
    snprintf(nokey, sizeof nokey, "%s.nokey", schema);
    s = new_sink("changelog", "i");
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.table", nokey));
    expect_open_error(s, "no unique index on exactly the key columns", "changelog needs ON");

    /* A role that may change the table but not create its staging tables beside it. */
    char role[96], conninfo[512];
    tpc_test_unique_name(role, sizeof role, "pgchangelog_role", '_');
    ck_assert(tpc_test_pg_exec(pg, "CREATE ROLE %s LOGIN", role));
    ck_assert(tpc_test_pg_exec(pg, "GRANT USAGE ON SCHEMA %s TO %s", schema, role));
    ck_assert(
        tpc_test_pg_exec(pg, "GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO %s", table, role));
    snprintf(conninfo, sizeof conninfo, "%s user=%s", tpc_test_env("TWOPC_TEST_PG_CONNINFO"), role);
    s = new_sink("changelog", "i");
    TPC_TEST_OK(tpc_txn_sink_set(s, "pg.conninfo", conninfo));
    expect_open_error(s, "permission denied for schema", "GRANT CREATE ON SCHEMA");
    tpc_test_pg_exec(pg, "DROP OWNED BY %s", role);
    tpc_test_pg_exec(pg, "DROP ROLE %s", role);
}
END_TEST

/* ---- kill -9 ------------------------------------------------------------------------------ */

static int child_main(char **argv)
{
    const char *ckpt = argv[2], *tbl = argv[3], *pfx = argv[4], *mrk = argv[5];
    tpc_test_seq_conf_t src = {.count_default = CRASH_RECORDS, .per_poll = 16, .sleep_us = 500};
    tpc_job_t *job = tpc_job_new("pgchangelog");
    tpc_txn_sink_t *sink = NULL;
    int s, k;
    tpc_error_t *err = tpc_job_set(job, "checkpoint.dir", ckpt);
    if (!err)
        err = tpc_job_set(job, "checkpoint.interval.ms", argv[6]);
    if (!err)
        err = tpc_job_set(job, "restart.delay.ms", "200");
    if (!err)
        err = tpc_job_set(job, "restart.attempts", "3");
    if (!err)
        err = tpc_pg_sink_new(&sink);
    const char *kv[][2] = {{"pg.conninfo", tpc_test_env("TWOPC_TEST_PG_CONNINFO")},
                           {"pg.table", tbl},
                           {"pg.gid-prefix", pfx},
                           {"pg.marker-table", mrk},
                           {"pg.mode", "changelog"},
                           {"pg.key-columns", "k"},
                           {"pg.copy-buffer", "4096"},
                           {"commit.retry.backoff.ms", "20"}};
    for (size_t i = 0; i < sizeof kv / sizeof *kv && !err; i++)
        err = tpc_txn_sink_set(sink, kv[i][0], kv[i][1]);
    if (!err)
        err = tpc_pg_sink_set_encoder(sink, changelog, NULL);
    if (!err)
        err = tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s);
    if (!err)
        err = tpc_txn_sink_add_to_job(sink, job, "rows", 1, &k);
    if (!err)
        err = tpc_job_connect(job, s, k, TPC_EDGE_FORWARD);
    tpc_job_result_t result = TPC_JOB_CANCELED;
    if (!err)
        err = tpc_job_run(job, &result);
    if (!err && result != TPC_JOB_FINISHED)
        err = tpc_error_new(TPC_ERR_STATE, 0, "job did not finish");
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(sink);
    if (err)
        fprintf(stderr, "crash child: %s\n", tpc_error_message(err));
    int rc = err ? 1 : 0;
    tpc_error_destroy(err);
    return rc;
}

START_TEST(test_kill_9_changelog_applied_once)
{
    uint64_t seed = tpc_test_crash_seed();
    tpc_test_rng_t rng;
    tpc_test_rng_init(&rng, seed);
    char self[4096];
    ck_assert(tpc_test_self_path(self, sizeof self));
    PGconn *conn = tpc_test_pg_connect();
    ck_assert_ptr_nonnull(conn);
    int kills = 0, runs = 0, scenarios = 0;
    double t0 = tpc_test_now_s();
    while (kills < KILLS_WANTED) {
        names();
        char interval[16], log[4200];
        snprintf(interval, sizeof interval, "%d", 50 + (int)(tpc_test_rng_next(&rng) % 151));
        ck_assert(tpc_test_pg_exec(conn, "CREATE SCHEMA %s", schema));
        ck_assert(tpc_test_pg_exec(conn, "CREATE TABLE %s (k int8 PRIMARY KEY, v int8)", table));
        char *ckpt = tpc_test_tmpdir("pgchangelog-ckpt");
        snprintf(log, sizeof log, "%s.log", ckpt);
        const char *argv[] = {self, "--crash-child", ckpt, table, prefix, marker, interval, NULL};
        tpc_test_crash_plan_t plan = {
            .argv = argv,
            .log = log,
            .kills = KILLS_PER_RUN < KILLS_WANTED - kills ? KILLS_PER_RUN : KILLS_WANTED - kills,
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
        expect_applied(conn, table, CRASH_RECORDS, why);
        ck_assert_msg(tpc_test_pg_prepared(conn, prefix) == 0, "prepared transactions left %s",
                      why);
        ck_assert_msg(staging_tables(conn) == 0, "staging tables left %s", why);
        tpc_test_pg_exec(conn, "DROP SCHEMA %s CASCADE", schema);
        unlink(log);
        tpc_test_rmdir(ckpt);
        free(ckpt);
        scenarios++;
    }
    printf("pg changelog crash test: %d kill -9 over %d runs in %d scenarios, %.1f s, seed %llu\n",
           kills, runs, scenarios, tpc_test_now_s() - t0, (unsigned long long)seed);
    fflush(stdout);
    PQfinish(conn);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc == 7 && strcmp(argv[1], "--crash-child") == 0)
        return child_main(argv);
    Suite *s = suite_create("pg_changelog");
    TCase *tc = tcase_create("changelog");
    tcase_set_timeout(tc, 30);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_latest_operation_of_a_key_wins);
    tcase_add_test(tc, test_tombstone_deletes_its_key);
    tcase_add_test(tc, test_skipped_records_make_no_rows);
    tcase_add_test(tc, test_operations_a_mode_cannot_apply);
    tcase_add_test(tc, test_write_ahead_move_again_after_a_failed_one);
    tcase_add_test(tc, test_pre_commit_beside_a_prepared_transaction_restarts);
    tcase_add_test(tc, test_lock_wait_ends_at_lock_timeout);
    tcase_add_test(tc, test_upsert_beside_a_prepared_transaction_ends);
    tcase_add_test(tc, test_names_of_quotes);
    suite_add_tcase(s, tc);
    TCase *crash = tcase_create("crash");
    tcase_set_timeout(crash, 180);
    tcase_add_test(crash, test_kill_9_changelog_applied_once);
    suite_add_tcase(s, crash);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
