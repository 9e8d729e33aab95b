/*
 * PostgreSQL sink throughput against a plain libpq loop, in the same run on the same server, for
 * every way the sink writes and commits. Each part runs the sink and the loop into tables of their
 * own and then checks both tables hold what the records make, once.
 *
 * copy (exactly-once, prepared commit):
 *   sink:    sequence source -> exactly-once pg sink in copy mode, checkpoints every second (each
 *            one a marker row and PREPARE TRANSACTION, then COMMIT PREPARED once it is complete)
 *   raw:     one loop encoding the same rows into binary COPY, sent in buffers of the sink's size,
 *            with PREPARE TRANSACTION + COMMIT PREPARED (from a second connection) once a second
 * write-ahead:
 *   wa sink: the same sink with pg.commit=write-ahead (rows committed into the write-ahead table at
 *            the checkpoint, moved into the table by one transaction once it is complete)
 *   wa raw:  one loop doing that by hand, as the sink does it, without prepared transactions: the
 *            rows as binary COPY tuples in parts of the sink's buffer size, each part one bytea
 *            value INSERTed into a write-ahead table of the sink's layout (sent, and its result
 *            read only before the next part is sent, so that the server stores one part while the
 *            next is encoded), in one transaction
 *            committed once a second; then one transaction that inserts a marker row, reads each
 *            part back (on the other connection) and sends it into one binary COPY into the
 *            table, and DELETEs the parts
 * changelog:
 *   changelog sink: the sink with pg.mode=changelog (prepared commit): record i upserts key
 *            (i * 7919) mod KEYS with its text, one in ten deletes it instead, into a table with a
 *            primary key
 *   changelog raw: one loop doing that by hand: per transaction an unlogged staging table, binary
 *            COPY of (operation, sequence, id, text) into it, and once a second the merge
 *            statement (latest operation per key, DELETE ... USING, INSERT ... ON CONFLICT DO
 *            UPDATE), DROP TABLE, PREPARE TRANSACTION and COMMIT PREPARED; both tables must end as
 *            the changelog applied once
 * upsert:
 *   upsert sink: the sink with pg.mode=upsert (prepared commit): record i upserts key
 *            (i * 7919) mod KEYS with its text, into a table with a primary key
 *   upsert raw: one loop doing that by hand as the sink does, with less: per transaction an
 *            unlogged staging table, binary COPY of (sequence, id, text) into it (the sink's staged
 *            tuples also carry the operation), and once a second INSERT ... SELECT DISTINCT ON
 *            (id) ... ORDER BY id, sequence DESC ON CONFLICT (id) DO UPDATE with the DROP TABLE,
 *            PREPARE TRANSACTION and COMMIT PREPARED; both tables must end as the upserts applied
 *            once (batched INSERT ... ON CONFLICT statements, what the sink sent before, are
 *            slower: docs/performance.md)
 * tables (two tables in one sink, copy mode, prepared commit):
 *   tables sink: the sink with pg.table listing two tables, each record a row in both
 *            (tpc_pg_row_table())
 *   tables raw: one loop doing that by hand: a COPY buffer per table, a full one sent in a binary
 *            COPY into its table (ending the other table's COPY first, as the sink does), both
 *            tables in one transaction, PREPARE TRANSACTION + COMMIT PREPARED once a second
 * at-least-once:
 *   at_least_once sink: the copy sink with guarantee=at-least-once (a plain COMMIT at each
 *            checkpoint, no marker row, no prepared transaction)
 *   at_least_once raw: the copy loop with COMMIT once a second instead of PREPARE TRANSACTION +
 *            COMMIT PREPARED
 *
 * How it is timed. Each part runs in rounds (TWOPC_BENCH_PG_ROUNDS, default 5): a round runs the
 * raw loop and the sink once each, the raw loop first in even rounds and the sink first in odd
 * ones, so that neither side always runs in the other's wake and the two of a round see about the
 * same load of a shared machine. Each side makes its tables, runs, then checks and drops them
 * before the other side starts, so that autovacuum of the rows one side just wrote does not run
 * in the other's time. Both sides are timed from nothing open to everything committed: the sink
 * from the job's start (its connections, the server checks, the final checkpoint) to its end, the
 * raw loop from its connects to its last commit. Before the first part an untimed raw copy of a
 * fifth of the rows warms the server up (new write-ahead log segments, caches), which the first
 * timed run would otherwise pay alone. A run of a million rows writes some 270 MB of write-ahead
 * log, so the server's own checkpoints (at max_wal_size) fall into about one run in five and slow
 * it by up to half, whichever side it is: hence two million rows and five rounds by default, and
 * medians. A part reports the rates of the median times and the
 * median of the rounds' ratios, with the lowest and the highest, and the median CPU time per row
 * of the client side (the sink's threads, or the raw loop; the checks of the tables included),
 * which load from other programs changes far less than the times.
 *
 * Rows are (bigint, 100-byte text). Commit latency is that of each commit of the sink (COMMIT
 * PREPARED, or the move) over the part's rounds, measured by wrapping the sink's commit, and the
 * checkpoint wait the time from the end of each pre-commit to the start of its commit (the
 * checkpoint completing: the checkpoint file written and synced, the notification; time the raw
 * loops do not spend, and in which upsert rows wait in memory, docs/postgres.md); the
 * handle size is what the sink stores per transaction in a checkpoint; the write-ahead log per
 * row is the server's over the sink runs (other sessions' included), where the write-ahead mode's
 * double write shows. Prints
 *   bench pg <metric> <value> <unit>
 * with, for each part, <part>_sink_rows_per_s, <part>_raw_rows_per_s, <part>_ratio (the median of
 * raw time over sink time), <part>_ratio_min and <part>_ratio_max (the copy part's have no
 * prefix, write-ahead's are wa_).
 * Environment: TWOPC_TEST_PG_CONNINFO (the server; the prepared runs need
 * max_prepared_transactions > 0), TWOPC_BENCH_ROWS (default 2000000), TWOPC_BENCH_PG_ROUNDS
 * (default 5, at most 15), TWOPC_BENCH_PG_PARTS (the parts to run, comma-separated, of copy,
 * write-ahead, changelog, upsert, tables, at-least-once; default all; they run in that order
 * whatever the list's; the <part>_vs_copy lines and wa_vs_prepared need copy too).
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
#include <sys/resource.h>
#include <unistd.h>

#define TEXT_BYTES  100
#define COPY_BUFFER (256u << 10)
#define MAX_COMMITS 4096
#define KEYS        100000
#define MAX_ROUNDS  15

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

static tpc_error_t *encode_upsert(void *opaque, const tpc_record_t *r, tpc_pg_row_t *row)
{
    (void)opaque;
    int subtask;
    uint64_t seq;
    tpc_test_seq_decode(r->key, r->key_len, &subtask, &seq);
    char text[TEXT_BYTES];
    text_of(seq, text);
    tpc_pg_row_int8(row, key_of(seq));
    tpc_pg_row_text(row, text, TEXT_BYTES);
    return NULL;
}

/* Two tables: the row of encode() into the first, and again into the second. */
static tpc_error_t *encode_two(void *opaque, const tpc_record_t *r, tpc_pg_row_t *row)
{
    encode(opaque, r, row);
    tpc_pg_row_table(row, 1);
    return encode(opaque, r, row);
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

/* From the end of a pre-commit to the start of its commit: the checkpoint completing (every task's
 * snapshot, the checkpoint file written and synced) and the notification reaching the subtask.
 * The sink has one subtask: one transaction at a time between the two. */
static double wait_ms[MAX_COMMITS], pre_committed_at;
static int waits;

static tpc_error_t *timed_pre_commit(void *conn, void *txn, uint64_t checkpoint_id)
{
    tpc_error_t *err = pg_ops->pre_commit(conn, txn, checkpoint_id);
    pre_committed_at = err ? 0 : tpc_test_now_s();
    return err;
}

static tpc_error_t *timed_commit(void *conn, void *txn)
{
    double t0 = tpc_test_now_s();
    if (pre_committed_at > 0 && waits < MAX_COMMITS)
        wait_ms[waits++] = (t0 - pre_committed_at) * 1000.0;
    pre_committed_at = 0;
    tpc_error_t *err = pg_ops->commit(conn, txn);
    if (!err && commits < MAX_COMMITS)
        commit_ms[commits++] = (tpc_test_now_s() - t0) * 1000.0;
    return err;
}

/* One sink run: where, how it writes and commits, and its encoder. */
typedef struct {
    const char *table;     /* pg.table */
    const char *mode;      /* pg.mode */
    const char *commit;    /* pg.commit */
    const char *keys;      /* pg.key-columns, or NULL */
    const char *guarantee; /* the sink's guarantee */
    tpc_pg_encoder_t encoder;
} sink_conf_t;

static double run_sink(const char *conninfo, const sink_conf_t *o, uint64_t rows,
                       const char *staging)
{
    char *ckpt = tpc_test_tmpdir("bench-pg-ckpt");
    char prefix[96];
    tpc_test_unique_name(prefix, sizeof prefix, "bench-pg", '-');
    tpc_test_seq_conf_t src = {.count_default = rows, .per_poll = 256};
    tpc_txn_sink_t *conf_sink = NULL, *sink = NULL;
    tpc_error_t *err = tpc_pg_sink_new(&conf_sink);
    const char *kv[][2] = {{"pg.conninfo", conninfo},         {"pg.table", o->table},
                           {"pg.gid-prefix", prefix},         {"pg.commit", o->commit},
                           {"pg.write-ahead-table", staging}, {"pg.mode", o->mode},
                           {"guarantee", o->guarantee}};
    for (size_t i = 0; i < sizeof kv / sizeof *kv && !err; i++)
        err = tpc_txn_sink_set(conf_sink, kv[i][0], kv[i][1]);
    if (!err && o->keys)
        err = tpc_txn_sink_set(conf_sink, "pg.key-columns", o->keys);
    if (!err)
        err = tpc_pg_sink_set_encoder(conf_sink, o->encoder, NULL);
    if (!err) {
        /* conf_sink keeps owning the configuration; the timed sink borrows it. */
        pg_ops = tpc_txn_sink_connector_ops(conf_sink);
        timed_ops = *pg_ops;
        timed_ops.commit = timed_commit;
        timed_ops.pre_commit = timed_pre_commit;
        timed_ops.recover_and_commit = timed_commit;
        timed_ops.serialize = sized_serialize;
        timed_ops.configure = NULL;
        timed_ops.release = NULL;
        err = tpc_txn_sink_new(&timed_ops, tpc_txn_sink_connector_arg(conf_sink), &sink);
    }
    /* The guarantee is the transactional sink's, not the connector's: the timed sink needs it
     * too, or it runs exactly-once (marker row, PREPARE TRANSACTION, COMMIT PREPARED). */
    if (!err)
        err = tpc_txn_sink_set(sink, "guarantee", o->guarantee);
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

static void end_copy(PGconn *data)
{
    static const unsigned char trailer[2] = {0xff, 0xff};
    PQputCopyData(data, (const char *)trailer, 2);
    PQputCopyEnd(data, NULL);
    expect(data, PQgetResult(data), PGRES_COMMAND_OK, "end COPY");
    PQclear(PQgetResult(data));
}

/* PREPARE TRANSACTION number @n of this run on @data, COMMIT PREPARED on @control; or, when not
 * @prepared, a plain COMMIT. */
static void finish_txn(PGconn *data, PGconn *control, int n, bool prepared)
{
    if (!prepared) {
        expect(data, PQexec(data, "COMMIT"), PGRES_COMMAND_OK, "COMMIT");
        return;
    }
    char sql[128];
    snprintf(sql, sizeof sql, "PREPARE TRANSACTION 'bench-pg-raw-%d-%d'", (int)getpid(), n);
    expect(data, PQexec(data, sql), PGRES_COMMAND_OK, "PREPARE TRANSACTION");
    snprintf(sql, sizeof sql, "COMMIT PREPARED 'bench-pg-raw-%d-%d'", (int)getpid(), n);
    expect(control, PQexec(control, sql), PGRES_COMMAND_OK, "COMMIT PREPARED");
}

static void end_txn(PGconn *data, PGconn *control, int n, bool prepared)
{
    end_copy(data);
    finish_txn(data, control, n, prepared);
}

/* The copy loop; @prepared: PREPARE TRANSACTION + COMMIT PREPARED, else COMMIT, once a second. */
static double run_raw(const char *table, uint64_t rows, bool prepared)
{
    double t0 = tpc_test_now_s(), next = t0 + 1.0;
    PGconn *data = tpc_test_pg_connect(), *control = tpc_test_pg_connect();
    unsigned char *buf = malloc(COPY_BUFFER + 256);
    if (!data || !control || !buf)
        tpc_test_bench_die("raw connections", NULL);
    char copy[256];
    snprintf(copy, sizeof copy, "COPY %s FROM STDIN (FORMAT binary)", table);
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
                end_txn(data, control, txns++, prepared);
                start_txn(data, copy);
                next += 1.0;
            }
        }
    }
    PQputCopyData(data, (const char *)buf, (int)len);
    end_txn(data, control, txns++, prepared);
    double secs = tpc_test_now_s() - t0;
    free(buf);
    PQfinish(data);
    PQfinish(control);
    return secs;
}

