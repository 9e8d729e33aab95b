/*
 * Kafka sink throughput against a plain librdkafka transactional producer, in the same run on the
 * same broker.
 *
 *   sink: sequence source -> exactly-once Kafka sink, checkpoints every second (each one a flush
 *         with every delivery report, then a commit when the checkpoint is complete)
 *   raw:  one loop producing the same records with a transactional producer, committing once a
 *         second
 *
 * Records are 100-byte values with 8-byte keys. Each side runs twice, alternating, and its best
 * run counts. Prints
 *   bench kafka <metric> <value> <unit>
 * Environment: TWOPC_TEST_KAFKA_BOOTSTRAP (required), TWOPC_BENCH_RECORDS (default 1000000).
 */
#include "tpc_kafka.h"
#include "tpc_test_env.h"
#include "tpc_test_ops.h"

#include <librdkafka/rdkafka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define VALUE_BYTES 100

static const char *bootstrap;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const char *why)
{
    fprintf(stderr, "bench_kafka: %s: %s\n", what, why ? why : "failed");
    exit(1);
}

static void create_topic(const char *topic)
{
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, errstr, sizeof errstr))
        die("admin client", errstr);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    rd_kafka_NewTopic_t *nt = rk ? rd_kafka_NewTopic_new(topic, 1, 1, errstr, sizeof errstr) : NULL;
    if (!nt)
        die("create topic", errstr);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
    size_t n = 0;
    const rd_kafka_topic_result_t **res =
        ev ? rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n) : NULL;
    if (!ev || rd_kafka_event_error(ev) || n != 1 || rd_kafka_topic_result_error(res[0]))
        die("create topic", topic);
    rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_NewTopic_destroy(nt);
    rd_kafka_destroy(rk);
}

static double run_sink(uint64_t records)
{
    char topic[128], prefix[128];
    tpc_test_unique_name(topic, sizeof topic, "twopc-bench", '-');
    tpc_test_unique_name(prefix, sizeof prefix, "twopc-bench", '-');
    create_topic(topic);
    char *ckpt = tpc_test_tmpdir("bench-kafka-ckpt");
    tpc_test_seq_conf_t src = {
        .count_default = records, .per_poll = 256, .value_pad = VALUE_BYTES - 8};
    tpc_job_t *job = tpc_job_new("bench-kafka");
    tpc_txn_sink_t *sink = NULL;
    int s, k;
    tpc_error_t *err = tpc_job_set(job, "checkpoint.dir", ckpt);
    if (!err)
        err = tpc_job_set(job, "checkpoint.interval.ms", "1000");
    if (!err)
        err = tpc_kafka_sink_new(bootstrap, topic, &sink);
    if (!err)
        err = tpc_txn_sink_set(sink, "transactional.id.prefix", prefix);
    if (!err)
        err = tpc_txn_sink_set(sink, "kafka.linger.ms", "5");
    if (!err)
        err = tpc_job_add_vertex(job, "generator", 1, &tpc_test_seq_source_ops, &src, &s);
    if (!err)
        err = tpc_txn_sink_add_to_job(sink, job, "kafka", 1, &k);
    if (!err)
        err = tpc_job_connect(job, s, k, TPC_EDGE_FORWARD);
    double t0 = now_s();
    tpc_job_result_t result;
    if (!err)
        err = tpc_job_run(job, &result);
    double secs = now_s() - t0;
    if (err)
        die("sink job", tpc_error_message(err));
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(sink);
    tpc_test_rmdir(ckpt);
    free(ckpt);
    return (double)records / secs;
}

static void check(rd_kafka_error_t *e, const char *what)
{
    if (e)
        die(what, rd_kafka_error_string(e));
}

static double run_raw(uint64_t records)
{
    char topic[128], id[128], errstr[512];
    tpc_test_unique_name(topic, sizeof topic, "twopc-bench-raw", '-');
    tpc_test_unique_name(id, sizeof id, "twopc-bench-raw", '-');
    create_topic(topic);
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, errstr, sizeof errstr) ||
        rd_kafka_conf_set(conf, "transactional.id", id, errstr, sizeof errstr) ||
        rd_kafka_conf_set(conf, "linger.ms", "5", errstr, sizeof errstr) ||
        rd_kafka_conf_set(conf, "partitioner", "murmur2_random", errstr, sizeof errstr))
        die("raw producer", errstr);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    if (!rk)
        die("raw producer", errstr);
    double t0 = now_s();
    check(rd_kafka_init_transactions(rk, 30000), "init_transactions");
    check(rd_kafka_begin_transaction(rk), "begin_transaction");
    unsigned char key[8], value[VALUE_BYTES] = {0};
    double next_commit = now_s() + 1.0;
    for (uint64_t i = 0; i < records; i++) {
        for (int b = 0; b < 8; b++)
            key[b] = value[b] = (unsigned char)(i >> (8 * (7 - b)));
        while (rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, 8),
                                 RD_KAFKA_V_VALUE(value, VALUE_BYTES),
                                 RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                 RD_KAFKA_V_END) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(rk, 5);
        if ((i & 255) == 0 && now_s() >= next_commit) {
            check(rd_kafka_commit_transaction(rk, 60000), "commit_transaction");
            check(rd_kafka_begin_transaction(rk), "begin_transaction");
            next_commit = now_s() + 1.0;
        }
    }
    check(rd_kafka_commit_transaction(rk, 60000), "commit_transaction");
    double secs = now_s() - t0;
    rd_kafka_destroy(rk);
    return (double)records / secs;
}

int main(void)
{
    bootstrap = tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP");
    if (!bootstrap)
        return 1;
    const char *env = tpc_test_env("TWOPC_BENCH_RECORDS");
    uint64_t records = env ? strtoull(env, NULL, 10) : 1000000;
    double sink = 0, raw = 0;
    for (int round = 0; round < 2; round++) {
        double r = run_raw(records);
        double s = run_sink(records);
        raw = r > raw ? r : raw;
        sink = s > sink ? s : sink;
    }
    printf("bench kafka sink_rec_per_s %.0f rec/s\n", sink);
    printf("bench kafka raw_rec_per_s %.0f rec/s\n", raw);
    printf("bench kafka ratio %.3f x\n", sink / raw);
    return 0;
}
