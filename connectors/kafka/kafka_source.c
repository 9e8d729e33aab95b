/*
 * The Kafka source as a user makes it: its keys (kafka.* properties pass to librdkafka, except the
 * few the source's guarantees rest on), and adding it to a job as a source vertex whose subtasks
 * run kafka_source_task.c.
 */
#include "kafka_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREFIX "kafka."

/* librdkafka properties the source sets itself: changing them would break exactly-once replay
 * (isolation, offsets kept in checkpoints) or the detection of a partition's end. */
static const char *const reserved[] = {"isolation.level", "enable.auto.commit",
                                       "enable.auto.offset.store", "enable.partition.eof"};

static tpc_error_t *oom(void)
{
    return tpc_error_new(TPC_ERR_NOMEM, TPC_ERROR_FATAL, "out of memory");
}

static tpc_error_t *bad_value(const char *key, const char *value, const char *hint)
{
    return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                        "invalid value \"%s\" for \"%s\"", value, key),
                          "%s", hint);
}

static tpc_error_t *add_prop(tpc_kafka_source_t *src, const char *name, const char *value)
{
    char **props = realloc(src->props, (src->nprops + 1) * 2 * sizeof *props);
    if (!props)
        return oom();
    src->props = props;
    props[2 * src->nprops] = strdup(name);
    props[2 * src->nprops + 1] = strdup(value);
    src->nprops++;
    if (!props[2 * src->nprops - 2] || !props[2 * src->nprops - 1])
        return oom();
    return NULL;
}

static tpc_error_t *set_int(int *dst, int min, int max, const char *key, const char *value)
{
    int64_t v;
    if (!tpc_parse_int(value, min, max, &v)) {
        tpc_error_t *err = tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                         "invalid value \"%s\" for \"%s\"", value, key);
        return tpc_error_hint(err, "give a whole number from %d to %d", min, max);
    }
    *dst = (int)v;
    return NULL;
}

static tpc_error_t *set_bool(bool *dst, const char *key, const char *value)
{
    if (strcmp(value, "true") == 0 || strcmp(value, "false") == 0) {
        *dst = value[0] == 't';
        return NULL;
    }
    return bad_value(key, value, "use true or false");
}

/* earliest, latest, group, or timestamp:<milliseconds since the epoch>. */
static tpc_error_t *set_start(tpc_kafka_source_t *src, const char *key, const char *value)
{
    static const char ts_prefix[] = "timestamp:";
    if (strcmp(value, "earliest") == 0)
        src->start = TPC__KAFKA_START_EARLIEST;
    else if (strcmp(value, "latest") == 0)
        src->start = TPC__KAFKA_START_LATEST;
    else if (strcmp(value, "group") == 0)
        src->start = TPC__KAFKA_START_GROUP;
    else if (strncmp(value, ts_prefix, sizeof ts_prefix - 1) == 0) {
        const char *digits = value + sizeof ts_prefix - 1;
        int64_t ms;
        if (!tpc_parse_int(digits, 0, INT64_MAX, &ms))
            return bad_value(key, value,
                             "give timestamp:<ms>, milliseconds since the epoch, 0 or more");
        src->start = TPC__KAFKA_START_TIMESTAMP;
        src->start_timestamp = ms;
    } else {
        return bad_value(key, value, "use earliest, latest, group or timestamp:<ms>");
    }
    return NULL;
}

tpc_error_t *tpc_kafka_source_set(tpc_kafka_source_t *src, const char *key, const char *value)
{
    if (!src || !key || !value)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "kafka source key needs a source, a key and a value");
    if (strncmp(key, PREFIX, strlen(PREFIX)) == 0 && key[strlen(PREFIX)]) {
        const char *name = key + strlen(PREFIX);
        for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
            if (strcmp(name, reserved[i]) == 0)
                return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                                    "\"%s\" cannot be set on a kafka source", key),
                                      "the source reads read_committed and keeps its offsets in "
                                      "checkpoints");
        /* Check the property now, so that a typo fails here rather than in the job. */
        tpc_error_t *err = tpc__kafka_prop_check(
            name, value, "see librdkafka's CONFIGURATION.md for its consumer properties");
        return err ? err : add_prop(src, name, value);
    }
    if (strcmp(key, "bounded") == 0)
        return set_bool(&src->bounded, key, value);
    if (strcmp(key, "start") == 0)
        return set_start(src, key, value);
    if (strcmp(key, "start.fallback") == 0) {
        if (strcmp(value, "earliest") && strcmp(value, "latest"))
            return bad_value(key, value, "use earliest or latest");
        src->start_fallback_latest = value[0] == 'l';
        return NULL;
    }
    if (strcmp(key, "max.batch") == 0)
        return set_int(&src->max_batch, 1, 1000000, key, value);
    if (strcmp(key, "poll.timeout.ms") == 0)
        return set_int(&src->poll_timeout_ms, 0, 50, key, value);
    if (strcmp(key, "open.timeout.ms") == 0)
        return set_int(&src->open_timeout_ms, 100, INT32_MAX, key, value);
    if (strcmp(key, "partition.discovery.interval.ms") == 0)
        return set_int(&src->discovery_interval_ms, 0, INT32_MAX, key, value);
    tpc_error_t *err =
        tpc_error_new(TPC_ERR_NOT_FOUND, TPC_ERROR_FATAL, "unknown kafka source key \"%s\"", key);
    if (strcmp(key, "group.id") == 0 || strcmp(key, "topic") == 0)
        err = tpc_error_hint(err, "%s",
                             key[0] == 'g' ? "the source assigns partitions itself; to name "
                                             "its consumer group anyway, set \"kafka.group.id\""
                                           : "give the topics to tpc_kafka_source_new()");
    else
        err = tpc_error_hint(err, "librdkafka properties take the prefix \"kafka.\"");
    return err;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Split "a,b,c" into src->topics, sorted and each once, so that the partitions are dealt to the
 * subtasks in the same order however the list was written. */
