/*
 * PostgreSQL sink throughput against a plain libpq loop, in the same run on the same server, for
 * both ways to commit exactly once.
 *
 *   sink:    sequence source -> exactly-once pg sink in copy mode, checkpoints every second (each
 *            one a marker row and PREPARE TRANSACTION, then COMMIT PREPARED once it is complete)
 *   raw:     one loop encoding the same rows into binary COPY, sent in buffers of the sink's size,
 *            with PREPARE TRANSACTION + COMMIT PREPARED (from a second connection) once a second
 *   wa sink: the same sink with pg.commit=write-ahead (rows committed into the write-ahead table at
 *            the checkpoint, moved into the table by one transaction once it is complete)
 *   wa raw:  one loop doing that by hand without prepared transactions: binary COPY of (batch, id,
 *            payload) into a staging table, COMMIT once a second, then one transaction that inserts
 *            a marker row, INSERT ... SELECT the batch into the table and DELETE it from staging
 *   changelog sink: the sink with pg.mode=changelog (prepared commit): record i upserts key
 *            (i * 7919) mod KEYS with its text, one in ten deletes it instead, into a table with a
 *            primary key
 *   changelog raw: one loop doing that by hand: per transaction an unlogged staging table, binary
 *            COPY of (operation, sequence, id, text) into it, and once a second the merge
 *            statement (latest operation per key, DELETE ... USING, INSERT ... ON CONFLICT DO
 *            UPDATE), DROP TABLE, PREPARE TRANSACTION and COMMIT PREPARED; both tables must end as
 *            the changelog applied once
 *
 * Rows are (bigint, 100-byte text). Commit latency is that of each commit of the sink (COMMIT
 * PREPARED, or the move), measured by wrapping the sink's commit; the handle size is what the sink
 * stores per transaction in a checkpoint; the write-ahead log per row is the server's over each
 * sink run (other sessions' included), where the write-ahead mode's double write shows. Prints
 *   bench pg <metric> <value> <unit>
 * Environment: TWOPC_TEST_PG_CONNINFO (the server; the prepared runs need
 * max_prepared_transactions > 0), TWOPC_BENCH_ROWS (default 1000000).
 */
#include "tpc_pg.h"
#include "tpc_test_bench.h"
#include "tpc_test_env.h"
#include "tpc_test_ops.h"
#include "tpc_test_pg.h"
#include "txn_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TEXT_BYTES  100
#define COPY_BUFFER (256u << 10)
#define MAX_COMMITS 4096
#define KEYS        100000

/* The changelog: record i upserts key_of(i), or deletes it when is_delete(i). */
static bool is_delete(uint64_t seq)
{
    return seq % 10 == 9;
}

static int64_t key_of(uint64_t seq)
{
    return (int64_t)((seq * 7919) % KEYS);
}

/* The text column: the row number in decimal, padded with letters to TEXT_BYTES. */
static void text_of(uint64_t seq, char *out)
{
    memset(out, 'x', TEXT_BYTES);
    char num[24];
    int n = snprintf(num, sizeof num, "%llu", (unsigned long long)seq);
    memcpy(out, num, (size_t)n);
}

static tpc_error_t *encode(void *opaque, const tpc_record_t *r, tpc_pg_row_t *row)
{
    (void)opaque;
    int subtask;
    uint64_t seq;
    tpc_test_seq_decode(r->key, r->key_len, &subtask, &seq);
    char text[TEXT_BYTES];
    text_of(seq, text);
    tpc_pg_row_int8(row, (int64_t)seq);
    tpc_pg_row_text(row, text, TEXT_BYTES);
    return NULL;
}

static tpc_error_t *encode_changelog(void *opaque, const tpc_record_t *r, tpc_pg_row_t *row)
{
    (void)opaque;
    int subtask;
    uint64_t seq;
    tpc_test_seq_decode(r->key, r->key_len, &subtask, &seq);
    tpc_pg_row_int8(row, key_of(seq));
    if (is_delete(seq)) {
        tpc_pg_row_op(row, TPC_PG_OP_DELETE);
        tpc_pg_row_null(row);
        return NULL;
    }
    char text[TEXT_BYTES];
    text_of(seq, text);
    tpc_pg_row_text(row, text, TEXT_BYTES);
    return NULL;
}

/* The sink's commit, timed: the wrapper ops table differs from the sink's only there. */
static tpc_txn_connector_ops_t timed_ops;
static const tpc_txn_connector_ops_t *pg_ops;
static double commit_ms[MAX_COMMITS];
static int commits;
static size_t handle_bytes; /* largest handle serialized */