/* One part: @len bytes of COPY tuples (@rows rows) of transaction @gid, into @staging on @control,
 * inside its open transaction. */
/* The result of the part INSERT in flight on @control, if any: a part is sent and the next one
 * encoded while the server stores it, as the sink does. */
static void settle_part(PGconn *control)
{
    PGresult *res;
    while ((res = PQgetResult(control)) != NULL)
        expect(control, res, PGRES_COMMAND_OK, "write a part ahead");
}

static void stage_part(PGconn *control, const char *staging, const char *gid, int part,
                       const unsigned char *buf, size_t len, int rows)
{
    char sql[512], num[16], count[16];
    snprintf(sql, sizeof sql,
             "INSERT INTO %s (gid, part, sink, subtask, target, row_count, data) VALUES ($1, $2, "
             "'bench-pg-raw', 0, 'raw', $3, $4)",
             staging);
    snprintf(num, sizeof num, "%d", part);
    snprintf(count, sizeof count, "%d", rows);
    const char *values[4] = {gid, num, count, (const char *)buf};
    const int lengths[4] = {0, 0, 0, (int)len};
    const int formats[4] = {0, 0, 0, 1};
    settle_part(control);
    if (!PQsendQueryParams(control, sql, 4, NULL, values, lengths, formats, 0))
        tpc_test_bench_die("write a part ahead", NULL);
}

