/*
 * The job whose metrics docs/img/twopc-dashboard.png shows (tests/bench/dashboard_png.sh): a Kafka
 * source reading a three-partition topic that a producer keeps filling, an operator, and an
 * exactly-once Kafka sink and PostgreSQL sink, with its metrics endpoint on ADDRESS. It goes
 * through the weather an operator meets, in phases of the run's SECONDS:
 *   0-25%   steady: the operator keeps up with the producer
 *   25-45%  slow: the operator takes half the input rate, so the source's lag grows
 *   at 35%  a 5 s stall of the operator, above checkpoint.timeout.ms (3 s): checkpoints time out
 *   45-50%  steady again: the lag drains
 *   50-58%  a slow disk: each checkpoint write takes 4 s, so the sinks' transactions wait about
 *           two writes for their commit and age toward the Kafka sink's transaction timeout
 *           (15 s here: writes of 8 s or more would let them pass it)
 *   58-66%  steady
 *   66-72%  checkpoint writes fail (as a full or failing disk fails them): the job restarts
 *   72-100% steady
 * The disk's weather comes through the runtime's fault hook for checkpoint writes. Then it cancels
 * the job and keeps serving for 3 s (a last scrape). The servers are the test servers':
 * TWOPC_TEST_KAFKA_BOOTSTRAP and TWOPC_TEST_PG_CONNINFO.
 *
 *   dashboard_job ADDRESS CHECKPOINT_DIR SECONDS
 */
#include "tpc_kafka.h"
#include "tpc_pg.h"
#include "tpc_test_env.h"

#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The runtime's test hook: an error from it fails a checkpoint's write (runtime/storage.c). */
extern tpc_error_t *(*tpc__checkpoint_write_fault)(uint64_t id);

#define RATE       2000 /* records per second the producer writes */
#define PARTITIONS 3

static atomic_int per_record_us = 0; /* the operator's pace */
static atomic_int stall_ms = 0;      /* the operator sleeps that long once */
static atomic_bool producing = true;

static tpc_error_t *disk_slow(uint64_t id)
{
    (void)id;
    sleep(4);
    return NULL;
}

static tpc_error_t *disk_fails(uint64_t id)
{
    return tpc_error_new(TPC_ERR_IO, 0, "checkpoint %llu: no space left on device (simulated)",
                         (unsigned long long)id);
}

static void die(const char *what, const char *why)
{
    fprintf(stderr, "dashboard_job: %s: %s\n", what, why);
    exit(1);
}

static void ok(tpc_error_t *err, const char *what)
{
    if (err)
        die(what, tpc_error_message(err));
}

static rd_kafka_t *client(const char *bootstrap, rd_kafka_type_t type)
{
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, errstr, sizeof errstr) ||
        rd_kafka_conf_set(conf, "linger.ms", "5", errstr, sizeof errstr))
        die("librdkafka configuration", errstr);
    rd_kafka_t *rk = rd_kafka_new(type, conf, errstr, sizeof errstr);
    if (!rk)
        die("librdkafka client", errstr);
    return rk;
}

static void create_topic(const char *bootstrap, const char *topic)
{
    rd_kafka_t *rk = client(bootstrap, RD_KAFKA_PRODUCER);
    char errstr[512];
    rd_kafka_NewTopic_t *t = rd_kafka_NewTopic_new(topic, PARTITIONS, 1, errstr, sizeof errstr);
    if (!t)
        die("topic", errstr);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_CreateTopics(rk, &t, 1, NULL, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
    size_t n = 0;
    const rd_kafka_topic_result_t **res =
        ev ? rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n) : NULL;
    if (!ev || n != 1 || rd_kafka_topic_result_error(res[0]))
        die("could not create topic", ev && n ? rd_kafka_topic_result_error_string(res[0]) : topic);
    rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_NewTopic_destroy(t);
    rd_kafka_destroy(rk);
}

