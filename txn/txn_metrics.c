/*
 * A two-phase-commit sink's metrics, for the job's Prometheus endpoint (runtime/metrics.c): its
 * transactions by fate (pending, committed on notify or on recovery, aborted, lost to the
 * timeout), the age of the oldest pending transaction and its time left before
 * transaction.timeout.ms, commit retries, the commit latency as a histogram and its maximum, and
 * whatever the connector adds (ops version 3, e.g. librdkafka's statistics). Read from the sink's
 * shared atomics, so a scrape never waits for a subtask.
 */
#include "tpc_kit.h"
#include "txn_internal.h"

#include <stdio.h>

/* Bounds of the commit latency histogram, in seconds: a commit is a round trip or two when all
 * is well, and seconds to minutes while the external system is away and it is retried. */
static const double commit_bounds[TPC__TXN_COMMIT_NBOUNDS] = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};

static double get(const atomic_uint_fast64_t *c)
{
    return (double)atomic_load_explicit(c, memory_order_relaxed);
}

void tpc__txn_observe_commit(tpc__txn_counters_t *c, uint64_t us)
{
    double s = (double)us / 1e6;
    size_t b = 0;
    while (b < TPC__TXN_COMMIT_NBOUNDS && s > commit_bounds[b])
        b++;
    atomic_fetch_add_explicit(&c->commit_buckets[b], 1, memory_order_relaxed);
}

void tpc__txn_publish_oldest(tpc__txn_counters_t *c, int subtask, int64_t start_ms)
{
    if (subtask >= 0 && subtask < c->nsubtasks)
        atomic_store_explicit(&c->oldest_pending_ms[subtask], start_ms, memory_order_relaxed);
}

/* The oldest pending transaction over the subtasks: its age and, with a known timeout, the time
 * left before the external system may drop it (negative once past). */
static void oldest_pending(const tpc_txn_sink_t *sink, tpc_metrics_writer_t *w,
                           const char *const *labels)
{
    tpc__txn_counters_t *c = (tpc__txn_counters_t *)&sink->stats;
    int64_t oldest = 0;
    for (int i = 0; i < c->nsubtasks; i++) {
        int64_t ms = atomic_load_explicit(&c->oldest_pending_ms[i], memory_order_relaxed);
        if (ms && (!oldest || ms < oldest))
            oldest = ms;
    }
    double age = oldest ? (double)(tpc_wall_ms() - oldest) / 1e3 : 0;
    if (age < 0)
        age = 0; /* the wall clock went back */
    tpc_metrics_add(w, "twopc_sink_oldest_pending_transaction_age_seconds", "gauge",
                    "Age of the oldest transaction pre-committed and not yet committed (since "
                    "its begin), 0 for none.",
                    "", labels, age);
    if (!sink->conf.timeout_ms)
        return; /* the external system keeps transactions for ever, or nobody said how long */
    double timeout = (double)sink->conf.timeout_ms / 1e3;
    tpc_metrics_add(w, "twopc_sink_transaction_timeout_seconds", "gauge",
                    "The sink's transaction.timeout.ms: how long the external system keeps an "
                    "open transaction.",
                    "", labels, timeout);
    if (oldest)
        tpc_metrics_add(w, "twopc_sink_oldest_pending_transaction_timeout_remaining_seconds",
                        "gauge",
                        "Time left before the oldest pending transaction reaches "
                        "transaction.timeout.ms (negative past it); no sample while none is "
                        "pending.",
                        "", labels, timeout - age);
}

/* The commit latency histogram: cumulative buckets, the sum and the count of commit calls. */
static void commit_histogram(const tpc__txn_counters_t *c, tpc_metrics_writer_t *w,
                             const char *sink)
{
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= TPC__TXN_COMMIT_NBOUNDS; i++) {
        char le[32];
        if (i < TPC__TXN_COMMIT_NBOUNDS)
            snprintf(le, sizeof le, "%g", commit_bounds[i]);
        else
            snprintf(le, sizeof le, "+Inf");
        cumulative += (uint64_t)get(&c->commit_buckets[i]);
        const char *labels[] = {"sink", sink, "le", le, NULL};
        tpc_metrics_add(w, "twopc_sink_commit_seconds", "histogram",
                        "Time a commit call took, retries included (on notify and on recovery).",
                        "_bucket", labels, (double)cumulative);
    }
    const char *labels[] = {"sink", sink, NULL};
    tpc_metrics_add(w, "twopc_sink_commit_seconds", "histogram", NULL, "_sum", labels,
                    get(&c->commit_latency_us) / 1e6);
    tpc_metrics_add(w, "twopc_sink_commit_seconds", "histogram", NULL, "_count", labels,
                    (double)cumulative);
}

void tpc__txn_metrics(void *arg, tpc_metrics_writer_t *w)
{
    const tpc_txn_sink_t *sink = arg;
    const tpc__txn_counters_t *c = &sink->stats;
    const char *labels[] = {"sink", sink->name, NULL};
    tpc_metrics_add(w, "twopc_sink_pending_transactions", "gauge",
                    "Pre-committed transactions waiting for their checkpoint to complete.", "",
                    labels, get(&c->pending));
    tpc_metrics_add(w, "twopc_sink_transactions_begun_total", "counter", "Transactions begun.", "",
                    labels, get(&c->begun));
    tpc_metrics_add(w, "twopc_sink_transactions_committed_total", "counter",
                    "Transactions committed when their checkpoint completed.", "", labels,
                    get(&c->commits));
    tpc_metrics_add(w, "twopc_sink_transactions_recovered_total", "counter",
                    "Transactions of a restored checkpoint committed on recovery.", "", labels,
                    get(&c->recovered_commits));
    tpc_metrics_add(w, "twopc_sink_transactions_aborted_total", "counter",
                    "Transactions aborted (closed, or restored as current).", "", labels,
                    get(&c->aborts));
    tpc_metrics_add(w, "twopc_sink_transactions_empty_total", "counter",
                    "Empty transactions released without a call to the external system.", "",
                    labels, get(&c->empty_skipped));
    tpc_metrics_add(w, "twopc_sink_transactions_expired_total", "counter",
                    "Transactions lost to the transaction timeout (recovery.expired=log).", "",
                    labels, get(&c->expired_lost));
    tpc_metrics_add(w, "twopc_sink_commit_retries_total", "counter", "Retried commit calls.", "",
                    labels, get(&c->commit_retries));
    tpc_metrics_add(w, "twopc_sink_records_total", "counter", "Records written into transactions.",
                    "", labels, get(&c->records));
    commit_histogram(c, w, sink->name);
    oldest_pending(sink, w, labels);
    tpc_metrics_add(w, "twopc_sink_commit_seconds_max", "gauge",
                    "Longest single commit so far, retries included.", "", labels,
                    get(&c->commit_latency_max_us) / 1e6);
    if (sink->ops->version >= 3 && sink->ops->metrics)
        sink->ops->metrics(sink->arg, sink->name, w);
}
