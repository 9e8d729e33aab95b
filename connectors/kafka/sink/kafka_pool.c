/*
 * The pool of transactional ids of one subtask, `<prefix>-<subtask>-<n>` for n below
 * transactional.id.pool-size (`<prefix>-e<epoch>-<subtask>-<n>` under an owner epoch above 0, so
 * that two owners of the job never share an id), each with its own producer. A transaction takes a
 * free id at its first record. After its commit the id is held: the checkpoints taken so far may
 * list the transaction, and if one of them were restored, its recovery would send EndTxn(commit)
 * for it again, which is only exact (success for an already committed transaction) while no newer
 * transaction or producer epoch exists on the id. The id is free again once a checkpoint taken
 * after the commit is known to be complete; from then on no restorable checkpoint lists the old
 * transaction. A checkpoint is known complete here when a transaction pre-committed for it (or a
 * later one) is committed. An id held since recovery is initialised at its release, which fences
 * a stalled earlier instance of the job still writing with it. The proof is in docs/kafka.md.
 */
#include "kafka_sink_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tpc__kafka_id_of(const tpc__kafka_sub_t *c, uint64_t owner_epoch, int subtask, int n,
                      char *buf, size_t cap)
{
    if (owner_epoch)
        snprintf(buf, cap, "%s-e%" PRIu64 "-%d-%d", c->conf->id_prefix, owner_epoch, subtask, n);
    else
        snprintf(buf, cap, "%s-%d-%d", c->conf->id_prefix, subtask, n);
}

bool tpc__kafka_id_epoch(const tpc__kafka_sub_t *c, const char *id, uint64_t *owner_epoch)
{
    size_t plen = strlen(c->conf->id_prefix);
    if (strncmp(id, c->conf->id_prefix, plen) != 0 || id[plen] != '-')
        return false;
    const char *p = id + plen + 1;
    *owner_epoch = 0;
    if (*p != 'e')
        return *p >= '0' && *p <= '9';
    p++;
    if (*p < '0' || *p > '9')
        return false;
    uint64_t e = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (e > (UINT64_MAX - 9) / 10)
            return false;
        e = e * 10 + (uint64_t)(*p - '0');
    }
    if (*p != '-')
        return false;
    *owner_epoch = e;
    return true;
}

void tpc__kafka_slot_id(const tpc__kafka_sub_t *c, int n, char *buf, size_t cap)
{
    tpc__kafka_id_of(c, c->st->owner_epoch, c->st->subtask, n, buf, cap);
}

tpc_error_t *tpc__kafka_pool_start(tpc__kafka_sub_t *c, int slot)
{
    char id[TPC__KAFKA_ID_MAX];
    tpc__kafka_slot_id(c, slot, id, sizeof id);
    tpc_error_t *err = tpc__kafka_producer_start(&c->slots[slot].prod, c->conf, c->st, id, true);
    if (err)
        return err;
    c->slots[slot].state = TPC__KAFKA_SLOT_FREE;
    return NULL;
}

/* One slot started on a thread of its own by tpc__kafka_pool_start_unused(). */
typedef struct {
    tpc__kafka_sub_t *c;
    int slot;
    pthread_t thread;
    bool running;
    tpc_error_t *err;
} starter_t;

static void *start_one(void *arg)
{
    starter_t *s = arg;
    s->err = tpc__kafka_pool_start(s->c, s->slot);
    return NULL;
}

/* Each producer's start is mostly waiting for the cluster (InitProducerId, then the topic's
 * metadata: about 100 ms each on one machine), and the ids are independent of each other: each
 * init_transactions() ends only what its own id left open. So the unused slots start at once,
 * each on a thread of its own, and open takes one start's time instead of pool-size of them. */
tpc_error_t *tpc__kafka_pool_start_unused(tpc__kafka_sub_t *c)
{
    starter_t *starters = calloc((size_t)c->conf->pool_size, sizeof *starters);
    if (!starters)
        return tpc_error_nomem();
    int n = 0;
    for (int slot = 0; slot < c->conf->pool_size; slot++)
        if (c->slots[slot].state == TPC__KAFKA_SLOT_UNUSED)
            starters[n++] = (starter_t){.c = c, .slot = slot};
    for (int i = 0; i < n; i++)
        starters[i].running =
            pthread_create(&starters[i].thread, NULL, start_one, &starters[i]) == 0;
    tpc_error_t *err = NULL;
    for (int i = 0; i < n; i++) {
        if (starters[i].running)
            pthread_join(starters[i].thread, NULL);
        else /* no thread to be had: start it here */
            start_one(&starters[i]);
        if (!err)
            err = starters[i].err;
        else
            tpc_error_destroy(starters[i].err);
    }
    free(starters);
    return err; /* the slots that started are free; close stops them */
}