static void delete_topic(const char *bootstrap, const char *topic)
{
    rd_kafka_t *rk = client(bootstrap, RD_KAFKA_PRODUCER);
    rd_kafka_DeleteTopic_t *t = rd_kafka_DeleteTopic_new(topic);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_DeleteTopics(rk, &t, 1, NULL, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_DeleteTopic_destroy(t);
    rd_kafka_destroy(rk);
}

typedef struct {
    const char *bootstrap, *topic;
} fill_t;

/* RATE records a second, in steps of 20 ms, until told to stop. */
static void *produce(void *arg)
{
    fill_t *f = arg;
    rd_kafka_t *rk = client(f->bootstrap, RD_KAFKA_PRODUCER);
    uint64_t i = 0;
    while (atomic_load(&producing)) {
        for (int k = 0; k < RATE / 50; k++, i++) {
            char key[32], value[32];
            int kl = snprintf(key, sizeof key, "key-%llu", (unsigned long long)(i % 997));
            int vl = snprintf(value, sizeof value, "%llu", (unsigned long long)i);
            while (rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(f->topic), RD_KAFKA_V_KEY(key, kl),
                                     RD_KAFKA_V_VALUE(value, vl),
                                     RD_KAFKA_V_END) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
                rd_kafka_poll(rk, 10);
        }
        rd_kafka_poll(rk, 0);
        usleep(20 * 1000);
    }
    rd_kafka_flush(rk, 10000);
    rd_kafka_destroy(rk);
    return NULL;
}

static tpc_error_t *work_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx, (void)arg;
    *self = NULL;
    return NULL;
}

static tpc_error_t *work_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)self;
    int stall = atomic_exchange(&stall_ms, 0);
    if (stall)
        usleep((useconds_t)stall * 1000);
    int us = atomic_load(&per_record_us);
    if (us)
        usleep((useconds_t)(us * (int)tpc_batch_count(batch)));
    for (size_t i = 0; i < tpc_batch_count(batch); i++) {
        tpc_record_t rec;
        tpc_batch_get(batch, i, &rec);
        tpc_err_t rc = tpc_emit(ctx, &rec);
        if (rc != TPC_OK)
            return tpc_error_new(rc, 0, "emit: %s", tpc_strerror(rc));
    }
    return NULL;
}

static const tpc_operator_ops_t work_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = work_open,
    .process = work_process,
};

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

static void pg_exec(const char *conninfo, const char *sql)
{
    PGconn *c = PQconnectdb(conninfo);
    PGresult *res = PQexec(c, sql);
    if (PQresultStatus(res) != PGRES_COMMAND_OK)
        die(sql, PQerrorMessage(c));
    PQclear(res);
    PQfinish(c);
}

