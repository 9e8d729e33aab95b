/*
 * The lease topic: one partition per unit, so that the group coordinator's assignment of its
 * partitions is the assignment of the units. The first member makes it; every member checks
 * that its partition count is the unit count, since a different count would assign units that
 * do not exist or leave some to nobody.
 */
#include "cluster_internal.h"

#include <stdio.h>
#include <string.h>

/* The topic's partition count (0: missing). */
static tpc_error_t *partitions(rd_kafka_t *rk, const char *topic, int timeout_ms, int *count)
{
    *count = 0;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    if (!rkt)
        return tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL, "invalid lease topic \"%s\": %s",
                             topic, rd_kafka_err2str(rd_kafka_last_error()));
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, rkt, &md, timeout_ms);
    rd_kafka_topic_destroy(rkt);
    if (!e && md->topic_cnt == 1) {
        e = md->topics[0].err;
        *count = md->topics[0].partition_cnt;
    }
    if (md)
        rd_kafka_metadata_destroy(md);
    if (e == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART || e == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC) {
        *count = 0;
        return NULL;
    }
    if (!e)
        return NULL;
    return tpc_error_hint(
        tpc_error_new(e == RD_KAFKA_RESP_ERR__TIMED_OUT || e == RD_KAFKA_RESP_ERR__TRANSPORT
                          ? TPC_ERR_CONNECT
                          : TPC_ERR_EXTERNAL,
                      TPC_ERROR_FATAL, "could not describe lease topic \"%s\": %s", topic,
                      rd_kafka_err2str(e)),
        "check the bootstrap servers and that the cluster answers (open.timeout.ms)");
}

static tpc_error_t *create(rd_kafka_t *rk, const char *topic, int units, int replication_factor,
                           int timeout_ms)
{
    char why[512];
    rd_kafka_NewTopic_t *nt =
        rd_kafka_NewTopic_new(topic, units, replication_factor, why, sizeof why);
    if (!nt)
        return tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL, "lease topic \"%s\": %s", topic, why);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *opt = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    rd_kafka_AdminOptions_set_request_timeout(opt, timeout_ms, why, sizeof why);
    rd_kafka_CreateTopics(rk, &nt, 1, opt, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, timeout_ms + 1000);
    rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR__TIMED_OUT;
    const char *msg = "no answer";
    char detail[512] = "";
    if (ev) {
        e = rd_kafka_event_error(ev);
        msg = rd_kafka_event_error_string(ev);
        const rd_kafka_CreateTopics_result_t *res = rd_kafka_event_CreateTopics_result(ev);
        size_t n = 0;
        const rd_kafka_topic_result_t **tr =
            res ? rd_kafka_CreateTopics_result_topics(res, &n) : NULL;
        if (!e && n == 1) {
            e = rd_kafka_topic_result_error(tr[0]);
            msg = rd_kafka_topic_result_error_string(tr[0]);
        }
        snprintf(detail, sizeof detail, "%s", msg ? msg : rd_kafka_err2str(e));
        rd_kafka_event_destroy(ev);
    } else {
        snprintf(detail, sizeof detail, "%s", msg);
    }
    rd_kafka_AdminOptions_destroy(opt);
    rd_kafka_queue_destroy(q);
    rd_kafka_NewTopic_destroy(nt);
    if (!e || e == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
        return NULL;
    return tpc_error_hint(
        tpc_error_new(e == RD_KAFKA_RESP_ERR__TIMED_OUT ? TPC_ERR_CONNECT : TPC_ERR_EXTERNAL,
                      TPC_ERROR_FATAL, "could not make lease topic \"%s\" with %d partitions: %s",
                      topic, units, detail),
        "make it yourself with one partition per unit, or give the member's "
        "principal Create on the topic");
}

tpc_error_t *tpc__cluster_lease_topic(rd_kafka_t *rk, const char *topic, int units,
                                      int replication_factor, int timeout_ms)
{
    int count = 0;
    tpc_error_t *err = partitions(rk, topic, timeout_ms, &count);
    if (!err && count == 0) {
        err = create(rk, topic, units, replication_factor, timeout_ms);
        /* Made here or by another member meanwhile: read what the cluster has now. */
        for (int i = 0; !err && count == 0 && i < 50; i++) {
            err = partitions(rk, topic, timeout_ms, &count);
            if (!err && count == 0)
                tpc_sleep_ms(100, NULL, NULL);
        }
        if (!err && count == 0)
            err = tpc_error_new(TPC_ERR_EXTERNAL, TPC_ERROR_FATAL,
                                "lease topic \"%s\" was made but the cluster does not show it",
                                topic);
    }
    if (!err && count != units)
        err = tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                           "lease topic \"%s\" has %d partitions, not one per "
                                           "unit of the %d units",
                                           topic, count, units),
                             "the unit count is fixed for an application: give its processes "
                             "the count the topic has, or run a new application "
                             "(docs/cluster.md, \"Changing the unit count\")");
    return err;
}
