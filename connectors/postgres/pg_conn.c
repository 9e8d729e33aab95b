/*
 * Connections and what the sink checks when a subtask opens. A server that is still starting (a
 * restart after a crash) is waited for with backoff up to pg.connect.deadline.ms; everything a user
 * can get wrong — prepared transactions turned off, a missing table or column, a column type the
 * sink cannot write, missing privileges — is found here, before any record is written, and named
 * in an error with a hint. Passwords never reach a message: servers are named by the conninfo
 * without them. Errors of a lost connection are flagged retriable, so that commits are retried.
 */
#include "pg_internal.h"
#include "tpc_kit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* libpq messages end in newlines and may span lines; messages here are one line. */
static void one_line(char *dst, size_t cap, const char *msg)
{
    snprintf(dst, cap, "%s", msg ? msg : "");
    for (char *p = dst; *p; p++)
        if (*p == '\n' || *p == '\t')
            *p = ' ';
    size_t n = strlen(dst);
    while (n && dst[n - 1] == ' ')
        dst[--n] = '\0';
}

/* Failures that waiting cannot cure: retrying them would only hide the mistake for the deadline. */
static bool permanent_failure(const char *msg)
{
    static const char *const words[] = {
        "authentication failed", "does not exist", "no pg_hba.conf entry",
        "permission denied",     "invalid",        "password"};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++)
        if (strstr(msg, words[i]))
            return true;
    return false;
}

/* The server's notices and warnings (RAISE NOTICE in a trigger, "relation exists, skipping", a
 * deprecation) go to the job's logger, as the subtask's lines, instead of libpq's default of
 * printing them on stderr. Called on the subtask's thread, inside a libpq call. */
static void on_notice(void *arg, const PGresult *res)
{
    const tpc_txn_subtask_t *st = arg;
    const char *sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
    const char *primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    const char *detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
    char msg[512];
    one_line(msg, sizeof msg, primary ? primary : PQresultErrorMessage(res));
    tpc_log_level_t level = !sev                            ? TPC_LOG_INFO
                            : strcmp(sev, "WARNING") == 0   ? TPC_LOG_WARN
                            : strncmp(sev, "DEBUG", 5) == 0 ? TPC_LOG_DEBUG
                                                            : TPC_LOG_INFO;
    tpc_txn_log(st, level, "postgresql %s: %s%s%s", sev ? sev : "notice", msg, detail ? ": " : "",
                detail ? detail : "");
}

tpc_error_t *tpc__pg_connect(const tpc__pg_conf_t *conf, const tpc_txn_subtask_t *st,
                             const char *role, PGconn **out)
{
    char app[96];
    snprintf(app, sizeof app, "twopc %s %d", role, st->subtask);
    /* Ours first: keywords in the user's conninfo (expanded from dbname) override them. */
    const char *const keys[] = {"connect_timeout", "application_name", "dbname", NULL};
    const char *const vals[] = {"10", app, conf->conninfo, NULL};
    tpc_backoff_t backoff;
    tpc_backoff_init(&backoff, tpc_clock_ms() + (int64_t)conf->connect_deadline_ms,
                     (int64_t)conf->connect_backoff_ms, 2000);
    char msg[512];
    bool permanent = false;
    for (int attempt = 0;; attempt++) {
        PGconn *pg = PQconnectdbParams(keys, vals, 1);
        if (pg && PQstatus(pg) == CONNECTION_OK) {
            PQsetNoticeReceiver(pg, on_notice, (void *)st);
            tpc_error_t *err = tpc__pg_session(conf, pg);
            if (err) {
                PQfinish(pg);
                return err;
            }
            if (attempt)
                tpc_txn_log(st, TPC_LOG_INFO, "connected to \"%s\" after %d attempts",
                            conf->conninfo_safe, attempt + 1);
            *out = pg;
            return NULL;
        }
        one_line(msg, sizeof msg, pg ? PQerrorMessage(pg) : "out of memory");
        tpc_pg_hide_secrets(conf->conninfo, msg);
        PQfinish(pg);
        if ((permanent = permanent_failure(msg)) ||
            !tpc_backoff_wait(&backoff, tpc_txn_subtask_canceled, (void *)st))
            break;
    }
    /* A wrong password or a missing role or database stays so: no restart mends it. */
    tpc_error_t *err = tpc_error_new(
        TPC_ERR_CONNECT, permanent ? TPC_ERROR_FATAL : TPC_ERROR_RETRIABLE,
        "could not connect to PostgreSQL server \"%s\": %s", conf->conninfo_safe, msg);
    return tpc_error_hint(err, "check that the server runs and accepts connections from this "
                               "host (pg.conninfo, listen_addresses, pg_hba.conf); waited "
                               "pg.connect.deadline.ms");
}

