/*
 * The metrics endpoint as Prometheus sees it: a job (sequence source into an exactly-once Kafka
 * sink and an exactly-once PostgreSQL sink) serves metrics.listen on 127.0.0.1, a real Prometheus
 * server (Debian's package, started on 127.0.0.1 by tests/services/prometheus.sh) scrapes it every
 * second, and the values are read back through Prometheus' HTTP API (/api/v1/query): the scrape
 * succeeds (up == 1, so the exposition parses), and records, checkpoints and their histogram, the
 * age of the last checkpoint, the sinks' commits and commit latency, and librdkafka's statistics
 * of the Kafka sink's producers all arrive with the values the job has.
 */
#include "check_kafka_common.h"
#include "tpc_kafka.h"
#include "tpc_pg.h"
#include "tpc_test_check.h"
#include "tpc_test_http.h"
#include "tpc_test_ops.h"
#include "tpc_test_pg.h"

#include <pthread.h>
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
    double age = wait_for("twopc_last_checkpoint_age_seconds", -1);
    ck_assert_msg(age >= 0 && age < 10, "last checkpoint %g s ago", age);
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

int main(void)
{
    Suite *s = suite_create("metrics_prometheus");
    TCase *tc = tcase_create("scrape");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_prometheus_scrapes_the_job);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
