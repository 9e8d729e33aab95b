/*
 * Kafka set-up shared by the example programs: a topic with a number of partitions (the broker's
 * default of one would serialise a sink), created once or grown; the producer that fills an input
 * topic; the replayable source and the transactional sink with the settings the examples use.
 */
#ifndef EXAMPLE_KAFKA_H
#define EXAMPLE_KAFKA_H

#include <tpc_kafka.h>

#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stdio.h>

/* Wait up to 35 s for the answer to one CreateTopics or CreatePartitions request on @queue: its
 * error, else that of its one topic. */
static inline rd_kafka_resp_err_t ex_admin_wait(rd_kafka_queue_t *queue)
{
    rd_kafka_event_t *ev = rd_kafka_queue_poll(queue, 35000);
    if (!ev)
        return RD_KAFKA_RESP_ERR__TIMED_OUT;
    size_t n = 0;
    const rd_kafka_topic_result_t **res = NULL;
    if (rd_kafka_event_type(ev) == RD_KAFKA_EVENT_CREATETOPICS_RESULT)
        res = rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
    else
        res =
            rd_kafka_CreatePartitions_result_topics(rd_kafka_event_CreatePartitions_result(ev), &n);
    rd_kafka_resp_err_t err = rd_kafka_event_error(ev);
    if (!err && n == 1)
        err = rd_kafka_topic_result_error(res[0]);
    rd_kafka_event_destroy(ev);
    return err;
}

/* Create @p topic with @p partitions partitions unless it exists; errors go to stderr prefixed
 * with @p program. */
static inline bool ex_create_topic(const char *program, const char *bootstrap, const char *topic,
                                   int partitions)
{
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, errstr, sizeof errstr);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    if (!rk) {
        fprintf(stderr, "%s: %s\n", program, errstr);
        return false;
    }
    /* Replication factor -1: the cluster's default.replication.factor. A program copied from this
     * one must not make topics that a single broker's loss takes away. */
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, partitions, -1, errstr, sizeof errstr);
    rd_kafka_queue_t *queue = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *ao = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    rd_kafka_AdminOptions_set_request_timeout(ao, 30000, errstr, sizeof errstr);
    rd_kafka_CreateTopics(rk, &nt, 1, ao, queue);
    rd_kafka_resp_err_t err = ex_admin_wait(queue);
    if (err && err != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
        fprintf(stderr, "%s: could not create topic \"%s\": %s\n", program, topic,
                rd_kafka_err2str(err));
    rd_kafka_AdminOptions_destroy(ao);
    rd_kafka_queue_destroy(queue);
    rd_kafka_NewTopic_destroy(nt);
    rd_kafka_destroy(rk);
    return !err || err == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS;
}

/* The partition count of @topic as @rk sees it, -1 when it cannot tell. */
static inline int ex_partition_count(rd_kafka_t *rk, const char *topic)
{
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    int n = -1;
    if (rkt && !rd_kafka_metadata(rk, 0, rkt, &md, 10000) && md->topic_cnt == 1 &&
        !md->topics[0].err)
        n = md->topics[0].partition_cnt;
    if (md)
        rd_kafka_metadata_destroy(md);
    if (rkt)
        rd_kafka_topic_destroy(rkt);
    return n;
}

/* Give @topic @total partitions (CreatePartitions) unless it has that many, and wait until @rk's
 * metadata shows them. */
static inline bool ex_grow_topic(const char *program, rd_kafka_t *rk, const char *topic, int total)
{
    char errstr[512];
    int now = ex_partition_count(rk, topic);
    if (now < 0 || now >= total)
        return now >= total;
    rd_kafka_NewPartitions_t *np =
        rd_kafka_NewPartitions_new(topic, (size_t)total, errstr, sizeof errstr);
    rd_kafka_queue_t *queue = rd_kafka_queue_new(rk);
    rd_kafka_CreatePartitions(rk, &np, 1, NULL, queue);
    rd_kafka_resp_err_t err = ex_admin_wait(queue);
    rd_kafka_queue_destroy(queue);
    rd_kafka_NewPartitions_destroy(np);
    for (int i = 0; i < 300 && (!err || err == RD_KAFKA_RESP_ERR_INVALID_PARTITIONS) &&
                    ex_partition_count(rk, topic) < total;
         i++)
        rd_kafka_poll(rk, 100);
    if (ex_partition_count(rk, topic) >= total)
        return true;
    fprintf(stderr, "%s: could not give topic \"%s\" %d partitions: %s\n", program, topic, total,
            rd_kafka_err2str(err));
    return false;
}

