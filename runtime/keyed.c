/*
 * Key groups and keyed state. A job has a fixed number of key groups, its max-parallelism (stored
 * in every checkpoint, never changed for a job's state). A key's group is the FNV-1a hash of its
 * bytes modulo the number of groups; a vertex at parallelism P gives subtask s the contiguous range
 * of groups g with g * P / max-parallelism == s. A hash edge sends a record to the subtask that
 * owns its key's group, so an operator behind it sees every record of the keys of its groups, and
 * only those, at any parallelism.
 *
 * Keyed state is a per-subtask table from (state name, key) to either value bytes (value state) or
 * a small table of its own from map key to value bytes (map state), read and written on the
 * subtask's thread. Only a vertex whose every input is a hash edge may use it: anywhere else the
 * records of one key would meet several subtasks. At a checkpoint it is written next to the
 * operator's own state, one entry per value and per map entry, each with its key group; a restore
 * at any parallelism up to max-parallelism hands each subtask the entries of its groups
 * (restore.c). Processing-time timers (timers.c) travel in the same entries.
 *
 * The subtask's table is the kit's open-addressing table (tpc_slots_t): a slot holds the key's hash
 * (the one routing uses) and its entry, so the states of one key sit side by side and a probe reads
 * an entry only when the hashes agree; growth moves slots, never entries. A map's own table is the
 * kit's chained one (tpc_hash_t), whose nodes are the entries. Entries up to POOL_MAX bytes come
 * from slabs with a free list per size: a new key costs no malloc, and dropping the state frees
 * slabs, not entries. Before process() gets a batch, tpc__keyed_batch_begin hashes its records'
 * keys once for every keyed call on them and, in a large table, prefetches their slots and then
 * their entries, so that the cache misses of a batch overlap instead of following each other.
 *
 * Snapshots (keyed_snapshot.c) are copy-on-write: until the snapshot writer is done, an entry it
 * may still read is never changed in place (update() and release() here keep that rule).
 */
#include "keyed_internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

