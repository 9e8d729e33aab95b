/*
 * The PostgreSQL sink passes the connector conformance suite (tests/support/tpc_conformance.h)
 * against the real server: every order of checkpoint events, crashes, restores at another
 * parallelism and kill -9 in every phase, with what is committed read back by SELECT on a
 * connection of its own. Each check has its own table, gid prefix and marker table; the other
 * sink of one check shares the table and the marker table.
 */
#include "tpc_conformance_check.h"
#include "tpc_pg.h"
#include "tpc_test_pg.h"

#define NAME_MAX_ 96

/* The namespace is one unique name: the table, the gid prefix, and with "_m" the marker table. */
static bool ns_new(char *ns, size_t cap, char *why, size_t why_len)
{
    PGconn *pg = tpc_test_pg_connect();
    if (!pg) {
        snprintf(why, why_len, "no PostgreSQL server (TWOPC_TEST_PG_CONNINFO)");
        return false;
    }
    tpc_test_unique_name(ns, cap < NAME_MAX_ ? cap : NAME_MAX_, "conformance", '_');
    bool made = tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea, v bytea)", ns);
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
    PQfinish(pg);
}

static tpc_error_t *sink_new(const char *ns, tpc_txn_sink_t **out)
{
    char marker[NAME_MAX_ + 4];
    snprintf(marker, sizeof marker, "%s_m", ns);
    const char *kv[][2] = {{"pg.conninfo", tpc_test_env("TWOPC_TEST_PG_CONNINFO")},
                           {"pg.table", ns},
                           {"pg.gid-prefix", ns},
                           {"pg.marker-table", marker}};
    tpc_error_t *err = tpc_pg_sink_new(out);
    for (size_t i = 0; i < sizeof kv / sizeof *kv && !err; i++)
        err = tpc_txn_sink_set(*out, kv[i][0], kv[i][1]);
    return err;
}

/* Another sink into the same table, with a gid prefix that starts with this one's and the same
 * marker table, as two jobs writing one table would be configured. */
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
    snprintf(sql, sizeof sql, "SELECT k FROM %s", ns);
    PGresult *res = PQexecParams(pg, sql, 0, NULL, NULL, NULL, NULL, 1);
    bool passed = PQresultStatus(res) == PGRES_TUPLES_OK;
    if (!passed)
        snprintf(why, why_len, "%s: %s", sql, PQerrorMessage(pg));
    for (int i = 0; passed && i < PQntuples(res); i++)
        tpc_conformance_keys_add(out, PQgetvalue(res, i, 0), (size_t)PQgetlength(res, i, 0));
    PQclear(res);
    PQfinish(pg);
    return passed;
}

/* Rows of the table and of the marker table, and prepared transactions of the prefix. */
static bool footprint(const char *ns, long long *out, char *why, size_t why_len)
{
    PGconn *pg = tpc_test_pg_connect();
    if (!pg) {
        snprintf(why, why_len, "no connection");
        return false;
    }
    long long rows = tpc_test_pg_long(pg, "SELECT count(*) FROM %s", ns);
    long long has_marker =
        tpc_test_pg_long(pg, "SELECT count(*) FROM pg_class WHERE relname = '%s_m'", ns);
    long long markers = has_marker > 0 ? tpc_test_pg_long(pg, "SELECT count(*) FROM %s_m", ns) : 0;
    long long prepared = tpc_test_pg_prepared(pg, ns);
    PQfinish(pg);
    if (rows < 0 || has_marker < 0 || markers < 0 || prepared < 0) {
        snprintf(why, why_len, "could not count the rows of %s", ns);
        return false;
    }
    *out = rows + markers + prepared;
    return true;
}

static bool leftovers(const char *ns, long long *out, char *why, size_t why_len)
{
    PGconn *pg = tpc_test_pg_connect();
    *out = pg ? tpc_test_pg_prepared(pg, ns) : -1;
    PQfinish(pg);
    if (*out < 0)
        snprintf(why, why_len, "could not list the prepared transactions");
    return *out >= 0;
}

static const tpc_conformance_t pg_connector = {
    .name = "postgresql",
    .ns_new = ns_new,
    .ns_free = ns_free,
    .sink_new = sink_new,
    .read = read_back,
    .footprint = footprint,
    .leftovers = leftovers,
    .other_sink_new = other_sink_new,
    .other_visible = true,
    .crash_records = 1500,
    .crash_interval_ms = 50,
    .crash_run_ms = 60000,
};

int main(int argc, char **argv)
{
    return tpc_conformance_main(&pg_connector, argc, argv);
}
