/*
 * The job: its graph and tpc_job_run(), which runs attempts until the job ends (its settings are
 * in job_config.c). Each attempt restores from the latest valid checkpoint in checkpoint.dir
 * (restore.c), builds the subtasks and channels, starts one thread per subtask and coordinates. A
 * failed attempt is canceled (every subtask closes) and, within restart.attempts, replaced by a new
 * one.
 */
#include "runtime_task.h"
#include "tpc_props.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

tpc_error_t *tpc__restore_plan(tpc__attempt_t *a);
tpc_error_t *tpc__restore_load(tpc__attempt_t *a);

tpc_job_t *tpc_job_new(const char *name)
{
    tpc_job_t *job = calloc(1, sizeof(*job));
    if (!job)
        return NULL;
    job->name = tpc__xstrdup(name && *name ? name : "job");
    tpc_error_t *err = tpc_props_init(tpc_job_properties(), &job->conf);
    if (err) { /* only if out of memory: the defaults are the table's own */
        tpc_error_destroy(err);
        free(job->name);
        free(job);
        return NULL;
    }
    job->log.max_level = TPC_LOG_WARN;
    job->next_checkpoint_id = 1;
    pthread_mutex_init(&job->ctl_mu, NULL);
    tpc_cond_init(&job->ctl_cv); /* monotonic: the restart pause waits on it with a deadline */
    tpc__metrics_new(job);
    return job;
}

void tpc_job_destroy(tpc_job_t *job)
{
    if (!job)
        return;
    /* The metrics server first: a scrape reads the vertices. */
    tpc__metrics_free(job);
    for (int v = 0; v < job->nvertices; v++)
        free(job->vertices[v].name);
    free(job->vertices);
    free(job->edges);
    tpc_props_free(tpc_job_properties(), &job->conf);
    if (job->backend_conf)
        tpc_props_free(job->backend->props, job->backend_conf);
    free(job->backend_conf);
    tpc__record_free(&job->record);
    free(job->stop.path);
    tpc_error_destroy(job->stop.err);
    pthread_cond_destroy(&job->ctl_cv);
    pthread_mutex_destroy(&job->ctl_mu);
    free(job->name);
    free(job);
}

tpc_error_t *tpc_job_add_vertex(tpc_job_t *job, const char *name, int parallelism,
                                const tpc_operator_ops_t *ops, void *arg, int *vertex_id)
{
    if (!job || !name || !*name || !ops)
        return tpc_error_new(TPC_ERR_INVALID_ARG, 0, "a vertex needs a name and an ops table");
    if (ops->version < 1 || ops->version > TPC_OPERATOR_OPS_VERSION)
        return tpc_error_new(TPC_ERR_INVALID_ARG, 0,
                             "vertex \"%s\": ops version %d, this library supports 1 to %d", name,
                             ops->version, TPC_OPERATOR_OPS_VERSION);
    if (!ops->open || (!ops->poll && !ops->process))
        return tpc_error_new(TPC_ERR_INVALID_ARG, 0,
                             "vertex \"%s\": ops need open and either poll or process", name);
    if (parallelism < 1 || parallelism > 1024)
        return tpc_error_new(TPC_ERR_INVALID_ARG, 0,
                             "vertex \"%s\": parallelism %d is not between 1 and 1024", name,
                             parallelism);
    for (int v = 0; v < job->nvertices; v++)
        if (strcmp(job->vertices[v].name, name) == 0)
            return tpc_error_new(TPC_ERR_INVALID_ARG, 0, "vertex \"%s\" already exists", name);
    /* Under ctl_mu: a scrape of the metrics endpoint walks the vertices. */
    pthread_mutex_lock(&job->ctl_mu);
    job->vertices =
        tpc__xrealloc(job->vertices, (size_t)(job->nvertices + 1) * sizeof(tpc__vertex_t));
    job->vertices[job->nvertices] = (tpc__vertex_t){tpc__xstrdup(name), parallelism, ops, arg};
    if (vertex_id)
        *vertex_id = job->nvertices;
    job->nvertices++;
    pthread_mutex_unlock(&job->ctl_mu);
    return NULL;
}

static bool reaches(const tpc_job_t *job, int from, int to)
{
    if (from == to)
        return true;
    for (int e = 0; e < job->nedges; e++)
        if (job->edges[e].from == from && reaches(job, job->edges[e].to, to))
            return true;
    return false;
}

