/*
 * Checks at open, before any transactional producer exists: the transaction timeout against the
 * checkpoint interval, the cluster reachable within open.timeout.ms, the sink's topic known to it,
 * and (exactly-once) the transaction timeout not above the broker's transaction.max.timeout.ms,
 * read with DescribeConfigs. Each failure says what to change.
 */
#include "kafka_sink_internal.h"

#include <inttypes.h>
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

/* Read transaction.max.timeout.ms of broker @broker_id. @returns -1 in @max if not listed. */
static tpc_error_t *broker_max_timeout(rd_kafka_t *rk, int32_t broker_id, int timeout_ms,
                                       int64_t *max)
{
    char id[16], errstr[256];
    snprintf(id, sizeof id, "%d", (int)broker_id);
    *max = -1;
    rd_kafka_ConfigResource_t *res = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_BROKER, id);
    rd_kafka_AdminOptions_t *opts = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_ANY);
    rd_kafka_AdminOptions_set_request_timeout(opts, timeout_ms, errstr, sizeof errstr);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_DescribeConfigs(rk, &res, 1, opts, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, timeout_ms + 1000);
    tpc_error_t *err = NULL;
    if (!ev || rd_kafka_event_error(ev)) {
        err = tpc_error_new(TPC_ERR_EXTERNAL, TPC_ERROR_RETRIABLE,
                            "could not read the configuration of broker %s: %s", id,
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
            if (strcmp(rd_kafka_ConfigEntry_name(cs[i]), "transaction.max.timeout.ms") == 0 && v)
                *max = strtoll(v, NULL, 10);
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

tpc_error_t *tpc__kafka_check_cluster(const tpc__kafka_conf_t *conf, const tpc_txn_subtask_t *st,
                                      bool transactional)
{
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
    if (!err && transactional && broker_id >= 0)
        err = broker_max_timeout(probe.rk, broker_id, conf->open_timeout_ms, &max);
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
