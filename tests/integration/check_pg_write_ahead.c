/*
 * The PostgreSQL sink without prepared transactions, on a server of the test's own started with
 * max_prepared_transactions = 0 (tests/services/pg.sh):
 *
 * - pg.commit=prepared is refused at open, with a hint naming pg.commit=write-ahead;
 * - pg.commit=auto picks write-ahead there (rows staged, none prepared) and prepared on the shared
 *   server (TWOPC_TEST_PG_CONNINFO);
 * - at-least-once runs there whatever pg.commit says;
 * - the write-ahead mode writes the very rows the prepared mode writes, in copy, insert, upsert and
 *   changelog mode (deletes and skips too; a serial column shows their order), into one table or
 *   two, in parts of 4 KiB, invisible until the checkpoint completes;
 * - a second mover of a staged transaction waits for the first mover's transaction, then does
 *   nothing if it committed and moves the rows if it rolled back;
 * - the move reconnects both connections when they were lost since the checkpoint;
 * - kill -9 at random moments (start, recovery, writing ahead, committing, moving) and restarts
 *   until a run ends on its own leave every record in the table exactly once and nothing written
 *   ahead behind (the child is this binary with --write-ahead-child; TWOPC_CRASH_SEED repeats);
 * - the whole connector conformance suite passes in write-ahead mode, with rows by COPY, as a
 *   changelog and into two tables of one sink (as check_conformance_pg.c), its kill -9 check
 * included: before pre-commit, after the staged rows committed, after the checkpoint completed but
 * before the move, during the move, after the move before the notify returned, during recovery and
 * its cleanup, each followed by a restart; then SQL shows every record exactly once.
 */
#include "tpc_conformance_pg_check.h"
#include "tpc_pg.h"
#include "tpc_test_check.h"
#include "tpc_test_crash.h"
#include "tpc_test_ops.h"
#include "tpc_test_pg.h"
#include "tpc_test_txn_drive.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char shared[600]; /* the shared server, with prepared transactions */
static char noprep[600]; /* the server of this test, without */
static PGconn *pg;       /* to noprep */
static char table[96], prefix[96], marker[96], staging[96];
static tpc_test_txn_sub_t sub;

static void setup(void)
{
    pg = PQconnectdb(noprep);
    ck_assert_int_eq(PQstatus(pg), CONNECTION_OK);
    tpc_test_unique_name(table, sizeof table, "pgwa", '_');
    tpc_test_unique_name(prefix, sizeof prefix, "pgwa", '-');
    tpc_test_unique_name(marker, sizeof marker, "pgwa_markers", '_');
    tpc_test_unique_name(staging, sizeof staging, "pgwa_staging", '_');
}

static void teardown(void)
{
    tpc_test_pg_exec(pg, "DROP TABLE IF EXISTS %s", table);
    tpc_test_pg_exec(pg, "DROP TABLE IF EXISTS %s", marker);
    tpc_test_pg_exec(pg, "DROP TABLE IF EXISTS %s", staging);
    PQfinish(pg);
}

static tpc_txn_sink_t *new_sink(const char *conninfo, const char *commit)
{
    tpc_txn_sink_t *s = NULL;
    TPC_TEST_OK(tpc_pg_sink_new(&s));
    const char *kv[][2] = {{"pg.conninfo", conninfo},
                           {"pg.table", table},
                           {"pg.gid-prefix", prefix},
                           {"pg.marker-table", marker},
                           {"pg.write-ahead-table", staging}};
    for (size_t i = 0; i < sizeof kv / sizeof *kv; i++)
        TPC_TEST_OK(tpc_txn_sink_set(s, kv[i][0], kv[i][1]));
    if (commit)
        TPC_TEST_OK(tpc_txn_sink_set(s, "pg.commit", commit));
    return s;
}

static void write_range(uint64_t first, uint64_t n)
{
    for (uint64_t i = 0; i < n; i += 64)
        TPC_TEST_OK(tpc_test_txn_sub_write(&sub, first + i, n - i < 64 ? n - i : 64));
}

static long long staged(PGconn *c)
{
    return tpc_test_pg_long(c, "SELECT count(*) FROM %s WHERE sink = '%s'", staging, prefix);
}

