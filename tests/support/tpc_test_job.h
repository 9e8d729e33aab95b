/*
 * Stopping a running job with a savepoint from another thread, at a chosen moment, as a user's
 * control thread would: for the tests of stop with and without drain, and of what a stop meets
 * (restarts, finished vertices, the job's own final checkpoint).
 *
 * No Check calls here: the caller asserts.
 */
#ifndef TPC_TEST_JOB_H
#define TPC_TEST_JOB_H

#include "tpc_runtime.h"

/** When and how to stop a job, and what the stop returned. */
typedef struct {
    tpc_job_t *job;
    bool drain;
    int vertex;                 /**< first wait until this vertex ... */
    int finished;               /**< ... has this many finished subtasks (0: no wait) */
    uint64_t after_checkpoints; /**< then until this many more checkpoints completed */
    uint64_t delay_us;          /**< then this long */
    tpc_error_t *err;           /**< what tpc_job_stop_with_savepoint() returned */
    char *path;                 /**< the savepoint's path (malloc'd), or NULL */
} tpc_test_stopper_t;

/** Thread body (pthread_create) for @p stopper (a tpc_test_stopper_t *): wait, then stop. */
void *tpc_test_stopper_main(void *stopper);

/**
 * Run @p job on this thread while a thread of @p s stops it (s->job is set to @p job).
 * @returns tpc_job_run()'s error; its result in @p result.
 */
tpc_error_t *tpc_test_job_run_stopped(tpc_job_t *job, tpc_test_stopper_t *s,
                                      tpc_job_result_t *result);

#endif
