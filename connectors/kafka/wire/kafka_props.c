/*
 * librdkafka properties as users give them (`kafka.<name>` keys of sinks and sources): set one on
 * a librdkafka configuration, or check one at the moment it is set, so that a typo or a bad value
 * fails in tpc_txn_sink_set() / tpc_kafka_source_set() rather than when the job opens. The check
 * asks librdkafka, and for the settings the sink's own recovery client reads (TLS and SASL, see
 * kafka_wire.h) it asks that client too. No message repeats the value of a secret.
 */
#include "kafka_wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_secret(const char *name)
{
    return strstr(name, "password") || strstr(name, "secret") || strstr(name, ".key");
}

tpc_error_t *tpc__kafka_conf_set(rd_kafka_conf_t *rc, const char *name, const char *value,
                                 const char *hint)
{
    char errstr[256];
    if (rd_kafka_conf_set(rc, name, value, errstr, sizeof errstr) == RD_KAFKA_CONF_OK)
        return NULL;
    if (is_secret(name))
        snprintf(errstr, sizeof errstr, "value rejected"); /* librdkafka's text may quote it */
    return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                        "invalid kafka property \"%s\": %s", name, errstr),
                          "%s", hint);
}

tpc_error_t *tpc__kafka_prop_check(const char *name, const char *value, const char *hint)
{
    rd_kafka_conf_t *scratch = rd_kafka_conf_new();
    tpc_error_t *err = tpc__kafka_conf_set(scratch, name, value, hint);
    rd_kafka_conf_destroy(scratch);
    return err ? err : tpc__kafka_wire_check_prop(name, value);
}

tpc_error_t *tpc__kafka_props_add(char ***props, size_t *nprops, const char *name,
                                  const char *value)
{
    char **grown = realloc(*props, (*nprops + 1) * 2 * sizeof *grown);
    if (!grown)
        return tpc_error_nomem();
    *props = grown;
    grown[2 * *nprops] = strdup(name);
    grown[2 * *nprops + 1] = strdup(value);
    ++*nprops;
    if (!grown[2 * *nprops - 2] || !grown[2 * *nprops - 1])
        return tpc_error_nomem();
    return NULL;
}

const char *tpc__kafka_props_get(const char *const *props, size_t nprops, const char *name)
{
    for (size_t i = nprops; i-- > 0;) /* the last one set wins */
        if (strcmp(props[2 * i], name) == 0)
            return props[2 * i + 1];
    return NULL;
}

void tpc__kafka_props_free(char **props, size_t nprops)
{
    for (size_t i = 0; i < 2 * nprops; i++)
        free(props[i]);
    free(props);
}