tpc_error_t *tpc__pg_session(const tpc__pg_conf_t *conf, PGconn *pg)
{
    /* No statement of the sink may wait for ever: a lock held by a transaction that only this
     * subtask could end (see pg_txn.c), or by a frozen old instance, ends the wait with 55P03,
     * a retriable error. */
    char sql[64];
    snprintf(sql, sizeof sql, "SET lock_timeout = %llu", (unsigned long long)conf->lock_timeout_ms);
    return tpc__pg_exec(pg, sql, 0, NULL, "set lock_timeout (pg.lock-timeout.ms)", NULL);
}

bool tpc__pg_sqlstate_is(const PGresult *res, const char *state)
{
    const char *s = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    return s && strcmp(s, state) == 0;
}

tpc_error_t *tpc__pg_result_error(PGconn *pg, PGresult *res, const char *what)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    char msg[512];
    if (!state || PQstatus(pg) != CONNECTION_OK) {
        one_line(msg, sizeof msg, PQerrorMessage(pg));
        PQclear(res);
        tpc_error_t *err = tpc_error_new(TPC_ERR_CONNECT, TPC_ERROR_RETRIABLE,
                                         "could not %s: connection to server lost: %s", what, msg);
        return tpc_error_hint(err, "the server restarted or the network failed; the sink "
                                   "reconnects, and a prepared transaction survives");
    }
    one_line(msg, sizeof msg, PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY));
    const char *detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
    const char *hint = PQresultErrorField(res, PG_DIAG_MESSAGE_HINT);
    /* Connection exceptions (08), rolled back transactions (40: serialization, deadlock),
     * exhausted resources (53: disk, memory, connections), a lock not available (55P03),
     * shutdowns (57P) and system errors (58) pass with time; everything else (wrong types,
     * constraints, permissions, syntax) is a mistake that no retry or restart mends. */
    bool transient = strncmp(state, "08", 2) == 0 || strncmp(state, "40", 2) == 0 ||
                     strncmp(state, "53", 2) == 0 || strcmp(state, "55P03") == 0 ||
                     strncmp(state, "57P", 3) == 0 || strncmp(state, "58", 2) == 0;
    tpc_error_t *err =
        tpc_error_new(TPC_ERR_EXTERNAL, transient ? TPC_ERROR_RETRIABLE : TPC_ERROR_FATAL,
                      "could not %s: %s (SQLSTATE %s)%s%s", what, msg, state, detail ? ": " : "",
                      detail ? detail : "");
    if (hint)
        err = tpc_error_hint(err, "%s", hint);
    PQclear(res);
    return err;
}

tpc_error_t *tpc__pg_exec(PGconn *pg, const char *sql, int n, const char *const *params,
                          const char *what, PGresult **out)
{
    PGresult *res = PQexecParams(pg, sql, n, NULL, params, NULL, NULL, 0);
    ExecStatusType s = PQresultStatus(res);
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK)
        return tpc__pg_result_error(pg, res, what);
    if (out)
        *out = res;
    else
        PQclear(res);
    return NULL;
}

