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
        err = tpc_error_new(TPC_ERR_NOMEM, TPC_ERROR_FATAL, "out of memory");
    if (err) {
        if (ops->release && arg)
            ops->release(arg);
        return err;
    }
    sink->ops = ops;
    sink->arg = arg;
    sink->conf = (tpc__txn_conf_t){
        .guarantee = TPC_TXN_EXACTLY_ONCE,
        .timeout_ms = 0,
        .warn_ratio = 0.8,
        .expired_log = false,
        .retry_deadline_ms = 60000,
        .backoff_ms = 50,
        .backoff_max_ms = 2000,
    };
    *out = sink;
    return NULL;
}

static tpc_error_t *bad_value(const char *key, const char *value, const char *accepted)
{
    tpc_error_t *err = tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                     "invalid value \"%s\" for \"%s\"", value, key);
    return tpc_error_hint(err, "\"%s\" accepts %s", key, accepted);
}

static bool parse_u64(const char *s, uint64_t *out)
{
    int64_t v;
    if (!tpc_parse_int(s, 0, INT64_MAX, &v))
        return false;
    *out = (uint64_t)v;
    return true;
}

tpc_error_t *tpc_txn_sink_set(tpc_txn_sink_t *sink, const char *key, const char *value)
{
    if (!sink || !key || !value)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "configuration needs a sink, a key and a value");
    if (sink->added)
        return tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL,
                             "cannot set \"%s\": the sink is already part of a job", key);
    tpc__txn_conf_t *c = &sink->conf;
    uint64_t u = 0;
    if (strcmp(key, "guarantee") == 0) {
        if (strcmp(value, "exactly-once") == 0)
            c->guarantee = TPC_TXN_EXACTLY_ONCE;
        else if (strcmp(value, "at-least-once") == 0)
            c->guarantee = TPC_TXN_AT_LEAST_ONCE;
        else if (strcmp(value, "none") == 0)
            c->guarantee = TPC_TXN_NONE;
        else
            return bad_value(key, value, "\"exactly-once\", \"at-least-once\" or \"none\"");
        return NULL;
    }
    if (strcmp(key, "recovery.expired") == 0) {
        if (strcmp(value, "fail") == 0)
            c->expired_log = false;
        else if (strcmp(value, "log") == 0)
            c->expired_log = true;
        else
            return bad_value(key, value, "\"fail\" or \"log\"");
        return NULL;
    }
    if (strcmp(key, "transaction.timeout.warn-ratio") == 0) {
        char *end = NULL;
        errno = 0;
        double d = strtod(value, &end);
        if (errno || end == value || *end || !isfinite(d) || d <= 0.0 || d > 1.0 ||
            value[0] < '0' || value[0] > '9') /* no spaces, no sign */
            return bad_value(key, value, "a number greater than 0 and at most 1");
        c->warn_ratio = d;
        return NULL;
    }
    uint64_t *target = NULL;
    uint64_t min = 0;
    if (strcmp(key, "transaction.timeout.ms") == 0)
        target = &c->timeout_ms;
    else if (strcmp(key, "commit.retry.deadline.ms") == 0)
        target = &c->retry_deadline_ms;
    else if (strcmp(key, "commit.retry.backoff.ms") == 0)
        target = &c->backoff_ms, min = 1;
    else if (strcmp(key, "commit.retry.backoff-max.ms") == 0)
        target = &c->backoff_max_ms, min = 1;
    if (target) {
        if (!parse_u64(value, &u) || u < min || u > UINT64_MAX / 1000)
            return bad_value(key, value,
                             min ? "a whole number of milliseconds, at least 1"
                                 : "a whole number of milliseconds");
        *target = u;
        return NULL;
    }
    if (sink->ops->configure) {
        tpc_error_t *err = sink->ops->configure(sink->arg, key, value);
        if (!err || tpc_error_code(err) != TPC_ERR_NOT_FOUND)
            return err;
        tpc_error_destroy(err);
    }
    tpc_error_t *err = tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                     "unrecognized configuration key \"%s\" for a \"%s\" sink", key,
                                     sink->ops->name ? sink->ops->name : "unnamed");
    return tpc_error_hint(err, "sink keys are guarantee, transaction.timeout.ms, "
                               "transaction.timeout.warn-ratio, recovery.expired, "
                               "commit.retry.deadline.ms, commit.retry.backoff.ms, "
                               "commit.retry.backoff-max.ms; see the connector's documentation "
                               "for its own keys");
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
    free(sink);
}
