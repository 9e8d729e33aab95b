/*
 * The job's Prometheus endpoint (metrics.listen), read over HTTP while a job runs: a sequence
 * source into an exactly-once file sink. Every family the runtime and the sink promise is there,
 * once, in the text format (HELP and TYPE before its samples); the counters move while the job
 * runs and agree with tpc_job_get_stats(); other paths get 404; the endpoint is gone when the run
 * ends; values metrics.listen cannot take are refused before anything runs. The scrape by a real
 * Prometheus server is tests/integration/check_metrics_prometheus.c.
 */
#include "tpc_file.h"
#include "tpc_test_check.h"
#include "tpc_test_http.h"
#include "tpc_test_ops.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    tpc_job_t *job;
    tpc_error_t *err;
} run_t;

static void *run(void *arg)
{
    run_t *r = arg;
    r->err = tpc_job_run(r->job, NULL);
    return NULL;
}

/* The value of the sample that starts with @prefix (name and labels), or -1. */
static double sample(const char *text, const char *prefix)
{
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (strncmp(l, prefix, strlen(prefix)) == 0 && l[strlen(prefix)] == ' ')
            return strtod(l + strlen(prefix) + 1, NULL);
    return -1;
}

/* Every family has exactly one TYPE line, and it comes before the family's samples. */
static void check_format(const char *text)
{
    char seen[256][96];
    int n = 0;
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        char name[96];
        if (sscanf(l, "# TYPE %95s", name) == 1) {
            for (int i = 0; i < n; i++)
                ck_assert_msg(strcmp(seen[i], name) != 0, "family %s declared twice", name);
            ck_assert_int_lt(n, 256);
            snprintf(seen[n++], sizeof seen[0], "%s", name);
        } else if (*l != '#' && *l != '\n') {
            ck_assert_int_gt(n, 0);
            ck_assert_msg(strncmp(l, seen[n - 1], strlen(seen[n - 1])) == 0,
                          "sample outside its family: %.80s", l);
        }
    }
    ck_assert_int_ge(n, 10);
}

static char text[1 << 20];

