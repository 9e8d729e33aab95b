/*
 * The rows of one transaction of the PostgreSQL sink, table by table. Each target table has a send
 * buffer of binary COPY tuples that the encoder's row builder fills.
 *
 * - copy: a full buffer goes into its table by binary COPY. With one table the COPY stays open for
 *   the whole transaction; with several, one COPY is open at a time, and a full buffer of another
 *   table ends it and starts one into that table.
 * - insert: a full buffer becomes INSERT statements (pg_insert.c).
 * - upsert, changelog: tuples carry their operation and a sequence number, and go by binary COPY
 *   into a staging table that the transaction creates beside the table (unlogged, since a
 *   prepared transaction may not touch temporary tables) and drops again. At pre-commit one
 *   statement applies them: the latest operation of each key wins, deletes by DELETE ... USING,
 *   upserts by INSERT ... ON CONFLICT DO UPDATE, all in the checkpoint's transaction. A staging
 *   table of its own per transaction, named after the gid, is read by nobody else, never waits
 *   for a lock, and leaves no dead rows behind (a shared one, emptied by DELETE, made every merge
 *   scan the dead rows of earlier transactions, as long as anything held vacuum back). Staging
 *   never waits for a prepared transaction of this subtask (its rows lock no key); only the merge
 *   touches the keys.
 *   Upserts were INSERT ... ON CONFLICT batches once: those had to wait in memory while the
 *   previous checkpoint's transaction was prepared (it holds the locks of its keys), so the
 *   records that arrived meanwhile piled up without bound and went out in one burst that held up
 *   the next checkpoint; a staging table takes them as they come, and one merge costs the server
 *   less than the batches.
 *
 * Everything lands in the one transaction that pg_txn.c prepares, so a reader sees every table of
 * a checkpoint at once or none. In write-ahead mode full buffers go to the write-ahead table
 * instead (pg_staged.c), whose move writes them later with tpc__pg_send_rows() and
 * tpc__pg_end_rows().
 */
#include "pg_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const unsigned char copy_header[19] = {'P', 'G', 'C', 'O', 'P', 'Y', '\n', 0xff, '\r', '\n',
                                              0,   0,   0,   0,   0,   0,   0,    0,    0};

/* Upsert and changelog rows go into a staging table first, and one statement merges them. */
static bool staged_mode(const tpc__pg_conn_t *c)
{
    return c->conf->mode == TPC__PG_UPSERT || c->conf->mode == TPC__PG_CHANGELOG;
}

static bool streaming(const tpc__pg_conn_t *c)
{
    return c->conf->mode == TPC__PG_COPY || staged_mode(c);
}

/* ---- the tables of pg.table, their columns and statements ------------------------------- */

/* Part @i of the @sep-separated @list, trimmed, malloc'd; NULL for an empty part or no list. */
static char *list_part(const char *list, char sep, int i, bool *nomem)
{
    if (!list)
        return NULL;
    const char *p = list;
    for (; i > 0 && p; i--) {
        p = strchr(p, sep);
        p = p ? p + 1 : NULL;
    }
    if (!p)
        return NULL;
    const char *end = strchr(p, sep);
    size_t len = end ? (size_t)(end - p) : strlen(p);
    while (len && *p == ' ')
        p++, len--;
    while (len && p[len - 1] == ' ')
        len--;
    if (!len)
        return NULL;
    char *out = malloc(len + 1);
    if (!out) {
        *nomem = true;
        return NULL;
    }
    memcpy(out, p, len);
    out[len] = '\0';
    return out;
}

static int list_count(const char *list, char sep)
{
    int n = 1;
    for (const char *p = list; (p = strchr(p, sep)) != NULL; p++)
        n++;
    return n;
}

static tpc_error_t *list_mismatch(const char *key, int parts, int tables)
{
    return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                        "\"%s\" has %d lists for the %d tables of pg.table", key,
                                        parts, tables),
                          "give one comma-separated list per table, in pg.table's order, apart "
                          "by ';' (\"id,total;order_id,line\")");
}