START_TEST(test_prepared_refused_with_hint)
{
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea, v bytea)", table));
    tpc_txn_sink_t *sink = new_sink(noprep, "prepared");
    tpc_error_t *err = tpc_test_txn_sub_open(&sub, sink, 0, 1, 0);
    if (!err)
        tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);
    ck_assert_msg(err != NULL, "pg.commit=prepared opened on a server without prepared "
                               "transactions");
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    ck_assert_msg(strstr(tpc_error_message(err), "max_prepared_transactions = 0"), "%s",
                  tpc_error_message(err));
    const char *hint = tpc_error_hint_text(err);
    ck_assert_msg(hint && strstr(hint, "pg.commit=write-ahead") &&
                      strstr(hint, "max_prepared_transactions"),
                  "hint: %s", hint ? hint : "(none)");
    tpc_error_destroy(err);
}
END_TEST

START_TEST(test_auto_picks_from_the_server)
{
    /* Without prepared transactions: the rows wait in the write-ahead table, nothing is prepared.
     */
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea, v bytea)", table));
    tpc_txn_sink_t *sink = new_sink(noprep, NULL);
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    write_range(0, 100);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(*) FROM %s", table), 0);
    ck_assert_int_gt(staged(pg), 0);
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1));
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(*) FROM %s WHERE k = v", table), 100);
    ck_assert_int_eq(staged(pg), 0);
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(*) FROM %s", marker), 1);
    tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);

    /* With them: prepared, and no write-ahead table is made. */
    PGconn *other = PQconnectdb(shared);
    ck_assert_int_eq(PQstatus(other), CONNECTION_OK);
    ck_assert(tpc_test_pg_exec(other, "CREATE TABLE %s (k bytea, v bytea)", table));
    sink = new_sink(shared, "auto");
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    write_range(0, 100);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    ck_assert_int_eq(tpc_test_pg_prepared(other, prefix), 1);
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1));
    tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);
    ck_assert_int_eq(tpc_test_pg_long(other, "SELECT count(*) FROM %s", table), 100);
    ck_assert_int_eq(
        tpc_test_pg_long(other, "SELECT count(*) FROM pg_class WHERE relname = '%s'", staging), 0);
    tpc_test_pg_exec(other, "DROP TABLE %s", table);
    tpc_test_pg_exec(other, "DROP TABLE IF EXISTS %s", marker);
    PQfinish(other);
}
END_TEST

START_TEST(test_at_least_once_runs_without_prepared_transactions)
{
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea, v bytea)", table));
    char *dir = tpc_test_tmpdir("pgwa-alo");
    tpc_test_seq_conf_t src = {.count_default = 3000, .per_poll = 50};
    tpc_job_t *job = tpc_job_new("pgwa");
    TPC_TEST_OK(tpc_job_set(job, "checkpoint.dir", dir));
    TPC_TEST_OK(tpc_job_set(job, "checkpoint.interval.ms", "50"));
    tpc_job_set_logger(job, NULL, NULL, TPC_LOG_ERROR);
    /* pg.commit is about exactly-once: at-least-once commits at each checkpoint anyway. */
    tpc_txn_sink_t *sink = new_sink(noprep, "prepared");
    TPC_TEST_OK(tpc_txn_sink_set(sink, "guarantee", "at-least-once"));
    int s, k;
    TPC_TEST_OK(tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s));
    TPC_TEST_OK(tpc_txn_sink_add_to_job(sink, job, "rows", 1, &k));
    TPC_TEST_OK(tpc_job_connect(job, s, k, TPC_EDGE_FORWARD));
    tpc_job_result_t result = TPC_JOB_CANCELED;
    TPC_TEST_OK(tpc_job_run(job, &result));
    ck_assert_int_eq(result, TPC_JOB_FINISHED);
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(sink);
    tpc_test_rmdir(dir);
    free(dir);
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(DISTINCT k) FROM %s WHERE k = v", table),
                     3000);
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(*) FROM %s", table), 3000);
}
END_TEST

static uint64_t key_of(const tpc_record_t *r)
{
    uint64_t v = 0;
    for (size_t i = 0; i < r->key_len; i++)
        v = v << 8 | ((const unsigned char *)r->key)[i];
    return v;
}

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

