/*
 * Stopping a job with a savepoint from another thread (see tpc_test_job.h).
 */
#include "tpc_test_job.h"

#include "runtime_internal.h"

#include <pthread.h>

void *tpc_test_stopper_main(void *stopper)
{
    tpc_test_stopper_t *s = stopper;
    tpc_job_stats_t st;
    tpc_job_get_stats(s->job, &st);
    while (st.vertices[s->vertex].subtasks_finished < s->finished) {
        tpc__sleep_us(1000);
        tpc_job_get_stats(s->job, &st);
    }
    uint64_t target = st.checkpoints_completed + s->after_checkpoints;
    while (st.checkpoints_completed < target) {
        tpc__sleep_us(1000);
        tpc_job_get_stats(s->job, &st);
    }
    tpc__sleep_us(s->delay_us);
    s->err = tpc_job_stop_with_savepoint(s->job, s->drain, &s->path);
    return NULL;
}

tpc_error_t *tpc_test_job_run_stopped(tpc_job_t *job, tpc_test_stopper_t *s,
                                      tpc_job_result_t *result)
{
    s->job = job;
    pthread_t th;
    pthread_create(&th, NULL, tpc_test_stopper_main, s);
    tpc_error_t *err = tpc_job_run(job, result);
    pthread_join(th, NULL);
    return err;
}