static tpc_error_t *build_statements(tpc__pg_conn_t *c, tpc__pg_table_t *t)
{
    t->cols_sql = tpc__pg_column_list(c, t, "", false);
    if (!t->cols_sql)
        return tpc_error_nomem();
    if (staged_mode(c)) {
        tpc_error_t *err = tpc__pg_check_stage_schema(c, t);
        if (err)
            return err;
        t->keys_sql = tpc__pg_column_list(c, t, "", true);
        t->match_sql = tpc__pg_column_pairs(c, t, true, " AND twopc_target.", " AND twopc_target.",
                                            " = twopc_last.");
        t->conflict_sql = tpc__pg_conflict_sql(c, t);
        return t->keys_sql && t->match_sql && t->conflict_sql ? NULL : tpc_error_nomem();
    }
    if (c->conf->mode == TPC__PG_COPY) {
        size_t len = strlen(t->table_q) + strlen(t->cols_sql) + 64;
        if (!(t->copy_sql = malloc(len)))
            return tpc_error_nomem();
        snprintf(t->copy_sql, len, "COPY %s (%s) FROM STDIN (FORMAT binary)", t->table_q,
                 t->cols_sql);
        return NULL;
    }
    int rows = (int)c->conf->batch_size;
    if (rows * t->ncols > 65535) /* the protocol's limit of parameters */
        rows = 65535 / t->ncols;
    t->insert_rows = rows;
    size_t params = (size_t)rows * (size_t)t->ncols;
    t->values = calloc(params, sizeof *t->values);
    t->lengths = calloc(params, sizeof *t->lengths);
    t->formats = calloc(params, sizeof *t->formats);
    t->types = calloc(params, sizeof *t->types);
    t->insert_sql = tpc__pg_insert_sql(t, t->cols_sql, rows);
    if (!t->values || !t->lengths || !t->formats || !t->types || !t->insert_sql)
        return tpc_error_nomem();
    for (size_t i = 0; i < params; i++) {
        t->formats[i] = 1;
        t->types[i] = t->cols[i % (size_t)t->ncols].type;
    }
    return NULL;
}

/* Run @fmt (one or more statements, no parameters) on the data connection. */
static tpc_error_t *exec_sql(tpc__pg_conn_t *c, const char *what, const char *fmt, ...)
    TPC_PRINTF(3, 4);

static tpc_error_t *exec_sql(tpc__pg_conn_t *c, const char *what, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *sql = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!sql)
        return tpc_error_nomem();
    va_start(ap, fmt);
    vsnprintf(sql, (size_t)n + 1, fmt, ap);
    va_end(ap);
    PGresult *res = PQexec(c->data, sql);
    free(sql);
    ExecStatusType st = PQresultStatus(res);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && st != PGRES_COPY_IN)
        return tpc__pg_result_error(c->data, res, what);
    PQclear(res);
    return NULL;
}

/* Changelog: this transaction's staging table for @t, made at its first rows. */
static tpc_error_t *create_stage(tpc__pg_conn_t *c, tpc__pg_table_t *t)
{
    snprintf(t->stage, sizeof t->stage, "twopc_stage_%016llx_%d", (unsigned long long)c->stage_id,
             (int)(t - c->tables));
    tpc_error_t *err = exec_sql(c, "create the staging table",
                                "CREATE UNLOGGED TABLE %s.%s AS SELECT 0::int2 AS twopc_op, "
                                "0::int8 AS twopc_seq, %s FROM %s WITH NO DATA",
                                t->schema_q, t->stage, t->cols_sql, t->table_q);
    if (err)
        t->stage[0] = '\0';
    return err;
}

/* The latest operation of each key into the table, then the staging table goes. One round trip,
 * one scan of the staged rows. Upsert mode has no deletes: the latest row of each key is
 * inserted, or updates the row of its key. */
