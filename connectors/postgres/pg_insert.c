/*
 * Insert mode: the buffered tuples (the same binary tuples COPY takes) become the binary
 * parameters of multi-row INSERT statements of up to pg.batch-size rows; a full batch runs as a
 * statement prepared once per connection. Also the column lists and the ON CONFLICT clause of the
 * upsert and changelog merges (pg_write.c).
 */
#include "pg_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *tpc__pg_column_list(tpc__pg_conn_t *c, const tpc__pg_table_t *t, const char *qualifier,
                          bool keys_only)
{
    size_t cap = 3, qlen = strlen(qualifier);
    char **q = calloc((size_t)t->ncols, sizeof *q);
    if (!q)
        return NULL;
    bool ok = true;
    for (int i = 0; i < t->ncols && ok; i++) {
        q[i] = PQescapeIdentifier(c->data, t->cols[i].name, strlen(t->cols[i].name));
        ok = q[i] != NULL;
        cap += ok ? strlen(q[i]) + qlen + 2 : 0;
    }
    char *out = ok ? malloc(cap) : NULL;
    size_t len = 0;
    for (int i = 0; out && i < t->ncols; i++)
        if (!keys_only || t->cols[i].key)
            len +=
                (size_t)snprintf(out + len, cap - len, "%s%s%s", len ? ", " : "", qualifier, q[i]);
    if (out)
        out[len] = '\0';
    for (int i = 0; i < t->ncols; i++)
        PQfreemem(q[i]);
    free(q);
    return out;
}

char *tpc__pg_column_pairs(tpc__pg_conn_t *c, const tpc__pg_table_t *t, bool keys,
                           const char *first, const char *sep, const char *mid)
{
    /* The quoted names first, then the exact length: a name of '"' characters quotes to twice
     * its length and more. */
    char **q = calloc((size_t)t->ncols + 1, sizeof *q);
    if (!q)
        return NULL;
    size_t cap = 1, fixed = strlen(sep) + strlen(first) + strlen(mid);
    bool ok = true;
    for (int i = 0; i < t->ncols && ok; i++) {
        if (t->cols[i].key != keys)
            continue;
        q[i] = PQescapeIdentifier(c->data, t->cols[i].name, strlen(t->cols[i].name));
        ok = q[i] != NULL;
        cap += ok ? fixed + 2 * strlen(q[i]) : 0;
    }
    char *out = ok ? malloc(cap) : NULL;
    size_t len = 0;
    bool any = false;
    for (int i = 0; out && i < t->ncols; i++) {
        if (!q[i])
            continue;
        len +=
            (size_t)snprintf(out + len, cap - len, "%s%s%s%s", any ? sep : first, q[i], mid, q[i]);
        any = true;
    }
    if (out)
        out[len] = '\0';
    for (int i = 0; i < t->ncols; i++)
        PQfreemem(q[i]);
    free(q);
    return out;
}

char *tpc__pg_conflict_sql(tpc__pg_conn_t *c, const tpc__pg_table_t *t)
{
    char *keys = tpc__pg_column_list(c, t, "", true);
    char *sets = tpc__pg_column_pairs(c, t, false, "UPDATE SET ", ", ", " = EXCLUDED.");
    size_t cap = (keys ? strlen(keys) : 0) + (sets ? strlen(sets) : 0) + 64;
    char *s = keys && sets ? malloc(cap) : NULL;
    if (s)
        snprintf(s, cap, " ON CONFLICT (%s) DO %s", keys, sets[0] ? sets : "NOTHING");
    free(keys);
    free(sets);
    return s;
}

/* "INSERT INTO t (cols) VALUES ($1, $2), ($3, $4)" */
char *tpc__pg_insert_sql(const tpc__pg_table_t *t, const char *cols, int rows)
{
    size_t cap = strlen(t->table_q) + strlen(cols) + (size_t)rows * (size_t)t->ncols * 10 + 128;
    char *s = malloc(cap);
    if (!s)
        return NULL;
    size_t n = (size_t)snprintf(s, cap, "INSERT INTO %s (%s) VALUES ", t->table_q, cols);
    for (int r = 0, p = 1; r < rows; r++) {
        n += (size_t)snprintf(s + n, cap - n, "%s(", r ? ", " : "");
        for (int i = 0; i < t->ncols; i++, p++)
            n += (size_t)snprintf(s + n, cap - n, "%s$%d", i ? ", " : "", p);
        n += (size_t)snprintf(s + n, cap - n, ")");
    }
    return s;
}

static void batch_name(const tpc__pg_conn_t *c, const tpc__pg_table_t *t, char *name, size_t cap)
{
    snprintf(name, cap, "tpc_batch_%d", (int)(t - c->tables));
}

/* The full-batch statements, prepared once per data connection (again after a reconnect). */
tpc_error_t *tpc__pg_prepare_batches(tpc__pg_conn_t *c)
{
    if (c->conf->mode != TPC__PG_INSERT)
        return NULL;
    for (int i = 0; i < c->ntables; i++) {
        tpc__pg_table_t *t = &c->tables[i];
        char name[32];
        batch_name(c, t, name, sizeof name);
        PGresult *res =
            PQprepare(c->data, name, t->insert_sql, t->insert_rows * t->ncols, t->types);
        if (PQresultStatus(res) != PGRES_COMMAND_OK)
            return tpc__pg_result_error(c->data, res, "prepare the insert statement");
        PQclear(res);
    }
    return NULL;
}

/* Point the parameters of batch row @r at the fields of the tuple at @p; @returns the tuple's end.
 */
static const unsigned char *bind_tuple(tpc__pg_table_t *t, const unsigned char *p, int r)
{
    p += 2;
    for (int i = 0; i < t->ncols; i++) {
        int32_t len = (int32_t)(uint32_t)tpc_load_be(p, 4);
        p += 4;
        size_t k = (size_t)r * (size_t)t->ncols + (size_t)i;
        t->values[k] = len < 0 ? NULL : (const char *)p;
        t->lengths[k] = len < 0 ? 0 : len;
        p += len > 0 ? len : 0;
    }
    return p;
}

static tpc_error_t *exec_batch(tpc__pg_conn_t *c, tpc__pg_table_t *t, int rows)
{
    PGresult *res;
    if (rows == t->insert_rows) {
        char name[32];
        batch_name(c, t, name, sizeof name);
        res = PQexecPrepared(c->data, name, rows * t->ncols, t->values, t->lengths, t->formats, 1);
    } else {
        char *sql = tpc__pg_insert_sql(t, t->cols_sql, rows);
        if (!sql)
            return tpc_error_nomem();
        res = PQexecParams(c->data, sql, rows * t->ncols, t->types, t->values, t->lengths,
                           t->formats, 1);
        free(sql);
    }
    if (PQresultStatus(res) != PGRES_COMMAND_OK)
        return tpc__pg_result_error(c->data, res, "insert rows");
    PQclear(res);
    return NULL;
}

/* Send every buffered tuple of @t as INSERT statements of at most insert_rows rows. */
tpc_error_t *tpc__pg_exec_buffered(tpc__pg_conn_t *c, tpc__pg_table_t *t)
{
    if (!t->rows)
        return NULL;
    tpc_error_t *err = tpc__pg_ensure_txn(c);
    const unsigned char *p = t->out.buf;
    size_t left = t->rows;
    while (!err && left) {
        int r = 0;
        for (; left && r < t->insert_rows; r++, left--)
            p = bind_tuple(t, p, r);
        err = exec_batch(c, t, r);
    }
    t->rows = 0;
    t->out.len = 0;
    return err;
}
