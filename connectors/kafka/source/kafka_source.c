/*
 * The Kafka source as a user makes it: its keys (kafka.* properties pass to librdkafka, except the
 * few the source's guarantees rest on), and adding it to a job as a source vertex whose subtasks
 * run kafka_source_task.c.
 */
#include "kafka_source_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREFIX "kafka."

/* librdkafka properties the source sets itself: changing them would break exactly-once replay
 * (isolation, offsets kept in checkpoints) or the detection of a partition's end. */
static const char *const reserved[] = {"isolation.level", "enable.auto.commit",
                                       "enable.auto.offset.store", "enable.partition.eof"};

/* kafka.<name>: a librdkafka consumer property, checked now so that a typo fails here. */
static tpc_error_t *set_kafka_prop(void *arg, const tpc_prop_t *p, const char *key,
                                   const char *value)
{
    (void)p;
    tpc_kafka_source_t *src = arg;
    const char *name = key + strlen(PREFIX);
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
        if (strcmp(name, reserved[i]) == 0)
            return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                                "\"%s\" cannot be set on a kafka source", key),
                                  "the source reads read_committed and keeps its offsets in "
                                  "checkpoints");
    tpc_error_t *err = tpc__kafka_prop_check(
        name, value, "see librdkafka's CONFIGURATION.md for its consumer properties");
    return err ? err : tpc__kafka_props_add(&src->props, &src->nprops, name, value);
}

/* earliest, latest, group, or timestamp:<milliseconds since the epoch>. */
static tpc_error_t *set_start(void *arg, const tpc_prop_t *p, const char *key, const char *value)
{
    tpc_kafka_source_t *src = arg;
    static const char ts_prefix[] = "timestamp:";
    if (strcmp(value, "earliest") == 0)
        src->start = TPC__KAFKA_START_EARLIEST;
    else if (strcmp(value, "latest") == 0)
        src->start = TPC__KAFKA_START_LATEST;
    else if (strcmp(value, "group") == 0)
        src->start = TPC__KAFKA_START_GROUP;
    else if (strncmp(value, ts_prefix, sizeof ts_prefix - 1) == 0) {
        int64_t ms;
        if (!tpc_parse_int(value + sizeof ts_prefix - 1, 0, INT64_MAX, &ms))
            return tpc_prop_invalid(p, key, value,
                                    "timestamp:<ms>, milliseconds since the epoch, 0 or more");
        src->start = TPC__KAFKA_START_TIMESTAMP;
        src->start_timestamp = ms;
    } else {
        return tpc_prop_invalid(p, key, value, NULL);
    }
    return NULL;
}

/* partitions=0-3,7: the only partitions of each topic that the source reads, as ranges. */
static tpc_error_t *set_partitions(void *arg, const tpc_prop_t *p, const char *key,
                                   const char *value)
{
    tpc_kafka_source_t *src = arg;
    size_t n = 1;
    for (const char *c = value; *c; c++)
        n += *c == ',';
    int32_t(*ranges)[2] = calloc(n, sizeof *ranges);
    if (!ranges)
        return tpc_error_nomem();
    const char *at = value;
    for (size_t i = 0; i < n; i++) {
        int64_t first, last;
        size_t len = strcspn(at, ",");
        size_t dash = strcspn(at, "-");
        char num[16];
        bool ok = len > 0 && len < 32;
        if (ok && dash < len) {
            ok = dash > 0 && dash < sizeof num && len - dash - 1 < sizeof num;
            if (ok) {
                snprintf(num, sizeof num, "%.*s", (int)dash, at);
                ok = tpc_parse_int(num, 0, INT32_MAX, &first);
                snprintf(num, sizeof num, "%.*s", (int)(len - dash - 1), at + dash + 1);
                ok = ok && tpc_parse_int(num, first, INT32_MAX, &last);
            }
        } else if (ok) {
            ok = len < sizeof num;
            if (ok) {
                snprintf(num, sizeof num, "%.*s", (int)len, at);
                ok = tpc_parse_int(num, 0, INT32_MAX, &first);
                last = first;
            }
        }
        if (!ok) {
            free(ranges);
            return tpc_prop_invalid(p, key, value, NULL);
        }
        ranges[i][0] = (int32_t)first;
        ranges[i][1] = (int32_t)last;
        at += len + 1;
    }
    free(src->ranges);
    src->ranges = ranges;
    src->nranges = n;
    return NULL;
}

bool tpc__kafka_source_wanted(const tpc_kafka_source_t *conf, int32_t partition)
{
    if (!conf->ranges)
        return true;
    for (size_t i = 0; i < conf->nranges; i++)
        if (partition >= conf->ranges[i][0] && partition <= conf->ranges[i][1])
            return true;
    return false;
}

