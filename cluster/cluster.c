/*
 * A process's membership of an application that runs its job as units: the member's keys, and
 * its run, which is a librdkafka consumer in the group named after the application, subscribed to
 * the lease topic. The group coordinator's assignment decides which units run here: the
 * rebalance callback starts the units assigned (cluster_unit.c) and stops the units revoked with
 * a savepoint before it hands them back, or cancels them when the assignment was lost. The
 * consumer never reads a record; its polls serve the rebalance callback.
 */
#include "cluster_internal.h"
#include "kafka_wire.h"
#include "tpc_s3.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PREFIX    "kafka."
#define UNITS_MAX 4096
#define APP_MAX   100
/* librdkafka 2.12 is the first release whose KIP-848 consumer is not a preview. */
#define RDKAFKA_KIP848 0x020c0000
/* librdkafka before 2.3.0 asserts, and so aborts the process, when it destroys a consumer of the
 * cooperative-sticky assignor that joined its group but never got an assignment (the assignor's
 * state is made by the first one; librdkafka's issues 4312 and 4381). */
#define RDKAFKA_STICKY_DESTROY_FIXED 0x02030000
/* Kafka's UNRELEASED_INSTANCE_ID (KIP-848), which librdkafka 2.0.2's header does not name. */
#define KAFKA_UNRELEASED_INSTANCE_ID ((rd_kafka_resp_err_t)111)

/* Properties the member sets itself: the group and its protocol are the application's, and the
 * consumer commits nothing. */
static const char *const reserved[] = {
    "group.id",           "group.protocol",           "partition.assignment.strategy",
    "enable.auto.commit", "enable.auto.offset.store", "allow.auto.create.topics"};

static tpc_error_t *set_kafka_prop(void *arg, const tpc_prop_t *p, const char *key,
                                   const char *value)
{
    (void)p;
    tpc_cluster_t *c = arg;
    const char *name = key + strlen(PREFIX);
    for (size_t i = 0; i < sizeof reserved / sizeof *reserved; i++)
        if (strcmp(name, reserved[i]) == 0)
            return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                                "\"%s\" cannot be set on a cluster member", key),
                                  "the group is the application's name; choose the protocol "
                                  "with \"group.protocol\"");
    tpc_error_t *err = tpc__kafka_prop_check(
        name, value, "see librdkafka's CONFIGURATION.md for its consumer properties");
    return err ? err : tpc__kafka_props_add(&c->props, &c->nprops, name, value);
}

static const tpc_props_t cluster_table;

/* A key of the S3 checkpoint storage, for every unit's job: checked at once against the
 * backend's own table, kept as text for the jobs. The prefix is the application's, and each unit
 * gets its own under it. */
static tpc_error_t *set_s3_prop(void *arg, const tpc_prop_t *p, const char *key, const char *value)
{
    (void)p;
    tpc_cluster_t *c = arg;
    const tpc_storage_backend_t *b = tpc_s3_storage_backend();
    if (!c->s3_conf) {
        c->s3_conf = calloc(1, b->conf_size);
        tpc_error_t *err = c->s3_conf ? tpc_props_init(b->props, c->s3_conf) : tpc_error_nomem();
        if (err)
            return err;
    }
    tpc_error_t *err = tpc_props_set(b->props, c->s3_conf, key, value);
    if (err && tpc_error_code(err) == TPC_ERR_NOT_FOUND) {
        tpc_error_destroy(err);
        const tpc_props_t *tables[] = {&cluster_table, b->props};
        return tpc_props_unknown(tables, 2, key);
    }
    if (err)
        return err;
    if (strcmp(key, "checkpoint.s3.prefix") != 0)
        return tpc__kafka_props_add(&c->s3_props, &c->ns3_props, key, value);
    char *prefix = strdup(value);
    if (!prefix)
        return tpc_error_nomem();
    free(c->s3_prefix);
    c->s3_prefix = prefix;
    return NULL;
}

