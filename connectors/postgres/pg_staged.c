/*
 * The write-ahead commit of the PostgreSQL sink (pg.commit=write-ahead), for servers without
 * prepared transactions: max_prepared_transactions = 0, poolers, PostgreSQL-compatible databases.
 *
 * A transaction's rows are the binary tuples every mode builds (pg_row.c), table by table. Instead
 * of going to their tables they go, in parts of about pg.copy-buffer bytes, into the write-ahead
 * table (pg.write-ahead-table) on the control connection, in one transaction per checkpoint that
 * pre-commit COMMITs: the checkpoint's rows are then durable and invisible, and the handle names
 * them (gid, parts, rows). Once the checkpoint is complete, one transaction on the data connection
 * moves them:
 *
 *   INSERT the marker row (its gid is the marker table's primary key);
 *   read each part back (on the control connection, so that a COPY stays open on the data one)
 *   and write its tuples with the mode's own statements (pg_write.c: COPY, the insert / upsert
 *   batches, the changelog's staging and its one merge at the end), so the tables get what the
 *   prepared mode would have written;
 *   DELETE the parts; COMMIT.
 *
 * The marker's key makes the move happen once: a second mover of the same gid (a retry after a lost
 * connection, a recovery, an instance that has not noticed it was replaced) waits for the first
 * one's transaction and then fails on the key, which says "committed", or goes ahead when the first
 * rolled back. A gid with neither a marker nor parts is lost, and one whose parts do not match its
 * handle was written by somebody else: both are loud errors, never a silent success. Parts of
 * checkpoints that never completed are dropped at restore: those of the restored current
 * transaction by recover_and_abort, any other of the subtasks this one owns by abort_lingering.
 *
 * Why a table and not the rows in the checkpoint itself: a checkpoint stays a few bytes per
 * subtask whatever the throughput, memory stays bounded by pg.copy-buffer, the move is one local
 * transaction on the server that holds every table, and what recovery needs is where the rows go.
 */
#include "pg_internal.h"
#include "tpc_kit.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The layout the tuples of a part depend on: pg.mode (a changelog tuple has two more fields), and
 * each table's name, written columns in their order, and their types as the server formats them
 * (typmod included). FNV-1a, with a zero byte after each name. */
static uint64_t layout_hash(const tpc__pg_conn_t *c)
{
    uint64_t h = 14695981039346656037ull;
    unsigned char mode = (unsigned char)c->conf->mode;
    h = (h ^ mode) * 1099511628211ull;
    for (int i = 0; i < c->ntables; i++) {
        const tpc__pg_table_t *t = &c->tables[i];
        for (const char *p = t->name;; p++) {
            h = (h ^ (unsigned char)*p) * 1099511628211ull;
            if (!*p)
                break;
        }
        for (int k = 0; k < t->ncols; k++) {
            const char *parts[2] = {t->cols[k].name, t->cols[k].type_name};
            for (int j = 0; j < 2; j++)
                for (const char *p = parts[j];; p++) {
                    h = (h ^ (unsigned char)*p) * 1099511628211ull;
                    if (!*p)
                        break;
                }
        }
        h = (h ^ 0xff) * 1099511628211ull; /* end of a table */
    }
    return h;
}

tpc_error_t *tpc__pg_stage_open(tpc__pg_conn_t *c)
{
    c->layout = layout_hash(c);
    /* Parts are binary tuples, stored without compression: it would cost more than it saves. */
    if (c->kind == TPC__PG_TXN_STAGED)
        return tpc__pg_ensure_table(
            c, "pg.write-ahead-table", "write-ahead table", c->conf->write_ahead_table,
            "(gid text NOT NULL, part integer NOT NULL, sink text NOT NULL, subtask integer NOT "
            "NULL, target text NOT NULL, row_count integer NOT NULL, data bytea NOT NULL, created "
            "timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (gid, part))",
            "ALTER TABLE %s ALTER COLUMN data SET STORAGE EXTERNAL", &c->staging_q);
    /* Another mode still moves or drops what a checkpoint of this mode left. */
    c->staging_q = tpc__pg_quote_qualified(c->control, c->conf->write_ahead_table);
    return c->staging_q ? NULL : tpc_error_nomem();
}

/* ---- writing ahead: the control connection, one transaction per checkpoint ------------------ */

