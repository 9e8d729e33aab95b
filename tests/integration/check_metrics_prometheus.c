/*
 * The metrics endpoint as Prometheus sees it: a job (sequence source into an exactly-once Kafka
 * sink and an exactly-once PostgreSQL sink) serves metrics.listen on 127.0.0.1, a real Prometheus
 * server (Debian's package, started on 127.0.0.1 by tests/services/prometheus.sh) scrapes it every
 * second, and the values are read back through Prometheus' HTTP API (/api/v1/query): the scrape
 * succeeds (up == 1, so the exposition parses), and records, checkpoints and their histogram, the
 * age of the last checkpoint, the sinks' commits and commit latency, and librdkafka's statistics
 * of the Kafka sink's producers all arrive with the values the job has.
 * The job's own scrape passes `promtool check metrics`, names every family as docs/metrics.md
 * does, and the alert rules of docs/prometheus/ pass `promtool check rules` and their own
 * `promtool test rules` (each alert fires on the series it is meant for, and only then). The Kafka
 * sink's timeout is its kafka.transaction.timeout.ms, and the PostgreSQL sink has none; the build
 * is named with the versions of twopc, librdkafka and libpq the process runs with. The Kafka
 * source's own figures are read from the job's endpoint directly: a source reading a topic through
 * a slow operator lags on each partition while it runs, never more than the partition holds, counts
 * its partitions, and lags no more once the operator has every record.
 */
#include "check_kafka_common.h"
#include "check_kafka_source_fill.h"
#include "tpc_kafka.h"
#include "tpc_pg.h"
#include "tpc_test_check.h"
#include "tpc_test_http.h"
#include "tpc_test_metrics_doc.h"
#include "tpc_test_ops.h"
#include "tpc_test_pg.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
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

static int prom_port;
static char body[1 << 18];

/* The value of instant query @q (one series), or -1 when Prometheus has none (yet). */
static double query(const char *q)
{
    char enc[2048], path[2200];
    snprintf(path, sizeof path, "/api/v1/query?query=%s", tpc_test_url_encode(q, enc, sizeof enc));
    if (tpc_test_http_get(prom_port, path, body, sizeof body) != 200)
        return -1;
    const char *v = strstr(body, "\"value\":[");
    if (!v || !strstr(body, "\"status\":\"success\""))
        return -1;
    v = strchr(v, ',');
    return v && v[1] == '"' ? strtod(v + 2, NULL) : -1;
}

/* Wait until @q has a value above @above (Prometheus scrapes every second). */
static double wait_for(const char *q, double above)
{
    double v = -1;
    for (int i = 0; i < 150 && (v = query(q)) <= above; i++)
        usleep(100 * 1000);
    printf("%-78s %g\n", q, v);
    fflush(stdout);
    return v;
}

/* The runtime's hook for checkpoint writes (runtime/storage.c): the next write takes 3 s. */
extern tpc_error_t *(*tpc__checkpoint_write_fault)(uint64_t id);
static atomic_int slow_writes;

static tpc_error_t *slow_write(uint64_t id)
{
    (void)id;
    if (atomic_exchange(&slow_writes, 0))
        sleep(3);
    return NULL;
}

/* The value of the sample in @text that starts with @prefix (name and labels), or -1. */
static double sample_of(const char *text, const char *prefix)
{
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (strncmp(l, prefix, strlen(prefix)) == 0 && l[strlen(prefix)] == ' ')
            return strtod(l + strlen(prefix) + 1, NULL);
    return -1;
}

/* Run @cmd (which ends with `echo rc=$?`), print what it says: true when it exited 0. */
static bool tpc_test_command_ok(const char *cmd)
{
    FILE *f = popen(cmd, "r");
    if (!f)
        return false;
    char line[1024], last[1024] = "";
    printf("$ %.*s\n", (int)(strstr(cmd, " 2>&1") ? strstr(cmd, " 2>&1") - cmd : 200), cmd);
    while (fgets(line, sizeof line, f)) {
        fputs(line, stdout);
        snprintf(last, sizeof last, "%s", line);
    }
    pclose(f);
    fflush(stdout);
    return strcmp(last, "rc=0\n") == 0;
}