bool tpc__pg_name_ok(const char *name)
{
    const char *dot = strchr(name, '.');
    return *name && !(dot && (dot == name || !dot[1] || strchr(dot + 1, '.')));
}

char *tpc__pg_quote_qualified(PGconn *pg, const char *name)
{
    if (!tpc__pg_name_ok(name))
        return NULL;
    const char *dot = strchr(name, '.');
    size_t first = dot ? (size_t)(dot - name) : strlen(name);
    char *a = PQescapeIdentifier(pg, name, first);
    char *b = dot ? PQescapeIdentifier(pg, dot + 1, strlen(dot + 1)) : NULL;
    char *out = NULL;
    if (a && (!dot || b)) {
        size_t len = strlen(a) + (b ? strlen(b) + 1 : 0) + 1;
        out = malloc(len);
        if (out)
            snprintf(out, len, "%s%s%s", a, b ? "." : "", b ? b : "");
    }
    PQfreemem(a);
    PQfreemem(b);
    return out;
}

/* How transactions commit (pg.commit and the guarantee), from what the server allows. */
tpc_error_t *tpc__pg_check_server(tpc__pg_conn_t *c)
{
    c->kind = TPC__PG_TXN_PREPARED;
    if (c->st->guarantee != TPC_TXN_EXACTLY_ONCE) {
        c->kind = TPC__PG_TXN_DIRECT;
        return NULL;
    }
    if (c->conf->commit == TPC__PG_COMMIT_WRITE_AHEAD) {
        c->kind = TPC__PG_TXN_STAGED;
        return NULL;
    }
    /* missing_ok: a PostgreSQL-compatible server without the setting has no prepared
     * transactions either. */
    PGresult *res = NULL;
    tpc_error_t *err = tpc__pg_exec(
        c->control, "SELECT coalesce(current_setting('max_prepared_transactions', true), '0')::int",
        0, NULL, "read max_prepared_transactions", &res);
    if (err)
        return err;
    int max = atoi(PQgetvalue(res, 0, 0));
    PQclear(res);
    if (max > 0)
        return NULL;
    if (c->conf->commit == TPC__PG_COMMIT_AUTO) {
        c->kind = TPC__PG_TXN_STAGED;
        if (c->st->subtask == 0)
            tpc_txn_log(c->st, TPC_LOG_INFO,
                        "prepared transactions are disabled on \"%s\": committing through "
                        "write-ahead table \"%s\" (pg.commit=auto chose write-ahead)",
                        c->conf->conninfo_safe, c->conf->write_ahead_table);
        return NULL;
    }
    err = tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                        "prepared transactions are disabled on PostgreSQL server \"%s\" "
                        "(max_prepared_transactions = 0), which pg.commit=prepared needs",
                        c->conf->conninfo_safe);
    return tpc_error_hint(err,
                          "set pg.commit=write-ahead (or auto) to commit through a write-ahead "
                          "table without prepared transactions; or set "
                          "max_prepared_transactions > 0 in postgresql.conf (at least the "
                          "sink's parallelism times the checkpoints that can be pending at "
                          "once, plus what other programs need) and restart the server");
}

void tpc__pg_free_cols(tpc__pg_col_t *cols, int n)
{
    for (int i = 0; i < n && cols; i++) {
        free(cols[i].name);
        free(cols[i].type_name);
    }
    free(cols);
}

/* Types the row builder writes; anything else has no binary encoder here. */
static bool supported_type(Oid t)
{
    static const Oid ok[] = {16, 17, 20, 21, 23, 25, 114, 700, 701, 1042, 1043, 1184, 1700, 3802};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
        if (ok[i] == t)
            return true;
    return false;
}

/* Find @name (a slice of a comma list, trimmed here) among the table's columns. */
static int find_col(PGresult *res, const char *name, size_t len)
{
    while (len && *name == ' ')
        name++, len--;
    while (len && name[len - 1] == ' ')
        len--;
    for (int i = 0; i < PQntuples(res); i++) {
        const char *n = PQgetvalue(res, i, 0);
        if (strlen(n) == len && memcmp(n, name, len) == 0)
            return i;
    }
    return -1;
}

