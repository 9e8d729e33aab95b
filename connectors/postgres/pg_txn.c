/*
 * One transaction of the PostgreSQL sink on the data connection: nothing happens before the first
 * record (so an empty transaction costs no statement), then BEGIN and the rows (pg_write.c).
 * Pre-commit ends the rows, adds the marker row that lets a later commit tell "already committed"
 * from "lost", and prepares the transaction under its gid. Also the open of a subtask and the
 * handle's bytes.
 *
 * The other ways to commit hook in here: in write-ahead mode the rows go to the write-ahead table
 * instead of the target (pg_staged.c), and under at-least-once (or none) pre-commit is a plain
 * COMMIT, with no marker and no prepared transaction.
 */
#include "pg_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tpc_error_t *nomem(void)
{
    return tpc_error_nomem();
}

static void derive_prefix(char *dst, const tpc_txn_subtask_t *st)
{
    snprintf(dst, TPC__PG_PREFIX_MAX + 1, "%s.%s", st->job_name, st->sink_name);
    for (char *p = dst; *p; p++) {
        char ch = *p;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' || ch == '.';
        if (!ok)
            *p = '_';
    }
}

tpc_error_t *tpc__pg_open(void *arg, const tpc_txn_subtask_t *st, void **out)
{
    const tpc__pg_conf_t *conf = arg;
    if (!conf->conninfo)
        return tpc_error_hint(
            tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL, "\"pg.conninfo\" is not set"),
            "set pg.conninfo to a libpq connection string, e.g. \"host=db dbname=app user=app\"");
    tpc__pg_conn_t *c = calloc(1, sizeof *c);
    if (!c)
        return nomem();
    c->conf = conf;
    c->st = st;
    if (conf->gid_prefix[0])
        snprintf(c->prefix, sizeof c->prefix, "%s", conf->gid_prefix);
    else
        derive_prefix(c->prefix, st);
    tpc_error_t *err = tpc__pg_connect(conf, st, "control", &c->control);
    if (!err)
        err = tpc__pg_check_server(c);
    if (!err)
        err = tpc__pg_connect(conf, st, "data", &c->data);
    if (!err)
        err = tpc__pg_open_tables(c);
    if (!err)
        err = tpc__pg_ensure_marker_table(c);
    if (!err)
        err = tpc__pg_stage_open(c);
    if (err) {
        tpc__pg_close(c);
        return err;
    }
    *out = c;
    return NULL;
}

void tpc__pg_close(void *conn)
{
    tpc__pg_conn_t *c = conn;
    PQfinish(c->data);
    PQfinish(c->control);
    tpc_error_destroy(c->stage_err);
    tpc__pg_close_tables(c);
    free(c->marker_q);
    free(c->staging_q);
    free(c->move.buf);
    free(c);
}

tpc_error_t *tpc__pg_begin(void *conn, uint64_t checkpoint_id, void **txn)
{
    tpc__pg_conn_t *c = conn;
    tpc__pg_txn_t *t = calloc(1, sizeof *t);
    if (!t)
        return nomem();
    t->subtask = c->st->subtask;
    t->parallelism = c->st->parallelism;
    t->begin_ckpt = checkpoint_id;
    /* With owners the gid ends with the owner epoch: two owners of the job never share a gid,
     * and a take-over tells an older owner's gids from its own. */
    char epoch[32] = "";
    if (c->st->owner_epoch)
        snprintf(epoch, sizeof epoch, ":e%" PRIu64, c->st->owner_epoch);
    int n = snprintf(t->gid, sizeof t->gid, "%s:%d:%d:%" PRIu64 "%s", c->prefix, t->subtask,
                     t->parallelism, checkpoint_id, epoch);
    if (n < 0 || (size_t)n >= sizeof t->gid) {
        free(t);
        return tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                             "gid for prefix \"%s\" is longer than %d bytes", c->prefix,
                             TPC_PG_GID_MAX);
    }
    t->kind = c->kind;
    tpc__pg_new_rows(c, t->gid);
    if (t->kind == TPC__PG_TXN_STAGED)
        tpc__pg_stage_begin(c, t);
    *txn = t;
    return NULL;
}

/* BEGIN on the data connection. Between transactions nothing is lost with the connection, so a
 * connection that broke since the last one is made again first. */
