/*
 * The local S3 server of the checkpoint storage tests: moto on 127.0.0.1, started through
 * tests/services/s3.sh with one empty bucket, or the one that TWOPC_TEST_S3_ENDPOINT names (which
 * the tests then neither start nor stop). Without a server a test binary says so loudly and runs
 * its S3 cases as NOT RUN; it never passes them off as run.
 *
 * Credentials are the caller's: moto takes any, and a test sets AWS_ACCESS_KEY_ID and
 * AWS_SECRET_ACCESS_KEY itself (or leaves them unset to check what happens without them).
 *
 * No Check calls here: benchmarks link this too. Functions report failures, the caller asserts.
 */
#ifndef TPC_TEST_S3_H
#define TPC_TEST_S3_H

#include <stdbool.h>
#include <sys/types.h>

/** The variable that names a running S3 server to use instead of starting one. */
#define TPC_TEST_S3_ENDPOINT_ENV "TWOPC_TEST_S3_ENDPOINT"

typedef struct {
    char *endpoint;      /**< "http://127.0.0.1:PORT", NULL: no server */
    const char *missing; /**< why there is no server, for the NOT RUN lines */
    char *dir;           /**< the folder of a server started here (its pid file and log) */
    pid_t pid;           /**< the process of a server started here, 0: not started here */
} tpc_test_s3_t;

/**
 * Use the server TWOPC_TEST_S3_ENDPOINT names, or else start one with bucket @p bucket as
 * tpc_test_s3_start_own() does.
 */
void tpc_test_s3_start(tpc_test_s3_t *s3, const char *who, const char *bucket);

/**
 * Start a server of our own with bucket @p bucket, whatever TWOPC_TEST_S3_ENDPOINT says: for a
 * test that needs the server's process (to freeze it), which it finds in @p s3->pid. If it cannot
 * be started, prints "<who>: WITHOUT S3: <why>" to stderr, and @p s3->endpoint stays NULL with
 * @p s3->missing saying why.
 */
void tpc_test_s3_start_own(tpc_test_s3_t *s3, const char *who, const char *bucket);

/**
 * Stop a server started here (after a SIGCONT, in case a failed case left it frozen) and delete its
 * folder; one that TWOPC_TEST_S3_ENDPOINT named is left running. Prints a line naming @p who if the
 * server could not be stopped. Frees what @p s3 holds.
 */
void tpc_test_s3_stop(tpc_test_s3_t *s3, const char *who);

#endif