/* mod10 as a changelog: every 7th record deletes its key, every 11th is skipped. */
static tpc_error_t *mod10_changes(void *opaque, const tpc_record_t *r, tpc_pg_row_t *row)
{
    uint64_t i = key_of(r);
    if (i % 7 == 3)
        tpc_pg_row_op(row, TPC_PG_OP_DELETE);
    else if (i % 11 == 5)
        tpc_pg_row_op(row, TPC_PG_OP_SKIP);
    return mod10(opaque, r, row);
}

/* Two tables: each record's row into the first, and odd records a second row into the second;
 * the rows as mod10_changes makes them when @opaque is not NULL, else as mod10. */
static tpc_error_t *mod10_two(void *opaque, const tpc_record_t *r, tpc_pg_row_t *row)
{
    tpc_pg_encoder_t one = opaque ? mod10_changes : mod10;
    tpc_error_t *err = one(opaque, r, row);
    if (!err && key_of(r) % 2) {
        tpc_pg_row_table(row, 1);
        err = one(opaque, r, row);
    }
    return err;
}

/* @c's @name as one string of its rows in id order (malloc'd); the table is dropped. */
static char *table_text(PGconn *c, const char *name)
{
    char sql[300];
    snprintf(sql, sizeof sql,
             "SELECT coalesce(string_agg(id || ':' || encode(k, 'hex') || ':' || v, ',' ORDER BY "
             "id), '') FROM %s",
             name);
    PGresult *res = PQexec(c, sql);
    ck_assert_int_eq(PQresultStatus(res), PGRES_TUPLES_OK);
    char *out = strdup(PQgetvalue(res, 0, 0));
    PQclear(res);
    tpc_test_pg_exec(c, "DROP TABLE %s", name);
    return out;
}

/* Three checkpoints into @c's table in @mode, committed as @commit; @returns the table's rows as
 * one string in id order (malloc'd). Parts of 4 KiB: several per checkpoint. */
static char *rows_written(PGconn *c, const char *conninfo, const char *commit, const char *mode,
                          bool two)
{
    bool changelog = strcmp(mode, "changelog") == 0;
    bool upsert = changelog || strcmp(mode, "upsert") == 0;
    char second[120], tables[240];
    snprintf(second, sizeof second, "%s_b", table);
    snprintf(tables, sizeof tables, "%s%s%s", table, two ? "," : "", two ? second : "");
    for (int i = 0; i < 1 + two; i++)
        ck_assert(tpc_test_pg_exec(c, "CREATE TABLE %s (id bigserial, k bytea%s, v int8)",
                                   i ? second : table, upsert ? " PRIMARY KEY" : ""));
    tpc_txn_sink_t *sink = new_sink(conninfo, commit);
    const char *kv[][2] = {{"pg.mode", mode},
                           {"pg.table", tables},
                           {"pg.columns", two ? "k,v;k,v" : "k,v"},
                           {"pg.batch-size", "7"},
                           {"pg.copy-buffer", "4096"}};
    for (size_t i = 0; i < sizeof kv / sizeof *kv; i++)
        TPC_TEST_OK(tpc_txn_sink_set(sink, kv[i][0], kv[i][1]));
    if (upsert)
        TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.key-columns", two ? "k;k" : "k"));
    tpc_pg_encoder_t encoder = two ? mod10_two : changelog ? mod10_changes : mod10;
    TPC_TEST_OK(tpc_pg_sink_set_encoder(sink, encoder, changelog ? (void *)sink : NULL));
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    write_range(0, 600);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    write_range(600, 250); /* while checkpoint 1 waits */
    ck_assert_int_eq(tpc_test_pg_long(c, "SELECT count(*) FROM %s", table), 0);
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1));
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 2, NULL));
    /* Prepared upserts wait for the prepared transaction's keys: complete 2 before writing. */
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 2));
    write_range(850, 77);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 3, NULL));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 3));
    tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);
    char *out = table_text(c, table);
    if (two) {
        char *b = table_text(c, second);
        size_t len = strlen(out) + strlen(b) + 2;
        out = realloc(out, len);
        ck_assert_ptr_nonnull(out);
        strcat(out, "|");
        strcat(out, b);
        free(b);
    }
    return out;
}

