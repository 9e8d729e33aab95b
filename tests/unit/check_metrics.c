/*
 * The job's Prometheus endpoint (metrics.listen), read over HTTP: a sequence source into an
 * exactly-once file sink. The endpoint answers from the moment metrics.listen is set, before the
 * run, while it runs and after it, until the job is destroyed. Every family the runtime and the
 * sink promise is there, once, in the text format (HELP and TYPE before its samples), with the type
 * docs/metrics.md gives it; the counters move while the job runs and agree with
 * tpc_job_get_stats(); the size of the last checkpoint is its file's; the age of the oldest
 * pending transaction and its time left grow while a commit hangs, and the commit latency
 * histogram puts that commit in its bucket; other paths get 404; values metrics.listen cannot
 * take are refused. The scrape by a real Prometheus server is
 * tests/integration/check_metrics_prometheus.c.
 */
#include "tpc_file.h"
#include "tpc_test_check.h"
#include "tpc_test_http.h"
#include "tpc_test_metrics_doc.h"
#include "tpc_test_ops.h"
#include "tpc_test_txn_conn.h"

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

/* A wait for something the job does soon polls every 10 ms up to WAIT_POLLS times (30 s): long
 * enough for a loaded machine, and a passing run stops at the first success. */
enum { WAIT_POLLS = 3000 };

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
    /* Up before the run: the job is there, nothing counted yet, not ready. */
    int port = tpc_job_metrics_port(job);
    ck_assert_int_gt(port, 0);
    ck_assert_int_eq(tpc_test_http_get(port, "/metrics", text, sizeof text), 200);
    check_format(text);
    char build[128];
    snprintf(build, sizeof build, "twopc_build_info{twopc=\"%s\"}", tpc_version_string());
    ck_assert_msg(sample(text, build) == 1, "no %s 1 in:\n%s", build, text);
    ck_assert(sample(text, "twopc_records_out_total{vertex=\"source\",subtask=\"0\"}") == 0);
    ck_assert(sample(text, "twopc_records_in_total{vertex=\"files\",subtask=\"1\"}") == 0);
    ck_assert(sample(text, "twopc_checkpoints_completed_total") == 0);
    ck_assert(sample(text, "twopc_sink_oldest_pending_transaction_age_seconds{sink=\"files\"}") ==
              0);
    ck_assert_int_eq(tpc_test_http_get(port, "/healthz", text, sizeof text), 200);
    ck_assert_msg(strstr(text, "ok: job \"metrics-job\" created, not started"), "%s", text);
    ck_assert_int_eq(tpc_test_http_get(port, "/readyz", text, sizeof text), 503);

    run_t r = {job, NULL};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, run, &r), 0);
    tpc_job_stats_t st = {0};
    for (int i = 0; i < WAIT_POLLS && st.checkpoints_completed < 3; i++) {
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
    ck_assert(sample(text, "twopc_sink_commit_seconds_bucket{sink=\"files\",le=\"+Inf\"}") ==
              sample(text, "twopc_sink_commit_seconds_count{sink=\"files\"}"));
    ck_assert(sample(text, "twopc_sink_records_total{sink=\"files\"}") > 0);
    ck_assert(sample(text, "twopc_last_checkpoint_size_bytes") > 0);
    /* The file sink names no timeout: an age, and nothing about time left. */
    ck_assert(sample(text, "twopc_sink_oldest_pending_transaction_age_seconds{sink=\"files\"}") >=
              0);
    ck_assert_ptr_null(strstr(text, "twopc_sink_transaction_timeout_seconds{"));
    {
        char why[256];
        ck_assert_msg(tpc_test_metrics_doc_check(text, why, sizeof why), "%s", why);
    }

    /* Counters only grow between scrapes: the next checkpoint comes within 50 ms on a quiet
     * machine, and within 30 s on any. */
    double later_out = out0, later_completed = completed;
    for (int i = 0; i < WAIT_POLLS && (later_out <= out0 || later_completed <= completed); i++) {
        usleep(10 * 1000);
        ck_assert_int_eq(tpc_test_http_get(port, "/metrics", text, sizeof text), 200);
        later_out = sample(text, "twopc_records_out_total{vertex=\"source\",subtask=\"0\"}");
        later_completed = sample(text, "twopc_checkpoints_completed_total");
        ck_assert(later_out >= out0 && later_completed >= completed);
    }
    ck_assert_msg(later_out > out0 && later_completed > completed,
                  "out %g -> %g, completed %g -> %g", out0, later_out, completed, later_completed);

    ck_assert_int_eq(tpc_test_http_get(port, "/other", text, sizeof text), 404);
    tpc_job_cancel(job);
    pthread_join(th, NULL);
    ck_assert_ptr_null(r.err);

    /* After the run, until the job is destroyed: the final figures, and how it ended. */
    ck_assert_int_eq(tpc_job_metrics_port(job), port);
    ck_assert_int_eq(tpc_test_http_get(port, "/metrics", text, sizeof text), 200);
    tpc_job_get_stats(job, &st);
    ck_assert(sample(text, "twopc_checkpoints_completed_total") ==
              (double)st.checkpoints_completed);
    double id = sample(text, "twopc_last_checkpoint_id");
    ck_assert(id == (double)st.last_checkpoint_id);
    char file[4200];
    snprintf(file, sizeof file, "%s/chk-%020llu", ckpt, (unsigned long long)id);
    struct stat fst;
    ck_assert_int_eq(stat(file, &fst), 0);
    ck_assert_msg(sample(text, "twopc_last_checkpoint_size_bytes") == (double)fst.st_size,
                  "size %g, file %lld bytes", sample(text, "twopc_last_checkpoint_size_bytes"),
                  (long long)fst.st_size);
    ck_assert_int_eq(tpc_test_http_get(port, "/healthz", text, sizeof text), 200);
    ck_assert_msg(strstr(text, "ok: job \"metrics-job\" canceled"), "%s", text);
    ck_assert_int_eq(tpc_test_http_get(port, "/readyz", text, sizeof text), 503);
    tpc_job_destroy(job);
    ck_assert_int_eq(tpc_test_http_get(port, "/metrics", text, sizeof text), -1);
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
    for (int i = 0; i < WAIT_POLLS && !(port = tpc_job_metrics_port(job)); i++)
        usleep(10 * 1000);
    ck_assert_int_gt(port, 0);
    char taken[32];
    snprintf(taken, sizeof taken, "127.0.0.1:%d", port);
    tpc_error_t *err = run_with_listen(taken);
    ck_assert_msg(err && tpc_error_code(err) == TPC_ERR_CONFIG, "a taken port was accepted");
    ck_assert_ptr_nonnull(tpc_error_hint_text(err));
    tpc_error_destroy(err);
    /* The setting itself says so, before any run. */
    tpc_job_t *other = tpc_job_new("metrics-other");
    err = tpc_job_set(other, "metrics.listen", taken);
    ck_assert_msg(err && tpc_error_code(err) == TPC_ERR_CONFIG, "a taken port was accepted");
    tpc_error_destroy(err);
    ck_assert_int_eq(tpc_job_metrics_port(other), 0);
    /* And the endpoint moves when the setting changes. */
    TPC_TEST_OK(tpc_job_set(other, "metrics.listen", "127.0.0.1:0"));
    int moved = tpc_job_metrics_port(other);
    ck_assert_int_gt(moved, 0);
    ck_assert_int_ne(moved, port);
    char page[4096];
    ck_assert_int_eq(tpc_test_http_get(moved, "/healthz", page, sizeof page), 200);
    tpc_job_destroy(other);
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
    for (int i = 0; i < WAIT_POLLS && !(port = tpc_job_metrics_port(job)); i++)
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
        /* The first checkpoint, or an attempt, comes soon: round 1 looks for 3 s, the others
         * wait as long as a loaded machine may need. */
        for (int i = 0; i < (round == 1 ? 300 : WAIT_POLLS); i++) {
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
        ck_assert_int_eq(tpc_test_http_get(port, "/healthz", page, sizeof page), 200);
        ck_assert_msg(strstr(page, "ok: job \"health\" canceled"), "%s", page);
        ck_assert_int_eq(tpc_test_http_get(port, "/readyz", page, sizeof page), 503);
        ck_assert_msg(strstr(page, "not ready: job \"health\" canceled"), "%s", page);
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
    for (int i = 0; i < WAIT_POLLS && st.checkpoints_completed == 0; i++) {
        usleep(10 * 1000);
        tpc_job_get_stats(job, &st);
    }
    ck_assert_uint_gt(st.checkpoints_completed, 0);
    tpc_test_rmdir(dir);
    char page[65536];
    double writes = 0;
    for (int i = 0; i < WAIT_POLLS && writes < 1; i++) {
        usleep(10 * 1000);
        ck_assert_int_eq(tpc_test_http_get(port, "/metrics", page, sizeof page), 200);
        writes = sample(page, "twopc_checkpoints_failed_total{cause=\"write\"}");
    }
    ck_assert_msg(writes >= 1, "no failed write counted");
    /* The write is counted as it fails; the attempt ends once its subtasks have closed, and the
     * job then waits 3 s to restart, not ready. */
    int code = 0;
    for (int i = 0;
         i < WAIT_POLLS && (code = tpc_test_http_get(port, "/readyz", page, sizeof page)) == 200;
         i++)
        usleep(10 * 1000);
    ck_assert_int_eq(code, 503);
    ck_assert_msg(strstr(page, "waits to restart"), "%s", page);
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

/* A job whose run failed for good is unhealthy: only a new process helps it. */
START_TEST(test_failed_job_is_unhealthy)
{
    tpc_test_seq_conf_t src = {.count_default = 1u << 30, .per_poll = 8, .fail_at = 40};
    tpc_job_t *job = tpc_job_new("fails");
    int s;
    tpc_job_set_logger(job, NULL, NULL, TPC_LOG_ERROR);
    TPC_TEST_OK(tpc_job_set(job, "metrics.listen", "127.0.0.1:0"));
    TPC_TEST_OK(tpc_job_set(job, "restart.attempts", "0"));
    TPC_TEST_OK(tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s));
    int port = tpc_job_metrics_port(job);
    ck_assert_int_gt(port, 0);
    tpc_error_t *err = tpc_job_run(job, NULL);
    ck_assert_ptr_nonnull(err);
    char page[4096];
    ck_assert_int_eq(tpc_test_http_get(port, "/healthz", page, sizeof page), 503);
    ck_assert_msg(strstr(page, "not ok: job \"fails\" failed: "), "%s", page);
    ck_assert_msg(strstr(page, tpc_error_message(err)), "%s", page);
    ck_assert_int_eq(tpc_test_http_get(port, "/readyz", page, sizeof page), 503);
    ck_assert_int_eq(tpc_test_http_get(port, "/metrics", page, sizeof page), 200);
    tpc_error_destroy(err);
    tpc_job_destroy(job);
}
END_TEST

/* While a commit hangs, the sink's oldest pending transaction ages, and its time left before
 * transaction.timeout.ms shrinks by as much; once committed, the commit's latency is in its
 * bucket of the histogram, and the age is back near 0. The recording connector plays the
 * external system; its third commit takes 1.5 s. */
START_TEST(test_oldest_pending_transaction)
{
    char *dir = tpc_test_tmpdir("metrics-pending");
    tpc_test_txn_rec_t rec;
    tpc_test_txn_rec_init(&rec, 1000);
    tpc_test_txn_delay(&rec, TPC_TEST_TXN_COMMIT, 3, 1500);
    tpc_test_seq_conf_t src = {.count_default = 1u << 30, .per_poll = 8, .sleep_us = 1000};
    tpc_job_t *job = tpc_job_new("pending");
    tpc_txn_sink_t *sink = NULL;
    int s, k;
    TPC_TEST_OK(tpc_job_set(job, "metrics.listen", "127.0.0.1:0"));
    TPC_TEST_OK(tpc_job_set(job, "checkpoint.dir", dir));
    TPC_TEST_OK(tpc_job_set(job, "checkpoint.interval.ms", "100"));
    TPC_TEST_OK(tpc_txn_sink_new(&tpc_test_txn_ops, &rec, &sink));
    TPC_TEST_OK(tpc_txn_sink_set(sink, "transaction.timeout.ms", "60000"));
    TPC_TEST_OK(tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s));
    TPC_TEST_OK(tpc_txn_sink_add_to_job(sink, job, "rec", 1, &k));
    TPC_TEST_OK(tpc_job_connect(job, s, k, TPC_EDGE_FORWARD));
    run_t r;
    pthread_t th;
    int port = start_serving(job, &r, &th);
#define AGE  "twopc_sink_oldest_pending_transaction_age_seconds{sink=\"rec\"}"
#define LEFT "twopc_sink_oldest_pending_transaction_timeout_remaining_seconds{sink=\"rec\"}"
    double age = 0, left = -1;
    for (int i = 0; i < WAIT_POLLS && age < 1.0; i++) {
        usleep(10 * 1000);
        ck_assert_int_eq(tpc_test_http_get(port, "/metrics", text, sizeof text), 200);
        age = sample(text, AGE);
        left = sample(text, LEFT);
    }
    printf("while a commit hangs: oldest pending %.3f s old, %.3f s left\n", age, left);
    ck_assert_msg(age >= 1.0 && age < 30, "oldest pending %g s old", age);
    ck_assert(sample(text, "twopc_sink_transaction_timeout_seconds{sink=\"rec\"}") == 60);
    /* Both from one reading of the clock: they add up to the timeout. */
    ck_assert_msg(fabs(age + left - 60) < 0.002, "age %g + left %g is not 60", age, left);
    ck_assert(sample(text, "twopc_sink_pending_transactions{sink=\"rec\"}") >= 1);

    /* Committed: the slow commit is counted above 1 s and at most 2.5 s. */
    double slow = 0;
    for (int i = 0; i < WAIT_POLLS && slow < 1; i++) {
        usleep(10 * 1000);
        ck_assert_int_eq(tpc_test_http_get(port, "/metrics", text, sizeof text), 200);
        slow = sample(text, "twopc_sink_commit_seconds_bucket{sink=\"rec\",le=\"2.5\"}") -
               sample(text, "twopc_sink_commit_seconds_bucket{sink=\"rec\",le=\"1\"}");
    }
    ck_assert_msg(slow == 1, "%g commits between 1 and 2.5 s", slow);
    ck_assert(sample(text, "twopc_sink_commit_seconds_sum{sink=\"rec\"}") >= 1.5);
    ck_assert(sample(text, "twopc_sink_commit_seconds_count{sink=\"rec\"}") ==
              sample(text, "twopc_sink_commit_seconds_bucket{sink=\"rec\",le=\"+Inf\"}"));
    ck_assert(sample(text, "twopc_sink_commit_seconds_max{sink=\"rec\"}") >= 1.5);
    for (int i = 0; i < WAIT_POLLS && (age = sample(text, AGE)) >= 1.0; i++) {
        usleep(10 * 1000);
        ck_assert_int_eq(tpc_test_http_get(port, "/metrics", text, sizeof text), 200);
    }
    ck_assert_msg(age < 1.0, "oldest pending still %g s old", age);
#undef AGE
#undef LEFT
    tpc_job_cancel(job);
    pthread_join(th, NULL);
    tpc_error_destroy(r.err);
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(sink);
    ck_assert_int_eq(rec.violations, 0);
    tpc_test_txn_rec_free(&rec);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* docs/metrics.md names every family the library's sources write, each with a type and a unit,
 * and no family that none writes; the dashboard and the alert rules use only those. */
START_TEST(test_doc_lists_every_family)
{
    static tpc_test_metric_doc_t doc[256];
    int n = tpc_test_metrics_doc_read(doc, 256);
    ck_assert_msg(n > 20 && n <= 256, "docs/metrics.md: %d families", n);
    for (int i = 0; i < n; i++) {
        ck_assert_msg(strcmp(doc[i].type, "counter") == 0 || strcmp(doc[i].type, "gauge") == 0 ||
                          strcmp(doc[i].type, "histogram") == 0,
                      "%s: type \"%s\"", doc[i].name, doc[i].type);
        ck_assert_msg(doc[i].unit[0], "%s has no unit", doc[i].name);
        for (int j = 0; j < i; j++)
            ck_assert_msg(strcmp(doc[i].name, doc[j].name) != 0, "%s twice", doc[i].name);
    }
    /* The names the sources write: string literals in the files that call tpc_metrics_add(). */
    FILE *f = popen("grep -ohE '\"twopc_[a-z0-9_]+\"' $(grep -rl 'tpc_metrics_add(' runtime txn "
                    "connectors) | sort -u",
                    "r");
    ck_assert_ptr_nonnull(f);
    char line[256];
    int written = 0;
    bool listed[256] = {false};
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *name = line + 1;
        name[strcspn(name, "\"")] = 0;
        int found = -1;
        for (int i = 0; i < n && found < 0; i++)
            if (strcmp(doc[i].name, name) == 0)
                found = i;
        ck_assert_msg(found >= 0, "docs/metrics.md does not list %s", name);
        listed[found] = true;
        written++;
    }
    ck_assert_int_eq(pclose(f), 0);
    ck_assert_int_gt(written, 20);
    for (int i = 0; i < n; i++)
        ck_assert_msg(listed[i], "docs/metrics.md lists %s, which no source writes", doc[i].name);

    /* The dashboard and the alert rules ask only for families that exist. */
    f = popen("grep -ohE 'twopc_[a-z0-9_]+' docs/grafana/twopc-dashboard.json "
              "docs/prometheus/twopc-alerts.yml | sort -u",
              "r");
    ck_assert_ptr_nonnull(f);
    int asked = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
        for (size_t k = 0; k < sizeof suffixes / sizeof suffixes[0]; k++) {
            size_t l = strlen(line), sl = strlen(suffixes[k]);
            if (l > sl && strcmp(line + l - sl, suffixes[k]) == 0)
                line[l - sl] = 0;
        }
        int found = -1;
        for (int i = 0; i < n && found < 0; i++)
            if (strcmp(doc[i].name, line) == 0)
                found = i;
        ck_assert_msg(found >= 0, "the dashboard or the alerts ask for %s, which no source writes",
                      line);
        asked++;
    }
    ck_assert_int_eq(pclose(f), 0);
    ck_assert_int_gt(asked, 10);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("endpoint");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_endpoint_serves_the_job_and_its_sinks);
    tcase_add_test(tc, test_bad_listen_values_are_refused);
    tcase_add_test(tc, test_health_and_readiness);
    tcase_add_test(tc, test_failed_checkpoint_writes_are_counted);
    tcase_add_test(tc, test_special_values_spelled_for_prometheus);
    tcase_add_test(tc, test_failed_job_is_unhealthy);
    tcase_add_test(tc, test_oldest_pending_transaction);
    tcase_add_test(tc, test_doc_lists_every_family);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