#define CL_FIELD(member) TPC_PROP_FIELD(tpc_cluster_t, member)

static const char *const protocols[] = {"classic", "consumer", NULL};
static const char *const storages[] = {"folder", "s3", NULL};

static const tpc_prop_t cluster_props[] = {
    {.name = "kafka.*",
     .type = TPC_PROP_CUSTOM,
     .set = set_kafka_prop,
     .accepts = "a librdkafka consumer property and its value",
     .doc = "Passed to the membership consumer: group.instance.id for static membership (a "
            "name per process, stable across its restarts), session.timeout.ms and "
            "heartbeat.interval.ms (classic protocol), security. group.id, group.protocol, "
            "partition.assignment.strategy, enable.auto.commit, enable.auto.offset.store and "
            "allow.auto.create.topics are the member's and refused."},
    {.name = "checkpoint.dir",
     .type = TPC_PROP_STRING,
     .field = CL_FIELD(checkpoint_dir),
     .accepts = "a folder every process of the application reaches",
     .doc = "Required with checkpoint.storage=folder: unit u keeps its checkpoints in "
            "<checkpoint.dir>/unit-<u>, which every process that may run it must reach "
            "(docs/cluster.md, \"Storage\")."},
    {.name = "checkpoint.storage",
     .type = TPC_PROP_ENUM,
     .field = CL_FIELD(storage),
     .choices = storages,
     .def = "folder",
     .doc = "Where the units keep their checkpoints. folder: <checkpoint.dir>/unit-<u>; s3: "
            "S3-compatible object storage (tpc_s3.h) with the checkpoint.s3.* keys, unit u "
            "under the key prefix <checkpoint.s3.prefix>/unit-<u>/. The library gives each "
            "unit's job the storage and its keys; the build callback sets none of them."},
    {.name = "checkpoint.s3.*",
     .type = TPC_PROP_CUSTOM,
     .set = set_s3_prop,
     .accepts = "a key of the S3 checkpoint storage and its value",
     .doc = "With checkpoint.storage=s3: the keys of the S3 checkpoint storage (bucket, "
            "endpoint, region, timeout.ms, attempts), set on every unit's job. "
            "checkpoint.s3.prefix is the application's: unit u keeps its checkpoints under "
            "<checkpoint.s3.prefix>/unit-<u>/ (unset: <app>/unit-<u>/)."},
    {.name = "group.protocol",
     .type = TPC_PROP_ENUM,
     .field = CL_FIELD(protocol),
     .choices = protocols,
     .def = "classic",
     .doc = "classic: the classic group protocol with the cooperative-sticky assignor "
            "(librdkafka 2.0.2 and later); consumer: KIP-848's protocol, in which the group "
            "coordinator assigns a unit only after its old owner gave it up (librdkafka 2.12 "
            "or later, a broker whose group.coordinator.rebalance.protocols has consumer)."},
    {.name = "lease.topic",
     .type = TPC_PROP_STRING,
     .field = CL_FIELD(lease_topic),
     .accepts = "a topic name",
     .doc = "The topic whose partitions are the units (default: <app>-units); made with one "
            "partition per unit when missing. It holds no records."},
    {.name = "lease.replication.factor",
     .type = TPC_PROP_INT,
     .field = CL_FIELD(replication_factor),
     .min = -1,
     .max = 32767,
     .def = "-1",
     .doc = "Replication factor of a lease topic the member makes; -1: the broker's "
            "default.replication.factor."},
    {.name = "unit.restart.delay.ms",
     .type = TPC_PROP_INT,
     .field = CL_FIELD(restart_delay_ms),
     .min = 0,
     .max = INT32_MAX,
     .def = "5000",
     .unit = "ms",
     .doc = "A unit's job that failed (after its own restart.attempts) is built and run again "
            "after this pause, as long as the unit stays assigned here."},
    {.name = "open.timeout.ms",
     .type = TPC_PROP_INT,
     .field = CL_FIELD(open_timeout_ms),
     .min = 100,
     .max = INT32_MAX,
     .def = "30000",
     .unit = "ms",
     .doc = "How long the member waits for the cluster to describe or make the lease topic."},
};