int main(int argc, char **argv)
{
    if (argc != 4 || atoi(argv[3]) < 20)
        die("usage", "dashboard_job ADDRESS CHECKPOINT_DIR SECONDS (at least 20)");
    const char *listen = argv[1], *dir = argv[2];
    int seconds = atoi(argv[3]);
    const char *bootstrap = tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP");
    const char *conninfo = tpc_test_env_require("TWOPC_TEST_PG_CONNINFO");
    if (!bootstrap || !conninfo)
        return 1;
    char in[128], out[128], table[96], sql[256];
    snprintf(in, sizeof in, "dashboard-in-%ld-%d", (long)time(NULL), (int)getpid());
    snprintf(out, sizeof out, "dashboard-out-%ld-%d", (long)time(NULL), (int)getpid());
    snprintf(table, sizeof table, "dashboard_%ld_%d", (long)time(NULL), (int)getpid());
    create_topic(bootstrap, in);
    create_topic(bootstrap, out);
    snprintf(sql, sizeof sql, "CREATE TABLE %s (k bytea, v bytea)", table);
    pg_exec(conninfo, sql);

    tpc_job_t *job = tpc_job_new("dashboard");
    tpc_job_set_logger(job, NULL, NULL, TPC_LOG_ERROR);
    const char *job_keys[][2] = {{"metrics.listen", listen},
                                 {"checkpoint.dir", dir},
                                 {"checkpoint.interval.ms", "1000"},
                                 {"checkpoint.timeout.ms", "3000"},
                                 {"checkpoint.tolerable-failures", "100"},
                                 {"restart.attempts", "1000"},
                                 {"restart.delay.ms", "1000"}};
    for (size_t i = 0; i < sizeof job_keys / sizeof job_keys[0]; i++)
        ok(tpc_job_set(job, job_keys[i][0], job_keys[i][1]), job_keys[i][0]);
    tpc_kafka_source_t *src = NULL;
    tpc_txn_sink_t *kafka = NULL, *rows = NULL;
    ok(tpc_kafka_source_new(bootstrap, in, &src), "source");
    ok(tpc_kafka_sink_new(bootstrap, out, &kafka), "kafka sink");
    ok(tpc_txn_sink_set(kafka, "transactional.id.prefix", out), "kafka sink");
    ok(tpc_txn_sink_set(kafka, "kafka.transaction.timeout.ms", "15000"), "kafka sink");
    ok(tpc_pg_sink_new(&rows), "postgres sink");
    ok(tpc_txn_sink_set(rows, "pg.conninfo", conninfo), "postgres sink");
    ok(tpc_txn_sink_set(rows, "pg.table", table), "postgres sink");
    ok(tpc_txn_sink_set(rows, "pg.gid-prefix", table), "postgres sink");
    int s, w, k, p;
    ok(tpc_kafka_source_add_to_job(src, job, "in", 2, &s), "job");
    ok(tpc_job_add_vertex(job, "work", 2, &work_ops, NULL, &w), "job");
    ok(tpc_txn_sink_add_to_job(kafka, job, "kafka", 2, &k), "job");
    ok(tpc_txn_sink_add_to_job(rows, job, "rows", 1, &p), "job");
    ok(tpc_job_connect(job, s, w, TPC_EDGE_FORWARD), "job");
    ok(tpc_job_connect(job, w, k, TPC_EDGE_HASH), "job");
    ok(tpc_job_connect(job, w, p, TPC_EDGE_HASH), "job");

    fill_t fill = {bootstrap, in};
    pthread_t producer, runner;
    run_t r = {job, NULL};
    pthread_create(&producer, NULL, produce, &fill);
    pthread_create(&runner, NULL, run, &r);
    int ms = seconds * 1000;
    bool stalled = false;
    for (int t = 0; t < ms; t += 100) {
        int pct = (int)((int64_t)t * 100 / ms);
        /* Two subtasks at RATE / 2 records a second each keep up at 1e6 / (RATE / 2) us a record,
         * and take half the input at twice that. */
        atomic_store(&per_record_us, pct >= 25 && pct < 45 ? 2 * 1000000 / (RATE / 2) : 0);
        if (pct >= 35 && !stalled) {
            atomic_store(&stall_ms, 5000);
            stalled = true;
        }
        tpc__checkpoint_write_fault = pct >= 50 && pct < 58   ? disk_slow
                                      : pct >= 66 && pct < 72 ? disk_fails
                                                              : NULL;
        usleep(100 * 1000);
    }
    tpc_job_cancel(job);
    pthread_join(runner, NULL);
    atomic_store(&producing, false);
    pthread_join(producer, NULL);
    tpc_error_destroy(r.err);
    sleep(3); /* the endpoint still answers: the last scrape */
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(kafka);
    tpc_txn_sink_destroy(rows);
    tpc_kafka_source_destroy(src);
    snprintf(sql, sizeof sql, "DROP TABLE %s", table);
    pg_exec(conninfo, sql);
    delete_topic(bootstrap, in);
    delete_topic(bootstrap, out);
    return 0;
}
