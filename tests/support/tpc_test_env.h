/*
 * What tests need from their environment: settings from environment variables, names that no
 * earlier or concurrent run uses (topics, tables, transactional ids), so that tests against shared,
 * long-running servers never see each other's data, and the monotonic clock.
 *
 * No Check calls here: benchmarks link this too.
 */
#ifndef TPC_TEST_ENV_H
#define TPC_TEST_ENV_H

#include <stddef.h>
#include <stdint.h>

/** @returns the value of environment variable @p name, or NULL if it is unset or empty. */
const char *tpc_test_env(const char *name);

/**
 * Like tpc_test_env(), but for a variable a test cannot run without: if it is unset, prints a
 * message that names the variable and how to get a server (`make test`, `make services-up`) to
 * stderr.
 * @returns the value, or NULL after printing the message.
 */
const char *tpc_test_env_require(const char *name);

/**
 * Write `<prefix><sep><pid><sep><seconds><sep><counter><sep><random hex>` into @p buf (truncated to
 * @p len - 1 bytes): unique across processes, runs and calls. Only digits, hex letters and @p sep
 * are added to @p prefix: with '-' the name suits a Kafka topic or transactional id, with '_' an
 * unquoted PostgreSQL identifier.
 * @returns @p buf
 */
char *tpc_test_unique_name(char *buf, size_t len, const char *prefix, char sep);

/** @returns the monotonic clock in seconds. */
double tpc_test_now_s(void);
/** @returns the monotonic clock in milliseconds. */
int64_t tpc_test_now_ms(void);

#endif