uint64_t tpc__key_hash(const void *key, size_t len)
{
    const uint8_t *p = key;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

int tpc_key_group(const void *key, size_t len, int max_parallelism)
{
    if (max_parallelism < 1 || (len && !key))
        return -1;
    return tpc__key_group_of(tpc__key_hash(key, len), max_parallelism);
}

int tpc_key_group_subtask(int group, int max_parallelism, int parallelism)
{
    if (max_parallelism < 1 || parallelism < 1 || parallelism > max_parallelism || group < 0 ||
        group >= max_parallelism)
        return -1;
    return tpc__group_owner(group, max_parallelism, parallelism);
}

/* ---- a table of byte keys and values -------------------------------------------------------- */

/* Whether changes are tracked: a snapshot may build on the present state. */
static bool tracking(const tpc__keyed_t *k)
{
    return k->max_chain && (k->nlinks || k->ntaken);
}

/* Note that @p target (a value's entry, or @p item of the map in @p e) changed. */
static void mark(tpc__keyed_t *k, entry_t *e, entry_t *item)
{
    entry_t *target = item ? item : e;
    if (!tracking(k) || target->dirty)
        return;
    if (k->ndirty == k->dirty_cap)
        tpc__xgrow(&k->dirty, &k->dirty_cap, k->ndirty + 1, sizeof *k->dirty);
    k->dirty[k->ndirty++] = (frozen_ref_t){e, item};
    target->dirty = (uint32_t)k->ndirty;
}

/* Whether @p e may be read by the snapshot writer: then it must not change or be freed. */
static bool is_frozen(const tpc__keyed_t *k, const entry_t *e)
{
    return k->frozen && e->epoch != k->epoch;
}

/* ---- entries' memory ------------------------------------------------------------------------ */

static size_t entry_size(size_t key_len, size_t value_cap)
{
    return sizeof(entry_t) + key_len + value_cap;
}

static entry_t *entry_alloc(pool_t *p, size_t size)
{
    if (size > POOL_MAX) {
        p->nbig++;
        return tpc__xmalloc(size);
    }
    size_t c = (size - 1) / POOL_STEP;
    void *e = p->free[c];
    if (e) {
        memcpy(&p->free[c], e, sizeof(void *));
        return e;
    }
    size = (c + 1) * POOL_STEP;
    if ((size_t)(p->end - p->cur) < size) {
        slab_t *s = tpc__xmalloc(SLAB_BYTES);
        s->next = p->slabs;
        p->slabs = s;
        p->cur = (uint8_t *)s->align;
        p->end = (uint8_t *)s + SLAB_BYTES;
    }
    e = p->cur;
    p->cur += size;
    return e;
}

/* Free @p e, which has its key and value capacity still. */
void tpc__keyed_entry_free(pool_t *p, entry_t *e)
{
    size_t size = entry_size(e->key_len, e->value_cap);
    if (size > POOL_MAX) {
        p->nbig--;
        free(e);
        return;
    }
    size_t c = (size - 1) / POOL_STEP;
    memcpy(e, &p->free[c], sizeof(void *));
    p->free[c] = e;
}

/* The slabs, with every entry in them (entries of more than POOL_MAX bytes are freed apart). */
static void pool_free(pool_t *p)
{
    for (slab_t *s = p->slabs, *nx; s; s = nx) {
        nx = s->next;
        free(s);
    }
    *p = (pool_t){0};
}

/* Free @p e, or keep it for the snapshot writer until tpc__keyed_thaw. */
void tpc__keyed_release(tpc__keyed_t *k, entry_t *e)
{
    if (e->dirty) {
        k->dirty[e->dirty - 1] = (frozen_ref_t){NULL, NULL};
        e->dirty = 0;
    }
    if (!is_frozen(k, e)) {
        tpc__keyed_entry_free(&k->pool, e);
        return;
    }
    if (k->nretired == k->retired_cap)
        tpc__xgrow(&k->retired, &k->retired_cap, k->nretired + 1, sizeof *k->retired);
    k->retired[k->nretired++] = e;
}

/* What a lookup looks for: a state's index and a key. */
typedef struct {
    int name;
    const void *key;
    size_t len;
} probe_t;

static bool matches(const entry_t *e, int name, const void *key, size_t len)
{
    return e->name == name && e->key_len == len && (len == 0 || memcmp(e->key, key, len) == 0);
}

static bool same_key(const tpc_hash_node_t *n, const void *arg)
{
    const probe_t *p = arg;
    return matches((const entry_t *)n, p->name, p->key, p->len);
}

/* The link to @p key in map table @p t, or the empty link where it would go; NULL while @p t is
 * empty and has never been written. */
tpc_hash_node_t **tpc__keyed_map_find(tpc_hash_t *t, uint64_t h, const void *key, size_t len)
{
    probe_t p = {0, key, len};
    return tpc_hash_find(t, h, same_key, &p);
}

static bool same_entry(const void *item, const void *arg)
{
    const probe_t *p = arg;
    return matches(item, p->name, p->key, p->len);
}

/* The slot of (name, key) in @p t, or the empty slot where it would go; NULL while @p t has no
 * slots. */
tpc_slot_t *tpc__keyed_find(const tpc_slots_t *t, int name, uint64_t h, const void *key, size_t len)
{
    probe_t p = {name, key, len};
    return tpc_slots_find(t, h, same_entry, &p);
}

/* The entry of (name, key) set to @p value: @p e (NULL when new) in place when the value fits and
 * the snapshot writer cannot be reading it, else a new entry that the caller puts in the place of
 * @p e (then replaced()). */
static entry_t *update(tpc__keyed_t *k, entry_t *e, int name, int group, uint64_t h,
                       const void *key, size_t klen, const void *value, size_t vlen)
{
    if (e && vlen <= e->value_cap && !is_frozen(k, e)) { /* the common case: in place */
        if (vlen)
            memmove(VALUE(e), value, vlen);
        e->value_len = (uint32_t)vlen;
        e->epoch = k->epoch;
        return e;
    }
    size_t cap = vlen < 16 ? 16 : vlen;
    if (e && cap < e->value_cap)
        cap = e->value_cap;
    entry_t *n = entry_alloc(&k->pool, entry_size(klen, cap));
    if (e)
        *n = *e;
    else
        *n = (entry_t){.node.hash = h, .name = name, .group = group, .key_len = (uint32_t)klen};
    n->epoch = k->epoch;
    if (klen)
        memcpy(n->key, key, klen);
    n->value_cap = (uint32_t)cap;
    n->value_len = (uint32_t)vlen;
    if (vlen)
        memcpy(VALUE(n), value, vlen);
    return n;
}

/* @p n took the place of @p e in its table: the list of changes points to @p n, @p e goes. */
static void replaced(tpc__keyed_t *k, entry_t *e, entry_t *n)
{
    if (n->dirty) {
        frozen_ref_t *r = &k->dirty[n->dirty - 1];
        if (r->item == e)
            r->item = n;
        else
            r->e = n;
        e->dirty = 0;
    }
    tpc__keyed_release(k, e);
}

/* Tables of fewer slots stay in the cache: no prefetching. */
#define PREFETCH_MIN_SLOTS (1u << 15)
/* Keys hashed and prefetched at a time. */
#define PREFETCH_RUN 64

/* Hash the keys of @p b, and for a large table prefetch the slots, then the entries, of those
 * keys: the misses of each step overlap each other. */
static void batch_hash(tpc__keyed_t *k, const tpc_batch_t *b)
{
    const tpc_slots_t *t = &k->t;
    bool prefetch = t->nslots >= PREFETCH_MIN_SLOTS;
    for (size_t first = 0; first < b->count; first += PREFETCH_RUN) {
        size_t n = b->count - first < PREFETCH_RUN ? b->count - first : PREFETCH_RUN;
        uint64_t *h = k->batch_hash + first;
        for (size_t i = 0; i < n; i++) {
            const tpc__rec_t *r = &b->recs[first + i];
            h[i] = tpc__key_hash(b->bytes + r->key_off, r->key_len);
            k->batch_group[first + i] = -1;
            if (prefetch)
                tpc_slots_prefetch(t, h[i]);
        }
        for (size_t i = 0; i < n && prefetch; i++) {
            const uint8_t *e = tpc_slots_peek(t, h[i]);
            if (e) {
                __builtin_prefetch(e, 1);
                __builtin_prefetch(e + 63, 1); /* an entry may cross a cache line */
            }
        }
    }
}

void tpc__keyed_batch_begin(tpc__task_t *t, const tpc_batch_t *b)
{
    if (!t->keyed_allowed || !b->count)
        return;
    tpc__keyed_t *k = tpc__keyed_of(t);
    if (b->count > k->batch_cap) {
        k->batch_cap = b->count;
        k->batch_hash = tpc__xrealloc(k->batch_hash, b->count * sizeof *k->batch_hash);
        k->batch_group = tpc__xrealloc(k->batch_group, b->count * sizeof *k->batch_group);
    }
    batch_hash(k, b);
    k->batch = b;
    k->batch_at = 0;
    k->memo_slot = NULL;
}

void tpc__keyed_batch_end(tpc__task_t *t)
{
    if (t->keyed) {
        t->keyed->batch = NULL;
        t->keyed->memo_slot = NULL;
    }
}

/* The index in the batch of the record whose key bytes are @p key, or -1. Only pointers into the
 * batch count: its bytes do not change while process() has it, so the same pointer and length
 * are the same key. The operator mostly goes record by record: look where it was, then next. */
static ptrdiff_t batch_record(tpc__keyed_t *k, const void *key, size_t len)
{
    const tpc_batch_t *b = k ? k->batch : NULL;
    if (!b)
        return -1;
    for (size_t i = k->batch_at; i < b->count && i < k->batch_at + 2; i++) {
        const tpc__rec_t *r = &b->recs[i];
        if (b->bytes + r->key_off == (const uint8_t *)key && r->key_len == len) {
            k->batch_at = i;
            return (ptrdiff_t)i;
        }
    }
    return -1;
}

/* Note that a get of batch record @p key found slot @p s of (name, key). */
static void memo_note(tpc__keyed_t *k, tpc_slot_t *s, int name, const void *key, size_t len)
{
    ptrdiff_t i = s ? batch_record(k, key, len) : -1;
    k->memo_slot = i >= 0 ? s : NULL;
    k->memo_record = (size_t)i;
    k->memo_name = name;
    k->memo_edits = k->edits;
}

/* The slot of (name, key) that the last get of this record of the batch found, if no slot has
 * moved since; else NULL. */
static tpc_slot_t *memo_take(tpc__keyed_t *k, int name, const void *key, size_t len)
{
    tpc_slot_t *s = k->memo_slot;
    k->memo_slot = NULL;
    if (!s || k->memo_edits != k->edits || k->memo_name != name)
        return NULL;
    ptrdiff_t i = batch_record(k, key, len);
    return i >= 0 && (size_t)i == k->memo_record ? s : NULL;
}

/* tpc__keyed_set, with the slot of (name, key) when the caller knows it (@p at, else NULL). */
static entry_t *set_at(tpc__keyed_t *k, tpc_slot_t *at, int name, int group, uint64_t h,
                       const void *key, size_t klen, const void *value, size_t vlen)
{
    size_t nslots = k->t.nslots;
    if (!tpc_slots_reserve(&k->t, 1))
        tpc__out_of_memory(2 * k->t.nslots * sizeof *k->t.slots);
    if (k->t.nslots != nslots) {
        k->edits++;
        at = NULL;
    }
    tpc_slot_t *s = at ? at : tpc__keyed_find(&k->t, name, h, key, klen);
    entry_t *e = s->item;
    entry_t *n = update(k, e, name, group, h, key, klen, value, vlen);
    if (!e) {
        tpc_slots_insert(&k->t, s, h, n);
        k->edits++;
    } else if (n != e) {
        s->item = n;
        replaced(k, e, n);
    }
    return n;
}

entry_t *tpc__keyed_set(tpc__keyed_t *k, int name, int group, uint64_t h, const void *key,
                        size_t klen, const void *value, size_t vlen)
{
    return set_at(k, NULL, name, group, h, key, klen, value, vlen);
}

/* Set map key @p key to @p value in map table @p t; returns the map's entry. */
static entry_t *map_item_put(tpc__keyed_t *k, tpc_hash_t *t, int group, uint64_t h, const void *key,
                             size_t klen, const void *value, size_t vlen)
{
    if (!tpc_hash_reserve(t, 1))
        tpc__out_of_memory(2 * t->nbuckets * sizeof *t->buckets);
    tpc_hash_node_t **link = tpc__keyed_map_find(t, h, key, klen);
    entry_t *e = at(link);
    entry_t *n = update(k, e, 0, group, h, key, klen, value, vlen);
    if (!e) {
        tpc_hash_insert(t, link, &n->node); /* at the end of its chain */
    } else if (n != e) {
        tpc_hash_replace(link, &n->node);
        replaced(k, e, n);
    }
    return n;
}

/* Empty map table @p m and free it, keeping frozen entries. */
static void map_clear(tpc__keyed_t *k, tpc_hash_t *m)
{
    tpc_hash_iter_t it;
    for (tpc_hash_node_t *n = tpc_hash_first(m, &it); n; n = tpc_hash_next(&it))
        tpc__keyed_release(k, entry_of(n));
    tpc_hash_free(m);
    free(m);
}

/* Remove the entry at @p s (with its map, for a map state). */
void tpc__keyed_remove(tpc__keyed_t *k, tpc_slot_t *s)
{
    entry_t *e = s->item;
    if (k->names[e->name].kind == KIND_MAP)
        map_clear(k, map_of(e));
    tpc_slots_remove(&k->t, s);
    k->edits++;
    tpc__keyed_release(k, e);
}

int tpc__keyed_name(tpc__keyed_t *k, const char *name, int kind, bool add)
{
    for (int i = 0; i < k->nnames; i++)
        if (strcmp(k->names[i].name, name) == 0)
            return i;
    if (!add)
        return -1;
    k->names = tpc__xrealloc(k->names, (size_t)(k->nnames + 1) * sizeof *k->names);
    k->names[k->nnames] = (name_t){tpc__xstrdup(name), kind};
    return k->nnames++;
}

void tpc__keyed_free(tpc__keyed_t *k)
{
    if (!k)
        return;
    k->frozen = false; /* the writer is done (tpc__keyed_thaw comes first) */
    bool maps = false;
    for (int i = 0; i < k->nnames; i++)
        maps = maps || k->names[i].kind == KIND_MAP;
    /* Entries in slabs go with them; maps' tables and entries malloc() gave go one by one. */
    for (size_t i = 0; i < k->t.nslots && (maps || k->pool.nbig); i++) {
        entry_t *e = k->t.slots[i].item;
        if (!e)
            continue;
        if (k->names[e->name].kind == KIND_MAP)
            map_clear(k, map_of(e));
        tpc__keyed_release(k, e);
    }
    tpc_slots_free(&k->t);
    for (size_t i = 0; i < k->nretired; i++)
        tpc__keyed_entry_free(&k->pool, k->retired[i]);
    free(k->retired);
    pool_free(&k->pool);
    free(k->batch_hash);
    free(k->batch_group);
    for (int i = 0; i < k->nnames; i++)
        free(k->names[i].name);
    free(k->names);
    free(k->links);
    free(k->dirty);
    tpc__buf_free(&k->deletes);
    for (size_t i = 0; i < k->ntaken; i++)
        free(k->taken[i].links);
    free(k->taken);
    free(k);
}

/* ---- the rule: keyed state behind hash edges, for the keys of the subtask's groups ----------- */

static tpc_error_t *check_inputs(const tpc__task_t *t, const char *what)
{
    const tpc_job_t *job = t->attempt->job;
    const char *vertex = job->vertices[t->vertex].name;
    int inputs = 0;
    for (int e = 0; e < job->nedges; e++) {
        if (job->edges[e].to != t->vertex)
            continue;
        inputs++;
        if (job->edges[e].kind != TPC_EDGE_HASH)
            return tpc_error_hint(
                tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL,
                              "%s in vertex \"%s\": its input from \"%s\" is not a hash edge", what,
                              vertex, job->vertices[job->edges[e].from].name),
                "keyed state and timers are for operators whose every input is a hash edge "
                "(TPC_EDGE_HASH): connect \"%s\" to \"%s\" with one, or keep the state in list "
                "state",
                job->vertices[job->edges[e].from].name, vertex);
    }
    if (!inputs)
        return tpc_error_hint(tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL,
                                            "%s in vertex \"%s\", which has no input", what,
                                            vertex),
                              "keyed state and timers are for operators behind a hash edge "
                              "(TPC_EDGE_HASH); a source keeps its state in list state");
    return NULL;
}

