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
 *   raw consumer: one read_committed librdkafka consumer reading the same topic start to end,
 *                 with librdkafka's defaults
 *   discovery:    the same topic read by an unbounded source (canceled once its counting sink
 *                 has every record), partition discovery off, at its default (every 10 s) and
 *                 every 100 ms (a hundred times as often), to show what discovery costs
 *   pipeline:     bounded Kafka source -> exactly-once Kafka sink (the job users run), its rate
 *                 from the sink's first to its last write (steady state)
 *   fast consumer: the same, tuned for raw speed rather than memory (FAST_CONSUMER below: a
 *                 read-ahead queue of up to a million records, taken in batches of 1000), which is
 *                 what the broker can deliver to one consumer on this machine
 *
 * Each source-side run is a child process of its own, so that its peak resident memory (rss) is
 * its own; the longest gap between two records reaching the discarding sink (source_max_gap_ms)
 * shows stalls of the source that a rate hides.
 *
 * Records are 100-byte values with 8-byte keys. Each pair of sides runs in rounds, taking turns at
 * going first (so that neither always meets a broker warmed up by the other), and each side's
 * best run counts: the ratio compares the two at their best instead of comparing noise. Commit
 * latency is that of every commit of the sink in all rounds, measured by wrapping the sink's
 * commit in a copy of its ops table; the start of the sink's producers (median of all rounds) by
 * wrapping its abort_lingering, which initialises every transactional id of the pool. Prints
 *   bench kafka <metric> <value> <unit>
 * Environment: TWOPC_TEST_KAFKA_BOOTSTRAP (required), TWOPC_BENCH_RECORDS (default 1000000),
 * TWOPC_BENCH_ROUNDS (default 3), TWOPC_BENCH_PART (sink, source, discovery (the discovery
 * comparison alone) or all, the default),
 * TWOPC_BENCH_SOURCE_PROPS (extra kafka.* keys of the source, "name=value,name=value", to try
 * other librdkafka settings).
 */
#include "tpc_kafka.h"
#include "tpc_test_bench.h"
#include "tpc_test_env.h"
#include "tpc_test_ops.h"

#include <librdkafka/rdkafka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define VALUE_BYTES 100
#define MAX_COMMITS 4096

static const char *bootstrap;

static void die(const char *what, const char *why)
{
    fprintf(stderr, "bench_kafka: %s: %s\n", what, why ? why : "failed");
    exit(1);
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

/* The sink's start of its producers (abort_lingering initialises every transactional id). */
static double start_ms[MAX_COMMITS];
static int starts;

static tpc_error_t *timed_abort_lingering(void *conn, const tpc_txn_lingering_t *lingering)
{
    double t0 = tpc_test_now_s();
    tpc_error_t *err = kafka_ops->abort_lingering(conn, lingering);
    if (!err && starts < MAX_COMMITS)
        start_ms[starts++] = (tpc_test_now_s() - t0) * 1000.0;
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
    tpc_test_bench_create_topic(bootstrap, topic, 1);
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
        timed_ops.abort_lingering = timed_abort_lingering;
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
    double secs = tpc_test_bench_run_job(job, err, "sink job");
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
    tpc_test_bench_create_topic(bootstrap, topic, 1);
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

/* A sink that drops records and keeps the longest gap between two batches after the first. */
typedef struct {
    double last_s;
    double max_gap_s;
} gap_sink_t;

static gap_sink_t gaps;

static tpc_error_t *gap_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx;
    *self = arg;
    return NULL;
}

static tpc_error_t *gap_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    gap_sink_t *g = self;
    (void)ctx;
    (void)batch;
    double now = tpc_test_now_s();
    if (g->last_s > 0 && now - g->last_s > g->max_gap_s)
        g->max_gap_s = now - g->last_s;
    g->last_s = now;
    return NULL;
}

static const tpc_operator_ops_t gap_sink_ops = {
    .version = TPC_OPERATOR_OPS_VERSION, .open = gap_open, .process = gap_process};

/* What one source-side run measured. */
typedef struct {
    double rate;
    double max_gap_ms;
    long rss_kb;
} side_t;

/* Run @fn in a child process: its rate and gap come back through a pipe, its peak memory from
 * wait4(). */
