/*
 * The PostgreSQL test helpers of tpc_test_pg.h, and a throwaway server of a test's own
 * (tests/services/pg.sh).
 */
#include "tpc_test_pg.h"
#include "tpc_test_env.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

static int shell(const char *fmt, const char *arg)
{
    char cmd[4400];
    snprintf(cmd, sizeof cmd, fmt, arg);
    return system(cmd);
}

/* The conninfo pg.sh wrote into DIR/env: "export NAME='conninfo'". */
static bool read_conninfo(const char *dir, char *out, size_t cap)
{
    char env[4200], line[600];
    snprintf(env, sizeof env, "%s/env", dir);
    FILE *f = fopen(env, "r");
    bool ok = false;
    if (f && fgets(line, sizeof line, f)) {
        char *q = strchr(line, '\''), *e = q ? strrchr(q + 1, '\'') : NULL;
        if (q && e && e > q + 1) {
            snprintf(out, cap, "%.*s", (int)(e - q - 1), q + 1);
            ok = true;
        }
    }
    if (f)
        fclose(f);
    return ok;
}

bool tpc_test_pg_start_noprep(const char *dir, char *conninfo, size_t cap)
{
    if (access("tests/services/pg.sh", X_OK) != 0) {
        fprintf(stderr, "tests/services/pg.sh not found from here\n");
        return false;
    }
    bool ok = shell("tests/services/pg.sh start %s >/dev/null 2>&1", dir) == 0 &&
              read_conninfo(dir, conninfo, cap);
    PGconn *pg = ok ? PQconnectdb(conninfo) : NULL;
    ok = pg && PQstatus(pg) == CONNECTION_OK &&
         tpc_test_pg_exec(pg, "ALTER SYSTEM SET max_prepared_transactions = 0");
    PQfinish(pg);
    ok = ok && shell("tests/services/pg.sh stop %s >/dev/null 2>&1", dir) == 0 &&
         shell("tests/services/pg.sh start %s >/dev/null 2>&1", dir) == 0 &&
         read_conninfo(dir, conninfo, cap);
    pg = ok ? PQconnectdb(conninfo) : NULL;
    ok = pg && PQstatus(pg) == CONNECTION_OK &&
         tpc_test_pg_long(pg, "SELECT current_setting('max_prepared_transactions')::int") == 0;
    PQfinish(pg);
    if (!ok)
        fprintf(stderr,
                "could not start a PostgreSQL server with max_prepared_transactions = 0 "
                "in %s\n",
                dir);
    return ok;
}

void tpc_test_pg_destroy(const char *dir)
{
    shell("tests/services/pg.sh destroy %s >/dev/null 2>&1", dir);
}
