/*
 * Calling a connector where a transient failure must not fail the job at once: commits, and the
 * recovery calls that finish or drop a restored transaction. An error flagged retriable is retried
 * with exponential backoff until commit.retry.deadline.ms has passed (or the job is canceled);
 * every other error, and the last retriable one, goes back to the caller, which names the
 * transaction and checkpoint. Also the logging and clock helpers the state machine shares.
 */
#include "tpc_kit.h"
#include "txn_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

static const char *const op_names[] = {"commit", "recovery commit", "recovery abort"};

static void vlog(const tpc__txn_env_t *env, tpc_log_level_t level, const char *fmt, va_list ap)
{
    if (!env->log)
        return;
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    env->log(env->opaque, level, msg);
}

void tpc__txn_logf(const tpc__txn_env_t *env, tpc_log_level_t level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(env, level, fmt, ap);
    va_end(ap);
}

void tpc_txn_log(const tpc_txn_subtask_t *st, tpc_log_level_t level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(st->tpc__env, level, fmt, ap);
    va_end(ap);
}

bool tpc_txn_is_canceled(const tpc_txn_subtask_t *st)
{
    const tpc__txn_env_t *env = st->tpc__env;
    return env->is_canceled && env->is_canceled(env->opaque);
}

bool tpc_txn_subtask_canceled(void *arg)
{
    return arg && tpc_txn_is_canceled(arg);
}

bool tpc__txn_canceled(const tpc__txn_task_t *t)
{
    return t->env.is_canceled && t->env.is_canceled(t->env.opaque);
}

void tpc__txn_describe(const tpc__txn_task_t *t, const void *txn, char *buf, size_t cap)
{
    buf[0] = '\0';
    t->ops->describe(t->conn, txn, buf, cap);
    buf[cap - 1] = '\0';
}

static void count_max(atomic_uint_fast64_t *max, uint64_t v)
{
    uint_fast64_t cur = atomic_load(max);
    while (cur < v && !atomic_compare_exchange_weak(max, &cur, v))
        ;
}

static bool task_canceled(void *t)
{
    return tpc__txn_canceled(t);
}

static tpc_error_t *call_once(tpc__txn_task_t *t, tpc__txn_op_t op, void *txn)
{
    switch (op) {
    case TPC__TXN_OP_COMMIT:
        return t->ops->commit(t->conn, txn);
    case TPC__TXN_OP_RECOVER_COMMIT:
        return t->ops->recover_and_commit(t->conn, txn);
    case TPC__TXN_OP_RECOVER_ABORT:
        return tpc__txn_recover_and_abort(t->ops, t->conn, txn);
    }
    return NULL;
}

static tpc_error_t *with_retries(tpc__txn_task_t *t, tpc__txn_op_t op, void *txn, const char *name)
{
    tpc_backoff_t b;
    tpc_backoff_init(&b, tpc_clock_ms() + (int64_t)t->conf->retry_deadline_ms,
                     (int64_t)t->conf->backoff_ms, (int64_t)t->conf->backoff_max_ms);
    for (;;) {
        tpc_error_t *err = call_once(t, op, txn);
        if (!err || !tpc_error_is_retriable(err))
            return err;
        if (tpc__txn_canceled(t))
            return tpc_error_prefix(err, "canceled while retrying");
        if (tpc_clock_ms() + tpc_backoff_next_ms(&b) > b.deadline_ms) {
            err = tpc_error_prefix(err, "gave up after retrying for %" PRId64 " ms",
                                   tpc_backoff_elapsed_ms(&b));
            if (!tpc_error_hint_text(err))
                err = tpc_error_hint(err, "raise commit.retry.deadline.ms if the external "
                                          "system needs longer to come back");
            return err;
        }
        tpc__txn_logf(&t->env, TPC_LOG_WARN,
                      "%s of transaction \"%s\" failed, retrying in %" PRId64 " ms: %s",
                      op_names[op], name, tpc_backoff_next_ms(&b), tpc_error_message(err));
        atomic_fetch_add(&t->stats->commit_retries, 1);
        if (!tpc_backoff_wait(&b, task_canceled, t))
            return tpc_error_prefix(err, "canceled while retrying");
        tpc_error_destroy(err);
    }
}

tpc_error_t *tpc__txn_call(tpc__txn_task_t *t, tpc__txn_op_t op, void *txn, const char *name)
{
    uint64_t t0 = (uint64_t)tpc_clock_us();
    tpc_error_t *err = with_retries(t, op, txn, name);
    if (op != TPC__TXN_OP_RECOVER_ABORT) {
        uint64_t took = (uint64_t)tpc_clock_us() - t0;
        atomic_fetch_add(&t->stats->commit_latency_us, took);
        count_max(&t->stats->commit_latency_max_us, took);
        tpc__txn_observe_commit(t->stats, took);
    }
    return err;
}
