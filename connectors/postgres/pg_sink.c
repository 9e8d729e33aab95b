/*
 * The PostgreSQL sink as a user makes it: the pg.* keys with their checks, the encoder, and the
 * connector ops table that ties the pieces of connectors/postgres to the transaction framework.
 * Nothing here talks to a server; mistakes a server must judge (a missing table, a column of the
 * wrong type, prepared transactions turned off) are found when the subtasks open.
 */
#include "pg_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void pg_release(void *arg)
{
    tpc__pg_conf_t *conf = arg;
    free(conf->conninfo);
    free(conf->conninfo_safe);
    free(conf->table);
    free(conf->columns);
    free(conf->key_columns);
    free(conf->marker_table);
    free(conf);
}

static tpc_error_t *bad_value(const char *key, const char *value, const char *hint)
{
    tpc_error_t *err = tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                     "invalid value \"%s\" for \"%s\"", value, key);
    return tpc_error_hint(err, "%s", hint);
}

static tpc_error_t *set_string(char **dst, const char *key, const char *value)
{
    if (!*value)
        return bad_value(key, value, "give a non-empty value");
    char *copy = strdup(value);
    if (!copy)
        return tpc_error_new(TPC_ERR_NOMEM, TPC_ERROR_FATAL, "out of memory");
    free(*dst);
    *dst = copy;
    return NULL;
}

static tpc_error_t *set_number(uint64_t *dst, uint64_t min, uint64_t max, const char *key,
                               const char *value)
{
    int64_t v;
    if (!tpc_parse_int(value, (int64_t)min, (int64_t)max, &v)) {
        tpc_error_t *err = tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                         "invalid value \"%s\" for \"%s\"", value, key);
        return tpc_error_hint(err, "give a whole number from %llu to %llu", (unsigned long long)min,
                              (unsigned long long)max);
    }
    *dst = v;
    return NULL;
}

/* The conninfo as it may appear in messages: every keyword but the passwords. */
static tpc_error_t *set_conninfo(tpc__pg_conf_t *conf, const char *value)
{
    char *errmsg = NULL;
    PQconninfoOption *opts = PQconninfoParse(value, &errmsg);
    if (!opts) {
        /* libpq's message may quote the password ("invalid percent-encoded token: ..."). */
        char why[512];
        snprintf(why, sizeof why, "%s", errmsg ? errmsg : "out of memory");
        why[strcspn(why, "\n")] = '\0';
        tpc__pg_hide_secrets(value, why);
        tpc_error_t *err = tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                         "invalid value for \"pg.conninfo\": %s", why);
        PQfreemem(errmsg);
        return tpc_error_hint(err, "give a libpq connection string such as \"host=127.0.0.1 "
                                   "dbname=app user=app\" or a postgresql:// URI");
    }
    size_t cap = 1, len = 0;
    for (PQconninfoOption *o = opts; o->keyword; o++)
        if (o->val)
            cap += strlen(o->keyword) + strlen(o->val) + 4;
    char *safe = malloc(cap);
    char *copy = strdup(value);
    if (!safe || !copy) {
        free(safe);
        free(copy);
        PQconninfoFree(opts);
        return tpc_error_new(TPC_ERR_NOMEM, TPC_ERROR_FATAL, "out of memory");
    }
    safe[0] = '\0';
    for (PQconninfoOption *o = opts; o->keyword; o++) {
        if (!o->val || strstr(o->keyword, "password"))
            continue;
        len +=
            (size_t)snprintf(safe + len, cap - len, "%s%s=%s", len ? " " : "", o->keyword, o->val);
    }
    PQconninfoFree(opts);
    tpc__pg_hide_secrets(value, safe); /* a dbname may be a URI with a password in it */
    free(conf->conninfo);
    free(conf->conninfo_safe);
    conf->conninfo = copy;
    conf->conninfo_safe = safe;
    return NULL;
}

static bool prefix_char_ok(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '-' || ch == '.';
}

