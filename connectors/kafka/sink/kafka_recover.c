/*
 * What happens at start before the first transaction: restored pending transactions are
 * committed with EndTxn straight to the coordinator (kafka_end_txn.c) under the producer id and
 * epoch stored at pre-commit, before any producer is initialised with their ids; then every other
 * transactional id this subtask may own gets a producer whose initialisation aborts whatever
 * transaction a crashed run left open on it. The ids of restored transactions are held back from
 * that (initialising them would bump their epoch and make a repeated recovery commit, after a
 * second crash, look like data loss) until a checkpoint that no longer lists them is complete.
 * After a parallelism change the framework hands each subtask the transactions of the subtasks
 * it owns (tpc_txn_owns()): old subtask k's ids `<prefix>-k-n` are recovered, held and
 * initialised by one subtask only, k itself while it exists, so no subtask ever initialises an id
 * whose transaction another one restored. Ids of subtasks that no longer run are initialised by
 * their owner at start (or, when it restored their transaction, once it is safe).
 * Also the public tpc_kafka_end_transaction().
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
static tpc__kafka_wire_conf_t sink_wire(const tpc__kafka_sub_t *c)
{
    tpc__kafka_wire_conf_t wire = c->wire;
    wire.props = (const char *const *)c->conf->props;
    wire.nprops = c->conf->nprops;
    return wire;
}

static tpc_error_t *end_txn(const tpc__kafka_wire_conf_t *wire, const char *id, int64_t pid,
                            int16_t epoch, bool commit, int timeout_ms)
{
    tpc__kafka_end_result_t result;
    int code = 0;
    tpc_error_t *err = tpc__kafka_end_txn(wire, id, pid, epoch, commit, timeout_ms, &result, &code);
    /* An abort that meets a state which allows none may meet the coordinator in the middle of
     * ending the transaction itself (its timeout): ask again for a few seconds before taking the
     * answer as "committed". */
    for (int tries = 0; !err && !commit && result == TPC__KAFKA_END_BAD_STATE && tries < 10;
         tries++) {
        tpc_sleep_ms(500, NULL, NULL);
        err = tpc__kafka_end_txn(wire, id, pid, epoch, commit, timeout_ms, &result, &code);
    }
    if (err)
        return err;
    if (result == TPC__KAFKA_END_DONE)
        return NULL;
    if (!commit)
        return result == TPC__KAFKA_END_BAD_STATE
                   ? tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL,
                                   "could not abort the transaction of \"%s\" (producer id %" PRId64
                                   ", epoch %d): it is committed",
                                   id, pid, (int)epoch)
                   : NULL;
    err = tpc_error_new(TPC_ERR_DATA_LOSS, TPC_ERROR_FATAL,
                        "data loss: the transaction of \"%s\" (producer id %" PRId64
                        ", epoch %d) cannot be committed: %s (%s)",
                        id, pid, (int)epoch,
                        result == TPC__KAFKA_END_UNKNOWN_ID
                            ? "the coordinator no longer knows it"
                            : "the coordinator aborted it, after its timeout or because another "
                              "producer took over the transactional id",
                        tpc__kafka_code_name(code));
    return tpc_error_hint(err, "keep kafka.transaction.timeout.ms well above the checkpoint "
                               "interval plus the restart time, and give every program its own "
                               "transactional.id.prefix");
}

tpc_error_t *tpc_kafka_end_transaction(const char *bootstrap, const char *const *props,
                                       const char *transactional_id, int64_t producer_id,
                                       int16_t producer_epoch, bool commit, int timeout_ms)
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
    tpc__kafka_wire_conf_t wire = {.bootstrap = bootstrap, .props = props, .nprops = n};
    return end_txn(&wire, transactional_id, producer_id, producer_epoch, commit, timeout_ms);
}

tpc_error_t *tpc__kafka_recover_and_commit(void *conn, void *txn)
{
    tpc__kafka_sub_t *c = conn;
    tpc__kafka_txn_t *t = txn;
    if (!t->id[0])
        return NULL; /* nothing was ever written into it */
    tpc__kafka_wire_conf_t wire = sink_wire(c);
    tpc_error_t *err = end_txn(&wire, t->id, t->pid, t->epoch, true, c->conf->recovery_timeout_ms);
    if (!err)
        tpc_txn_log(c->st, TPC_LOG_INFO,
                    "committed transaction \"%s\" of checkpoint %" PRIu64 " during recovery", t->id,
                    t->ckpt);
    return err;
}

tpc_error_t *tpc__kafka_recover_and_abort(void *conn, void *txn)
{
    tpc__kafka_sub_t *c = conn;
    tpc__kafka_txn_t *t = txn;
    if (!t->id[0] || t->pid < 0)
        return NULL; /* its id, if it got one, is aborted with the lingering ones */
    tpc__kafka_wire_conf_t wire = sink_wire(c);
    return end_txn(&wire, t->id, t->pid, t->epoch, false, c->conf->recovery_timeout_ms);
}

static bool restored_on(const tpc_txn_lingering_t *l, const char *id)
{
    for (size_t i = 0; i < l->known_count; i++)
        if (strcmp(((const tpc__kafka_txn_t *)l->known[i])->id, id) == 0)
            return true;
    return false;
}

/* The ids of subtasks beyond the current parallelism that this subtask owns: a run at a higher
 * parallelism may have left transactions open on them, which would hold back read_committed
 * readers until their timeout. Those whose restored transaction this subtask just ended are
 * held like its own; the others are initialised now, which aborts what they carry. */
static tpc_error_t *orphans(tpc__kafka_sub_t *c, const tpc_txn_lingering_t *l)
{
    const tpc_txn_subtask_t *st = c->st;
    int fenced = 0;
    for (int s = st->parallelism; s < st->highest_parallelism; s++) {
        if (!tpc_txn_owns(st, s))
            continue;
        for (int n = 0; n < c->conf->pool_size; n++) {
            char id[TPC__KAFKA_ID_MAX];
            snprintf(id, sizeof id, "%s-%d-%d", c->conf->id_prefix, s, n);
            if (restored_on(l, id)) {
                struct tpc__kafka_orphan *o =
                    realloc(c->orphans, (size_t)(c->norphans + 1) * sizeof *o);
                if (!o)
                    return tpc_error_nomem();
                c->orphans = o;
                snprintf(c->orphans[c->norphans].id, sizeof c->orphans[0].id, "%s", id);
                c->orphans[c->norphans++].release_after = l->restored_checkpoint + 1;
                continue;
            }
            tpc_error_t *err = tpc__kafka_fence(c, id);
            if (err)
                return err;
            fenced++;
        }
    }
    if (fenced)
        tpc_txn_log(st, TPC_LOG_INFO,
                    "initialised %d transactional ids of subtasks %d to %d, which no longer run",
                    fenced, st->parallelism, st->highest_parallelism - 1);
    return NULL;
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
    tpc_error_t *err = tpc__kafka_pool_start_unused(c);
    return err ? err : orphans(c, lingering);
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