START_TEST(test_write_ahead_writes_what_prepared_writes)
{
    static const char *const modes[] = {"copy", "insert", "upsert", "changelog"};
    size_t n = sizeof modes / sizeof *modes;
    PGconn *other = PQconnectdb(shared);
    ck_assert_int_eq(PQstatus(other), CONNECTION_OK);
    for (size_t m = 0; m < 2 * n; m++) {
        /* Each mode into one table, then copy and changelog into two. */
        bool two = m >= n;
        const char *mode = modes[m % n];
        if (two && strcmp(mode, "copy") != 0 && strcmp(mode, "changelog") != 0)
            continue;
        char *prepared = rows_written(other, shared, "prepared", mode, two);
        char *ahead = rows_written(pg, noprep, "write-ahead", mode, two);
        ck_assert_msg(strcmp(prepared, ahead) == 0,
                      "%s mode%s: write-ahead wrote\n%.300s\nprepared\n%.300s", mode,
                      two ? ", two tables" : "", ahead, prepared);
        ck_assert_msg(strlen(ahead) > 60, "%s mode wrote almost nothing: %s", mode, ahead);
        ck_assert_int_eq(staged(pg), 0);
        free(prepared);
        free(ahead);
    }
    tpc_test_pg_exec(other, "DROP TABLE IF EXISTS %s", marker);
    PQfinish(other);
}
END_TEST

typedef struct {
    uint64_t checkpoint;
    tpc_error_t *err;
} mover_t;

static void *complete_thread(void *arg)
{
    mover_t *m = arg;
    m->err = tpc__txn_task_complete(sub.task, m->checkpoint);
    return NULL;
}

/* Until a data connection of the sink waits for a lock (the other mover's marker row). */
static bool wait_for_lock_wait(void)
{
    for (int i = 0; i < 400; i++) {
        if (tpc_test_pg_long(pg, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = "
                                 "'Lock' AND application_name LIKE 'twopc data%%'") > 0)
            return true;
        struct timespec ts = {0, 25 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return false;
}

/* The move of checkpoint @ckpt's staged transaction while another session holds that gid's
 * marker row uncommitted, which then ends with @end. */
static void move_against(uint64_t ckpt, const char *end)
{
    PGconn *other = PQconnectdb(noprep);
    ck_assert_int_eq(PQstatus(other), CONNECTION_OK);
    ck_assert(tpc_test_pg_exec(other, "BEGIN"));
    ck_assert(tpc_test_pg_exec(other,
                               "INSERT INTO %s (gid, sink, subtask, checkpoint) VALUES "
                               "('%s:0:1:%llu', '%s', 0, %llu)",
                               marker, prefix, (unsigned long long)ckpt, prefix,
                               (unsigned long long)ckpt));
    mover_t m = {.checkpoint = ckpt};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, complete_thread, &m), 0);
    bool waited = wait_for_lock_wait();
    ck_assert(tpc_test_pg_exec(other, "%s", end));
    pthread_join(th, NULL);
    PQfinish(other);
    ck_assert_msg(waited, "the move did not wait for the other mover's marker row");
    ck_assert_msg(m.err == NULL, "move: %s", tpc_error_message(m.err));
}

START_TEST(test_second_mover_waits_then_does_nothing)
{
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea, v bytea)", table));
    tpc_txn_sink_t *sink = new_sink(noprep, "write-ahead");
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    /* The table and the marker table exist once the subtask is open. */
    write_range(0, 50);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    /* The other mover commits: it moved checkpoint 1, this one must not move it again. */
    move_against(1, "COMMIT");
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(*) FROM %s", table), 0);
    write_range(50, 30);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 2, NULL));
    /* The other mover rolls back: this one moves checkpoint 2. */
    move_against(2, "ROLLBACK");
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(*) FROM %s WHERE k = v", table), 30);
    ck_assert_int_eq(
        tpc_test_pg_long(pg, "SELECT count(*) FROM %s WHERE gid = '%s:0:1:2'", staging, prefix), 0);
    tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);
}
END_TEST