tpc_error_t *tpc__pg_ensure_txn(tpc__pg_conn_t *c)
{
    if (c->in_txn)
        return NULL;
    for (int attempt = 0;; attempt++) {
        if (PQstatus(c->data) != CONNECTION_OK) {
            PQreset(c->data);
            tpc_error_t *err = NULL;
            if (PQstatus(c->data) == CONNECTION_OK)
                err = tpc__pg_session(c->conf, c->data);
            if (!err && PQstatus(c->data) == CONNECTION_OK)
                err = tpc__pg_prepare_batches(c);
            if (err)
                return err;
        }
        PGresult *res = PQexec(c->data, "BEGIN");
        if (PQresultStatus(res) == PGRES_COMMAND_OK) {
            PQclear(res);
            c->in_txn = true;
            return NULL;
        }
        if (attempt == 0 && PQstatus(c->data) != CONNECTION_OK) {
            PQclear(res);
            continue;
        }
        return tpc__pg_result_error(c->data, res, "begin a transaction");
    }
}

tpc_error_t *tpc__pg_write(void *conn, void *txn, const tpc_record_t *records, size_t count)
{
    tpc__pg_txn_t *t = txn;
    bool wrote = false;
    tpc_error_t *err = tpc__pg_write_rows(conn, records, count, &wrote);
    t->written = t->written || wrote;
    return err;
}

tpc_error_t *tpc__pg_flush(void *conn, void *txn)
{
    (void)txn;
    return tpc__pg_flush_rows(conn);
}

tpc_error_t *tpc__pg_pre_commit(void *conn, void *txn, uint64_t checkpoint_id)
{
    tpc__pg_conn_t *c = conn;
    tpc__pg_txn_t *t = txn;
    if (c->kind == TPC__PG_TXN_STAGED)
        return tpc__pg_stage_pre_commit(c, t, checkpoint_id);
    /* Upsert and changelog statements touch existing rows by key. An earlier transaction of this
     * subtask that is still prepared (its checkpoint was aborted or declined, or is still in
     * flight) holds the locks of the keys it wrote, and only this thread could commit it. A
     * delete would not see a row that transaction inserted, and the row would survive both
     * commits: a changelog with deletes is refused outright. Upserts and updates would wait for
     * ever on such a key: they wait a short while, then fail. Either way the job restarts from
     * the last completed checkpoint, which rolls that transaction back and writes its records
     * again. */
    bool keyed = c->conf->mode == TPC__PG_UPSERT || c->conf->mode == TPC__PG_CHANGELOG;
    c->own_locks = c->kind == TPC__PG_TXN_PREPARED && c->prepared_here > 0 && keyed;
    if (c->own_locks && c->row.deletes)
        return tpc_error_hint(
            tpc_error_new(TPC_ERR_STATE, TPC_ERROR_RETRIABLE,
                          "pg.mode=changelog cannot apply the deletes of checkpoint %" PRIu64
                          " while %d earlier transaction%s of this subtask %s still prepared: a "
                          "delete does not see the rows it inserted",
                          checkpoint_id, c->prepared_here, c->prepared_here == 1 ? "" : "s",
                          c->prepared_here == 1 ? "is" : "are"),
            "the job restarts from its last completed checkpoint and writes these records again; "
            "keep checkpoint.max-concurrent at 1 with this mode, and look for why checkpoints "
            "were aborted or declined");
    /* A prepared gid of an older owner (a zombie's) may hold old marker rows this deletes. */
    tpc_error_t *err =
        c->kind == TPC__PG_TXN_PREPARED ? tpc__pg_sweep_older(c, checkpoint_id) : NULL;
    if (!err)
        err = tpc__pg_end_rows(c);
    if (err && c->own_locks && tpc_error_is_retriable(err))
        err = tpc_error_prefix(err,
                               "%d earlier transaction%s of this subtask %s still prepared and "
                               "may hold the key; the job restarts from its last completed "
                               "checkpoint",
                               c->prepared_here, c->prepared_here == 1 ? "" : "s",
                               c->prepared_here == 1 ? "is" : "are");
    c->own_locks = false;
    if (!err)
        err = tpc__pg_ensure_txn(c);
    if (!err && c->kind == TPC__PG_TXN_DIRECT) {
        c->in_txn = false;
        err = tpc__pg_exec(c->data, "COMMIT", 0, NULL, "commit the transaction", NULL);
        t->ckpt = err ? 0 : checkpoint_id;
        return err;
    }
    char sub[16], ckpt[24], floor[24];
    snprintf(sub, sizeof sub, "%d", t->subtask);
    snprintf(ckpt, sizeof ckpt, "%" PRIu64, checkpoint_id);
    snprintf(floor, sizeof floor, "%" PRIu64, c->marker_floor);
    const char *params[] = {t->gid, c->prefix, sub, ckpt};
    char sql[600];
    snprintf(sql, sizeof sql,
             "INSERT INTO %s (gid, sink, subtask, checkpoint) VALUES ($1, $2, $3, $4)",
             c->marker_q);
    if (!err)
        err = tpc__pg_exec(c->data, sql, 4, params, "insert the marker row", NULL);
    /* Markers nobody can ask for any more go in the same transaction (see pg_commit.c). Only
     * those above the last sweep: the rows of earlier sweeps are locked by transactions that
     * may still be prepared, and waiting for their commit here would wait for this thread. */
    if (!err && c->marker_floor > c->marker_swept) {
        char swept[24];
        snprintf(swept, sizeof swept, "%" PRIu64, c->marker_swept);
        const char *del[] = {c->prefix, sub, swept, floor};
        snprintf(sql, sizeof sql,
                 "DELETE FROM %s WHERE sink = $1 AND subtask = $2 AND checkpoint > $3 AND "
                 "checkpoint <= $4",
                 c->marker_q);
        err = tpc__pg_exec(c->data, sql, 4, del, "delete old marker rows", NULL);
        if (!err)
            c->marker_swept = c->marker_floor;
    }
    if (err)
        return err;
    /* PREPARE TRANSACTION takes no parameters: the gid is made of checked characters only, and
     * quoted as a literal all the same. */
    char *lit = PQescapeLiteral(c->data, t->gid, strlen(t->gid));
    if (!lit)
        return tpc__pg_result_error(c->data, NULL, "quote the gid");
    snprintf(sql, sizeof sql, "PREPARE TRANSACTION %s", lit);
    PQfreemem(lit);
    c->in_txn = false;
    err = tpc__pg_exec(c->data, sql, 0, NULL, "prepare the transaction", NULL);
    if (err)
        return err;
    t->ckpt = checkpoint_id;
    t->floor = c->committed_ckpt;
    t->local = true;
    c->prepared_here++;
    return NULL;
}