static tpc_error_t *merge_stage(tpc__pg_conn_t *c, tpc__pg_table_t *t)
{
    tpc_error_t *err;
    if (c->conf->mode == TPC__PG_UPSERT) {
        err = exec_sql(c, "apply the upserts",
                       "INSERT INTO %s (%s) SELECT DISTINCT ON (%s) %s FROM %s.%s ORDER BY %s, "
                       "twopc_seq DESC%s; DROP TABLE %s.%s",
                       t->table_q, t->cols_sql, t->keys_sql, t->cols_sql, t->schema_q, t->stage,
                       t->keys_sql, t->conflict_sql, t->schema_q, t->stage);
        t->stage[0] = '\0';
        return err;
    }
    err = exec_sql(
        c, "apply the changelog",
        "WITH twopc_last AS (SELECT DISTINCT ON (%s) * FROM %s.%s ORDER BY %s, twopc_seq DESC), "
        "twopc_deleted AS (DELETE FROM %s twopc_target USING twopc_last "
        "WHERE twopc_last.twopc_op = 2%s) "
        "INSERT INTO %s (%s) SELECT %s FROM twopc_last WHERE twopc_op = 1%s; DROP TABLE %s.%s",
        t->keys_sql, t->schema_q, t->stage, t->keys_sql, t->table_q, t->match_sql, t->table_q,
        t->cols_sql, t->cols_sql, t->conflict_sql, t->schema_q, t->stage);
    t->stage[0] = '\0';
    return err;
}

tpc_error_t *tpc__pg_open_tables(tpc__pg_conn_t *c)
{
    const tpc__pg_conf_t *conf = c->conf;
    if (!conf->table)
        return tpc_error_hint(
            tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL, "\"pg.table\" is not set"),
            "set pg.table to the target table, schema.table when it is not on the search path");
    int n = list_count(conf->table, ',');
    if (n > TPC__PG_TABLES_MAX)
        return tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                             "\"pg.table\" lists %d tables; one sink writes at most %d", n,
                             TPC__PG_TABLES_MAX);
    if (n == 1 && conf->columns && strchr(conf->columns, ';'))
        return list_mismatch("pg.columns", list_count(conf->columns, ';'), n);
    if (n == 1 && conf->key_columns && strchr(conf->key_columns, ';'))
        return list_mismatch("pg.key-columns", list_count(conf->key_columns, ';'), n);
    if (n > 1 && conf->columns && list_count(conf->columns, ';') != n)
        return list_mismatch("pg.columns", list_count(conf->columns, ';'), n);
    if (n > 1 && conf->key_columns && list_count(conf->key_columns, ';') != n)
        return list_mismatch("pg.key-columns", list_count(conf->key_columns, ';'), n);
    if (n > 1 && !conf->encode)
        return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                            "\"pg.table\" lists %d tables, but the sink has no "
                                            "encoder to choose a record's table",
                                            n),
                              "set an encoder with tpc_pg_sink_set_encoder() that calls "
                              "tpc_pg_row_table(), or list one table");
    if (conf->tombstone == TPC__PG_TOMBSTONE_DELETE && conf->mode != TPC__PG_CHANGELOG)
        return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                            "pg.tombstone=delete needs pg.mode=changelog"),
                              "set pg.mode=changelog and pg.key-columns, or leave pg.tombstone "
                              "out to write a null value as NULL");
    c->tables = calloc((size_t)n, sizeof *c->tables);
    if (!c->tables)
        return tpc_error_nomem();
    c->ntables = n;
    c->copying = -1;
    tpc_error_t *err = NULL;
    for (int i = 0; i < n && !err; i++) {
        bool nomem = false;
        tpc__pg_table_t *t = &c->tables[i];
        t->name = list_part(conf->table, ',', i, &nomem);
        char *cols = list_part(conf->columns, ';', i, &nomem);
        char *keys = list_part(conf->key_columns, ';', i, &nomem);
        if (nomem)
            err = tpc_error_nomem();
        else if (!t->name)
            err = tpc_prop_invalid(tpc_props_find(tpc_pg_sink_properties(), "pg.table"), "pg.table",
                                   conf->table, NULL);
        else
            err = tpc__pg_load_columns(c, t, cols, keys);
        free(cols);
        free(keys);
        if (!err)
            err = build_statements(c, t);
    }
    c->row.tables = c->tables;
    c->row.ntables = c->ntables;
    c->row.staged = staged_mode(c);
    c->row.mode = conf->mode;
    return err ? err : tpc__pg_prepare_batches(c);
}