START_TEST(test_prometheus_scrapes_the_job)
{
    const char *bootstrap = tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP");
    const char *conninfo = tpc_test_env_require("TWOPC_TEST_PG_CONNINFO");
    ck_assert(bootstrap && conninfo);
    char topic[128], prefix[128], table[96], gprefix[96];
    tpc_test_unique_name(topic, sizeof topic, "metrics", '-');
    tpc_test_unique_name(prefix, sizeof prefix, "metrics", '-');
    tpc_test_unique_name(table, sizeof table, "metrics", '_');
    tpc_test_unique_name(gprefix, sizeof gprefix, "metrics", '-');
    kt_create_topic(bootstrap, topic, 2);
    PGconn *pg = tpc_test_pg_connect();
    ck_assert_ptr_nonnull(pg);
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea, v bytea)", table));
    char *ckpt = tpc_test_tmpdir("metrics-ckpt");

    tpc_test_seq_conf_t src = {.count_default = 1u << 30, .per_poll = 8, .sleep_us = 2000};
    tpc_job_t *job = tpc_job_new("metrics-prom");
    tpc_job_set_logger(job, NULL, NULL, TPC_LOG_INFO);
    tpc_txn_sink_t *kafka = NULL, *rows = NULL;
    int s, k, p;
    TPC_TEST_OK(tpc_job_set(job, "checkpoint.dir", ckpt));
    TPC_TEST_OK(tpc_job_set(job, "checkpoint.interval.ms", "200"));
    TPC_TEST_OK(tpc_job_set(job, "metrics.listen", "127.0.0.1:0"));
    TPC_TEST_OK(tpc_kafka_sink_new(bootstrap, topic, &kafka));
    TPC_TEST_OK(tpc_txn_sink_set(kafka, "transactional.id.prefix", prefix));
    TPC_TEST_OK(tpc_txn_sink_set(kafka, "kafka.linger.ms", "2"));
    TPC_TEST_OK(tpc_pg_sink_new(&rows));
    TPC_TEST_OK(tpc_txn_sink_set(rows, "pg.conninfo", conninfo));
    TPC_TEST_OK(tpc_txn_sink_set(rows, "pg.table", table));
    TPC_TEST_OK(tpc_txn_sink_set(rows, "pg.gid-prefix", gprefix));
    TPC_TEST_OK(tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s));
    TPC_TEST_OK(tpc_txn_sink_add_to_job(kafka, job, "kafka", 2, &k));
    TPC_TEST_OK(tpc_txn_sink_add_to_job(rows, job, "rows", 1, &p));
    TPC_TEST_OK(tpc_job_connect(job, s, k, TPC_EDGE_REBALANCE));
    TPC_TEST_OK(tpc_job_connect(job, s, p, TPC_EDGE_REBALANCE));
    run_t r = {job, NULL};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, run, &r), 0);
    int port = 0;
    for (int i = 0; i < 500 && !(port = tpc_job_metrics_port(job)); i++)
        usleep(10 * 1000);
    ck_assert_int_gt(port, 0);

    /* Prometheus, scraping the job every second. */
    char *pdir = tpc_test_tmpdir("prometheus");
    char cmd[8192], url[256] = "";
    snprintf(cmd, sizeof cmd, "tests/services/prometheus.sh start '%s/p' 127.0.0.1:%d", pdir, port);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    if (!fgets(url, sizeof url, f))
        url[0] = 0;
    int rc = pclose(f);
    ck_assert_msg(rc == 0 && sscanf(url, "http://127.0.0.1:%d", &prom_port) == 1,
                  "Prometheus did not start (%s)", url);

    if (wait_for("up{job=\"twopc\"}", 0) != 1) {
        tpc_test_http_get(prom_port, "/api/v1/targets", body, sizeof body);
        ck_abort_msg("Prometheus cannot scrape the job (%s): %.2000s",
                     tpc_job_metrics_port(job) ? "it runs" : "it ended", body);
    }
    ck_assert(wait_for("twopc_checkpoints_completed_total", 2) > 2);
    ck_assert(wait_for("twopc_records_out_total{vertex=\"source\",subtask=\"0\"}", 0) > 0);
    ck_assert(wait_for("sum(twopc_records_in_total{vertex=\"kafka\"})", 0) > 0);
    ck_assert(wait_for("count(twopc_records_in_total{vertex=\"kafka\"})", 0) == 2);
    ck_assert(wait_for("twopc_records_in_total{vertex=\"rows\",subtask=\"0\"}", 0) > 0);
    ck_assert(wait_for("twopc_checkpoint_duration_seconds_count", 0) > 0);
    double q = wait_for("histogram_quantile(0.5, twopc_checkpoint_duration_seconds_bucket)", 0);
    ck_assert_msg(q > 0 && q <= 60, "median checkpoint duration %g", q);
    double since = wait_for("twopc_last_checkpoint_age_seconds", -1);
    ck_assert_msg(since >= 0 && since < 10, "last checkpoint %g s ago", since);
    ck_assert(wait_for("twopc_last_checkpoint_size_bytes", 0) > 0);
    ck_assert(wait_for("twopc_sink_transactions_committed_total{sink=\"kafka\"}", 0) > 0);
    ck_assert(wait_for("twopc_sink_transactions_committed_total{sink=\"rows\"}", 0) > 0);
    ck_assert(wait_for("twopc_sink_commit_seconds_count{sink=\"rows\"}", 0) > 0);
    ck_assert(wait_for("twopc_sink_pending_transactions{sink=\"kafka\"}", -1) >= 0);
    ck_assert(wait_for("twopc_kafka_messages_sent_total{sink=\"kafka\"}", 0) > 0);
    ck_assert(wait_for("twopc_kafka_requests_sent_total{sink=\"kafka\"}", 0) > 0);
    ck_assert(wait_for("twopc_kafka_producers{sink=\"kafka\"}", 0) >= 2);
    ck_assert(wait_for("twopc_restarts_total", -1) == 0);
    /* What Prometheus has is what the job has (counters it scraped are behind, never ahead). */
    tpc_job_stats_t st;
    tpc_job_get_stats(job, &st);
    double completed = query("twopc_checkpoints_completed_total");
    ck_assert_msg(completed > 2 && completed <= (double)st.checkpoints_completed,
                  "Prometheus has %g completed checkpoints, the job %llu", completed,
                  (unsigned long long)st.checkpoints_completed);
    /* A rate over the scrapes: the source keeps emitting. */
    ck_assert(wait_for("rate(twopc_records_out_total{vertex=\"source\"}[5s])", 0) > 0);
    /* The commit latency as a histogram: its quantiles lie within its buckets. */
    double p99 = wait_for("histogram_quantile(0.99, sum by (le) "
                          "(rate(twopc_sink_commit_seconds_bucket{sink=\"rows\"}[5s])))",
                          0);
    ck_assert_msg(p99 > 0 && p99 <= 60, "99th percentile of commits %g s", p99);
    /* The Kafka sink's timeout is the broker's (kafka.transaction.timeout.ms, 60 s by default);
     * PostgreSQL has none, so no sample. */
    ck_assert(wait_for("twopc_sink_transaction_timeout_seconds{sink=\"kafka\"}", 0) == 60);
    ck_assert(query("twopc_sink_transaction_timeout_seconds{sink=\"rows\"}") == -1);
    double age = wait_for("twopc_sink_oldest_pending_transaction_age_seconds{sink=\"kafka\"}", -1);
    ck_assert_msg(age >= 0 && age < 10, "oldest pending Kafka transaction %g s old", age);
    /* The build: twopc, and the libraries this process runs with. */
    char build[512];
    int pq = PQlibVersion();
    snprintf(build, sizeof build,
             "twopc_build_info{twopc=\"%s\",librdkafka=\"%s\",libpq=\"%d.%d\"}",
             tpc_version_string(), rd_kafka_version_str(), pq / 10000, pq % 10000);
    ck_assert(wait_for(build, 0) == 1);

    /* The job's own page: what promtool and the metrics page say of it. */
    ck_assert_int_eq(tpc_test_http_get(port, "/metrics", body, sizeof body), 200);
    {
        char why[256];
        ck_assert_msg(tpc_test_metrics_doc_check(body, why, sizeof why), "%s", why);
    }
    /* A slow disk: one checkpoint write takes 3 s, so the Kafka sink's transactions of that
     * checkpoint wait for their commit; meanwhile the oldest ages, and age and time left (read
     * from one clock reading) add up to the broker's timeout. */
    atomic_store(&slow_writes, 1);
    tpc__checkpoint_write_fault = slow_write;
    double a = 0, left = -1;
    for (int i = 0; i < 500 && a < 2; i++) {
        usleep(10 * 1000);
        ck_assert_int_eq(tpc_test_http_get(port, "/metrics", body, sizeof body), 200);
        a = sample_of(body, "twopc_sink_oldest_pending_transaction_age_seconds{sink=\"kafka\"}");
        left = sample_of(
            body,
            "twopc_sink_oldest_pending_transaction_timeout_remaining_seconds{sink=\"kafka\"}");
    }
    printf("while a checkpoint write takes 3 s: the oldest pending Kafka transaction is %.3f s "
           "old, %.3f s left\n",
           a, left);
    ck_assert_msg(a >= 2 && a < 30 && fabs(a + left - 60) < 0.002, "age %g, left %g", a, left);
    ck_assert(sample_of(body, "twopc_sink_pending_transactions{sink=\"kafka\"}") >= 1);
    tpc__checkpoint_write_fault = NULL;
    snprintf(cmd, sizeof cmd, "%s/scrape.txt", pdir);
    FILE *out = fopen(cmd, "w");
    ck_assert_ptr_nonnull(out);
    fputs(body, out);
    fclose(out);
    char promtool[8400];
    snprintf(promtool, sizeof promtool, "promtool check metrics < '%s' 2>&1; echo rc=$?", cmd);
    ck_assert(tpc_test_command_ok(promtool));
    ck_assert(tpc_test_command_ok(
        "promtool check rules docs/prometheus/twopc-alerts.yml 2>&1; echo rc=$?"));
    ck_assert(tpc_test_command_ok(
        "cd docs/prometheus && promtool test rules twopc-alerts.test.yml 2>&1; echo rc=$?"));

    snprintf(cmd, sizeof cmd, "tests/services/prometheus.sh stop '%s/p'", pdir);
    ck_assert_int_eq(system(cmd), 0);
    tpc_job_cancel(job);
    pthread_join(th, NULL);
    ck_assert_ptr_null(r.err);
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(kafka);
    tpc_txn_sink_destroy(rows);
    tpc_test_pg_rollback_prefix(pg, gprefix);
    tpc_test_pg_exec(pg, "DROP TABLE %s", table);
    PQfinish(pg);
    tpc_test_rmdir(pdir);
    free(pdir);
    tpc_test_rmdir(ckpt);
    free(ckpt);
}
END_TEST