static tpc_error_t *missing_column(const tpc__pg_table_t *t, PGresult *res, const char *key,
                                   const char *name, size_t len)
{
    while (len && *name == ' ')
        name++, len--;
    while (len && name[len - 1] == ' ')
        len--;
    char have[512] = "";
    size_t n = 0;
    for (int i = 0; i < PQntuples(res) && n < sizeof have; i++)
        n += (size_t)snprintf(have + n, sizeof have - n, "%s%s", i ? ", " : "",
                              PQgetvalue(res, i, 0));
    tpc_error_t *err = tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                     "column \"%.*s\" of table \"%s\" does not exist (\"%s\")",
                                     (int)len, name, t->name, key);
    return tpc_error_hint(err, "name columns exactly, case included; the table has: %s", have);
}

/* Split @list on commas into column indexes of @res. */
static tpc_error_t *pick_columns(const tpc__pg_table_t *t, PGresult *res, const char *key,
                                 const char *list, int *idx, int *n)
{
    *n = 0;
    for (const char *p = list;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        int i = find_col(res, p, len);
        if (i < 0)
            return missing_column(t, res, key, p, len);
        for (int j = 0; j < *n; j++)
            if (idx[j] == i)
                return tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                     "column \"%s\" is listed twice in \"%s\"",
                                     PQgetvalue(res, i, 0), key);
        idx[(*n)++] = i;
        if (!comma)
            return NULL;
        p = comma + 1;
    }
}

static tpc_error_t *table_error(tpc__pg_conn_t *c, const tpc__pg_table_t *t, tpc_error_t *err,
                                bool missing)
{
    if (!missing)
        return err;
    tpc_error_destroy(err);
    err = tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL, "table \"%s\" does not exist in \"%s\"",
                        t->name, c->conf->conninfo_safe);
    return tpc_error_hint(err, "create the table first, or set pg.table to an existing table "
                               "(schema.table when it is not on the search path)");
}

static tpc_error_t *check_columns(tpc__pg_conn_t *c, tpc__pg_table_t *t, PGresult *res,
                                  const int *idx, int n)
{
    tpc__pg_col_t *cols = calloc((size_t)n, sizeof *cols);
    if (!cols)
        return tpc_error_nomem();
    t->cols = cols;
    t->ncols = n;
    for (int i = 0; i < n; i++) {
        cols[i].name = strdup(PQgetvalue(res, idx[i], 0));
        cols[i].type = (Oid)strtoul(PQgetvalue(res, idx[i], 1), NULL, 10);
        cols[i].type_name = strdup(PQgetvalue(res, idx[i], 2));
        cols[i].attnum = atoi(PQgetvalue(res, idx[i], 6));
        if (!cols[i].name || !cols[i].type_name)
            return tpc_error_nomem();
        if (!supported_type(cols[i].type))
            return tpc_error_hint(
                tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                              "column \"%s\" of table \"%s\" has type %s, which the sink cannot "
                              "write",
                              cols[i].name, t->name, cols[i].type_name),
                "the sink writes smallint, integer, bigint, real, double precision, numeric, "
                "text, varchar, char, json, jsonb, bytea, boolean and timestamptz; leave the "
                "column out of pg.columns or change its type");
    }
    if (c->conf->encode)
        return NULL;
    Oid k = cols[0].type, v = n > 1 ? cols[1].type : 0;
    if (n != 2 || k != 17 || (v != 17 && v != 25 && v != 1043 && v != 114 && v != 3802))
        return tpc_error_hint(
            tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                          "the default mapping needs two columns, key bytea and value bytea or "
                          "text, but table \"%s\" gets %d column%s",
                          t->name, n, n == 1 ? "" : "s"),
            "set pg.columns to a bytea and a bytea or text column, or map records yourself with "
            "tpc_pg_sink_set_encoder()");
    t->value_is_text = v != 17;
    return NULL;
}