void tpc__pg_stage_begin(tpc__pg_conn_t *c, const tpc__pg_txn_t *t)
{
    snprintf(c->staging_gid, sizeof c->staging_gid, "%s", t->gid);
    c->staged_parts = 0;
    c->staged_rows = 0;
}

void tpc__pg_stage_settle(tpc__pg_conn_t *c)
{
    if (!c->stage_sent)
        return;
    c->stage_sent = false;
    PGresult *res;
    while ((res = PQgetResult(c->control)) != NULL) {
        if (PQresultStatus(res) != PGRES_COMMAND_OK && !c->stage_err)
            c->stage_err = tpc__pg_result_error(c->control, res, "write rows ahead");
        else
            PQclear(res);
    }
}

/* The failure of a part sent earlier, once it is read. */
static tpc_error_t *stage_settled(tpc__pg_conn_t *c)
{
    tpc__pg_stage_settle(c);
    tpc_error_t *err = c->stage_err;
    c->stage_err = NULL;
    return err;
}

/* A full buffer becomes a part: its INSERT is sent and its result read before the next command
 * on the control connection, so the server stores one part while the next is encoded (libpq has
 * copied the bytes by the time the send returns; the buffer is free again). */
tpc_error_t *tpc__pg_stage_table(tpc__pg_conn_t *c, tpc__pg_table_t *t)
{
    if (!t->out.len)
        return NULL;
    tpc_error_t *err = stage_settled(c);
    if (err)
        return err;
    if (!c->staging_open) {
        /* Between write-ahead transactions nothing is lost with a broken connection. */
        err = tpc__pg_control_ready(c);
        if (!err)
            err = tpc__pg_exec(c->control, "BEGIN", 0, NULL, "begin writing ahead", NULL);
        if (err)
            return err;
        c->staging_open = true;
    }
    if (t->rows > INT32_MAX || t->out.len > INT32_MAX)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "a part of %zu rows in %zu bytes is too large to write ahead", t->rows,
                             t->out.len);
    char part[16], sub[16], rows[24], sql[600];
    snprintf(part, sizeof part, "%" PRIu32, c->staged_parts);
    snprintf(sub, sizeof sub, "%d", c->st->subtask);
    snprintf(rows, sizeof rows, "%zu", t->rows);
    snprintf(sql, sizeof sql,
             "INSERT INTO %s (gid, part, sink, subtask, target, row_count, data) VALUES ($1, $2, "
             "$3, $4, $5, $6, $7)",
             c->staging_q);
    const char *values[7] = {c->staging_gid,          part, c->prefix, sub, t->name, rows,
                             (const char *)t->out.buf};
    const int lengths[7] = {0, 0, 0, 0, 0, 0, (int)t->out.len};
    const int formats[7] = {0, 0, 0, 0, 0, 0, 1};
    if (!PQsendQueryParams(c->control, sql, 7, NULL, values, lengths, formats, 0))
        return tpc__pg_result_error(c->control, NULL, "write rows ahead");
    c->stage_sent = true;
    c->staged_parts++;
    c->staged_rows += t->rows;
    t->rows = 0;
    t->out.len = 0;
    return NULL;
}

/* COMMIT on @pg, and make sure it was one: COMMIT of a transaction that failed answers ROLLBACK. */
static tpc_error_t *commit_checked(PGconn *pg, const char *what)
{
    PGresult *res = NULL;
    tpc_error_t *err = tpc__pg_exec(pg, "COMMIT", 0, NULL, what, &res);
    if (err)
        return err;
    bool rolled_back = strcmp(PQcmdStatus(res), "COMMIT") != 0;
    PQclear(res);
    return rolled_back ? tpc_error_new(TPC_ERR_EXTERNAL, TPC_ERROR_RETRIABLE,
                                       "could not %s: the server rolled the transaction back", what)
                       : NULL;
}

tpc_error_t *tpc__pg_stage_pre_commit(tpc__pg_conn_t *c, tpc__pg_txn_t *t, uint64_t checkpoint_id)
{
    tpc_error_t *err = NULL;
    for (int i = 0; i < c->ntables && !err; i++)
        err = tpc__pg_stage_table(c, &c->tables[i]);
    if (!err)
        err = stage_settled(c);
    if (err)
        return err;
    if (!c->staging_open)
        return tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL,
                             "transaction \"%s\" has no rows written ahead to commit", t->gid);
    c->staging_open = false;
    err = commit_checked(c->control, "commit the rows written ahead");
    if (err)
        return err;
    t->parts = c->staged_parts;
    t->staged_rows = c->staged_rows;
    t->has_layout = true;
    t->layout_mode = (int)c->conf->mode;
    t->layout = c->layout;
    t->ckpt = checkpoint_id;
    t->floor = c->committed_ckpt;
    return NULL;
}

