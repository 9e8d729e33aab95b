/*
 * Key groups and keyed state. A job has a fixed number of key groups, its max-parallelism (stored
 * in every checkpoint, never changed for a job's state). A key's group is the FNV-1a hash of its
 * bytes modulo the number of groups; a vertex at parallelism P gives subtask s the contiguous range
 * of groups g with g * P / max-parallelism == s. A hash edge sends a record to the subtask that
 * owns its key's group, so an operator behind it sees every record of the keys of its groups, and
 * only those, at any parallelism.
 *
 * Keyed state is a per-subtask table from (state name, key) to value bytes, read and written on the
 * subtask's thread. At a checkpoint it is written next to the operator's own state, one entry per
 * (name, key) with its key group; a restore at any parallelism up to max-parallelism hands each
 * subtask the entries of its groups (restore.c). The snapshot copies the table's entries: its cost
 * grows with the state (docs/architecture.md).
 */
#include "runtime_task.h"

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

/* ---- the table ---------------------------------------------------------------------------- */

typedef struct entry {
    struct entry *next;
    uint64_t hash;
    int name; /* index in names */
    int group;
    size_t key_len, value_len, value_cap;
    uint8_t *value; /* inside the entry, after the key: one allocation per entry */
    uint8_t key[];
} entry_t;

struct tpc__keyed {
    char **names;
    int nnames;
    entry_t **buckets;
    size_t nbuckets, count;
};

static int name_index(tpc__keyed_t *k, const char *name, bool add)
{
    for (int i = 0; i < k->nnames; i++)
        if (strcmp(k->names[i], name) == 0)
            return i;
    if (!add)
        return -1;
    k->names = tpc__xrealloc(k->names, (size_t)(k->nnames + 1) * sizeof *k->names);
    k->names[k->nnames] = tpc__xstrdup(name);
    return k->nnames++;
}

/* The table's hash of (state, key), from the key's hash that routing computed already. */
static uint64_t entry_hash(int name, uint64_t key_hash)
{
    return key_hash ^ ((uint64_t)(name + 1) * 0x9e3779b97f4a7c15ull);
}

static entry_t **find(tpc__keyed_t *k, int name, uint64_t h, const void *key, size_t len)
{
    if (!k->nbuckets)
        return NULL;
    entry_t **e = &k->buckets[h & (k->nbuckets - 1)];
    for (; *e; e = &(*e)->next)
        if ((*e)->hash == h && (*e)->name == name && (*e)->key_len == len &&
            (len == 0 || memcmp((*e)->key, key, len) == 0))
            return e;
    return e;
}

static void grow(tpc__keyed_t *k)
{
    size_t n = k->nbuckets ? k->nbuckets * 2 : 1024;
    entry_t **b = tpc__xcalloc(n, sizeof *b);
    for (size_t i = 0; i < k->nbuckets; i++)
        for (entry_t *e = k->buckets[i], *nx; e; e = nx) {
            nx = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
        }
    free(k->buckets);
    k->buckets = b;
    k->nbuckets = n;
}

void tpc__keyed_free(tpc__keyed_t *k)
{
    if (!k)
        return;
    for (size_t i = 0; i < k->nbuckets; i++)
        for (entry_t *e = k->buckets[i], *nx; e; e = nx) {
            nx = e->next;
            free(e);
        }
    for (int i = 0; i < k->nnames; i++)
        free(k->names[i]);
    free(k->names);
    free(k->buckets);
    free(k);
}

static void put(tpc__keyed_t *k, int name, int group, uint64_t key_hash, const void *key,
                size_t klen, const void *value, size_t vlen)
{
    if (k->count + 1 > k->nbuckets * 3 / 4)
        grow(k);
    uint64_t h = entry_hash(name, key_hash);
    entry_t **slot = find(k, name, h, key, klen);
    entry_t *e = *slot;
    if (e && vlen <= e->value_cap) { /* the common case: the value fits where the old one was */
        if (vlen)
            memmove(e->value, value, vlen);
        e->value_len = vlen;
        return;
    }
    size_t cap = vlen < 16 ? 16 : vlen;
    entry_t *n = tpc__xmalloc(sizeof *n + klen + cap);
    if (e) {
        *n = *e;
    } else {
        *n = (entry_t){.hash = h, .name = name, .group = group, .key_len = klen};
        k->count++;
    }
    if (klen)
        memcpy(n->key, key, klen);
    n->value = n->key + klen;
    n->value_cap = cap;
    n->value_len = vlen;
    if (vlen)
        memcpy(n->value, value, vlen);
    *slot = n; /* the link that held the old entry, or the end of its chain */
    free(e);
}

/* ---- the operator's API --------------------------------------------------------------------- */

static tpc_error_t *check_key(tpc_ctx_t *ctx, const char *state, const void *key, size_t len,
                              int *group, uint64_t *key_hash)
{
    if (!ctx || !state || !*state || (len && !key))
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "keyed state needs a context, a state name and a key");
    const tpc__task_t *t = ctx->task;
    const tpc_job_t *job = t->attempt->job;
    int maxp = job->conf.max_parallelism;
    *key_hash = tpc__key_hash(key, len);
    *group = tpc__key_group_of(*key_hash, maxp);
    int owner = tpc__group_owner(*group, maxp, job->vertices[t->vertex].parallelism);
    if (owner != t->subtask)
        return tpc_error_hint(
            tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL,
                          "keyed state \"%s\" of \"%s\"[%d]: the key is in key group %d, which "
                          "subtask %d owns",
                          state, job->vertices[t->vertex].name, t->subtask, *group, owner),
            "use keyed state only for the key of the record being processed, behind a hash edge "
            "(TPC_EDGE_HASH)");
    return NULL;
}

