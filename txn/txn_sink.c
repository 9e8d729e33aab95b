/*
 * The sink object: a connector's ops table and configuration, the sink's own settings
 * (guarantee, transaction timeout, commit retries), statistics shared by its subtasks, and adding
 * it to a job as a vertex. Settings are plain fields written on the configuring thread before the
 * sink is handed to a job; from then on subtasks only read them, and only the counters change
 * (atomically), so no lock is needed anywhere.
 */
#include "txn_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *tpc_txn_guarantee_name(tpc_txn_guarantee_t g)
{
    switch (g) {
    case TPC_TXN_EXACTLY_ONCE:
        return "exactly-once";
    case TPC_TXN_AT_LEAST_ONCE:
        return "at-least-once";
    case TPC_TXN_NONE:
        return "none";
    }
    return "unknown";
}

static const char *missing_op(const tpc_txn_connector_ops_t *ops)
{
#define TPC__REQUIRE(field)                                                                        \
    if (!ops->field)                                                                               \
        return #field;
    TPC__REQUIRE(open)
    TPC__REQUIRE(close)
    TPC__REQUIRE(begin)
    TPC__REQUIRE(write)
    TPC__REQUIRE(pre_commit)
    TPC__REQUIRE(commit)
    TPC__REQUIRE(abort)
    TPC__REQUIRE(recover_and_commit)
    TPC__REQUIRE(recover_and_abort)
    TPC__REQUIRE(serialize)
    TPC__REQUIRE(deserialize)
    TPC__REQUIRE(is_empty)
    TPC__REQUIRE(free_txn)
    TPC__REQUIRE(describe)
#undef TPC__REQUIRE
    return NULL;
}

tpc_error_t *tpc_txn_sink_new(const tpc_txn_connector_ops_t *ops, void *arg, tpc_txn_sink_t **out)
{
    if (out)
        *out = NULL;
    if (!ops || !out) {
        if (ops && ops->release && arg)
            ops->release(arg);
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "transactional sink needs a connector ops table and an out pointer");
    }
    const char *name = ops->name ? ops->name : "unnamed";
    tpc_error_t *err = NULL;
    const char *missing = NULL;
    if (ops->version < 1 || ops->version > TPC_TXN_CONNECTOR_OPS_VERSION) {
        err = tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                            "connector \"%s\" has ops version %d, this library knows 1 to %d", name,
                            ops->version, TPC_TXN_CONNECTOR_OPS_VERSION);
        err = tpc_error_hint(err, "rebuild the connector against this version of tpc_txn.h");
    } else if ((missing = missing_op(ops)) != NULL) {
        err = tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                            "connector \"%s\" does not implement \"%s\"", name, missing);
    }
    tpc_txn_sink_t *sink = err ? NULL : calloc(1, sizeof *sink);
    if (!err && !sink)
        err = tpc_error_nomem();
    if (err) {
        if (ops->release && arg)
            ops->release(arg);
        return err;
    }
    sink->ops = ops;
    sink->arg = arg;
    tpc_error_destroy(tpc_props_init(tpc_txn_sink_properties(), &sink->conf)); /* cannot fail */
    *out = sink;
    return NULL;
}

static tpc_error_t *set_warn_ratio(void *conf, const tpc_prop_t *p, const char *key,
                                   const char *value)
{
    char *end = NULL;
    errno = 0;
    double d = strtod(value, &end);
    if (errno || end == value || *end || !isfinite(d) || d <= 0.0 || d > 1.0 || value[0] < '0' ||
        value[0] > '9') /* no spaces, no sign */
        return tpc_prop_invalid(p, key, value, NULL);
    ((tpc__txn_conf_t *)conf)->warn_ratio = d;
    return NULL;
}

#define SINK_FIELD(member) TPC_PROP_FIELD(tpc__txn_conf_t, member)
#define MS_MAX             (INT64_MAX / 1000)

static const char *const guarantees[] = {"exactly-once", "at-least-once", "none", NULL};
static const char *const expired_rules[] = {"fail", "log", NULL};