static side_t in_child(side_t (*fn)(const char *, uint64_t), const char *topic, uint64_t records)
{
    int fds[2];
    if (pipe(fds) != 0)
        die("pipe", NULL);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        die("fork", NULL);
    if (pid == 0) {
        close(fds[0]);
        side_t r = fn(topic, records);
        if (write(fds[1], &r, sizeof r) != (ssize_t)sizeof r)
            _exit(2);
        _exit(0);
    }
    close(fds[1]);
    side_t r = {0};
    ssize_t got = read(fds[0], &r, sizeof r);
    close(fds[0]);
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
        got != (ssize_t)sizeof r)
        die("source-side run", "child failed");
    r.rss_kb = ru.ru_maxrss;
    return r;
}

/* TWOPC_BENCH_SOURCE_PROPS on @src, as kafka.* keys. */
static tpc_error_t *with_extra_props(tpc_kafka_source_t *src)
{
    const char *extra = tpc_test_env("TWOPC_BENCH_SOURCE_PROPS");
    char *list = extra ? strdup(extra) : NULL, *save = NULL;
    tpc_error_t *err = NULL;
    for (char *kv = list ? strtok_r(list, ",", &save) : NULL; !err && kv;
         kv = strtok_r(NULL, ",", &save)) {
        char key[256], *eq = strchr(kv, '=');
        if (!eq)
            die("TWOPC_BENCH_SOURCE_PROPS", "expected name=value,name=value");
        *eq = '\0';
        snprintf(key, sizeof key, "kafka.%s", kv);
        err = tpc_kafka_source_set(src, key, eq + 1);
    }
    free(list);
    return err;
}

/* Bounded Kafka source -> gap-keeping discarding sink over @topic, checkpoints every second. */
static side_t run_source(const char *topic, uint64_t records)
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
        err = with_extra_props(src);
    if (!err)
        err = tpc_kafka_source_add_to_job(src, job, "kafka", 1, &s);
    if (!err)
        err = tpc_job_add_vertex(job, "discard", 1, &gap_sink_ops, &gaps, &k);
    if (!err)
        err = tpc_job_connect(job, s, k, TPC_EDGE_FORWARD);
    double secs = tpc_test_bench_run_job(job, err, "source job");
    tpc_job_destroy(job);
    tpc_kafka_source_destroy(src);
    tpc_test_rmdir(ckpt);
    free(ckpt);
    return (side_t){.rate = (double)records / secs, .max_gap_ms = gaps.max_gap_s * 1000.0};
}

/* Counts records and keeps the longest gap; cancels the job once every record came. */
typedef struct {
    tpc_job_t *job;
    uint64_t want, got;
    double done_at;
} count_t;

static count_t counted;

static tpc_error_t *count_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    count_t *c = self;
    gap_process(&gaps, ctx, batch);
    c->got += tpc_batch_count(batch);
    if (c->got >= c->want && c->done_at == 0) {
        c->done_at = tpc_test_now_s();
        tpc_job_cancel(c->job);
    }
    return NULL;
}

static const tpc_operator_ops_t count_ops = {
    .version = TPC_OPERATOR_OPS_VERSION, .open = gap_open, .process = count_process};

/* Unbounded Kafka source -> counting sink over @topic until every record came, discovery every
 * @discovery_ms (0: off), checkpoints every second. */
static side_t run_unbounded(const char *topic, uint64_t records, const char *discovery_ms)
{
    char *ckpt = tpc_test_tmpdir("bench-kafka-unbounded");
    tpc_job_t *job = tpc_job_new("bench-kafka-unbounded");
    tpc_kafka_source_t *src = NULL;
    counted = (count_t){.job = job, .want = records};
    int s, k;
    tpc_error_t *err = tpc_job_set(job, "checkpoint.dir", ckpt);
    if (!err)
        err = tpc_job_set(job, "checkpoint.interval.ms", "1000");
    if (!err)
        err = tpc_kafka_source_new(bootstrap, topic, &src);
    if (!err)
        err = tpc_kafka_source_set(src, "partition.discovery.interval.ms", discovery_ms);
    if (!err)
        err = with_extra_props(src);
    if (!err)
        err = tpc_kafka_source_add_to_job(src, job, "kafka", 1, &s);
    if (!err)
        err = tpc_job_add_vertex(job, "count", 1, &count_ops, &counted, &k);
    if (!err)
        err = tpc_job_connect(job, s, k, TPC_EDGE_FORWARD);
    double t0 = tpc_test_now_s();
    tpc_test_bench_run_job(job, err, "unbounded source job");
    if (counted.got < records)
        die("unbounded source job", "ended before every record came");
    tpc_job_destroy(job);
    tpc_kafka_source_destroy(src);
    tpc_test_rmdir(ckpt);
    free(ckpt);
    return (side_t){.rate = (double)records / (counted.done_at - t0),
                    .max_gap_ms = gaps.max_gap_s * 1000.0};
}