tpc_error_t *tpc__kafka_pool_acquire(tpc__kafka_sub_t *c, int *slot)
{
    int unused = -1;
    for (int n = 0; n < c->conf->pool_size; n++) {
        if (c->slots[n].state == TPC__KAFKA_SLOT_FREE) {
            *slot = n;
            return NULL;
        }
        if (c->slots[n].state == TPC__KAFKA_SLOT_UNUSED && unused < 0)
            unused = n;
    }
    if (unused < 0) {
        int held = 0;
        for (int n = 0; n < c->conf->pool_size; n++)
            held += c->slots[n].state == TPC__KAFKA_SLOT_HELD;
        tpc_error_t *err = tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL,
                                         "all %d transactional ids of subtask %d are in use "
                                         "(%d held until a later checkpoint completes)",
                                         c->conf->pool_size, c->st->subtask, held);
        return tpc_error_hint(err, "raise transactional.id.pool-size above the number of "
                                   "checkpoints that can be pending at once plus two");
    }
    tpc_error_t *err = tpc__kafka_pool_start(c, unused);
    if (!err)
        *slot = unused;
    return err;
}

void tpc__kafka_pool_complete(tpc__kafka_sub_t *c, uint64_t ckpt)
{
    for (int i = 0; i < c->norphans;) {
        if (c->orphans[i].release_after > ckpt) {
            i++;
            continue;
        }
        tpc_error_t *err = tpc__kafka_fence(c, c->orphans[i].id);
        if (err) { /* tried again at the next completed checkpoint */
            tpc_txn_log(c->st, TPC_LOG_WARN, "%s", tpc_error_message(err));
            tpc_error_destroy(err);
            break;
        }
        c->orphans[i] = c->orphans[--c->norphans];
    }
    for (int n = 0; n < c->conf->pool_size; n++) {
        tpc__kafka_slot_t *s = &c->slots[n];
        if (s->state != TPC__KAFKA_SLOT_HELD || s->release_after > ckpt)
            continue;
        if (s->prod.rk) {
            s->state = TPC__KAFKA_SLOT_FREE;
            continue;
        }
        /* An id held since recovery: its restored transaction was committed under the epoch of
         * the producer that wrote it, which a stalled earlier instance of the job may still hold
         * and write with. Initialise it now, not at its next use, so that that producer is fenced
         * as soon as no restorable checkpoint needs the old epoch. */
        s->state = TPC__KAFKA_SLOT_UNUSED;
        tpc_error_t *err = tpc__kafka_pool_start(c, n);
        if (err) { /* it stays unused: its next use initialises it */
            char id[TPC__KAFKA_ID_MAX];
            tpc__kafka_slot_id(c, n, id, sizeof id);
            tpc_txn_log(c->st, TPC_LOG_WARN, "could not initialise transactional id \"%s\" yet: %s",
                        id, tpc_error_message(err));
            tpc_error_destroy(err);
        }
    }
}

/* One id fenced on a thread of its own by tpc__kafka_fence_all(). */
typedef struct {
    tpc__kafka_sub_t *c;
    const char *id;
    pthread_t thread;
    bool running;
    tpc_error_t *err;
} fencer_t;

static void *fence_one(void *arg)
{
    fencer_t *f = arg;
    f->err = tpc__kafka_fence(f->c, f->id);
    return NULL;
}

tpc_error_t *tpc__kafka_fence_all(tpc__kafka_sub_t *c, const char (*ids)[TPC__KAFKA_ID_MAX], int n)
{
    if (n <= 0)
        return NULL;
    fencer_t *f = calloc((size_t)n, sizeof *f);
    if (!f)
        return tpc_error_nomem();
    for (int i = 0; i < n; i++) {
        f[i] = (fencer_t){.c = c, .id = ids[i]};
        f[i].running = pthread_create(&f[i].thread, NULL, fence_one, &f[i]) == 0;
    }
    tpc_error_t *err = NULL;
    for (int i = 0; i < n; i++) {
        if (f[i].running)
            pthread_join(f[i].thread, NULL);
        else /* no thread to be had: fence it here */
            fence_one(&f[i]);
        if (!err)
            err = f[i].err;
        else
            tpc_error_destroy(f[i].err);
    }
    free(f);
    return err;
}

tpc_error_t *tpc__kafka_fence(tpc__kafka_sub_t *c, const char *id)
{
    tpc__kafka_producer_t p;
    tpc_error_t *err = tpc__kafka_producer_start(&p, c->conf, c->st, id, true);
    if (err)
        return tpc_error_prefix(err,
                                "could not initialise (fence) transactional id \"%s\", which "
                                "an earlier run or another owner of the job may still use",
                                id);
    tpc__kafka_producer_stop(&p, false);
    return NULL;
}

void tpc__kafka_pool_hold(tpc__kafka_sub_t *c, int slot, uint64_t release_after)
{
    c->slots[slot].state = TPC__KAFKA_SLOT_HELD;
    c->slots[slot].release_after = release_after;
}