tpc_error_t *tpc__pg_abort(void *conn, void *txn)
{
    tpc__pg_conn_t *c = conn;
    (void)txn;
    tpc__pg_drop_rows(c);
    tpc__pg_stage_abort(c);
    tpc__pg_cancel_copy(c);
    if (!c->in_txn)
        return NULL;
    c->in_txn = false;
    if (PQstatus(c->data) != CONNECTION_OK)
        return NULL;
    tpc_error_t *err =
        tpc__pg_exec(c->data, "ROLLBACK", 0, NULL, "roll back the transaction", NULL);
    /* On a lost connection the server has dropped the transaction already. */
    if (err && PQstatus(c->data) != CONNECTION_OK) {
        tpc_error_destroy(err);
        err = NULL;
    }
    return err;
}

bool tpc__pg_is_empty(void *conn, const void *txn)
{
    (void)conn;
    return !((const tpc__pg_txn_t *)txn)->written;
}

void tpc__pg_free_txn(void *conn, void *txn)
{
    (void)conn;
    free(txn);
}

void tpc__pg_describe(void *conn, const void *txn, char *buf, size_t cap)
{
    (void)conn;
    const tpc__pg_txn_t *t = txn;
    snprintf(buf, cap, "%s%s", t->gid, t->kind == TPC__PG_TXN_STAGED ? " (write-ahead)" : "");
}

/* Handle bytes, version 1, big-endian: version u8, subtask u32, parallelism u32, begin checkpoint
 * u64, pre-commit checkpoint u64, gid length u8, gid. The gid is stored whole so that a handle
 * still names its transaction after pg.gid-prefix changed. Version 2 is a write-ahead (staged)
 * transaction: version 1's fields, then its parts u32 and rows u64 in the staging table, which the
 * move checks before it writes. Version 3 is version 2 and the layout the parts were written with:
 * pg.mode u8 and a hash u64 of the tables, columns and column types (pg_staged.c), which the move
 * compares with its own, since the parts are raw tuples of that layout. */
#define HANDLE_VERSION        1
#define HANDLE_VERSION_STAGED 2
#define HANDLE_VERSION_LAYOUT 3
#define HANDLE_FIXED          26
#define HANDLE_STAGED_EXTRA   12
#define HANDLE_LAYOUT_EXTRA   9

