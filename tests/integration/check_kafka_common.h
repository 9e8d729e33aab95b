/*
 * What the Kafka connector tests share: creating a topic, and reading a whole topic from the
 * beginning to its end as an independent read_committed consumer sees it (up to the last stable
 * offset of every partition), handing each record to a callback.
 */
#ifndef CHECK_KAFKA_COMMON_H
#define CHECK_KAFKA_COMMON_H

#include "tpc_test_env.h"

#include <check.h>
#include <librdkafka/rdkafka.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

#define KT_TIMEOUT_MS 30000

static inline void kt_set(rd_kafka_conf_t *conf, const char *name, const char *value)
{
    char errstr[512];
    if (rd_kafka_conf_set(conf, name, value, errstr, sizeof errstr) != RD_KAFKA_CONF_OK)
        ck_abort_msg("could not set %s=%s: %s", name, value, errstr);
}

static inline void kt_create_topic(const char *bootstrap, const char *topic, int partitions)
{
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    kt_set(conf, "bootstrap.servers", bootstrap);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    ck_assert_msg(rk != NULL, "%s", errstr);
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, partitions, 1, errstr, sizeof errstr);
    ck_assert_msg(nt != NULL, "%s", errstr);
    rd_kafka_queue_t *queue = rd_kafka_queue_new(rk);
    rd_kafka_CreateTopics(rk, &nt, 1, NULL, queue);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(queue, KT_TIMEOUT_MS);
    ck_assert_msg(ev != NULL, "no answer to CreateTopics for \"%s\"", topic);
    size_t n = 0;
    const rd_kafka_topic_result_t **res =
        rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
    ck_assert_msg(!rd_kafka_event_error(ev) && n == 1 && !rd_kafka_topic_result_error(res[0]),
                  "could not create topic \"%s\"", topic);
    rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(queue);
    rd_kafka_NewTopic_destroy(nt);
    rd_kafka_destroy(rk);
}

typedef void (*kt_record_cb)(void *opaque, const rd_kafka_message_t *msg);

/* Read every partition of @topic from the beginning to its end with @isolation; @returns the
 * number of records. */
static inline long kt_read_topic(const char *bootstrap, const char *topic, const char *isolation,
                                 kt_record_cb cb, void *opaque)
{
    char errstr[512], group[128];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    kt_set(conf, "bootstrap.servers", bootstrap);
    kt_set(conf, "group.id", tpc_test_unique_name(group, sizeof group, "twopc-kt", '-'));
    kt_set(conf, "isolation.level", isolation);
    kt_set(conf, "enable.partition.eof", "true");
    kt_set(conf, "enable.auto.commit", "false");
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    ck_assert_msg(rk != NULL, "could not create consumer: %s", errstr);
    rd_kafka_poll_set_consumer(rk);

    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    ck_assert_int_eq(rd_kafka_metadata(rk, 0, rkt, &md, KT_TIMEOUT_MS), 0);
    ck_assert_int_eq(md->topic_cnt, 1);
    int parts = md->topics[0].partition_cnt;
    rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);

    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(parts);
    for (int i = 0; i < parts; i++)
        rd_kafka_topic_partition_list_add(list, topic, i)->offset = RD_KAFKA_OFFSET_BEGINNING;
    ck_assert_int_eq(rd_kafka_assign(rk, list), 0);
    rd_kafka_topic_partition_list_destroy(list);

    long count = 0;
    int at_end = 0;
    time_t deadline = time(NULL) + KT_TIMEOUT_MS / 1000;
    while (at_end < parts && time(NULL) < deadline) {
        rd_kafka_message_t *msg = rd_kafka_consumer_poll(rk, 200);
        if (!msg)
            continue;
        if (msg->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            at_end++;
        } else if (msg->err) {
            fprintf(stderr, "consumer: %s\n", rd_kafka_message_errstr(msg));
        } else {
            count++;
            if (cb)
                cb(opaque, msg);
        }
        rd_kafka_message_destroy(msg);
    }
    ck_assert_msg(at_end == parts, "%s consumer did not reach the end of \"%s\"", isolation, topic);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return count;
}

#endif
