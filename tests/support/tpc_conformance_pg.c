/*
 * The PostgreSQL connector of the conformance suite (tpc_conformance_pg.h). The namespace is one
 * unique name: the table and the gid prefix; with "_m" the marker table, with "_s" the write-ahead
 * table, with "_t" the second table of the two-tables layout. What is committed is read back by
 * SELECT on a connection of its own; what the server holds counts the rows of all three tables and
 * the prepared transactions of the prefix, and what is left open counts prepared transactions and
 * those written ahead.
 */
#include "tpc_conformance_pg.h"
#include "tpc_pg.h"
#include "tpc_test_env.h"
#include "tpc_test_pg.h"

#include <stdio.h>
#include <string.h>

#define NAME_MAX_ 96

static const char *commit_mode = "prepared";
static const char *layout = "copy";

static bool is_layout(const char *name)
{
    return strcmp(layout, name) == 0;
}

/* pg.mode=changelog: "changelog" (each record an upsert of its key) or "changelog-deletes" (and a
 * delete, below). */
static bool is_changelog(void)
{
    return is_layout("changelog") || is_layout("changelog-deletes");
}

/* The pg.mode of the layout. */
static const char *mode_of_layout(void)
{
    return is_changelog()        ? "changelog"
           : is_layout("upsert") ? "upsert"
           : is_layout("insert") ? "insert"
                                 : "copy";
}

/* Rows found by a key: a primary key on k. */
static bool keyed_layout(void)
{
    return is_changelog() || is_layout("upsert");
}

/* The record's key and value (or NULL) as the row's (k, v). */
static void key_value(const tpc_record_t *r, tpc_pg_row_t *row)
{
    tpc_pg_row_bytea(row, r->key, r->key_len);
    if (r->flags & TPC_RECORD_NULL_VALUE)
        tpc_pg_row_null(row);
    else
        tpc_pg_row_bytea(row, r->value, r->value_len);
}

/* two-tables: key and value into each table. */
static tpc_error_t *both_tables(void *opaque, const tpc_record_t *r, tpc_pg_row_t *row)
{
    (void)opaque;
    for (int table = 0; table < 2; table++) {
        tpc_pg_row_table(row, table);
        key_value(r, row);
    }
    return NULL;
}

/* The changelog-deletes layout deletes too. The table starts with a "twin" row for each key the
 * kill -9 check writes (0xEE, then the record's 8-byte key: sub << 40 | i), and each record upserts
 * its own row and deletes its twin, in the same transaction. Deletes are idempotent and no twin
 * comes back, so the order of subtasks does not matter: in every snapshot, a record's row and its
 * twin are never both there (a delete lost) nor both missing (a delete without its record). */
#define TWIN_BYTE    0xee
#define TWIN_RECORDS 1500 /* pg_connector.crash_records */

static tpc_error_t *changelog_rows(void *opaque, const tpc_record_t *r, tpc_pg_row_t *row)
{
    (void)opaque;
    tpc_pg_row_op(row, TPC_PG_OP_UPSERT);
    key_value(r, row);
    unsigned char twin[1 + 64];
    if (r->key_len > sizeof twin - 1)
        return NULL;
    twin[0] = TWIN_BYTE;
    memcpy(twin + 1, r->key, r->key_len);
    tpc_pg_row_table(row, 0);
    tpc_pg_row_op(row, TPC_PG_OP_DELETE);
    tpc_pg_row_bytea(row, twin, r->key_len + 1);
    tpc_pg_row_null(row);
    return NULL;
}

/* The kill -9 check's keys, as SQL rows (k bytea). */
#define KILL_KEYS                                                                                  \
    "SELECT int8send(s::int8 << 40 | i) AS k FROM generate_series(0, 1) s, generate_series(0, "    \
    "%d) i"

static bool ns_new(char *ns, size_t cap, char *why, size_t why_len)
{
    PGconn *pg = tpc_test_pg_connect();
    if (!pg) {
        snprintf(why, why_len, "no PostgreSQL server (TWOPC_TEST_PG_CONNINFO)");
        return false;
    }
    tpc_test_unique_name(ns, cap < NAME_MAX_ ? cap : NAME_MAX_, "conformance", '_');
    bool made = tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea%s, v bytea)", ns,
                                 keyed_layout() ? " PRIMARY KEY" : "");
    if (made && is_layout("two-tables"))
        made = tpc_test_pg_exec(pg, "CREATE TABLE %s_t (k bytea, v bytea)", ns);
    if (made && is_layout("changelog-deletes"))
        made = tpc_test_pg_exec(
            pg, "INSERT INTO %s SELECT '\\x%02x'::bytea || k, NULL FROM (" KILL_KEYS ") t", ns,
            TWIN_BYTE, TWIN_RECORDS - 1);
    PQfinish(pg);
    if (!made)
        snprintf(why, why_len, "could not create table %s", ns);
    return made;
}

