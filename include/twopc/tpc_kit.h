/*
 * The kit: the one home of the library's plumbing, written once and used by every layer (the
 * runtime, the two-phase-commit framework, the connectors and the tools) and by a new connector
 * (docs/writing-a-connector.md). Configuration is in tpc_props.h; this header holds clocks and
 * condition-variable deadlines, a sleep that a cancel cuts short, a retry loop with exponential
 * backoff, byte codecs with growable buffers, growable arrays and a hash table. The kit depends on
 * libc and pthreads only (its code is in kit/, below the runtime). Every function here is safe on
 * any thread; the data structures have one owner each and no lock of their own.
 *
 * Out of memory: the kit never aborts. A growing call that cannot allocate returns false (or a
 * negative code) and leaves what was there intact; buffers also keep a sticky flag, so that a codec
 * can write a whole message and check once. The runtime treats out of memory as fatal (it aborts
 * with a message), the framework and the connectors return TPC_ERR_NOMEM (docs/architecture.md).
 */
#ifndef TPC_KIT_H
#define TPC_KIT_H

#include "tpc_props.h"
#include "tpc_runtime.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @returns milliseconds of a monotonic clock: for deadlines and durations, never for names. */
TPC_API int64_t tpc_clock_ms(void);
/** @returns milliseconds since the epoch (wall clock): for timestamps and names. */
TPC_API int64_t tpc_wall_ms(void);
/** @returns microseconds of the same monotonic clock as tpc_clock_ms(). */
TPC_API int64_t tpc_clock_us(void);

/** @brief Initialise @p cond to measure timed waits on the monotonic clock (tpc_deadline()).
 * @returns 0 or the pthread error. */
TPC_API int tpc_cond_init(pthread_cond_t *cond);
/** @brief The absolute time @p us microseconds from now on the monotonic clock, for
 * pthread_cond_timedwait() on a condition made by tpc_cond_init(). Negative @p us counts as 0. */
TPC_API struct timespec tpc_deadline_us(int64_t us);
/** @brief pthread_cond_timedwait() until @p us microseconds from now on a condition made by
 * tpc_cond_init(). @returns 0 when signalled (or woken spuriously), ETIMEDOUT after the time. */
TPC_API int tpc_cond_wait_us(pthread_cond_t *cond, pthread_mutex_t *mu, int64_t us);

/** A cancel test: true when the caller should stop waiting. */
typedef bool (*tpc_canceled_fn)(void *arg);

/**
 * @brief Sleep @p ms milliseconds, waking every 20 ms at most to ask @p canceled (NULL: never
 * canceled) so that a cancel never waits behind a long pause.
 * @returns true after the whole pause, false when cut short by a cancel.
 */
TPC_API bool tpc_sleep_ms(int64_t ms, tpc_canceled_fn canceled, void *arg);

/**
 * Exponential backoff towards a deadline. Typical use:
 *
 *     tpc_backoff_t b;
 *     tpc_backoff_init(&b, tpc_clock_ms() + deadline_ms, 50, 2000);
 *     for (;;) {
 *         err = try_once();
 *         if (!err || !tpc_error_is_retriable(err) || !tpc_backoff_wait(&b, canceled, arg))
 *             break;
 *         tpc_error_destroy(err);
 *     }
 */
typedef struct {
    int64_t start_ms;    /**< tpc_clock_ms() at init */
    int64_t deadline_ms; /**< tpc_clock_ms() time after which no pause is taken */
    int64_t next_ms;     /**< the next pause */
    int64_t max_ms;      /**< the longest pause */
    int retries;         /**< pauses taken so far */
    bool canceled;       /**< the last wait was cut short by a cancel */
} tpc_backoff_t;

/** @brief Start a backoff: first pause @p first_ms, doubling up to @p max_ms, no pause that would
 * end after @p deadline_ms (a tpc_clock_ms() time). */
TPC_API void tpc_backoff_init(tpc_backoff_t *b, int64_t deadline_ms, int64_t first_ms,
                              int64_t max_ms);
