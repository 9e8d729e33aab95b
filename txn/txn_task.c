/*
 * The transaction state machine of one sink subtask: which connector call happens on which
 * checkpoint event. This is where exactly-once is won or lost, so the rules are kept in one place
 * and in the words of docs/guarantees.md:
 *   - a transaction is pre-committed only in snapshot_state and committed only once the checkpoint
 *     that holds it is complete (or on recovery of such a checkpoint);
 *   - pending transactions are committed in checkpoint order and never dropped: a commit that
 *     fails leaves it, and every later one, pending and fails the subtask with its name;
 *   - nothing is begun after finish(), and an empty transaction costs no external call.
 * It knows nothing of the runtime (see txn_internal.h); txn_operator.c adapts it, and
 * txn_retry.c makes the calls that are retried.
 */
#include "tpc_kit.h"
#include "txn_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void warn_timeouts(tpc__txn_task_t *t)
{
    if (!t->conf->timeout_ms)
        return;
    int64_t now = tpc_wall_ms();
    double limit = (double)t->conf->timeout_ms * t->conf->warn_ratio;
    for (size_t i = 0; i < t->npending; i++) {
        tpc__txn_pending_t *p = &t->pending[i];
        int64_t age = now - p->start_ms;
        if (p->warned || (double)age < limit)
            continue;
        p->warned = true;
        char name[256];
        tpc__txn_describe(t, p->txn, name, sizeof name);
        tpc__txn_logf(&t->env, TPC_LOG_WARN,
                      "transaction \"%s\" of checkpoint %" PRIu64 " has been open for %" PRId64
                      " ms of transaction.timeout.ms %" PRIu64
                      "; if it times out before its checkpoint completes, its data is lost",
                      name, p->checkpoint_id, age, t->conf->timeout_ms);
    }
}

/* A transaction that got committed only after more than warn-ratio of its timeout came close to
 * being lost: say so, as the timeout or the checkpoints need changing before one is. */
static void warn_late(tpc__txn_task_t *t, const char *name, uint64_t ckpt, int64_t start_ms,
                      bool recovery)
{
    int64_t age = tpc_wall_ms() - start_ms;
    if (!t->conf->timeout_ms || (double)age < (double)t->conf->timeout_ms * t->conf->warn_ratio)
        return;
    /* A recovery commit that succeeds for a transaction older than its whole timeout found it
     * committed before (an open one would have timed out and been reported lost): nothing came
     * close, and a warning at every restart would be a false alarm. */
    if (recovery && age >= (int64_t)t->conf->timeout_ms)
        return;
    tpc__txn_logf(&t->env, TPC_LOG_WARN,
                  "transaction \"%s\" of checkpoint %" PRIu64 " was committed%s %" PRId64
                  " ms after it began, more than %.0f%% of transaction.timeout.ms %" PRIu64
                  ": raise the timeout, or make checkpoints and restarts faster",
                  name, ckpt, recovery ? " during recovery" : "", age, t->conf->warn_ratio * 100,
                  t->conf->timeout_ms);
}

/* Commit every pending transaction of a checkpoint <= @up_to, oldest first. */
static tpc_error_t *commit_pending(tpc__txn_task_t *t, uint64_t up_to)
{
    while (t->npending && t->pending[0].checkpoint_id <= up_to) {
        tpc__txn_pending_t *p = &t->pending[0];
        char name[256];
        tpc__txn_describe(t, p->txn, name, sizeof name);
        tpc_error_t *err = tpc__txn_call(t, TPC__TXN_OP_COMMIT, p->txn, name);
        if (err) {
            err =
                tpc_error_prefix(err, "could not commit transaction \"%s\" of checkpoint %" PRIu64,
                                 name, p->checkpoint_id);
            if (!tpc_error_hint_text(err))
                err = tpc_error_hint(err, "the transaction stays pending; after the restart it "
                                          "is committed again from the checkpoint that holds it");
            return err;
        }
        warn_late(t, name, p->checkpoint_id, p->start_ms, false);
        atomic_fetch_add(&t->stats->commits, 1);
        atomic_fetch_sub(&t->stats->pending, 1);
        tpc__txn_free(t->ops, t->conn, p->txn);
        tpc__txn_buf_free(&p->state);
        t->npending--;
        memmove(t->pending, t->pending + 1, t->npending * sizeof *t->pending);
        tpc__txn_publish_oldest(t->stats, t->env.subtask, t->npending ? t->pending[0].start_ms : 0);
    }
    return NULL;
}