START_TEST(test_move_after_lost_connections)
{
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea, v bytea)", table));
    tpc_txn_sink_t *sink = new_sink(noprep, "write-ahead");
    TPC_TEST_OK(tpc_txn_sink_set(sink, "commit.retry.deadline.ms", "3000"));
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    write_range(0, 100);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    /* Both connections of the sink die between the checkpoint and its notification (this server
     * is the test's own: no other program's sessions). */
    ck_assert_int_eq(tpc_test_pg_long(pg,
                                      "SELECT count(pg_terminate_backend(pid)) FROM "
                                      "pg_stat_activity WHERE application_name LIKE 'twopc %%'"),
                     2);
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1));
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(*) FROM %s WHERE k = v", table), 100);
    ck_assert_int_eq(staged(pg), 0);
    tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);
}
END_TEST

/* Parts are tuples of the columns they were written for: a restore with pg.columns in another
 * order (or another column type) refuses to move them, saying what changed; the old settings
 * move them. */
START_TEST(test_move_refuses_another_column_layout)
{
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea, v bytea, n int8)", table));
    tpc_txn_sink_t *sink = new_sink(noprep, "write-ahead");
    TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.columns", "k,v"));
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    write_range(0, 30);
    tpc_test_txn_state_t state = {0};
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, &state));
    tpc_test_txn_sub_close(&sub); /* gone before the notification */
    tpc_txn_sink_destroy(sink);

    const char *changes[][2] = {{"pg.columns", "v,k"}, {"pg.mode", "insert"}};
    const char *says[] = {"pg.columns (their order included)", "pg.mode=copy, the sink now has "
                                                               "insert"};
    for (int i = 0; i < 2; i++) {
        sink = new_sink(noprep, "write-ahead");
        TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.columns", "k,v"));
        TPC_TEST_OK(tpc_txn_sink_set(sink, changes[i][0], changes[i][1]));
        tpc_error_t *err = tpc_test_txn_sub_start(&sub, sink, 1, &state);
        if (!err)
            tpc_test_txn_sub_close(&sub);
        tpc_txn_sink_destroy(sink);
        ck_assert_msg(err != NULL, "moved the parts with %s=%s", changes[i][0], changes[i][1]);
        ck_assert_msg(strstr(tpc_error_message(err), says[i]) &&
                          strstr(tpc_error_message(err), "cannot be moved"),
                      "%s", tpc_error_message(err));
        ck_assert_msg(tpc_error_hint_text(err) &&
                          strstr(tpc_error_hint_text(err), "restore with the settings"),
                      "hint: %s", tpc_error_hint_text(err));
        tpc_error_destroy(err);
        ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(*) FROM %s", table), 0);
    }
    ck_assert(tpc_test_pg_exec(pg, "ALTER TABLE %s ALTER COLUMN v TYPE text USING ''", table));
    sink = new_sink(noprep, "write-ahead");
    TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.columns", "k,v"));
    tpc_error_t *err = tpc_test_txn_sub_start(&sub, sink, 1, &state);
    if (!err)
        tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);
    ck_assert_msg(err != NULL, "moved the parts into a column of another type");
    tpc_error_destroy(err);
    ck_assert(tpc_test_pg_exec(pg, "ALTER TABLE %s ALTER COLUMN v TYPE bytea USING NULL", table));

    /* The settings it was written with move it. */
    sink = new_sink(noprep, "write-ahead");
    TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.columns", "k,v"));
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 1, &state));
    tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);
    tpc_test_txn_state_free(&state);
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(*) FROM %s WHERE k = v", table), 30);
    ck_assert_int_eq(staged(pg), 0);
}
END_TEST

/* Parts a run in write-ahead mode left behind go at the next start in another mode too (here
 * at-least-once, the same prefix). */
START_TEST(test_leftover_parts_dropped_in_another_mode)
{
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea, v bytea)", table));
    tpc_txn_sink_t *sink = new_sink(noprep, "write-ahead");
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    write_range(0, 40);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    tpc_test_txn_sub_close(&sub); /* checkpoint 1 never completes */
    tpc_txn_sink_destroy(sink);
    ck_assert_int_gt(staged(pg), 0);
    sink = new_sink(noprep, "prepared");
    TPC_TEST_OK(tpc_txn_sink_set(sink, "guarantee", "at-least-once"));
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);
    ck_assert_int_eq(staged(pg), 0);
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(*) FROM %s", table), 0);
}
END_TEST

