/*
 * Kafka sink throughput against a plain librdkafka transactional producer, in the same run on the
 * same broker.
 *
 *   sink: sequence source -> exactly-once Kafka sink, checkpoints every second (each one a flush
 *         with every delivery report, then a commit when the checkpoint is complete)
 *   raw:  one loop producing the same records with a transactional producer, committing once a
 *         second
 *
 *   source:       bounded Kafka source -> discarding sink, checkpoints every second, over the
 *                 topic the raw producer wrote last (read_committed, markers included)
 *   raw consumer: one read_committed librdkafka consumer reading the same topic start to end
 *   discovery off / on: the same topic read by an unbounded source (cancelled once the counting
 *                 sink has every record), partition discovery off and every 100 ms (100 times
 *                 as often as the default), to show what discovery costs
 *
 * Records are 100-byte values with 8-byte keys. Each pair of sides runs in rounds, taking turns at
 * going first (so that neither always meets a broker warmed up by the other), and each side's
 * best run counts: the ratio compares the two at their best instead of comparing noise. Commit
 * latency is that of every commit of the sink in all rounds, measured by wrapping the sink's
 * commit in a copy of its ops table. Prints
 *   bench kafka <metric> <value> <unit>
 * Environment: TWOPC_TEST_KAFKA_BOOTSTRAP (required), TWOPC_BENCH_RECORDS (default 1000000),
 * TWOPC_BENCH_ROUNDS (default 3).
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
#define MAX_COMMITS 4096

static const char *bootstrap;

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

/* The sink's commit, timed: the wrapper ops table differs from the sink's only there. */
static tpc_txn_connector_ops_t timed_ops;
static const tpc_txn_connector_ops_t *kafka_ops;
static double commit_ms[MAX_COMMITS];
static int commits;

static tpc_error_t *timed_commit(void *conn, void *txn)
{
    double t0 = tpc_test_now_s();
    tpc_error_t *err = kafka_ops->commit(conn, txn);
    if (!err && commits < MAX_COMMITS)
        commit_ms[commits++] = (tpc_test_now_s() - t0) * 1000.0;
    return err;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double percentile(double *v, int n, double p)
{
    if (n == 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int i = (int)(p * (n - 1) + 0.5);
    return v[i];
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
    tpc_txn_sink_t *conf_sink = NULL, *sink = NULL;
    int s, k;
    tpc_error_t *err = tpc_job_set(job, "checkpoint.dir", ckpt);
    if (!err)
        err = tpc_job_set(job, "checkpoint.interval.ms", "1000");
    if (!err)
        err = tpc_kafka_sink_new(bootstrap, topic, &conf_sink);
    if (!err)
        err = tpc_txn_sink_set(conf_sink, "transactional.id.prefix", prefix);
    if (!err)
        err = tpc_txn_sink_set(conf_sink, "kafka.linger.ms", "5");
    if (!err) {
        /* conf_sink keeps owning the configuration; the timed sink borrows it. */
        kafka_ops = tpc_txn_sink_connector_ops(conf_sink);
        timed_ops = *kafka_ops;
        timed_ops.commit = timed_commit;
        timed_ops.configure = NULL;
        timed_ops.release = NULL;
        err = tpc_txn_sink_new(&timed_ops, tpc_txn_sink_connector_arg(conf_sink), &sink);
    }
    if (!err)
        err = tpc_job_add_vertex(job, "generator", 1, &tpc_test_seq_source_ops, &src, &s);
    if (!err)
        err = tpc_txn_sink_add_to_job(sink, job, "kafka", 1, &k);
    if (!err)
        err = tpc_job_connect(job, s, k, TPC_EDGE_FORWARD);
    double t0 = tpc_test_now_s();
    tpc_job_result_t result;
    if (!err)
        err = tpc_job_run(job, &result);
    double secs = tpc_test_now_s() - t0;
    if (err)
        die("sink job", tpc_error_message(err));
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(sink);
    tpc_txn_sink_destroy(conf_sink);
    tpc_test_rmdir(ckpt);
    free(ckpt);
    return (double)records / secs;
}

static void check(rd_kafka_error_t *e, const char *what)
{
    if (e)
        die(what, rd_kafka_error_string(e));
}

/* @topic (128 bytes) receives the name of the topic written, which the source part reads. */
static double run_raw(uint64_t records, char *topic)
{
    char id[128], errstr[512];
    tpc_test_unique_name(topic, 128, "twopc-bench-raw", '-');
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
    double t0 = tpc_test_now_s();
    check(rd_kafka_init_transactions(rk, 30000), "init_transactions");
    check(rd_kafka_begin_transaction(rk), "begin_transaction");
    unsigned char key[8], value[VALUE_BYTES] = {0};
    double next_commit = tpc_test_now_s() + 1.0;
    for (uint64_t i = 0; i < records; i++) {
        for (int b = 0; b < 8; b++)
            key[b] = value[b] = (unsigned char)(i >> (8 * (7 - b)));
        while (rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, 8),
                                 RD_KAFKA_V_VALUE(value, VALUE_BYTES),
                                 RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                 RD_KAFKA_V_END) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(rk, 5);
        if ((i & 255) == 0 && tpc_test_now_s() >= next_commit) {
            check(rd_kafka_commit_transaction(rk, 60000), "commit_transaction");
            check(rd_kafka_begin_transaction(rk), "begin_transaction");
            next_commit = tpc_test_now_s() + 1.0;
        }
    }
    check(rd_kafka_commit_transaction(rk, 60000), "commit_transaction");
    double secs = tpc_test_now_s() - t0;
    rd_kafka_destroy(rk);
    return (double)records / secs;
}

/* Bounded Kafka source -> discarding sink over @topic, checkpoints every second. */
static double run_source(const char *topic, uint64_t records)
{
    char *ckpt = tpc_test_tmpdir("bench-kafka-source");
    tpc_job_t *job = tpc_job_new("bench-kafka-source");
    tpc_kafka_source_t *src = NULL;
    int s, k;
    tpc_error_t *err = tpc_job_set(job, "checkpoint.dir", ckpt);
    if (!err)
        err = tpc_job_set(job, "checkpoint.interval.ms", "1000");
    if (!err)
        err = tpc_kafka_source_new(bootstrap, topic, &src);
    if (!err)
        err = tpc_kafka_source_set(src, "bounded", "true");
    if (!err)
        err = tpc_kafka_source_add_to_job(src, job, "kafka", 1, &s);
    if (!err)
        err = tpc_job_add_vertex(job, "discard", 1, &tpc_test_discard_ops, NULL, &k);
    if (!err)
        err = tpc_job_connect(job, s, k, TPC_EDGE_FORWARD);
    double t0 = tpc_test_now_s();
    tpc_job_result_t result;
    if (!err)
        err = tpc_job_run(job, &result);
    double secs = tpc_test_now_s() - t0;
    if (err)
        die("source job", tpc_error_message(err));
    tpc_job_destroy(job);
    tpc_kafka_source_destroy(src);
    tpc_test_rmdir(ckpt);
    free(ckpt);
    return (double)records / secs;
}

/* Counts records; the job is cancelled once every record came, and the time noted. */
typedef struct {
    tpc_job_t *job;
    uint64_t want, got;
    double done_at;
} count_t;

static tpc_error_t *count_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx;
    *self = arg;
    return NULL;
}