static const tpc_props_t cluster_table = {"cluster member", "tpc_cluster_set()", cluster_props,
                                          sizeof cluster_props / sizeof *cluster_props};

const tpc_props_t *tpc_cluster_properties(void)
{
    return &cluster_table;
}

static bool valid_app(const char *app)
{
    size_t len = strlen(app);
    if (len < 1 || len > APP_MAX)
        return false;
    for (const char *p = app; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '-' || *p == '.'))
            return false;
    return true;
}

tpc_error_t *tpc_cluster_new(const char *bootstrap, const char *app, int units, tpc_cluster_t **out)
{
    if (out)
        *out = NULL;
    if (!bootstrap || !*bootstrap || !app || !out)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "a cluster member needs bootstrap servers, an application name and "
                             "an out pointer");
    if (!valid_app(app))
        return tpc_error_hint(tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                                            "invalid application name \"%s\"", app),
                              "give 1 to %d letters, digits, '_', '-' or '.'", APP_MAX);
    if (units < 1 || units > UNITS_MAX)
        return tpc_error_hint(
            tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                          "invalid unit count %d for application \"%s\"", units, app),
            "give 1 to %d units, 2 to 4 times the processes you expect to run", UNITS_MAX);
    tpc_cluster_t *c = calloc(1, sizeof *c);
    if (!c)
        return tpc_error_nomem();
    c->units = units;
    c->log_level = TPC_LOG_WARN;
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->event_mu, NULL);
    tpc_cond_init(&c->cond);
    tpc_error_t *err = tpc_props_init(&cluster_table, c);
    c->bootstrap = strdup(bootstrap);
    c->app = strdup(app);
    c->unit = calloc((size_t)units, sizeof *c->unit);
    if (!err && (!c->bootstrap || !c->app || !c->unit))
        err = tpc_error_nomem();
    if (!err)
        err = tpc__kafka_props_add(&c->props, &c->nprops, "bootstrap.servers", bootstrap);
    if (err) {
        tpc_cluster_destroy(c);
        return err;
    }
    *out = c;
    return NULL;
}

tpc_error_t *tpc_cluster_set(tpc_cluster_t *c, const char *key, const char *value)
{
    if (!c || !key || !value)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "cluster key needs a member, a key and a value");
    tpc_error_t *err = tpc_props_set(&cluster_table, c, key, value);
    if (!err || tpc_error_code(err) != TPC_ERR_NOT_FOUND)
        return err;
    tpc_error_destroy(err);
    const tpc_props_t *tables[] = {&cluster_table};
    return tpc_props_unknown(tables, 1, key);
}

tpc_error_t *tpc_cluster_set_builder(tpc_cluster_t *c, tpc_cluster_build_fn build,
                                     tpc_cluster_release_fn release, void *opaque)
{
    if (!c || !build)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "a cluster member's builder needs a member and a build function");
    c->build = build;
    c->release = release;
    c->build_opaque = opaque;
    return NULL;
}

tpc_err_t tpc_cluster_set_event_callback(tpc_cluster_t *c, tpc_cluster_event_fn cb, void *opaque)
{
    if (!c)
        return TPC_ERR_INVALID_ARG;
    c->event_cb = cb;
    c->event_opaque = opaque;
    return TPC_OK;
}

tpc_err_t tpc_cluster_set_logger(tpc_cluster_t *c, tpc_log_cb cb, void *opaque,
                                 tpc_log_level_t max_level)
{
    if (!c)
        return TPC_ERR_INVALID_ARG;
    c->log_cb = cb;
    c->log_opaque = opaque;
    c->log_level = max_level;
    return TPC_OK;
}

