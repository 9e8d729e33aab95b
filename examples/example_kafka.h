/*
 * Kafka set-up shared by the example programs: a topic with a number of partitions (the broker's
 * default of one would serialise a sink), created once. Uses librdkafka's admin API only.
 */
#ifndef EXAMPLE_KAFKA_H
#define EXAMPLE_KAFKA_H

#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stdio.h>

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
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, partitions, 1, errstr, sizeof errstr);
    rd_kafka_queue_t *queue = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *ao = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    rd_kafka_AdminOptions_set_request_timeout(ao, 30000, errstr, sizeof errstr);
    rd_kafka_CreateTopics(rk, &nt, 1, ao, queue);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(queue, 35000);
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR__TIMED_OUT;
    if (ev) {
        size_t n = 0;
        const rd_kafka_topic_result_t **res =
            rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
        err = rd_kafka_event_error(ev);
        if (!err && n == 1)
            err = rd_kafka_topic_result_error(res[0]);
        rd_kafka_event_destroy(ev);
    }
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
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
    int now = ex_partition_count(rk, topic);
    if (now < 0 || now >= total)
        return now >= total;
    rd_kafka_NewPartitions_t *np =
        rd_kafka_NewPartitions_new(topic, (size_t)total, errstr, sizeof errstr);
    rd_kafka_queue_t *queue = rd_kafka_queue_new(rk);
    rd_kafka_CreatePartitions(rk, &np, 1, NULL, queue);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(queue, 35000);
    err = RD_KAFKA_RESP_ERR__TIMED_OUT;
    if (ev) {
        size_t n = 0;
        const rd_kafka_topic_result_t **res =
            rd_kafka_CreatePartitions_result_topics(rd_kafka_event_CreatePartitions_result(ev), &n);
        err = rd_kafka_event_error(ev);
        if (!err && n == 1)
            err = rd_kafka_topic_result_error(res[0]);
        rd_kafka_event_destroy(ev);
    }
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

#endif