/* ---- lifecycle --------------------------------------------------------------------------- */

/* Remember that a call failed: the subtask will be restarted, so what close() leaves behind is
 * recovered or replayed, not lost. */
static tpc_error_t *noted(tpc__txn_task_t *t, tpc_error_t *err)
{
    if (err)
        t->failed = true;
    return err;
}

tpc_error_t *tpc__txn_task_open(tpc_txn_sink_t *sink, const tpc__txn_env_t *env,
                                tpc__txn_task_t **out)
{
    *out = NULL;
    tpc__txn_task_t *t = calloc(1, sizeof *t);
    if (!t)
        return tpc_error_nomem();
    t->ops = sink->ops;
    t->conf = &sink->conf;
    t->stats = &sink->stats;
    t->env = *env;
    if (t->env.highest_parallelism < t->env.parallelism)
        t->env.highest_parallelism = t->env.parallelism;
    t->st = (tpc_txn_subtask_t){
        .job_name = env->job_name,
        .sink_name = env->sink_name,
        .subtask = env->subtask,
        .parallelism = env->parallelism,
        .attempt = env->attempt,
        .guarantee = sink->conf.guarantee,
        .restored_checkpoint = env->restored_checkpoint,
        .restored_parallelism = t->env.restored_parallelism,
        .highest_parallelism = t->env.highest_parallelism,
        .first_checkpoint = t->env.first_checkpoint,
        .tpc__env = &t->env,
        .checkpoint_interval_ms = env->checkpoint_interval_ms,
        .owner_epoch = env->owner_epoch,
    };
    t->last_checkpoint = env->restored_checkpoint;
    tpc_error_t *err = t->ops->open(sink->arg, &t->st, &t->conn);
    if (err) {
        free(t);
        return tpc_error_prefix(err, "could not open \"%s\" connector of sink \"%s\"",
                                sink->ops->name ? sink->ops->name : "unnamed", env->sink_name);
    }
    *out = t;
    return NULL;
}

static tpc_error_t *begin(tpc__txn_task_t *t)
{
    uint64_t id = t->last_checkpoint + 1;
    if (id < t->env.first_checkpoint)
        id = t->env.first_checkpoint; /* ids of a run that was started over are not reused */
    void *txn = NULL;
    tpc_error_t *err = tpc__txn_begin(t->ops, t->conn, id, &txn);
    if (err)
        return tpc_error_prefix(err, "could not begin a transaction in sink \"%s\"",
                                t->env.sink_name);
    t->current = txn;
    t->current_checkpoint = id;
    t->current_start_ms = tpc_wall_ms();
    atomic_fetch_add(&t->stats->begun, 1);
    return NULL;
}

typedef struct {
    tpc__txn_entry_t entry;
    void *txn;
} restored_t;

static void sort_restored(restored_t *r, size_t n)
{
    /* Insertion sort: stable, and n is a handful. */
    for (size_t i = 1; i < n; i++) {
        restored_t x = r[i];
        size_t j = i;
        while (j > 0 && r[j - 1].entry.checkpoint_id > x.entry.checkpoint_id) {
            r[j] = r[j - 1];
            j--;
        }
        r[j] = x;
    }
}

