/*
 * Bounded channels between two subtasks. The producer blocks while the ring is full: that is the
 * backpressure that keeps memory bounded whatever the record count. Events (barriers, end of data,
 * end of partition) share the ring with batches, so they never overtake records. The consumer is
 * woken through its task's wake-up (task.c); the producer can wait for the ring to drain, which a
 * finished task does before it closes so that no record is left in flight.
 */
#include "runtime_internal.h"
#include "runtime_task.h"

#include <stdlib.h>

tpc__channel_t *tpc__channel_new(size_t cap, const atomic_bool *canceled)
{
    tpc__channel_t *ch = tpc__xcalloc(1, sizeof(*ch));
    pthread_mutex_init(&ch->mu, NULL);
    tpc__cond_init_monotonic(&ch->not_full);
    ch->cap = cap;
    ch->ring = tpc__xcalloc(cap, sizeof(*ch->ring));
    ch->spare_cap = cap + 2;
    ch->spare = tpc__xcalloc(ch->spare_cap, sizeof(*ch->spare));
    ch->canceled = canceled;
    return ch;
}

void tpc__channel_destroy(tpc__channel_t *ch)
{
    if (!ch)
        return;
    for (size_t i = 0; i < ch->count; i++)
        tpc__batch_destroy(ch->ring[(ch->head + i) % ch->cap].batch);
    for (size_t i = 0; i < ch->nspare; i++)
        tpc__batch_destroy(ch->spare[i]);
    free(ch->spare);
    free(ch->ring);
    pthread_cond_destroy(&ch->not_full);
    pthread_mutex_destroy(&ch->mu);
    free(ch);
}

/* Canceled, or the producer was told to stop without drain (its consumer may be gone already):
 * what it pushes now is past the savepoint and is dropped. */
static bool push_refused(const tpc__channel_t *ch)
{
    return atomic_load(ch->canceled) ||
           (ch->producer && atomic_load(&ch->producer->stop_requested));
}

tpc_err_t tpc__channel_push(tpc__channel_t *ch, tpc__item_t item, uint64_t *blocked_us)
{
    pthread_mutex_lock(&ch->mu);
    if (ch->count == ch->cap && !push_refused(ch)) {
        uint64_t t0 = tpc__now_us();
        while (ch->count == ch->cap && !push_refused(ch)) {
            struct timespec ts;
            tpc__deadline(&ts, 100000);
            pthread_cond_timedwait(&ch->not_full, &ch->mu, &ts);
        }
        if (blocked_us)
            *blocked_us += tpc__now_us() - t0;
    }
    if (push_refused(ch)) {
        pthread_mutex_unlock(&ch->mu);
        tpc__batch_destroy(item.batch);
        return TPC_ERR_CANCELED;
    }
    ch->ring[(ch->head + ch->count) % ch->cap] = item;
    ch->count++;
    pthread_mutex_unlock(&ch->mu);
    tpc__task_wake(ch->consumer);
    return TPC_OK;
}

bool tpc__channel_try_take(tpc__channel_t *ch, tpc__item_t *out)
{
    pthread_mutex_lock(&ch->mu);
    if (ch->count == 0) {
        pthread_mutex_unlock(&ch->mu);
        return false;
    }
    *out = ch->ring[ch->head];
    ch->head = (ch->head + 1) % ch->cap;
    ch->count--;
    bool drained = ch->count == 0 && ch->producer_waits_drain;
    pthread_cond_signal(&ch->not_full);
    pthread_mutex_unlock(&ch->mu);
    if (drained)
        tpc__task_wake(ch->producer);
    return true;
}

tpc_batch_t *tpc__channel_spare(tpc__channel_t *ch, size_t batch_cap)
{
    tpc_batch_t *b = NULL;
    pthread_mutex_lock(&ch->mu);
    if (ch->nspare)
        b = ch->spare[--ch->nspare];
    pthread_mutex_unlock(&ch->mu);
    if (!b)
        b = tpc__batch_new(batch_cap);
    tpc__batch_reset(b);
    return b;
}

void tpc__channel_recycle(tpc__channel_t *ch, tpc_batch_t *b)
{
    pthread_mutex_lock(&ch->mu);
    if (ch->nspare < ch->spare_cap) {
        ch->spare[ch->nspare++] = b;
        b = NULL;
    }
    pthread_mutex_unlock(&ch->mu);
    tpc__batch_destroy(b);
}

bool tpc__channel_is_empty(tpc__channel_t *ch)
{
    pthread_mutex_lock(&ch->mu);
    bool empty = ch->count == 0;
    pthread_mutex_unlock(&ch->mu);
    return empty;
}

void tpc__channel_wake_all(tpc__channel_t *ch)
{
    pthread_mutex_lock(&ch->mu);
    pthread_cond_broadcast(&ch->not_full);
    pthread_mutex_unlock(&ch->mu);
}
