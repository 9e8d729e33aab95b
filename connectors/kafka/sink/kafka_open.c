/*
 * Checks at open, before any transactional producer exists: the transaction timeout against the
 * checkpoint interval, the cluster reachable within open.timeout.ms, the sink's topic known to it,
 * and (exactly-once) the transaction timeout not above the broker's transaction.max.timeout.ms,
 * read with DescribeConfigs. Each failure says what to change. The topic's retention is read too
 * (a record stamped older than it is deleted at the broker's next retention check: the sink warns,
 * kafka_txn.c), but not being allowed to read it fails nothing.
 */
#include "kafka_sink_internal.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Smallest ratio of transaction timeout to checkpoint interval accepted: a transaction stays
 * open for one interval plus the time until its checkpoint completes, and after a crash until
 * the restart commits it. */
#define MIN_TIMEOUT_RATIO 3

/* The sink key checkpoint.interval.ms overrides the job's interval (a sink in a job whose interval
 * changes at run time, say). */
static tpc_error_t *check_interval(const tpc__kafka_conf_t *conf, const tpc_txn_subtask_t *st)
{
    int64_t interval =
        conf->checkpoint_interval_ms ? conf->checkpoint_interval_ms : st->checkpoint_interval_ms;
    if (interval <= 0 || conf->txn_timeout_ms >= MIN_TIMEOUT_RATIO * interval)
        return NULL;
    tpc_error_t *err = tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                     "kafka.transaction.timeout.ms %" PRId64
                                     " is too close to the checkpoint interval of "
                                     "%" PRId64 " ms",
                                     conf->txn_timeout_ms, interval);
    return tpc_error_hint(err,
                          "set kafka.transaction.timeout.ms to at least %d times the checkpoint "
                          "interval, plus the time a restart takes",
                          MIN_TIMEOUT_RATIO);
}

/* Read the integer settings @keys (NULL-terminated) of resource @name (a broker id or a topic)
 * with DescribeConfigs into @values: -1 for one not listed, and LLONG_MIN for "LogAppendTime"
 * (the one word this file reads). */
static tpc_error_t *describe(rd_kafka_t *rk, rd_kafka_ResourceType_t type, const char *name,
                             const char *const *keys, int timeout_ms, const tpc_txn_subtask_t *st,
                             int64_t *values)
{
    char errstr[256];
    for (size_t k = 0; keys[k]; k++)
        values[k] = -1;
    rd_kafka_ConfigResource_t *res = rd_kafka_ConfigResource_new(type, name);
    rd_kafka_AdminOptions_t *opts = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_ANY);
    rd_kafka_AdminOptions_set_request_timeout(opts, timeout_ms, errstr, sizeof errstr);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_DescribeConfigs(rk, &res, 1, opts, q);
    rd_kafka_event_t *ev = NULL;
    int64_t deadline = tpc_clock_ms() + timeout_ms + 1000;
    while (!ev && tpc_clock_ms() < deadline && !(st && tpc_txn_is_canceled(st)))
        ev = rd_kafka_queue_poll(q, 200); /* a cancel does not wait for the answer */
    tpc_error_t *err = NULL;
    if (!ev || rd_kafka_event_error(ev)) {
        err = tpc_error_new(TPC_ERR_EXTERNAL, TPC_ERROR_RETRIABLE,
                            "could not read the configuration of %s %s: %s",
                            type == RD_KAFKA_RESOURCE_BROKER ? "broker" : "topic", name,
                            ev ? rd_kafka_event_error_string(ev) : "timed out");
        err = tpc_error_hint(err, "the sink's principal needs DescribeConfigs on the cluster");
    } else {
        size_t n = 0;
        const rd_kafka_ConfigResource_t **rs = rd_kafka_DescribeConfigs_result_resources(
            rd_kafka_event_DescribeConfigs_result(ev), &n);
        size_t nc = 0;
        const rd_kafka_ConfigEntry_t **cs = n ? rd_kafka_ConfigResource_configs(rs[0], &nc) : NULL;
        for (size_t i = 0; i < nc; i++) {
            const char *v = rd_kafka_ConfigEntry_value(cs[i]);
            for (size_t k = 0; v && keys[k]; k++)
                if (strcmp(rd_kafka_ConfigEntry_name(cs[i]), keys[k]) == 0)
                    values[k] = strcmp(v, "LogAppendTime") == 0 ? LLONG_MIN : strtoll(v, NULL, 10);
        }
    }
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_AdminOptions_destroy(opts);
    rd_kafka_ConfigResource_destroy(res);
    return err;
}

