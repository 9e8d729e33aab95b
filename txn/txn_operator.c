/*
 * The sink vertex as the runtime sees it: a tpc_operator_ops_t whose callbacks translate the
 * runtime's context, batches and state readers/writers into the plain arguments of the
 * transaction state machine in txn_task.c. Nothing here decides anything about transactions.
 */
#include "txn_internal.h"

#include <stdlib.h>

typedef struct {
    tpc__txn_task_t *task;
    tpc_record_t *records; /* reused for every batch: no allocation per batch */
    size_t cap;
} sink_op_t;

static void log_to_ctx(void *opaque, tpc_log_level_t level, const char *message)
{
    tpc_log(opaque, level, "%s", message);
}

static bool ctx_canceled(void *opaque)
{
    return tpc_ctx_is_canceled(opaque);
}

static tpc_error_t *op_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    const tpc_txn_sink_t *sink = arg;
    /* Without checkpoints after finish() the last transaction could never be committed: refuse
     * before any record is written rather than lose it at the end. */
    if (sink->conf.guarantee == TPC_TXN_EXACTLY_ONCE && !tpc_ctx_checkpointing(ctx))
        return tpc_error_hint(
            tpc_error_new(TPC_ERR_CONFIG, 0,
                          "sink \"%s\" is exactly-once but job \"%s\" does not checkpoint "
                          "after tasks finish",
                          tpc_ctx_vertex_name(ctx), tpc_ctx_job_name(ctx)),
            "set \"checkpoint.dir\" and keep \"checkpoint.after-finish\" true, or set the "
            "sink's \"guarantee\" to at-least-once or none");
    sink_op_t *s = calloc(1, sizeof *s);
    if (!s)
        return tpc_error_nomem();
    /* The context lives from open to close, as long as the task: it can be the logger's. */
    tpc__txn_env_t env = {
        .job_name = tpc_ctx_job_name(ctx),
        .sink_name = tpc_ctx_vertex_name(ctx),
        .subtask = tpc_ctx_subtask(ctx),
        .parallelism = tpc_ctx_parallelism(ctx),
        .attempt = tpc_ctx_attempt(ctx),
        .restored_checkpoint = tpc_ctx_restored_checkpoint(ctx),
        .restored_parallelism = tpc_ctx_restored_parallelism(ctx),
        .highest_parallelism = tpc_ctx_highest_parallelism(ctx),
        .first_checkpoint = tpc_ctx_first_checkpoint_id(ctx),
        .restored_behind = tpc_ctx_restored_behind(ctx),
        .checkpoint_interval_ms = tpc_ctx_checkpoint_interval_ms(ctx),
        .owner_epoch = tpc_ctx_owner_epoch(ctx),
        .log = log_to_ctx,
        .is_canceled = ctx_canceled,
        .opaque = ctx,
    };
    tpc_error_t *err = tpc__txn_task_open(arg, &env, &s->task);
    if (err) {
        free(s);
        return err;
    }
    *self = s;
    return NULL;
}

static tpc_error_t *op_initialize_state(void *self, tpc_ctx_t *ctx,
                                        const tpc_state_reader_t *restored)
{
    (void)ctx;
    sink_op_t *s = self;
    /* Handles are owned state: the runtime hands this subtask those of the old subtasks it owns
     * (tpc_txn_owns()), and the task checks their origin again. List state holds those of
     * checkpoints written by older versions, union state those of a short-lived development
     * format. */
    size_t nlist = restored ? tpc_state_count(restored, TPC_STATE_LIST) : 0;
    size_t nunion = restored ? tpc_state_count(restored, TPC_STATE_UNION) : 0;
    size_t nowned = restored ? tpc_state_count(restored, TPC_STATE_OWNED) : 0;
    size_t count = nlist + nunion + nowned;
    tpc__txn_bytes_t *entries = NULL;
    if (count) {
        entries = calloc(count, sizeof *entries);
        if (!entries)
            return tpc_error_nomem();
        for (size_t i = 0; i < nlist; i++)
            tpc_state_get(restored, TPC_STATE_LIST, i, &entries[i].bytes, &entries[i].len);
        for (size_t i = 0; i < nunion; i++)
            tpc_state_get(restored, TPC_STATE_UNION, i, &entries[nlist + i].bytes,
                          &entries[nlist + i].len);
        for (size_t i = 0; i < nowned; i++)
            tpc_state_get(restored, TPC_STATE_OWNED, i, &entries[nlist + nunion + i].bytes,
                          &entries[nlist + nunion + i].len);
    }
    tpc_error_t *err = tpc__txn_task_initialize(s->task, entries, count);
    free(entries);
    return err;
}

static tpc_error_t *op_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)ctx;
    sink_op_t *s = self;
    size_t n = tpc_batch_count(batch);
    if (!tpc_array_grow(&s->records, &s->cap, n, sizeof *s->records))
        return tpc_error_nomem();
    for (size_t i = 0; i < n; i++)
        tpc_batch_get(batch, i, &s->records[i]);
    return tpc__txn_task_write(s->task, s->records, n);
}

static tpc_error_t *add_entry(void *w, const void *bytes, size_t len)
{
    return tpc_state_add(w, TPC_STATE_OWNED, bytes, len);
}

static tpc_error_t *op_snapshot_state(void *self, tpc_ctx_t *ctx, uint64_t checkpoint_id,
                                      tpc_state_writer_t *w)
{
    (void)ctx;
    sink_op_t *s = self;
    return tpc__txn_task_snapshot(s->task, checkpoint_id, add_entry, w);
}

static tpc_error_t *op_notify_complete(void *self, tpc_ctx_t *ctx, uint64_t checkpoint_id)
{
    (void)ctx;
    sink_op_t *s = self;
    return tpc__txn_task_complete(s->task, checkpoint_id);
}

static tpc_error_t *op_notify_aborted(void *self, tpc_ctx_t *ctx, uint64_t checkpoint_id)
{
    (void)ctx;
    sink_op_t *s = self;
    return tpc__txn_task_aborted(s->task, checkpoint_id);
}

static tpc_error_t *op_finish(void *self, tpc_ctx_t *ctx)
{
    (void)ctx;
    sink_op_t *s = self;
    return tpc__txn_task_finish(s->task);
}

static void op_close(void *self, tpc_ctx_t *ctx)
{
    (void)ctx;
    sink_op_t *s = self;
    if (!s)
        return;
    tpc__txn_task_close(s->task);
    free(s->records);
    free(s);
}

const tpc_operator_ops_t tpc__txn_operator_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = op_open,
    .initialize_state = op_initialize_state,
    .process = op_process,
    .snapshot_state = op_snapshot_state,
    .notify_checkpoint_complete = op_notify_complete,
    .notify_checkpoint_aborted = op_notify_aborted,
    .finish = op_finish,
    .close = op_close,
};