static tpc_error_t *sized_serialize(void *conn, const void *txn, tpc_txn_buf_t *out)
{
    size_t before = out->len;
    tpc_error_t *err = pg_ops->serialize(conn, txn, out);
    if (!err && out->len - before > handle_bytes)
        handle_bytes = out->len - before;
    return err;
}

static tpc_error_t *timed_commit(void *conn, void *txn)
{
    double t0 = tpc_test_now_s();
    tpc_error_t *err = pg_ops->commit(conn, txn);
    if (!err && commits < MAX_COMMITS)
        commit_ms[commits++] = (tpc_test_now_s() - t0) * 1000.0;
    return err;
}

/* @changelog: pg.mode=changelog with encode_changelog(), into a table whose key is id. */
static double run_sink(const char *conninfo, const char *table, uint64_t rows, const char *commit,
                       const char *staging, bool changelog)
{
    commits = 0;
    handle_bytes = 0;
    char *ckpt = tpc_test_tmpdir("bench-pg-ckpt");
    char prefix[96];
    tpc_test_unique_name(prefix, sizeof prefix, "bench-pg", '-');
    tpc_test_seq_conf_t src = {.count_default = rows, .per_poll = 256};
    tpc_txn_sink_t *conf_sink = NULL, *sink = NULL;
    tpc_error_t *err = tpc_pg_sink_new(&conf_sink);
    const char *kv[][2] = {{"pg.conninfo", conninfo},
                           {"pg.table", table},
                           {"pg.gid-prefix", prefix},
                           {"pg.commit", commit},
                           {"pg.write-ahead-table", staging}};
    for (size_t i = 0; i < sizeof kv / sizeof *kv && !err; i++)
        err = tpc_txn_sink_set(conf_sink, kv[i][0], kv[i][1]);
    if (!err && changelog)
        err = tpc_txn_sink_set(conf_sink, "pg.mode", "changelog");
    if (!err && changelog)
        err = tpc_txn_sink_set(conf_sink, "pg.key-columns", "id");
    if (!err)
        err = tpc_pg_sink_set_encoder(conf_sink, changelog ? encode_changelog : encode, NULL);
    if (!err) {
        /* conf_sink keeps owning the configuration; the timed sink borrows it. */
        pg_ops = tpc_txn_sink_connector_ops(conf_sink);
        timed_ops = *pg_ops;
        timed_ops.commit = timed_commit;
        timed_ops.recover_and_commit = timed_commit;
        timed_ops.serialize = sized_serialize;
        timed_ops.configure = NULL;
        timed_ops.release = NULL;
        err = tpc_txn_sink_new(&timed_ops, tpc_txn_sink_connector_arg(conf_sink), &sink);
    }
    if (err)
        tpc_test_bench_die("job setup", err);
    double secs = tpc_test_bench_run_sink("bench-pg", ckpt, &src, sink, "rows");
    tpc_txn_sink_destroy(sink);
    tpc_txn_sink_destroy(conf_sink);
    tpc_test_rmdir(ckpt);
    free(ckpt);
    return secs;
}

static void put_be(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--, v >>= 8)
        p[i] = (unsigned char)v;
}

static void expect(PGconn *pg, PGresult *res, ExecStatusType want, const char *what)
{
    if (PQresultStatus(res) != want) {
        fprintf(stderr, "bench_pg: %s: %s", what, PQerrorMessage(pg));
        exit(1);
    }
    PQclear(res);
}

static void start_txn(PGconn *data, const char *copy)
{
    expect(data, PQexec(data, "BEGIN"), PGRES_COMMAND_OK, "BEGIN");
    expect(data, PQexec(data, copy), PGRES_COPY_IN, "COPY");
    static const unsigned char header[19] = {'P', 'G', 'C', 'O', 'P', 'Y', '\n', 0xff, '\r', '\n'};
    PQputCopyData(data, (const char *)header, sizeof header);
}

static void end_txn(PGconn *data, PGconn *control, int n)
{
    static const unsigned char trailer[2] = {0xff, 0xff};
    PQputCopyData(data, (const char *)trailer, 2);
    PQputCopyEnd(data, NULL);
    expect(data, PQgetResult(data), PGRES_COMMAND_OK, "end COPY");
    PQclear(PQgetResult(data));
    char sql[128];
    snprintf(sql, sizeof sql, "PREPARE TRANSACTION 'bench-pg-raw-%d-%d'", (int)getpid(), n);
    expect(data, PQexec(data, sql), PGRES_COMMAND_OK, "PREPARE TRANSACTION");
    snprintf(sql, sizeof sql, "COMMIT PREPARED 'bench-pg-raw-%d-%d'", (int)getpid(), n);
    expect(control, PQexec(control, sql), PGRES_COMMAND_OK, "COMMIT PREPARED");
}