void tpc__pg_stage_abort(tpc__pg_conn_t *c)
{
    tpc_error_destroy(stage_settled(c));
    if (!c->staging_open)
        return;
    c->staging_open = false;
    /* On a lost connection the server has dropped the parts already. */
    if (PQstatus(c->control) == CONNECTION_OK)
        PQclear(PQexec(c->control, "ROLLBACK"));
}

/* ---- the move: the data connection, one transaction per transaction written ahead ---------- */

/* @rows whole tuples of the table's width fill @len bytes at @p. Staged parts come from this sink,
 * but bytes read from a table are checked before the batch code walks them. */
static bool tuples_ok(const unsigned char *p, size_t len, int ncols, uint32_t rows)
{
    const unsigned char *end = p + len;
    for (uint32_t r = 0; r < rows; r++) {
        if (end - p < 2 || (int)tpc_load_be(p, 2) != ncols)
            return false;
        p += 2;
        for (int i = 0; i < ncols; i++) {
            if (end - p < 4)
                return false;
            int32_t n = (int32_t)(uint32_t)tpc_load_be(p, 4);
            p += 4;
            if (n < -1 || (n > 0 && end - p < n))
                return false;
            p += n > 0 ? n : 0;
        }
    }
    return p == end;
}

static tpc_error_t *foreign_part(const tpc__pg_conn_t *c, const tpc__pg_txn_t *t, const char *what)
{
    return tpc_error_hint(tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL,
                                        "rows of transaction \"%s\" of checkpoint %" PRIu64
                                        " written ahead in \"%s\" do not match its handle: %s",
                                        t->gid, t->ckpt, c->conf->write_ahead_table, what),
                          "another program or sink writes the write-ahead table with gid prefix "
                          "\"%s\"; give every sink its own pg.gid-prefix",
                          c->prefix);
}

static tpc__pg_table_t *table_named(tpc__pg_conn_t *c, const char *name)
{
    for (int i = 0; i < c->ntables; i++)
        if (strcmp(c->tables[i].name, name) == 0)
            return &c->tables[i];
    return NULL;
}

/* Read part @part of @t into its table's buffer (the move's own) and write it. */
static tpc_error_t *move_part(tpc__pg_conn_t *c, const tpc__pg_txn_t *t, uint32_t part)
{
    char num[16], sql[600];
    snprintf(num, sizeof num, "%" PRIu32, part);
    snprintf(sql, sizeof sql, "SELECT target, row_count, data FROM %s WHERE gid = $1 AND part = $2",
             c->staging_q);
    const char *params[] = {t->gid, num};
    PGresult *res = PQexecParams(c->control, sql, 2, NULL, params, NULL, NULL, 1);
    if (PQresultStatus(res) != PGRES_TUPLES_OK)
        return tpc__pg_result_error(c->control, res, "read rows written ahead");
    tpc__pg_table_t *into = PQntuples(res) == 1 ? table_named(c, PQgetvalue(res, 0, 0)) : NULL;
    if (PQntuples(res) != 1 || PQgetlength(res, 0, 1) != 4) {
        PQclear(res);
        return foreign_part(c, t, "a part is missing");
    }
    if (!into) {
        tpc_error_t *err = tpc_error_hint(
            tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                          "rows of transaction \"%s\" written ahead for table \"%s\" cannot be "
                          "moved: the table is not in pg.table",
                          t->gid, PQgetvalue(res, 0, 0)),
            "put the table back into pg.table until the checkpoints that hold its rows are "
            "committed");
        PQclear(res);
        return err;
    }
    uint32_t rows = (uint32_t)tpc_load_be((const unsigned char *)PQgetvalue(res, 0, 1), 4);
    size_t len = (size_t)PQgetlength(res, 0, 2);
    const unsigned char *data = (const unsigned char *)PQgetvalue(res, 0, 2);
    int width = into->ncols + (c->row.staged ? 2 : 0);
    if (!tuples_ok(data, len, width, rows)) {
        PQclear(res);
        return foreign_part(c, t, "a part does not hold rows of its table's columns");
    }
    into->out = c->move;
    into->out.len = 0;
    bool room = tpc__pg_buf_reserve(&into->out, len);
    if (room) {
        memcpy(into->out.buf, data, len);
        into->out.len = len;
        into->rows += rows;
    }
    PQclear(res);
    tpc_error_t *err = room ? tpc__pg_send_rows(c, into) : tpc_error_nomem();
    c->move = into->out;
    into->out = (tpc__pg_buf_t){0};
    return err;
}