static side_t run_discovery_off(const char *topic, uint64_t records)
{
    return run_unbounded(topic, records, "0");
}

static side_t run_discovery_default(const char *topic, uint64_t records)
{
    return run_unbounded(topic, records, "10000");
}

static side_t run_discovery_100ms(const char *topic, uint64_t records)
{
    return run_unbounded(topic, records, "100");
}

/* The sink's write, timed: the first and last write and the longest gap between two. */
static tpc_txn_connector_ops_t gap_ops;
static double first_write_s, last_write_s;

static tpc_error_t *gap_write(void *conn, void *txn, const tpc_record_t *records, size_t count)
{
    double now = tpc_test_now_s();
    if (first_write_s == 0)
        first_write_s = now;
    else if (now - last_write_s > gaps.max_gap_s)
        gaps.max_gap_s = now - last_write_s;
    last_write_s = now;
    return kafka_ops->write(conn, txn, records, count);
}

/* Bounded Kafka source -> exactly-once Kafka sink, checkpoints every second: the rate from the
 * first to the last record the sink wrote (steady state, without start and end). */
static side_t run_pipeline(const char *topic, uint64_t records)
{
    char out[128], prefix[128];
    tpc_test_unique_name(out, sizeof out, "twopc-bench-out", '-');
    tpc_test_unique_name(prefix, sizeof prefix, "twopc-bench-pipe", '-');
    tpc_test_bench_create_topic(bootstrap, out, 1);
    char *ckpt = tpc_test_tmpdir("bench-kafka-pipeline");
    tpc_job_t *job = tpc_job_new("bench-kafka-pipeline");
    tpc_kafka_source_t *src = NULL;
    tpc_txn_sink_t *conf_sink = NULL, *sink = NULL;
    int s, k;
    tpc_error_t *err = tpc_job_set(job, "checkpoint.dir", ckpt);
    if (!err)
        err = tpc_job_set(job, "checkpoint.interval.ms", "1000");
    if (!err)
        err = tpc_kafka_source_new(bootstrap, topic, &src);
    if (!err)
        err = tpc_kafka_source_set(src, "bounded", "true");
    if (!err)
        err = with_extra_props(src);
    if (!err)
        err = tpc_kafka_sink_new(bootstrap, out, &conf_sink);
    if (!err)
        err = tpc_txn_sink_set(conf_sink, "transactional.id.prefix", prefix);
    if (!err) {
        kafka_ops = tpc_txn_sink_connector_ops(conf_sink);
        gap_ops = *kafka_ops;
        gap_ops.write = gap_write;
        gap_ops.configure = NULL;
        gap_ops.release = NULL;
        err = tpc_txn_sink_new(&gap_ops, tpc_txn_sink_connector_arg(conf_sink), &sink);
    }
    if (!err)
        err = tpc_kafka_source_add_to_job(src, job, "kafka", 1, &s);
    if (!err)
        err = tpc_txn_sink_add_to_job(sink, job, "out", 1, &k);
    if (!err)
        err = tpc_job_connect(job, s, k, TPC_EDGE_FORWARD);
    tpc_test_bench_run_job(job, err, "pipeline job");
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(sink);
    tpc_txn_sink_destroy(conf_sink);
    tpc_kafka_source_destroy(src);
    tpc_test_rmdir(ckpt);
    free(ckpt);
    return (side_t){.rate = (double)records / (last_write_s - first_write_s),
                    .max_gap_ms = gaps.max_gap_s * 1000.0};
}

/* The consumer tuned for speed: what librdkafka can take from the broker when memory is no
 * concern. */
static const char *const FAST_CONSUMER[] = {"queued.min.messages",
                                            "1000000",
                                            "queued.max.messages.kbytes",
                                            "2097151",
                                            "fetch.message.max.bytes",
                                            "10485760",
                                            NULL};
#define FAST_BATCH 1000

/* A plain read_committed consumer reading @topic (one partition) from its start to its end,
 * librdkafka's settings (@tuned: FAST_CONSUMER, batches of FAST_BATCH). */
