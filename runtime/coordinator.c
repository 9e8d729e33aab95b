/*
 * The checkpoint coordinator, run on the job thread for one attempt. It reads the subtasks'
 * events, triggers checkpoints, collects acks, writes completed checkpoints durably and only then
 * notifies the subtasks.
 *
 * The plan of each checkpoint comes from the live subtask states at trigger time: it triggers the
 * subtasks that have no unfinished predecessor (sources, and subtasks whose inputs all closed),
 * waits for every subtask that has not closed, and records the closed ones. A subtask that closes
 * while a checkpoint waits for it makes that checkpoint abort (the next one will not wait for it).
 * When every subtask has finished its operator, the final checkpoint is triggered at once.
 */
#include "runtime_task.h"

#include <inttypes.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct pending {
    uint64_t id;
    bool savepoint;
    uint64_t trigger_us;
    bool *waiting; /* per task: in the plan and not acked yet */
    bool *closed;  /* per task: closed at trigger time */
    int nwaiting;
    tpc__subtask_snapshot_t *snap; /* per task */
    struct pending *next;
} pending_t;

typedef struct {
    tpc__attempt_t *a;
    tpc_job_t *job;
    tpc__task_state_t *view; /* the coordinator's view of each subtask */
    pending_t *pending;
    int npending;
    uint64_t next_trigger_us, last_complete_us;
    uint64_t final_id; /* checkpoint triggered after every subtask finished; 0 = none yet */
    int consecutive_failures;
    tpc_error_t *failure;
} coord_t;

