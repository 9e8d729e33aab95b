/*
 * Bounded channels between two subtasks. The producer blocks while the ring is full: that is the
 * backpressure that keeps memory bounded whatever the record count. Events (barriers, end of data,
 * end of partition) share the ring with batches, so they never overtake records. The consumer is
 * woken through its task's wake-up (task.c); the producer can wait for the ring to drain, which a
 * finished task does before it closes so that no record is left in flight.
 *
 * The ring is also bounded in time (channel.capacity.ms): with a slow consumer, a ring full of
 * batches is seconds of work, and a checkpoint barrier queued behind it waits that long. The
 * consumer's pace is measured while it has a backlog (the time between two takes, over the
 * records of the batch taken first); a batch waits while the records queued would take longer
 * than the limit at that pace. Events are never held back by it, and one batch always fits. Until
 * the pace is known, two batches: a job that starts with a slow consumer would otherwise fill the
 * whole ring before the first measurement, and its first checkpoint would wait behind it.
 */
#include "runtime_internal.h"
#include "runtime_task.h"

#include <stdlib.h>

/* Takes that leave the ring empty before a consumer whose pace is not known counts as keeping up:
 * a slow one empties it once at its start, before the producer got ahead. */
#define KEPT_UP_TAKES 4

tpc__channel_t *tpc__channel_new(size_t cap, uint64_t limit_us, const atomic_bool *canceled)
{
    tpc__channel_t *ch = tpc__xcalloc(1, sizeof(*ch));
    pthread_mutex_init(&ch->mu, NULL);
    tpc_cond_init(&ch->not_full);
    ch->cap = cap;
    ch->limit_us = limit_us;
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

/* The ring holds as much of the consumer's time as it may. */
static bool full_in_time(const tpc__channel_t *ch, const tpc__item_t *item)
{
    if (item->kind != TPC__ITEM_BATCH || !ch->limit_us || ch->count == 0)
        return false;
    if (ch->ns_per_record <= 0) /* at the start: two batches until the pace is known */
        return ch->empty_takes < KEPT_UP_TAKES && ch->count >= 2;
    return (double)ch->records * ch->ns_per_record > (double)ch->limit_us * 1000.0;
}

static bool is_full(const tpc__channel_t *ch, const tpc__item_t *item)
{
    return ch->count == ch->cap || full_in_time(ch, item);
}

tpc_err_t tpc__channel_push(tpc__channel_t *ch, tpc__item_t item, uint64_t *blocked_us)
{
    pthread_mutex_lock(&ch->mu);
    if (is_full(ch, &item) && !push_refused(ch)) {
        uint64_t t0 = tpc__now_us();
        while (is_full(ch, &item) && !push_refused(ch)) {
            struct timespec ts;
            ts = tpc_deadline_us(100000);
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
    if (item.batch)
        ch->records += item.batch->count;
    pthread_mutex_unlock(&ch->mu);
    tpc__task_wake(ch->consumer);
    return TPC_OK;
}

/* Called with the lock held as the consumer takes a batch of @records. When the consumer had
 * more waiting at its previous take, the time since then went into the previous batch: a pace
 * sample, averaged with the earlier ones (weight 1/4). A take that leaves the ring empty starts
 * no sample (the time until the next one is partly waiting for records), and a consumer that
 * empties it often enough keeps up: the ring is not held to two batches while its pace is not
 * known. */
static void measure_pace(tpc__channel_t *ch, uint64_t records)
{
    uint64_t now = tpc__now_us();
    if (ch->last_take_us && ch->last_take_records) {
        double sample = (double)(now - ch->last_take_us) * 1000.0 / (double)ch->last_take_records;
        ch->ns_per_record =
            ch->ns_per_record > 0 ? 0.75 * ch->ns_per_record + 0.25 * sample : sample;
    }
    bool backlog = ch->records > 0;
    if (!backlog && ch->empty_takes < KEPT_UP_TAKES)
        ch->empty_takes++;
    ch->last_take_us = backlog ? now : 0;
    ch->last_take_records = backlog ? records : 0;
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
    if (out->batch) {
        ch->records -= out->batch->count;
        if (ch->limit_us)
            measure_pace(ch, out->batch->count);
    }
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