tpc_error_t *tpc_job_connect(tpc_job_t *job, int from, int to, tpc_edge_t kind)
{
    if (!job || from < 0 || to < 0 || from >= job->nvertices || to >= job->nvertices)
        return tpc_error_new(TPC_ERR_INVALID_ARG, 0, "connect: unknown vertex id");
    const tpc__vertex_t *f = &job->vertices[from], *t = &job->vertices[to];
    if ((unsigned)kind > TPC_EDGE_BROADCAST)
        return tpc_error_new(TPC_ERR_INVALID_ARG, 0, "connect: unknown edge kind %d", (int)kind);
    if (!f->ops->poll && !f->ops->process)
        return tpc_error_new(TPC_ERR_INVALID_ARG, 0, "vertex \"%s\" cannot emit", f->name);
    if (!t->ops->process)
        return tpc_error_new(TPC_ERR_INVALID_ARG, 0,
                             "vertex \"%s\" is a source (no process): it cannot take input",
                             t->name);
    if (kind == TPC_EDGE_FORWARD && f->parallelism != t->parallelism)
        return tpc_error_hint(
            tpc_error_new(TPC_ERR_INVALID_ARG, 0,
                          "forward edge \"%s\" -> \"%s\" joins parallelism %d to %d", f->name,
                          t->name, f->parallelism, t->parallelism),
            "use equal parallelism or a rebalance edge");
    if (reaches(job, to, from))
        return tpc_error_new(TPC_ERR_INVALID_ARG, 0, "edge \"%s\" -> \"%s\" would make a cycle",
                             f->name, t->name);
    job->edges = tpc__xrealloc(job->edges, (size_t)(job->nedges + 1) * sizeof(tpc__edge_t));
    job->edges[job->nedges++] = (tpc__edge_t){from, to, kind};
    return NULL;
}

/* ---- attempts ----------------------------------------------------------------------------- */

static int task_index(const tpc_job_t *job, int vertex, int subtask)
{
    int idx = 0;
    for (int v = 0; v < vertex; v++)
        idx += job->vertices[v].parallelism;
    return idx + subtask;
}

static void add_channel(tpc__attempt_t *a, tpc__task_t *from, tpc__out_edge_t *o, tpc__task_t *to)
{
    tpc__channel_t *ch =
        tpc__channel_new(a->job->conf.channel_capacity,
                         (uint64_t)a->job->conf.channel_capacity_ms * 1000u, &a->canceled);
    ch->producer = from;
    ch->consumer = to;
    a->channels = tpc__xrealloc(a->channels, (size_t)(a->nchannels + 1) * sizeof(*a->channels));
    a->channels[a->nchannels++] = ch;
    o->chans[o->n++] = ch;
    to->inputs = tpc__xrealloc(to->inputs, (size_t)(to->ninputs + 1) * sizeof(*to->inputs));
    to->inputs[to->ninputs++] = (tpc__input_t){.ch = ch};
    to->preds = tpc__xrealloc(to->preds, (size_t)(to->npreds + 1) * sizeof(int));
    to->preds[to->npreds++] = from->index;
}

static tpc__attempt_t *attempt_new(tpc_job_t *job, int number)
{
    tpc__attempt_t *a = tpc__xcalloc(1, sizeof(*a));
    a->job = job;
    a->number = number;
    atomic_init(&a->canceled, false);
    pthread_mutex_init(&a->mu, NULL);
    tpc_cond_init(&a->cv);
    for (int v = 0; v < job->nvertices; v++)
        a->ntasks += job->vertices[v].parallelism;
    a->tasks = tpc__xcalloc((size_t)a->ntasks, sizeof(*a->tasks));
    for (int v = 0; v < job->nvertices; v++) {
        for (int s = 0; s < job->vertices[v].parallelism; s++) {
            tpc__task_t *t = &a->tasks[task_index(job, v, s)];
            t->attempt = a;
            t->index = task_index(job, v, s);
            t->vertex = v;
            t->subtask = s;
            t->ops = job->vertices[v].ops;
            t->ctx.task = t;
            pthread_mutex_init(&t->mu, NULL);
            tpc_cond_init(&t->cv);
        }
    }
    for (int e = 0; e < job->nedges; e++) {
        const tpc__edge_t *ed = &job->edges[e];
        int pf = job->vertices[ed->from].parallelism, pt = job->vertices[ed->to].parallelism;
        for (int s = 0; s < pf; s++) {
            tpc__task_t *from = &a->tasks[task_index(job, ed->from, s)];
            from->outs = tpc__xrealloc(from->outs, (size_t)(from->nouts + 1) * sizeof(*from->outs));
            tpc__out_edge_t *o = &from->outs[from->nouts++];
            int n = ed->kind == TPC_EDGE_FORWARD ? 1 : pt;
            *o = (tpc__out_edge_t){.kind = ed->kind};
            o->chans = tpc__xcalloc((size_t)n, sizeof(*o->chans));
            o->cur = tpc__xcalloc((size_t)n, sizeof(*o->cur));
            if (ed->kind == TPC_EDGE_FORWARD)
                add_channel(a, from, o, &a->tasks[task_index(job, ed->to, s)]);
            else
                for (int d = 0; d < pt; d++)
                    add_channel(a, from, o, &a->tasks[task_index(job, ed->to, d)]);
        }
    }
    return a;
}