static double run_raw(const char *table, uint64_t rows)
{
    PGconn *data = tpc_test_pg_connect(), *control = tpc_test_pg_connect();
    unsigned char *buf = malloc(COPY_BUFFER + 256);
    if (!data || !control || !buf)
        tpc_test_bench_die("raw connections", NULL);
    char copy[256];
    snprintf(copy, sizeof copy, "COPY %s FROM STDIN (FORMAT binary)", table);
    double t0 = tpc_test_now_s(), next = t0 + 1.0;
    size_t len = 0;
    int txns = 0;
    start_txn(data, copy);
    for (uint64_t i = 0; i < rows; i++) {
        unsigned char *p = buf + len;
        put_be(p, 2, 2);
        put_be(p + 2, 8, 4);
        put_be(p + 6, i, 8);
        put_be(p + 14, TEXT_BYTES, 4);
        text_of(i, (char *)p + 18);
        len += 18 + TEXT_BYTES;
        if (len >= COPY_BUFFER) {
            PQputCopyData(data, (const char *)buf, (int)len);
            len = 0;
            if (tpc_test_now_s() >= next) {
                end_txn(data, control, txns++);
                start_txn(data, copy);
                next += 1.0;
            }
        }
    }
    PQputCopyData(data, (const char *)buf, (int)len);
    end_txn(data, control, txns++);
    double secs = tpc_test_now_s() - t0;
    free(buf);
    PQfinish(data);
    PQfinish(control);
    return secs;
}

/* The write-ahead work by hand: stage batch @n committed, then move it in one transaction. */
static void stage_and_move(PGconn *pg, const char *raw, const char *staging, const char *marker,
                           int n)
{
    static const unsigned char trailer[2] = {0xff, 0xff};
    PQputCopyData(pg, (const char *)trailer, 2);
    PQputCopyEnd(pg, NULL);
    expect(pg, PQgetResult(pg), PGRES_COMMAND_OK, "end COPY");
    PQclear(PQgetResult(pg));
    expect(pg, PQexec(pg, "COMMIT"), PGRES_COMMAND_OK, "COMMIT the staged rows");
    char sql[512];
    expect(pg, PQexec(pg, "BEGIN"), PGRES_COMMAND_OK, "BEGIN the move");
    snprintf(sql, sizeof sql, "INSERT INTO %s VALUES ('bench-pg-wa-%d-%d')", marker, (int)getpid(),
             n);
    expect(pg, PQexec(pg, sql), PGRES_COMMAND_OK, "insert the marker");
    snprintf(sql, sizeof sql,
             "INSERT INTO %s (id, payload) SELECT id, payload FROM %s WHERE batch = %d", raw,
             staging, n);
    expect(pg, PQexec(pg, sql), PGRES_COMMAND_OK, "move the rows");
    snprintf(sql, sizeof sql, "DELETE FROM %s WHERE batch = %d", staging, n);
    expect(pg, PQexec(pg, sql), PGRES_COMMAND_OK, "delete the staged rows");
    expect(pg, PQexec(pg, "COMMIT"), PGRES_COMMAND_OK, "COMMIT the move");
}

static void start_staging(PGconn *pg, const char *copy)
{
    expect(pg, PQexec(pg, "BEGIN"), PGRES_COMMAND_OK, "BEGIN");
    expect(pg, PQexec(pg, copy), PGRES_COPY_IN, "COPY");
    static const unsigned char header[19] = {'P', 'G', 'C', 'O', 'P', 'Y', '\n', 0xff, '\r', '\n'};
    PQputCopyData(pg, (const char *)header, sizeof header);
}

