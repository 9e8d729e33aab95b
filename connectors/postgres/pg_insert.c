/*
 * Insert and upsert modes: the buffered tuples (the same binary tuples COPY takes) become the
 * binary parameters of multi-row INSERT statements of up to pg.batch-size rows; a full batch runs
 * as a statement prepared once per connection. PostgreSQL refuses to update one row twice in a
 * statement (ON CONFLICT DO UPDATE), so in upsert mode a row whose key is already in the batch
 * starts the next statement: the later record wins, as it would row by row.
 */
#include "pg_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *tpc__pg_column_list(tpc__pg_conn_t *c)
{
    size_t cap = 3;
    char **q = calloc((size_t)c->ncols, sizeof *q);
    if (!q)
        return NULL;
    bool ok = true;
    for (int i = 0; i < c->ncols && ok; i++) {
        q[i] = PQescapeIdentifier(c->data, c->cols[i].name, strlen(c->cols[i].name));
        ok = q[i] != NULL;
        cap += ok ? strlen(q[i]) + 2 : 0;
    }
    char *out = ok ? malloc(cap) : NULL;
    size_t len = 0;
    for (int i = 0; out && i < c->ncols; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? ", " : "", q[i]);
    for (int i = 0; i < c->ncols; i++)
        PQfreemem(q[i]);
    free(q);
    return out;
}

/* "INSERT INTO t (cols) VALUES ($1, $2), ($3, $4) [ON CONFLICT (keys) DO UPDATE ...]" */
char *tpc__pg_insert_sql(tpc__pg_conn_t *c, const char *cols, int rows)
{
    size_t cap = strlen(c->table_q) + 3 * strlen(cols) + (size_t)rows * (size_t)c->ncols * 10 +
                 (size_t)c->ncols * 160 + 128;
    char *s = malloc(cap);
    if (!s)
        return NULL;
    size_t n = (size_t)snprintf(s, cap, "INSERT INTO %s (%s) VALUES ", c->table_q, cols);
    for (int r = 0, p = 1; r < rows; r++) {
        n += (size_t)snprintf(s + n, cap - n, "%s(", r ? ", " : "");
        for (int i = 0; i < c->ncols; i++, p++)
            n += (size_t)snprintf(s + n, cap - n, "%s$%d", i ? ", " : "", p);
        n += (size_t)snprintf(s + n, cap - n, ")");
    }
    if (c->conf->mode != TPC__PG_UPSERT)
        return s;
    bool first = true, updates = false;
    n += (size_t)snprintf(s + n, cap - n, " ON CONFLICT (");
    for (int i = 0; i < c->ncols; i++)
        if (c->cols[i].key) {
            char *q = PQescapeIdentifier(c->data, c->cols[i].name, strlen(c->cols[i].name));
            n += (size_t)snprintf(s + n, cap - n, "%s%s", first ? "" : ", ", q ? q : "");
            PQfreemem(q);
            first = false;
        }
    n += (size_t)snprintf(s + n, cap - n, ") DO ");
    for (int i = 0; i < c->ncols; i++)
        if (!c->cols[i].key) {
            char *q = PQescapeIdentifier(c->data, c->cols[i].name, strlen(c->cols[i].name));
            n += (size_t)snprintf(s + n, cap - n, "%s%s = EXCLUDED.%s",
                                  updates ? ", " : "UPDATE SET ", q ? q : "", q ? q : "");
            PQfreemem(q);
            updates = true;
        }
    if (!updates)
        snprintf(s + n, cap - n, "NOTHING");
    return s;
}

/* The full-batch statement, prepared once per data connection (again after a reconnect). Preparing
 * it at open also makes the server judge it: an upsert without a matching unique index fails here.
 */
tpc_error_t *tpc__pg_prepare_batch(tpc__pg_conn_t *c)
{
    if (c->conf->mode == TPC__PG_COPY)
        return NULL;
    PGresult *res =
        PQprepare(c->data, "tpc_batch", c->insert_sql, c->insert_rows * c->ncols, c->types);
    if (PQresultStatus(res) != PGRES_COMMAND_OK)
        return tpc__pg_result_error(c->data, res, "prepare the insert statement");
    PQclear(res);
    return NULL;
}

/* Point the parameters of batch row @r at the fields of the tuple at @p; @returns the tuple's end.
 */