void tpc__attempt_post(tpc__attempt_t *a, tpc__event_t *ev)
{
    pthread_mutex_lock(&a->mu);
    if (a->tail)
        a->tail->next = ev;
    else
        a->head = ev;
    a->tail = ev;
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

static void free_event(tpc__event_t *ev)
{
    tpc__state_writer_free(&ev->snapshot);
    tpc_error_destroy(ev->err);
    free(ev->reason);
    free(ev);
}

static void free_pending(coord_t *c, pending_t *p)
{
    for (int i = 0; i < c->a->ntasks; i++)
        tpc__state_writer_free(&p->snap[i].state);
    free(p->snap);
    free(p->waiting);
    free(p->closed);
    free(p);
}

static void unlink_pending(coord_t *c, pending_t *p)
{
    for (pending_t **pp = &c->pending; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            c->npending--;
            return;
        }
}

static void broadcast(coord_t *c, tpc__msg_kind_t kind, uint64_t id)
{
    for (int i = 0; i < c->a->ntasks; i++)
        if (c->view[i] == TPC__TASK_RUNNING || c->view[i] == TPC__TASK_WAITING_FOR_FINAL)
            tpc__task_post(&c->a->tasks[i], kind, id);
}

/* @bytes: the size of a completed checkpoint's file. */
static void record_outcome(coord_t *c, uint64_t id, bool completed, uint64_t duration_us,
                           uint64_t bytes, const char *reason)
{
    pthread_mutex_lock(&c->job->ctl_mu);
    if (completed) {
        c->job->stats.checkpoints_completed++;
        c->job->stats.last_checkpoint_id = id;
        c->job->stats.last_checkpoint_duration_us = duration_us;
    } else {
        c->job->stats.checkpoints_aborted++;
    }
    pthread_mutex_unlock(&c->job->ctl_mu);
    tpc__metrics_note_checkpoint(c->job, completed, duration_us, bytes);
    if (c->job->ckpt_cb)
        c->job->ckpt_cb(c->job->ckpt_cb_opaque, id, completed, duration_us, reason);
}

static void abort_checkpoint(coord_t *c, pending_t *p, const char *reason, bool counts)
{
    tpc__logf(&c->job->log, TPC_LOG_INFO, "checkpoint %" PRIu64 " aborted: %s", p->id, reason);
    unlink_pending(c, p);
    broadcast(c, TPC__MSG_NOTIFY_ABORTED, p->id);
    record_outcome(c, p->id, false, tpc__now_us() - p->trigger_us, 0, reason);
    if (p->id == c->final_id)
        c->final_id = 0;
    if (p->savepoint && !c->failure) {
        /* Stop without drain: nothing else would take the savepoint again, and periodic
         * checkpoints stay off while a stop is in progress. The stop fails, the job goes on.
         * (With drain, the final checkpoint is triggered again; when the attempt fails, the
         * next attempt starts the stop again.) */
        pthread_mutex_lock(&c->job->ctl_mu);
        tpc__stop_t *st = &c->job->stop;
        if (st->active && st->started && !st->drain && !st->done) {
            st->err =
                tpc_error_hint(tpc_error_new(TPC_ERR_CHECKPOINT, 0,
                                             "savepoint %" PRIu64 " aborted: %s", p->id, reason),
                               "the job goes on; stop it again");
            st->done = true;
            pthread_cond_broadcast(&c->job->ctl_cv);
        }
        pthread_mutex_unlock(&c->job->ctl_mu);
    }
    uint64_t id = p->id;
    free_pending(c, p);
    if (counts && ++c->consecutive_failures > c->job->conf.tolerable_failures && !c->failure)
        c->failure = tpc_error_hint(
            tpc_error_new(TPC_ERR_CHECKPOINT, 0,
                          "%d consecutive checkpoints failed, the last (%" PRIu64 ") because %s",
                          c->consecutive_failures, id, reason),
            "raise \"checkpoint.tolerable-failures\" or \"checkpoint.timeout.ms\"");
}

/* A vertex with union state cannot be restored while some of its subtasks have closed (their
 * entries are gone) and others still run (they would need every entry). Once every subtask has
 * finished its operator, nothing needs the entries any more and checkpoints succeed again. */
static const char *union_state_conflict(coord_t *c, pending_t *p)
{
    tpc__attempt_t *a = c->a;
    for (int v = 0; v < c->job->nvertices; v++) {
        bool some_closed = false, some_running = false, has_union = false;
        for (int i = 0; i < a->ntasks; i++) {
            if (a->tasks[i].vertex != v)
                continue;
            if (p->closed[i])
                some_closed = true;
            else if (!p->snap[i].operator_finished)
                some_running = true;
            has_union |= p->snap[i].state.nunion > 0;
        }
        if (some_closed && some_running && has_union)
            return c->job->vertices[v].name;
    }
    return NULL;
}

/* Why checkpoint @p ck cannot be written (a checkpoint its keyed state builds on is no longer in
 * @p dir), or NULL. */
static const char *missing_ref(tpc_storage_t *st, const tpc__checkpoint_t *ck)
{
    if (!ck->nrefs)
        return NULL;
    tpc__checkpoint_file_t *files;
    size_t n;
    tpc_error_t *err = tpc__checkpoint_list_at(st, &files, &n);
    if (err) {
        tpc_error_destroy(err);
        return NULL; /* the write reports it */
    }
    const char *why = NULL;
    for (uint32_t i = 0; i < ck->nrefs && !why; i++) {
        bool found = false;
        for (size_t j = 0; j < n && !found; j++)
            found = files[j].id == ck->refs[i];
        if (!found)
            why = "its incremental keyed state builds on a checkpoint that is no longer retained";
    }
    tpc__checkpoint_files_free(files, n);
    return why;
}

static void complete_checkpoint(coord_t *c, pending_t *p)
{
    tpc_job_t *job = c->job;
    tpc__attempt_t *a = c->a;
    const char *conflict = union_state_conflict(c, p);
    if (conflict) {
        char reason[300];
        snprintf(reason, sizeof reason,
                 "vertex \"%s\" uses union list state and is only partly finished", conflict);
        abort_checkpoint(c, p, reason, false);
        return;
    }
    tpc__checkpoint_t ck = {.id = p->id,
                            .timestamp_ms = (uint64_t)time(NULL) * 1000u,
                            .savepoint = p->savepoint,
                            .max_parallelism = (uint32_t)job->conf.max_parallelism,
                            .owner_epoch = job->owner_epoch,
                            .job_name = job->name,
                            .nvertices = job->nvertices};
    ck.vertices = tpc__xcalloc((size_t)job->nvertices, sizeof(*ck.vertices));
    for (int v = 0; v < job->nvertices; v++) {
        ck.vertices[v].name = job->vertices[v].name;
        ck.vertices[v].parallelism = job->vertices[v].parallelism;
        ck.vertices[v].subtasks =
            tpc__xcalloc((size_t)job->vertices[v].parallelism, sizeof(tpc__subtask_snapshot_t));
    }
    for (int i = 0; i < a->ntasks; i++) {
        tpc__subtask_snapshot_t *s = &ck.vertices[a->tasks[i].vertex].subtasks[a->tasks[i].subtask];
        *s = p->snap[i];
        s->closed = p->closed[i];
    }
    char *path = NULL;
    tpc__checkpoint_collect_refs(&ck);
    const char *lost = missing_ref(job->store, &ck);
    if (lost) {
        /* A subtask built on a checkpoint that retention removed meanwhile (it had not yet heard
         * that a newer one completed): abort this one; the next builds on the newer one. */
        for (int v = 0; v < job->nvertices; v++)
            free(ck.vertices[v].subtasks);
        free(ck.vertices);
        free(ck.refs);
        abort_checkpoint(c, p, lost, false);
        return;
    }
    uint64_t size = 0;
    tpc_error_t *err = tpc__checkpoint_write_at(job->store, &ck, &path, &size);
    for (int v = 0; v < job->nvertices; v++)
        free(ck.vertices[v].subtasks);
    free(ck.vertices);
    free(ck.refs);
    if (!err)
        err = tpc__restore_note_complete(job, p->id);
    if (err)
        err = tpc__restore_owner_check(job, err);
    if (err) {
        /* The state is not durable: nothing may be committed on it. Fail the attempt; the
         * checkpoint counts as failed (statistics, metrics, the checkpoint callback); the
         * restart's log line says why. */
        tpc__metrics_note_failed(job, TPC__FAILED_WRITE);
        record_outcome(c, p->id, false, tpc__now_us() - p->trigger_us, 0,
                       "its file or the completion record could not be written");
        if (!c->failure)
            c->failure = tpc_error_prefix(err, "could not write checkpoint %" PRIu64, p->id);
        else
            tpc_error_destroy(err);
        free(path);
        unlink_pending(c, p);
        free_pending(c, p);
        return;
    }
    uint64_t now = tpc__now_us(), duration = now - p->trigger_us;
    unlink_pending(c, p);
    /* Older checkpoints still in flight are subsumed by this one. */
    for (pending_t *q = c->pending, *nx; q; q = nx) {
        nx = q->next;
        if (q->id < p->id) {
            unlink_pending(c, q);
            free_pending(c, q);
        }
    }
    c->consecutive_failures = 0;
    c->last_complete_us = now;
    tpc__logf(&job->log, TPC_LOG_DEBUG, "checkpoint %" PRIu64 " complete in %" PRIu64 " us", p->id,
              duration);
    record_outcome(c, p->id, true, duration, size, NULL);
    broadcast(c, TPC__MSG_NOTIFY_COMPLETE, p->id);
    /* After the notification, not before: the sinks commit while the files older checkpoints no
     * longer need are removed. */
    tpc__checkpoint_retain_at(job->store, job->conf.retained);
    pthread_mutex_lock(&job->ctl_mu);
    bool stop_now = p->savepoint && job->stop.active && !job->stop.drain;
    if (p->savepoint && job->stop.active && !job->stop.path) {
        job->stop.path = path;
        path = NULL;
    }
    pthread_mutex_unlock(&job->ctl_mu);
    if (stop_now)
        broadcast(c, TPC__MSG_STOP, 0);
    free(path);
    free_pending(c, p);
}

static bool is_live(tpc__task_state_t s)
{
    return s == TPC__TASK_RUNNING || s == TPC__TASK_WAITING_FOR_FINAL;
}

static void trigger(coord_t *c, bool savepoint)
{
    tpc__attempt_t *a = c->a;
    tpc_job_t *job = c->job;
    pending_t *p = tpc__xcalloc(1, sizeof(*p));
    p->id = job->next_checkpoint_id++;
    p->savepoint = savepoint;
    p->trigger_us = tpc__now_us();
    p->waiting = tpc__xcalloc((size_t)a->ntasks, sizeof(bool));
    p->closed = tpc__xcalloc((size_t)a->ntasks, sizeof(bool));
    p->snap = tpc__xcalloc((size_t)a->ntasks, sizeof(*p->snap));
    bool some_finished = false;
    for (int i = 0; i < a->ntasks; i++) {
        p->closed[i] = c->view[i] == TPC__TASK_FINISHED;
        p->waiting[i] = !p->closed[i];
        p->nwaiting += p->waiting[i];
        some_finished |= c->view[i] != TPC__TASK_RUNNING;
    }
    p->next = c->pending;
    c->pending = p;
    c->npending++;
    c->next_trigger_us = p->trigger_us + (uint64_t)job->conf.interval_ms * 1000u;
    if (some_finished && !job->conf.after_finish) {
        abort_checkpoint(c, p, "a task has finished and \"checkpoint.after-finish\" is false",
                         false);
        return;
    }
    for (int i = 0; i < a->ntasks; i++) {
        if (!p->waiting[i])
            continue;
        bool has_live_pred = false;
        for (int k = 0; k < a->tasks[i].npreds; k++)
            has_live_pred |= c->view[a->tasks[i].preds[k]] != TPC__TASK_FINISHED;
        if (!has_live_pred)
            tpc__task_post(&a->tasks[i], TPC__MSG_TRIGGER, p->id);
    }
}

static pending_t *find_pending(coord_t *c, uint64_t id)
{
    for (pending_t *p = c->pending; p; p = p->next)
        if (p->id == id)
            return p;
    return NULL;
}

static void on_event(coord_t *c, tpc__event_t *ev)
{
    tpc__attempt_t *a = c->a;
    switch (ev->kind) {
    case TPC__EV_STATE:
        c->view[ev->task] = ev->state;
        if (ev->state == TPC__TASK_FAILED && !c->failure) {
            c->failure = ev->err;
            ev->err = NULL;
        }
        if (ev->state == TPC__TASK_WAITING_FOR_FINAL)
            c->final_id = 0; /* a checkpoint after this finish is needed */
        if (ev->state != TPC__TASK_WAITING_FOR_FINAL) {
            for (pending_t *p = c->pending, *nx; p; p = nx) {
                nx = p->next;
                if (p->waiting[ev->task]) {
                    char reason[300];
                    snprintf(reason, sizeof reason, "task \"%s\"[%d] %s before taking part",
                             c->job->vertices[a->tasks[ev->task].vertex].name,
                             a->tasks[ev->task].subtask, tpc__task_state_name(ev->state));
                    abort_checkpoint(c, p, reason, false);
                }
            }
        }
        break;
    case TPC__EV_ACK: {
        pending_t *p = find_pending(c, ev->id);
        if (!p || !p->waiting[ev->task])
            break;
        p->waiting[ev->task] = false;
        p->nwaiting--;
        p->snap[ev->task].state = ev->snapshot;
        p->snap[ev->task].operator_finished = ev->finished;
        ev->snapshot = (tpc_state_writer_t){0};
        if (p->nwaiting == 0)
            complete_checkpoint(c, p);
        break;
    }
    case TPC__EV_DECLINE: {
        pending_t *p = find_pending(c, ev->id);
        if (p) {
            tpc__metrics_note_declined(c->job);
            abort_checkpoint(c, p, ev->reason ? ev->reason : "declined", true);
        }
        break;
    }
    case TPC__EV_WAKE:
        break;
    }
    free_event(ev);
}

static bool all_in(coord_t *c, bool (*pred)(tpc__task_state_t))
{
    for (int i = 0; i < c->a->ntasks; i++)
        if (!pred(c->view[i]))
            return false;
    return true;
}

static bool is_finished(tpc__task_state_t s)
{
    return s == TPC__TASK_FINISHED;
}

static bool is_done_or_waiting(tpc__task_state_t s)
{
    return s == TPC__TASK_FINISHED || s == TPC__TASK_WAITING_FOR_FINAL;
}

static bool is_exited(tpc__task_state_t s)
{
    return !is_live(s);
}

/* Outside requests: cancel, stop with savepoint. Returns true when the attempt must end now. */
static bool outside_requests(coord_t *c, tpc__end_t *end)
{
    tpc_job_t *job = c->job;
    if (atomic_load(&job->cancel_requested)) {
        *end = TPC__END_CANCELED;
        return true;
    }
    pthread_mutex_lock(&job->ctl_mu);
    bool start = job->stop.active && !job->stop.started;
    bool drain = job->stop.drain;
    if (start) {
        if (!job->store) {
            job->stop.err = tpc_error_hint(
                tpc_error_new(TPC_ERR_CONFIG, 0, "cannot take a savepoint without checkpoints"),
                "set \"checkpoint.dir\"");
            job->stop.done = true;
            job->stop.active = false;
            pthread_cond_broadcast(&job->ctl_cv);
            start = false;
        } else {
            job->stop.started = true;
        }
    }
    pthread_mutex_unlock(&job->ctl_mu);
    if (start) {
        /* The job's own final checkpoint may be in flight already (everything finished by
         * itself): with drain, it is the savepoint. */
        pending_t *final = drain && c->final_id ? find_pending(c, c->final_id) : NULL;
        if (final)
            final->savepoint = true;
        if (drain)
            for (int i = 0; i < c->a->ntasks; i++)
                if (c->a->tasks[i].ninputs == 0 && is_live(c->view[i]))
                    tpc__task_post(&c->a->tasks[i], TPC__MSG_END_INPUT, 0);
        if (!drain)
            trigger(c, true);
    }
    return false;
}

static void wait_events(coord_t *c, uint64_t until_us)
{
    tpc__attempt_t *a = c->a;
    pthread_mutex_lock(&a->mu);
    uint64_t now = tpc__now_us();
    if (!a->head && until_us > now) {
        struct timespec ts;
        ts = tpc_deadline_us((int64_t)(until_us - now));
        pthread_cond_timedwait(&a->cv, &a->mu, &ts);
    }
    tpc__event_t *ev = a->head;
    a->head = a->tail = NULL;
    pthread_mutex_unlock(&a->mu);
    while (ev) {
        tpc__event_t *nx = ev->next;
        on_event(c, ev);
        ev = nx;
    }
}

static void maybe_trigger(coord_t *c)
{
    tpc_job_t *job = c->job;
    const tpc__conf_t *conf = &job->conf;
    if (!job->store || all_in(c, is_finished))
        return;
    uint64_t now = tpc__now_us();
    for (pending_t *p = c->pending, *nx; p; p = nx) {
        nx = p->next;
        if (now - p->trigger_us > (uint64_t)conf->timeout_ms * 1000u) {
            tpc__metrics_note_failed(job, TPC__FAILED_TIMEOUT);
            abort_checkpoint(c, p, "it timed out (\"checkpoint.timeout.ms\")", true);
        }
    }
    pthread_mutex_lock(&job->ctl_mu);
    bool draining = job->stop.active && job->stop.started && job->stop.drain;
    bool stopping = job->stop.active && job->stop.started;
    pthread_mutex_unlock(&job->ctl_mu);
    if (conf->after_finish && all_in(c, is_done_or_waiting)) {
        if (!c->final_id) {
            trigger(c, draining);
            c->final_id = job->next_checkpoint_id - 1;
        }
        return;
    }
    if (stopping || conf->interval_ms <= 0)
        return;
    if (now >= c->next_trigger_us && c->npending < conf->max_concurrent &&
        now >= c->last_complete_us + (uint64_t)conf->min_pause_ms * 1000u)
        trigger(c, false);
}

tpc__end_t tpc__coordinate(tpc__attempt_t *a, tpc_error_t **err)
{
    coord_t c = {.a = a, .job = a->job};
    c.view = tpc__xcalloc((size_t)a->ntasks, sizeof(*c.view));
    c.next_trigger_us = tpc__now_us() + (uint64_t)a->job->conf.interval_ms * 1000u;
    /* A stop that an earlier attempt started and did not finish starts over in this one: its
     * sources must end their input again (drain) or its savepoint be taken again (no drain). */
    pthread_mutex_lock(&a->job->ctl_mu);
    if (a->job->stop.active && !a->job->stop.done) {
        a->job->stop.started = false;
        free(a->job->stop.path);
        a->job->stop.path = NULL;
    }
    pthread_mutex_unlock(&a->job->ctl_mu);
    tpc__end_t end = TPC__END_FINISHED;
    for (;;) {
        uint64_t now = tpc__now_us(), until = now + 20000;
        if (a->job->store && a->job->conf.interval_ms > 0 &&
            c.npending < a->job->conf.max_concurrent && c.next_trigger_us < until)
            until = c.next_trigger_us > now + 500 ? c.next_trigger_us : now + 500;
        wait_events(&c, until);
        if (c.failure) {
            end = TPC__END_FAILED;
            break;
        }
        if (outside_requests(&c, &end))
            break;
        if (all_in(&c, is_finished)) {
            /* Stopped only with a savepoint to show: a stop that came too late for one (the
             * final checkpoint had completed) fails, the job finished by itself. */
            pthread_mutex_lock(&a->job->ctl_mu);
            end = a->job->stop.started && a->job->stop.path ? TPC__END_STOPPED : TPC__END_FINISHED;
            pthread_mutex_unlock(&a->job->ctl_mu);
            break;
        }
        if (all_in(&c, is_exited)) {
            /* Stopped without drain: every task left after the savepoint. */
            end = TPC__END_STOPPED;
            break;
        }
        maybe_trigger(&c);
        if (c.failure) {
            end = TPC__END_FAILED;
            break;
        }
    }
    while (c.pending) {
        pending_t *p = c.pending;
        c.pending = p->next;
        free_pending(&c, p);
    }
    free(c.view);
    *err = c.failure;
    return end;
}