static tpc_error_t *recover_one(tpc__txn_task_t *t, restored_t *r)
{
    char name[256];
    tpc__txn_describe(t, r->txn, name, sizeof name);
    uint64_t ckpt = r->entry.checkpoint_id;
    if (r->entry.kind == TPC__TXN_CURRENT) {
        tpc_error_t *err = tpc__txn_call(t, TPC__TXN_OP_RECOVER_ABORT, r->txn, name);
        if (err && t->env.restored_behind && !tpc_error_is_retriable(err)) {
            /* Behind the newest completed checkpoint (restore.fallback=at-least-once), the
             * current transaction may have been pre-committed and committed since. */
            tpc__txn_logf(&t->env, TPC_LOG_ERROR,
                          "AT-LEAST-ONCE: transaction \"%s\" restored as current could not be "
                          "aborted (%s); restored behind the newest completed checkpoint, it was "
                          "most likely committed; going on",
                          name, tpc_error_message(err));
            tpc_error_destroy(err);
            err = NULL;
        }
        if (err)
            return tpc_error_prefix(err,
                                    "could not abort transaction \"%s\" restored from "
                                    "checkpoint %" PRIu64,
                                    name, t->env.restored_checkpoint);
        atomic_fetch_add(&t->stats->aborts, 1);
        return NULL;
    }
    tpc_error_t *err = tpc__txn_call(t, TPC__TXN_OP_RECOVER_COMMIT, r->txn, name);
    if (!err) {
        warn_late(t, name, ckpt, r->entry.start_ms, true);
        atomic_fetch_add(&t->stats->recovered_commits, 1);
        return NULL;
    }
    if (t->env.restored_behind) {
        /* An older checkpoint than the newest completed one, as restore.fallback=at-least-once
         * allows: its pending transactions were most likely committed on the way to the lost
         * checkpoint, and their ids or gids may have been used again since. */
        tpc__txn_logf(&t->env, TPC_LOG_ERROR,
                      "AT-LEAST-ONCE: transaction \"%s\" of checkpoint %" PRIu64
                      " could not be committed again (%s); restored behind the newest completed "
                      "checkpoint, it was most likely committed before; going on",
                      name, ckpt, tpc_error_message(err));
        tpc_error_destroy(err);
        return NULL;
    }
    int64_t age = tpc_wall_ms() - r->entry.start_ms;
    bool expired = t->conf->timeout_ms && age > (int64_t)t->conf->timeout_ms;
    if (expired && t->conf->expired_log) {
        tpc__txn_logf(&t->env, TPC_LOG_ERROR,
                      "data loss: transaction \"%s\" of checkpoint %" PRIu64
                      " could not be committed after %" PRId64 " ms, beyond transaction.timeout.ms "
                      "%" PRIu64 "; its records are lost and the job goes on "
                      "(recovery.expired=log): %s",
                      name, ckpt, age, t->conf->timeout_ms, tpc_error_message(err));
        tpc_error_destroy(err);
        atomic_fetch_add(&t->stats->expired_lost, 1);
        return NULL;
    }
    err = tpc_error_prefix(
        err, "could not commit transaction \"%s\" of checkpoint %" PRIu64 " during recovery", name,
        ckpt);
    if (expired)
        err = tpc_error_hint(err,
                             "the transaction is %" PRId64 " ms old, beyond transaction.timeout.ms "
                             "%" PRIu64 ": it has likely expired and its records are lost; set "
                             "recovery.expired=log to accept the loss and go on, and keep the "
                             "timeout above the checkpoint interval plus the restart time",
                             age, t->conf->timeout_ms);
    return err;
}

/* A checkpoint of an older version does not say which subtask wrote which handle: with another
 * parallelism the owners of the transactional ids, gids and file names could not be told. */
static tpc_error_t *legacy_rescale(const tpc__txn_task_t *t)
{
    return tpc_error_hint(
        tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                      "sink \"%s\": checkpoint %" PRIu64 " was written by an older version of "
                      "twopc at parallelism %d and cannot be restored at parallelism %d",
                      t->env.sink_name, t->env.restored_checkpoint, t->env.restored_parallelism,
                      t->env.parallelism),
        "restore it once at parallelism %d and let a checkpoint complete, then change the "
        "parallelism",
        t->env.restored_parallelism);
}

bool tpc_txn_owns(const tpc_txn_subtask_t *st, int index)
{
    return st && st->parallelism > 0 && index >= 0 && index % st->parallelism == st->subtask;
}

