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

static const tpc_props_t pg_table;

static void pg_release(void *arg)
{
    tpc__pg_conf_t *conf = arg;
    free(conf->conninfo);
    free(conf->conninfo_safe);
    tpc_props_free(&pg_table, conf);
    free(conf);
}

/* The conninfo as it may appear in messages: every keyword but the passwords. */
static tpc_error_t *set_conninfo(void *arg, const tpc_prop_t *p, const char *key, const char *value)
{
    (void)p;
    (void)key;
    tpc__pg_conf_t *conf = arg;
    char *errmsg = NULL;
    PQconninfoOption *opts = PQconninfoParse(value, &errmsg);
    if (!opts) {
        /* libpq's message may quote the password ("invalid percent-encoded token: ..."). */
        char why[512];
        snprintf(why, sizeof why, "%s", errmsg ? errmsg : "out of memory");
        why[strcspn(why, "\n")] = '\0';
        tpc_pg_hide_secrets(value, why);
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
        return tpc_error_nomem();
    }
    safe[0] = '\0';
    for (PQconninfoOption *o = opts; o->keyword; o++) {
        if (!o->val || strstr(o->keyword, "password"))
            continue;
        len +=
            (size_t)snprintf(safe + len, cap - len, "%s%s=%s", len ? " " : "", o->keyword, o->val);
    }
    PQconninfoFree(opts);
    tpc_pg_hide_secrets(value, safe); /* a dbname may be a URI with a password in it */
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

static tpc_error_t *set_gid_prefix(void *arg, const tpc_prop_t *p, const char *key,
                                   const char *value)
{
    tpc__pg_conf_t *conf = arg;
    size_t len = strlen(value);
    bool ok = len > 0 && len <= TPC__PG_PREFIX_MAX;
    for (size_t i = 0; ok && i < len; i++)
        ok = prefix_char_ok(value[i]);
    if (!ok)
        return tpc_prop_invalid(p, key, value, NULL);
    memcpy(conf->gid_prefix, value, len + 1);
    return NULL;
}

static tpc_error_t *check_table_name(void *arg, const tpc_prop_t *p, const char *key,
                                     const char *value)
{
    (void)arg;
    return tpc__pg_name_ok(value) ? NULL : tpc_prop_invalid(p, key, value, NULL);
}

/* pg.table: one table, or several apart by commas, each "table" or "schema.table". */
static tpc_error_t *check_table_list(void *arg, const tpc_prop_t *p, const char *key,
                                     const char *value)
{
    (void)arg;
    int n = 0;
    for (const char *at = value;; n++) {
        const char *comma = strchr(at, ',');
        size_t len = comma ? (size_t)(comma - at) : strlen(at);
        while (len && *at == ' ')
            at++, len--;
        while (len && at[len - 1] == ' ')
            len--;
        char name[512];
        if (len == 0 || len >= sizeof name || memchr(at, ' ', len))
            return tpc_prop_invalid(p, key, value, NULL);
        memcpy(name, at, len);
        name[len] = '\0';
        if (!tpc__pg_name_ok(name))
            return tpc_prop_invalid(p, key, value, NULL);
        if (!comma)
            break;
        at = comma + 1;
    }
    if (n + 1 > TPC__PG_TABLES_MAX)
        return tpc_prop_invalid(p, key, value, "list at most %d tables", TPC__PG_TABLES_MAX);
    return NULL;
}

#define PG_FIELD(member) TPC_PROP_FIELD(tpc__pg_conf_t, member)

static const char *const modes[] = {"copy", "insert", "upsert", "changelog", NULL};
static const char *const commits[] = {"auto", "prepared", "write-ahead", NULL};
static const char *const tombstones[] = {"null", "delete", NULL};

static const tpc_prop_t pg_props[] = {
    {.name = "pg.conninfo",
     .type = TPC_PROP_CUSTOM,
     .set = set_conninfo,
     .secret = true,
     .accepts = "a libpq connection string such as \"host=127.0.0.1 dbname=app user=app\" or a "
                "postgresql:// URI",
     .doc = "Required. Where to connect, TLS settings included; passwords never appear in "
            "messages."},
    {.name = "pg.table",
     .type = TPC_PROP_STRING,
     .field = PG_FIELD(table),
     .set = check_table_list,
     .accepts = "table or schema.table, names as they are, unquoted; several apart by commas",
     .doc = "Required. The target table, or several: the encoder picks each row's table with "
            "tpc_pg_row_table(), and every table of a checkpoint commits in one transaction. "
            "Names are taken as they are (case-sensitive)."},
    {.name = "pg.columns",
     .type = TPC_PROP_STRING,
     .field = PG_FIELD(columns),
     .accepts =
         "comma-separated column names; with several tables one list per table, apart by ';'",
     .doc = "The target columns, in the order the encoder fills them (default: every "
            "column; with several tables an empty list means every column too)."},
    {.name = "pg.mode",
     .type = TPC_PROP_ENUM,
     .field = PG_FIELD(mode),
     .choices = modes,
     .def = "copy",
     .doc = "copy (binary COPY), insert (multi-row INSERT), upsert (the latest row of each key: "
            "binary COPY into a staging table, merged by INSERT ... ON CONFLICT at the "
            "checkpoint), or changelog (upserts and deletes by key, staged and merged alike)."},
    {.name = "pg.commit",
     .type = TPC_PROP_ENUM,
     .field = PG_FIELD(commit),
     .choices = commits,
     .def = "auto",
     .doc =
         "How exactly-once transactions commit. prepared: PREPARE TRANSACTION at the "
         "checkpoint, COMMIT PREPARED once it is complete (needs max_prepared_transactions > "
         "0); write-ahead: the checkpoint's rows are committed into pg.write-ahead-table, and once "
         "it is complete one transaction moves them into the table and writes the marker row; "
         "auto: prepared when the server allows prepared transactions, else write-ahead. "
         "at-least-once and none commit at each checkpoint and need neither."},
    {.name = "pg.key-columns",
     .type = TPC_PROP_STRING,
     .field = PG_FIELD(key_columns),
     .accepts =
         "comma-separated column names; with several tables one list per table, apart by ';'",
     .doc = "upsert, changelog: the columns of a unique index (checked at open), by which rows "
            "are found."},
    {.name = "pg.tombstone",
     .type = TPC_PROP_ENUM,
     .field = PG_FIELD(tombstone),
     .choices = tombstones,
     .def = "null",
     .doc = "What a record with a null value (a Kafka tombstone) is: null (a row like any "
            "other, its value NULL in the default mapping) or delete (changelog: a delete of its "
            "key; the encoder fills the key columns)."},
    {.name = "pg.gid-prefix",
     .type = TPC_PROP_CUSTOM,
     .set = set_gid_prefix,
     .accepts = "1 to 128 letters, digits, '_', '-' or '.'",
     .doc = "Start of every gid (default: job.sink); names this sink's prepared transactions and "
            "must be unique among sinks sharing a server."},
    {.name = "pg.batch-size",
     .type = TPC_PROP_INT,
     .field = PG_FIELD(batch_size),
     .min = 1,
     .max = 10000,
     .def = "500",
     .unit = "rows",
     .doc = "Rows per INSERT statement (insert)."},
    {.name = "pg.copy-buffer",
     .type = TPC_PROP_INT,
     .field = PG_FIELD(copy_buffer),
     .min = 4096,
     .max = 1 << 30,
     .def = "262144",
     .unit = "bytes",
     .doc = "Bytes of COPY data sent to the server at once; write-ahead: the size of a part "
            "(at most 256 MiB, whatever is set here)."},
    {.name = "pg.marker-table",
     .type = TPC_PROP_STRING,
     .field = PG_FIELD(marker_table),
     .set = check_table_name,
     .def = "twopc_markers",
     .accepts = "table or schema.table, names as they are, unquoted",
     .doc = "The marker table, created if missing."},
    {.name = "pg.write-ahead-table",
     .type = TPC_PROP_STRING,
     .field = PG_FIELD(write_ahead_table),
     .set = check_table_name,
     .def = "twopc_write_ahead",
     .accepts = "table or schema.table, names as they are, unquoted",
     .doc = "write-ahead: where a checkpoint's rows wait until it is complete, created if "
            "missing."},
    {.name = "pg.connect.deadline.ms",
     .type = TPC_PROP_INT,
     .field = PG_FIELD(connect_deadline_ms),
     .min = 0,
     .max = 86400000,
     .def = "30000",
     .unit = "ms",
     .doc = "How long opening keeps trying to connect (a server still starting up); failures "
            "that waiting cannot cure (authentication, unknown database or role) fail at once."},
    {.name = "pg.connect.backoff.ms",
     .type = TPC_PROP_INT,
     .field = PG_FIELD(connect_backoff_ms),
     .min = 1,
     .max = 60000,
     .def = "100",
     .unit = "ms",
     .doc = "First pause between connection attempts, doubling up to 2 s."},
    {.name = "pg.lock-timeout.ms",
     .type = TPC_PROP_INT,
     .field = PG_FIELD(lock_timeout_ms),
     .min = 0,
     .max = 86400000,
     .def = "60000",
     .unit = "ms",
     .doc = "Longest wait of a statement of the sink for a lock (the server's lock_timeout on "
            "both connections; 0: no limit). A wait that runs out fails the subtask with a "
            "retriable error, and the job restarts from its last completed checkpoint."},
};

static const tpc_props_t pg_table = {"postgres sink", "tpc_txn_sink_set()", pg_props,
                                     sizeof pg_props / sizeof *pg_props};

const tpc_props_t *tpc_pg_sink_properties(void)
{
    return &pg_table;
}

/* The sink's part of a scrape: the version of libpq it runs with, for twopc_build_info. */
static void pg_metrics(void *arg, const char *sink, tpc_metrics_writer_t *w)
{
    (void)arg, (void)sink;
    int v = PQlibVersion();
    char version[32];
    snprintf(version, sizeof version, "%d.%d", v / 10000, v % 10000);
    tpc_metrics_build_info(w, "libpq", version);
}

const tpc_txn_connector_ops_t tpc__pg_ops = {
    .version = TPC_TXN_CONNECTOR_OPS_VERSION,
    .name = "postgres",
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
    .props = &pg_table,
    .metrics = pg_metrics,
    .describe_handle = tpc__pg_describe_handle,
};

const tpc_txn_connector_ops_t *tpc_pg_sink_ops(void)
{
    return &tpc__pg_ops;
}

tpc_error_t *tpc_pg_sink_new(tpc_txn_sink_t **out)
{
    if (!out)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "postgres sink needs an out pointer");
    *out = NULL;
    tpc__pg_conf_t *conf = calloc(1, sizeof *conf);
    if (!conf)
        return tpc_error_nomem();
    tpc_error_t *err = tpc_props_init(&pg_table, conf);
    if (err) {
        pg_release(conf);
        return err;
    }
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