/* A frozen old instance holding the marker row of a gid makes the move wait at most
 * pg.lock-timeout.ms per attempt: the commit fails with a retriable error, not never. */
START_TEST(test_move_waits_at_most_lock_timeout)
{
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea, v bytea)", table));
    tpc_txn_sink_t *sink = new_sink(noprep, "write-ahead");
    TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.lock-timeout.ms", "200"));
    TPC_TEST_OK(tpc_txn_sink_set(sink, "commit.retry.deadline.ms", "1000"));
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    write_range(0, 20);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    PGconn *other = PQconnectdb(noprep);
    ck_assert_int_eq(PQstatus(other), CONNECTION_OK);
    ck_assert(tpc_test_pg_exec(other, "BEGIN"));
    ck_assert(tpc_test_pg_exec(other,
                               "INSERT INTO %s (gid, sink, subtask, checkpoint) VALUES "
                               "('%s:0:1:1', '%s', 0, 1)",
                               marker, prefix, prefix));
    double t0 = tpc_test_now_s();
    tpc_error_t *err = tpc__txn_task_complete(sub.task, 1);
    double took = tpc_test_now_s() - t0;
    ck_assert(tpc_test_pg_exec(other, "ROLLBACK"));
    PQfinish(other);
    ck_assert_msg(err != NULL, "the move went past the other session's marker row");
    ck_assert_msg(strstr(tpc_error_message(err), "55P03"), "%s", tpc_error_message(err));
    ck_assert_msg(took < 15, "the move waited %.1f s", took);
    tpc_error_destroy(err);
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(*) FROM %s", table), 0);
    ck_assert_int_eq(staged(pg), 1);
    tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);
}
END_TEST

/* Parts deleted by somebody else while the move reads them (here a trigger keeps part 0 from
 * being deleted, as if another session had taken it first): the move must not commit. */
/* A part is sent and its result read before the next command on the connection: a part the
 * server refuses fails the write or the checkpoint after it, with the server's reason, and nothing
 * of that transaction reaches the write-ahead table or the table. */
START_TEST(test_refused_part_fails_the_checkpoint)
{
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea, v bytea)", table));
    tpc_txn_sink_t *sink = new_sink(noprep, "write-ahead");
    TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.copy-buffer", "4096")); /* several parts */
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    write_range(0, 100);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1));
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(*) FROM %s WHERE k = v", table), 100);
    /* From now on the server refuses the third part of a transaction. */
    ck_assert(
        tpc_test_pg_exec(pg, "ALTER TABLE %s ADD CONSTRAINT no_third CHECK (part <> 2)", staging));
    tpc_error_t *err = NULL;
    for (uint64_t i = 100; i < 500 && !err; i += 64)
        err = tpc_test_txn_sub_write(&sub, i, 64);
    if (!err)
        err = tpc_test_txn_sub_snapshot(&sub, 2, NULL);
    ck_assert_msg(err != NULL, "a refused part went unnoticed");
    ck_assert_msg(strstr(tpc_error_message(err), "write rows ahead") &&
                      strstr(tpc_error_message(err), "no_third"),
                  "%s", tpc_error_message(err));
    tpc_error_destroy(err);
    ck_assert_int_eq(staged(pg), 0);
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(*) FROM %s", table), 100);
    tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);
}
END_TEST