static tpc_error_t *initialize(tpc__txn_task_t *t, const tpc__txn_bytes_t *entries, size_t count)
{
    tpc_error_t *err = NULL;
    restored_t *r = count ? calloc(count, sizeof *r) : NULL;
    void **known = count ? calloc(count, sizeof *known) : NULL;
    size_t n = 0;
    if (count && (!r || !known)) {
        err = tpc_error_nomem();
        goto out;
    }
    for (size_t i = 0; i < count; i++) {
        err = tpc__txn_entry_decode(entries[i].bytes, entries[i].len, &r[n].entry);
        if (!err && r[n].entry.origin < 0 && t->env.restored_parallelism &&
            t->env.restored_parallelism != t->env.parallelism)
            err = legacy_rescale(t);
        if (!err && r[n].entry.origin >= 0 && !tpc_txn_owns(&t->st, r[n].entry.origin))
            continue; /* another subtask's to recover */
        if (!err)
            err = t->ops->deserialize(t->conn, r[n].entry.handle, r[n].entry.handle_len, &r[n].txn);
        if (err) {
            err = tpc_error_prefix(err, "could not restore transaction %zu of sink \"%s\"", i,
                                   t->env.sink_name);
            goto out;
        }
        known[n] = r[n].txn;
        n++;
    }
    sort_restored(r, n);
    /* The restored pending transactions are this subtask's oldest until they are committed
     * (what an earlier attempt left pending outside the checkpoint is aborted as lingering). */
    int64_t oldest = 0;
    for (size_t i = 0; i < n; i++)
        if (r[i].entry.kind == TPC__TXN_PENDING && (!oldest || r[i].entry.start_ms < oldest))
            oldest = r[i].entry.start_ms;
    tpc__txn_publish_oldest(t->stats, t->env.subtask, oldest);
    /* Pending ones first, oldest first: their checkpoint completed, so they must become visible
     * before anything else happens; then the currents, which no checkpoint will ever commit. */
    for (int pass = 0; pass < 2 && !err; pass++)
        for (size_t i = 0; i < n && !err; i++)
            if ((int)r[i].entry.kind == (pass == 0 ? TPC__TXN_PENDING : TPC__TXN_CURRENT))
                err = recover_one(t, &r[i]);
    if (err)
        goto out;
    tpc__txn_publish_oldest(t->stats, t->env.subtask, 0);
    tpc_txn_lingering_t lingering = {
        .restored_checkpoint = t->env.restored_checkpoint,
        .known = known,
        .known_count = n,
    };
    err = tpc__txn_abort_lingering(t->ops, t->conn, &lingering);
    if (err) {
        err = tpc_error_prefix(err, "could not abort lingering transactions of sink \"%s\"",
                               t->env.sink_name);
        goto out;
    }
    if (n)
        tpc__txn_logf(&t->env, TPC_LOG_INFO, "restored %zu transactions from checkpoint %" PRIu64,
                      n, t->env.restored_checkpoint);
out:
    for (size_t i = 0; i < n; i++)
        tpc__txn_free(t->ops, t->conn, r[i].txn);
    free(r);
    free(known);
    return err ? err : begin(t);
}

tpc_error_t *tpc__txn_task_initialize(tpc__txn_task_t *t, const tpc__txn_bytes_t *entries,
                                      size_t count)
{
    return noted(t, initialize(t, entries, count));
}

static tpc_error_t *write_records(tpc__txn_task_t *t, const tpc_record_t *records, size_t count)
{
    if (!t->current)
        return tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL,
                             "sink \"%s\" received records with no open transaction%s",
                             t->env.sink_name, t->finished ? " (after finish)" : "");
    tpc_error_t *err = tpc__txn_write(t->ops, t->conn, t->current, records, count);
    if (err) {
        char name[256];
        tpc__txn_describe(t, t->current, name, sizeof name);
        return tpc_error_prefix(err, "could not write to transaction \"%s\"", name);
    }
    atomic_fetch_add(&t->stats->records, count);
    return NULL;
}

tpc_error_t *tpc__txn_task_write(tpc__txn_task_t *t, const tpc_record_t *records, size_t count)
{
    return noted(t, write_records(t, records, count));
}