tpc_error_t *tpc__keyed_check(tpc_ctx_t *ctx, const char *what, const char *state, const void *key,
                              size_t len, int *group, uint64_t *key_hash)
{
    if (!ctx || !state || !*state || (len && !key))
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "%s needs a context, a name and a key", what);
    tpc__task_t *t = ctx->task;
    if (!t->keyed_allowed) {
        tpc_error_t *err = check_inputs(t, what);
        if (err)
            return err;
        t->keyed_allowed = true;
    }
    ptrdiff_t i = batch_record(t->keyed, key, len);
    if (i >= 0 && t->keyed->batch_group[i] >= 0) { /* checked already */
        *key_hash = t->keyed->batch_hash[i];
        *group = t->keyed->batch_group[i];
        return NULL;
    }
    const tpc_job_t *job = t->attempt->job;
    int maxp = job->conf.max_parallelism;
    *key_hash = i >= 0 ? t->keyed->batch_hash[i] : tpc__key_hash(key, len);
    *group = tpc__key_group_of(*key_hash, maxp);
    int owner = tpc__group_owner(*group, maxp, job->vertices[t->vertex].parallelism);
    if (owner != t->subtask)
        return tpc_error_hint(
            tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL,
                          "%s \"%s\" of \"%s\"[%d]: the key is in key group %d, which subtask %d "
                          "owns",
                          what, state, job->vertices[t->vertex].name, t->subtask, *group, owner),
            "use keyed state and timers only for the key of the record being processed (or of "
            "the timer that fired), behind a hash edge (TPC_EDGE_HASH)");
    if (i >= 0)
        t->keyed->batch_group[i] = *group;
    return NULL;
}