/* Leave the data connection outside any transaction after a failed move. */
static void end_move(tpc__pg_conn_t *c)
{
    tpc__pg_cancel_copy(c);
    if (c->in_txn) {
        c->in_txn = false;
        if (PQstatus(c->data) == CONNECTION_OK)
            PQclear(PQexec(c->data, "ROLLBACK"));
    }
}

static void moved(tpc__pg_conn_t *c, const tpc__pg_txn_t *t, uint64_t floor)
{
    if (t->ckpt > c->committed_ckpt)
        c->committed_ckpt = t->ckpt;
    if (floor > c->marker_floor)
        c->marker_floor = floor;
    if (floor > c->marker_swept)
        c->marker_swept = floor;
}

/* How many parts and rows the write-ahead table holds for @t. */
static tpc_error_t *count_staged(tpc__pg_conn_t *c, const tpc__pg_txn_t *t, long long *parts,
                                 long long *rows)
{
    char sql[600];
    snprintf(sql, sizeof sql, "SELECT count(*), coalesce(sum(row_count), 0) FROM %s WHERE gid = $1",
             c->staging_q);
    const char *params[] = {t->gid};
    PGresult *res = NULL;
    tpc_error_t *err = tpc__pg_exec(c->data, sql, 1, params, "count rows written ahead", &res);
    if (err)
        return err;
    *parts = atoll(PQgetvalue(res, 0, 0));
    *rows = atoll(PQgetvalue(res, 0, 1));
    PQclear(res);
    return NULL;
}

static tpc_error_t *lost(const tpc__pg_conn_t *c, const tpc__pg_txn_t *t)
{
    tpc_error_t *err =
        tpc_error_new(TPC_ERR_DATA_LOSS, TPC_ERROR_FATAL,
                      "transaction \"%s\" of checkpoint %" PRIu64
                      " written ahead is gone and was never moved (no marker row in \"%s\", no "
                      "rows in \"%s\"): its records are lost",
                      t->gid, t->ckpt, c->conf->marker_table, c->conf->write_ahead_table);
    return tpc_error_hint(err,
                          "something deleted them behind the sink's back: a DELETE by hand, or "
                          "another program using the gid prefix \"%s\"; write those records "
                          "again from their source, and give every sink its own pg.gid-prefix",
                          c->prefix);
}

static const char *mode_name(int mode)
{
    static const char *const names[] = {"copy", "insert", "upsert", "changelog"};
    return mode >= 0 && mode < 4 ? names[mode] : "unknown";
}

/* The parts are tuples of the layout they were written with: another pg.mode, tables, columns
 * or column types would put their values into the wrong columns, or fail half-way. */
static tpc_error_t *layout_same(const tpc__pg_conn_t *c, const tpc__pg_txn_t *t)
{
    if (!t->has_layout || t->layout == c->layout)
        return NULL;
    char what[200];
    if (t->layout_mode != (int)c->conf->mode)
        snprintf(what, sizeof what, "they were written with pg.mode=%s, the sink now has %s",
                 mode_name(t->layout_mode), mode_name((int)c->conf->mode));
    else
        snprintf(what, sizeof what,
                 "pg.table, pg.columns (their order included) or the columns' types differ from "
                 "when they were written");
    return tpc_error_hint(
        tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                      "rows of transaction \"%s\" of checkpoint %" PRIu64
                      " written ahead in \"%s\" cannot be moved: %s",
                      t->gid, t->ckpt, c->conf->write_ahead_table, what),
        "restore with the settings and table definitions the job had when it wrote checkpoint "
        "%" PRIu64 " and let one more checkpoint complete (the move empties the write-ahead "
        "table of this prefix), then change them",
        t->ckpt);
}