static tpc_error_t *push_pending(tpc__txn_task_t *t, uint64_t checkpoint_id)
{
    if (!tpc_array_grow(&t->pending, &t->pending_cap, t->npending + 1, sizeof *t->pending))
        return tpc_error_nomem();
    tpc__txn_pending_t p = {
        .checkpoint_id = checkpoint_id,
        .start_ms = t->current_start_ms,
        .txn = t->current,
    };
    tpc__txn_entry_t e = {
        .kind = TPC__TXN_PENDING,
        .origin = t->env.subtask,
        .checkpoint_id = checkpoint_id,
        .start_ms = p.start_ms,
        .connector = t->ops->name,
    };
    tpc_error_t *err = tpc__txn_entry_begin(&e, &p.state);
    if (!err)
        err = t->ops->serialize(t->conn, p.txn, &p.state);
    if (err) {
        tpc__txn_buf_free(&p.state);
        return err;
    }
    tpc__txn_entry_seal(&p.state);
    t->pending[t->npending++] = p;
    t->current = NULL;
    atomic_fetch_add(&t->stats->pending, 1);
    tpc__txn_publish_oldest(t->stats, t->env.subtask, t->pending[0].start_ms);
    return NULL;
}

/* Take the current transaction out of the running: pre-commit it for @checkpoint_id and keep it
 * pending (exactly-once) or commit it right away (the weaker guarantees). */
static tpc_error_t *close_current(tpc__txn_task_t *t, uint64_t checkpoint_id)
{
    if (tpc__txn_is_empty(t->ops, t->conn, t->current)) {
        tpc__txn_free(t->ops, t->conn, t->current);
        t->current = NULL;
        atomic_fetch_add(&t->stats->empty_skipped, 1);
        return NULL;
    }
    char name[256];
    tpc_error_t *err = tpc__txn_pre_commit(t->ops, t->conn, t->current, checkpoint_id);
    if (err) {
        tpc__txn_describe(t, t->current, name, sizeof name);
        return tpc_error_prefix(err,
                                "could not pre-commit transaction \"%s\" for checkpoint "
                                "%" PRIu64,
                                name, checkpoint_id);
    }
    atomic_fetch_add(&t->stats->pre_commits, 1);
    if (t->conf->guarantee == TPC_TXN_EXACTLY_ONCE)
        return push_pending(t, checkpoint_id);
    tpc__txn_describe(t, t->current, name, sizeof name);
    err = tpc__txn_call(t, TPC__TXN_OP_COMMIT, t->current, name);
    if (err)
        return tpc_error_prefix(err, "could not commit transaction \"%s\" at checkpoint %" PRIu64,
                                name, checkpoint_id);
    atomic_fetch_add(&t->stats->commits, 1);
    tpc__txn_free(t->ops, t->conn, t->current);
    t->current = NULL;
    return NULL;
}

static tpc_error_t *write_state(tpc__txn_task_t *t, tpc__txn_state_add_fn add, void *w)
{
    for (size_t i = 0; i < t->npending; i++) {
        tpc_error_t *err = add(w, t->pending[i].state.data, t->pending[i].state.len);
        if (err)
            return err;
    }
    if (!t->current)
        return NULL;
    tpc__txn_entry_t e = {
        .kind = TPC__TXN_CURRENT,
        .origin = t->env.subtask,
        .checkpoint_id = t->current_checkpoint,
        .start_ms = t->current_start_ms,
        .connector = t->ops->name,
    };
    tpc_error_t *err = tpc__txn_entry_begin(&e, &t->buf);
    if (!err)
        err = t->ops->serialize(t->conn, t->current, &t->buf);
    if (err)
        return err;
    tpc__txn_entry_seal(&t->buf);
    return add(w, t->buf.data, t->buf.len);
}

static tpc_error_t *snapshot(tpc__txn_task_t *t, uint64_t checkpoint_id, tpc__txn_state_add_fn add,
                             void *w)
{
    if (t->npending && checkpoint_id <= t->pending[t->npending - 1].checkpoint_id)
        return tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL,
                             "checkpoint %" PRIu64 " is not newer than pending checkpoint %" PRIu64
                             " of sink \"%s\"",
                             checkpoint_id, t->pending[t->npending - 1].checkpoint_id,
                             t->env.sink_name);
    if (checkpoint_id > t->last_checkpoint)
        t->last_checkpoint = checkpoint_id;
    tpc_error_t *err = t->current ? close_current(t, checkpoint_id) : NULL;
    if (!err && !t->finished)
        err = begin(t);
    if (!err && t->conf->guarantee == TPC_TXN_EXACTLY_ONCE)
        err = write_state(t, add, w);
    if (err)
        return err;
    warn_timeouts(t);
    return NULL;
}