static void attempt_destroy(tpc__attempt_t *a)
{
    for (int i = 0; i < a->ntasks; i++) {
        tpc__task_t *t = &a->tasks[i];
        for (int e = 0; e < t->nouts; e++) {
            free(t->outs[e].chans);
            free(t->outs[e].cur);
        }
        free(t->outs);
        free(t->inputs);
        free(t->preds);
        free(t->mbox);
        tpc__state_reader_free(&t->restored);
        tpc__keyed_free(t->keyed);
        tpc__timers_free(t->timers);
        pthread_cond_destroy(&t->cv);
        pthread_mutex_destroy(&t->mu);
    }
    for (int c = 0; c < a->nchannels; c++)
        tpc__channel_destroy(a->channels[c]);
    for (tpc__event_t *ev = a->head, *nx; ev; ev = nx) {
        nx = ev->next;
        tpc__state_writer_free(&ev->snapshot);
        tpc_error_destroy(ev->err);
        free(ev->reason);
        free(ev);
    }
    tpc__checkpoint_free(&a->restored);
    free(a->restored_parallelism);
    free(a->highest_parallelism);
    free(a->channels);
    free(a->tasks);
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

void tpc__attempt_cancel(tpc__attempt_t *a)
{
    atomic_store(&a->canceled, true);
    for (int i = 0; i < a->ntasks; i++)
        tpc__task_wake(&a->tasks[i]);
    for (int c = 0; c < a->nchannels; c++)
        tpc__channel_wake_all(a->channels[c]);
}

/* Fold the attempt's per-vertex counters into the job's totals. */
static void add_vertex_stats(const tpc_job_t *job, tpc__attempt_t *a, tpc_job_stats_t *st,
                             bool live)
{
    int n = job->nvertices < 32 ? job->nvertices : 32;
    st->vertex_count = n;
    for (int v = 0; v < n; v++) {
        st->vertices[v].name = job->vertices[v].name;
        st->vertices[v].parallelism = job->vertices[v].parallelism;
    }
    if (!a)
        return;
    for (int i = 0; i < a->ntasks; i++) {
        const tpc__task_t *t = &a->tasks[i];
        if (t->vertex >= n)
            continue;
        tpc_vertex_stats_t *vs = &st->vertices[t->vertex];
        vs->records_in += atomic_load_explicit(&t->records_in, memory_order_relaxed);
        vs->records_out += atomic_load_explicit(&t->records_out, memory_order_relaxed);
        vs->backpressure_ms +=
            atomic_load_explicit(&t->backpressure_us, memory_order_relaxed) / 1000u;
        if (live)
            vs->subtasks_finished +=
                atomic_load(&a->tasks[i].published_state) >= TPC__TASK_WAITING_FOR_FINAL &&
                atomic_load(&a->tasks[i].published_state) <= TPC__TASK_FINISHED;
    }
}

tpc_err_t tpc_job_get_stats(tpc_job_t *job, tpc_job_stats_t *out)
{
    if (!job || !out)
        return TPC_ERR_INVALID_ARG;
    pthread_mutex_lock(&job->ctl_mu);
    *out = job->stats;
    add_vertex_stats(job, job->attempt, out, true);
    pthread_mutex_unlock(&job->ctl_mu);
    return TPC_OK;
}

static tpc__end_t run_attempt(tpc_job_t *job, int number, tpc_error_t **err)
{
    *err = NULL;
    tpc__attempt_t *a = attempt_new(job, number);
    if (job->store)
        *err = tpc__restore_load(a);
    if (!*err && a->restored.id)
        *err = tpc__restore_plan(a);
    if (*err) {
        attempt_destroy(a);
        return TPC__END_FAILED;
    }
    a->restored_id = a->restored.id;
    a->first_checkpoint_id = job->next_checkpoint_id;
    pthread_mutex_lock(&job->ctl_mu);
    job->attempt = a;
    pthread_mutex_unlock(&job->ctl_mu);

    int started = 0;
    for (; started < a->ntasks; started++)
        if (pthread_create(&a->tasks[started].thread, NULL, tpc__task_main, &a->tasks[started]))
            break;
    tpc__end_t end;
    if (started < a->ntasks) {
        *err = tpc_error_new(TPC_ERR_NOMEM, TPC_ERROR_FATAL, "could not start thread %d of %d",
                             started + 1, a->ntasks);
        end = TPC__END_FAILED;
    } else {
        end = tpc__coordinate(a, err);
    }
    if (end != TPC__END_FINISHED)
        tpc__attempt_cancel(a);
    for (int i = 0; i < started; i++)
        pthread_join(a->tasks[i].thread, NULL);

    pthread_mutex_lock(&job->ctl_mu);
    job->attempt = NULL;
    tpc_job_stats_t totals = job->stats;
    add_vertex_stats(job, a, &totals, false);
    job->stats = totals;
    tpc__metrics_note_attempt(job, a);
    pthread_mutex_unlock(&job->ctl_mu);
    attempt_destroy(a);
    return end;
}

/* Wait restart.delay.ms, or less when the job is canceled meanwhile. Called with ctl_mu held. */
static void restart_pause(tpc_job_t *job)
{
    struct timespec until = tpc_deadline_us((int64_t)job->conf.restart_delay_ms * 1000);
    while (!atomic_load(&job->cancel_requested) &&
           pthread_cond_timedwait(&job->ctl_cv, &job->ctl_mu, &until) != ETIMEDOUT) {
    }
}

/* Restarts ran out: say so in the message, and keep the error's own hint, which names the cause
 * better than any general advice. */
/* A sink fenced while this process still owns the job's checkpoints (checkpoint.owner=claim,
 * and the completion record still holds this run's owner epoch) was not fenced by a take-over:
 * the owner that takes the job over claims the record before it opens any sink. Kafka's
 * transaction timeout, which aborts a transaction and bumps its producer's epoch, is the usual
 * cause; a producer outside the job that uses its transactional ids is the other. A restart mends
 * both: it restores from the newest completed checkpoint, and a commit that checkpoint promised
 * and the broker aborted is then reported as data loss, loudly. @returns the error to go on with:
 * @err itself when it is not such a case (a take-over, or the record cannot be read), else a
 * retriable one in its place, code TPC_ERR_EXTERNAL, so that no caller takes it for a take-over. */
static tpc_error_t *fenced_yet_owner(tpc_job_t *job, tpc_error_t *err)
{
    if (tpc_error_code(err) != TPC_ERR_FENCED || !job->owner_epoch || !job->store)
        return err;
    tpc_error_t *not_mine = tpc__record_owned_at(job->store, job->owner_epoch);
    if (not_mine) {
        tpc_error_destroy(not_mine);
        return err;
    }
    tpc_error_t *again = tpc_error_hint(
        tpc_error_new(TPC_ERR_EXTERNAL, TPC_ERROR_RETRIABLE,
                      "a sink of job \"%s\" was fenced while this process still owns the job's "
                      "checkpoints as owner epoch %" PRIu64 ", so no owner took the job over: %s",
                      job->name, job->owner_epoch, tpc_error_message(err)),
        "if a checkpoint took longer than the Kafka sink's \"transaction.timeout.ms\", raise it "
        "(up to the broker's transaction.max.timeout.ms) or make checkpoints shorter; if "
        "another program uses the job's transactional ids, give it others");
    tpc_error_destroy(err);
    return again;
}

static tpc_error_t *exhausted(tpc_job_t *job, tpc_error_t *err, int restarts)
{
    err = tpc_error_prefix(err, "job \"%s\" failed after %d restart%s", job->name, restarts,
                           restarts == 1 ? "" : "s");
    const char *hint = tpc_error_hint_text(err);
    if (!hint)
        return tpc_error_hint(err, "fix the cause above, or raise \"restart.attempts\" if it "
                                   "passes with time");
    char *own = tpc__xstrdup(hint);
    err = tpc_error_hint(err, "%s; if the cause passes with time, raise \"restart.attempts\"", own);
    free(own);
    return err;
}

/* The store of this run: the folder checkpoint.dir, or one the backend opens (NULL: no
 * checkpoints). */
static tpc_error_t *open_storage(tpc_job_t *job)
{
    job->store = NULL;
    job->owner_epoch = job->restore_epoch = 0;
    if (job->conf.storage == TPC__STORAGE_FOLDER) {
        if (job->conf.dir) {
            tpc__store_folder_init(&job->folder, job->conf.dir);
            job->store = &job->folder.base;
        }
        return NULL;
    }
    tpc_error_t *err = job->backend->open(job->backend_conf, &job->backend_store);
    if (err)
        return tpc_error_prefix(err, "job \"%s\": checkpoint.storage \"%s\"", job->name,
                                job->backend->kind);
    job->store = job->backend_store;
    return NULL;
}

static void close_storage(tpc_job_t *job)
{
    tpc_storage_destroy(job->backend_store);
    job->backend_store = NULL;
    job->store = NULL;
}

/* checkpoint.owner=claim: take the job's checkpoints over before anything is restored, with the
 * owner epoch after the record's. Another process that claims at the same moment may come first;
 * then this one claims again after it (the later claim is the owner, the other one is fenced). */
static tpc_error_t *claim(tpc_job_t *job)
{
    for (int tries = 0;; tries++) {
        tpc__record_t rec;
        bool found;
        tpc_error_t *err = tpc__record_read_at(job->store, &rec, &found);
        if (err)
            return tpc_error_prefix(err, "job \"%s\" cannot take its checkpoints over", job->name);
        if (found && strcmp(rec.job_name, job->name) != 0) {
            err = tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                               "\"%s\" holds the checkpoints of job \"%s\", not "
                                               "\"%s\"",
                                               tpc__storage_where(job->store), rec.job_name,
                                               job->name),
                                 "give each job (each unit) its own checkpoint storage");
            tpc__record_free(&rec);
            return err;
        }
        uint64_t before = found ? rec.owner_epoch : 0;
        tpc__record_free(&rec);
        err = tpc__record_claim_at(job->store, job->name, before + 1, &rec);
        if (!err) {
            tpc__record_free(&job->record);
            job->record = rec;
            job->record_found = true;
            job->owner_epoch = before + 1;
            job->restore_epoch = before;
            tpc__logf(&job->log, TPC_LOG_INFO,
                      "job \"%s\" took its checkpoints in \"%s\" over as owner epoch %" PRIu64,
                      job->name, tpc__storage_where(job->store), job->owner_epoch);
            return NULL;
        }
        if (tpc_error_code(err) != TPC_ERR_FENCED || tries >= 100)
            return tpc_error_prefix(err, "job \"%s\" cannot take its checkpoints over", job->name);
        tpc_error_destroy(err);
    }
}