/* The move's statements after its marker row: check, write every part, delete them, sweep. */
static tpc_error_t *move_rows(tpc__pg_conn_t *c, const tpc__pg_txn_t *t, uint64_t floor)
{
    long long parts = 0, rows = 0;
    tpc_error_t *err = count_staged(c, t, &parts, &rows);
    if (err)
        return err;
    if (parts == 0)
        return lost(c, t);
    err = layout_same(c, t);
    if (err)
        return err;
    if (parts != (long long)t->parts || rows != (long long)t->staged_rows) {
        char what[160];
        snprintf(what, sizeof what,
                 "%lld parts of %lld rows written, the handle says %" PRIu32 " of %" PRIu64, parts,
                 rows, t->parts, t->staged_rows);
        return foreign_part(c, t, what);
    }
    /* The tables' buffers hold the current transaction's rows: the move sends from its own. */
    struct {
        tpc__pg_buf_t out;
        size_t rows;
    } kept[TPC__PG_TABLES_MAX];
    for (int i = 0; i < c->ntables; i++) {
        kept[i].out = c->tables[i].out;
        kept[i].rows = c->tables[i].rows;
        c->tables[i].out = (tpc__pg_buf_t){0};
        c->tables[i].rows = 0;
    }
    tpc__pg_stage_name(c, t->gid);
    for (uint32_t i = 0; i < t->parts && !err; i++)
        err = move_part(c, t, i);
    if (!err)
        err = tpc__pg_end_rows(c); /* the last COPY, the changelog's one merge */
    for (int i = 0; i < c->ntables; i++) {
        c->tables[i].out = kept[i].out;
        c->tables[i].rows = kept[i].rows;
    }
    char sql[600], sub[16], lo[24], hi[24];
    const char *params[] = {t->gid};
    snprintf(sql, sizeof sql, "DELETE FROM %s WHERE gid = $1", c->staging_q);
    PGresult *res = NULL;
    if (!err)
        err = tpc__pg_exec(c->data, sql, 1, params, "delete rows written ahead", &res);
    /* The parts were read on the control connection, outside this transaction: fewer deleted
     * than counted means somebody else deleted some meanwhile (another instance moving or
     * dropping this gid), and this move may not commit. */
    if (!err) {
        long long deleted = atoll(PQcmdTuples(res));
        PQclear(res);
        if (deleted != (long long)t->parts)
            err = tpc_error_hint(
                tpc_error_new(TPC_ERR_EXTERNAL, TPC_ERROR_RETRIABLE,
                              "the move of transaction \"%s\" of checkpoint %" PRIu64
                              " deleted %lld of its %" PRIu32
                              " parts in \"%s\": another session deleted the others meanwhile; "
                              "the move is rolled back",
                              t->gid, t->ckpt, deleted, t->parts, c->conf->write_ahead_table),
                "make sure no other instance of this job runs with the gid prefix \"%s\"; a "
                "retry finds the transaction moved (its marker row) or reports it lost",
                c->prefix);
    }
    /* Markers no checkpoint can ask for any more, as pg_commit.c explains: this move commits
     * only for a complete checkpoint. */
    if (!err && floor > c->marker_swept) {
        snprintf(sub, sizeof sub, "%d", t->subtask);
        snprintf(lo, sizeof lo, "%" PRIu64, c->marker_swept);
        snprintf(hi, sizeof hi, "%" PRIu64, floor);
        const char *del[] = {c->prefix, sub, lo, hi};
        snprintf(sql, sizeof sql,
                 "DELETE FROM %s WHERE sink = $1 AND subtask = $2 AND checkpoint > $3 AND "
                 "checkpoint <= $4",
                 c->marker_q);
        err = tpc__pg_exec(c->data, sql, 4, del, "delete old marker rows", NULL);
    }
    return err;
}