/* ON CONFLICT needs a unique index on exactly the key columns; the server would say so only at the
 * first upsert, so look now. */
static tpc_error_t *check_unique_index(tpc__pg_conn_t *c, const tpc__pg_table_t *t,
                                       const char *keys)
{
    const char *params[] = {t->table_q};
    PGresult *res = NULL;
    tpc_error_t *err = tpc__pg_exec(c->control,
                                    "SELECT indkey::text FROM pg_index WHERE indrelid = "
                                    "$1::regclass AND indisunique AND indpred IS NULL AND "
                                    "indexprs IS NULL",
                                    1, params, "look up unique indexes", &res);
    if (err)
        return err;
    int nkeys = t->nkeys;
    bool found = false;
    for (int r = 0; r < PQntuples(res) && !found; r++) {
        int n = 0, match = 0;
        for (char *p = PQgetvalue(res, r, 0), *end; *p; p = end) {
            int attnum = (int)strtol(p, &end, 10);
            if (end == p)
                break;
            n++;
            for (int i = 0; i < t->ncols; i++)
                match += t->cols[i].key && t->cols[i].attnum == attnum;
        }
        found = n == nkeys && match == nkeys;
    }
    PQclear(res);
    if (found)
        return NULL;
    err = tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                        "table \"%s\" has no unique index on exactly the key columns \"%s\"",
                        t->name, keys);
    return tpc_error_hint(err,
                          "%s needs ON CONFLICT (%s): add a primary key or unique index on "
                          "those columns, or correct pg.key-columns",
                          c->conf->mode == TPC__PG_UPSERT ? "upsert" : "changelog", keys);
}

tpc_error_t *tpc__pg_load_columns(tpc__pg_conn_t *c, tpc__pg_table_t *t, const char *columns,
                                  const char *key_columns)
{
    const tpc__pg_conf_t *conf = c->conf;
    t->table_q = tpc__pg_quote_qualified(c->data, t->name);
    if (!t->table_q)
        return tpc_prop_invalid(tpc_props_find(tpc_pg_sink_properties(), "pg.table"), "pg.table",
                                conf->table, NULL);
    const char *params[] = {t->table_q};
    PGresult *res = NULL;
    tpc_error_t *err = tpc__pg_exec(
        c->control,
        "SELECT a.attname, coalesce(nullif(t.typbasetype, 0), a.atttypid), "
        "format_type(a.atttypid, a.atttypmod), has_table_privilege(a.attrelid, 'INSERT'), "
        "has_table_privilege(a.attrelid, 'UPDATE'), current_user, a.attnum, "
        "has_table_privilege(a.attrelid, 'DELETE') "
        "FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
        "WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped "
        "AND a.attgenerated = '' ORDER BY a.attnum",
        1, params, "look up the target table", &res);
    if (err) {
        bool missing = strstr(tpc_error_message(err), "SQLSTATE 42P01") ||
                       strstr(tpc_error_message(err), "SQLSTATE 3F000");
        return table_error(c, t, err, missing);
    }
    int total = PQntuples(res);
    bool changelog = conf->mode == TPC__PG_CHANGELOG;
    bool keyed = conf->mode == TPC__PG_UPSERT || changelog;
    if (total && (strcmp(PQgetvalue(res, 0, 3), "t") != 0 ||
                  (keyed && strcmp(PQgetvalue(res, 0, 4), "t") != 0) ||
                  (changelog && strcmp(PQgetvalue(res, 0, 7), "t") != 0))) {
        err = tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                            "permission denied for table \"%s\": role \"%s\" may not %s it",
                            t->name, PQgetvalue(res, 0, 5),
                            changelog ? "insert into, update and delete from"
                            : keyed   ? "insert into and update"
                                      : "insert into");
        err = tpc_error_hint(err, "GRANT %s ON %s TO \"%s\"",
                             changelog ? "SELECT, INSERT, UPDATE, DELETE"
                             : keyed   ? "SELECT, INSERT, UPDATE"
                                       : "INSERT",
                             t->table_q, PQgetvalue(res, 0, 5));
        PQclear(res);
        return err;
    }
    int *idx = calloc((size_t)total + 1, sizeof *idx), n = 0;
    int *keys = calloc((size_t)total + 1, sizeof *keys), nkeys = 0;
    if (!idx || !keys)
        err = tpc_error_nomem();
    else if (columns)
        err = pick_columns(t, res, "pg.columns", columns, idx, &n);
    else
        for (n = 0; n < total; n++)
            idx[n] = n;
    if (!err && n == 0)
        err =
            tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL, "table \"%s\" has no columns", t->name);
    if (!err)
        err = check_columns(c, t, res, idx, n);
    if (!err && key_columns && !keyed)
        err = tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                           "\"pg.key-columns\" is set but pg.mode is not upsert "
                                           "or changelog"),
                             "set pg.mode=upsert or changelog, or leave pg.key-columns out");
    if (!err && keyed && !key_columns)
        err =
            tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                         "pg.mode=%s needs \"pg.key-columns\" for table \"%s\"",
                                         changelog ? "changelog" : "upsert", t->name),
                           "list the columns of a unique index or primary key of \"%s\"%s", t->name,
                           changelog ? ": upserts and deletes find their row by them" : "");
    if (!err && keyed)
        err = pick_columns(t, res, "pg.key-columns", key_columns, keys, &nkeys);
    for (int k = 0; !err && k < nkeys; k++) {
        int at = -1;
        for (int i = 0; i < n; i++)
            if (idx[i] == keys[k])
                at = i;
        if (at < 0)
            err = tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                "key column \"%s\" is not one of the written columns (pg.columns)",
                                PQgetvalue(res, keys[k], 0));
        else
            t->cols[at].key = true;
    }
    t->nkeys = nkeys;
    free(idx);
    free(keys);
    PQclear(res);
    return !err && keyed ? check_unique_index(c, t, key_columns) : err;
}

