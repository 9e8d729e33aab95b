/*
 * What happens at start before the first transaction: restored pending transactions are
 * committed with EndTxn straight to the coordinator (kafka_end_txn.c) under the producer id and
 * epoch stored at pre-commit, before any producer is initialised with their ids, and each commit
 * is proven for that one transaction by its start time (kafka_proof.c); then every other
 * transactional id this subtask may own gets a producer whose initialisation aborts whatever
 * transaction a crashed run left open on it. The ids of restored transactions are held back from
 * that (initialising them would bump their epoch and make a repeated recovery commit, after a
 * second crash, look like data loss) until a checkpoint that no longer lists them is complete.
 * After a parallelism change the framework hands each subtask the transactions of the subtasks
 * it owns (tpc_txn_owns()): old subtask k's ids `<prefix>-k-n` are recovered, held and
 * initialised by one subtask only, k itself while it exists, so no subtask ever initialises an id
 * whose transaction another one restored. Ids of subtasks that no longer run are initialised by
 * their owner at start (or, when it restored their transaction, once it is safe). Under an owner
 * epoch the ids carry it, and the ids of earlier owners are initialised the same way
 * (fence_others()).
 * Also the public tpc_kafka_end_transaction() and tpc_kafka_commit_transaction().
 */
#include "kafka_sink_internal.h"
#include "tpc_kit.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The wire client of a subtask, with the sink's librdkafka properties, so that recovery commits
 * use the same TLS and SASL settings as its producers. */
tpc__kafka_wire_conf_t tpc__kafka_sink_wire(const tpc__kafka_sub_t *c)
{
    tpc__kafka_wire_conf_t wire = c->wire;
    wire.props = (const char *const *)c->conf->props;
    wire.nprops = c->conf->nprops;
    return wire;
}

/* Abort the transaction of @id with @pid / @epoch: NULL when it is aborted (or was). */
static tpc_error_t *abort_txn(const tpc__kafka_wire_conf_t *wire, const char *id, int64_t pid,
                              int16_t epoch, int timeout_ms)
{
    tpc__kafka_end_result_t result;
    int code = 0;
    tpc_error_t *err = tpc__kafka_end_txn(wire, id, pid, epoch, false, timeout_ms, &result, &code);
    /* An abort that meets a state which allows none may meet the coordinator in the middle of
     * ending the transaction itself (its timeout): ask again for a few seconds before taking the
     * answer as "committed". */
    for (int tries = 0; !err && result == TPC__KAFKA_END_BAD_STATE && tries < 10; tries++) {
        tpc_sleep_ms(500, NULL, NULL);
        err = tpc__kafka_end_txn(wire, id, pid, epoch, false, timeout_ms, &result, &code);
    }
    if (err)
        return err;
    return result == TPC__KAFKA_END_BAD_STATE
               ? tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL,
                               "could not abort the transaction of \"%s\" (producer id %" PRId64
                               ", epoch %d): it is committed",
                               id, pid, (int)epoch)
               : NULL;
}

static tpc_error_t *wire_of(const char *bootstrap, const char *const *props,
                            const char *transactional_id, int timeout_ms,
                            tpc__kafka_wire_conf_t *wire)
{
    if (!bootstrap || !transactional_id || !*transactional_id || timeout_ms < 0)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "ending a transaction needs bootstrap servers, a transactional id "
                             "and a timeout");
    size_t n = 0;
    while (props && props[2 * n]) {
        if (!props[2 * n + 1])
            return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                                 "property \"%s\" has no value", props[2 * n]);
        n++;
    }
    *wire = (tpc__kafka_wire_conf_t){.bootstrap = bootstrap, .props = props, .nprops = n};
    return NULL;
}

/* An unnamed transaction that is no longer open: if the id's last transaction, of that producer
 * id and epoch, is committed, the one meant may be it or an earlier one; say so rather than
 * "data loss". */