/* The keys every transactional sink takes; a connector's own keys are in its table. */
static const tpc_prop_t sink_props[] = {
    {.name = "guarantee",
     .type = TPC_PROP_ENUM,
     .field = SINK_FIELD(guarantee),
     .choices = guarantees,
     .def = "exactly-once",
     .doc = "exactly-once: two-phase commit on checkpoints; at-least-once: commit at checkpoints, "
            "records may be written again after a failure; none: commit as soon as written."},
    {.name = "transaction.timeout.ms",
     .type = TPC_PROP_INT,
     .field = SINK_FIELD(timeout_ms),
     .min = 0,
     .max = MS_MAX,
     .def = "0",
     .unit = "ms",
     .doc = "How long the external system keeps an open transaction; 0 means unknown or "
            "unlimited."},
    {.name = "transaction.timeout.warn-ratio",
     .type = TPC_PROP_CUSTOM,
     .set = set_warn_ratio,
     .def = "0.8",
     .accepts = "a number greater than 0 and at most 1",
     .doc = "Warn when a pending transaction is this old, as a fraction of "
            "transaction.timeout.ms."},
    {.name = "recovery.expired",
     .type = TPC_PROP_ENUM,
     .field = SINK_FIELD(expired_log),
     .choices = expired_rules,
     .def = "fail",
     .doc = "A restored transaction older than the timeout that cannot be committed. fail: fail "
            "the job; log: report the data loss loudly and go on."},
    {.name = "commit.retry.deadline.ms",
     .type = TPC_PROP_INT,
     .field = SINK_FIELD(retry_deadline_ms),
     .min = 0,
     .max = MS_MAX,
     .def = "60000",
     .unit = "ms",
     .doc = "Retry retriable commit errors this long."},
    {.name = "commit.retry.backoff.ms",
     .type = TPC_PROP_INT,
     .field = SINK_FIELD(backoff_ms),
     .min = 1,
     .max = MS_MAX,
     .def = "50",
     .unit = "ms",
     .doc = "First pause between commit retries; it doubles up to commit.retry.backoff-max.ms."},
    {.name = "commit.retry.backoff-max.ms",
     .type = TPC_PROP_INT,
     .field = SINK_FIELD(backoff_max_ms),
     .min = 1,
     .max = MS_MAX,
     .def = "2000",
     .unit = "ms",
     .doc = "Longest pause between commit retries."},
};

static const tpc_props_t sink_table = {"transactional sink", "tpc_txn_sink_set()", sink_props,
                                       sizeof sink_props / sizeof *sink_props};

const tpc_props_t *tpc_txn_sink_properties(void)
{
    return &sink_table;
}

/* The connector's own table, for connectors built against version 2 or later of the ops. */
static const tpc_props_t *connector_props(const tpc_txn_connector_ops_t *ops)
{
    return ops->version >= 2 ? ops->props : NULL;
}

tpc_error_t *tpc_txn_sink_set(tpc_txn_sink_t *sink, const char *key, const char *value)
{
    if (!sink || !key || !value)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "configuration needs a sink, a key and a value");
    if (sink->added)
        return tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL,
                             "cannot set \"%s\": the sink is already part of a job", key);
    tpc_error_t *err = tpc_props_set(&sink_table, &sink->conf, key, value);
    const tpc_props_t *own = connector_props(sink->ops);
    if (own && err && tpc_error_code(err) == TPC_ERR_NOT_FOUND) {
        tpc_error_destroy(err);
        err = tpc_props_set(own, sink->arg, key, value);
    }
    if (sink->ops->configure && err && tpc_error_code(err) == TPC_ERR_NOT_FOUND) {
        tpc_error_destroy(err);
        err = sink->ops->configure(sink->arg, key, value);
    }
    if (!err || tpc_error_code(err) != TPC_ERR_NOT_FOUND)
        return err;
    tpc_error_destroy(err);
    /* Named after the connector when it has no table of its own. */
    char what[96];
    snprintf(what, sizeof what, "\"%s\" sink", sink->ops->name ? sink->ops->name : "unnamed");
    tpc_props_t named = sink_table;
    named.component = what;
    const tpc_props_t *tables[] = {own ? own : &named, &sink_table};
    err = tpc_props_unknown(tables, own ? 2 : 1, key);
    /* tpc_error_hint() formats the new hint before it frees the old one, so it may quote it. */
    if (!own && tpc_error_hint_text(err))
        err = tpc_error_hint(err, "%s; the connector's own keys are in its documentation",
                             tpc_error_hint_text(err));
    return err;
}