/* The move of transaction @gid's @parts parts into @raw, in one transaction on @data: the marker
 * row, each part read back on @control and sent into one COPY, the parts deleted, COMMIT. */
static void move_parts(PGconn *data, PGconn *control, const char *raw, const char *staging,
                       const char *marker, const char *gid, int parts)
{
    char sql[512], num[16];
    expect(data, PQexec(data, "BEGIN"), PGRES_COMMAND_OK, "BEGIN the move");
    snprintf(sql, sizeof sql, "INSERT INTO %s VALUES ($1)", marker);
    expect(data, PQexecParams(data, sql, 1, NULL, (const char *[]){gid}, NULL, NULL, 0),
           PGRES_COMMAND_OK, "insert the marker");
    snprintf(sql, sizeof sql, "COPY %s FROM STDIN (FORMAT binary)", raw);
    expect(data, PQexec(data, sql), PGRES_COPY_IN, "COPY");
    static const unsigned char header[19] = {'P', 'G', 'C', 'O', 'P', 'Y', '\n', 0xff, '\r', '\n'};
    PQputCopyData(data, (const char *)header, sizeof header);
    snprintf(sql, sizeof sql, "SELECT data FROM %s WHERE gid = $1 AND part = $2", staging);
    for (int p = 0; p < parts; p++) {
        snprintf(num, sizeof num, "%d", p);
        PGresult *res =
            PQexecParams(control, sql, 2, NULL, (const char *[]){gid, num}, NULL, NULL, 1);
        if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
            tpc_test_bench_die("read a part back", NULL);
        PQputCopyData(data, PQgetvalue(res, 0, 0), PQgetlength(res, 0, 0));
        PQclear(res);
    }
    end_copy(data);
    snprintf(sql, sizeof sql, "DELETE FROM %s WHERE gid = $1", staging);
    expect(data, PQexecParams(data, sql, 1, NULL, (const char *[]){gid}, NULL, NULL, 0),
           PGRES_COMMAND_OK, "delete the parts");
    expect(data, PQexec(data, "COMMIT"), PGRES_COMMAND_OK, "COMMIT the move");
}