static void ns_free(const char *ns)
{
    PGconn *pg = tpc_test_pg_connect();
    if (!pg)
        return;
    tpc_test_pg_rollback_prefix(pg, ns);
    tpc_test_pg_exec(pg, "DROP TABLE IF EXISTS %s", ns);
    tpc_test_pg_exec(pg, "DROP TABLE IF EXISTS %s_m", ns);
    tpc_test_pg_exec(pg, "DROP TABLE IF EXISTS %s_s", ns);
    tpc_test_pg_exec(pg, "DROP TABLE IF EXISTS %s_t", ns);
    PQfinish(pg);
}

static tpc_error_t *sink_new(const char *ns, tpc_txn_sink_t **out)
{
    char marker[NAME_MAX_ + 4], staging[NAME_MAX_ + 4], tables[2 * NAME_MAX_ + 8];
    snprintf(marker, sizeof marker, "%s_m", ns);
    snprintf(staging, sizeof staging, "%s_s", ns);
    snprintf(tables, sizeof tables, is_layout("two-tables") ? "%s,%s_t" : "%s", ns, ns);
    const char *kv[][2] = {{"pg.conninfo", tpc_test_env("TWOPC_TEST_PG_CONNINFO")},
                           {"pg.table", tables},
                           {"pg.gid-prefix", ns},
                           {"pg.marker-table", marker},
                           {"pg.write-ahead-table", staging},
                           {"pg.commit", commit_mode}};
    tpc_error_t *err = tpc_pg_sink_new(out);
    for (size_t i = 0; i < sizeof kv / sizeof *kv && !err; i++)
        err = tpc_txn_sink_set(*out, kv[i][0], kv[i][1]);
    if (!err)
        err = tpc_txn_sink_set(*out, "pg.mode", mode_of_layout());
    if (!err && keyed_layout())
        err = tpc_txn_sink_set(*out, "pg.key-columns", "k");
    if (!err && is_layout("changelog-deletes"))
        err = tpc_pg_sink_set_encoder(*out, changelog_rows, NULL);
    if (!err && is_layout("two-tables"))
        err = tpc_pg_sink_set_encoder(*out, both_tables, NULL);
    return err;
}

/* Another sink into the same table, with a gid prefix that starts with this one's and the same
 * marker and write-ahead tables, as two jobs writing one table would be configured. */
static tpc_error_t *other_sink_new(const char *ns, tpc_txn_sink_t **out)
{
    char prefix[NAME_MAX_ + 4];
    snprintf(prefix, sizeof prefix, "%s_0", ns);
    tpc_error_t *err = sink_new(ns, out);
    if (!err)
        err = tpc_txn_sink_set(*out, "pg.gid-prefix", prefix);
    return err;
}

static bool read_back(const char *ns, tpc_conformance_keys_t *out, char *why, size_t why_len)
{
    PGconn *pg = tpc_test_pg_connect();
    if (!pg) {
        snprintf(why, why_len, "no connection");
        return false;
    }
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT k FROM %s%s", ns,
             is_layout("changelog-deletes") ? " WHERE NOT (length(k) = 9 AND get_byte(k, 0) = 238)"
                                            : "");
    PGresult *res = PQexecParams(pg, sql, 0, NULL, NULL, NULL, NULL, 1);
    bool passed = PQresultStatus(res) == PGRES_TUPLES_OK;
    if (!passed)
        snprintf(why, why_len, "%s: %s", sql, PQerrorMessage(pg));
    for (int i = 0; passed && i < PQntuples(res); i++)
        tpc_conformance_keys_add(out, PQgetvalue(res, i, 0), (size_t)PQgetlength(res, i, 0));
    PQclear(res);
    /* Both tables of a checkpoint commit together: the second holds exactly the first's rows. */
    long long apart =
        passed && is_layout("two-tables")
            ? tpc_test_pg_long(pg,
                               "SELECT count(*) FROM ((SELECT k, v FROM %s EXCEPT ALL SELECT k, v "
                               "FROM %s_t) UNION ALL (SELECT k, v FROM %s_t EXCEPT ALL SELECT k, "
                               "v FROM %s)) d",
                               ns, ns, ns, ns)
            : 0;
    if (apart != 0) {
        snprintf(why, why_len, "the two tables of one sink differ by %lld rows", apart);
        passed = false;
    }
    /* The changelog's deletes: a record's row and its twin, one of them there. */
    long long both = 0, neither = 0;
    if (passed && is_layout("changelog-deletes")) {
        const char *pair =
            "SELECT count(*) FROM (" KILL_KEYS ") r WHERE %sEXISTS (SELECT 1 FROM %s "
            "WHERE k = r.k) AND %sEXISTS (SELECT 1 FROM %s WHERE k = '\\x%02x'::bytea "
            "|| r.k)";
        both = tpc_test_pg_long(pg, pair, TWIN_RECORDS - 1, "", ns, "", ns, TWIN_BYTE);
        neither = tpc_test_pg_long(pg, pair, TWIN_RECORDS - 1, "NOT ", ns, "NOT ", ns, TWIN_BYTE);
    }
    if (both != 0 || neither != 0) {
        snprintf(why, why_len,
                 "the changelog's deletes: %lld records have their row and the twin row they "
                 "delete, %lld neither",
                 both, neither);
        passed = false;
    }
    PQfinish(pg);
    return passed;
}