static tpc_error_t *pg_configure(void *arg, const char *key, const char *value)
{
    tpc__pg_conf_t *conf = arg;
    uint64_t v;
    tpc_error_t *err;
    if (strcmp(key, "pg.conninfo") == 0)
        return set_conninfo(conf, value);
    if (strcmp(key, "pg.table") == 0)
        return set_string(&conf->table, key, value);
    if (strcmp(key, "pg.columns") == 0)
        return set_string(&conf->columns, key, value);
    if (strcmp(key, "pg.key-columns") == 0)
        return set_string(&conf->key_columns, key, value);
    if (strcmp(key, "pg.marker-table") == 0)
        return set_string(&conf->marker_table, key, value);
    if (strcmp(key, "pg.mode") == 0) {
        static const char *const modes[] = {"copy", "insert", "upsert"};
        for (int i = 0; i < 3; i++)
            if (strcmp(value, modes[i]) == 0) {
                conf->mode = (tpc__pg_mode_t)i;
                return NULL;
            }
        return bad_value(key, value, "use copy, insert or upsert");
    }
    if (strcmp(key, "pg.gid-prefix") == 0) {
        size_t len = strlen(value);
        bool ok = len > 0 && len <= TPC__PG_PREFIX_MAX;
        for (size_t i = 0; ok && i < len; i++)
            ok = prefix_char_ok(value[i]);
        if (!ok)
            return bad_value(key, value,
                             "use 1 to 128 letters, digits, '_', '-' or '.'; the prefix names "
                             "this sink's prepared transactions and must be unique per server");
        memcpy(conf->gid_prefix, value, len + 1);
        return NULL;
    }
    if (strcmp(key, "pg.batch-size") == 0) {
        if ((err = set_number(&v, 1, 10000, key, value)) == NULL)
            conf->batch_size = (size_t)v;
        return err;
    }
    if (strcmp(key, "pg.copy-buffer") == 0) {
        if ((err = set_number(&v, 4096, 1u << 30, key, value)) == NULL)
            conf->copy_buffer = (size_t)v;
        return err;
    }
    if (strcmp(key, "pg.connect.deadline.ms") == 0)
        return set_number(&conf->connect_deadline_ms, 0, 86400000, key, value);
    if (strcmp(key, "pg.connect.backoff.ms") == 0)
        return set_number(&conf->connect_backoff_ms, 1, 60000, key, value);
    return tpc_error_new(TPC_ERR_NOT_FOUND, 0, "unknown key \"%s\"", key);
}

const tpc_txn_connector_ops_t tpc__pg_ops = {
    .version = TPC_TXN_CONNECTOR_OPS_VERSION,
    .name = "postgres",
    .configure = pg_configure,
    .release = pg_release,
    .open = tpc__pg_open,
    .close = tpc__pg_close,
    .begin = tpc__pg_begin,
    .write = tpc__pg_write,
    .flush = tpc__pg_flush,
    .pre_commit = tpc__pg_pre_commit,
    .commit = tpc__pg_commit,
    .abort = tpc__pg_abort,
    .recover_and_commit = tpc__pg_commit,
    .recover_and_abort = tpc__pg_recover_and_abort,
    .abort_lingering = tpc__pg_abort_lingering,
    .serialize = tpc__pg_serialize,
    .deserialize = tpc__pg_deserialize,
    .is_empty = tpc__pg_is_empty,
    .free_txn = tpc__pg_free_txn,
    .describe = tpc__pg_describe,
};

tpc_error_t *tpc_pg_sink_new(tpc_txn_sink_t **out)
{
    if (!out)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "postgres sink needs an out pointer");
    *out = NULL;
    tpc__pg_conf_t *conf = calloc(1, sizeof *conf);
    char *marker = strdup("twopc_markers");
    if (!conf || !marker) {
        free(conf);
        free(marker);
        return tpc_error_new(TPC_ERR_NOMEM, TPC_ERROR_FATAL, "out of memory");
    }
    conf->marker_table = marker;
    conf->mode = TPC__PG_COPY;
    conf->batch_size = 500;
    conf->copy_buffer = 256u << 10;
    conf->connect_deadline_ms = 30000;
    conf->connect_backoff_ms = 100;
    return tpc_txn_sink_new(&tpc__pg_ops, conf, out);
}

tpc_error_t *tpc_pg_sink_set_encoder(tpc_txn_sink_t *sink, tpc_pg_encoder_t encoder, void *opaque)
{
    if (!sink || tpc_txn_sink_connector_ops(sink) != &tpc__pg_ops)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "a row encoder can only be set on a postgres sink");
    tpc__pg_conf_t *conf = tpc_txn_sink_connector_arg(sink);
    conf->encode = encoder;
    conf->encode_opaque = opaque;
    return NULL;
}