static tpc_error_t *unnamed_verdict(const tpc__kafka_wire_conf_t *wire, const char *id, int64_t pid,
                                    int16_t epoch, int timeout_ms, tpc_error_t *err)
{
    tpc__kafka_txn_info_t now;
    tpc_error_t *derr = tpc__kafka_describe_transaction(wire, id, timeout_ms, &now);
    if (derr) {
        tpc_error_destroy(derr);
        return err;
    }
    if (now.error || now.producer_id != pid || now.producer_epoch != epoch ||
        (strcmp(now.state, "CompleteCommit") != 0 && strcmp(now.state, "PrepareCommit") != 0))
        return err;
    tpc_error_destroy(err);
    char name[300];
    tpc__kafka_txn_name(name, sizeof name, id, now.producer_id, now.producer_epoch, now.start_ms);
    return tpc_error_hint(
        tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL,
                      "transaction %s is committed, and it is the last one of producer id %" PRId64
                      ", epoch %d; an earlier one of the same producer id and epoch would be "
                      "answered the same, so this does not show that the one meant committed",
                      name, pid, (int)epoch),
        "name the transaction by its start time (tpc_kafka_commit_transaction(), or "
        "--start-ms of twopc kafka commit), as DescribeTransactions showed it while it was open");
}

tpc_error_t *tpc_kafka_commit_transaction(const char *bootstrap, const char *const *props,
                                          const char *transactional_id, int64_t producer_id,
                                          int16_t producer_epoch, int64_t start_ms, int timeout_ms)
{
    tpc__kafka_wire_conf_t wire;
    tpc_error_t *err = wire_of(bootstrap, props, transactional_id, timeout_ms, &wire);
    if (err)
        return err;
    if (start_ms < -1)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "a transaction's start time is -1 (unknown) or a time in ms");
    bool ended_here = false;
    int64_t named = start_ms;
    err = tpc__kafka_prove_commit(&wire, transactional_id, producer_id, producer_epoch, &named,
                                  timeout_ms, NULL, &ended_here);
    if (err && start_ms < 0 && tpc_error_code(err) == TPC_ERR_DATA_LOSS)
        err =
            unnamed_verdict(&wire, transactional_id, producer_id, producer_epoch, timeout_ms, err);
    return err;
}

tpc_error_t *tpc_kafka_end_transaction(const char *bootstrap, const char *const *props,
                                       const char *transactional_id, int64_t producer_id,
                                       int16_t producer_epoch, bool commit, int timeout_ms)
{
    if (commit)
        return tpc_kafka_commit_transaction(bootstrap, props, transactional_id, producer_id,
                                            producer_epoch, -1, timeout_ms);
    tpc__kafka_wire_conf_t wire;
    tpc_error_t *err = wire_of(bootstrap, props, transactional_id, timeout_ms, &wire);
    return err ? err : abort_txn(&wire, transactional_id, producer_id, producer_epoch, timeout_ms);
}

/* A handle of version 1 names no start time. Its transaction, once no longer open, cannot be
 * proven committed; the coordinator's state of the id (committed, same producer id and epoch) is
 * what the version that wrote it went by, and is taken with a warning, once, at the upgrade. */
static bool committed_unnamed(tpc__kafka_sub_t *c, const tpc__kafka_txn_t *t)
{
    tpc__kafka_wire_conf_t wire = tpc__kafka_sink_wire(c);
    tpc__kafka_txn_info_t now;
    tpc_error_t *err =
        tpc__kafka_describe_transaction(&wire, t->id, c->conf->recovery_timeout_ms, &now);
    if (err) {
        tpc_error_destroy(err);
        return false;
    }
    bool committed =
        !now.error && now.producer_id == t->pid && now.producer_epoch == t->epoch &&
        (strcmp(now.state, "CompleteCommit") == 0 || strcmp(now.state, "PrepareCommit") == 0);
    if (committed)
        tpc_txn_log(c->st, TPC_LOG_WARN,
                    "transaction \"%s\" of checkpoint %" PRIu64 " is taken as committed because "
                    "its id's last transaction is: its handle, written by an earlier version, "
                    "names no start time to prove it by",
                    t->id, t->ckpt);
    return committed;
}