tpc__keyed_t *tpc__keyed_of(tpc__task_t *t)
{
    if (!t->keyed) {
        t->keyed = tpc__xcalloc(1, sizeof *t->keyed);
        const tpc__conf_t *conf = &t->attempt->job->conf;
        t->keyed->max_chain = conf->incremental ? conf->max_chain : 0;
    }
    return t->keyed;
}

/* The index of state @p state, which must be of @p kind; -1 when it has no entries yet (and
 * @p add is false). */
static tpc_error_t *state_index(tpc__task_t *t, const char *state, int kind, bool add, int *index)
{
    tpc__keyed_t *k = add ? tpc__keyed_of(t) : t->keyed;
    *index = k ? tpc__keyed_name(k, state, kind, add) : -1;
    if (*index >= 0 && k->names[*index].kind != kind)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "keyed state \"%s\" is a %s state, not a %s state", state,
                             kind == KIND_MAP ? "value" : "map",
                             kind == KIND_MAP ? "map" : "value");
    return NULL;
}

/* The entry of (@state, @key) in the subtask's table (NULL when absent), for the key of the
 * subtask's groups. */
static tpc_error_t *lookup(tpc_ctx_t *ctx, const char *state, int kind, const void *key,
                           size_t key_len, entry_t **entry)
{
    *entry = NULL;
    int group, name;
    uint64_t kh;
    tpc_error_t *err = tpc__keyed_check(ctx, "keyed state", state, key, key_len, &group, &kh);
    if (!err)
        err = state_index(ctx->task, state, kind, false, &name);
    if (!err && name >= 0) {
        tpc__keyed_t *k = ctx->task->keyed;
        tpc_slot_t *s = tpc__keyed_find(&k->t, name, kh, key, key_len);
        *entry = s ? s->item : NULL;
        if (kind == KIND_VALUE)
            memo_note(k, s, name, key, key_len);
    }
    return err;
}

