/*
 * A subtask's thread: open, restore, then a loop that reads its mailbox and does one unit of work
 * (a source poll or one item from an input) at a time, so checkpoint triggers and notifications
 * are handled between two units of work without any lock around the operator.
 *
 * Lifecycle (docs/architecture.md): RUNNING until the input ends; then finish() runs, end of data
 * goes downstream and the subtask WAITS_FOR_FINAL: it still snapshots and forwards barriers, and it
 * closes only once a checkpoint it snapshotted after finish() completed, downstream took all its
 * records and every upstream subtask closed. Then close(), end of partition, FINISHED.
 *
 * Barrier alignment: a barrier for checkpoint n blocks its input until every input delivered n or
 * ended (end of data or end of partition counts as aligned); then the subtask snapshots, forwards
 * the barrier and acks. A newer barrier or an abort notification cancels an alignment in progress.
 */
#include "runtime_task.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *tpc__task_state_name(tpc__task_state_t s)
{
    static const char *names[] = {"running", "waiting for final checkpoint", "finished", "failed",
                                  "canceled"};
    return names[s];
}

static bool canceled(const tpc__task_t *t)
{
    return atomic_load_explicit(&t->attempt->canceled, memory_order_relaxed);
}

void tpc__task_wake(tpc__task_t *t)
{
    pthread_mutex_lock(&t->mu);
    t->signaled = true;
    if (t->sleeping)
        pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

void tpc__task_post(tpc__task_t *t, tpc__msg_kind_t kind, uint64_t id)
{
    pthread_mutex_lock(&t->mu);
    tpc__xgrow(&t->mbox, &t->mbox_cap, t->mbox_n + 1, sizeof *t->mbox);
    t->mbox[t->mbox_n++] = (tpc__msg_t){kind, id};
    atomic_store(&t->mbox_pending, 1);
    t->signaled = true;
    if (t->sleeping)
        pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    if (kind == TPC__MSG_STOP) {
        /* The subtask may be blocked in a push to a consumer that already left on its STOP. */
        atomic_store(&t->stop_requested, true);
        for (int e = 0; e < t->nouts; e++)
            for (int c = 0; c < t->outs[e].n; c++)
                tpc__channel_wake_all(t->outs[e].chans[c]);
    }
}

/* Sleep until woken (new input, drained output, mail, cancel) or @p timeout_us passed. */
static void sleep_until_woken(tpc__task_t *t, uint64_t timeout_us)
{
    pthread_mutex_lock(&t->mu);
    if (!t->signaled && !canceled(t)) {
        struct timespec ts;
        ts = tpc_deadline_us((int64_t)timeout_us);
        t->sleeping = true;
        pthread_cond_timedwait(&t->cv, &t->mu, &ts);
        t->sleeping = false;
    }
    t->signaled = false;
    pthread_mutex_unlock(&t->mu);
}

static void post_event(tpc__task_t *t, tpc__event_t ev)
{
    tpc__event_t *e = tpc__xmalloc(sizeof(*e));
    *e = ev;
    e->task = t->index;
    e->next = NULL;
    tpc__attempt_post(t->attempt, e);
}

/* A snapshot whose keyed state another thread is writing (keyed_snapshot.c: copy-on-write); its ack
 * goes out once that is done, and before anything else the subtask posts, so the coordinator sees
 * acks and states in the order the subtask passed them. */
struct tpc__keyed_writer {
    tpc__task_t *task;
    pthread_t thread;
    tpc__frozen_t *frozen;
    tpc__event_t ack;
    atomic_bool done;
};

static void *write_keyed(void *arg)
{
    tpc__keyed_writer_t *kw = arg;
    tpc__keyed_write_frozen(kw->frozen, &kw->ack.snapshot);
    atomic_store(&kw->done, true);
    tpc__task_wake(kw->task);
    return NULL;
}

/* Post the ack of the snapshot being written once it is written; with @p wait, wait for that. */
static void settle_snapshot(tpc__task_t *t, bool wait)
{
    tpc__keyed_writer_t *kw = t->keyed_writer;
    if (!kw || (!wait && !atomic_load(&kw->done)))
        return;
    pthread_join(kw->thread, NULL);
    tpc__keyed_thaw(t->keyed, kw->frozen);
    t->keyed_writer = NULL;
    post_event(t, kw->ack);
    free(kw);
}

/* Ack checkpoint @p ack: at once, or, with keyed state, once another thread wrote its entries. */
static void post_ack(tpc__task_t *t, tpc__event_t ack)
{
    tpc__frozen_t *f = tpc__keyed_freeze(t->keyed, ack.id);
    if (!f) {
        post_event(t, ack);
        return;
    }
    tpc__keyed_writer_t *kw = tpc__xcalloc(1, sizeof *kw);
    *kw = (tpc__keyed_writer_t){.task = t, .frozen = f, .ack = ack};
    if (pthread_create(&kw->thread, NULL, write_keyed, kw) == 0) {
        t->keyed_writer = kw;
        return;
    }
    tpc__keyed_write_frozen(f, &kw->ack.snapshot); /* no thread: on this one */
    tpc__keyed_thaw(t->keyed, f);
    post_event(t, kw->ack);
    free(kw);
}

static void post_state(tpc__task_t *t, tpc__task_state_t s, tpc_error_t *err)
{
    settle_snapshot(t, true);
    t->state = s;
    atomic_store(&t->published_state, (int)s);
    post_event(t, (tpc__event_t){.kind = TPC__EV_STATE, .state = s, .err = err});
}

static tpc_error_t *cancel_error(void)
{
    return tpc_error_new(TPC_ERR_CANCELED, 0, "canceled");
}

static tpc_error_t *from_code(tpc__task_t *t, tpc_err_t rc, const char *what)
{
    if (rc == TPC_ERR_CANCELED)
        return cancel_error();
    return tpc_error_new(rc, 0, "%s in \"%s\"[%d]: %s", what,
                         t->attempt->job->vertices[t->vertex].name, t->subtask, tpc_strerror(rc));
}

/* Snapshot the operator for checkpoint @p id, forward the barrier and ack. */
static tpc_error_t *snapshot(tpc__task_t *t, uint64_t id)
{
    settle_snapshot(t, true); /* one writer at a time, acks in order */
    tpc_state_writer_t w;
    tpc__state_writer_init(&w);
    tpc_error_t *err = NULL;
    if (t->ops->snapshot_state)
        err = t->ops->snapshot_state(t->self, &t->ctx, id, &w);
    if (!err)
        tpc__timers_snapshot(t->timers, &w);
    if (err) {
        tpc__state_writer_free(&w);
        return tpc_error_prefix(err, "snapshot of checkpoint %llu failed", (unsigned long long)id);
    }
    tpc_err_t rc = tpc__task_broadcast_event(t, TPC__ITEM_BARRIER, id);
    if (rc != TPC_OK) {
        tpc__state_writer_free(&w);
        return from_code(t, rc, "could not forward barrier");
    }
    if (t->ckpt_floor < id)
        t->ckpt_floor = id;
    if (t->finished_operator && !t->first_after_finish)
        t->first_after_finish = id;
    post_ack(t,
             (tpc__event_t){
                 .kind = TPC__EV_ACK, .id = id, .finished = t->finished_operator, .snapshot = w});
    return NULL;
}

static void cancel_alignment(tpc__task_t *t)
{
    t->aligning = false;
    for (int i = 0; i < t->ninputs; i++)
        t->inputs[i].got_barrier = false;
}

static tpc_error_t *check_alignment(tpc__task_t *t)
{
    if (!t->aligning)
        return NULL;
    for (int i = 0; i < t->ninputs; i++)
        if (!t->inputs[i].got_barrier && !t->inputs[i].ended)
            return NULL;
    uint64_t id = t->aligning_id;
    cancel_alignment(t);
    return snapshot(t, id);
}

/* A barrier or trigger that no longer matters: already handled, or its checkpoint aborted. Only
 * the aborted id itself is stale: an older checkpoint still in flight (max-concurrent > 1, or the
 * final checkpoint triggered beside a periodic one) must still be able to complete. */
static bool stale(const tpc__task_t *t, uint64_t id)
{
    if (id <= t->ckpt_floor)
        return true;
    for (unsigned i = 0; i < t->naborted && i < 8; i++)
        if (t->aborted_ids[i] == id)
            return true;
    return false;
}

static tpc_error_t *on_barrier(tpc__task_t *t, int input, uint64_t id)
{
    if (stale(t, id))
        return NULL;
    if (t->aligning && id > t->aligning_id)
        cancel_alignment(t);
    if (!t->aligning) {
        t->aligning = true;
        t->aligning_id = id;
    }
    if (id == t->aligning_id)
        t->inputs[input].got_barrier = true;
    return check_alignment(t);
}

/* Input has ended: finish the operator, send end of data, wait for the final checkpoint. */
static tpc_error_t *finish(tpc__task_t *t)
{
    tpc_error_t *err = NULL;
    if (t->ops->finish)
        err = t->ops->finish(t->self, &t->ctx);
    if (err)
        return tpc_error_prefix(err, "finish failed");
    t->finished_operator = true;
    tpc_err_t rc = tpc__task_broadcast_event(t, TPC__ITEM_END_OF_DATA, 0);
    if (rc != TPC_OK)
        return from_code(t, rc, "could not send end of data");
    const tpc__conf_t *conf = &t->attempt->job->conf;
    if (!t->attempt->job->store || !conf->after_finish)
        t->final_notified = true; /* nothing to wait for */
    post_state(t, TPC__TASK_WAITING_FOR_FINAL, NULL);
    return NULL;
}

static bool all_inputs_ended(const tpc__task_t *t)
{
    for (int i = 0; i < t->ninputs; i++)
        if (!t->inputs[i].ended)
            return false;
    return true;
}

static tpc_error_t *handle_mail(tpc__task_t *t)
{
    if (!atomic_load_explicit(&t->mbox_pending, memory_order_acquire))
        return NULL;
    pthread_mutex_lock(&t->mu);
    tpc__msg_t *msgs = t->mbox;
    size_t n = t->mbox_n;
    t->mbox = NULL;
    t->mbox_n = t->mbox_cap = 0;
    atomic_store(&t->mbox_pending, 0);
    pthread_mutex_unlock(&t->mu);

    tpc_error_t *err = NULL;
    for (size_t i = 0; i < n && !err; i++) {
        uint64_t id = msgs[i].id;
        switch (msgs[i].kind) {
        case TPC__MSG_TRIGGER:
            if (!stale(t, id)) {
                cancel_alignment(t);
                err = snapshot(t, id);
            }
            break;
        case TPC__MSG_NOTIFY_COMPLETE:
            tpc__keyed_completed(t->keyed, id);
            if (id <= t->last_notified)
                break;
            t->last_notified = id;
            if (t->ops->notify_checkpoint_complete)
                err = t->ops->notify_checkpoint_complete(t->self, &t->ctx, id);
            if (err)
                err = tpc_error_prefix(err, "notify of checkpoint %llu failed",
                                       (unsigned long long)id);
            else if (t->first_after_finish && id >= t->first_after_finish)
                t->final_notified = true;
            break;
        case TPC__MSG_NOTIFY_ABORTED:
            if (t->aligning && t->aligning_id == id)
                cancel_alignment(t);
            t->aborted_ids[t->naborted++ % 8] = id;
            tpc__keyed_aborted(t->keyed, id);
            if (t->ops->notify_checkpoint_aborted)
                err = t->ops->notify_checkpoint_aborted(t->self, &t->ctx, id);
            break;
        case TPC__MSG_END_INPUT:
            t->end_input = true;
            break;
        case TPC__MSG_STOP:
            t->stop_now = true;
            break;
        }
    }
    free(msgs);
    return err;
}

/* One source poll. Sets *worked when it may have more right away. */
static tpc_error_t *poll_source(tpc__task_t *t, bool *worked)
{
    if (t->end_input)
        return finish(t);
    tpc_poll_result_t res = TPC_POLL_MORE;
    tpc_error_t *err = t->ops->poll(t->self, &t->ctx, &res);
    if (err)
        return tpc_error_prefix(err, "poll failed");
    tpc_err_t rc = tpc__task_flush(t);
    if (rc != TPC_OK)
        return from_code(t, rc, "could not send records");
    if (res == TPC_POLL_END)
        return finish(t);
    *worked = res == TPC_POLL_MORE;
    return NULL;
}

static tpc_error_t *on_item(tpc__task_t *t, int i, tpc__item_t item)
{
    tpc__input_t *in = &t->inputs[i];
    tpc_error_t *err = NULL;
    switch (item.kind) {
    case TPC__ITEM_BATCH:
        if (in->ended || t->finished_operator) {
            err = tpc_error_new(TPC_ERR_STATE, 0, "records arrived after end of data");
        } else {
            atomic_fetch_add_explicit(&t->records_in, item.batch->count, memory_order_relaxed);
            tpc__keyed_batch_begin(t, item.batch);
            err = t->ops->process(t->self, &t->ctx, item.batch);
            tpc__keyed_batch_end(t);
            if (err)
                err = tpc_error_prefix(err, "the operator's process() failed");
        }
        tpc__channel_recycle(in->ch, item.batch);
        if (!err) {
            tpc_err_t rc = tpc__task_flush(t);
            if (rc != TPC_OK)
                err = from_code(t, rc, "could not send records");
        }
        return err;
    case TPC__ITEM_BARRIER:
        return on_barrier(t, i, item.id);
    case TPC__ITEM_END_OF_PARTITION:
        in->closed = true;
        /* fall through */
    case TPC__ITEM_END_OF_DATA:
        in->ended = true;
        err = check_alignment(t);
        if (!err && !t->finished_operator && all_inputs_ended(t))
            err = finish(t);
        return err;
    }
    return NULL;
}

/* Take and handle one item from an unblocked input, round robin. */
static tpc_error_t *take_one(tpc__task_t *t, int *next, bool *worked)
{
    for (int k = 0; k < t->ninputs; k++) {
        int i = (*next + k) % t->ninputs;
        tpc__input_t *in = &t->inputs[i];
        if (in->closed || (t->aligning && in->got_barrier))
            continue;
        tpc__item_t item;
        if (!tpc__channel_try_take(in->ch, &item))
            continue;
        *next = (i + 1) % t->ninputs;
        *worked = true;
        return on_item(t, i, item);
    }
    return NULL;
}

/* Close only after the final notify, once downstream took every record (so nothing is in
 * flight when the coordinator sees this subtask closed) and every upstream closed (so upstream
 * never sends a barrier to a subtask that is gone). */
static bool ready_to_close(tpc__task_t *t)
{
    if (t->state != TPC__TASK_WAITING_FOR_FINAL || !t->final_notified)
        return false;
    for (int i = 0; i < t->ninputs; i++)
        if (!t->inputs[i].closed)
            return false;
    return tpc__task_outputs_drained(t);
}

/* Timers that came due, with what they emitted sent on. */
static tpc_error_t *fire_timers(tpc__task_t *t)
{
    tpc_error_t *err = tpc__timers_fire(t);
    if (!err) {
        tpc_err_t rc = tpc__task_flush(t);
        if (rc != TPC_OK)
            err = from_code(t, rc, "could not send records");
    }
    return err;
}

/* How long an idle subtask sleeps: a source polls again soon, others wait for a wake-up, but not
 * past their next timer. */
static uint64_t sleep_us(const tpc__task_t *t)
{
    uint64_t us = t->ninputs == 0 && t->state == TPC__TASK_RUNNING ? 1000 : 100000;
    int64_t next = tpc__timers_next(t->timers);
    if (next != INT64_MAX && !t->finished_operator) {
        int64_t wait_ms = next - tpc_processing_time_ms();
        uint64_t until = wait_ms <= 0 ? 0 : (uint64_t)wait_ms * 1000u;
        us = until < us ? until : us;
    }
    return us;
}

static tpc_error_t *run(tpc__task_t *t)
{
    tpc_job_t *job = t->attempt->job;
    tpc_error_t *err = t->ops->open(&t->ctx, job->vertices[t->vertex].arg, &t->self);
    if (err)
        return tpc_error_prefix(err, "open failed");
    if (t->has_restored)
        err = tpc__keyed_load(t, t->restored.keyed, t->restored.nkeyed);
    if (!err && t->ops->initialize_state)
        err = t->ops->initialize_state(t->self, &t->ctx, t->has_restored ? &t->restored : NULL);
    tpc__state_reader_free(&t->restored);
    if (err)
        return tpc_error_prefix(err, "restoring state failed");
    if (t->restored_finished && (err = finish(t)))
        return err;
    int next = 0;
    while (!canceled(t)) {
        settle_snapshot(t, false);
        if ((err = handle_mail(t)))
            return err;
        if (t->stop_now)
            return cancel_error();
        if (ready_to_close(t))
            return NULL;
        if (t->timers && !t->finished_operator && (err = fire_timers(t)))
            return err;
        bool worked = false;
        if (t->ninputs == 0 && t->state == TPC__TASK_RUNNING)
            err = poll_source(t, &worked);
        else
            err = take_one(t, &next, &worked);
        if (err)
            return err;
        if (!worked && !ready_to_close(t))
            sleep_until_woken(t, sleep_us(t));
    }
    return cancel_error();
}

void *tpc__task_main(void *arg)
{
    tpc__task_t *t = arg;
    if (t->start_closed) {
        /* Finished in the restored checkpoint: not run again, only tells downstream. */
        t->finished_operator = true;
        tpc__task_broadcast_event(t, TPC__ITEM_END_OF_DATA, 0);
        tpc__task_broadcast_event(t, TPC__ITEM_END_OF_PARTITION, 0);
        post_state(t, TPC__TASK_FINISHED, NULL);
        return NULL;
    }
    tpc_error_t *err = run(t);
    tpc__task_flush(t);
    if (t->self && t->ops->close)
        t->ops->close(t->self, &t->ctx);
    t->self = NULL;
    tpc__task_release_outputs(t);
    if (!err) {
        tpc__task_broadcast_event(t, TPC__ITEM_END_OF_PARTITION, 0);
        post_state(t, TPC__TASK_FINISHED, NULL);
    } else if (tpc_error_code(err) == TPC_ERR_CANCELED) {
        tpc_error_destroy(err);
        post_state(t, TPC__TASK_CANCELED, NULL);
    } else {
        err = tpc_error_prefix(err, "task \"%s\"[%d]", t->attempt->job->vertices[t->vertex].name,
                               t->subtask);
        post_state(t, TPC__TASK_FAILED, err);
    }
    return NULL;
}

/* ---- the context as operators see it ------------------------------------------------------ */

const char *tpc_ctx_job_name(const tpc_ctx_t *ctx)
{
    return ctx->task->attempt->job->name;
}

const char *tpc_ctx_vertex_name(const tpc_ctx_t *ctx)
{
    return ctx->task->attempt->job->vertices[ctx->task->vertex].name;
}

int tpc_ctx_subtask(const tpc_ctx_t *ctx)
{
    return ctx->task->subtask;
}

int tpc_ctx_parallelism(const tpc_ctx_t *ctx)
{
    return ctx->task->attempt->job->vertices[ctx->task->vertex].parallelism;
}

int tpc_ctx_attempt(const tpc_ctx_t *ctx)
{
    return ctx->task->attempt->number;
}

uint64_t tpc_ctx_restored_checkpoint(const tpc_ctx_t *ctx)
{
    return ctx->task->attempt->restored_id;
}

int tpc_ctx_restored_parallelism(const tpc_ctx_t *ctx)
{
    const tpc__attempt_t *a = ctx->task->attempt;
    return a->restored_parallelism ? a->restored_parallelism[ctx->task->vertex] : 0;
}

int tpc_ctx_highest_parallelism(const tpc_ctx_t *ctx)
{
    const tpc__attempt_t *a = ctx->task->attempt;
    int p = tpc_ctx_parallelism(ctx);
    if (a->highest_parallelism && a->highest_parallelism[ctx->task->vertex] > p)
        p = a->highest_parallelism[ctx->task->vertex];
    return p;
}

int tpc_ctx_max_parallelism(const tpc_ctx_t *ctx)
{
    return ctx->task->attempt->job->conf.max_parallelism;
}

bool tpc_ctx_restored_behind(const tpc_ctx_t *ctx)
{
    return ctx->task->attempt->restored_behind;
}

uint64_t tpc_ctx_first_checkpoint_id(const tpc_ctx_t *ctx)
{
    return ctx->task->attempt->first_checkpoint_id;
}

bool tpc_ctx_checkpointing(const tpc_ctx_t *ctx)
{
    const tpc__conf_t *conf = &ctx->task->attempt->job->conf;
    return ctx->task->attempt->job->store && conf->after_finish;
}

int64_t tpc_ctx_checkpoint_interval_ms(const tpc_ctx_t *ctx)
{
    const tpc__conf_t *conf = &ctx->task->attempt->job->conf;
    return ctx->task->attempt->job->store ? conf->interval_ms : 0;
}

uint64_t tpc_ctx_owner_epoch(const tpc_ctx_t *ctx)
{
    return ctx->task->attempt->job->owner_epoch;
}

bool tpc_ctx_is_canceled(const tpc_ctx_t *ctx)
{
    return canceled(ctx->task);
}

void tpc_log(tpc_ctx_t *ctx, tpc_log_level_t level, const char *fmt, ...)
{
    const tpc__logger_t *lg = &ctx->task->attempt->job->log;
    if (level > lg->max_level)
        return;
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tpc__logf(lg, level, "\"%s\"[%d]: %s", tpc_ctx_vertex_name(ctx), ctx->task->subtask, msg);
}