/* An operator that takes its time, a millisecond a record (4 s for the topic), so that the
 * source falls behind whatever the batches' sizes; with fail_at set, its first attempt fails
 * once it has that many records. */
static atomic_long slow_records;
static long fail_at;

static tpc_error_t *slow_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx, (void)arg;
    *self = NULL;
    return NULL;
}

static tpc_error_t *slow_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)self;
    for (size_t i = 0; i < tpc_batch_count(batch); i++) {
        if (fail_at && tpc_ctx_attempt(ctx) == 0 && atomic_load(&slow_records) >= fail_at)
            return tpc_error_new(TPC_ERR_EXTERNAL, TPC_ERROR_RETRIABLE, "the test fails once");
        usleep(1000);
        atomic_fetch_add(&slow_records, 1);
    }
    return NULL;
}

static const tpc_operator_ops_t slow_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = slow_open,
    .process = slow_process,
};

static char page[1 << 18];

/* Read the job's endpoint into page; false when it does not answer. */
static bool scrape(int port)
{
    page[0] = 0;
    return tpc_test_http_get(port, "/metrics", page, sizeof page) == 200;
}

/* The value of the sample in page that starts with @prefix (name and labels), or -1. */
static double value(const char *prefix)
{
    for (const char *l = page; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (strncmp(l, prefix, strlen(prefix)) == 0 && l[strlen(prefix)] == ' ')
            return strtod(l + strlen(prefix) + 1, NULL);
    return -1;
}

#define LAG        "twopc_kafka_source_lag_records{source=\"in\","
#define PARTITIONS "twopc_kafka_source_partitions{source=\"in\"}"
#define QUEUED     "twopc_kafka_source_queued_records{source=\"in\"}"
#define WAKEUPS    "twopc_kafka_source_fetch_wakeups_total{source=\"in\"}"

/* The lag of each partition in page (by partition number, -1 when it has no sample): their sum,
 * and how many partitions have a sample. */
static double lags(int64_t by_partition[3], int *n)
{
    double sum = 0;
    *n = 0;
    for (int i = 0; i < 3; i++)
        by_partition[i] = -1;
    for (const char *l = page; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, LAG, strlen(LAG)) != 0)
            continue;
        const char *p = strstr(l, "partition=\"");
        int part = p ? atoi(p + 11) : -1;
        double v = strtod(strchr(l, ' ') + 1, NULL);
        if (part >= 0 && part < 3)
            by_partition[part] = (int64_t)v;
        sum += v;
        (*n)++;
    }
    return *n ? sum : -1;
}