/* Log the delete of (@p name, @p key) or of its map entry @p map_key, for the next incremental
 * snapshot. */
static void log_delete(tpc__keyed_t *k, int group, int kind, int name, const void *key,
                       size_t key_len, const void *map_key, size_t map_key_len)
{
    tpc__buf_t one = {0};
    tpc__keyed_entry_encode(&one, group, kind, k->names[name].name, key, key_len, map_key,
                            map_key_len, NULL, 0);
    tpc__buf_put_bytes(&k->deletes, one.data, one.len);
    k->ndeletes++;
    tpc__buf_free(&one);
}

static tpc_error_t *check_sizes(size_t key_len, const void *value, size_t value_len)
{
    if (value_len && !value)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL, "keyed value without bytes");
    if (key_len > UINT32_MAX / 4 || value_len > UINT32_MAX / 4)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL, "keyed entry too large");
    return NULL;
}

/* ---- value state ---------------------------------------------------------------------------- */

tpc_error_t *tpc_keyed_get(tpc_ctx_t *ctx, const char *state, const void *key, size_t key_len,
                           const void **value, size_t *value_len)
{
    *value = NULL;
    *value_len = 0;
    entry_t *e;
    tpc_error_t *err = lookup(ctx, state, KIND_VALUE, key, key_len, &e);
    if (err)
        return err;
    if (e) {
        *value = VALUE(e);
        *value_len = e->value_len;
    }
    return NULL;
}