START_TEST(test_move_rolls_back_when_parts_went_missing)
{
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea, v bytea)", table));
    tpc_txn_sink_t *sink = new_sink(noprep, "write-ahead");
    TPC_TEST_OK(tpc_txn_sink_set(sink, "pg.copy-buffer", "4096")); /* several parts */
    TPC_TEST_OK(tpc_txn_sink_set(sink, "commit.retry.deadline.ms", "500"));
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    write_range(0, 400);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    long long parts = staged(pg);
    ck_assert_int_gt(parts, 1);
    ck_assert(tpc_test_pg_exec(pg,
                               "CREATE FUNCTION %s_keep() RETURNS trigger LANGUAGE plpgsql AS "
                               "$$BEGIN RETURN NULL; END$$",
                               staging));
    ck_assert(tpc_test_pg_exec(pg,
                               "CREATE TRIGGER keep BEFORE DELETE ON %s FOR EACH ROW WHEN "
                               "(OLD.part = 0) EXECUTE FUNCTION %s_keep()",
                               staging, staging));
    tpc_error_t *err = tpc__txn_task_complete(sub.task, 1);
    ck_assert_msg(err != NULL, "the move committed with a part left behind");
    ck_assert_msg(strstr(tpc_error_message(err), "another session deleted"), "%s",
                  tpc_error_message(err));
    tpc_error_destroy(err);
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(*) FROM %s", table), 0);
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(*) FROM %s", marker), 0);
    ck_assert_int_eq(staged(pg), parts);
    tpc_test_txn_sub_close(&sub);
    tpc_txn_sink_destroy(sink);
    tpc_test_pg_exec(pg, "DROP TABLE %s", staging);
    tpc_test_pg_exec(pg, "DROP FUNCTION %s_keep()", staging);
}
END_TEST

/* ---- kill -9 at random moments, as check_pg_crash.c does with prepared transactions -----------
 */

#define CRASH_RECORDS 20000
#define CRASH_KILLS   22

/* argv: self --write-ahead-child CHECKPOINT_DIR TABLE PREFIX MARKER WRITE_AHEAD INTERVAL */
static int crash_child(char **argv)
{
    tpc_test_seq_conf_t src = {.count_default = CRASH_RECORDS, .per_poll = 16, .sleep_us = 500};
    tpc_job_t *job = tpc_job_new("pgwacrash");
    tpc_txn_sink_t *sink = NULL;
    int s, k;
    tpc_error_t *err = tpc_job_set(job, "checkpoint.dir", argv[2]);
    if (!err)
        err = tpc_job_set(job, "checkpoint.interval.ms", argv[7]);
    if (!err)
        err = tpc_job_set(job, "restart.delay.ms", "200");
    if (!err)
        err = tpc_pg_sink_new(&sink);
    const char *kv[][2] = {{"pg.conninfo", tpc_test_env("TWOPC_TEST_PG_CONNINFO")},
                           {"pg.table", argv[3]},
                           {"pg.gid-prefix", argv[4]},
                           {"pg.marker-table", argv[5]},
                           {"pg.write-ahead-table", argv[6]},
                           {"pg.copy-buffer", "4096"},
                           {"commit.retry.backoff.ms", "20"}};
    for (size_t i = 0; i < sizeof kv / sizeof *kv && !err; i++)
        err = tpc_txn_sink_set(sink, kv[i][0], kv[i][1]);
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
    if (err)
        fprintf(stderr, "write-ahead crash child: %s\n", tpc_error_message(err));
    int rc = err ? 1 : 0;
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(sink);
    return rc;
}

START_TEST(test_kill_9_at_random_moments)
{
    uint64_t seed = tpc_test_crash_seed();
    tpc_test_rng_t rng;
    tpc_test_rng_init(&rng, seed);
    char self[4096];
    ck_assert(tpc_test_self_path(self, sizeof self));
    int kills = 0, runs = 0, scenarios = 0;
    while (kills < CRASH_KILLS) {
        char interval[16], log[4200];
        /* Each scenario its own names: setup() made the first ones. */
        if (scenarios++) {
            tpc_test_unique_name(table, sizeof table, "pgwa", '_');
            tpc_test_unique_name(prefix, sizeof prefix, "pgwa", '-');
        }
        snprintf(interval, sizeof interval, "%d", 50 + (int)(tpc_test_rng_next(&rng) % 151));
        ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea, v bytea)", table));
        char *ckpt = tpc_test_tmpdir("pgwa-crash");
        snprintf(log, sizeof log, "%s.log", ckpt);
        const char *argv[] = {
            self, "--write-ahead-child", ckpt, table, prefix, marker, staging, interval, NULL};
        tpc_test_crash_plan_t plan = {.argv = argv,
                                      .log = log,
                                      .kills = 11,
                                      .early_one_in = 5,
                                      .early_ms = 30,
                                      .min_ms = 20,
                                      .span_ms = 300,
                                      .last_run_ms = 60000};
        tpc_test_crash_result_t res;
        bool ok = tpc_test_crash_run(&plan, &rng, &res);
        kills += res.kills;
        runs += res.runs;
        if (!ok)
            tpc_test_dump_log(log);
        ck_assert_msg(ok, "child run %d (seed %llu) %s", runs, (unsigned long long)seed,
                      res.ended ? "failed" : "did not end");
        long long rows = tpc_test_pg_long(pg, "SELECT count(*) FROM %s", table);
        long long distinct = tpc_test_pg_long(pg, "SELECT count(DISTINCT k) FROM %s", table);
        long long clean = tpc_test_pg_long(pg, "SELECT count(*) FROM %s WHERE k = v", table);
        ck_assert_msg(rows == CRASH_RECORDS && distinct == CRASH_RECORDS && clean == CRASH_RECORDS,
                      "after %d kills (seed %llu, interval %s ms): %lld rows, %lld distinct keys, "
                      "expected %d each",
                      res.kills, (unsigned long long)seed, interval, rows, distinct, CRASH_RECORDS);
        ck_assert_msg(staged(pg) == 0, "rows written ahead are left after the job (seed %llu)",
                      (unsigned long long)seed);
        tpc_test_pg_exec(pg, "DROP TABLE %s", table);
        unlink(log);
        tpc_test_rmdir(ckpt);
        free(ckpt);
    }
    printf("pg write-ahead crash test: %d kill -9 over %d runs in %d scenarios, seed %llu\n", kills,
           runs, scenarios, (unsigned long long)seed);
    fflush(stdout);
}
END_TEST