void tpc__cluster_log(tpc_cluster_t *c, tpc_log_level_t level, const char *fmt, ...)
{
    if (level > c->log_level)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->log_cb) {
        c->log_cb(c->log_opaque, level, msg);
        return;
    }
    static const char *const names[] = {"ERROR", "WARN ", "INFO ", "DEBUG"};
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    fprintf(stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s cluster \"%s\": %s\n",
            tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
            ts.tv_nsec / 1000000, names[level], c->app, msg);
}

void tpc__cluster_event(tpc_cluster_t *c, tpc_cluster_event_kind_t kind, int unit,
                        const char *savepoint, const tpc_error_t *error)
{
    if (!c->event_cb)
        return;
    tpc_cluster_event_t ev = {.kind = kind, .unit = unit, .savepoint = savepoint, .error = error};
    pthread_mutex_lock(&c->event_mu);
    c->event_cb(c->event_opaque, &ev);
    pthread_mutex_unlock(&c->event_mu);
}

void tpc_cluster_stop(tpc_cluster_t *c)
{
    if (c)
        atomic_store(&c->stop_requested, true);
}

/* ---- membership ---------------------------------------------------------------------------- */

/* The units of @parts that are ours to start or stop: partitions of the lease topic below the
 * unit count (the topic was checked to have exactly that many). */
static int unit_of(const tpc_cluster_t *c, const rd_kafka_topic_partition_t *tp)
{
    return tp->partition >= 0 && tp->partition < c->units ? (int)tp->partition : -1;
}

static void start_units(tpc_cluster_t *c, const rd_kafka_topic_partition_list_t *parts)
{
    for (int i = 0; i < parts->cnt; i++) {
        int u = unit_of(c, &parts->elems[i]);
        if (u < 0)
            continue;
        tpc_error_t *err = tpc__unit_start(&c->unit[u]);
        if (err) {
            /* No thread for it: nothing runs it here, and the run ends. */
            pthread_mutex_lock(&c->mu);
            if (!c->fatal)
                c->fatal = tpc_error_prefix(err, "unit %d: ", u);
            else
                tpc_error_destroy(err);
            pthread_mutex_unlock(&c->mu);
        }
    }
}

/* Revoked units stop with savepoints, all at once: each stop waits for its own savepoint. */
typedef struct {
    tpc__unit_t *u;
    bool savepoint;
} stop_arg_t;

static void *stop_main(void *arg)
{
    stop_arg_t *a = arg;
    tpc__unit_stop(a->u, a->savepoint);
    return NULL;
}

static void stop_units(tpc_cluster_t *c, const rd_kafka_topic_partition_list_t *parts,
                       bool savepoint)
{
    stop_arg_t *args = calloc((size_t)parts->cnt + 1, sizeof *args);
    pthread_t *threads = calloc((size_t)parts->cnt + 1, sizeof *threads);
    bool *started = calloc((size_t)parts->cnt + 1, sizeof *started);
    for (int i = 0; i < parts->cnt; i++) {
        int u = unit_of(c, &parts->elems[i]);
        if (u < 0)
            continue;
        if (args && threads && started) {
            args[i] = (stop_arg_t){&c->unit[u], savepoint};
            started[i] = pthread_create(&threads[i], NULL, stop_main, &args[i]) == 0;
        }
        if (!args || !threads || !started || !started[i])
            tpc__unit_stop(&c->unit[u], savepoint); /* one after the other, then */
    }
    for (int i = 0; started && i < parts->cnt; i++)
        if (started[i])
            pthread_join(threads[i], NULL);
    free(started);
    free(threads);
    free(args);
}

static void list_units(tpc_cluster_t *c, const char *what,
                       const rd_kafka_topic_partition_list_t *parts)
{
    if (parts->cnt == 0) /* a cooperative round that moves nothing here */
        return;
    char buf[512];
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < parts->cnt && at < sizeof buf - 16; i++)
        at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%d", i ? "," : "",
                               (int)parts->elems[i].partition);
    tpc__cluster_log(c, TPC_LOG_INFO, "%s units %s", what, buf);
}