void tpc__pg_close_tables(tpc__pg_conn_t *c)
{
    for (int i = 0; i < c->ntables; i++) {
        tpc__pg_table_t *t = &c->tables[i];
        free(t->name);
        free(t->table_q);
        tpc__pg_free_cols(t->cols, t->ncols);
        free(t->copy_sql);
        free(t->insert_sql);
        free(t->cols_sql);
        free(t->keys_sql);
        free(t->match_sql);
        free(t->conflict_sql);
        PQfreemem(t->schema_q);
        free(t->out.buf);
        free(t->values);
        free(t->lengths);
        free(t->formats);
        free(t->types);
    }
    free(c->tables);
    c->tables = NULL;
    c->ntables = 0;
}

/* ---- COPY streams ------------------------------------------------------------------------ */

static tpc_error_t *end_copy(tpc__pg_conn_t *c)
{
    if (c->copying < 0)
        return NULL;
    c->copying = -1;
    static const unsigned char trailer[2] = {0xff, 0xff};
    if (PQputCopyData(c->data, (const char *)trailer, 2) != 1 || PQputCopyEnd(c->data, NULL) != 1)
        return tpc__pg_result_error(c->data, NULL, "end COPY");
    PGresult *res = PQgetResult(c->data), *extra;
    while ((extra = PQgetResult(c->data)) != NULL)
        PQclear(extra);
    if (PQresultStatus(res) != PGRES_COMMAND_OK)
        return tpc__pg_result_error(c->data, res, "COPY rows");
    PQclear(res);
    return NULL;
}

/* Send table @t's buffer, in a COPY into it (ending another table's COPY first). */
static tpc_error_t *send_table(tpc__pg_conn_t *c, tpc__pg_table_t *t)
{
    if (!t->out.len)
        return NULL;
    int i = (int)(t - c->tables);
    tpc_error_t *err = c->copying == i ? NULL : end_copy(c);
    if (!err && c->copying != i) {
        if ((err = tpc__pg_ensure_txn(c)) != NULL)
            return err;
        bool staged = staged_mode(c);
        if (staged && !t->stage[0] && (err = create_stage(c, t)) != NULL)
            return err;
        if (staged)
            err = exec_sql(c, "start COPY",
                           "COPY %s.%s (twopc_op, twopc_seq, %s) FROM STDIN (FORMAT binary)",
                           t->schema_q, t->stage, t->cols_sql);
        else
            err = exec_sql(c, "start COPY", "%s", t->copy_sql);
        if (err)
            return err;
        c->copying = i;
        if (PQputCopyData(c->data, (const char *)copy_header, sizeof copy_header) != 1)
            return tpc__pg_result_error(c->data, NULL, "send COPY data");
    }
    if (!err && PQputCopyData(c->data, (const char *)t->out.buf, (int)t->out.len) != 1)
        err = tpc__pg_result_error(c->data, NULL, "send COPY data");
    t->out.len = 0;
    return err;
}

void tpc__pg_cancel_copy(tpc__pg_conn_t *c)
{
    if (c->copying < 0)
        return;
    c->copying = -1;
    if (PQputCopyEnd(c->data, "transaction aborted by the sink") == 1) {
        PGresult *res;
        while ((res = PQgetResult(c->data)) != NULL)
            PQclear(res);
    }
}

/* ---- a transaction's rows ---------------------------------------------------------------- */

void tpc__pg_drop_rows(tpc__pg_conn_t *c)
{
    for (int i = 0; i < c->ntables; i++) {
        c->tables[i].out.len = 0;
        c->tables[i].rows = 0;
        c->tables[i].stage[0] = '\0'; /* went with the transaction */
    }
    c->row.seq = 0;
    c->row.deletes = false;
}

