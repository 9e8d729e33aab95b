/*
 * A two-phase-commit sink's metrics, for the job's Prometheus endpoint (runtime/metrics.c): its
 * transactions by fate (pending, committed on notify or on recovery, aborted, lost to the
 * timeout), commit retries, the commit latency as a summary (sum and count) and its maximum, and
 * whatever the connector adds (ops version 3, e.g. librdkafka's statistics). Read from the sink's
 * shared atomic counters, so a scrape never waits for a subtask.
 */
#include "txn_internal.h"

static double get(const atomic_uint_fast64_t *c)
{
    return (double)atomic_load_explicit(c, memory_order_relaxed);
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
    tpc_metrics_add(w, "twopc_sink_commit_seconds", "summary",
                    "Time spent committing a transaction, retries included.", "_sum", labels,
                    get(&c->commit_latency_us) / 1e6);
    tpc_metrics_add(w, "twopc_sink_commit_seconds", "summary", NULL, "_count", labels,
                    get(&c->commits) + get(&c->recovered_commits));
    tpc_metrics_add(w, "twopc_sink_commit_seconds_max", "gauge",
                    "Longest single commit so far, retries included.", "", labels,
                    get(&c->commit_latency_max_us) / 1e6);
    if (sink->ops->version >= 3 && sink->ops->metrics)
        sink->ops->metrics(sink->arg, sink->name, w);
}