tpc_error_t *tpc__pg_check_stage_schema(tpc__pg_conn_t *c, tpc__pg_table_t *t)
{
    const char *params[] = {t->table_q};
    PGresult *res = NULL;
    tpc_error_t *err = tpc__pg_exec(c->control,
                                    "SELECT n.nspname, has_schema_privilege(n.oid, 'CREATE'), "
                                    "current_user FROM pg_class r JOIN pg_namespace n "
                                    "ON n.oid = r.relnamespace WHERE r.oid = $1::regclass",
                                    1, params, "look up the table's schema", &res);
    if (err)
        return err;
    const char *schema = PQgetvalue(res, 0, 0);
    t->schema_q = PQntuples(res) ? PQescapeIdentifier(c->control, schema, strlen(schema)) : NULL;
    if (t->schema_q && strcmp(PQgetvalue(res, 0, 1), "t") != 0)
        err = tpc_error_hint(
            tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                          "permission denied for schema \"%s\": pg.mode=%s stages the rows of "
                          "table \"%s\" in a table it creates there for each transaction",
                          schema, c->conf->mode == TPC__PG_UPSERT ? "upsert" : "changelog",
                          t->name),
            "GRANT CREATE ON SCHEMA %s TO \"%s\", or use another mode", t->schema_q,
            PQgetvalue(res, 0, 2));
    else if (!t->schema_q)
        err = tpc__pg_result_error(c->control, NULL, "quote a schema name");
    PQclear(res);
    return err;
}

/* Make sure the sink's own @what @name (key @key) exists, creating it as "CREATE TABLE name
 * @columns" (then @after, a statement with one %s for the name, if given), and that the sink's
 * role may SELECT, INSERT and DELETE in it. *@quoted gets the quoted name. */