static double lag_sum(void)
{
    int64_t by[3];
    int n;
    return lags(by, &n);
}

typedef struct {
    tpc_job_t *job;
    tpc_kafka_source_t *src;
    char topic[128];
    char *ckpt;
    run_t r;
    pthread_t th;
    int port;
    long total; /* committed records in the topic */
} src_job_t;

/* A topic of 3 partitions written in transactions, every fifth aborted (markers and aborted
 * records sit between the records), read by a source with 2 subtasks into the slow operator. */
static void src_job_start(src_job_t *j, long fail)
{
    const char *bootstrap = tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP");
    ck_assert(bootstrap);
    char *topic = j->topic;
    tpc_test_unique_name(topic, sizeof j->topic, "metrics-src", '-');
    kt_create_topic(bootstrap, topic, 3);
    j->total = (long)kf_fill(bootstrap, topic, 25, 200, 5);
    j->ckpt = tpc_test_tmpdir("metrics-src-ckpt");
    j->job = tpc_job_new("metrics-src");
    tpc_job_set_logger(j->job, NULL, NULL, TPC_LOG_ERROR);
    TPC_TEST_OK(tpc_job_set(j->job, "checkpoint.dir", j->ckpt));
    TPC_TEST_OK(tpc_job_set(j->job, "checkpoint.interval.ms", "300"));
    TPC_TEST_OK(tpc_job_set(j->job, "metrics.listen", "127.0.0.1:0"));
    TPC_TEST_OK(tpc_kafka_source_new(bootstrap, topic, &j->src));
    TPC_TEST_OK(tpc_kafka_source_set(j->src, "max.batch", "20"));
    /* A small read-ahead, so that librdkafka 2.0.2's fetchers park and get woken. */
    TPC_TEST_OK(tpc_kafka_source_set(j->src, "kafka.queued.min.messages", "200"));
    int s, o;
    TPC_TEST_OK(tpc_kafka_source_add_to_job(j->src, j->job, "in", 2, &s));
    TPC_TEST_OK(tpc_job_add_vertex(j->job, "slow", 1, &slow_ops, NULL, &o));
    TPC_TEST_OK(tpc_job_connect(j->job, s, o, TPC_EDGE_REBALANCE));
    atomic_store(&slow_records, 0);
    fail_at = fail;
    j->r = (run_t){j->job, NULL};
    ck_assert_int_eq(pthread_create(&j->th, NULL, run, &j->r), 0);
    for (int i = 0; i < 500 && !(j->port = tpc_job_metrics_port(j->job)); i++)
        usleep(10 * 1000);
    ck_assert_int_gt(j->port, 0);
}