static tpc_error_t *split_topics(tpc_kafka_source_t *src, const char *list)
{
    size_t cap = 1;
    for (const char *c = list; *c; c++)
        cap += *c == ',';
    if (!(src->topics = calloc(cap, sizeof *src->topics)))
        return oom();
    for (const char *at = list;;) {
        size_t len = strcspn(at, ",");
        while (len && (*at == ' '))
            at++, len--;
        while (len && at[len - 1] == ' ')
            len--;
        if (!len)
            return tpc_error_hint(tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                                                "empty topic name in \"%s\"", list),
                                  "give topics separated by commas, e.g. \"orders,refunds\"");
        if (len > TPC__KAFKA_TOPIC_MAX)
            return tpc_error_hint(tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                                                "kafka topic name \"%.*s...\" is too long", 32, at),
                                  "kafka topic names have at most %d characters",
                                  TPC__KAFKA_TOPIC_MAX);
        if (!(src->topics[src->ntopics++] = strndup(at, len)))
            return oom();
        at += strcspn(at, ",");
        if (!*at++)
            break;
    }
    qsort(src->topics, src->ntopics, sizeof *src->topics, cmp_name);
    size_t n = 1;
    for (size_t i = 1; i < src->ntopics; i++) {
        if (strcmp(src->topics[i], src->topics[n - 1]) == 0)
            free(src->topics[i]);
        else
            src->topics[n++] = src->topics[i];
    }
    src->ntopics = n;
    return NULL;
}

/* A topic beginning with '^' is a POSIX extended regular expression, as Kafka's own clients take
 * patterns; it must match a whole name for the topic to be read. */
static tpc_error_t *compile(tpc_kafka_source_t *src)
{
    size_t len = strlen(src->topic);
    char *anchored = malloc(len + 4);
    if (!anchored)
        return oom();
    /* "^(...)$": a match of part of a name does not count. */
    snprintf(anchored, len + 4, "^(%s)$", src->topic + 1);
    int rc = regcomp(&src->pattern, anchored, REG_EXTENDED | REG_NOSUB);
    free(anchored);
    if (rc != 0) {
        char why[256];
        regerror(rc, &src->pattern, why, sizeof why);
        return tpc_error_hint(tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                                            "invalid kafka topic pattern \"%s\": %s", src->topic,
                                            why),
                              "a topic beginning with '^' is a POSIX extended regular expression "
                              "that must match whole topic names, e.g. \"^orders-.*\"");
    }
    src->is_pattern = true;
    return NULL;
}

tpc_error_t *tpc_kafka_source_new(const char *bootstrap, const char *topic,
                                  tpc_kafka_source_t **out)
{
    if (out)
        *out = NULL;
    if (!bootstrap || !*bootstrap || !topic || !*topic || !out)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "kafka source needs bootstrap servers, a topic and an out pointer");
    tpc_kafka_source_t *src = calloc(1, sizeof *src);
    if (!src)
        return oom();
    src->max_batch = 500;
    src->poll_timeout_ms = 20;
    src->open_timeout_ms = 30000;
    src->discovery_interval_ms = 10000;
    src->topic = strdup(topic);
    tpc_error_t *err = !src->topic       ? oom()
                       : topic[0] == '^' ? compile(src)
                                         : split_topics(src, topic);
    if (!err)
        err = add_prop(src, "bootstrap.servers", bootstrap);
    if (err) {
        tpc_kafka_source_destroy(src);
        return err;
    }
    *out = src;
    return NULL;
}

tpc_error_t *tpc_kafka_source_add_to_job(tpc_kafka_source_t *src, tpc_job_t *job, const char *name,
                                         int parallelism, int *vertex_id)
{
    if (!src)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL, "no kafka source given");
    return tpc_job_add_vertex(job, name, parallelism, &tpc__kafka_source_ops, src, vertex_id);
}

void tpc_kafka_source_destroy(tpc_kafka_source_t *src)
{
    if (!src)
        return;
    for (size_t i = 0; i < 2 * src->nprops; i++)
        free(src->props[i]);
    free(src->props);
    for (size_t i = 0; i < src->ntopics; i++)
        free(src->topics[i]);
    free(src->topics);
    free(src->topic);
    if (src->is_pattern)
        regfree(&src->pattern);
    free(src);
}