static tpc_error_t *check_metadata(rd_kafka_t *rk, const tpc__kafka_conf_t *conf,
                                   int32_t *broker_id)
{
    rd_kafka_topic_t *rkt = conf->topic ? rd_kafka_topic_new(rk, conf->topic, NULL) : NULL;
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e = rd_kafka_metadata(rk, rkt ? 0 : 1, rkt, &md, conf->open_timeout_ms);
    tpc_error_t *err = NULL;
    if (e) {
        err = tpc_error_new(TPC_ERR_CONNECT, TPC_ERROR_RETRIABLE,
                            "could not reach kafka at \"%s\" within %d ms: %s",
                            tpc__kafka_prop(conf, "bootstrap.servers"), conf->open_timeout_ms,
                            rd_kafka_err2str(e));
        err = tpc_error_hint(err, "check kafka.bootstrap.servers and that the brokers run; "
                                  "raise open.timeout.ms for a slow cluster");
    } else if (rkt && md->topic_cnt == 1 && md->topics[0].err) {
        /* A missing or forbidden topic stays so; a partition without a leader (a broker that is
         * restarting) is for a restart to get past. */
        rd_kafka_resp_err_t te = md->topics[0].err;
        bool lasting = te == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
                       te == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED ||
                       te == RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION;
        err = tpc_error_new(lasting ? TPC_ERR_CONFIG : TPC_ERR_EXTERNAL,
                            lasting ? TPC_ERROR_FATAL : TPC_ERROR_RETRIABLE,
                            "kafka topic \"%s\" is not usable: %s", conf->topic,
                            rd_kafka_err2str(te));
        err = tpc_error_hint(err, "create the topic before the job starts (for example with "
                                  "kafka-topics.sh --create); the sink does not create topics");
    } else {
        *broker_id = md->broker_cnt ? md->brokers[0].id : -1;
    }
    if (md)
        rd_kafka_metadata_destroy(md);
    if (rkt)
        rd_kafka_topic_destroy(rkt);
    return err;
}

/* The age past which the topic deletes a record by its timestamp: retention.ms, or -1 when it
 * keeps records for ever, stamps them itself (LogAppendTime), or cannot be asked. */
static int64_t topic_retention(rd_kafka_t *rk, const tpc__kafka_conf_t *conf,
                               const tpc_txn_subtask_t *st)
{
    static const char *const keys[] = {"retention.ms", "message.timestamp.type", NULL};
    int64_t v[2];
    tpc_error_t *err =
        describe(rk, RD_KAFKA_RESOURCE_TOPIC, conf->topic, keys, conf->open_timeout_ms, st, v);
    if (err) {
        tpc_error_destroy(err);
        return -1;
    }
    return v[1] == LLONG_MIN || v[0] <= 0 ? -1 : v[0];
}

tpc_error_t *tpc__kafka_check_cluster(const tpc__kafka_conf_t *conf, const tpc_txn_subtask_t *st,
                                      bool transactional, int64_t *retention_ms)
{
    if (retention_ms)
        *retention_ms = -1;
    tpc_error_t *err = transactional ? check_interval(conf, st) : NULL;
    if (err)
        return err;
    tpc__kafka_producer_t probe;
    err = tpc__kafka_producer_start(&probe, conf, st, NULL, false);
    if (err)
        return err;
    int32_t broker_id = -1;
    err = check_metadata(probe.rk, conf, &broker_id);
    int64_t max = -1;
    if (!err && transactional && broker_id >= 0) {
        static const char *const keys[] = {"transaction.max.timeout.ms", NULL};
        char id[16];
        snprintf(id, sizeof id, "%d", (int)broker_id);
        err =
            describe(probe.rk, RD_KAFKA_RESOURCE_BROKER, id, keys, conf->open_timeout_ms, st, &max);
    }
    if (!err && retention_ms && conf->topic)
        *retention_ms = topic_retention(probe.rk, conf, st);
    if (!err && max >= 0 && conf->txn_timeout_ms > max) {
        err = tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                            "kafka.transaction.timeout.ms %" PRId64 " exceeds the broker's "
                            "transaction.max.timeout.ms %" PRId64,
                            conf->txn_timeout_ms, max);
        err = tpc_error_hint(err, "lower kafka.transaction.timeout.ms, or raise "
                                  "transaction.max.timeout.ms on the brokers");
    }
    tpc__kafka_producer_stop(&probe, false);
    return err;
}
