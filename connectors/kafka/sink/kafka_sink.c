/*
 * The Kafka sink as a user makes it: its keys (kafka.* properties pass to librdkafka), the mapper,
 * and the connector ops table that ties the pieces of connectors/kafka to the transaction
 * framework.
 */
#include "kafka_sink_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PREFIX "kafka."

static const tpc_props_t kafka_sink_table;

static void kafka_release(void *arg)
{
    tpc__kafka_conf_t *conf = arg;
    tpc__kafka_props_free(conf->props, conf->nprops);
    tpc_props_free(&kafka_sink_table, conf);
    free(conf->stats);
    free(conf);
}

const char *tpc__kafka_prop(const tpc__kafka_conf_t *conf, const char *name)
{
    return tpc__kafka_props_get((const char *const *)conf->props, conf->nprops, name);
}

/* kafka.<name>: a librdkafka producer property, checked now so that a typo fails here. */
static tpc_error_t *set_kafka_prop(void *arg, const tpc_prop_t *p, const char *key,
                                   const char *value)
{
    tpc__kafka_conf_t *conf = arg;
    const char *name = key + strlen(PREFIX);
    if (strcmp(name, "transactional.id") == 0)
        return tpc_error_hint(
            tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL, "\"%s\" cannot be set on a sink", key),
            "set \"transactional.id.prefix\": the sink makes the ids");
    if (strcmp(name, "transaction.timeout.ms") == 0) {
        int64_t v;
        if (!tpc_parse_int(value, 1000, INT32_MAX, &v))
            return tpc_prop_invalid(p, key, value, "a whole number from 1000 to %d (ms)",
                                    INT32_MAX);
        conf->txn_timeout_ms = v;
        /* The broker's timeout is the sink's: the framework warns, and the metrics endpoint
         * counts the time left, against it. */
        tpc_error_t *err =
            conf->sink ? tpc_txn_sink_set(conf->sink, "transaction.timeout.ms", value) : NULL;
        if (err)
            return err;
    }
    tpc_error_t *err = tpc__kafka_prop_check(
        name, value, "see librdkafka's CONFIGURATION.md for its producer properties");
    return err ? err : tpc__kafka_props_add(&conf->props, &conf->nprops, name, value);
}

static bool id_char_ok(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '-' || ch == '.';
}

static tpc_error_t *check_id_prefix(void *arg, const tpc_prop_t *p, const char *key,
                                    const char *value)
{
    (void)arg;
    size_t len = strlen(value);
    bool ok = len <= 150;
    for (size_t i = 0; ok && i < len; i++)
        ok = id_char_ok(value[i]);
    return ok ? NULL : tpc_prop_invalid(p, key, value, NULL);
}

#define SINK_FIELD(member) TPC_PROP_FIELD(tpc__kafka_conf_t, member)
/* librdkafka's default of kafka.transaction.timeout.ms */
#define DEFAULT_TXN_TIMEOUT_MS 60000
#define STR(x)                 #x
#define XSTR(x)                STR(x)

static const tpc_prop_t kafka_sink_props[] = {
    {.name = "kafka.*",
     .type = TPC_PROP_CUSTOM,
     .set = set_kafka_prop,
     .accepts = "a librdkafka producer property and its value",
     .doc = "Passed to librdkafka's producers (kafka.linger.ms, kafka.security.protocol, ...) and "
            "checked when set; kafka.transactional.id is the sink's and refused. "
            "kafka.transaction.timeout.ms (default 60000) sets the sink's "
            "transaction.timeout.ms too."},
    {.name = "topic",
     .type = TPC_PROP_STRING,
     .field = SINK_FIELD(topic),
     .accepts = "a topic name",
     .doc = "The topic of every record, unless the mapper names one; the second argument of "
            "tpc_kafka_sink_new() sets it too."},
    {.name = "transactional.id.prefix",
     .type = TPC_PROP_STRING,
     .field = SINK_FIELD(id_prefix),
     .set = check_id_prefix,
     .accepts = "1 to 150 letters, digits, '_', '-' or '.'",
     .doc = "Required for exactly-once: the sink's transactional ids are "
            "<prefix>-<subtask>-<n>, 0 <= n < pool size (<prefix>-e<epoch>-<subtask>-<n> under "
            "an owner epoch, checkpoint.owner=claim). Unique per sink among all programs "
            "using the cluster, and stable across restarts."},
    {.name = "transactional.id.pool-size",
     .type = TPC_PROP_INT,
     .field = SINK_FIELD(pool_size),
     .min = 3,
     .max = TPC__KAFKA_POOL_MAX,
     .def = "6",
     .doc = "Transactional ids (and producers) per subtask: bounds how many checkpoints may be "
            "pending commit at once."},
    {.name = "checkpoint.interval.ms",
     .type = TPC_PROP_INT,
     .field = SINK_FIELD(checkpoint_interval_ms),
     .min = 0,
     .max = INT32_MAX,
     .def = "0",
     .unit = "ms",
     .doc = "The interval the transaction timeout is checked against at open; 0: the job's "
            "checkpoint.interval.ms."},
    {.name = "open.timeout.ms",
     .type = TPC_PROP_INT,
     .field = SINK_FIELD(open_timeout_ms),
     .min = 100,
     .max = INT32_MAX,
     .def = "30000",
     .unit = "ms",
     .doc = "How long open may wait for the cluster."},
    {.name = "recovery.timeout.ms",
     .type = TPC_PROP_INT,
     .field = SINK_FIELD(recovery_timeout_ms),
     .min = 100,
     .max = INT32_MAX,
     .def = "60000",
     .unit = "ms",
     .doc = "How long a recovery commit may retry."},
};