/* Both protocols a member configures hand units over incrementally (the cooperative-sticky
 * assignor, the consumer protocol), so the callback does not ask librdkafka which one runs: during
 * a close, rd_kafka_rebalance_protocol() answers NULL once the group is terminated (a rebalance
 * queued before is still served), and never answers when the group's termination drops the
 * request (librdkafka 2.0.2 purges the queue it went to). */
static void rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t why,
                      rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    tpc_cluster_t *c = opaque;
    rd_kafka_error_t *e = NULL;
    if (why == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        c->assigned_once = true;
        list_units(c, "assigned", parts);
        if (!c->closing)
            start_units(c, parts);
        e = rd_kafka_incremental_assign(rk, parts);
        /* The lease topic holds no records: nothing to fetch. */
        rd_kafka_pause_partitions(rk, parts);
    } else {
        bool lost = rd_kafka_assignment_lost(rk);
        list_units(c, lost ? "lost" : "revoked", parts);
        stop_units(c, parts, !lost);
        e = rd_kafka_incremental_unassign(rk, parts);
    }
    if (e) {
        tpc__cluster_log(c, TPC_LOG_ERROR, "could not take the assignment: %s",
                         rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
    }
}

static void kafka_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    tpc_cluster_t *c = rd_kafka_opaque(rk);
    if (atomic_load(&c->consumer_left))
        return;
    char line[1024];
    if (tpc__kafka_log_quiet(
            fac, buf,
            tpc__kafka_props_get((const char *const *)c->props, c->nprops, "security.protocol"),
            line, sizeof line))
        return;
    tpc__cluster_log(c,
                     level <= 4   ? TPC_LOG_WARN
                     : level <= 6 ? TPC_LOG_INFO
                                  : TPC_LOG_DEBUG,
                     "kafka %s: %s", fac, line);
}

static tpc_error_t *make_consumer(tpc_cluster_t *c, rd_kafka_t **out)
{
    *out = NULL;
    if (c->protocol == 1 && rd_kafka_version() < RDKAFKA_KIP848)
        return tpc_error_hint(tpc_error_new(TPC_ERR_UNSUPPORTED, TPC_ERROR_FATAL,
                                            "group.protocol=consumer needs librdkafka 2.12 or "
                                            "later, this is %s",
                                            rd_kafka_version_str()),
                              "use group.protocol=classic, or run with a newer librdkafka");
    rd_kafka_conf_t *rc = rd_kafka_conf_new();
    const char *hint = "see librdkafka's CONFIGURATION.md for its consumer properties";
    const char *own[][2] = {
        {"group.id", c->app},
        {"enable.auto.commit", "false"},
        {"enable.auto.offset.store", "false"},
        {"allow.auto.create.topics", "false"},
        {c->protocol == 1 ? "group.protocol" : "partition.assignment.strategy",
         c->protocol == 1 ? "consumer" : "cooperative-sticky"},
    };
    tpc_error_t *err = NULL;
    for (size_t i = 0; !err && i < c->nprops; i++) /* pairs */
        err = tpc__kafka_conf_set(rc, c->props[2 * i], c->props[2 * i + 1], hint);
    for (size_t i = 0; !err && i < sizeof own / sizeof *own; i++)
        err = tpc__kafka_conf_set(rc, own[i][0], own[i][1], hint);
    if (err) {
        rd_kafka_conf_destroy(rc);
        return err;
    }
    rd_kafka_conf_set_opaque(rc, c);
    rd_kafka_conf_set_log_cb(rc, kafka_log);
    rd_kafka_conf_set_rebalance_cb(rc, rebalance);
    char why[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, rc, why, sizeof why);
    if (!rk) {
        rd_kafka_conf_destroy(rc);
        return tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                             "could not make the membership consumer of \"%s\": %s", c->app, why);
    }
    char session[32] = "";
    size_t size = sizeof session;
    c->session_timeout_ms = 45000; /* librdkafka's default */
    if (rd_kafka_conf_get(rd_kafka_conf(rk), "session.timeout.ms", session, &size) ==
        RD_KAFKA_CONF_OK)
        c->session_timeout_ms = strtoll(session, NULL, 10);
    rd_kafka_poll_set_consumer(rk);
    *out = rk;
    return NULL;
}