tpc_error_t *tpc__pg_stage_move(tpc__pg_conn_t *c, tpc__pg_txn_t *t)
{
    uint64_t floor = t->floor > c->marker_floor ? t->floor : c->marker_floor;
    char sub[16], ckpt[24], sql[600];
    snprintf(sub, sizeof sub, "%d", t->subtask);
    snprintf(ckpt, sizeof ckpt, "%" PRIu64, t->ckpt);
    snprintf(sql, sizeof sql,
             "INSERT INTO %s (gid, sink, subtask, checkpoint) VALUES ($1, $2, $3, $4)",
             c->marker_q);
    const char *params[] = {t->gid, c->prefix, sub, ckpt};
    /* The parts are read on the control connection: one lost since is made again, unless it held
     * the current transaction's parts (then those are gone, and writing fails anyway). A part of
     * the current transaction in flight there is settled first; its failure stays for the writes.
     */
    tpc__pg_stage_settle(c);
    tpc_error_t *err = c->staging_open ? NULL : tpc__pg_control_ready(c);
    if (!err)
        err = tpc__pg_ensure_txn(c);
    if (err)
        return err;
    /* First the marker: it waits for any other mover of this gid, and fails on the key if that
     * one committed. */
    PGresult *res = PQexecParams(c->data, sql, 4, NULL, params, NULL, NULL, 0);
    if (tpc__pg_sqlstate_is(res, "23505")) {
        PQclear(res);
        end_move(c);
        tpc_txn_log(c->st, TPC_LOG_INFO,
                    "transaction \"%s\" of checkpoint %" PRIu64 " was moved before", t->gid,
                    t->ckpt);
        moved(c, t, 0);
        return NULL;
    }
    if (PQresultStatus(res) != PGRES_COMMAND_OK)
        err = tpc__pg_result_error(c->data, res, "insert the marker row");
    else
        PQclear(res);
    if (!err)
        err = move_rows(c, t, floor);
    if (!err) {
        c->in_txn = false;
        err = commit_checked(c->data, "commit the move of the rows written ahead");
    }
    if (err) {
        end_move(c);
        return err;
    }
    moved(c, t, floor);
    return NULL;
}

/* ---- restore ------------------------------------------------------------------------------- */

static tpc_error_t *drop_gid(tpc__pg_conn_t *c, const char *gid, bool *dropped)
{
    char sql[600];
    snprintf(sql, sizeof sql, "DELETE FROM %s WHERE gid = $1", c->staging_q);
    const char *params[] = {gid};
    PGresult *res = NULL;
    tpc_error_t *err = tpc__pg_exec(c->control, sql, 1, params, "delete rows written ahead", &res);
    if (!err) {
        const char *n = PQcmdTuples(res);
        *dropped = n && *n && strcmp(n, "0") != 0;
        PQclear(res);
    }
    return err;
}

tpc_error_t *tpc__pg_stage_drop(tpc__pg_conn_t *c, tpc__pg_txn_t *t)
{
    bool dropped = false;
    tpc_error_t *err = tpc__pg_control_ready(c);
    if (!err)
        err = drop_gid(c, t->gid, &dropped);
    if (!err && dropped)
        tpc_txn_log(c->st, TPC_LOG_INFO,
                    "dropped the rows written ahead of transaction \"%s\", whose checkpoint never "
                    "completed",
                    t->gid);
    return err;
}

/* Another mode than write-ahead (prepared, at-least-once) still drops what an earlier run in
 * write-ahead mode left, when the write-ahead table is there and may be used. */
static tpc_error_t *stage_table_usable(tpc__pg_conn_t *c, bool *usable)
{
    const char *params[] = {c->staging_q};
    PGresult *res = NULL;
    tpc_error_t *err =
        tpc__pg_exec(c->control,
                     "SELECT coalesce(has_table_privilege(to_regclass($1), 'SELECT') AND "
                     "has_table_privilege(to_regclass($1), 'DELETE'), false)",
                     1, params, "look up the write-ahead table", &res);
    if (err)
        return err;
    *usable = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return NULL;
}

tpc_error_t *tpc__pg_stage_lingering(tpc__pg_conn_t *c, const tpc_txn_lingering_t *l)
{
    bool usable = true;
    tpc_error_t *failed = c->kind == TPC__PG_TXN_STAGED ? NULL : stage_table_usable(c, &usable);
    if (failed || !usable)
        return failed;
    char sql[600];
    snprintf(sql, sizeof sql, "SELECT DISTINCT gid, subtask FROM %s WHERE sink = $1", c->staging_q);
    const char *params[] = {c->prefix};
    PGresult *res = NULL;
    tpc_error_t *err = tpc__pg_exec(c->control, sql, 1, params, "list rows written ahead", &res);
    if (err)
        return err;
    int dropped = 0;
    for (int i = 0; i < PQntuples(res) && !err; i++) {
        const char *gid = PQgetvalue(res, i, 0);
        bool gone = false;
        if (!tpc_txn_owns(c->st, atoi(PQgetvalue(res, i, 1))) || tpc__pg_known(l, gid))
            continue;
        err = drop_gid(c, gid, &gone);
        dropped += gone;
    }
    PQclear(res);
    if (dropped)
        tpc_txn_log(c->st, TPC_LOG_INFO,
                    "dropped the rows written ahead of %d transactions of prefix \"%s\" that no "
                    "checkpoint up to %" PRIu64 " holds",
                    dropped, c->prefix, l->restored_checkpoint);
    return err;
}
