/*
 * Processing-time timers per key. An operator behind a hash edge registers a time (milliseconds
 * of the wall clock, tpc_processing_time_ms()) for a key of its groups; once that time has come,
 * the subtask's thread calls the operator's on_timer() for it, between two units of work, like any
 * other callback. A (key, time) pair is one timer however often it is registered.
 *
 * Timers are keyed state: each is checkpointed as a keyed entry with its key group (keyed.c), so a
 * restore at any parallelism hands it to the subtask that owns its key now. A timer leaves the
 * table before its callback runs, so a checkpoint taken after it fired no longer holds it and it
 * never fires twice from one state; one that fired after the restored checkpoint fires again,
 * with the rest of that checkpoint's state. Wall-clock time keeps going while a job is down: a
 * timer that came due meanwhile fires right after the restore.
 *
 * A hash table (key, time) -> timer for registering and deleting (the kit's, tpc_kit.h), and a
 * binary heap by time whose slots the timers know, so a delete is O(log n).
 */
#include "runtime_task.h"
#include "tpc_kit.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Timers fired per call of tpc__timers_fire(): mail and input still get their turn in between. */
#define FIRE_MAX 256

typedef struct {
    tpc_hash_node_t node; /* first: the table's links and the timer's hash */
    int64_t at;
    int group;
    size_t heap; /* index in heap */
    size_t key_len;
    uint8_t key[];
} ptimer_t;

struct tpc__timers {
    tpc_hash_t table;
    ptimer_t **heap; /* count timers, heap_cap slots */
    size_t count, heap_cap;
};

int64_t tpc_processing_time_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t timer_hash(uint64_t key_hash, int64_t at)
{
    return key_hash ^ ((uint64_t)at * 0xff51afd7ed558ccdull);
}

/* What find() looks for: a key and a time. */
typedef struct {
    int64_t at;
    const void *key;
    size_t len;
} probe_t;

static bool same_timer(const tpc_hash_node_t *n, const void *arg)
{
    const ptimer_t *p = (const ptimer_t *)n;
    const probe_t *q = arg;
    return p->at == q->at && p->key_len == q->len &&
           (q->len == 0 || memcmp(p->key, q->key, q->len) == 0);
}

/* The link to timer (key, at), or the empty link where it would go; NULL before the first timer. */
static tpc_hash_node_t **find(tpc__timers_t *tm, uint64_t h, int64_t at, const void *key,
                              size_t len)
{
    probe_t q = {at, key, len};
    return tpc_hash_find(&tm->table, h, same_timer, &q);
}

/* ---- the heap ------------------------------------------------------------------------------- */

static void heap_set(tpc__timers_t *tm, size_t i, ptimer_t *p)
{
    tm->heap[i] = p;
    p->heap = i;
}

