/*
 * A minimal HTTP/1.0 GET against 127.0.0.1, for the tests that read the metrics endpoint and ask
 * Prometheus' HTTP API. No Check calls here.
 */
#ifndef TPC_TEST_HTTP_H
#define TPC_TEST_HTTP_H

#include <stddef.h>

/**
 * GET @p path (already URL-encoded) from 127.0.0.1:@p port; the response body into @p body
 * (NUL-terminated, truncated to @p cap - 1 bytes).
 * @returns the HTTP status code, or -1 when there was no valid response within 10 s.
 */
int tpc_test_http_get(int port, const char *path, char *body, size_t cap);

/** Percent-encode @p s for a query string into @p out. @returns @p out. */
char *tpc_test_url_encode(const char *s, char *out, size_t cap);

#endif