tpc_error_t *tpc__txn_task_snapshot(tpc__txn_task_t *t, uint64_t checkpoint_id,
                                    tpc__txn_state_add_fn add, void *w)
{
    return noted(t, snapshot(t, checkpoint_id, add, w));
}

static tpc_error_t *complete(tpc__txn_task_t *t, uint64_t checkpoint_id)
{
    tpc_error_t *err = commit_pending(t, checkpoint_id);
    if (!err)
        warn_timeouts(t);
    return err;
}

tpc_error_t *tpc__txn_task_complete(tpc__txn_task_t *t, uint64_t checkpoint_id)
{
    return noted(t, complete(t, checkpoint_id));
}

tpc_error_t *tpc__txn_task_aborted(tpc__txn_task_t *t, uint64_t checkpoint_id)
{
    if (t->npending)
        tpc__txn_logf(&t->env, TPC_LOG_DEBUG,
                      "checkpoint %" PRIu64 " aborted; %zu transactions stay pending until a "
                      "later checkpoint completes",
                      checkpoint_id, t->npending);
    return NULL;
}

static tpc_error_t *finish(tpc__txn_task_t *t)
{
    t->finished = true;
    if (!t->current)
        return NULL;
    tpc_error_t *err = tpc__txn_flush(t->ops, t->conn, t->current);
    if (err) {
        char name[256];
        tpc__txn_describe(t, t->current, name, sizeof name);
        return tpc_error_prefix(err, "could not flush transaction \"%s\"", name);
    }
    return NULL;
}

tpc_error_t *tpc__txn_task_finish(tpc__txn_task_t *t)
{
    return noted(t, finish(t));
}

void tpc__txn_task_close(tpc__txn_task_t *t)
{
    if (!t)
        return;
    /* Closing after finish() with no failure or cancel is the normal end: nothing will restore
     * these transactions, so whatever is not committed by now is lost, and that must be loud.
     * After a failure or cancel they are replayed (current) or recovered (pending) instead. */
    bool normal_end = t->finished && !t->failed && !tpc__txn_canceled(t);
    char name[256];
    if (t->current && tpc__txn_is_empty(t->ops, t->conn, t->current)) {
        atomic_fetch_add(&t->stats->empty_skipped, 1);
    } else if (t->current) {
        tpc__txn_describe(t, t->current, name, sizeof name);
        if (normal_end)
            tpc__txn_logf(&t->env, TPC_LOG_ERROR,
                          "sink ends with transaction \"%s\" never pre-committed: no checkpoint "
                          "ran after finish(), so its records are lost; a %s sink needs "
                          "checkpoints (checkpoint.dir) that go on after tasks finish "
                          "(checkpoint.after-finish=true)",
                          name, tpc_txn_guarantee_name(t->conf->guarantee));
        tpc_error_t *err = tpc__txn_abort(t->ops, t->conn, t->current);
        if (err) {
            tpc__txn_logf(&t->env, TPC_LOG_ERROR,
                          "could not abort transaction \"%s\"; the next run cleans it up: %s", name,
                          tpc_error_message(err));
            tpc_error_destroy(err);
        } else {
            atomic_fetch_add(&t->stats->aborts, 1);
        }
    }
    tpc__txn_free(t->ops, t->conn, t->current);
    if (t->npending)
        tpc__txn_logf(&t->env, normal_end ? TPC_LOG_ERROR : TPC_LOG_WARN,
                      "closing with %zu pre-committed transactions of checkpoints %" PRIu64
                      " to %" PRIu64 " not yet committed; only a restore from a checkpoint "
                      "holding them commits them",
                      t->npending, t->pending[0].checkpoint_id,
                      t->pending[t->npending - 1].checkpoint_id);
    for (size_t i = 0; i < t->npending; i++) {
        tpc__txn_free(t->ops, t->conn, t->pending[i].txn);
        tpc__txn_buf_free(&t->pending[i].state);
    }
    atomic_fetch_sub(&t->stats->pending, t->npending);
    free(t->pending);
    tpc__txn_buf_free(&t->buf);
    t->ops->close(t->conn);
    free(t);
}