static const tpc_props_t kafka_sink_table = {"kafka sink", "tpc_txn_sink_set()", kafka_sink_props,
                                             sizeof kafka_sink_props / sizeof *kafka_sink_props};

const tpc_props_t *tpc_kafka_sink_properties(void)
{
    return &kafka_sink_table;
}

const tpc_txn_connector_ops_t tpc__kafka_ops = {
    .version = TPC_TXN_CONNECTOR_OPS_VERSION,
    .name = "kafka",
    .release = kafka_release,
    .open = tpc__kafka_open,
    .close = tpc__kafka_close,
    .begin = tpc__kafka_begin,
    .write = tpc__kafka_write,
    .flush = tpc__kafka_flush,
    .pre_commit = tpc__kafka_pre_commit,
    .commit = tpc__kafka_commit,
    .abort = tpc__kafka_abort,
    .recover_and_commit = tpc__kafka_recover_and_commit,
    .recover_and_abort = tpc__kafka_recover_and_abort,
    .abort_lingering = tpc__kafka_abort_lingering,
    .serialize = tpc__kafka_serialize,
    .deserialize = tpc__kafka_deserialize,
    .is_empty = tpc__kafka_is_empty,
    .free_txn = tpc__kafka_free_txn,
    .describe = tpc__kafka_describe,
    .props = &kafka_sink_table,
    .metrics = tpc__kafka_sink_metrics,
    .describe_handle = tpc__kafka_describe_handle,
};

const tpc_txn_connector_ops_t *tpc_kafka_sink_ops(void)
{
    return &tpc__kafka_ops;
}

tpc_error_t *tpc_kafka_sink_new(const char *bootstrap, const char *topic, tpc_txn_sink_t **out)
{
    if (out)
        *out = NULL;
    if (!bootstrap || !*bootstrap || !out)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "kafka sink needs bootstrap servers and an out pointer");
    tpc__kafka_conf_t *conf = calloc(1, sizeof *conf);
    if (!conf)
        return tpc_error_nomem();
    conf->txn_timeout_ms = DEFAULT_TXN_TIMEOUT_MS;
    conf->stats = calloc(1, sizeof *conf->stats);
    if (!conf->stats) {
        free(conf);
        return tpc_error_nomem();
    }
    tpc_error_t *err = tpc_props_init(&kafka_sink_table, conf);
    if (!err)
        err = tpc__kafka_props_add(&conf->props, &conf->nprops, "bootstrap.servers", bootstrap);
    if (!err && topic)
        err = tpc_props_set(&kafka_sink_table, conf, "topic", topic);
    if (err) {
        kafka_release(conf);
        return err;
    }
    err = tpc_txn_sink_new(&tpc__kafka_ops, conf, out);
    if (!err) {
        conf->sink = *out;
        err = tpc_txn_sink_set(*out, "transaction.timeout.ms", XSTR(DEFAULT_TXN_TIMEOUT_MS));
    }
    if (err) {
        tpc_txn_sink_destroy(*out);
        *out = NULL;
    }
    return err;
}

tpc_error_t *tpc_kafka_sink_set_mapper(tpc_txn_sink_t *sink, tpc_kafka_mapper_t mapper,
                                       void *opaque)
{
    if (tpc_txn_sink_connector_ops(sink) != &tpc__kafka_ops)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "a mapper can only be set on a kafka sink");
    tpc__kafka_conf_t *conf = tpc_txn_sink_connector_arg(sink);
    conf->mapper = mapper;
    conf->mapper_opaque = opaque;
    return NULL;
}