tpc_error_t *tpc__pg_ensure_table(tpc__pg_conn_t *c, const char *key, const char *what,
                                  const char *name, const char *columns, const char *after,
                                  char **quoted)
{
    char *q = *quoted = tpc__pg_quote_qualified(c->control, name);
    if (!q)
        return tpc_prop_invalid(tpc_props_find(tpc_pg_sink_properties(), key), key, name, NULL);
    const char *params[] = {q};
    PGresult *res = NULL;
    tpc_error_t *err = tpc__pg_exec(c->control, "SELECT to_regclass($1) IS NOT NULL", 1, params,
                                    "look up the sink's tables", &res);
    if (err)
        return err;
    bool exists = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    char ddl[1024], more[600] = "";
    snprintf(ddl, sizeof ddl, "CREATE TABLE IF NOT EXISTS %s %s", q, columns);
    if (after)
        snprintf(more, sizeof more, after, q);
    if (!exists) {
        /* Subtasks open at once; a lock keeps two CREATEs of the same table from colliding. */
        err = tpc__pg_exec(c->control, "BEGIN", 0, NULL, "create a table", NULL);
        if (!err)
            err = tpc__pg_exec(c->control, "SELECT pg_advisory_xact_lock(hashtext($1))", 1, params,
                               "create a table", NULL);
        if (!err)
            err = tpc__pg_exec(c->control, ddl, 0, NULL, "create a table", NULL);
        if (!err && after)
            err = tpc__pg_exec(c->control, more, 0, NULL, "create a table", NULL);
        if (!err)
            err = tpc__pg_exec(c->control, "COMMIT", 0, NULL, "create a table", NULL);
        if (err) {
            PQclear(PQexec(c->control, "ROLLBACK"));
            err = tpc_error_prefix(err, "%s \"%s\" does not exist and", what, name);
            return tpc_error_hint(err,
                                  "create it once as a role that may: %s;%s%s then GRANT SELECT, "
                                  "INSERT, DELETE ON %s TO the sink's role; or set %s to a table "
                                  "in a schema this role can create tables in",
                                  ddl, after ? " " : "", more, q, key);
        }
    }
    err = tpc__pg_exec(c->control,
                       "SELECT has_table_privilege($1, 'SELECT') AND has_table_privilege($1, "
                       "'INSERT') AND has_table_privilege($1, 'DELETE'), current_user",
                       1, params, "check privileges on the sink's tables", &res);
    if (err)
        return err;
    if (strcmp(PQgetvalue(res, 0, 0), "t") != 0)
        err = tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                           "permission denied for %s \"%s\"", what, name),
                             "GRANT SELECT, INSERT, DELETE ON %s TO \"%s\"", q,
                             PQgetvalue(res, 0, 1));
    PQclear(res);
    return err;
}

tpc_error_t *tpc__pg_ensure_marker_table(tpc__pg_conn_t *c)
{
    return tpc__pg_ensure_table(c, "pg.marker-table", "marker table", c->conf->marker_table,
                                "(gid text PRIMARY KEY, sink text NOT NULL, subtask integer NOT "
                                "NULL, checkpoint bigint NOT NULL, created timestamptz NOT NULL "
                                "DEFAULT now())",
                                NULL, &c->marker_q);
}

tpc_error_t *tpc__pg_control_ready(tpc__pg_conn_t *c)
{
    tpc__pg_stage_settle(c);
    if (PQstatus(c->control) == CONNECTION_OK)
        return NULL;
    PQreset(c->control);
    if (PQstatus(c->control) == CONNECTION_OK) {
        tpc_error_t *err = tpc__pg_session(c->conf, c->control);
        if (err)
            return err;
        tpc_txn_log(c->st, TPC_LOG_INFO, "reconnected to \"%s\"", c->conf->conninfo_safe);
        return NULL;
    }
    char msg[512];
    one_line(msg, sizeof msg, PQerrorMessage(c->control));
    return tpc_error_new(TPC_ERR_CONNECT, TPC_ERROR_RETRIABLE,
                         "could not reconnect to PostgreSQL server \"%s\": %s",
                         c->conf->conninfo_safe, msg);
}