tpc_error_t *tpc__kafka_recover_and_commit(void *conn, void *txn)
{
    tpc__kafka_sub_t *c = conn;
    tpc__kafka_txn_t *t = txn;
    if (!t->id[0])
        return NULL; /* nothing was ever written into it */
    if (t->start_ms < 0 && committed_unnamed(c, t))
        return NULL;
    tpc__kafka_wire_conf_t wire = tpc__kafka_sink_wire(c);
    char what[48];
    snprintf(what, sizeof what, "checkpoint %" PRIu64, t->ckpt);
    bool ended_here = false;
    int64_t start_ms = t->start_ms;
    tpc_error_t *err = tpc__kafka_prove_commit(&wire, t->id, t->pid, t->epoch, &start_ms,
                                               c->conf->recovery_timeout_ms, what, &ended_here);
    if (!err)
        tpc_txn_log(c->st, TPC_LOG_INFO, "%s transaction \"%s\" of checkpoint %" PRIu64 "%s",
                    ended_here ? "committed" : "found committed", t->id, t->ckpt,
                    ended_here ? " during recovery" : " already");
    return err;
}

tpc_error_t *tpc__kafka_recover_and_abort(void *conn, void *txn)
{
    tpc__kafka_sub_t *c = conn;
    tpc__kafka_txn_t *t = txn;
    if (!t->id[0] || t->pid < 0)
        return NULL; /* its id, if it got one, is aborted with the lingering ones */
    tpc__kafka_wire_conf_t wire = tpc__kafka_sink_wire(c);
    return abort_txn(&wire, t->id, t->pid, t->epoch, c->conf->recovery_timeout_ms);
}

static bool restored_on(const tpc_txn_lingering_t *l, const char *id)
{
    for (size_t i = 0; i < l->known_count; i++)
        if (strcmp(((const tpc__kafka_txn_t *)l->known[i])->id, id) == 0)
            return true;
    return false;
}

/* Fence @id once a checkpoint >= @release_after is complete (tpc__kafka_pool_complete()). */
static tpc_error_t *fence_later(tpc__kafka_sub_t *c, const char *id, uint64_t release_after)
{
    for (int i = 0; i < c->norphans; i++)
        if (strcmp(c->orphans[i].id, id) == 0)
            return NULL;
    struct tpc__kafka_orphan *o = realloc(c->orphans, (size_t)(c->norphans + 1) * sizeof *o);
    if (!o)
        return tpc_error_nomem();
    c->orphans = o;
    snprintf(c->orphans[c->norphans].id, sizeof c->orphans[0].id, "%s", id);
    c->orphans[c->norphans++].release_after = release_after;
    return NULL;
}

static bool own_slot(const tpc__kafka_sub_t *c, const char *id)
{
    for (int n = 0; n < c->conf->pool_size; n++) {
        char mine[TPC__KAFKA_ID_MAX];
        tpc__kafka_slot_id(c, n, mine, sizeof mine);
        if (strcmp(mine, id) == 0)
            return true;
    }
    return false;
}

/* The ids to fence now, without repeats. */
typedef struct {
    char (*ids)[TPC__KAFKA_ID_MAX];
    size_t n, cap;
} idset_t;

static tpc_error_t *idset_add(idset_t *set, const char *id)
{
    for (size_t i = 0; i < set->n; i++)
        if (strcmp(set->ids[i], id) == 0)
            return NULL;
    if (!tpc_array_grow(&set->ids, &set->cap, set->n + 1, sizeof *set->ids))
        return tpc_error_nomem();
    snprintf(set->ids[set->n++], TPC__KAFKA_ID_MAX, "%s", id);
    return NULL;
}

/*
 * The ids that another run may still write with, other than this subtask's own pool:
 *   - ids of subtasks beyond the current parallelism that this subtask owns: a run at a higher
 *     parallelism may have left transactions open on them, which would hold back read_committed
 *     readers until their timeout;
 *   - under owner epoch E > 0, the ids of the owners before it: those of epoch E - 1, whose
 *     record this run took over, and of every older epoch that a restored transaction's id names
 *     (epoch 0 is the job's ids before it had owners), of every subtask this one owns. An earlier
 *     owner may still run, frozen while its work moved here (a zombie), and write with them.
 * Each is initialised (InitProducerId), which aborts its open transaction and fences the producer
 * that held it, before this subtask writes anything. An id whose restored transaction was
 * committed here is fenced only once a checkpoint after the restored one is complete: a recovery
 * from that checkpoint again (after a crash) commits it again under its stored producer epoch,
 * which is proven only while no newer epoch exists on the id. Its transaction is committed and its
 * owner's next checkpoint cannot complete, so no later transaction of it can commit on that id.
 */