static void src_job_stop(src_job_t *j)
{
    tpc_job_cancel(j->job);
    pthread_join(j->th, NULL);
    ck_assert_ptr_null(j->r.err);
    tpc_job_destroy(j->job);
    tpc_kafka_source_destroy(j->src);
    tpc_test_rmdir(j->ckpt);
    free(j->ckpt);
}

/* Where librdkafka re-checks parked fetchers by a timer of its own (fetch.queue.backoff.ms, 2.2
 * and later) the source sends no wake-ups; before, a 200-record queue needs some. */
static void check_wakeups(double wakes)
{
    char errstr[256];
    rd_kafka_conf_t *rc = rd_kafka_conf_new();
    bool timer = rd_kafka_conf_set(rc, "fetch.queue.backoff.ms", "10", errstr, sizeof errstr) ==
                 RD_KAFKA_CONF_OK;
    rd_kafka_conf_destroy(rc);
    ck_assert_msg(timer ? wakes == 0 : wakes > 0, "%g wake-ups with librdkafka %s", wakes,
                  rd_kafka_version_str());
}

START_TEST(test_kafka_source_lag)
{
    src_job_t j;
    src_job_start(&j, 0);
    /* While the operator works through the records, the source is behind. */
    double lag = -1, parts = -1;
    long taken = 0;
    int64_t by[3];
    int series = 0;
    for (int i = 0; i < 300; i++) {
        taken = atomic_load(&slow_records);
        if (scrape(j.port) && (lag = lags(by, &series)) > 0 && (parts = value(PARTITIONS)) == 3 &&
            series == 3)
            break;
        usleep(20 * 1000);
    }
    printf("per partition: %lld %lld %lld\n", (long long)by[0], (long long)by[1], (long long)by[2]);
    ck_assert_int_eq(series, 3);
    /* No partition is behind by more offsets than it holds. */
    const char *bootstrap = tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP");
    rd_kafka_t *admin = kt_admin(bootstrap);
    for (int p = 0; p < 3; p++) {
        int64_t low = -1, high = -1;
        ck_assert_int_eq(rd_kafka_query_watermark_offsets(admin, j.topic, p, &low, &high, 10000),
                         RD_KAFKA_RESP_ERR_NO_ERROR);
        ck_assert_msg(by[p] >= 0 && by[p] <= high - low, "partition %d: lag %lld, holds %lld", p,
                      (long long)by[p], (long long)(high - low));
    }
    rd_kafka_destroy(admin);
    printf("while running: lag %g, partitions %g, %ld of %ld records taken\n", lag, parts, taken,
           j.total);
    ck_assert_msg(lag > 0 && taken < j.total, "lag %g with %ld of %ld records taken", lag, taken,
                  j.total);
    ck_assert_msg(parts == 3, "%g partitions, the topic has 3", parts);
    /* At most every offset of the topic: records, and a marker per transaction and partition. */
    ck_assert_msg(lag <= (double)(j.total * 5 / 4 + 25 * 3), "lag %g is more than the topic has",
                  lag);
    ck_assert(value(QUEUED) >= 0);
    ck_assert_ptr_nonnull(strstr(page, "# TYPE twopc_kafka_source_lag_records gauge"));
    ck_assert_ptr_nonnull(strstr(page, "# TYPE twopc_kafka_source_fetch_wakeups_total counter"));

    /* Once the operator has every record, the source is at the end of every partition. */
    for (int i = 0; i < 1200 && atomic_load(&slow_records) < j.total; i++)
        usleep(50 * 1000);
    ck_assert_int_eq(atomic_load(&slow_records), j.total);
    for (int i = 0; i < 200 && !(scrape(j.port) && lags(by, &series) == 0); i++)
        usleep(50 * 1000);
    printf("after all records: lag %g over %d partitions, partitions %g, queued %g, wake-ups "
           "%g\n",
           lag_sum(), series, value(PARTITIONS), value(QUEUED), value(WAKEUPS));
    ck_assert_msg(lag_sum() == 0 && series == 3, "lag %g after every record was read", lag_sum());
    ck_assert(value(PARTITIONS) == 3);
    ck_assert(value(QUEUED) >= 0);
    check_wakeups(value(WAKEUPS));
    src_job_stop(&j);
}
END_TEST