static tpc_error_t *sink_set(void *sink, const char *key, const char *value)
{
    return tpc_txn_sink_set(sink, key, value);
}

tpc_error_t *tpc_txn_sink_configure(tpc_txn_sink_t *sink, tpc_config_t *cfg, const char *name)
{
    if (!sink || !cfg || !name)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "configuring a sink needs a sink, a configuration and its name");
    const tpc_props_t *own = connector_props(sink->ops);
    const tpc_props_t *tables[] = {own ? own : &sink_table, &sink_table};
    return tpc_config_apply(cfg, name, tables, own ? 2 : 1, sink_set, sink);
}

tpc_error_t *tpc_txn_sink_add_to_job(tpc_txn_sink_t *sink, tpc_job_t *job, const char *name,
                                     int parallelism, int *vertex_id)
{
    if (!sink || !job || !name)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "adding a sink needs a sink, a job and a vertex name");
    if (sink->added)
        return tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL,
                             "cannot add sink \"%s\": the sink is already part of a job", name);
    if (sink->conf.backoff_max_ms < sink->conf.backoff_ms)
        sink->conf.backoff_max_ms = sink->conf.backoff_ms;
    tpc_error_t *err =
        tpc_job_add_vertex(job, name, parallelism, &tpc__txn_operator_ops, sink, vertex_id);
    if (err)
        return err;
    sink->added = true;
    free(sink->name);
    sink->name = strdup(name);
    free(sink->stats.oldest_pending_ms);
    sink->stats.oldest_pending_ms =
        calloc((size_t)parallelism, sizeof *sink->stats.oldest_pending_ms);
    sink->stats.nsubtasks = sink->stats.oldest_pending_ms ? parallelism : 0;
    if (sink->name)
        tpc_job_add_metrics(job, tpc__txn_metrics, sink);
    return NULL;
}

void *tpc_txn_sink_connector_arg(const tpc_txn_sink_t *sink)
{
    return sink ? sink->arg : NULL;
}

const tpc_txn_connector_ops_t *tpc_txn_sink_connector_ops(const tpc_txn_sink_t *sink)
{
    return sink ? sink->ops : NULL;
}

void tpc_txn_sink_get_stats(const tpc_txn_sink_t *sink, tpc_txn_sink_stats_t *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (!sink)
        return;
    /* The counters are atomics in a struct the caller sees as const; reading them never
     * modifies them, but atomic_load wants a non-const pointer. */
    tpc__txn_counters_t *s = (tpc__txn_counters_t *)&sink->stats;
    out->pending = atomic_load(&s->pending);
    out->begun = atomic_load(&s->begun);
    out->pre_commits = atomic_load(&s->pre_commits);
    out->commits = atomic_load(&s->commits);
    out->recovered_commits = atomic_load(&s->recovered_commits);
    out->aborts = atomic_load(&s->aborts);
    out->empty_skipped = atomic_load(&s->empty_skipped);
    out->commit_retries = atomic_load(&s->commit_retries);
    out->commit_latency_us = atomic_load(&s->commit_latency_us);
    out->commit_latency_max_us = atomic_load(&s->commit_latency_max_us);
    out->expired_lost = atomic_load(&s->expired_lost);
    out->records = atomic_load(&s->records);
}

void tpc_txn_sink_destroy(tpc_txn_sink_t *sink)
{
    if (!sink)
        return;
    if (sink->ops->release && sink->arg)
        sink->ops->release(sink->arg);
    free(sink->name);
    free(sink->stats.oldest_pending_ms);
    free(sink);
}