/* The write-ahead commit by hand, as the sink does it: parts of COPY tuples of the sink's buffer
 * size as bytea into a write-ahead table of the sink's layout, in one transaction on the control
 * connection committed once a second; then the move on the data connection. The write-ahead and
 * marker tables are made by the first run and kept for the later ones, as the sink's are: a
 * write-ahead table emptied by DELETE carries the dead rows of earlier runs until vacuum, and a
 * fresh one per run would spare the loop that. */
static double run_raw_write_ahead(PGconn *admin, const char *raw, uint64_t rows,
                                  const char *staging, const char *marker)
{
    bool made = tpc_test_pg_long(admin, "SELECT (to_regclass('%s') IS NOT NULL)::int", staging);
    if (!made &&
        (!tpc_test_pg_exec(admin,
                           "CREATE TABLE %s (gid text NOT NULL, part integer NOT NULL, sink text "
                           "NOT NULL, subtask integer NOT NULL, target text NOT NULL, row_count "
                           "integer NOT NULL, data bytea NOT NULL, created timestamptz NOT NULL "
                           "DEFAULT now(), PRIMARY KEY (gid, part))",
                           staging) ||
         !tpc_test_pg_exec(admin, "ALTER TABLE %s ALTER COLUMN data SET STORAGE EXTERNAL",
                           staging) ||
         !tpc_test_pg_exec(admin, "CREATE TABLE %s (gid text PRIMARY KEY)", marker)))
        tpc_test_bench_die("raw write-ahead tables", NULL);
    double t0 = tpc_test_now_s(), next = t0 + 1.0;
    PGconn *data = tpc_test_pg_connect(), *control = tpc_test_pg_connect();
    unsigned char *buf = malloc(COPY_BUFFER + 256);
    if (!data || !control || !buf)
        tpc_test_bench_die("raw write-ahead connections", NULL);
    size_t len = 0;
    int txn = 0, parts = 0, in_part = 0;
    char gid[64];
    static int run; /* the marker table is kept: gids of every run apart */
    run++;
    snprintf(gid, sizeof gid, "bench-pg-wa-%d-%d-%d", (int)getpid(), run, txn);
    expect(control, PQexec(control, "BEGIN"), PGRES_COMMAND_OK, "BEGIN writing ahead");
    for (uint64_t i = 0; i < rows; i++) {
        unsigned char *p = buf + len;
        put_be(p, 2, 2);
        put_be(p + 2, 8, 4);
        put_be(p + 6, i, 8);
        put_be(p + 14, TEXT_BYTES, 4);
        text_of(i, (char *)p + 18);
        len += 18 + TEXT_BYTES;
        in_part++;
        bool last = i + 1 == rows;
        if (len < COPY_BUFFER && !last)
            continue;
        stage_part(control, staging, gid, parts++, buf, len, in_part);
        len = 0;
        in_part = 0;
        if (last || tpc_test_now_s() >= next) {
            settle_part(control);
            expect(control, PQexec(control, "COMMIT"), PGRES_COMMAND_OK,
                   "COMMIT the parts written ahead");
            move_parts(data, control, raw, staging, marker, gid, parts);
            parts = 0;
            snprintf(gid, sizeof gid, "bench-pg-wa-%d-%d-%d", (int)getpid(), run, ++txn);
            if (!last)
                expect(control, PQexec(control, "BEGIN"), PGRES_COMMAND_OK, "BEGIN writing ahead");
            next += 1.0;
        }
    }
    double secs = tpc_test_now_s() - t0;
    free(buf);
    PQfinish(data);
    PQfinish(control);
    return secs;
}

/* One staged upsert tuple (seq, id, text) of record @i into @p; @returns its length. The sink's
 * staged tuples also carry the operation, which an upsert loop does not need. */