static int run_own_checks(void)
{
    Suite *s = suite_create("pg_write_ahead");
    TCase *tc = tcase_create("write-ahead");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_prepared_refused_with_hint);
    tcase_add_test(tc, test_auto_picks_from_the_server);
    tcase_add_test(tc, test_at_least_once_runs_without_prepared_transactions);
    tcase_add_test(tc, test_write_ahead_writes_what_prepared_writes);
    tcase_add_test(tc, test_second_mover_waits_then_does_nothing);
    tcase_add_test(tc, test_move_after_lost_connections);
    tcase_add_test(tc, test_move_waits_at_most_lock_timeout);
    tcase_add_test(tc, test_leftover_parts_dropped_in_another_mode);
    tcase_add_test(tc, test_move_refuses_another_column_layout);
    tcase_add_test(tc, test_move_rolls_back_when_parts_went_missing);
    tcase_add_test(tc, test_refused_part_fails_the_checkpoint);
    suite_add_tcase(s, tc);
    TCase *crash = tcase_create("kill-9");
    tcase_set_timeout(crash, 300);
    tcase_add_checked_fixture(crash, setup, teardown);
    tcase_add_test(crash, test_kill_9_at_random_moments);
    suite_add_tcase(s, crash);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed;
}

int main(int argc, char **argv)
{
    if (tpc_conformance_is_child(argc, argv))
        return tpc_conformance_pg_child("write-ahead", argc, argv);
    if (argc == 8 && strcmp(argv[1], "--write-ahead-child") == 0)
        return crash_child(argv);
    const char *env = tpc_test_env_require("TWOPC_TEST_PG_CONNINFO");
    if (!env)
        return EXIT_FAILURE;
    snprintf(shared, sizeof shared, "%s", env);
    char *base = tpc_test_tmpdir("pg-noprep"), dir[4200];
    snprintf(dir, sizeof dir, "%s/pg", base);
    /* Under root the server runs as another user, who must reach the folder. */
    chmod(base, 0755);
    int rc = EXIT_FAILURE;
    if (tpc_test_pg_start_noprep(dir, noprep, sizeof noprep)) {
        /* The conformance suite and its children connect through TWOPC_TEST_PG_CONNINFO. */
        setenv("TWOPC_TEST_PG_CONNINFO", noprep, 1);
        rc = run_own_checks() ? EXIT_FAILURE : EXIT_SUCCESS;
        /* As check_conformance_pg.c: every layout. */
        if (tpc_conformance_pg_layouts_main("write-ahead", argc, argv) != EXIT_SUCCESS)
            rc = EXIT_FAILURE;
    }
    tpc_test_pg_destroy(dir);
    tpc_test_rmdir(base);
    free(base);
    return rc;
}
