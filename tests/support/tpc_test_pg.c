/*
 * The PostgreSQL test helpers of tpc_test_pg.h.
 */
#include "tpc_test_pg.h"
#include "tpc_test_env.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

PGconn *tpc_test_pg_connect(void)
{
    const char *conninfo = tpc_test_env_require("TWOPC_TEST_PG_CONNINFO");
    if (!conninfo)
        return NULL;
    PGconn *pg = PQconnectdb(conninfo);
    if (PQstatus(pg) != CONNECTION_OK) {
        fprintf(stderr, "could not connect to \"%s\": %s", conninfo, PQerrorMessage(pg));
        PQfinish(pg);
        return NULL;
    }
    PQclear(PQexec(pg, "SET client_min_messages = warning"));
    return pg;
}

static PGresult *vrun(PGconn *pg, const char *fmt, va_list ap)
{
    char sql[4096];
    vsnprintf(sql, sizeof sql, fmt, ap);
    PGresult *res = PQexec(pg, sql);
    ExecStatusType s = PQresultStatus(res);
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
        fprintf(stderr, "%s: %s", sql, PQerrorMessage(pg));
        PQclear(res);
        return NULL;
    }
    return res;
}

bool tpc_test_pg_exec(PGconn *pg, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    PGresult *res = vrun(pg, fmt, ap);
    va_end(ap);
    PQclear(res);
    return res != NULL;
}

long long tpc_test_pg_long(PGconn *pg, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    PGresult *res = vrun(pg, fmt, ap);
    va_end(ap);
    long long v = -1;
    if (res && PQntuples(res) == 1 && !PQgetisnull(res, 0, 0))
        v = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return v;
}

static PGresult *prefixed(PGconn *pg, const char *prefix)
{
    char pattern[256];
    snprintf(pattern, sizeof pattern, "%s:", prefix);
    const char *params[] = {pattern};
    PGresult *res = PQexecParams(pg,
                                 "SELECT gid FROM pg_prepared_xacts "
                                 "WHERE left(gid, length($1)) = $1",
                                 1, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        fprintf(stderr, "listing prepared transactions: %s", PQerrorMessage(pg));
        PQclear(res);
        return NULL;
    }
    return res;
}

long long tpc_test_pg_prepared(PGconn *pg, const char *prefix)
{
    PGresult *res = prefixed(pg, prefix);
    long long n = res ? PQntuples(res) : -1;
    PQclear(res);
    return n;
}

void tpc_test_pg_rollback_prefix(PGconn *pg, const char *prefix)
{
    PGresult *res = prefixed(pg, prefix);
    for (int i = 0; res && i < PQntuples(res); i++)
        tpc_test_pg_exec(pg, "ROLLBACK PREPARED '%s'", PQgetvalue(res, i, 0));
    PQclear(res);
}