tpc_error_t *tpc_keyed_put(tpc_ctx_t *ctx, const char *state, const void *key, size_t key_len,
                           const void *value, size_t value_len)
{
    int group, name;
    uint64_t kh;
    tpc_error_t *err = tpc__keyed_check(ctx, "keyed state", state, key, key_len, &group, &kh);
    if (!err)
        err = check_sizes(key_len, value, value_len);
    if (!err)
        err = state_index(ctx->task, state, KIND_VALUE, true, &name);
    if (err)
        return err;
    tpc__keyed_t *k = ctx->task->keyed;
    tpc_slot_t *at = memo_take(k, name, key, key_len);
    mark(k, set_at(k, at, name, group, kh, key, key_len, value, value_len), NULL);
    return NULL;
}

tpc_error_t *tpc_keyed_delete(tpc_ctx_t *ctx, const char *state, const void *key, size_t key_len)
{
    int group, name = -1;
    uint64_t kh;
    tpc_error_t *err = tpc__keyed_check(ctx, "keyed state", state, key, key_len, &group, &kh);
    tpc__keyed_t *k = ctx ? ctx->task->keyed : NULL;
    if (err || !k || (name = tpc__keyed_name(k, state, 0, false)) < 0)
        return err;
    tpc_slot_t *s = tpc__keyed_find(&k->t, name, kh, key, key_len);
    if (!s || !s->item)
        return NULL;
    if (tracking(k))
        log_delete(k, group, TPC__KEYED_DELETE, name, key, key_len, NULL, 0);
    tpc__keyed_remove(k, s);
    return NULL;
}