static size_t upsert_tuple(unsigned char *p, uint64_t i)
{
    put_be(p, 3, 2);
    put_be(p + 2, 8, 4);
    put_be(p + 6, i, 8);
    put_be(p + 14, 8, 4);
    put_be(p + 18, (uint64_t)key_of(i), 8);
    put_be(p + 26, TEXT_BYTES, 4);
    text_of(i, (char *)p + 30);
    return 30 + TEXT_BYTES;
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
 * in one statement with its DROP, then PREPARE TRANSACTION and COMMIT PREPARED. @upserts: every
 * record an upsert, staged without an operation and merged without the DELETE. */
static double run_raw_changelog(const char *table, uint64_t rows, bool upserts)
{
    double t0 = tpc_test_now_s(), next = t0 + 1.0;
    PGconn *data = tpc_test_pg_connect(), *control = tpc_test_pg_connect();
    unsigned char *buf = malloc(COPY_BUFFER + 256);
    if (!data || !control || !buf)
        tpc_test_bench_die("raw changelog connections", NULL);
    char create[256], copy[256], merge[1024];
    snprintf(create, sizeof create,
             "BEGIN; CREATE UNLOGGED TABLE %s_stage (%sseq int8, id bigint, payload text)", table,
             upserts ? "" : "op int2, ");
    snprintf(copy, sizeof copy, "COPY %s_stage FROM STDIN (FORMAT binary)", table);
    if (upserts)
        snprintf(merge, sizeof merge,
                 "INSERT INTO %s (id, payload) SELECT DISTINCT ON (id) id, payload FROM %s_stage "
                 "ORDER BY id, seq DESC ON CONFLICT (id) DO UPDATE SET payload = "
                 "EXCLUDED.payload; DROP TABLE %s_stage",
                 table, table, table);
    else
        snprintf(merge, sizeof merge,
                 "WITH last AS (SELECT DISTINCT ON (id) * FROM %s_stage ORDER BY id, seq DESC), "
                 "deleted AS (DELETE FROM %s t USING last WHERE last.op = 2 AND t.id = last.id) "
                 "INSERT INTO %s (id, payload) SELECT id, payload FROM last WHERE op = 1 "
                 "ON CONFLICT (id) DO UPDATE SET payload = EXCLUDED.payload; DROP TABLE %s_stage",
                 table, table, table, table);
    static const unsigned char header[19] = {'P', 'G', 'C', 'O', 'P', 'Y', '\n', 0xff, '\r', '\n'};
    static const unsigned char trailer[2] = {0xff, 0xff};
    size_t len = 0;
    int txns = 0;
    for (uint64_t i = 0; i < rows;) {
        expect(data, PQexec(data, create), PGRES_COMMAND_OK, "create the staging table");
        expect(data, PQexec(data, copy), PGRES_COPY_IN, "COPY");
        PQputCopyData(data, (const char *)header, sizeof header);
        for (; i < rows; i++) {
            len += upserts ? upsert_tuple(buf + len, i) : changelog_tuple(buf + len, i);
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

/* Dies unless @table holds exactly what the changelog of @rows records leaves (@deletes: with the
 * deletes of is_delete(), else every record an upsert); drops it. */
static void expect_keyed(PGconn *pg, const char *table, uint64_t rows, bool deletes)
{
    int64_t *last = malloc(KEYS * sizeof *last);
    if (!last)
        tpc_test_bench_die("memory", NULL);
    for (int k = 0; k < KEYS; k++)
        last[k] = -1;
    for (uint64_t i = 0; i < rows; i++)
        last[key_of(i)] = deletes && is_delete(i) ? -1 : (int64_t)i;
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
        tpc_test_bench_die(deletes ? "a changelog table is not the changelog applied once"
                                   : "an upsert table is not the upserts applied once",
                           NULL);
}

/* Two tables by hand: a COPY buffer each, a full one sent in a COPY into its table (ending the
 * other table's COPY first), both in one transaction, PREPARE TRANSACTION + COMMIT PREPARED once a
 * second. */
static double run_raw_tables(const char *table0, const char *table1, uint64_t rows)
{
    double t0 = tpc_test_now_s(), next = t0 + 1.0;
    PGconn *data = tpc_test_pg_connect(), *control = tpc_test_pg_connect();
    unsigned char *buf[2] = {malloc(COPY_BUFFER + 256), malloc(COPY_BUFFER + 256)};
    if (!data || !control || !buf[0] || !buf[1])
        tpc_test_bench_die("raw tables connections", NULL);
    char copy[2][256];
    snprintf(copy[0], sizeof copy[0], "COPY %s FROM STDIN (FORMAT binary)", table0);
    snprintf(copy[1], sizeof copy[1], "COPY %s FROM STDIN (FORMAT binary)", table1);
    static const unsigned char header[19] = {'P', 'G', 'C', 'O', 'P', 'Y', '\n', 0xff, '\r', '\n'};
    size_t len[2] = {0, 0};
    int txns = 0, copying = -1;
    expect(data, PQexec(data, "BEGIN"), PGRES_COMMAND_OK, "BEGIN");
    for (uint64_t i = 0; i < rows; i++) {
        bool last = i + 1 == rows;
        for (int k = 0; k < 2; k++) {
            unsigned char *p = buf[k] + len[k];
            put_be(p, 2, 2);
            put_be(p + 2, 8, 4);
            put_be(p + 6, i, 8);
            put_be(p + 14, TEXT_BYTES, 4);
            text_of(i, (char *)p + 18);
            len[k] += 18 + TEXT_BYTES;
        }
        bool sent = false;
        for (int k = 0; k < 2; k++) {
            if (len[k] < COPY_BUFFER && !last)
                continue;
            if (copying != k) {
                if (copying >= 0)
                    end_copy(data);
                expect(data, PQexec(data, copy[k]), PGRES_COPY_IN, "COPY");
                PQputCopyData(data, (const char *)header, sizeof header);
                copying = k;
            }
            PQputCopyData(data, (const char *)buf[k], (int)len[k]);
            len[k] = 0;
            sent = true;
        }
        if (last || (sent && tpc_test_now_s() >= next)) {
            end_copy(data);
            copying = -1;
            finish_txn(data, control, txns++, true);
            if (!last)
                expect(data, PQexec(data, "BEGIN"), PGRES_COMMAND_OK, "BEGIN");
            next += 1.0;
        }
    }
    double secs = tpc_test_now_s() - t0;
    free(buf[0]);
    free(buf[1]);
    PQfinish(data);
    PQfinish(control);
    return secs;
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
    qsort(wait_ms, (size_t)waits, sizeof *wait_ms, cmp_double);
    printf("bench pg %sckpt_wait_p50_ms %.2f ms\n", name, waits ? wait_ms[waits / 2] : 0);
    printf("bench pg %sckpt_wait_max_ms %.2f ms\n", name, waits ? wait_ms[waits - 1] : 0);
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

/* Dies unless @table holds rows 0 to @rows - 1, each once with its text; drops it. */
static void expect_rows(PGconn *pg, const char *table, uint64_t rows)
{
    long long n = (long long)rows;
    long long got = tpc_test_pg_long(pg, "SELECT count(*) FROM %s", table);
    long long good = tpc_test_pg_long(
        pg,
        "SELECT (count(DISTINCT id) = %lld AND min(id) = 0 AND max(id) = %lld AND "
        "bool_and(length(payload) = %d AND substring(payload FROM '^[0-9]+')::int8 = id))::int "
        "FROM %s",
        n, n - 1, TEXT_BYTES, table);
    tpc_test_pg_exec(pg, "DROP TABLE %s", table);
    if (got != n || good != 1)
        tpc_test_bench_die("a table does not hold every row once", NULL);
}

/* A table (bigint PRIMARY KEY, text) with a unique name, made on @pg. */
static void make_keyed_table(PGconn *pg, char *name, size_t cap, const char *tag)
{
    tpc_test_unique_name(name, cap, tag, '_');
    if (!tpc_test_pg_exec(pg, "CREATE TABLE %s (id bigint PRIMARY KEY, payload text)", name))
        tpc_test_bench_die("tables", NULL);
}

/* What every part shares. */
typedef struct {
    const char *conninfo;
    uint64_t rows;
    int rounds;
    PGconn *pg;
    char staging[96];                     /* pg.write-ahead-table of every sink run */
    char raw_staging[96], raw_marker[96]; /* the write-ahead loop's, kept between its runs */
    double copy_sink;    /* median seconds of the copy part's sink runs; 0 when it did not run */
    long long wal_bytes; /* the server's write-ahead log over the current part's sink runs */
} bench_t;

/* A sink run of the current part, with the server's write-ahead log it saw added up. */
static double sink_side(bench_t *b, const sink_conf_t *o)
{
    long long wal0 = wal_position(b->pg);
    double secs = run_sink(b->conninfo, o, b->rows, b->staging);
    b->wal_bytes += wal_position(b->pg) - wal0;
    return secs;
}

/* One side of a part: makes its tables, runs, checks and drops them; @returns the seconds run.
 * The tables go before the other side runs, so that autovacuum of a million rows just written
 * (vacuum after inserts, analyze) does not run in the other side's time. */
typedef double side_fn(bench_t *b);

/* CPU seconds this process used so far: the sink's threads, or the raw loop's. */
static double cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/* @fn's seconds; its CPU seconds (of this process, checks of the tables included) into @cpu. */
static double side(bench_t *b, side_fn *fn, double *cpu)
{
    double c0 = cpu_s();
    double secs = fn(b);
    *cpu = cpu_s() - c0;
    return secs;
}

/* The median of @v (sorted in place). */
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Runs the two sides b->rounds times, the raw loop first in even rounds and the sink first in odd
 * ones, so that neither always runs in the other's wake (a checkpoint of the server) and the two
 * of a round see about the same load. Prints the rates of the median times and the median of the
 * rounds' ratios (raw time over sink time of the same round) with the lowest and the highest.
 * @returns the median sink time. */
static double run_rounds(bench_t *b, const char *part, side_fn *sink_fn, side_fn *raw_fn)
{
    double sink[MAX_ROUNDS], raw[MAX_ROUNDS], ratio[MAX_ROUNDS];
    double sink_cpu[MAX_ROUNDS], raw_cpu[MAX_ROUNDS];
    commits = 0;
    waits = 0;
    handle_bytes = 0;
    b->wal_bytes = 0;
    for (int r = 0; r < b->rounds; r++) {
        if (r % 2)
            sink[r] = side(b, sink_fn, &sink_cpu[r]);
        raw[r] = side(b, raw_fn, &raw_cpu[r]);
        if (r % 2 == 0)
            sink[r] = side(b, sink_fn, &sink_cpu[r]);
        ratio[r] = raw[r] / sink[r];
    }
    double sink_m = median(sink, b->rounds), raw_m = median(raw, b->rounds);
    double ratio_m = median(ratio, b->rounds);
    double us = 1e6 / (double)b->rows;
    printf("bench pg %ssink_rows_per_s %.0f rows/s\n", part, (double)b->rows / sink_m);
    printf("bench pg %sraw_rows_per_s %.0f rows/s\n", part, (double)b->rows / raw_m);
    /* The client's CPU, which a loaded machine changes far less than the times. */
    printf("bench pg %ssink_cpu_us_per_row %.2f us\n", part, median(sink_cpu, b->rounds) * us);
    printf("bench pg %sraw_cpu_us_per_row %.2f us\n", part, median(raw_cpu, b->rounds) * us);
    printf("bench pg %sratio %.3f ratio\n", part, ratio_m);
    printf("bench pg %sratio_min %.3f ratio\n", part, ratio[0]);
    printf("bench pg %sratio_max %.3f ratio\n", part, ratio[b->rounds - 1]);
    return sink_m;
}

/* "<part>_vs_copy": the copy sink's median time over this one's, when the copy part ran. */
static void print_vs_copy(const bench_t *b, const char *name, double sink)
{
    if (b->copy_sink > 0)
        printf("bench pg %s %.3f ratio\n", name, b->copy_sink / sink);
}

/* The server's write-ahead log per row over the part's sink runs. */
static void print_wal(const bench_t *b, const char *name)
{
    printf("bench pg %s %.0f bytes\n", name,
           (double)b->wal_bytes / ((double)b->rows * (double)b->rounds));
}

/* A sink writing every record as a row of a new table (bigint, text), in @mode and @commit under
 * @guarantee; the table checked and dropped. */
static double sink_one_table(bench_t *b, const char *tag, const char *commit, const char *guarantee)
{
    char table[96];
    make_table(b->pg, table, sizeof table, tag);
    sink_conf_t o = {table, "copy", commit, NULL, guarantee, encode};
    double secs = sink_side(b, &o);
    expect_rows(b->pg, table, b->rows);
    return secs;
}

static double raw_one_table(bench_t *b, const char *tag, bool prepared)
{
    char table[96];
    make_table(b->pg, table, sizeof table, tag);
    double secs = run_raw(table, b->rows, prepared);
    expect_rows(b->pg, table, b->rows);
    return secs;
}

static double sink_copy(bench_t *b)
{
    return sink_one_table(b, "bench_pg_sink", "prepared", "exactly-once");
}

static double raw_copy(bench_t *b)
{
    return raw_one_table(b, "bench_pg_raw", true);
}

static void part_copy(bench_t *b)
{
    double sink = run_rounds(b, "", sink_copy, raw_copy);
    commit_latency("");
    printf("bench pg handle_bytes %zu bytes\n", handle_bytes);
    print_wal(b, "wal_bytes_per_row");
    b->copy_sink = sink;
}

static double sink_write_ahead(bench_t *b)
{
    double secs = sink_one_table(b, "bench_pg_wa_sink", "write-ahead", "exactly-once");
    if (tpc_test_pg_long(b->pg, "SELECT count(*) FROM %s", b->staging) != 0)
        tpc_test_bench_die("rows are left in the staging table", NULL);
    return secs;
}

static double raw_write_ahead(bench_t *b)
{
    char table[96];
    make_table(b->pg, table, sizeof table, "bench_pg_wa_raw");
    double secs = run_raw_write_ahead(b->pg, table, b->rows, b->raw_staging, b->raw_marker);
    expect_rows(b->pg, table, b->rows);
    return secs;
}

static void part_write_ahead(bench_t *b)
{
    double sink = run_rounds(b, "wa_", sink_write_ahead, raw_write_ahead);
    print_vs_copy(b, "wa_vs_prepared", sink);
    commit_latency("wa_");
    printf("bench pg wa_handle_bytes %zu bytes\n", handle_bytes);
    /* The double write: WAL the server wrote per row (other sessions' too, on a shared server). */
    print_wal(b, "wa_wal_bytes_per_row");
}

/* A keyed sink (pg.key-columns id) in @mode into a new keyed table, checked and dropped. */
static double sink_keyed(bench_t *b, const char *tag, const char *mode, tpc_pg_encoder_t encoder,
                         bool deletes)
{
    char table[96];
    make_keyed_table(b->pg, table, sizeof table, tag);
    sink_conf_t o = {table, mode, "prepared", "id", "exactly-once", encoder};
    double secs = sink_side(b, &o);
    expect_keyed(b->pg, table, b->rows, deletes);
    return secs;
}

static double sink_changelog(bench_t *b)
{
    return sink_keyed(b, "bench_pg_cl_sink", "changelog", encode_changelog, true);
}

static double raw_changelog(bench_t *b)
{
    char table[96];
    make_keyed_table(b->pg, table, sizeof table, "bench_pg_cl_raw");
    double secs = run_raw_changelog(table, b->rows, false);
    expect_keyed(b->pg, table, b->rows, true);
    return secs;
}

static void part_changelog(bench_t *b)
{
    double sink = run_rounds(b, "changelog_", sink_changelog, raw_changelog);
    print_vs_copy(b, "changelog_vs_copy", sink);
    commit_latency("changelog_");
}

static double sink_upsert(bench_t *b)
{
    return sink_keyed(b, "bench_pg_up_sink", "upsert", encode_upsert, false);
}

static double raw_upsert(bench_t *b)
{
    char table[96];
    make_keyed_table(b->pg, table, sizeof table, "bench_pg_up_raw");
    double secs = run_raw_changelog(table, b->rows, true);
    expect_keyed(b->pg, table, b->rows, false);
    return secs;
}

static void part_upsert(bench_t *b)
{
    double sink = run_rounds(b, "upsert_", sink_upsert, raw_upsert);
    print_vs_copy(b, "upsert_vs_copy", sink);
    commit_latency("upsert_");
}

static double sink_tables(bench_t *b)
{
    char tables[2][96], list[200];
    make_table(b->pg, tables[0], sizeof tables[0], "bench_pg_t0_sink");
    make_table(b->pg, tables[1], sizeof tables[1], "bench_pg_t1_sink");
    snprintf(list, sizeof list, "%s,%s", tables[0], tables[1]);
    sink_conf_t o = {list, "copy", "prepared", NULL, "exactly-once", encode_two};
    double secs = sink_side(b, &o);
    expect_rows(b->pg, tables[0], b->rows);
    expect_rows(b->pg, tables[1], b->rows);
    return secs;
}

static double raw_tables(bench_t *b)
{
    char tables[2][96];
    make_table(b->pg, tables[0], sizeof tables[0], "bench_pg_t0_raw");
    make_table(b->pg, tables[1], sizeof tables[1], "bench_pg_t1_raw");
    double secs = run_raw_tables(tables[0], tables[1], b->rows);
    expect_rows(b->pg, tables[0], b->rows);
    expect_rows(b->pg, tables[1], b->rows);
    return secs;
}

static void part_tables(bench_t *b)
{
    double sink = run_rounds(b, "tables_", sink_tables, raw_tables);
    print_vs_copy(b, "tables_vs_copy", sink);
    commit_latency("tables_");
}

/* Its pre-commit commits; the commit after the checkpoint has nothing left to do. */
static double sink_at_least_once(bench_t *b)
{
    return sink_one_table(b, "bench_pg_alo_sink", "auto", "at-least-once");
}

static double raw_at_least_once(bench_t *b)
{
    return raw_one_table(b, "bench_pg_alo_raw", false);
}

static void part_at_least_once(bench_t *b)
{
    double sink = run_rounds(b, "at_least_once_", sink_at_least_once, raw_at_least_once);
    print_vs_copy(b, "at_least_once_vs_copy", sink);
}

/* Before the first part, not timed: a raw copy of a fifth of the rows, so that the first timed
 * run does not pay alone for what the server does once (new write-ahead log segments, shared
 * buffers and caches warming). */
static void warm_up(bench_t *b)
{
    char table[96];
    make_table(b->pg, table, sizeof table, "bench_pg_warm");
    uint64_t rows = b->rows / 5 ? b->rows / 5 : 1;
    run_raw(table, rows, true);
    expect_rows(b->pg, table, rows);
}

static const struct {
    const char *name;
    void (*run)(bench_t *b);
} parts[] = {{"copy", part_copy},           {"write-ahead", part_write_ahead},
             {"changelog", part_changelog}, {"upsert", part_upsert},
             {"tables", part_tables},       {"at-least-once", part_at_least_once}};

#define NPARTS (sizeof parts / sizeof *parts)

/* Which parts TWOPC_BENCH_PG_PARTS names (all when it is unset or empty); dies on an unknown one.
 */
static void select_parts(const char *list, bool *run)
{
    for (size_t i = 0; i < NPARTS; i++)
        run[i] = !list || !*list;
    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, ",");
        bool known = len == 0;
        for (size_t i = 0; i < NPARTS; i++)
            if (strlen(parts[i].name) == len && strncmp(p, parts[i].name, len) == 0)
                run[i] = known = true;
        if (!known) {
            fprintf(stderr,
                    "bench_pg: TWOPC_BENCH_PG_PARTS names \"%.*s\", which is no part; the parts "
                    "are copy, write-ahead, changelog, upsert, tables and at-least-once\n",
                    (int)len, p);
            exit(1);
        }
        p += len + (p[len] == ',');
    }
}

int main(void)
{
    bench_t b = {.conninfo = tpc_test_env_require("TWOPC_TEST_PG_CONNINFO")};
    if (!b.conninfo)
        return 1;
    bool run[NPARTS];
    select_parts(getenv("TWOPC_BENCH_PG_PARTS"), run);
    const char *env = getenv("TWOPC_BENCH_ROWS");
    b.rows = env ? strtoull(env, NULL, 10) : 0;
    if (!b.rows)
        b.rows = 2000000;
    env = getenv("TWOPC_BENCH_PG_ROUNDS");
    b.rounds = env ? atoi(env) : 0;
    if (b.rounds < 1)
        b.rounds = 5;
    if (b.rounds > MAX_ROUNDS)
        b.rounds = MAX_ROUNDS;
    b.pg = tpc_test_pg_connect();
    if (!b.pg)
        tpc_test_bench_die("connection", NULL);
    tpc_test_unique_name(b.staging, sizeof b.staging, "bench_pg_staging", '_');
    tpc_test_unique_name(b.raw_staging, sizeof b.raw_staging, "bench_pg_wa_stage", '_');
    tpc_test_unique_name(b.raw_marker, sizeof b.raw_marker, "bench_pg_wa_marker", '_');
    printf("bench pg rounds %d rounds\n", b.rounds);
    warm_up(&b);
    for (size_t i = 0; i < NPARTS; i++)
        if (run[i])
            parts[i].run(&b);
    /* Only the write-ahead part makes these tables. */
    const char *made[] = {b.staging, b.raw_staging, b.raw_marker};
    for (size_t i = 0; i < sizeof made / sizeof *made; i++)
        if (tpc_test_pg_long(b.pg, "SELECT (to_regclass('%s') IS NOT NULL)::int", made[i]) == 1)
            tpc_test_pg_exec(b.pg, "DROP TABLE %s", made[i]);
    PQfinish(b.pg);
    return 0;
}