static double run_raw_write_ahead(PGconn *admin, const char *raw, uint64_t rows)
{
    char staging[96], marker[96], copy[256];
    tpc_test_unique_name(staging, sizeof staging, "bench_pg_wa_stage", '_');
    tpc_test_unique_name(marker, sizeof marker, "bench_pg_wa_marker", '_');
    if (!tpc_test_pg_exec(admin, "CREATE TABLE %s (batch int, id bigint, payload text)", staging) ||
        !tpc_test_pg_exec(admin, "CREATE TABLE %s (gid text PRIMARY KEY)", marker))
        tpc_test_bench_die("raw write-ahead tables", NULL);
    PGconn *pg = tpc_test_pg_connect();
    unsigned char *buf = malloc(COPY_BUFFER + 256);
    if (!pg || !buf)
        tpc_test_bench_die("raw write-ahead connection", NULL);
    snprintf(copy, sizeof copy, "COPY %s FROM STDIN (FORMAT binary)", staging);
    double t0 = tpc_test_now_s(), next = t0 + 1.0;
    size_t len = 0;
    int batch = 0;
    start_staging(pg, copy);
    for (uint64_t i = 0; i < rows; i++) {
        unsigned char *p = buf + len;
        put_be(p, 3, 2);
        put_be(p + 2, 4, 4);
        put_be(p + 6, (uint64_t)batch, 4);
        put_be(p + 10, 8, 4);
        put_be(p + 14, i, 8);
        put_be(p + 22, TEXT_BYTES, 4);
        text_of(i, (char *)p + 26);
        len += 26 + TEXT_BYTES;
        if (len >= COPY_BUFFER) {
            PQputCopyData(pg, (const char *)buf, (int)len);
            len = 0;
            if (tpc_test_now_s() >= next) {
                stage_and_move(pg, raw, staging, marker, batch++);
                start_staging(pg, copy);
                next += 1.0;
            }
        }
    }
    PQputCopyData(pg, (const char *)buf, (int)len);
    stage_and_move(pg, raw, staging, marker, batch++);
    double secs = tpc_test_now_s() - t0;
    free(buf);
    PQfinish(pg);
    tpc_test_pg_exec(admin, "DROP TABLE %s", staging);
    tpc_test_pg_exec(admin, "DROP TABLE %s", marker);
    return secs;
}

/* One staged changelog tuple (op, seq, id, text or NULL) of record @i into @p; @returns its
 * length. */
static size_t changelog_tuple(unsigned char *p, uint64_t i)
{
    bool del = is_delete(i);
    put_be(p, 4, 2);
    put_be(p + 2, 2, 4);
    put_be(p + 6, del ? 2 : 1, 2);
    put_be(p + 8, 8, 4);
    put_be(p + 12, i, 8);
    put_be(p + 20, 8, 4);
    put_be(p + 24, (uint64_t)key_of(i), 8);
    if (del) {
        put_be(p + 32, 0xffffffffu, 4);
        return 36;
    }
    put_be(p + 32, TEXT_BYTES, 4);
    text_of(i, (char *)p + 36);
    return 36 + TEXT_BYTES;
}

/* The changelog by hand into @table (key id): a staging table per transaction, merged at its end
 * in one statement with its DROP, then PREPARE TRANSACTION and COMMIT PREPARED. */