tpc_error_t *tpc_keyed_foreach(tpc_ctx_t *ctx, const char *state, tpc_keyed_visit_fn visit,
                               void *opaque)
{
    if (!ctx || !state || !visit)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "keyed iteration needs a context, a state name and a function");
    tpc__keyed_t *k = ctx->task->keyed;
    int name = k ? tpc__keyed_name(k, state, 0, false) : -1;
    if (name < 0)
        return NULL;
    bool map = k->names[name].kind == KIND_MAP;
    for (size_t i = 0; i < k->t.nslots; i++) {
        const entry_t *e = k->t.slots[i].item;
        if (e && e->name == name) {
            tpc_error_t *err =
                visit(opaque, e->key, e->key_len, map ? NULL : VALUE(e), map ? 0 : e->value_len);
            if (err)
                return err;
        }
    }
    return NULL;
}

/* ---- map state: per (state, key) a table of map key -> value -------------------------------- */

static tpc_error_t *map_lookup(tpc_ctx_t *ctx, const char *state, const void *key, size_t key_len,
                               const void *map_key, size_t map_key_len, tpc_hash_t **map,
                               tpc_hash_node_t ***item)
{
    *map = NULL;
    *item = NULL;
    if (map_key_len && !map_key)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL, "map key without bytes");
    entry_t *e;
    tpc_error_t *err = lookup(ctx, state, KIND_MAP, key, key_len, &e);
    if (!err && e) {
        *map = map_of(e);
        *item =
            tpc__keyed_map_find(*map, tpc__key_hash(map_key, map_key_len), map_key, map_key_len);
    }
    return err;
}