tpc_error_t *tpc_job_run(tpc_job_t *job, tpc_job_result_t *result)
{
    if (!job)
        return tpc_error_new(TPC_ERR_INVALID_ARG, 0, "no job");
    if (job->nvertices == 0)
        return tpc_error_new(TPC_ERR_INVALID_ARG, 0, "job \"%s\" has no vertices", job->name);
    for (int v = 0; v < job->nvertices; v++)
        if (job->vertices[v].parallelism > job->conf.max_parallelism)
            return tpc_error_hint(
                tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                              "vertex \"%s\" has parallelism %d, above max-parallelism %d",
                              job->vertices[v].name, job->vertices[v].parallelism,
                              job->conf.max_parallelism),
                "lower the parallelism; max-parallelism (the number of key groups) cannot change "
                "for a job's checkpoints");
    for (int v = 0; v < job->nvertices; v++) {
        bool has_input = false;
        for (int e = 0; e < job->nedges; e++)
            has_input |= job->edges[e].to == v;
        const tpc__vertex_t *vx = &job->vertices[v];
        if (!has_input && !vx->ops->poll)
            return tpc_error_new(TPC_ERR_INVALID_ARG, 0,
                                 "vertex \"%s\" has no input and no poll: connect it to a source",
                                 vx->name);
        if (has_input && !vx->ops->process)
            return tpc_error_new(TPC_ERR_INVALID_ARG, 0, "vertex \"%s\" has input but no process",
                                 vx->name);
    }
    bool folder = job->conf.storage == TPC__STORAGE_FOLDER;
    if (folder && job->conf.dir) {
        tpc_error_t *err = tpc__checkpoint_dir_prepare(job->conf.dir);
        if (err) {
            tpc_error_t *c =
                tpc_error_new(TPC_ERR_CONFIG, 0, "\"checkpoint.dir\": %s", tpc_error_message(err));
            tpc_error_destroy(err);
            return tpc_error_hint(c, "point \"checkpoint.dir\" at a writable directory");
        }
    }
    if (!folder && !job->backend)
        return tpc_error_hint(
            tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                          "\"checkpoint.storage\" is \"%s\", but job \"%s\" has no such backend",
                          tpc__job_storages[job->conf.storage], job->name),
            "call tpc_job_use_storage(job, tpc_s3_storage_backend()) (tpc_s3.h) before "
            "configuring the job");
    if (!folder && strcmp(job->backend->kind, tpc__job_storages[job->conf.storage]) != 0)
        return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                            "\"checkpoint.storage\" is \"%s\", but job \"%s\" "
                                            "was given the storage backend \"%s\"",
                                            tpc__job_storages[job->conf.storage], job->name,
                                            job->backend->kind),
                              "set \"checkpoint.storage\" to \"%s\"", job->backend->kind);
    if (job->conf.owner == TPC__OWNER_CLAIM && !tpc__job_durable(job))
        return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                            "\"checkpoint.owner\" is \"claim\", but job \"%s\" "
                                            "takes no checkpoints",
                                            job->name),
                              "set \"checkpoint.dir\", or \"checkpoint.storage\" and its keys");
    pthread_mutex_lock(&job->ctl_mu);
    if (job->running) {
        pthread_mutex_unlock(&job->ctl_mu);
        return tpc_error_new(TPC_ERR_STATE, 0, "job \"%s\" is already running", job->name);
    }
    job->running = true;
    job->dir_listed = false;
    job->run_newest = job->run_first = 0;
    pthread_mutex_unlock(&job->ctl_mu);
    /* The lease says "a job runs here" to the twopc command, until this run returns. */
    tpc_dir_lease_t *lease = NULL;
    tpc_error_t *err = open_storage(job);
    if (!err && folder && job->conf.dir)
        err = tpc_checkpoint_dir_lease(job->conf.dir, false, &lease);
    if (!err)
        err = tpc__metrics_listen(job);
    /* A run canceled before it starts takes nothing over (the attempt loop ends it at once): its
     * claim would fence the owner that holds the checkpoints. */
    if (!err && job->conf.owner == TPC__OWNER_CLAIM && !atomic_load(&job->cancel_requested))
        err = claim(job);
    if (err) {
        tpc_checkpoint_dir_release(lease);
        close_storage(job);
        pthread_mutex_lock(&job->ctl_mu);
        job->running = false;
        pthread_mutex_unlock(&job->ctl_mu);
        return err;
    }
    if (folder && job->conf.dir) /* only now: a second call while running must not touch it */
        tpc__checkpoint_dir_clean(job->conf.dir);
    tpc__metrics_run_start(job);

    tpc__end_t end = TPC__END_FAILED;
    for (int attempt = 0;; attempt++) {
        /* A cancel that came before this run, or during the restart pause, ends it here. */
        if (atomic_load(&job->cancel_requested)) {
            end = TPC__END_CANCELED;
            break;
        }
        end = run_attempt(job, attempt, &err);
        if (end != TPC__END_FAILED)
            break;
        err = fenced_yet_owner(job, err);
        if (tpc_error_is_fatal(err)) {
            /* No restart can mend it: it ends the job as it is, message and hint its own. */
            tpc__logf(&job->log, TPC_LOG_INFO, "job \"%s\" ends without restarting: %s", job->name,
                      tpc_error_message(err));
            break;
        }
        if (attempt >= job->conf.restart_attempts) {
            err = exhausted(job, err, attempt);
            break;
        }
        tpc__logf(&job->log, TPC_LOG_WARN, "job \"%s\" restarts (attempt %d): %s", job->name,
                  attempt + 1, tpc_error_message(err));
        tpc_error_destroy(err);
        err = NULL;
        pthread_mutex_lock(&job->ctl_mu);
        job->stats.restarts++;
        restart_pause(job);
        pthread_mutex_unlock(&job->ctl_mu);
    }
    tpc_checkpoint_dir_release(lease);
    close_storage(job);

    pthread_mutex_lock(&job->ctl_mu);
    job->running = false;
    /* A cancel made while this run was going was meant for it, whether it saw it or not; only one
     * made before the next tpc_job_run() applies to that one. */
    atomic_store(&job->cancel_requested, false);
    if (job->stop.active && !job->stop.done) {
        job->stop.done = true;
        if (end != TPC__END_STOPPED && !job->stop.err)
            job->stop.err = tpc_error_new(TPC_ERR_STATE, 0, "the job ended before its savepoint");
    }
    pthread_cond_broadcast(&job->ctl_cv);
    pthread_mutex_unlock(&job->ctl_mu);
    tpc_job_result_t how = end == TPC__END_STOPPED    ? TPC_JOB_STOPPED
                           : end == TPC__END_CANCELED ? TPC_JOB_CANCELED
                                                      : TPC_JOB_FINISHED;
    /* The endpoint stays: the probes say how the run ended. */
    tpc__metrics_run_end(job, how, end == TPC__END_FAILED ? err : NULL);
    if (result)
        *result = how;
    return end == TPC__END_FAILED ? err : NULL;
}

