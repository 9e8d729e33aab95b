/*
 * What the benchmarks share: running sequence source -> exactly-once sink with a checkpoint every
 * second and timing it, running and timing a job of their own, creating a Kafka topic, and ending
 * the program with a message when anything fails (a benchmark has no test framework to report
 * to).
 */
#ifndef TPC_TEST_BENCH_H
#define TPC_TEST_BENCH_H

#include "tpc_test_ops.h"
#include "tpc_txn.h"

/** Print "<program>: @p what: <message of @p err, or "failed">" to stderr and exit(1). */
_Noreturn void tpc_test_bench_die(const char *what, tpc_error_t *err);

/**
 * Run job @p name: the sequence source @p src (one subtask, named "generator") forwarding to
 * @p sink (one subtask, named @p sink_vertex), checkpointing into @p ckpt every second, until it
 * ends; then check that the sink counted every record and holds nothing pending. Dies on any
 * failure. The sink stays the caller's.
 * @returns the seconds tpc_job_run() took.
 */
double tpc_test_bench_run_sink(const char *name, const char *ckpt, tpc_test_seq_conf_t *src,
                               tpc_txn_sink_t *sink, const char *sink_vertex);

/**
 * Run @p job to its end and time it; dies with @p what when @p setup_err (the error of the job's
 * setup, NULL when it went well) is set or the job fails. The job stays the caller's.
 * @returns the seconds tpc_job_run() took.
 */
double tpc_test_bench_run_job(tpc_job_t *job, tpc_error_t *setup_err, const char *what);

/** Create Kafka topic @p topic with @p partitions partitions (replication 1) on @p bootstrap, or
 * die. */
void tpc_test_bench_create_topic(const char *bootstrap, const char *topic, int partitions);

#endif