tpc_error_t *tpc_keyed_map_get(tpc_ctx_t *ctx, const char *state, const void *key, size_t key_len,
                               const void *map_key, size_t map_key_len, const void **value,
                               size_t *value_len)
{
    *value = NULL;
    *value_len = 0;
    tpc_hash_t *m;
    tpc_hash_node_t **it;
    tpc_error_t *err = map_lookup(ctx, state, key, key_len, map_key, map_key_len, &m, &it);
    const entry_t *e = err ? NULL : at(it);
    if (e) {
        *value = VALUE(e);
        *value_len = e->value_len;
    }
    return err;
}

/* The map of (name, key), created empty when absent. */
static entry_t *map_for(tpc__keyed_t *k, int name, int group, uint64_t kh, const void *key,
                        size_t key_len)
{
    tpc_slot_t *s = tpc__keyed_find(&k->t, name, kh, key, key_len);
    if (s && s->item)
        return s->item;
    tpc_hash_t *m = tpc__xcalloc(1, sizeof *m);
    return tpc__keyed_set(k, name, group, kh, key, key_len, &m, sizeof m);
}

void tpc__keyed_map_set(tpc__keyed_t *k, int name, int group, uint64_t kh, const void *key,
                        size_t key_len, const void *map_key, size_t map_key_len, const void *value,
                        size_t value_len)
{
    entry_t *e = map_for(k, name, group, kh, key, key_len);
    mark(k, e,
         map_item_put(k, map_of(e), group, tpc__key_hash(map_key, map_key_len), map_key,
                      map_key_len, value, value_len));
}

tpc_error_t *tpc_keyed_map_put(tpc_ctx_t *ctx, const char *state, const void *key, size_t key_len,
                               const void *map_key, size_t map_key_len, const void *value,
                               size_t value_len)
{
    int group, name;
    uint64_t kh;
    tpc_error_t *err = tpc__keyed_check(ctx, "keyed state", state, key, key_len, &group, &kh);
    if (!err && map_key_len && !map_key)
        err = tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL, "map key without bytes");
    if (!err)
        err = check_sizes(key_len > map_key_len ? key_len : map_key_len, value, value_len);
    if (!err)
        err = state_index(ctx->task, state, KIND_MAP, true, &name);
    if (err)
        return err;
    tpc__keyed_map_set(ctx->task->keyed, name, group, kh, key, key_len, map_key, map_key_len, value,
                       value_len);
    return NULL;
}

tpc_error_t *tpc_keyed_map_delete(tpc_ctx_t *ctx, const char *state, const void *key,
                                  size_t key_len, const void *map_key, size_t map_key_len)
{
    tpc_hash_t *m;
    tpc_hash_node_t **it;
    tpc_error_t *err = map_lookup(ctx, state, key, key_len, map_key, map_key_len, &m, &it);
    if (err || !at(it))
        return err;
    tpc__keyed_t *k = ctx->task->keyed;
    if (tracking(k))
        log_delete(k, at(it)->group, TPC__KEYED_MAP_DELETE, tpc__keyed_name(k, state, 0, false),
                   key, key_len, map_key, map_key_len);
    tpc__keyed_release(k, entry_of(tpc_hash_remove(m, it)));
    if (m->count == 0) /* an empty map is no state: the key reads as it did before its first put */
        return tpc_keyed_delete(ctx, state, key, key_len);
    return NULL;
}

tpc_error_t *tpc_keyed_map_foreach(tpc_ctx_t *ctx, const char *state, const void *key,
                                   size_t key_len, tpc_keyed_visit_fn visit, void *opaque)
{
    if (!visit)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "map iteration needs a function");
    entry_t *e;
    tpc_error_t *err = lookup(ctx, state, KIND_MAP, key, key_len, &e);
    if (err || !e)
        return err;
    tpc_hash_iter_t i;
    for (tpc_hash_node_t *n = tpc_hash_first(map_of(e), &i); n; n = tpc_hash_next(&i)) {
        const entry_t *it = entry_of(n);
        if ((err = visit(opaque, it->key, it->key_len, VALUE(it), it->value_len)))
            return err;
    }
    return NULL;
}
