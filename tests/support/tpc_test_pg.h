/*
 * What the PostgreSQL sink's tests and benchmark need from the test server: a connection from
 * TWOPC_TEST_PG_CONNINFO, statements built from names the tests made themselves (unique names from
 * tpc_test_unique_name(), so formatting them into SQL is safe here), single numbers read back, and
 * the prepared transactions of a gid prefix counted or rolled back.
 *
 * No Check calls here: benchmarks link this too. Failures print the statement and the server's
 * message to stderr and return false / -1.
 */
#ifndef TPC_TEST_PG_H
#define TPC_TEST_PG_H

#include <libpq-fe.h>
#include <stdbool.h>

/** @returns a connection to the test server, or NULL after printing why. */
PGconn *tpc_test_pg_connect(void);

/** Run one statement, printf-style. @returns true if it succeeded. */
bool tpc_test_pg_exec(PGconn *pg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** Run a query returning one number, printf-style. @returns it, or -1 on error / no row. */
long long tpc_test_pg_long(PGconn *pg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** @returns how many prepared transactions have a gid starting with "<prefix>:", -1 on error. */
long long tpc_test_pg_prepared(PGconn *pg, const char *prefix);

/** Roll back every prepared transaction whose gid starts with "<prefix>:". */
void tpc_test_pg_rollback_prefix(PGconn *pg, const char *prefix);

/** Start a server of the test's own in @dir with tests/services/pg.sh (run from the top of the
 * tree), with max_prepared_transactions = 0, and write its conninfo into @conninfo (@cap bytes).
 * @returns false after saying why on stderr. Under root, @dir's parent must be reachable by others
 * (pg.sh runs the server as another user). */
bool tpc_test_pg_start_noprep(const char *dir, char *conninfo, size_t cap);

/** Stop the server of @dir and delete its files. */
void tpc_test_pg_destroy(const char *dir);

#endif