#define SRC_FIELD(member) TPC_PROP_FIELD(tpc_kafka_source_t, member)

static const char *const fallbacks[] = {"earliest", "latest", NULL};

static const tpc_prop_t source_props[] = {
    {.name = "kafka.*",
     .type = TPC_PROP_CUSTOM,
     .set = set_kafka_prop,
     .accepts = "a librdkafka consumer property and its value",
     .doc = "Passed to librdkafka's consumer (security, fetch sizes, ...) and checked when set; "
            "isolation.level, enable.auto.commit, enable.auto.offset.store and "
            "enable.partition.eof are the source's and refused. With kafka.group.id set, the "
            "offsets of each completed checkpoint are committed to that group (monitoring "
            "only). The read-ahead defaults to queued.min.messages=20000 and "
            "queued.max.messages.kbytes=16384 (librdkafka's: 100000 and 65536); the source "
            "wakes fetchers that parked on a full read-ahead queue itself, so a larger one buys "
            "no speed. With librdkafka 2.2 or later, fetch.queue.backoff.ms defaults to 10 "
            "(librdkafka's: 1000)."},
    {.name = "bounded",
     .type = TPC_PROP_BOOL,
     .field = SRC_FIELD(bounded),
     .def = "false",
     .doc = "true: read up to the end offsets taken at the first fresh start, then finish."},
    {.name = "start",
     .type = TPC_PROP_CUSTOM,
     .set = set_start,
     .def = "earliest",
     .accepts = "earliest, latest, group or timestamp:<ms>",
     .doc = "Where a fresh start begins: earliest, latest (the last stable offset), "
            "timestamp:<ms> (the first record stamped at or after <ms> since the epoch, else the "
            "end) or group (the offsets committed to kafka.group.id, which must be set). A "
            "restore always resumes at the checkpoint's offsets."},
    {.name = "start.fallback",
     .type = TPC_PROP_ENUM,
     .field = SRC_FIELD(start_fallback_latest),
     .choices = fallbacks,
     .def = "earliest",
     .doc = "start=group, a partition the group has no offset for: begin at its earliest or "
            "latest offset."},
    {.name = "max.batch",
     .type = TPC_PROP_INT,
     .field = SRC_FIELD(max_batch),
     .min = 1,
     .max = 1000000,
     .def = "500",
     .unit = "records",
     .doc = "Records emitted per poll at most."},
    {.name = "poll.timeout.ms",
     .type = TPC_PROP_INT,
     .field = SRC_FIELD(poll_timeout_ms),
     .min = 0,
     .max = 50,
     .def = "20",
     .unit = "ms",
     .doc = "How long one poll waits for records."},
    {.name = "open.timeout.ms",
     .type = TPC_PROP_INT,
     .field = SRC_FIELD(open_timeout_ms),
     .min = 100,
     .max = INT32_MAX,
     .def = "30000",
     .unit = "ms",
     .doc = "How long open may wait for the cluster."},
    {.name = "partitions",
     .type = TPC_PROP_CUSTOM,
     .set = set_partitions,
     .accepts = "partition numbers and ranges separated by commas, e.g. 3 or 0-3,7",
     .doc = "Read only these partitions of each topic (default: all), dealt to the subtasks by "
            "the usual rule: a keyed stage of a job run as units reads the partition of its "
            "unit from a repartition topic (docs/cluster.md). A listed partition that a listed "
            "topic does not have fails the open; partitions of a restored checkpoint outside "
            "the list are no longer read."},
    {.name = "partition.discovery.interval.ms",
     .type = TPC_PROP_INT,
     .field = SRC_FIELD(discovery_interval_ms),
     .min = 0,
     .max = INT32_MAX,
     .def = "10000",
     .unit = "ms",
     .doc = "Unbounded: how often each subtask looks at its topics' metadata and starts reading "
            "partitions (and topics of a pattern) that appeared, from their first offsets; 0 "
            "turns discovery off. Bounded sources read the partitions of their first start."},
};

static const tpc_props_t source_table = {"kafka source", "tpc_kafka_source_set()", source_props,
                                         sizeof source_props / sizeof *source_props};

const tpc_props_t *tpc_kafka_source_properties(void)
{
    return &source_table;
}

