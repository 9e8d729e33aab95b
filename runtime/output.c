/*
 * The output side of a subtask: tpc_emit() partitions records over the channels of each outgoing
 * edge and appends them to the batch being filled for that channel; full batches, and every batch
 * at the end of a poll or process call, are pushed to their channel. Events go out only after the
 * batches before them, so they never overtake records.
 */
#include "runtime_task.h"

#include <string.h>

#define BATCH_BYTES_LIMIT (256u * 1024u)

static tpc_err_t push_batch(tpc__task_t *t, tpc__out_edge_t *o, int c)
{
    tpc_batch_t *b = o->cur[c];
    o->cur[c] = NULL;
    uint64_t blocked = 0;
    tpc_err_t rc = tpc__channel_push(o->chans[c], (tpc__item_t){TPC__ITEM_BATCH, 0, b}, &blocked);
    if (blocked)
        atomic_fetch_add_explicit(&t->backpressure_us, blocked, memory_order_relaxed);
    return rc;
}

static tpc_err_t append(tpc__task_t *t, tpc__out_edge_t *o, int c, const tpc_record_t *rec)
{
    tpc_batch_t *b = o->cur[c];
    if (!b)
        b = o->cur[c] = tpc__channel_spare(o->chans[c], t->attempt->job->conf.batch_size);
    tpc__batch_append(b, rec);
    if (b->count == b->cap || b->used >= BATCH_BYTES_LIMIT)
        return push_batch(t, o, c);
    return TPC_OK;
}

tpc_err_t tpc_emit(tpc_ctx_t *ctx, const tpc_record_t *rec)
{
    tpc__task_t *t = ctx->task;
    if (t->state != TPC__TASK_RUNNING || t->finished_operator)
        return TPC_ERR_STATE;
    if (atomic_load_explicit(&t->attempt->canceled, memory_order_relaxed))
        return TPC_ERR_CANCELED;
    uint64_t size = (uint64_t)rec->key_len + rec->value_len;
    if (rec->header_count && !rec->headers)
        return TPC_ERR_INVALID_ARG;
    for (size_t i = 0; i < rec->header_count && size <= UINT32_MAX / 4; i++)
        size += (uint64_t)rec->headers[i].name_len + rec->headers[i].value_len;
    if (size > UINT32_MAX / 4 || rec->header_count > UINT32_MAX / 4)
        return TPC_ERR_INVALID_ARG;
    t->records_out_local++;
    for (int e = 0; e < t->nouts; e++) {
        tpc__out_edge_t *o = &t->outs[e];
        tpc_err_t rc = TPC_OK;
        switch (o->kind) {
        case TPC_EDGE_FORWARD:
            rc = append(t, o, 0, rec);
            break;
        case TPC_EDGE_REBALANCE:
            rc = append(t, o, (int)(o->rr++ % (size_t)o->n), rec);
            break;
        case TPC_EDGE_HASH: {
            /* The subtask that owns the key's group (keyed.c). */
            int maxp = t->attempt->job->conf.max_parallelism;
            int group = tpc__key_group_of(tpc__key_hash(rec->key, rec->key_len), maxp);
            rc = append(t, o, tpc__group_owner(group, maxp, o->n), rec);
            break;
        }
        case TPC_EDGE_BROADCAST:
            for (int c = 0; c < o->n && rc == TPC_OK; c++)
                rc = append(t, o, c, rec);
            break;
        }
        if (rc != TPC_OK)
            return rc;
    }
    return TPC_OK;
}

tpc_err_t tpc__task_flush(tpc__task_t *t)
{
    for (int e = 0; e < t->nouts; e++) {
        tpc__out_edge_t *o = &t->outs[e];
        for (int c = 0; c < o->n; c++) {
            if (o->cur[c] && o->cur[c]->count) {
                tpc_err_t rc = push_batch(t, o, c);
                if (rc != TPC_OK)
                    return rc;
            }
        }
    }
    if (t->records_out_local) {
        atomic_fetch_add_explicit(&t->records_out, t->records_out_local, memory_order_relaxed);
        t->records_out_local = 0;
    }
    return TPC_OK;
}

tpc_err_t tpc__task_broadcast_event(tpc__task_t *t, tpc__item_kind_t kind, uint64_t id)
{
    tpc_err_t rc = tpc__task_flush(t);
    for (int e = 0; e < t->nouts && rc == TPC_OK; e++)
        for (int c = 0; c < t->outs[e].n && rc == TPC_OK; c++)
            rc = tpc__channel_push(t->outs[e].chans[c], (tpc__item_t){kind, id, NULL}, NULL);
    return rc;
}

bool tpc__task_outputs_drained(tpc__task_t *t)
{
    for (int e = 0; e < t->nouts; e++) {
        for (int c = 0; c < t->outs[e].n; c++) {
            tpc__channel_t *ch = t->outs[e].chans[c];
            pthread_mutex_lock(&ch->mu);
            bool empty = ch->count == 0;
            ch->producer_waits_drain = !empty;
            pthread_mutex_unlock(&ch->mu);
            if (!empty)
                return false;
        }
    }
    return true;
}

void tpc__task_release_outputs(tpc__task_t *t)
{
    for (int e = 0; e < t->nouts; e++)
        for (int c = 0; c < t->outs[e].n; c++) {
            tpc__batch_destroy(t->outs[e].cur[c]);
            t->outs[e].cur[c] = NULL;
        }
}