/**
 * @brief Pause before the next attempt. @returns true after the pause; false, without sleeping,
 * when the pause would pass the deadline, or when a cancel cut it short (then b->canceled is set).
 */
TPC_API bool tpc_backoff_wait(tpc_backoff_t *b, tpc_canceled_fn canceled, void *arg);
/** @returns the pause tpc_backoff_wait() would take next, in milliseconds (for log lines). */
TPC_API int64_t tpc_backoff_next_ms(const tpc_backoff_t *b);
/** @returns milliseconds since tpc_backoff_init(). */
TPC_API int64_t tpc_backoff_elapsed_ms(const tpc_backoff_t *b);

/* ---- bytes: codecs and growable buffers ---------------------------------------------------- */

/* Fixed-width integers in and out of byte arrays, the one place that spells out byte order:
 * big-endian (network order: the Kafka protocol, PostgreSQL's binary COPY, the connectors'
 * handles) in @p n bytes (1 to 8, the low bytes of @p v), and little-endian (the checkpoint
 * files). No alignment is assumed. */
static inline void tpc_store_be(unsigned char *p, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--, v >>= 8)
        p[i] = (unsigned char)v;
}
static inline uint64_t tpc_load_be(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}
static inline void tpc_store_le(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++, v >>= 8)
        p[i] = (unsigned char)v;
}
static inline uint64_t tpc_load_le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* ---- growable arrays ------------------------------------------------------------------------ */

/**
 * @brief Make room in a growable array for @p need elements of @p size bytes. The caller keeps the
 * count; the kit keeps the capacity, which at least doubles each time it grows (8 at first), so
 * appending n elements one by one costs O(n). Typical use:
 *
 *     if (!tpc_array_grow(&a->items, &a->cap, a->n + 1, sizeof *a->items))
 *         return tpc_error_nomem();
 *     a->items[a->n++] = item;
 *
 * @param items the address of the array's pointer (a T ** for an array of T; the pointer is NULL
 *     while @p cap is 0).
 * @param cap the array's capacity in elements, raised when it grows.
 * @returns true when the array has room for @p need elements (at once when it had already); false
 *     when @p need elements of @p size bytes overflow a size_t or memory runs out, and then the
 *     array and @p cap are as they were.
 */
TPC_API bool tpc_array_grow(void *items, size_t *cap, size_t need, size_t size);
/** @brief The capacity tpc_array_grow() grows @p cap to for @p need elements of @p size bytes,
 * for a buffer that must move by hand (pointers into it fixed up, or the old bytes wiped);
 * 0 when that overflows a size_t. */
TPC_API size_t tpc_array_next_cap(size_t cap, size_t need, size_t size);

/* ---- hash table ----------------------------------------------------------------------------- */

/**
 * A chained hash table of nodes the caller allocates: an entry embeds a tpc_hash_node_t as its
 * first member and sets its hash (from any function of its key) before inserting it, so that an
 * entry is one allocation with its key, its value and its link. The table never copies, compares
 * or frees an entry; lookups take the caller's equality test. Buckets are a power of two, filled to
 * three quarters at most; growing doubles them. Iteration goes bucket by bucket and down each
 * chain, so two tables given the same inserts, replacements and removals list their nodes in the
 * same order. Typical use:
 *
 *     if (!tpc_hash_reserve(&t, 1))
 *         return tpc_error_nomem();
 *     tpc_hash_node_t **link = tpc_hash_find(&t, h, same_key, &key);
 *     if (!*link) {
 *         e->node.hash = h;
 *         tpc_hash_insert(&t, link, &e->node);
 *     }
 *
 * A zeroed tpc_hash_t is an empty table; tpc_hash_free() frees its buckets (never its nodes).
 */
typedef struct tpc_hash_node {
    struct tpc_hash_node *next; /**< the next node of the same bucket (the table's to set) */
    uint64_t hash;              /**< the node's hash (the caller's to set, before inserting) */
} tpc_hash_node_t;

typedef struct {
    tpc_hash_node_t **buckets; /**< nbuckets chains; NULL until the first tpc_hash_reserve() */
    size_t nbuckets;           /**< 0 or a power of two */
    size_t count;              /**< nodes in the table */
} tpc_hash_t;