/* The producer of --fill: idempotent, which keeps each partition in order and free of duplicates
 * across retries. @on_delivery (may be NULL) gets each delivery report with @opaque. NULL after
 * printing why to stderr, prefixed with @program. */
static inline rd_kafka_t *
ex_fill_producer_new(const char *program, const char *bootstrap,
                     void (*on_delivery)(rd_kafka_t *, const rd_kafka_message_t *, void *),
                     void *opaque)
{
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    const char *kv[][2] = {{"bootstrap.servers", bootstrap},
                           {"enable.idempotence", "true"},
                           {"linger.ms", "20"},
                           {"partitioner", "murmur2_random"}};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        rd_kafka_conf_set(conf, kv[i][0], kv[i][1], errstr, sizeof errstr);
    if (on_delivery) {
        rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
        rd_kafka_conf_set_opaque(conf, opaque);
    }
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    if (!rk)
        fprintf(stderr, "%s: %s\n", program, errstr);
    return rk;
}

/* Produce a copy of one record into @partition of @topic (RD_KAFKA_PARTITION_UA: the partitioner
 * picks), waiting while the producer's queue is full. */
static inline rd_kafka_resp_err_t ex_produce(rd_kafka_t *rk, const char *topic, int32_t partition,
                                             const char *key, int kl, char *value, int vl)
{
    rd_kafka_resp_err_t err;
    while ((err = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(partition),
                                    RD_KAFKA_V_KEY(key, (size_t)kl),
                                    RD_KAFKA_V_VALUE(value, (size_t)vl),
                                    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END)) ==
           RD_KAFKA_RESP_ERR__QUEUE_FULL)
        rd_kafka_poll(rk, 100);
    return err;
}

/* The replayable source of @topic, reading up to the end the topic had when the job first started
 * (bounded) with a minute to reach the brokers; then the keys of [source] in @config over these;
 * then, when @unbounded (given on the command line), for ever. On an error *source may still
 * need tpc_kafka_source_destroy. */
static inline tpc_error_t *ex_kafka_source_new(const char *bootstrap, const char *topic,
                                               bool unbounded, tpc_config_t *config,
                                               tpc_kafka_source_t **source)
{
    tpc_error_t *err = tpc_kafka_source_new(bootstrap, topic, source);
    if (!err)
        err = tpc_kafka_source_set(*source, "bounded", "true");
    if (!err)
        err = tpc_kafka_source_set(*source, "open.timeout.ms", "60000");
    if (!err)
        err = tpc_kafka_source_configure(*source, config, "source");
    if (!err && unbounded)
        err = tpc_kafka_source_set(*source, "bounded", "false");
    return err;
}

/* The transactional sink into @topic: transactional ids "<topic>-<subtask>-<n>", stable across
 * restarts of the job; a transaction timeout of a minute, checked at open against the job's
 * checkpoint interval; a minute to reach the brokers, two to recover and to retry a commit; then
 * the keys of [kafka] in @config over these. On an error *sink may still need
 * tpc_txn_sink_destroy. */
static inline tpc_error_t *ex_kafka_sink_new(const char *bootstrap, const char *topic,
                                             tpc_config_t *config, tpc_txn_sink_t **sink)
{
    tpc_error_t *err = tpc_kafka_sink_new(bootstrap, topic, sink);
    const char *kv[][2] = {
        {"transactional.id.prefix", topic},    {"kafka.transaction.timeout.ms", "60000"},
        {"transaction.timeout.ms", "60000"},   {"kafka.linger.ms", "5"},
        {"open.timeout.ms", "60000"},          {"recovery.timeout.ms", "120000"},
        {"commit.retry.deadline.ms", "120000"}};
    for (size_t i = 0; !err && i < sizeof kv / sizeof kv[0]; i++)
        err = tpc_txn_sink_set(*sink, kv[i][0], kv[i][1]);
    if (!err)
        err = tpc_txn_sink_configure(*sink, config, "kafka");
    return err;
}

#endif