/* A restart closes and opens the source's consumers again: the wake-up counter never goes back,
 * and the gauges come back with the new consumers. */
START_TEST(test_kafka_source_restart)
{
    src_job_t j;
    src_job_start(&j, 1000);
    double wakes = 0, restarts = -1, lag = -1;
    for (int i = 0; i < 3000; i++) {
        if (scrape(j.port)) {
            double w = value(WAKEUPS);
            ck_assert_msg(w >= wakes, "wake-ups went from %g to %g", wakes, w);
            wakes = w;
            restarts = value("twopc_restarts_total");
            lag = lag_sum();
            if (restarts == 1 && lag == 0 && value(PARTITIONS) == 3)
                break;
        }
        usleep(20 * 1000);
    }
    printf("after a restart: restarts %g, lag %g, partitions %g, wake-ups %g, %ld records "
           "taken\n",
           restarts, lag, value(PARTITIONS), wakes, (long)atomic_load(&slow_records));
    ck_assert_msg(restarts == 1 && lag == 0, "restarts %g, lag %g", restarts, lag);
    ck_assert(value(PARTITIONS) == 3);
    check_wakeups(wakes);
    /* The restored attempt read from the checkpoint's offsets on: every record came again. */
    for (int i = 0; i < 1200 && atomic_load(&slow_records) < j.total; i++)
        usleep(50 * 1000);
    ck_assert(atomic_load(&slow_records) >= j.total);
    src_job_stop(&j);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("metrics_prometheus");
    TCase *tc = tcase_create("scrape");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_prometheus_scrapes_the_job);
    suite_add_tcase(s, tc);
    TCase *source = tcase_create("kafka_source");
    tcase_set_timeout(source, 120);
    tcase_add_test(source, test_kafka_source_lag);
    tcase_add_test(source, test_kafka_source_restart);
    suite_add_tcase(s, source);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