/** Whether @p node holds @p key (the caller's key, in the caller's form). */
typedef bool (*tpc_hash_eq_fn)(const tpc_hash_node_t *node, const void *key);

/** Where a walk over a table is (tpc_hash_first(), tpc_hash_next()). */
typedef struct {
    const tpc_hash_t *table;
    size_t bucket;         /**< the next bucket to enter */
    tpc_hash_node_t *next; /**< the next node to return */
} tpc_hash_iter_t;

/**
 * @brief Make room for @p extra more nodes: the buckets double (16 at first) until count + @p extra
 * fills three quarters of them at most, and every node moves to its new bucket.
 * @returns true; false when memory runs out, and then the table is as it was.
 */
TPC_API bool tpc_hash_reserve(tpc_hash_t *t, size_t extra);

/**
 * @brief Look up the node of hash @p hash for which @p eq(node, @p key) is true. Inline, so that
 * the caller's test is inlined into the walk down the chain.
 * @returns the link that points to that node (*link is the node); when there is none, the empty
 *     link at the end of its bucket's chain (*link is NULL), where tpc_hash_insert() puts a new
 *     node; NULL when the table has no buckets yet (before tpc_hash_reserve()).
 */
static inline tpc_hash_node_t **tpc_hash_find(const tpc_hash_t *t, uint64_t hash, tpc_hash_eq_fn eq,
                                              const void *key)
{
    if (!t->nbuckets)
        return NULL;
    tpc_hash_node_t **link = &t->buckets[hash & (t->nbuckets - 1)];
    for (; *link; link = &(*link)->next)
        if ((*link)->hash == hash && eq(*link, key))
            return link;
    return link;
}

/** @brief Insert @p node (its hash set) at @p link, the empty link tpc_hash_find() returned for
 * its hash, or the head of its bucket. The caller made room first (tpc_hash_reserve()). */
TPC_API void tpc_hash_insert(tpc_hash_t *t, tpc_hash_node_t **link, tpc_hash_node_t *node);
/** @brief Put @p node (of the same hash) in the place of the node at @p link, which leaves the
 * table (the caller's to free); the order of the chain stays as it was. */
TPC_API void tpc_hash_replace(tpc_hash_node_t **link, tpc_hash_node_t *node);
/** @brief Take the node at @p link out of the table. @returns that node (the caller's to free). */
TPC_API tpc_hash_node_t *tpc_hash_remove(tpc_hash_t *t, tpc_hash_node_t **link);

/**
 * @brief Start a walk over @p t. @returns its first node, or NULL when it is empty. The walk must
 * not insert or remove (but tpc_hash_next() never reads a node it already returned, so a walk that
 * empties a table may free each node as it goes, then tpc_hash_free() the table).
 */
TPC_API tpc_hash_node_t *tpc_hash_first(const tpc_hash_t *t, tpc_hash_iter_t *it);
/** @returns the walk's next node, or NULL at the end. */
TPC_API tpc_hash_node_t *tpc_hash_next(tpc_hash_iter_t *it);

/** @brief Free the buckets of @p t (not its nodes) and leave it empty. */
TPC_API void tpc_hash_free(tpc_hash_t *t);

/* ---- open-addressing table ------------------------------------------------------------------ */

/**
 * An open-addressing table of slots, each a hash and a pointer to the caller's item, with linear
 * probing: for millions of keys looked up at random, where a chained table's walk from bucket to
 * node costs a cache miss per step. A probe compares hashes in the slots and calls the caller's
 * equality test only when they agree; growing moves slots, never items; a removal moves the later
 * slots of its run back (no tombstones). A slot's place comes from its hash alone, so items of
 * equal hash sit side by side, and tpc_slots_prefetch() can fetch a slot before it is probed.
 * Slots are a power of two, filled to five eighths at most. Typical use:
 *
 *     if (!tpc_slots_reserve(&t, 1))
 *         return tpc_error_nomem();
 *     tpc_slot_t *s = tpc_slots_find(&t, h, same_key, &key);
 *     if (!s->item)
 *         tpc_slots_insert(&t, s, h, e);
 *
 * Items taken from another table's walk come in the order of their slots: reserve room for all of
 * them before inserting them, since inserting them so into a table that grows on the way piles
 * them into one run of slots that every later insertion probes to its end.
 *
 * Walk a table as `for (i = 0; i < t.nslots; i++) if (t.slots[i].item) ...`, without inserting or
 * removing meanwhile. A zeroed tpc_slots_t is an empty table; tpc_slots_free() frees its slots
 * (never the items).
 */