static double run_raw_changelog(const char *table, uint64_t rows)
{
    PGconn *data = tpc_test_pg_connect(), *control = tpc_test_pg_connect();
    unsigned char *buf = malloc(COPY_BUFFER + 256);
    if (!data || !control || !buf)
        tpc_test_bench_die("raw changelog connections", NULL);
    char create[256], copy[256], merge[1024];
    snprintf(create, sizeof create,
             "BEGIN; CREATE UNLOGGED TABLE %s_stage (op int2, seq int8, id bigint, payload text)",
             table);
    snprintf(copy, sizeof copy, "COPY %s_stage FROM STDIN (FORMAT binary)", table);
    snprintf(merge, sizeof merge,
             "WITH last AS (SELECT DISTINCT ON (id) * FROM %s_stage ORDER BY id, seq DESC), "
             "deleted AS (DELETE FROM %s t USING last WHERE last.op = 2 AND t.id = last.id) "
             "INSERT INTO %s (id, payload) SELECT id, payload FROM last WHERE op = 1 "
             "ON CONFLICT (id) DO UPDATE SET payload = EXCLUDED.payload; DROP TABLE %s_stage",
             table, table, table, table);
    static const unsigned char header[19] = {'P', 'G', 'C', 'O', 'P', 'Y', '\n', 0xff, '\r', '\n'};
    static const unsigned char trailer[2] = {0xff, 0xff};
    double t0 = tpc_test_now_s(), next = t0 + 1.0;
    size_t len = 0;
    int txns = 0;
    for (uint64_t i = 0; i < rows;) {
        expect(data, PQexec(data, create), PGRES_COMMAND_OK, "create the staging table");
        expect(data, PQexec(data, copy), PGRES_COPY_IN, "COPY");
        PQputCopyData(data, (const char *)header, sizeof header);
        for (; i < rows; i++) {
            len += changelog_tuple(buf + len, i);
            if (len >= COPY_BUFFER) {
                PQputCopyData(data, (const char *)buf, (int)len);
                len = 0;
                if (tpc_test_now_s() >= next) {
                    next += 1.0;
                    i++;
                    break;
                }
            }
        }
        PQputCopyData(data, (const char *)buf, (int)len);
        len = 0;
        PQputCopyData(data, (const char *)trailer, 2);
        PQputCopyEnd(data, NULL);
        expect(data, PQgetResult(data), PGRES_COMMAND_OK, "end COPY");
        PQclear(PQgetResult(data));
        expect(data, PQexec(data, merge), PGRES_COMMAND_OK, "merge");
        char sql[128];
        snprintf(sql, sizeof sql, "PREPARE TRANSACTION 'bench-pg-cl-%d-%d'", (int)getpid(), txns);
        expect(data, PQexec(data, sql), PGRES_COMMAND_OK, "PREPARE TRANSACTION");
        snprintf(sql, sizeof sql, "COMMIT PREPARED 'bench-pg-cl-%d-%d'", (int)getpid(), txns++);
        expect(control, PQexec(control, sql), PGRES_COMMAND_OK, "COMMIT PREPARED");
    }
    double secs = tpc_test_now_s() - t0;
    free(buf);
    PQfinish(data);
    PQfinish(control);
    return secs;
}