static tpc_error_t *fence_others(tpc__kafka_sub_t *c, const tpc_txn_lingering_t *l)
{
    const tpc_txn_subtask_t *st = c->st;
    uint64_t mine = st->owner_epoch;
    uint64_t *epochs = calloc(l->known_count + 2, sizeof *epochs);
    if (!epochs)
        return tpc_error_nomem();
    size_t ne = 0;
    epochs[ne++] = mine;
    if (mine)
        epochs[ne++] = mine - 1;
    idset_t now = {0};
    tpc_error_t *err = NULL;
    int later = 0;
    for (size_t i = 0; i < l->known_count && !err; i++) {
        const tpc__kafka_txn_t *t = l->known[i];
        if (!t->id[0] || own_slot(c, t->id))
            continue;
        uint64_t e;
        if (!tpc__kafka_id_epoch(c, t->id, &e))
            continue; /* not an id of this sink's prefix */
        if (e < mine) {
            bool seen = false;
            for (size_t k = 0; k < ne; k++)
                seen = seen || epochs[k] == e;
            if (!seen)
                epochs[ne++] = e;
        }
        /* A transaction that was open (not pre-committed) under another epoch was aborted here;
         * its owner may be writing on into it: fence it now. */
        if (e != mine && !t->ckpt)
            err = idset_add(&now, t->id);
        else {
            err = fence_later(c, t->id, l->restored_checkpoint + 1);
            later++;
        }
    }
    int upto =
        st->highest_parallelism > st->parallelism ? st->highest_parallelism : st->parallelism;
    for (size_t k = 0; k < ne && !err; k++)
        for (int s = 0; s < upto && !err; s++) {
            if (!tpc_txn_owns(st, s) || (epochs[k] == mine && s < st->parallelism))
                continue; /* another subtask's, or this one's own pool */
            for (int n = 0; n < c->conf->pool_size && !err; n++) {
                char id[TPC__KAFKA_ID_MAX];
                tpc__kafka_id_of(c, epochs[k], s, n, id, sizeof id);
                if (!restored_on(l, id))
                    err = idset_add(&now, id);
            }
        }
    if (!err)
        err = tpc__kafka_fence_all(c, (const char(*)[TPC__KAFKA_ID_MAX])now.ids, (int)now.n);
    if (!err && now.n)
        tpc_txn_log(st, TPC_LOG_INFO,
                    "initialised (fenced) %zu transactional ids of earlier owners or of subtasks "
                    "that no longer run (owner epoch %" PRIu64 ", %zu epochs looked at)%s",
                    now.n, mine, ne,
                    later ? "; those of restored transactions follow the next "
                            "completed checkpoint"
                          : "");
    free(now.ids);
    free(epochs);
    return err;
}

static tpc_error_t *abort_lingering(tpc__kafka_sub_t *c, const tpc_txn_lingering_t *lingering)
{
    for (size_t i = 0; i < lingering->known_count; i++) {
        const tpc__kafka_txn_t *t = lingering->known[i];
        for (int n = 0; n < c->conf->pool_size && t->id[0]; n++) {
            char id[TPC__KAFKA_ID_MAX];
            tpc__kafka_slot_id(c, n, id, sizeof id);
            if (strcmp(id, t->id) == 0)
                tpc__kafka_pool_hold(c, n, lingering->restored_checkpoint + 1);
        }
    }
    tpc_error_t *err = fence_others(c, lingering);
    return err ? err : tpc__kafka_pool_start_unused(c);
}

tpc_error_t *tpc__kafka_abort_lingering(void *conn, const tpc_txn_lingering_t *lingering)
{
    tpc__kafka_sub_t *c = conn;
    if (!c->transactional)
        return NULL;
    pthread_mutex_lock(&c->lock); /* the producers it starts are served from their start */
    tpc_error_t *err = abort_lingering(c, lingering);
    pthread_mutex_unlock(&c->lock);
    return err;
}