START_TEST(test_endpoint_serves_the_job_and_its_sinks)
{
    char *dir = tpc_test_tmpdir("metrics");
    char out[4096], ckpt[4096];
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(ckpt, sizeof ckpt, "%s/ckpt", dir);
    ck_assert_int_eq(mkdir(out, 0755), 0);
    tpc_test_seq_conf_t src = {.count_default = 1u << 30, .per_poll = 16, .sleep_us = 1000};
    tpc_job_t *job = tpc_job_new("metrics-job");
    tpc_txn_sink_t *sink = NULL;
    int s, f;
    TPC_TEST_OK(tpc_job_set(job, "checkpoint.dir", ckpt));
    TPC_TEST_OK(tpc_job_set(job, "checkpoint.interval.ms", "50"));
    TPC_TEST_OK(tpc_job_set(job, "metrics.listen", "127.0.0.1:0"));
    TPC_TEST_OK(tpc_file_sink_new(out, &sink));
    TPC_TEST_OK(tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s));
    TPC_TEST_OK(tpc_txn_sink_add_to_job(sink, job, "files", 2, &f));
    TPC_TEST_OK(tpc_job_connect(job, s, f, TPC_EDGE_REBALANCE));
    ck_assert_int_eq(tpc_job_metrics_port(job), 0);

    run_t r = {job, NULL};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, run, &r), 0);
    int port = 0;
    for (int i = 0; i < 200 && !(port = tpc_job_metrics_port(job)); i++)
        usleep(10 * 1000);
    ck_assert_int_gt(port, 0);
    tpc_job_stats_t st = {0};
    for (int i = 0; i < 300 && st.checkpoints_completed < 3; i++) {
        usleep(10 * 1000);
        tpc_job_get_stats(job, &st);
    }
    ck_assert_int_eq(tpc_test_http_get(port, "/metrics", text, sizeof text), 200);
    check_format(text);
    double completed = sample(text, "twopc_checkpoints_completed_total");
    tpc_job_get_stats(job, &st);
    ck_assert_msg(completed >= 3 && completed <= (double)st.checkpoints_completed,
                  "completed %g, stats %llu", completed,
                  (unsigned long long)st.checkpoints_completed);
    double out0 = sample(text, "twopc_records_out_total{vertex=\"source\",subtask=\"0\"}");
    double in0 = sample(text, "twopc_records_in_total{vertex=\"files\",subtask=\"0\"}");
    double in1 = sample(text, "twopc_records_in_total{vertex=\"files\",subtask=\"1\"}");
    /* No order between them on a live job: the sink's counters are read after the source's, and a
     * subtask counts what it sent after sending it. */
    ck_assert_msg(out0 > 0 && in0 > 0 && in1 > 0, "out %g, in %g + %g", out0, in0, in1);
    ck_assert(sample(text, "twopc_backpressure_seconds_total{vertex=\"source\",subtask=\"0\"}") >=
              0);
    double count = sample(text, "twopc_checkpoint_duration_seconds_count");
    double inf = sample(text, "twopc_checkpoint_duration_seconds_bucket{le=\"+Inf\"}");
    ck_assert_msg(count >= completed && inf == count, "histogram count %g, +Inf %g", count, inf);
    ck_assert(sample(text, "twopc_checkpoint_duration_seconds_sum") > 0);
    double age = sample(text, "twopc_last_checkpoint_age_seconds");
    ck_assert_msg(age >= 0 && age < 5, "age %g", age);
    ck_assert(sample(text, "twopc_restarts_total") == 0);
    ck_assert(sample(text, "twopc_checkpoints_failed_total{cause=\"timeout\"}") >= 0);
    ck_assert(sample(text, "twopc_checkpoints_failed_total{cause=\"write\"}") == 0);
    ck_assert(sample(text, "twopc_checkpoints_failed_total{cause=\"other\"}") >= 0);
    ck_assert(sample(text, "twopc_checkpoints_declined_total") >= 0);
    ck_assert(sample(text, "twopc_sink_transactions_committed_total{sink=\"files\"}") > 0);
    ck_assert(sample(text, "twopc_sink_pending_transactions{sink=\"files\"}") >= 0);
    ck_assert(sample(text, "twopc_sink_commit_seconds_count{sink=\"files\"}") > 0);
    ck_assert(sample(text, "twopc_sink_records_total{sink=\"files\"}") > 0);

    /* Counters only grow between scrapes. */
    usleep(200 * 1000);
    ck_assert_int_eq(tpc_test_http_get(port, "/metrics", text, sizeof text), 200);
    ck_assert(sample(text, "twopc_records_out_total{vertex=\"source\",subtask=\"0\"}") > out0);
    ck_assert(sample(text, "twopc_checkpoints_completed_total") > completed);

    ck_assert_int_eq(tpc_test_http_get(port, "/other", text, sizeof text), 404);
    tpc_job_cancel(job);
    pthread_join(th, NULL);
    ck_assert_ptr_null(r.err);
    ck_assert_int_eq(tpc_job_metrics_port(job), 0);
    ck_assert_int_eq(tpc_test_http_get(port, "/metrics", text, sizeof text), -1);
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(sink);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

static tpc_error_t *run_with_listen(const char *listen)
{
    tpc_test_seq_conf_t src = {.count_default = 10};
    tpc_job_t *job = tpc_job_new("metrics-bad");
    int s;
    tpc_error_t *err = tpc_job_set(job, "metrics.listen", listen);
    if (!err)
        err = tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s);
    if (!err)
        err = tpc_job_run(job, NULL);
    tpc_job_destroy(job);
    return err;
}

START_TEST(test_bad_listen_values_are_refused)
{
    const char *bad[] = {"", "http://127.0.0.1:9", "127.0.0.1:70000", "example.org:9464", "x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tpc_error_t *err = run_with_listen(bad[i]);
        ck_assert_msg(err && tpc_error_code(err) == TPC_ERR_CONFIG, "\"%s\" was taken", bad[i]);
        ck_assert_ptr_nonnull(strstr(tpc_error_message(err), "metrics.listen"));
        tpc_error_destroy(err);
    }
    /* A port that is taken: the job does not run, and says why. */
    tpc_test_seq_conf_t src = {.count_default = 1u << 30, .sleep_us = 1000};
    tpc_job_t *job = tpc_job_new("metrics-holder");
    int s;
    TPC_TEST_OK(tpc_job_set(job, "metrics.listen", "0"));
    TPC_TEST_OK(tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s));
    run_t r = {job, NULL};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, run, &r), 0);
    int port = 0;
    for (int i = 0; i < 200 && !(port = tpc_job_metrics_port(job)); i++)
        usleep(10 * 1000);
    ck_assert_int_gt(port, 0);
    char taken[32];
    snprintf(taken, sizeof taken, "127.0.0.1:%d", port);
    tpc_error_t *err = run_with_listen(taken);
    ck_assert_msg(err && tpc_error_code(err) == TPC_ERR_CONFIG, "a taken port was accepted");
    ck_assert_ptr_nonnull(tpc_error_hint_text(err));
    tpc_error_destroy(err);
    tpc_job_cancel(job);
    pthread_join(th, NULL);
    tpc_error_destroy(r.err);
    tpc_job_destroy(job);
}
END_TEST