typedef struct {
    uint64_t hash; /**< the item's hash */
    void *item;    /**< NULL: an empty slot */
} tpc_slot_t;

typedef struct {
    tpc_slot_t *slots; /**< nslots slots; NULL until the first tpc_slots_reserve() */
    size_t nslots;     /**< 0 or a power of two */
    size_t count;      /**< items in the table */
    int shift;         /**< 64 - log2(nslots): a hash's place is the top bits of it, mixed */
} tpc_slots_t;

/** Whether @p item holds @p key (the caller's key, in the caller's form). */
typedef bool (*tpc_slots_eq_fn)(const void *item, const void *key);

/**
 * @brief Make room for @p extra more items: the slots double (64 at first) until count + @p extra
 * fills five eighths of them at most.
 * @returns true; false when memory runs out, and then the table is as it was.
 */
TPC_API bool tpc_slots_reserve(tpc_slots_t *t, size_t extra);

/** @returns the slot where a probe for @p hash starts (the table has slots). */
static inline size_t tpc_slots_home(const tpc_slots_t *t, uint64_t hash)
{
    hash ^= hash >> 32; /* the low half counts too, also when the high half is all alike */
    return (size_t)((hash * 0x9e3779b97f4a7c15ull) >> t->shift);
}

/** @brief Ask the processor to fetch the first slot of @p hash's probe (the table has slots). */
static inline void tpc_slots_prefetch(const tpc_slots_t *t, uint64_t hash)
{
    __builtin_prefetch(&t->slots[tpc_slots_home(t, hash)]);
}

/**
 * @brief Look up the item of hash @p hash for which @p eq(item, @p key) is true. Inline, so that
 * the caller's test is inlined into the probe.
 * @returns the slot of that item; when there is none, the empty slot where tpc_slots_insert() puts
 *     it; NULL when the table has no slots yet (before tpc_slots_reserve()).
 */
static inline tpc_slot_t *tpc_slots_find(const tpc_slots_t *t, uint64_t hash, tpc_slots_eq_fn eq,
                                         const void *key)
{
    if (!t->nslots)
        return NULL;
    for (size_t i = tpc_slots_home(t, hash);; i = (i + 1) & (t->nslots - 1)) {
        tpc_slot_t *s = &t->slots[i];
        if (!s->item || (s->hash == hash && eq(s->item, key)))
            return s;
    }
}

/** @returns the first item of hash @p hash on its probe, whatever its key, or NULL: an item to
 * prefetch before the lookup (the table has slots). */
static inline void *tpc_slots_peek(const tpc_slots_t *t, uint64_t hash)
{
    for (size_t i = tpc_slots_home(t, hash);; i = (i + 1) & (t->nslots - 1)) {
        const tpc_slot_t *s = &t->slots[i];
        if (!s->item || s->hash == hash)
            return s->item;
    }
}

/** @brief Put @p item of hash @p hash into @p slot, the empty slot tpc_slots_find() returned for
 * that hash. The caller made room first (tpc_slots_reserve()). */
TPC_API void tpc_slots_insert(tpc_slots_t *t, tpc_slot_t *slot, uint64_t hash, void *item);
/** @brief Take the item at @p slot out of the table (the caller's to free). Later slots may move:
 * a slot pointer from before is stale. */
TPC_API void tpc_slots_remove(tpc_slots_t *t, tpc_slot_t *slot);
/** @brief Free the slots of @p t (not its items) and leave it empty. */
TPC_API void tpc_slots_free(tpc_slots_t *t);

#ifdef __cplusplus
}
#endif

#endif
