/*
 * The Kafka sink as a user makes it: its keys (kafka.* properties pass to librdkafka), the mapper,
 * and the connector ops table that ties the pieces of connectors/kafka to the transaction
 * framework.
 */
#include "kafka_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PREFIX "kafka."

static void kafka_release(void *arg)
{
    tpc__kafka_conf_t *conf = arg;
    for (size_t i = 0; i < 2 * conf->nprops; i++)
        free(conf->props[i]);
    free(conf->props);
    free(conf->topic);
    free(conf->id_prefix);
    free(conf);
}

const char *tpc__kafka_prop(const tpc__kafka_conf_t *conf, const char *name)
{
    for (size_t i = conf->nprops; i-- > 0;)
        if (strcmp(conf->props[2 * i], name) == 0)
            return conf->props[2 * i + 1];
    return NULL;
}

static tpc_error_t *oom(void)
{
    return tpc_error_new(TPC_ERR_NOMEM, TPC_ERROR_FATAL, "out of memory");
}

static tpc_error_t *add_prop(tpc__kafka_conf_t *conf, const char *name, const char *value)
{
    char **props = realloc(conf->props, (conf->nprops + 1) * 2 * sizeof *props);
    if (!props)
        return oom();
    conf->props = props;
    props[2 * conf->nprops] = strdup(name);
    props[2 * conf->nprops + 1] = strdup(value);
    conf->nprops++;
    if (!props[2 * conf->nprops - 2] || !props[2 * conf->nprops - 1])
        return oom();
    return NULL;
}

static tpc_error_t *set_int(int64_t *dst, int64_t min, int64_t max, const char *key,
                            const char *value)
{
    int64_t v;
    if (!tpc_parse_int(value, min, max, &v)) {
        tpc_error_t *err = tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                         "invalid value \"%s\" for \"%s\"", value, key);
        return tpc_error_hint(err, "give a whole number from %lld to %lld", (long long)min,
                              (long long)max);
    }
    *dst = v;
    return NULL;
}

static bool id_char_ok(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '-' || ch == '.';
}

static tpc_error_t *set_string(char **dst, const char *key, const char *value, bool id)
{
    size_t len = strlen(value);
    bool ok = len > 0 && (!id || len <= 150);
    for (size_t i = 0; ok && id && i < len; i++)
        ok = id_char_ok(value[i]);
    if (!ok)
        return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                            "invalid value \"%s\" for \"%s\"", value, key),
                              id ? "use 1 to 150 letters, digits, '_', '-' or '.'"
                                 : "give a non-empty name");
    char *copy = strdup(value);
    if (!copy)
        return oom();
    free(*dst);
    *dst = copy;
    return NULL;
}

static tpc_error_t *kafka_configure(void *arg, const char *key, const char *value)
{
    tpc__kafka_conf_t *conf = arg;
    int64_t v = 0;
    tpc_error_t *err = NULL;
    if (strncmp(key, PREFIX, strlen(PREFIX)) == 0 && key[strlen(PREFIX)]) {
        const char *name = key + strlen(PREFIX);
        if (strcmp(name, "transactional.id") == 0)
            return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                                "\"%s\" cannot be set on a sink", key),
                                  "set \"transactional.id.prefix\": the sink makes the ids");
        if (strcmp(name, "transaction.timeout.ms") == 0) {
            err = set_int(&v, 1000, INT32_MAX, key, value);
            if (err)
                return err;
            conf->txn_timeout_ms = v;
        }
        /* Check the property now, so that a typo fails here rather than in the job. */
        err = tpc__kafka_prop_check(
            name, value, "see librdkafka's CONFIGURATION.md for its producer properties");
        return err ? err : add_prop(conf, name, value);
    }
    if (strcmp(key, "topic") == 0)
        return set_string(&conf->topic, key, value, false);
    if (strcmp(key, "transactional.id.prefix") == 0)
        return set_string(&conf->id_prefix, key, value, true);
    if (strcmp(key, "transactional.id.pool-size") == 0) {
        err = set_int(&v, 3, TPC__KAFKA_POOL_MAX, key, value);
        conf->pool_size = err ? conf->pool_size : (int)v;
    } else if (strcmp(key, "checkpoint.interval.ms") == 0) {
        err = set_int(&conf->checkpoint_interval_ms, 0, INT32_MAX, key, value);
    } else if (strcmp(key, "open.timeout.ms") == 0) {
        err = set_int(&v, 100, INT32_MAX, key, value);
        conf->open_timeout_ms = err ? conf->open_timeout_ms : (int)v;
    } else if (strcmp(key, "recovery.timeout.ms") == 0) {
        err = set_int(&v, 100, INT32_MAX, key, value);
        conf->recovery_timeout_ms = err ? conf->recovery_timeout_ms : (int)v;
    } else {
        err = tpc_error_new(TPC_ERR_NOT_FOUND, 0, "unknown key \"%s\"", key);
    }
    return err;
}

const tpc_txn_connector_ops_t tpc__kafka_ops = {
    .version = TPC_TXN_CONNECTOR_OPS_VERSION,
    .name = "kafka",
    .configure = kafka_configure,
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
};

tpc_error_t *tpc_kafka_sink_new(const char *bootstrap, const char *topic, tpc_txn_sink_t **out)
{
    if (out)
        *out = NULL;
    if (!bootstrap || !*bootstrap || !out)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "kafka sink needs bootstrap servers and an out pointer");
    tpc__kafka_conf_t *conf = calloc(1, sizeof *conf);
    if (!conf)
        return oom();
    conf->pool_size = 6;
    conf->txn_timeout_ms = 60000;
    conf->open_timeout_ms = 30000;
    conf->recovery_timeout_ms = 60000;
    tpc_error_t *err = add_prop(conf, "bootstrap.servers", bootstrap);
    if (!err && topic)
        err = set_string(&conf->topic, "topic", topic, false);
    if (err) {
        kafka_release(conf);
        return err;
    }
    return tpc_txn_sink_new(&tpc__kafka_ops, conf, out);
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