/* Starts @job on a thread and waits for its endpoint: the port. */
static int start_serving(tpc_job_t *job, run_t *r, pthread_t *th)
{
    *r = (run_t){job, NULL};
    ck_assert_int_eq(pthread_create(th, NULL, run, r), 0);
    int port = 0;
    for (int i = 0; i < 500 && !(port = tpc_job_metrics_port(job)); i++)
        usleep(10 * 1000);
    ck_assert_int_gt(port, 0);
    return port;
}

/* /healthz answers while the job runs; /readyz only once a checkpoint of this run completed
 * (503 with the reason before), or at once when checkpoints are off. */
START_TEST(test_health_and_readiness)
{
    char *dir = tpc_test_tmpdir("health");
    tpc_test_seq_conf_t src = {.count_default = 1u << 30, .per_poll = 8, .sleep_us = 1000};
    char page[4096];
    for (int round = 0; round < 3; round++) {
        /* 0: checkpoints every 50 ms; 1: the first one an hour away; 2: no checkpoint.dir */
        tpc_job_t *job = tpc_job_new("health");
        int s;
        TPC_TEST_OK(tpc_job_set(job, "metrics.listen", "127.0.0.1:0"));
        if (round < 2) {
            TPC_TEST_OK(tpc_job_set(job, "checkpoint.dir", dir));
            TPC_TEST_OK(tpc_job_set(job, "checkpoint.interval.ms", round == 0 ? "50" : "3600000"));
        }
        TPC_TEST_OK(tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s));
        run_t r;
        pthread_t th;
        int port = start_serving(job, &r, &th);
        ck_assert_int_eq(tpc_test_http_get(port, "/healthz", page, sizeof page), 200);
        ck_assert_msg(strstr(page, "ok: job \"health\""), "%s", page);
        int code = 0;
        for (int i = 0; i < 300; i++) { /* the first checkpoint, or an attempt, comes soon */
            code = tpc_test_http_get(port, "/readyz", page, sizeof page);
            if (code == 200)
                break;
            usleep(10 * 1000);
        }
        if (round == 0) {
            ck_assert_int_eq(code, 200);
            ck_assert_msg(strstr(page, "ready: job \"health\" running, checkpoint "), "%s", page);
        } else if (round == 1) {
            ck_assert_int_eq(code, 503);
            ck_assert_msg(strstr(page, "not ready") && strstr(page, "completed no checkpoint"),
                          "%s", page);
        } else {
            ck_assert_int_eq(code, 200);
            ck_assert_msg(strstr(page, "checkpoints off"), "%s", page);
        }
        tpc_job_cancel(job);
        pthread_join(th, NULL);
        tpc_error_destroy(r.err);
        tpc_job_destroy(job);
        ck_assert_int_eq(tpc_test_http_get(port, "/healthz", page, sizeof page), -1);
    }
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* A checkpoint whose file cannot be written fails the attempt, and is counted as failed: in the
 * statistics, the checkpoint callback and the metrics (cause "write"), while the job waits to
 * restart. The folder is taken away under the running job, as a lost disk would. */
static void count_outcome(void *opaque, uint64_t id, bool completed, uint64_t us, const char *why)
{
    (void)id, (void)us, (void)why;
    if (!completed)
        (*(int *)opaque)++;
}