static void sift_up(tpc__timers_t *tm, size_t i)
{
    ptimer_t *p = tm->heap[i];
    while (i > 0 && tm->heap[(i - 1) / 2]->at > p->at) {
        heap_set(tm, i, tm->heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    heap_set(tm, i, p);
}

static void sift_down(tpc__timers_t *tm, size_t i)
{
    ptimer_t *p = tm->heap[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= tm->count)
            break;
        if (c + 1 < tm->count && tm->heap[c + 1]->at < tm->heap[c]->at)
            c++;
        if (tm->heap[c]->at >= p->at)
            break;
        heap_set(tm, i, tm->heap[c]);
        i = c;
    }
    heap_set(tm, i, p);
}

/* Take the timer at @p slot out of the table and the heap (the caller frees it). */
static void remove_timer(tpc__timers_t *tm, tpc_hash_node_t **slot)
{
    const ptimer_t *p = (const ptimer_t *)tpc_hash_remove(&tm->table, slot);
    size_t i = p->heap;
    tm->count--;
    if (i == tm->count)
        return;
    ptimer_t *last = tm->heap[tm->count];
    heap_set(tm, i, last);
    sift_down(tm, i);
    if (last->heap == i)
        sift_up(tm, i);
}

/* ---- the runtime's side --------------------------------------------------------------------- */

void tpc__timers_add(tpc__task_t *t, int group, uint64_t key_hash, const void *key, size_t key_len,
                     int64_t at_ms)
{
    if (!t->timers)
        t->timers = tpc__xcalloc(1, sizeof *t->timers);
    tpc__timers_t *tm = t->timers;
    if (!tpc_hash_reserve(&tm->table, 1))
        tpc__out_of_memory(2 * tm->table.nbuckets * sizeof *tm->table.buckets);
    uint64_t h = timer_hash(key_hash, at_ms);
    tpc_hash_node_t **slot = find(tm, h, at_ms, key, key_len);
    if (*slot)
        return; /* registered already */
    tpc__xgrow(&tm->heap, &tm->heap_cap, tm->count + 1, sizeof *tm->heap);
    ptimer_t *p = tpc__xmalloc(sizeof *p + key_len);
    *p = (ptimer_t){.node.hash = h, .at = at_ms, .group = group, .key_len = key_len};
    if (key_len)
        memcpy(p->key, key, key_len);
    tpc_hash_insert(&tm->table, slot, &p->node);
    heap_set(tm, tm->count++, p);
    sift_up(tm, p->heap);
}

void tpc__timers_free(tpc__timers_t *tm)
{
    if (!tm)
        return;
    for (size_t i = 0; i < tm->count; i++)
        free(tm->heap[i]);
    free(tm->heap);
    tpc_hash_free(&tm->table);
    free(tm);
}

int64_t tpc__timers_next(const tpc__timers_t *tm)
{
    return tm && tm->count ? tm->heap[0]->at : INT64_MAX;
}

void tpc__timers_snapshot(const tpc__timers_t *tm, tpc_state_writer_t *w)
{
    if (!tm || !tm->count)
        return;
    tpc__buf_t one = {0}, at = {0};
    for (size_t i = 0; i < tm->count; i++) {
        const ptimer_t *p = tm->heap[i];
        at.len = 0;
        tpc__buf_put_u64(&at, (uint64_t)p->at);
        tpc__keyed_entry_write(w, &one, p->group, TPC__KEYED_TIMER, "", p->key, p->key_len, NULL, 0,
                               at.data, at.len);
    }
    tpc__buf_free(&one);
    tpc__buf_free(&at);
}

tpc_error_t *tpc__timers_fire(tpc__task_t *t)
{
    tpc__timers_t *tm = t->timers;
    if (!tm || !tm->count)
        return NULL;
    int64_t now = tpc_processing_time_ms();
    for (int n = 0; n < FIRE_MAX && tm->count && tm->heap[0]->at <= now; n++) {
        ptimer_t *p = tm->heap[0];
        remove_timer(tm, find(tm, p->node.hash, p->at, p->key, p->key_len));
        tpc_error_t *err = t->ops->on_timer(t->self, &t->ctx, p->key, p->key_len, p->at);
        free(p);
        if (err)
            return tpc_error_prefix(err, "timer failed");
    }
    return NULL;
}

/* ---- the operator's API --------------------------------------------------------------------- */

static tpc_error_t *check(tpc_ctx_t *ctx, const void *key, size_t key_len, int *group, uint64_t *kh)
{
    tpc_error_t *err = tpc__keyed_check(ctx, "timer", "timer", key, key_len, group, kh);
    if (err)
        return err;
    const tpc__task_t *t = ctx->task;
    if (t->ops->version < 2 || !t->ops->on_timer)
        return tpc_error_hint(
            tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                          "timer in vertex \"%s\", whose operator has no on_timer callback",
                          t->attempt->job->vertices[t->vertex].name),
            "fill on_timer in the ops table (TPC_OPERATOR_OPS_VERSION 2 or later)");
    return NULL;
}

tpc_error_t *tpc_timer_register(tpc_ctx_t *ctx, const void *key, size_t key_len, int64_t at_ms)
{
    int group;
    uint64_t kh;
    tpc_error_t *err = check(ctx, key, key_len, &group, &kh);
    if (err)
        return err;
    if (key_len > UINT32_MAX / 4)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL, "timer key too large");
    tpc__timers_add(ctx->task, group, kh, key, key_len, at_ms);
    return NULL;
}

tpc_error_t *tpc_timer_delete(tpc_ctx_t *ctx, const void *key, size_t key_len, int64_t at_ms)
{
    int group;
    uint64_t kh;
    tpc_error_t *err = check(ctx, key, key_len, &group, &kh);
    tpc__timers_t *tm = ctx ? ctx->task->timers : NULL;
    if (err || !tm || !tm->count)
        return err;
    tpc_hash_node_t **slot = find(tm, timer_hash(kh, at_ms), at_ms, key, key_len);
    if (*slot) {
        ptimer_t *p = (ptimer_t *)*slot;
        remove_timer(tm, slot);
        free(p);
    }
    return NULL;
}
