/*
 * Running and timing a sink benchmark's job (see tpc_test_bench.h).
 */
#include "tpc_test_bench.h"

#include "tpc_test_env.h"

#include <librdkafka/rdkafka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

void tpc_test_bench_die(const char *what, tpc_error_t *err)
{
    fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what,
            err ? tpc_error_message(err) : "failed");
    exit(1);
}

double tpc_test_bench_run_sink(const char *name, const char *ckpt, tpc_test_seq_conf_t *src,
                               tpc_txn_sink_t *sink, const char *sink_vertex)
{
    tpc_job_t *job = tpc_job_new(name);
    int s, k;
    tpc_error_t *err = tpc_job_set(job, "checkpoint.dir", ckpt);
    if (!err)
        err = tpc_job_set(job, "checkpoint.interval.ms", "1000");
    if (!err)
        err = tpc_job_add_vertex(job, "generator", 1, &tpc_test_seq_source_ops, src, &s);
    if (!err)
        err = tpc_txn_sink_add_to_job(sink, job, sink_vertex, 1, &k);
    if (!err)
        err = tpc_job_connect(job, s, k, TPC_EDGE_FORWARD);
    double secs = tpc_test_bench_run_job(job, err, "job");
    tpc_txn_sink_stats_t st;
    tpc_txn_sink_get_stats(sink, &st);
    if (st.records != src->count_default || st.pending)
        tpc_test_bench_die("sink statistics do not add up", NULL);
    tpc_job_destroy(job);
    return secs;
}

double tpc_test_bench_run_job(tpc_job_t *job, tpc_error_t *setup_err, const char *what)
{
    if (setup_err)
        tpc_test_bench_die(what, setup_err);
    double t0 = tpc_test_now_s();
    tpc_error_t *err = tpc_job_run(job, NULL);
    double secs = tpc_test_now_s() - t0;
    if (err)
        tpc_test_bench_die(what, err);
    return secs;
}

void tpc_test_bench_create_topic(const char *bootstrap, const char *topic, int partitions)
{
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, errstr, sizeof errstr)) {
        fprintf(stderr, "%s: admin client: %s\n", program_invocation_short_name, errstr);
        exit(1);
    }
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    rd_kafka_NewTopic_t *nt =
        rk ? rd_kafka_NewTopic_new(topic, partitions, -1, errstr, sizeof errstr) : NULL;
    if (!nt) {
        fprintf(stderr, "%s: create topic %s: %s\n", program_invocation_short_name, topic, errstr);
        exit(1);
    }
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
    size_t n = 0;
    const rd_kafka_topic_result_t **res =
        ev ? rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n) : NULL;
    if (!ev || rd_kafka_event_error(ev) || n != 1 || rd_kafka_topic_result_error(res[0])) {
        fprintf(stderr, "%s: create topic %s: %s\n", program_invocation_short_name, topic,
                !ev      ? "no answer within 30 s"
                : n == 1 ? rd_kafka_err2str(rd_kafka_topic_result_error(res[0]))
                         : rd_kafka_event_error_string(ev));
        exit(1);
    }
    rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_NewTopic_destroy(nt);
    rd_kafka_destroy(rk);
}