static tpc_error_t *subscribe(tpc_cluster_t *c, rd_kafka_t *rk, const char *topic)
{
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, topic, RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t e = rd_kafka_subscribe(rk, list);
    rd_kafka_topic_partition_list_destroy(list);
    if (!e)
        return NULL;
    return tpc_error_new(TPC_ERR_EXTERNAL, TPC_ERROR_FATAL,
                         "could not subscribe group \"%s\" to lease topic \"%s\": %s", c->app,
                         topic, rd_kafka_err2str(e));
}

/* Poll until a stop, a fatal unit error or a fatal consumer error. */
static tpc_error_t *serve(tpc_cluster_t *c, rd_kafka_t *rk)
{
    int64_t last_warn = 0;
    while (!atomic_load(&c->stop_requested)) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (m) {
            rd_kafka_resp_err_t e = m->err;
            if (e && e != RD_KAFKA_RESP_ERR__PARTITION_EOF && tpc_clock_ms() - last_warn > 10000) {
                last_warn = tpc_clock_ms();
                tpc__cluster_log(c, TPC_LOG_WARN, "membership consumer: %s",
                                 rd_kafka_message_errstr(m));
            }
            rd_kafka_message_destroy(m);
        }
        char why[512];
        rd_kafka_resp_err_t fatal = rd_kafka_fatal_error(rk, why, sizeof why);
        if (fatal == RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID || fatal == KAFKA_UNRELEASED_INSTANCE_ID)
            return tpc_error_hint(
                tpc_error_new(TPC_ERR_EXTERNAL, TPC_ERROR_FATAL,
                              "the membership consumer of \"%s\" failed: %s", c->app, why),
                "another member has this process's group.instance.id: give each process its own; "
                "under group.protocol=consumer a member started again with the identity of one "
                "that died can join only once the broker ended the dead one's session "
                "(group.consumer.session.timeout.ms): start it again after that");
        if (fatal)
            return tpc_error_new(TPC_ERR_EXTERNAL, TPC_ERROR_FATAL,
                                 "the membership consumer of \"%s\" failed: %s", c->app, why);
        pthread_mutex_lock(&c->mu);
        tpc_error_t *err = c->fatal;
        c->fatal = NULL;
        pthread_mutex_unlock(&c->mu);
        if (err)
            return err;
    }
    return NULL;
}

/* librdkafka before 2.3.0 aborts when it destroys a consumer of the classic protocol that joined
 * but had no assignment yet (RDKAFKA_STICKY_DESTROY_FIXED): a member stopped during its first
 * join. Then poll on, for at most the session timeout (after it the group has handed out its
 * assignment, or dropped whoever held the rebalance up), taking assignments without starting
 * units, until the first one came. @returns false when the consumer must not be destroyed. */
static bool safe_to_destroy(tpc_cluster_t *c, rd_kafka_t *rk, bool subscribed)
{
    if (!subscribed || c->assigned_once || c->protocol == 1 ||
        rd_kafka_version() >= RDKAFKA_STICKY_DESTROY_FIXED)
        return true;
    int64_t wait_ms = c->session_timeout_ms;
    int64_t until = tpc_clock_ms() + wait_ms;
    char why[256];
    c->closing = true;
    while (!c->assigned_once && tpc_clock_ms() < until &&
           rd_kafka_fatal_error(rk, why, sizeof why) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (m)
            rd_kafka_message_destroy(m);
    }
    c->closing = false;
    if (c->assigned_once)
        return true;
    tpc__cluster_log(c, TPC_LOG_WARN,
                     "the membership consumer of \"%s\" had no assignment %lld ms after the "
                     "stop and is left undestroyed: librdkafka %s would abort the process "
                     "destroying it (fixed in librdkafka 2.3.0)",
                     c->app, (long long)wait_ms, rd_kafka_version_str());
    return false;
}