static void wake_coordinator(tpc_job_t *job)
{
    if (job->attempt) {
        tpc__event_t *ev = tpc__xcalloc(1, sizeof(*ev));
        ev->kind = TPC__EV_WAKE;
        tpc__attempt_post(job->attempt, ev);
    }
}

tpc_err_t tpc_job_cancel(tpc_job_t *job)
{
    if (!job)
        return TPC_ERR_INVALID_ARG;
    pthread_mutex_lock(&job->ctl_mu);
    atomic_store(&job->cancel_requested, true);
    wake_coordinator(job);
    pthread_cond_broadcast(&job->ctl_cv); /* the restart pause */
    pthread_mutex_unlock(&job->ctl_mu);
    return TPC_OK;
}

tpc_error_t *tpc_job_stop_with_savepoint(tpc_job_t *job, bool drain, char **path)
{
    if (!job)
        return tpc_error_new(TPC_ERR_INVALID_ARG, 0, "tpc_job_stop_with_savepoint needs a job");
    pthread_mutex_lock(&job->ctl_mu);
    if (!job->running || job->stop.active) {
        bool running = job->running;
        pthread_mutex_unlock(&job->ctl_mu);
        if (running)
            return tpc_error_new(TPC_ERR_STATE, 0, "a stop with savepoint is already in progress");
        return tpc_error_new(TPC_ERR_STATE, 0, "job \"%s\" is not running", job->name);
    }
    free(job->stop.path);
    tpc_error_destroy(job->stop.err);
    job->stop = (tpc__stop_t){.active = true, .drain = drain};
    wake_coordinator(job);
    /* A stop outlives a failed attempt (the next one takes the savepoint), but within
     * stop.timeout.ms, or the job is canceled: a stop must end the process in bounded time
     * whatever the job is doing (recovering, restarting, retrying against a server that is
     * away). */
    int64_t bound_ms = job->conf.stop_timeout_ms;
    struct timespec until = tpc_deadline_us(bound_ms * 1000);
    while (!job->stop.done) {
        if (bound_ms <= 0 || atomic_load(&job->cancel_requested)) {
            pthread_cond_wait(&job->ctl_cv, &job->ctl_mu);
            continue;
        }
        if (pthread_cond_timedwait(&job->ctl_cv, &job->ctl_mu, &until) != ETIMEDOUT)
            continue;
        if (!job->stop.err)
            job->stop.err = tpc_error_hint(
                tpc_error_new(TPC_ERR_TIMEOUT, 0,
                              "job \"%s\" took no savepoint within stop.timeout.ms %" PRId64
                              " ms, and was canceled",
                              job->name, bound_ms),
                "nothing a checkpoint promised is lost: the next start restores the last "
                "completed checkpoint and commits what it promised; raise stop.timeout.ms "
                "for a savepoint of a slow job");
        atomic_store(&job->cancel_requested, true);
        wake_coordinator(job);
        pthread_cond_broadcast(&job->ctl_cv);
    }
    tpc_error_t *err = job->stop.err;
    job->stop.err = NULL;
    if (!err && path) {
        *path = job->stop.path;
        job->stop.path = NULL;
    }
    job->stop.active = false;
    pthread_mutex_unlock(&job->ctl_mu);
    return err;
}
