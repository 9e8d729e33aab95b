/*
 * A checkpoint barrier does not wait behind seconds of buffered records when an operator is slow:
 * channels are bounded in time (channel.capacity.ms) as well as in batches. A map that passes
 * 1,000 records a second behind a fast generator once made the first checkpoint wait for every
 * record of a full channel (16 batches of 256: about 4 s); with the bound in time it waits for
 * about channel.capacity.ms plus the batch in hand. With channel.capacity.ms=0 the old behaviour
 * comes back, which shows the bound is what makes the difference.
 */
#include "tpc_runtime.h"
#include "tpc_test_env.h"
#include "tpc_test_ops.h"

#include <check.h>
#include <stdlib.h>
#include <unistd.h>

#define RATE    1000 /* records a second through the slow map */
#define RECORDS 6000

typedef struct {
    double first_ms; /* duration of the first completed checkpoint */
    int completed;
} ckpt_log_t;

static void on_checkpoint(void *opaque, uint64_t id, bool completed, uint64_t us,
                          const char *reason)
{
    (void)id;
    (void)reason;
    ckpt_log_t *l = opaque;
    if (completed && l->completed++ == 0)
        l->first_ms = (double)us / 1000.0;
}

typedef struct {
    double started;
    uint64_t passed;
} slow_t;

static tpc_error_t *slow_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx;
    (void)arg;
    *self = calloc(1, sizeof(slow_t));
    return NULL;
}

static tpc_error_t *slow_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    slow_t *s = self;
    if (s->started == 0)
        s->started = tpc_test_now_s();
    for (size_t i = 0; i < tpc_batch_count(batch); i++) {
        double due = s->started + (double)s->passed / RATE, now = tpc_test_now_s();
        if (due > now)
            usleep((useconds_t)((due - now) * 1e6));
        tpc_record_t rec;
        tpc_batch_get(batch, i, &rec);
        if (tpc_emit(ctx, &rec) != TPC_OK)
            break;
        s->passed++;
    }
    return NULL;
}

static void slow_close(void *self, tpc_ctx_t *ctx)
{
    (void)ctx;
    free(self);
}

static const tpc_operator_ops_t slow_ops = {.version = TPC_OPERATOR_OPS_VERSION,
                                            .open = slow_open,
                                            .process = slow_process,
                                            .close = slow_close};

/* generator -> slow map -> discard with checkpoints every 300 ms: the first one's duration. */
static ckpt_log_t run(const char *capacity_ms)
{
    tpc_test_seq_conf_t src = {.count_default = RECORDS, .per_poll = 256};
    char *dir = tpc_test_tmpdir("backpressure");
    tpc_job_t *job = tpc_job_new("backpressure");
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.dir", dir));
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.interval.ms", "300"));
    if (capacity_ms)
        ck_assert_ptr_null(tpc_job_set(job, "channel.capacity.ms", capacity_ms));
    int g, m, k;
    ck_assert_ptr_null(tpc_job_add_vertex(job, "generator", 1, &tpc_test_seq_source_ops, &src, &g));
    ck_assert_ptr_null(tpc_job_add_vertex(job, "map", 1, &slow_ops, NULL, &m));
    ck_assert_ptr_null(tpc_job_add_vertex(job, "sink", 1, &tpc_test_discard_ops, NULL, &k));
    ck_assert_ptr_null(tpc_job_connect(job, g, m, TPC_EDGE_FORWARD));
    ck_assert_ptr_null(tpc_job_connect(job, m, k, TPC_EDGE_FORWARD));
    ckpt_log_t log = {0};
    tpc_job_set_checkpoint_callback(job, on_checkpoint, &log);
    tpc_error_t *err = tpc_job_run(job, NULL);
    ck_assert_msg(err == NULL, "run failed: %s", tpc_error_message(err));
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
    return log;
}

START_TEST(test_barrier_waits_a_bounded_time)
{
    ckpt_log_t log = run(NULL); /* the default bound, 500 ms */
    ck_assert_int_ge(log.completed, 2);
    /* 500 ms of records in the channel, the batch in hand (256 ms), the interval's jitter. */
    ck_assert_msg(log.first_ms < 2000, "first checkpoint took %.0f ms", log.first_ms);
}
END_TEST

START_TEST(test_without_the_bound_it_waits_for_the_full_channel)
{
    ckpt_log_t log = run("0");
    ck_assert_int_ge(log.completed, 1);
    ck_assert_msg(log.first_ms > 3000, "first checkpoint took %.0f ms", log.first_ms);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("backpressure_barrier");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_barrier_waits_a_bounded_time);
    tcase_add_test(tc, test_without_the_bound_it_waits_for_the_full_channel);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