/* count(@what) of table @ns@suffix, 0 when it does not exist, -1 on error. */
static long long count_of(PGconn *pg, const char *what, const char *ns, const char *suffix,
                          const char *where)
{
    long long has =
        tpc_test_pg_long(pg, "SELECT count(*) FROM pg_class WHERE relname = '%s%s'", ns, suffix);
    if (has <= 0)
        return has;
    return tpc_test_pg_long(pg, "SELECT count(%s) FROM %s%s%s", what, ns, suffix, where);
}

/* Rows of the table, the marker and the write-ahead table, and prepared transactions of the prefix.
 */
static bool footprint(const char *ns, long long *out, char *why, size_t why_len)
{
    PGconn *pg = tpc_test_pg_connect();
    if (!pg) {
        snprintf(why, why_len, "no connection");
        return false;
    }
    long long rows = tpc_test_pg_long(pg, "SELECT count(*) FROM %s", ns);
    long long markers = count_of(pg, "*", ns, "_m", "");
    long long staged = count_of(pg, "*", ns, "_s", "");
    long long second = count_of(pg, "*", ns, "_t", "");
    long long prepared = tpc_test_pg_prepared(pg, ns);
    PQfinish(pg);
    if (rows < 0 || markers < 0 || staged < 0 || second < 0 || prepared < 0) {
        snprintf(why, why_len, "could not count the rows of %s", ns);
        return false;
    }
    *out = rows + markers + staged + second + prepared;
    return true;
}

/* Prepared transactions of the prefix, and staged transactions of this sink (not the other's). */
static bool leftovers(const char *ns, long long *out, char *why, size_t why_len)
{
    PGconn *pg = tpc_test_pg_connect();
    char where[NAME_MAX_ + 32];
    snprintf(where, sizeof where, " WHERE sink = '%s'", ns);
    long long prepared = pg ? tpc_test_pg_prepared(pg, ns) : -1;
    long long staged = pg ? count_of(pg, "DISTINCT gid", ns, "_s", where) : -1;
    PQfinish(pg);
    *out = prepared < 0 || staged < 0 ? -1 : prepared + staged;
    if (*out < 0)
        snprintf(why, why_len, "could not list the prepared or staged transactions");
    return *out >= 0;
}

static tpc_conformance_t pg_connector = {
    .name = "postgresql",
    .ns_new = ns_new,
    .ns_free = ns_free,
    .sink_new = sink_new,
    .read = read_back,
    .footprint = footprint,
    .leftovers = leftovers,
    .other_sink_new = other_sink_new,
    .other_visible = true,
    .crash_records = TWIN_RECORDS,
    .crash_interval_ms = 50,
    .crash_run_ms = 60000,
};

const char *const tpc_conformance_pg_layouts[] = {
    "copy", "insert", "upsert", "changelog", "changelog-deletes", "two-tables", NULL};

const char *tpc_conformance_pg_checks(const char *name)
{
    if (strcmp(name, "changelog-deletes") != 0)
        return NULL;
    return "checkpoint_then_notify,finish_then_final_checkpoint,empty_checkpoints,handle_bytes,"
           "close_keeps_pending,recovery_commits_pending,recovery_commit_idempotent,"
           "lingering_cleanup,lingering_cleanup_fresh_start,other_sink_untouched,"
           "kill_9_at_every_phase";
}

const tpc_conformance_t *tpc_conformance_pg(const char *commit)
{
    return tpc_conformance_pg_layout(commit, "copy");
}

const tpc_conformance_t *tpc_conformance_pg_layout(const char *commit, const char *rows)
{
    static char name[96];
    commit_mode = commit;
    layout = rows;
    snprintf(name, sizeof name, "postgresql%s%s%s",
             strcmp(commit, "prepared") != 0 ? " write-ahead" : "", is_layout("copy") ? "" : " ",
             is_layout("copy") ? "" : rows);
    pg_connector.name = name;
    return &pg_connector;
}