void tpc__pg_stage_name(tpc__pg_conn_t *c, const char *gid)
{
    /* The gid is unique among the transactions that may be open or prepared at once, and so is
     * a staging table named after it (up to a hash collision, which would make the CREATE wait,
     * never mix rows). */
    uint64_t h = 14695981039346656037ull;
    for (const char *p = gid; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    c->stage_id = h;
    /* A staging table named before belongs to a transaction that is over: merged and dropped, or
     * rolled back with it (a failed write-ahead move). The next rows make a new one. */
    for (int i = 0; i < c->ntables; i++)
        c->tables[i].stage[0] = '\0';
}

void tpc__pg_new_rows(tpc__pg_conn_t *c, const char *gid)
{
    tpc__pg_drop_rows(c);
    tpc__pg_stage_name(c, gid);
}

/* Send what is due: a full COPY buffer (of the table, or of its staging table), a full batch. */
static tpc_error_t *send_due(tpc__pg_conn_t *c, tpc__pg_table_t *t)
{
    if (c->kind == TPC__PG_TXN_STAGED) {
        size_t part =
            c->conf->copy_buffer < TPC__PG_PART_MAX ? c->conf->copy_buffer : TPC__PG_PART_MAX;
        return t->out.len >= part ? tpc__pg_stage_table(c, t) : NULL;
    }
    if (streaming(c))
        return t->out.len >= c->conf->copy_buffer ? send_table(c, t) : NULL;
    return t->rows >= (size_t)t->insert_rows ? tpc__pg_exec_buffered(c, t) : NULL;
}

tpc_error_t *tpc__pg_write_rows(tpc__pg_conn_t *c, const tpc_record_t *records, size_t count,
                                bool *wrote)
{
    tpc_pg_encoder_t encode = c->conf->encode ? c->conf->encode : tpc__pg_default_encoder;
    void *opaque = c->conf->encode ? c->conf->encode_opaque : c;
    tpc_error_t *err = NULL;
    for (size_t i = 0; i < count && !err; i++) {
        tpc__pg_row_begin(&c->row, &records[i], c->conf->tombstone);
        err = encode(opaque, &records[i], &c->row);
        if (err) {
            c->row.out->len = c->row.start;
            return tpc_error_prefix(err, "row encoder failed");
        }
        if ((err = tpc__pg_row_end(&c->row)) != NULL)
            return tpc_error_prefix(err, "record %zu of the batch", i);
        *wrote = *wrote || c->row.done > 0;
        if (c->ntables == 1)
            err = send_due(c, c->tables);
        for (int k = 0; c->ntables > 1 && k < c->ntables && !err; k++)
            err = send_due(c, &c->tables[k]);
    }
    return err;
}

tpc_error_t *tpc__pg_flush_rows(tpc__pg_conn_t *c)
{
    tpc_error_t *err = NULL;
    for (int i = 0; i < c->ntables && !err; i++) {
        tpc__pg_table_t *t = &c->tables[i];
        if (c->kind == TPC__PG_TXN_STAGED)
            err = tpc__pg_stage_table(c, t);
        else if (streaming(c))
            err = send_table(c, t);
        else
            err = tpc__pg_exec_buffered(c, t);
    }
    return err;
}

tpc_error_t *tpc__pg_send_rows(tpc__pg_conn_t *c, tpc__pg_table_t *t)
{
    return streaming(c) ? send_table(c, t) : tpc__pg_exec_buffered(c, t);
}

/* A prepared transaction of this subtask may hold a key the keyed statements touch, and only this
 * thread could release it: they wait a short while, then fail (55P03, retriable). */
#define OWN_LOCK_WAIT_MS 2000

static tpc_error_t *short_lock_wait(tpc__pg_conn_t *c)
{
    if (!c->own_locks)
        return NULL;
    tpc_error_t *err = tpc__pg_ensure_txn(c);
    if (!err)
        err = exec_sql(c, "set lock_timeout", "SET LOCAL lock_timeout = %d", OWN_LOCK_WAIT_MS);
    return err;
}

tpc_error_t *tpc__pg_end_rows(tpc__pg_conn_t *c)
{
    tpc_error_t *err = streaming(c) ? NULL : short_lock_wait(c);
    /* The table whose COPY is open first: its rest goes into that COPY, and only the other
     * tables' rests need a COPY of their own (in table order, the open one would be ended,
     * started again for its rest, and ended once more). */
    if (!err && streaming(c) && c->copying >= 0)
        err = send_table(c, &c->tables[c->copying]);
    for (int i = 0; i < c->ntables && !err; i++)
        err = streaming(c) ? send_table(c, &c->tables[i]) : tpc__pg_exec_buffered(c, &c->tables[i]);
    if (!err)
        err = end_copy(c);
    if (!err && streaming(c))
        err = short_lock_wait(c);
    for (int i = 0; i < c->ntables && !err; i++) {
        tpc__pg_table_t *t = &c->tables[i];
        if (t->stage[0])
            err = merge_stage(c, t);
        t->rows = 0;
    }
    return err;
}