static const unsigned char *bind_tuple(tpc__pg_conn_t *c, const unsigned char *p, int r)
{
    p += 2;
    for (int i = 0; i < c->ncols; i++) {
        int32_t len = (int32_t)(uint32_t)tpc_load_be(p, 4);
        p += 4;
        size_t k = (size_t)r * (size_t)c->ncols + (size_t)i;
        c->values[k] = len < 0 ? NULL : (const char *)p;
        c->lengths[k] = len < 0 ? 0 : len;
        p += len > 0 ? len : 0;
    }
    return p;
}

static uint32_t key_hash(const tpc__pg_conn_t *c, int r)
{
    uint32_t h = 2166136261u;
    for (int i = 0; i < c->ncols; i++) {
        if (!c->cols[i].key)
            continue;
        size_t k = (size_t)r * (size_t)c->ncols + (size_t)i;
        for (int j = 0; j < c->lengths[k]; j++)
            h = (h ^ (unsigned char)c->values[k][j]) * 16777619u;
        h = (h ^ (c->values[k] ? 1u : 0u)) * 16777619u;
    }
    return h ? h : 1;
}

static bool same_key(const tpc__pg_conn_t *c, int a, int b)
{
    for (int i = 0; i < c->ncols; i++) {
        size_t ka = (size_t)a * (size_t)c->ncols + (size_t)i;
        size_t kb = (size_t)b * (size_t)c->ncols + (size_t)i;
        if (c->cols[i].key &&
            (!c->values[ka] != !c->values[kb] || c->lengths[ka] != c->lengths[kb] ||
             (c->lengths[ka] && memcmp(c->values[ka], c->values[kb], (size_t)c->lengths[ka]))))
            return false;
    }
    return true;
}

/* Upsert: would row @r hit a key already in this batch? PostgreSQL refuses to update one row twice
 * in a statement, so such a row starts the next statement. Remembers the key otherwise. */
static bool repeats_key(tpc__pg_conn_t *c, int r, uint32_t *hashes)
{
    uint32_t h = key_hash(c, r);
    size_t mask = c->seen_cap - 1;
    for (size_t s = h & mask;; s = (s + 1) & mask) {
        if (!c->seen[s]) {
            c->seen[s] = (uint32_t)r + 1;
            hashes[r] = h;
            return false;
        }
        int o = (int)c->seen[s] - 1;
        if (hashes[o] == h && same_key(c, o, r))
            return true;
    }
}

static tpc_error_t *exec_batch(tpc__pg_conn_t *c, int rows)
{
    PGresult *res;
    if (rows == c->insert_rows) {
        res = PQexecPrepared(c->data, "tpc_batch", rows * c->ncols, c->values, c->lengths,
                             c->formats, 1);
    } else {
        char *cols = tpc__pg_column_list(c);
        char *sql = cols ? tpc__pg_insert_sql(c, cols, rows) : NULL;
        free(cols);
        if (!sql)
            return tpc_error_nomem();
        res = PQexecParams(c->data, sql, rows * c->ncols, c->types, c->values, c->lengths,
                           c->formats, 1);
        free(sql);
    }
    if (PQresultStatus(res) != PGRES_COMMAND_OK)
        return tpc__pg_result_error(c->data, res, "insert rows");
    PQclear(res);
    return NULL;
}

/* Send every buffered tuple as INSERT statements of at most insert_rows rows. */
tpc_error_t *tpc__pg_exec_buffered(tpc__pg_conn_t *c)
{
    if (!c->rows)
        return NULL;
    tpc_error_t *err = tpc__pg_ensure_txn(c);
    uint32_t *hashes = err ? NULL : calloc((size_t)c->insert_rows, sizeof *hashes);
    if (!err && !hashes)
        err = tpc_error_nomem();
    const unsigned char *p = c->row.buf;
    size_t left = c->rows;
    bool upsert = c->conf->mode == TPC__PG_UPSERT;
    while (!err && left) {
        int r = 0;
        memset(c->seen, 0, c->seen_cap * sizeof *c->seen);
        while (left && r < c->insert_rows) {
            const unsigned char *next = bind_tuple(c, p, r);
            if (upsert && repeats_key(c, r, hashes))
                break;
            p = next;
            r++;
            left--;
        }
        err = exec_batch(c, r);
    }
    free(hashes);
    c->rows = 0;
    c->row.len = 0;
    return err;
}