tpc_error_t *tpc__pg_serialize(void *conn, const void *txn, tpc_txn_buf_t *out)
{
    (void)conn;
    const tpc__pg_txn_t *t = txn;
    unsigned char b[HANDLE_FIXED + TPC_PG_GID_MAX + HANDLE_STAGED_EXTRA + HANDLE_LAYOUT_EXTRA],
        *p = b;
    size_t glen = strlen(t->gid);
    bool staged = t->kind == TPC__PG_TXN_STAGED;
    bool layout = staged && t->has_layout;
    tpc_txn_put_be(&p,
                   layout   ? HANDLE_VERSION_LAYOUT
                   : staged ? HANDLE_VERSION_STAGED
                            : HANDLE_VERSION,
                   1);
    tpc_txn_put_be(&p, (uint64_t)t->subtask, 4);
    tpc_txn_put_be(&p, (uint64_t)t->parallelism, 4);
    tpc_txn_put_be(&p, t->begin_ckpt, 8);
    tpc_txn_put_be(&p, t->ckpt, 8);
    tpc_txn_put_be(&p, glen, 1);
    memcpy(p, t->gid, glen);
    p += glen;
    if (staged) {
        tpc_txn_put_be(&p, t->parts, 4);
        tpc_txn_put_be(&p, t->staged_rows, 8);
    }
    if (layout) {
        tpc_txn_put_be(&p, (uint64_t)t->layout_mode, 1);
        tpc_txn_put_be(&p, t->layout, 8);
    }
    return tpc_txn_buf_append(out, b, (size_t)(p - b));
}

static tpc_error_t *corrupt_handle(size_t len, const char *what)
{
    return tpc_error_hint(tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL,
                                        "corrupt postgres transaction handle of %zu bytes: %s", len,
                                        what),
                          "restore from another checkpoint, or start the job fresh");
}

tpc_error_t *tpc__pg_deserialize(void *conn, const void *bytes, size_t len, void **txn)
{
    (void)conn;
    const unsigned char *p = bytes;
    bool layout = len > 0 && p[0] == HANDLE_VERSION_LAYOUT;
    bool staged = len > 0 && (p[0] == HANDLE_VERSION_STAGED || layout);
    size_t extra = staged ? HANDLE_STAGED_EXTRA : 0;
    extra += layout ? HANDLE_LAYOUT_EXTRA : 0;
    if (len < HANDLE_FIXED || (p[0] != HANDLE_VERSION && !staged))
        return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL,
                             "postgres transaction handle of %zu bytes (version %u) is not one "
                             "this sink wrote",
                             len, len ? (unsigned)p[0] : 0u);
    size_t glen = p[HANDLE_FIXED - 1];
    if (glen == 0 || glen > TPC_PG_GID_MAX) {
        char what[64];
        snprintf(what, sizeof what, "gid length %zu is not between 1 and %d", glen, TPC_PG_GID_MAX);
        return corrupt_handle(len, what);
    }
    if (len != HANDLE_FIXED + glen + extra || memchr(p + HANDLE_FIXED, '\0', glen))
        return corrupt_handle(len, "its length does not match its gid");
    p++;
    uint64_t subtask = tpc_txn_get_be(&p, 4), parallelism = tpc_txn_get_be(&p, 4);
    if (parallelism == 0 || parallelism > INT32_MAX || subtask >= parallelism)
        return corrupt_handle(len, "its subtask is not below its parallelism");
    tpc__pg_txn_t *t = calloc(1, sizeof *t);
    if (!t)
        return nomem();
    t->subtask = (int)subtask;
    t->parallelism = (int)parallelism;
    t->begin_ckpt = tpc_txn_get_be(&p, 8);
    t->ckpt = tpc_txn_get_be(&p, 8);
    p++; /* gid length */
    memcpy(t->gid, p, glen);
    t->gid[glen] = '\0';
    p += glen;
    if (staged) {
        t->kind = TPC__PG_TXN_STAGED;
        t->parts = (uint32_t)tpc_txn_get_be(&p, 4);
        t->staged_rows = tpc_txn_get_be(&p, 8);
    }
    if (layout) {
        t->has_layout = true;
        t->layout_mode = (int)tpc_txn_get_be(&p, 1);
        t->layout = tpc_txn_get_be(&p, 8);
    }
    t->written = true;
    *txn = t;
    return NULL;
}

tpc_error_t *tpc__pg_describe_handle(const void *bytes, size_t len, tpc_txn_handle_view_t *out)
{
    void *txn = NULL;
    tpc_error_t *err = tpc__pg_deserialize(NULL, bytes, len, &txn);
    if (err)
        return err;
    const tpc__pg_txn_t *t = txn;
    snprintf(out->line, sizeof out->line, "%s%s", t->gid,
             t->kind == TPC__PG_TXN_STAGED ? " (write-ahead)" : "");
    tpc_txn_handle_text(out, "gid", t->gid);
    if (t->kind == TPC__PG_TXN_STAGED) {
        tpc_txn_handle_text(out, "commit", "write-ahead");
        tpc_txn_handle_number(out, "parts", (int64_t)t->parts);
        tpc_txn_handle_number(out, "rows", (int64_t)t->staged_rows);
    }
    tpc__pg_free_txn(NULL, txn);
    return NULL;
}