/* The slot of (@state, @key) in the subtask's table, or NULL when the state has no entries; the
 * key must be the subtask's. */
static tpc_error_t *lookup(tpc_ctx_t *ctx, const char *state, const void *key, size_t key_len,
                           entry_t ***slot)
{
    *slot = NULL;
    int group;
    uint64_t kh;
    tpc_error_t *err = check_key(ctx, state, key, key_len, &group, &kh);
    if (err)
        return err;
    tpc__keyed_t *k = ctx->task->keyed;
    int name = k ? name_index(k, state, false) : -1;
    if (name >= 0)
        *slot = find(k, name, entry_hash(name, kh), key, key_len);
    return NULL;
}

tpc_error_t *tpc_keyed_get(tpc_ctx_t *ctx, const char *state, const void *key, size_t key_len,
                           const void **value, size_t *value_len)
{
    *value = NULL;
    *value_len = 0;
    entry_t **e;
    tpc_error_t *err = lookup(ctx, state, key, key_len, &e);
    if (err)
        return err;
    if (e && *e) {
        *value = (*e)->value;
        *value_len = (*e)->value_len;
    }
    return NULL;
}

tpc_error_t *tpc_keyed_put(tpc_ctx_t *ctx, const char *state, const void *key, size_t key_len,
                           const void *value, size_t value_len)
{
    int group;
    uint64_t kh;
    tpc_error_t *err = check_key(ctx, state, key, key_len, &group, &kh);
    if (err)
        return err;
    if (value_len && !value)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL, "keyed value without bytes");
    if (key_len > UINT32_MAX / 4 || value_len > UINT32_MAX / 4)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL, "keyed entry too large");
    tpc__task_t *t = ctx->task;
    if (!t->keyed)
        t->keyed = tpc__xcalloc(1, sizeof *t->keyed);
    put(t->keyed, name_index(t->keyed, state, true), group, kh, key, key_len, value, value_len);
    return NULL;
}

tpc_error_t *tpc_keyed_delete(tpc_ctx_t *ctx, const char *state, const void *key, size_t key_len)
{
    entry_t **slot;
    tpc_error_t *err = lookup(ctx, state, key, key_len, &slot);
    if (err)
        return err;
    if (slot && *slot) {
        entry_t *e = *slot;
        *slot = e->next;
        free(e);
        ctx->task->keyed->count--;
    }
    return NULL;
}

tpc_error_t *tpc_keyed_foreach(tpc_ctx_t *ctx, const char *state, tpc_keyed_visit_fn visit,
                               void *opaque)
{
    if (!ctx || !state || !visit)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "keyed iteration needs a context, a state name and a function");
    tpc__keyed_t *k = ctx->task->keyed;
    int name = k ? name_index(k, state, false) : -1;
    if (name < 0)
        return NULL;
    for (size_t i = 0; i < k->nbuckets; i++)
        for (entry_t *e = k->buckets[i]; e; e = e->next)
            if (e->name == name) {
                tpc_error_t *err = visit(opaque, e->key, e->key_len, e->value, e->value_len);
                if (err)
                    return err;
            }
    return NULL;
}

/* ---- checkpoints ---------------------------------------------------------------------------- */

/* One keyed entry in a checkpoint: u32 key group, then name, key and value as `bytes`. */
void tpc__keyed_snapshot(const tpc__keyed_t *k, tpc_state_writer_t *w)
{
    if (!k)
        return;
    tpc__buf_t one = {0};
    for (size_t i = 0; i < k->nbuckets; i++)
        for (const entry_t *e = k->buckets[i]; e; e = e->next) {
            one.len = 0;
            tpc__buf_put_u32(&one, (uint32_t)e->group);
            const char *name = k->names[e->name];
            tpc__buf_put_bytes(&one, name, strlen(name));
            tpc__buf_put_bytes(&one, e->key, e->key_len);
            tpc__buf_put_bytes(&one, e->value, e->value_len);
            tpc__buf_put_bytes(&w->keyed, one.data, one.len);
            w->nkeyed++;
        }
    tpc__buf_free(&one);
}

bool tpc__keyed_parse(const uint8_t *p, size_t len, tpc__keyed_entry_t *e)
{
    tpc__rd_t r = {p, len, 0, false};
    uint32_t group = tpc__rd_u32(&r);
    e->name = tpc__rd_bytes(&r, &e->name_len);
    e->key = tpc__rd_bytes(&r, &e->key_len);
    e->value = tpc__rd_bytes(&r, &e->value_len);
    e->group = (int)(group & 0x7fffffff);
    return !r.bad && r.off == r.len && group <= INT32_MAX && e->name_len > 0 &&
           !memchr(e->name, 0, e->name_len);
}

tpc_error_t *tpc__keyed_load(tpc__task_t *t, const tpc__slice_t *entries, size_t n)
{
    if (!n)
        return NULL;
    if (!t->keyed)
        t->keyed = tpc__xcalloc(1, sizeof *t->keyed);
    for (size_t i = 0; i < n; i++) {
        tpc__keyed_entry_t e;
        if (!tpc__keyed_parse(entries[i].p, entries[i].len, &e))
            return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL,
                                 "malformed keyed state entry %zu of %zu bytes", i, entries[i].len);
        char *s = tpc__xmalloc(e.name_len + 1);
        memcpy(s, e.name, e.name_len);
        s[e.name_len] = 0;
        int idx = name_index(t->keyed, s, true);
        free(s);
        put(t->keyed, idx, e.group, tpc__key_hash(e.key, e.key_len), e.key, e.key_len, e.value,
            e.value_len);
    }
    return NULL;
}