static tpc_error_t *count_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)ctx;
    count_t *c = self;
    c->got += tpc_batch_count(batch);
    if (c->got >= c->want && c->done_at == 0) {
        c->done_at = tpc_test_now_s();
        tpc_job_cancel(c->job);
    }
    return NULL;
}

static const tpc_operator_ops_t count_ops = {
    .version = TPC_OPERATOR_OPS_VERSION, .open = count_open, .process = count_process};

/* Unbounded Kafka source -> counting sink over @topic until every record came, discovery every
 * @discovery_ms (0: off), checkpoints every second. */
static double run_unbounded(const char *topic, uint64_t records, const char *discovery_ms)
{
    char *ckpt = tpc_test_tmpdir("bench-kafka-unbounded");
    tpc_job_t *job = tpc_job_new("bench-kafka-unbounded");
    tpc_kafka_source_t *src = NULL;
    count_t count = {.job = job, .want = records};
    int s, k;
    tpc_error_t *err = tpc_job_set(job, "checkpoint.dir", ckpt);
    if (!err)
        err = tpc_job_set(job, "checkpoint.interval.ms", "1000");
    if (!err)
        err = tpc_kafka_source_new(bootstrap, topic, &src);
    if (!err)
        err = tpc_kafka_source_set(src, "partition.discovery.interval.ms", discovery_ms);
    if (!err)
        err = tpc_kafka_source_add_to_job(src, job, "kafka", 1, &s);
    if (!err)
        err = tpc_job_add_vertex(job, "count", 1, &count_ops, &count, &k);
    if (!err)
        err = tpc_job_connect(job, s, k, TPC_EDGE_FORWARD);
    double t0 = tpc_test_now_s();
    tpc_job_result_t result;
    if (!err)
        err = tpc_job_run(job, &result);
    if (err)
        die("unbounded source job", tpc_error_message(err));
    if (count.got < records)
        die("unbounded source job", "ended before every record came");
    tpc_job_destroy(job);
    tpc_kafka_source_destroy(src);
    tpc_test_rmdir(ckpt);
    free(ckpt);
    return (double)records / (count.done_at - t0);
}