static side_t raw_consumer(const char *topic, uint64_t records, bool tuned)
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
    for (int i = 0; tuned && FAST_CONSUMER[i]; i += 2)
        if (rd_kafka_conf_set(conf, FAST_CONSUMER[i], FAST_CONSUMER[i + 1], errstr, sizeof errstr))
            die("fast consumer", errstr);
    double t0 = tpc_test_now_s();
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    if (!rk)
        die("raw consumer", errstr);
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_queue_t *q = rd_kafka_queue_get_consumer(rk);
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, topic, 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
    if (rd_kafka_assign(rk, list))
        die("raw consumer", "assign");
    rd_kafka_topic_partition_list_destroy(list);
    rd_kafka_message_t *msgs[FAST_BATCH];
    uint64_t got = 0;
    double last = 0, max_gap = 0;
    while (got < records) {
        ssize_t n = tuned ? rd_kafka_consume_batch_queue(q, 100, msgs, FAST_BATCH) : 0;
        if (!tuned) {
            msgs[0] = rd_kafka_consumer_poll(rk, 100);
            n = msgs[0] ? 1 : 0;
        }
        for (ssize_t i = 0; i < n; i++) {
            if (!msgs[i]->err) {
                got++;
                double now = tpc_test_now_s();
                if (last > 0 && now - last > max_gap)
                    max_gap = now - last;
                last = now;
            } else if (msgs[i]->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                die("raw consumer", rd_kafka_message_errstr(msgs[i]));
            }
            rd_kafka_message_destroy(msgs[i]);
        }
    }
    double secs = tpc_test_now_s() - t0;
    rd_kafka_queue_destroy(q);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return (side_t){.rate = (double)records / secs, .max_gap_ms = max_gap * 1000.0};
}

static side_t run_raw_consumer(const char *topic, uint64_t records)
{
    return raw_consumer(topic, records, false);
}

static side_t run_fast_consumer(const char *topic, uint64_t records)
{
    return raw_consumer(topic, records, true);
}

