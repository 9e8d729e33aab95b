/*
 * docs/metrics.md against the code: the page's tables name every metric family with its type and
 * unit; a scrape's families must each be on the page with the type its TYPE line gives, and every
 * family the page names must be one the library's sources write.
 */
#ifndef TPC_TEST_METRICS_DOC_H
#define TPC_TEST_METRICS_DOC_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char name[96];
    char type[16]; /* counter, gauge, histogram */
    char unit[32];
} tpc_test_metric_doc_t;

/* The families docs/metrics.md lists (read from the repository root): their number, at most
 * @cap of them in @out; -1 when the page cannot be read. */
int tpc_test_metrics_doc_read(tpc_test_metric_doc_t *out, int cap);

/* Every family of the exposition text @text is on the page with the same type: true, or false
 * with the first that is not in @why. */
bool tpc_test_metrics_doc_check(const char *text, char *why, size_t cap);

#endif