/* A plain read_committed consumer reading @topic (one partition) from its start to its end. */
static double run_raw_consumer(const char *topic, uint64_t records)
{
    char errstr[512], group[128];
    tpc_test_unique_name(group, sizeof group, "twopc-bench-raw", '-');
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, errstr, sizeof errstr) ||
        rd_kafka_conf_set(conf, "group.id", group, errstr, sizeof errstr) ||
        rd_kafka_conf_set(conf, "isolation.level", "read_committed", errstr, sizeof errstr) ||
        rd_kafka_conf_set(conf, "enable.auto.commit", "false", errstr, sizeof errstr) ||
        rd_kafka_conf_set(conf, "enable.partition.eof", "true", errstr, sizeof errstr))
        die("raw consumer", errstr);
    double t0 = tpc_test_now_s();
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    if (!rk)
        die("raw consumer", errstr);
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, topic, 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
    if (rd_kafka_assign(rk, list))
        die("raw consumer", "assign");
    rd_kafka_topic_partition_list_destroy(list);
    uint64_t got = 0;
    while (got < records) {
        rd_kafka_message_t *msg = rd_kafka_consumer_poll(rk, 100);
        if (!msg)
            continue;
        if (!msg->err)
            got++;
        else if (msg->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
            die("raw consumer", rd_kafka_message_errstr(msg));
        rd_kafka_message_destroy(msg);
    }
    double secs = tpc_test_now_s() - t0;
    rd_kafka_consumer_close(rk);
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
    env = tpc_test_env("TWOPC_BENCH_ROUNDS");
    int rounds = env ? atoi(env) : 3;
    rounds = rounds < 1 ? 1 : rounds;
    double sink = 0, raw = 0;
    char topic[128];
    for (int round = 0; round < rounds; round++) {
        double r, s;
        if (round % 2 == 0) {
            r = run_raw(records, topic);
            s = run_sink(records);
        } else {
            s = run_sink(records);
            r = run_raw(records, topic);
        }
        fprintf(stderr, "bench_kafka: round %d: sink %.0f rec/s, raw %.0f rec/s\n", round + 1, s,
                r);
        raw = r > raw ? r : raw;
        sink = s > sink ? s : sink;
    }
    /* The source part reads the last topic the raw producer wrote: committed transactions with
     * their markers, as exactly-once producers leave them. */
    double source = 0, consumer = 0;
    for (int round = 0; round < rounds; round++) {
        double c, s;
        if (round % 2 == 0) {
            c = run_raw_consumer(topic, records);
            s = run_source(topic, records);
        } else {
            s = run_source(topic, records);
            c = run_raw_consumer(topic, records);
        }
        fprintf(stderr, "bench_kafka: round %d: source %.0f rec/s, raw consumer %.0f rec/s\n",
                round + 1, s, c);
        consumer = c > consumer ? c : consumer;
        source = s > source ? s : source;
    }
    double off = 0, on = 0;
    for (int round = 0; round < rounds; round++) {
        double f, o;
        if (round % 2 == 0) {
            f = run_unbounded(topic, records, "0");
            o = run_unbounded(topic, records, "100");
        } else {
            o = run_unbounded(topic, records, "100");
            f = run_unbounded(topic, records, "0");
        }
        fprintf(
            stderr,
            "bench_kafka: round %d: unbounded source, discovery off %.0f rec/s, on %.0f rec/s\n",
            round + 1, f, o);
        off = f > off ? f : off;
        on = o > on ? o : on;
    }
    int n = commits;
    printf("bench kafka sink_rec_per_s %.0f rec/s\n", sink);
    printf("bench kafka raw_rec_per_s %.0f rec/s\n", raw);
    printf("bench kafka ratio %.3f x\n", sink / raw);
    printf("bench kafka commit_p50_ms %.2f ms\n", percentile(commit_ms, n, 0.50));
    printf("bench kafka commit_p99_ms %.2f ms\n", percentile(commit_ms, n, 0.99));
    printf("bench kafka source_rec_per_s %.0f rec/s\n", source);
    printf("bench kafka raw_consumer_rec_per_s %.0f rec/s\n", consumer);
    printf("bench kafka source_ratio %.3f x\n", source / consumer);
    printf("bench kafka source_discovery_off_rec_per_s %.0f rec/s\n", off);
    printf("bench kafka source_discovery_100ms_rec_per_s %.0f rec/s\n", on);
    printf("bench kafka source_discovery_ratio %.3f x\n", on / off);
    return 0;
}