static void keep_best(side_t *best, side_t r)
{
    if (r.rate > best->rate)
        *best = r;
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
    const char *part = tpc_test_env("TWOPC_BENCH_PART");
    part = part ? part : "all";
    bool discovery_only = strcmp(part, "discovery") == 0;
    bool sink_part = strcmp(part, "source") != 0 && !discovery_only,
         source_part = strcmp(part, "sink") != 0;
    double sink = 0, raw = 0;
    char topic[128];
    for (int round = 0; sink_part && round < rounds; round++) {
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
    if (sink_part) {
        int n = commits;
        printf("bench kafka sink_rec_per_s %.0f rec/s\n", sink);
        printf("bench kafka raw_rec_per_s %.0f rec/s\n", raw);
        printf("bench kafka ratio %.3f x\n", sink / raw);
        printf("bench kafka commit_p50_ms %.2f ms\n", percentile(commit_ms, n, 0.50));
        printf("bench kafka commit_p99_ms %.2f ms\n", percentile(commit_ms, n, 0.99));
        printf("bench kafka sink_start_producers_ms %.0f ms\n", percentile(start_ms, starts, 0.50));
        fflush(stdout);
    }
    if (!source_part)
        return 0;
    if (!sink_part)
        run_raw(records, topic); /* the topic the source part reads */
    /* The source part reads the last topic the raw producer wrote: committed transactions with
     * their markers, as exactly-once producers leave them. The three sides take turns at going
     * first. */
    side_t source = {0}, consumer = {0}, fast = {0};
    side_t (*const sides[3])(const char *, uint64_t) = {run_source, run_raw_consumer,
                                                        run_fast_consumer};
    for (int round = 0; !discovery_only && round < rounds; round++) {
        side_t got[3];
        for (int i = 0; i < 3; i++) {
            int which = (round + i) % 3;
            got[which] = in_child(sides[which], topic, records);
        }
        fprintf(stderr,
                "bench_kafka: round %d: source %.0f rec/s (gap %.0f ms, rss %ld kB), raw consumer "
                "%.0f rec/s (gap %.0f ms, rss %ld kB), fast consumer %.0f rec/s (gap %.0f ms, rss "
                "%ld kB)\n",
                round + 1, got[0].rate, got[0].max_gap_ms, got[0].rss_kb, got[1].rate,
                got[1].max_gap_ms, got[1].rss_kb, got[2].rate, got[2].max_gap_ms, got[2].rss_kb);
        keep_best(&source, got[0]);
        keep_best(&consumer, got[1]);
        keep_best(&fast, got[2]);
    }
    if (!discovery_only) {
        fprintf(stderr, "bench_kafka: fast consumer settings:");
        for (int i = 0; FAST_CONSUMER[i]; i += 2)
            fprintf(stderr, " %s=%s", FAST_CONSUMER[i], FAST_CONSUMER[i + 1]);
        fprintf(stderr, ", rd_kafka_consume_batch_queue() of %d\n", FAST_BATCH);
        printf("bench kafka source_rec_per_s %.0f rec/s\n", source.rate);
        printf("bench kafka source_max_gap_ms %.0f ms\n", source.max_gap_ms);
        printf("bench kafka source_rss_kb %ld kB\n", source.rss_kb);
        printf("bench kafka raw_consumer_rec_per_s %.0f rec/s\n", consumer.rate);
        printf("bench kafka raw_consumer_max_gap_ms %.0f ms\n", consumer.max_gap_ms);
        printf("bench kafka raw_consumer_rss_kb %ld kB\n", consumer.rss_kb);
        printf("bench kafka fast_consumer_rec_per_s %.0f rec/s\n", fast.rate);
        printf("bench kafka fast_consumer_max_gap_ms %.0f ms\n", fast.max_gap_ms);
        printf("bench kafka fast_consumer_rss_kb %ld kB\n", fast.rss_kb);
        printf("bench kafka source_ratio %.3f x\n", source.rate / consumer.rate);
        printf("bench kafka source_fast_ratio %.3f x\n", source.rate / fast.rate);
        fflush(stdout);
    }
    /* Unbounded source, discovery off, at its default (10 s) and every 100 ms, taking turns at
     * going first. */
    side_t disc[3] = {{0}};
    side_t (*const variants[3])(const char *, uint64_t) = {run_discovery_off, run_discovery_default,
                                                           run_discovery_100ms};
    for (int round = 0; round < rounds; round++) {
        side_t got[3];
        for (int i = 0; i < 3; i++) {
            int which = (round + i) % 3;
            got[which] = in_child(variants[which], topic, records);
        }
        fprintf(stderr,
                "bench_kafka: round %d: unbounded source, discovery off %.0f rec/s (gap %.0f ms), "
                "every 10 s %.0f rec/s (gap %.0f ms), every 100 ms %.0f rec/s (gap %.0f ms)\n",
                round + 1, got[0].rate, got[0].max_gap_ms, got[1].rate, got[1].max_gap_ms,
                got[2].rate, got[2].max_gap_ms);
        for (int i = 0; i < 3; i++)
            keep_best(&disc[i], got[i]);
    }
    printf("bench kafka source_discovery_off_rec_per_s %.0f rec/s\n", disc[0].rate);
    printf("bench kafka source_discovery_10s_rec_per_s %.0f rec/s\n", disc[1].rate);
    printf("bench kafka source_discovery_100ms_rec_per_s %.0f rec/s\n", disc[2].rate);
    printf("bench kafka source_discovery_off_max_gap_ms %.0f ms\n", disc[0].max_gap_ms);
    printf("bench kafka source_discovery_10s_max_gap_ms %.0f ms\n", disc[1].max_gap_ms);
    printf("bench kafka source_discovery_100ms_max_gap_ms %.0f ms\n", disc[2].max_gap_ms);
    printf("bench kafka source_discovery_10s_ratio %.3f x\n", disc[1].rate / disc[0].rate);
    printf("bench kafka source_discovery_100ms_ratio %.3f x\n", disc[2].rate / disc[0].rate);
    fflush(stdout);
    if (discovery_only)
        return 0;
    side_t pipe = {0};
    for (int round = 0; round < rounds; round++) {
        side_t r = in_child(run_pipeline, topic, records);
        fprintf(stderr,
                "bench_kafka: round %d: kafka -> kafka steady %.0f rec/s (gap %.0f ms, rss %ld "
                "kB)\n",
                round + 1, r.rate, r.max_gap_ms, r.rss_kb);
        keep_best(&pipe, r);
    }
    printf("bench kafka pipeline_steady_rec_per_s %.0f rec/s\n", pipe.rate);
    printf("bench kafka pipeline_max_gap_ms %.0f ms\n", pipe.max_gap_ms);
    printf("bench kafka pipeline_rss_kb %ld kB\n", pipe.rss_kb);
    return 0;
}