START_TEST(test_failed_checkpoint_writes_are_counted)
{
    char *dir = tpc_test_tmpdir("metrics-write");
    tpc_test_seq_conf_t src = {.count_default = 1u << 30, .per_poll = 8, .sleep_us = 1000};
    tpc_job_t *job = tpc_job_new("write-fails");
    int s, failed = 0;
    TPC_TEST_OK(tpc_job_set(job, "metrics.listen", "127.0.0.1:0"));
    TPC_TEST_OK(tpc_job_set(job, "checkpoint.dir", dir));
    TPC_TEST_OK(tpc_job_set(job, "checkpoint.interval.ms", "30"));
    TPC_TEST_OK(tpc_job_set(job, "restart.attempts", "1"));
    TPC_TEST_OK(tpc_job_set(job, "restart.delay.ms", "3000"));
    ck_assert_int_eq(tpc_job_set_checkpoint_callback(job, count_outcome, &failed), TPC_OK);
    TPC_TEST_OK(tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s));
    run_t r;
    pthread_t th;
    int port = start_serving(job, &r, &th);
    tpc_job_stats_t st = {0};
    for (int i = 0; i < 500 && st.checkpoints_completed == 0; i++) {
        usleep(10 * 1000);
        tpc_job_get_stats(job, &st);
    }
    ck_assert_uint_gt(st.checkpoints_completed, 0);
    tpc_test_rmdir(dir);
    char page[65536];
    double writes = 0;
    for (int i = 0; i < 300 && writes < 1; i++) {
        usleep(10 * 1000);
        ck_assert_int_eq(tpc_test_http_get(port, "/metrics", page, sizeof page), 200);
        writes = sample(page, "twopc_checkpoints_failed_total{cause=\"write\"}");
    }
    ck_assert_msg(writes >= 1, "no failed write counted");
    ck_assert_int_eq(tpc_test_http_get(port, "/readyz", page, sizeof page), 503);
    tpc_job_cancel(job);
    pthread_join(th, NULL);
    tpc_error_destroy(r.err);
    tpc_job_get_stats(job, &st);
    ck_assert_uint_ge(st.checkpoints_aborted, 1);
    ck_assert_int_ge(failed, 1);
    tpc_job_destroy(job);
    free(dir);
}
END_TEST

/* A collector's special values come out as Prometheus spells them (NaN, +Inf, -Inf), and values
 * beyond any integer are not forced through one. */
static void special_values(void *opaque, tpc_metrics_writer_t *w)
{
    (void)opaque;
    tpc_metrics_add(w, "test_nan", "gauge", "not a number", "", NULL, NAN);
    tpc_metrics_add(w, "test_pos_inf", "gauge", "plus infinity", "", NULL, INFINITY);
    tpc_metrics_add(w, "test_neg_inf", "gauge", "minus infinity", "", NULL, -INFINITY);
    tpc_metrics_add(w, "test_huge", "gauge", "beyond int64", "", NULL, 1e300);
    tpc_metrics_add(w, "test_whole", "gauge", "an integer", "", NULL, 42);
}

START_TEST(test_special_values_spelled_for_prometheus)
{
    tpc_test_seq_conf_t src = {.count_default = 1u << 30, .per_poll = 8, .sleep_us = 1000};
    tpc_job_t *job = tpc_job_new("special");
    int s;
    TPC_TEST_OK(tpc_job_set(job, "metrics.listen", "127.0.0.1:0"));
    TPC_TEST_OK(tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s));
    ck_assert_int_eq(tpc_job_add_metrics(job, special_values, NULL), TPC_OK);
    run_t r;
    pthread_t th;
    int port = start_serving(job, &r, &th);
    char page[65536];
    ck_assert_int_eq(tpc_test_http_get(port, "/metrics", page, sizeof page), 200);
    static const char *const want[] = {"\ntest_nan NaN\n", "\ntest_pos_inf +Inf\n",
                                       "\ntest_neg_inf -Inf\n", "\ntest_huge 1e+300\n",
                                       "\ntest_whole 42\n"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(page, want[i]), "no \"%s\" in:\n%s", want[i] + 1, page);
    tpc_job_cancel(job);
    pthread_join(th, NULL);
    tpc_error_destroy(r.err);
    tpc_job_destroy(job);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("endpoint");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_endpoint_serves_the_job_and_its_sinks);
    tcase_add_test(tc, test_bad_listen_values_are_refused);
    tcase_add_test(tc, test_health_and_readiness);
    tcase_add_test(tc, test_failed_checkpoint_writes_are_counted);
    tcase_add_test(tc, test_special_values_spelled_for_prometheus);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
