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
 * their owner at start (or, when it restored their transaction, once it is safe).
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
