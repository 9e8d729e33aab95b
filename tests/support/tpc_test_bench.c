/*
 * Running and timing a sink benchmark's job (see tpc_test_bench.h).
 */
#include "tpc_test_bench.h"

#include "tpc_test_env.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

void tpc_test_bench_die(const char *what, tpc_error_t *err)
{
    fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what,
            err ? tpc_error_message(err) : "failed");
    exit(1);
}

double tpc_test_bench_run_sink(const char *name, const char *ckpt, tpc_test_seq_conf_t *src,
                               tpc_txn_sink_t *sink, const char *sink_vertex)
{
    tpc_job_t *job = tpc_job_new(name);
    int s, k;
    tpc_error_t *err = tpc_job_set(job, "checkpoint.dir", ckpt);
    if (!err)
        err = tpc_job_set(job, "checkpoint.interval.ms", "1000");
    if (!err)
        err = tpc_job_add_vertex(job, "generator", 1, &tpc_test_seq_source_ops, src, &s);
    if (!err)
        err = tpc_txn_sink_add_to_job(sink, job, sink_vertex, 1, &k);
    if (!err)
        err = tpc_job_connect(job, s, k, TPC_EDGE_FORWARD);
    if (err)
        tpc_test_bench_die("job setup", err);
    double t0 = tpc_test_now_s();
    err = tpc_job_run(job, NULL);
    double secs = tpc_test_now_s() - t0;
    if (err)
        tpc_test_bench_die("job", err);
    tpc_txn_sink_stats_t st;
    tpc_txn_sink_get_stats(sink, &st);
    if (st.records != src->count_default || st.pending)
        tpc_test_bench_die("sink statistics do not add up", NULL);
    tpc_job_destroy(job);
    return secs;
}