/* Dies unless @table holds exactly what the changelog of @rows records leaves; drops it. */
static void expect_changelog(PGconn *pg, const char *table, uint64_t rows)
{
    int64_t *last = malloc(KEYS * sizeof *last);
    if (!last)
        tpc_test_bench_die("memory", NULL);
    for (int k = 0; k < KEYS; k++)
        last[k] = -1;
    for (uint64_t i = 0; i < rows; i++)
        last[key_of(i)] = is_delete(i) ? -1 : (int64_t)i;
    long long present = 0, sum = 0;
    for (int k = 0; k < KEYS; k++)
        if (last[k] >= 0) {
            present++;
            sum += last[k];
        }
    free(last);
    /* Each row's text starts with the number of the record that wrote it. */
    long long n = tpc_test_pg_long(pg, "SELECT count(*) FROM %s", table);
    long long s = tpc_test_pg_long(
        pg, "SELECT coalesce(sum(substring(payload FROM '^[0-9]+')::int8), 0) FROM %s", table);
    tpc_test_pg_exec(pg, "DROP TABLE %s", table);
    if (n != present || s != sum)
        tpc_test_bench_die("a changelog table is not the changelog applied once", NULL);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void commit_latency(const char *name)
{
    qsort(commit_ms, (size_t)commits, sizeof *commit_ms, cmp_double);
    double p50 = commits ? commit_ms[commits / 2] : 0;
    double p99 = commits ? commit_ms[(commits * 99) / 100 < commits ? (commits * 99) / 100 : 0] : 0;
    printf("bench pg %scommit_p50_ms %.2f ms\n", name, p50);
    printf("bench pg %scommit_p99_ms %.2f ms\n", name, p99);
}

/* A table (bigint, text) with a unique name, made on @pg. */
static void make_table(PGconn *pg, char *name, size_t cap, const char *tag)
{
    tpc_test_unique_name(name, cap, tag, '_');
    if (!tpc_test_pg_exec(pg, "CREATE TABLE %s (id bigint, payload text)", name))
        tpc_test_bench_die("tables", NULL);
}

/* The server's write-ahead log position, in bytes. */
static long long wal_position(PGconn *pg)
{
    return tpc_test_pg_long(pg, "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn");
}

static void expect_rows(PGconn *pg, const char *table, uint64_t rows)
{
    long long got = tpc_test_pg_long(pg, "SELECT count(*) FROM %s", table);
    tpc_test_pg_exec(pg, "DROP TABLE %s", table);
    if (got != (long long)rows)
        tpc_test_bench_die("a table does not hold every row", NULL);
}

int main(void)
{
    const char *conninfo = tpc_test_env_require("TWOPC_TEST_PG_CONNINFO");
    if (!conninfo)
        return 1;
    const char *env = getenv("TWOPC_BENCH_ROWS");
    uint64_t rows = env ? strtoull(env, NULL, 10) : 0;
    if (!rows)
        rows = 1000000;
    PGconn *pg = tpc_test_pg_connect();
    if (!pg)
        tpc_test_bench_die("connection", NULL);
    char sink_table[96], raw_table[96], wa_sink_table[96], wa_raw_table[96], staging[96];
    make_table(pg, sink_table, sizeof sink_table, "bench_pg_sink");
    make_table(pg, raw_table, sizeof raw_table, "bench_pg_raw");
    make_table(pg, wa_sink_table, sizeof wa_sink_table, "bench_pg_wa_sink");
    make_table(pg, wa_raw_table, sizeof wa_raw_table, "bench_pg_wa_raw");
    tpc_test_unique_name(staging, sizeof staging, "bench_pg_staging", '_');

    double raw = run_raw(raw_table, rows);
    long long wal0 = wal_position(pg);
    double sink = run_sink(conninfo, sink_table, rows, "prepared", staging, false);
    long long wal1 = wal_position(pg);
    size_t prepared_handle = handle_bytes;
    printf("bench pg sink_rows_per_s %.0f rows/s\n", (double)rows / sink);
    printf("bench pg raw_rows_per_s %.0f rows/s\n", (double)rows / raw);
    printf("bench pg ratio %.3f ratio\n", raw / sink);
    commit_latency("");
    printf("bench pg handle_bytes %zu bytes\n", prepared_handle);
    printf("bench pg wal_bytes_per_row %.0f bytes\n", (double)(wal1 - wal0) / (double)rows);

    double wa_raw = run_raw_write_ahead(pg, wa_raw_table, rows);
    wal0 = wal_position(pg);
    double wa_sink = run_sink(conninfo, wa_sink_table, rows, "write-ahead", staging, false);
    wal1 = wal_position(pg);
    printf("bench pg wa_sink_rows_per_s %.0f rows/s\n", (double)rows / wa_sink);
    printf("bench pg wa_raw_rows_per_s %.0f rows/s\n", (double)rows / wa_raw);
    printf("bench pg wa_ratio %.3f ratio\n", wa_raw / wa_sink);
    printf("bench pg wa_vs_prepared %.3f ratio\n", sink / wa_sink);
    commit_latency("wa_");
    printf("bench pg wa_handle_bytes %zu bytes\n", handle_bytes);
    /* The double write: WAL the server wrote per row (other sessions' too, on a shared server). */
    printf("bench pg wa_wal_bytes_per_row %.0f bytes\n", (double)(wal1 - wal0) / (double)rows);

    char cl_sink_table[96], cl_raw_table[96];
    tpc_test_unique_name(cl_sink_table, sizeof cl_sink_table, "bench_pg_cl_sink", '_');
    tpc_test_unique_name(cl_raw_table, sizeof cl_raw_table, "bench_pg_cl_raw", '_');
    if (!tpc_test_pg_exec(pg, "CREATE TABLE %s (id bigint PRIMARY KEY, payload text)",
                          cl_sink_table) ||
        !tpc_test_pg_exec(pg, "CREATE TABLE %s (id bigint PRIMARY KEY, payload text)",
                          cl_raw_table))
        tpc_test_bench_die("tables", NULL);
    double cl_raw = run_raw_changelog(cl_raw_table, rows);
    double cl_sink = run_sink(conninfo, cl_sink_table, rows, "prepared", staging, true);
    printf("bench pg changelog_sink_rows_per_s %.0f rows/s\n", (double)rows / cl_sink);
    printf("bench pg changelog_raw_rows_per_s %.0f rows/s\n", (double)rows / cl_raw);
    printf("bench pg changelog_ratio %.3f ratio\n", cl_raw / cl_sink);
    printf("bench pg changelog_vs_copy %.3f ratio\n", sink / cl_sink);
    commit_latency("changelog_");
    expect_changelog(pg, cl_sink_table, rows);
    expect_changelog(pg, cl_raw_table, rows);
    expect_rows(pg, sink_table, rows);
    expect_rows(pg, raw_table, rows);
    expect_rows(pg, wa_sink_table, rows);
    expect_rows(pg, wa_raw_table, rows);
    if (tpc_test_pg_long(pg, "SELECT count(*) FROM %s", staging) != 0)
        tpc_test_bench_die("rows are left in the staging table", NULL);
    tpc_test_pg_exec(pg, "DROP TABLE %s", staging);
    PQfinish(pg);
    return 0;
}