tpc_error_t *tpc_cluster_run(tpc_cluster_t *c)
{
    if (!c)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL, "no cluster member given");
    bool s3 = c->storage == 1;
    bool no_bucket = s3 && !tpc__kafka_props_get((const char *const *)c->s3_props, c->ns3_props,
                                                 "checkpoint.s3.bucket");
    if (!c->build || (!s3 && !c->checkpoint_dir) || no_bucket)
        return tpc_error_hint(
            tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL, "cluster member of \"%s\" has no %s",
                          c->app,
                          !c->build   ? "builder"
                          : no_bucket ? "\"checkpoint.s3.bucket\""
                                      : "\"checkpoint.dir\""),
            "%s",
            !c->build   ? "call tpc_cluster_set_builder()"
            : no_bucket ? "name the bucket that holds the units' checkpoints"
                        : "set \"checkpoint.dir\" to a folder every process of the application "
                          "reaches, or \"checkpoint.storage\" to \"s3\" and its keys");
    tpc_error_t *err = NULL;
    for (int u = 0; !err && u < c->units; u++)
        if (!c->unit[u].c)
            err = tpc__unit_init(c, u, &c->unit[u]);
    char topic[256];
    snprintf(topic, sizeof topic, "%s%s", c->lease_topic ? c->lease_topic : c->app,
             c->lease_topic ? "" : "-units");
    rd_kafka_t *rk = NULL;
    if (!err)
        err = make_consumer(c, &rk);
    if (!err)
        err = tpc__cluster_lease_topic(rk, topic, c->units, c->replication_factor,
                                       c->open_timeout_ms);
    c->assigned_once = c->closing = false;
    if (!err)
        err = subscribe(c, rk, topic);
    bool subscribed = !err;
    if (!err) {
        tpc__cluster_log(c, TPC_LOG_INFO,
                         "joined group \"%s\" (%s protocol) over %d units of \"%s\"", c->app,
                         c->protocol == 1 ? "consumer" : "classic", c->units, topic);
        err = serve(c, rk);
    }
    if (rk) {
        bool destroy = safe_to_destroy(c, rk, subscribed);
        /* Close revokes what is assigned: units stop with savepoints, then the group is left. An
         * assignment it serves that was queued before (a rebalance under way at the stop) starts
         * nothing: this member is leaving, and the group hands those units to another. */
        c->closing = true;
        rd_kafka_consumer_close(rk);
        c->closing = false;
        if (destroy)
            rd_kafka_destroy(rk);
        else
            atomic_store(&c->consumer_left, true);
    }
    for (int u = 0; u < c->units; u++)
        if (c->unit[u].c)
            tpc__unit_stop(&c->unit[u], true);
    pthread_mutex_lock(&c->mu);
    if (!err)
        err = c->fatal;
    else
        tpc_error_destroy(c->fatal);
    c->fatal = NULL;
    pthread_mutex_unlock(&c->mu);
    atomic_store(&c->stop_requested, false);
    return err;
}

void tpc_cluster_destroy(tpc_cluster_t *c)
{
    if (!c)
        return;
    for (int u = 0; c->unit && u < c->units; u++)
        tpc__unit_free(&c->unit[u]);
    free(c->unit);
    tpc_props_free(&cluster_table, c);
    tpc__kafka_props_free(c->props, c->nprops);
    tpc__kafka_props_free(c->s3_props, c->ns3_props);
    if (c->s3_conf)
        tpc_props_free(tpc_s3_properties(), c->s3_conf);
    free(c->s3_conf);
    free(c->s3_prefix);
    tpc_error_destroy(c->fatal);
    free(c->bootstrap);
    free(c->app);
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->event_mu);
    pthread_mutex_destroy(&c->mu);
    if (!atomic_load(&c->consumer_left))
        free(c); /* else the undestroyed consumer's log callback still reads it */
}