tpc_error_t *tpc_kafka_source_set(tpc_kafka_source_t *src, const char *key, const char *value)
{
    if (!src || !key || !value)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "kafka source key needs a source, a key and a value");
    tpc_error_t *err = tpc_props_set(&source_table, src, key, value);
    if (!err || tpc_error_code(err) != TPC_ERR_NOT_FOUND)
        return err;
    tpc_error_destroy(err);
    const tpc_props_t *tables[] = {&source_table};
    err = tpc_props_unknown(tables, 1, key);
    if (strcmp(key, "group.id") == 0 || strcmp(key, "topic") == 0)
        err = tpc_error_hint(err, "%s",
                             key[0] == 'g' ? "the source assigns partitions itself; to name "
                                             "its consumer group anyway, set \"kafka.group.id\""
                                           : "give the topics to tpc_kafka_source_new()");
    return err;
}

static tpc_error_t *source_set(void *src, const char *key, const char *value)
{
    return tpc_kafka_source_set(src, key, value);
}

tpc_error_t *tpc_kafka_source_configure(tpc_kafka_source_t *src, tpc_config_t *cfg,
                                        const char *name)
{
    if (!src || !cfg || !name)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "configuring a kafka source needs a source, a configuration and its "
                             "name");
    const tpc_props_t *tables[] = {&source_table};
    return tpc_config_apply(cfg, name, tables, 1, source_set, src);
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
        return tpc_error_nomem();
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
            return tpc_error_nomem();
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
    /* glibc's matcher takes back-references (\1 ... \9) in extended patterns too, and with them a
     * match can take exponential time, on the task's thread. Kafka's topic names need none. */
    for (size_t i = 1; i + 1 < len; i++) {
        if (src->topic[i] == '\\' && src->topic[i + 1] >= '1' && src->topic[i + 1] <= '9')
            return tpc_error_hint(tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                                                "kafka topic pattern \"%s\" has a back-reference "
                                                "(\"\\%c\" at %zu)",
                                                src->topic, src->topic[i + 1], i),
                                  "back-references can make matching take exponential time; "
                                  "write the pattern without them");
        if (src->topic[i] == '\\')
            i++; /* an escaped character, an escaped backslash included */
    }
    /* Compiled as written, so that its groups keep the numbers the user gave them; a match must
     * span the whole name (tpc__kafka_source_matches), which needs no group of its own. */
    int rc = regcomp(&src->pattern, src->topic, REG_EXTENDED);
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
        return tpc_error_nomem();
    tpc_error_t *err = tpc_props_init(&source_table, src);
    src->topic = err ? NULL : strdup(topic);
    if (!err)
        err = !src->topic       ? tpc_error_nomem()
              : topic[0] == '^' ? compile(src)
                                : split_topics(src, topic);
    if (!err)
        err = tpc__kafka_props_add(&src->props, &src->nprops, "bootstrap.servers", bootstrap);
    if (err) {
        tpc_kafka_source_destroy(src);
        return err;
    }
    *out = src;
    return NULL;
}

static void vertex_free(tpc__kafka_source_vertex_t *v)
{
    if (!v)
        return;
    tpc__kafka_source_slots_free(v);
    free(v->name);
    free(v);
}

tpc_error_t *tpc_kafka_source_add_to_job(tpc_kafka_source_t *src, tpc_job_t *job, const char *name,
                                         int parallelism, int *vertex_id)
{
    if (!src)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL, "no kafka source given");
    tpc__kafka_source_vertex_t *v = calloc(1, sizeof *v);
    bool slots = false;
    if (v) {
        slots = tpc__kafka_source_slots_new(v, parallelism > 0 ? parallelism : 1);
        v->name = name ? strdup(name) : NULL;
    }
    if (!v || !slots || (name && !v->name)) {
        vertex_free(v);
        return tpc_error_nomem();
    }
    v->conf = src;
    v->parallelism = parallelism;
    tpc_error_t *err =
        tpc_job_add_vertex(job, name, parallelism, &tpc__kafka_source_ops, v, vertex_id);
    if (!err) {
        tpc_err_t rc = tpc_job_add_metrics(job, tpc__kafka_source_metrics, v);
        if (rc != TPC_OK) /* cannot be: add_vertex refuses what add_metrics would */
            err = tpc_error_new(rc, TPC_ERROR_FATAL, "could not add the kafka source's metrics: %s",
                                tpc_strerror(rc));
    }
    if (err) {
        vertex_free(v);
        return err;
    }
    v->next = src->vertices;
    src->vertices = v;
    return NULL;
}

void tpc_kafka_source_destroy(tpc_kafka_source_t *src)
{
    if (!src)
        return;
    while (src->vertices) {
        tpc__kafka_source_vertex_t *v = src->vertices;
        src->vertices = v->next;
        vertex_free(v);
    }
    tpc__kafka_props_free(src->props, src->nprops);
    for (size_t i = 0; i < src->ntopics; i++)
        free(src->topics[i]);
    free(src->topics);
    free(src->topic);
    free(src->ranges);
    if (src->is_pattern)
        regfree(&src->pattern);
    free(src);
}
