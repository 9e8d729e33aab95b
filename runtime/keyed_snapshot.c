/*
 * Snapshots of keyed state: the entries of a subtask written into a checkpoint, the chain of
 * incremental snapshots, and the entries of a restore loaded back into the table (keyed.c).
 *
 * Snapshots are copy-on-write: at the barrier the subtask only lists the entries
 * (tpc__keyed_freeze, a walk over pointers), and another thread writes them out
 * (tpc__keyed_write_frozen) while records go on. Until that thread is done, an entry it may still
 * read is never changed in place: a put gives the key a new entry and a delete unlinks the old one,
 * and both keep it, retired, until tpc__keyed_thaw frees it. The writer reads only an entry's key,
 * value, group and state name, which the subtask never changes while the entry is frozen; the
 * subtask still relinks frozen entries' `next` in a map's chains (docs/keyed-state.md).
 *
 * Incremental snapshots (state.incremental): the subtask lists each entry changed since the last
 * completed snapshot of its chain (entry->dirty is its place in that list) and logs deletes as
 * entries; the barrier hands that list to the writer instead of walking the whole table, with the
 * chain's checkpoint ids as the snapshot's links (restore.c reads the chain back). Every
 * max_chain-th snapshot is full again.
 */
#include "keyed_internal.h"

#include <stdlib.h>
#include <string.h>

/* One keyed entry in a checkpoint: u32 key group | kind << 24, then as `bytes` the state's name,
 * the key, for a map entry its map key, and the value (a timer: its time, u64). */
void tpc__keyed_entry_encode(tpc__buf_t *one, int group, int kind, const char *name,
                             const void *key, size_t key_len, const void *map_key,
                             size_t map_key_len, const void *value, size_t value_len)
{
    one->len = 0;
    tpc__buf_put_u32(one, (uint32_t)group | (uint32_t)kind << 24);
    tpc__buf_put_bytes(one, name, strlen(name));
    tpc__buf_put_bytes(one, key, key_len);
    if (kind == TPC__KEYED_MAP || kind == TPC__KEYED_MAP_DELETE)
        tpc__buf_put_bytes(one, map_key, map_key_len);
    tpc__buf_put_bytes(one, value, value_len);
}

void tpc__keyed_entry_write(tpc_state_writer_t *w, tpc__buf_t *one, int group, int kind,
                            const char *name, const void *key, size_t key_len, const void *map_key,
                            size_t map_key_len, const void *value, size_t value_len)
{
    tpc__keyed_entry_encode(one, group, kind, name, key, key_len, map_key, map_key_len, value,
                            value_len);
    tpc__buf_put_bytes(&w->keyed, one->data, one->len);
    w->nkeyed++;
}

static void add_ref(tpc__frozen_t *f, size_t *cap, const entry_t *e, const entry_t *item)
{
    if (f->n == *cap)
        tpc__xgrow(&f->refs, cap, f->n + 1, sizeof *f->refs);
    f->refs[f->n++] = (frozen_ref_t){e, item};
}

/* A u64 array of @p n with @p add appended when not 0 (free it). */
static uint64_t *links_copy(const uint64_t *links, uint32_t n, uint64_t add)
{
    uint64_t *c = tpc__xmalloc((n + 1) * sizeof *c);
    if (n)
        memcpy(c, links, n * sizeof *c);
    if (add)
        c[n] = add;
    return c;
}

tpc__frozen_t *tpc__keyed_freeze(tpc__keyed_t *k, uint64_t id)
{
    /* Incremental when a chain of completed snapshots is there to build on and not yet at its
     * longest; a full snapshot (which starts a new chain) otherwise. */
    bool incremental = k && k->max_chain && k->nlinks && k->nlinks < (uint32_t)k->max_chain;
    if (!k || (!incremental && !k->t.count))
        return NULL;
    tpc__frozen_t *f = tpc__xcalloc(1, sizeof *f);
    size_t cap = 0;
    if (incremental) {
        tpc__xgrow(&f->refs, &cap, k->ndirty ? k->ndirty : 1, sizeof *f->refs);
        for (size_t i = 0; i < k->ndirty; i++)
            if (k->dirty[i].e)
                f->refs[f->n++] = k->dirty[i];
        tpc__buf_put(&f->deletes, k->deletes.data, k->deletes.len);
        f->ndeletes = k->ndeletes;
        f->links = links_copy(k->links, k->nlinks, 0);
        f->nlinks = k->nlinks;
    } else {
        tpc__xgrow(&f->refs, &cap, k->t.count, sizeof *f->refs);
        /* Without map states, the barrier reads the slots alone: an entry is a cache miss, for
         * the writer to take. */
        bool maps = false;
        for (int i = 0; i < k->nnames; i++)
            maps = maps || k->names[i].kind == KIND_MAP;
        tpc_hash_iter_t inner;
        for (size_t i = 0; i < k->t.nslots; i++) {
            const entry_t *e = k->t.slots[i].item;
            if (!e)
                continue;
            if (!maps || k->names[e->name].kind == KIND_VALUE) {
                add_ref(f, &cap, e, NULL);
                continue;
            }
            for (tpc_hash_node_t *m = tpc_hash_first(map_of(e), &inner); m;
                 m = tpc_hash_next(&inner))
                add_ref(f, &cap, e, entry_of(m));
        }
    }
    f->nnames = k->nnames;
    f->names = tpc__xmalloc((size_t)k->nnames * sizeof *f->names + 1);
    for (int i = 0; i < k->nnames; i++)
        f->names[i] = tpc__xstrdup(k->names[i].name);
    /* From here on every entry written has the new epoch: all older ones are frozen. */
    k->epoch++;
    k->frozen = true;
    if (k->max_chain) { /* what the chain is once this one completes */
        if (k->ntaken == k->taken_cap)
            tpc__xgrow(&k->taken, &k->taken_cap, k->ntaken + 1, sizeof *k->taken);
        k->taken[k->ntaken++] = (taken_t){
            .id = id,
            .epoch = k->epoch,
            .deletes_len = k->deletes.len,
            .ndeletes = k->ndeletes,
            .links = incremental ? links_copy(k->links, k->nlinks, id) : links_copy(NULL, 0, id),
            .nlinks = incremental ? k->nlinks + 1 : 1,
        };
    }
    return f;
}

void tpc__keyed_write_frozen(const tpc__frozen_t *f, tpc_state_writer_t *w)
{
    /* Deletes first: a key deleted and written again since the last link is written after. */
    tpc__buf_put(&w->keyed, f->deletes.data, f->deletes.len);
    w->nkeyed += f->ndeletes;
    tpc__buf_t one = {0};
    for (size_t i = 0; i < f->n; i++) {
        const entry_t *e = f->refs[i].e, *it = f->refs[i].item;
        const char *name = f->names[e->name];
        if (!it)
            tpc__keyed_entry_write(w, &one, e->group, TPC__KEYED_VALUE, name, e->key, e->key_len,
                                   NULL, 0, VALUE(e), e->value_len);
        else
            tpc__keyed_entry_write(w, &one, e->group, TPC__KEYED_MAP, name, e->key, e->key_len,
                                   it->key, it->key_len, VALUE(it), it->value_len);
    }
    tpc__buf_free(&one);
    if (f->nlinks) {
        w->links = links_copy(f->links, f->nlinks, 0);
        w->nlinks = f->nlinks;
    }
}

void tpc__keyed_thaw(tpc__keyed_t *k, tpc__frozen_t *f)
{
    if (!f)
        return;
    k->frozen = false;
    for (size_t i = 0; i < k->nretired; i++)
        tpc__keyed_entry_free(&k->pool, k->retired[i]);
    k->nretired = 0;
    for (int i = 0; i < f->nnames; i++)
        free(f->names[i]);
    free(f->names);
    free(f->refs);
    tpc__buf_free(&f->deletes);
    free(f->links);
    free(f);
}

/* Older than @p epoch (wrapping): not changed since the snapshot that ended it. */
static bool before(uint32_t epoch, uint32_t than)
{
    return (int32_t)(epoch - than) < 0;
}

/* Drop the snapshots taken up to @p id (@p done: and keep the chain that @p id ends). */
static void settle(tpc__keyed_t *k, uint64_t id, bool done)
{
    size_t j = 0;
    for (size_t i = 0; i < k->ntaken; i++) {
        taken_t *tk = &k->taken[i];
        if (done && tk->id == id) {
            free(k->links);
            k->links = tk->links;
            k->nlinks = tk->nlinks;
            tk->links = NULL;
            /* What it covered is in the chain now: forget the deletes and changes before it. */
            size_t cut = tk->deletes_len;
            if (cut) /* none is nothing to move, and the buffer may not exist yet */
                memmove(k->deletes.data, k->deletes.data + cut, k->deletes.len - cut);
            k->deletes.len -= cut;
            k->ndeletes -= tk->ndeletes;
            for (size_t m = 0; m < k->ntaken; m++)
                if (k->taken[m].id > id) {
                    k->taken[m].deletes_len -= cut;
                    k->taken[m].ndeletes -= tk->ndeletes;
                }
            size_t d = 0;
            for (size_t m = 0; m < k->ndirty; m++) {
                frozen_ref_t r = k->dirty[m];
                entry_t *target = (entry_t *)(r.item ? r.item : r.e);
                if (!target)
                    continue;
                if (before(target->epoch, tk->epoch)) {
                    target->dirty = 0;
                    continue;
                }
                k->dirty[d++] = r;
                target->dirty = (uint32_t)d;
            }
            k->ndirty = d;
        }
        if (tk->id == id || (done && tk->id < id)) {
            free(tk->links);
            continue;
        }
        k->taken[j++] = *tk;
    }
    k->ntaken = j;
}

void tpc__keyed_completed(tpc__keyed_t *k, uint64_t id)
{
    if (k && k->max_chain)
        settle(k, id, true);
}

void tpc__keyed_aborted(tpc__keyed_t *k, uint64_t id)
{
    if (k && k->max_chain)
        settle(k, id, false);
}

bool tpc__keyed_parse(const uint8_t *p, size_t len, tpc__keyed_entry_t *e)
{
    tpc__rd_t r = {p, len, 0, false};
    uint32_t word = tpc__rd_u32(&r);
    *e = (tpc__keyed_entry_t){.group = (int)(word & 0xffffff), .kind = (int)(word >> 24)};
    e->name = tpc__rd_bytes(&r, &e->name_len);
    e->key = tpc__rd_bytes(&r, &e->key_len);
    if (e->kind == TPC__KEYED_MAP || e->kind == TPC__KEYED_MAP_DELETE)
        e->map_key = tpc__rd_bytes(&r, &e->map_key_len);
    e->value = tpc__rd_bytes(&r, &e->value_len);
    if (r.bad || r.off != r.len || e->kind > TPC__KEYED_MAP_DELETE)
        return false;
    if (e->kind >= TPC__KEYED_DELETE && e->value_len)
        return false;
    if (e->kind == TPC__KEYED_TIMER) { /* a timer has no name; its value is its time */
        tpc__rd_t v = {e->value, e->value_len, 0, false};
        e->at_ms = (int64_t)tpc__rd_u64(&v);
        return e->name_len == 0 && e->value_len == 8;
    }
    return e->name_len > 0 && !memchr(e->name, 0, e->name_len);
}

/* Apply a delete entry @p e of state @p name to @p k. */
static void load_delete(tpc__keyed_t *k, const tpc__keyed_entry_t *e, int name, uint64_t kh)
{
    tpc_slot_t *s = tpc__keyed_find(&k->t, name, kh, e->key, e->key_len);
    if (!s || !s->item)
        return;
    bool map = k->names[name].kind == KIND_MAP;
    if (map && e->kind == TPC__KEYED_MAP_DELETE) {
        tpc_hash_t *m = map_of(s->item);
        tpc_hash_node_t **it = tpc__keyed_map_find(m, tpc__key_hash(e->map_key, e->map_key_len),
                                                   e->map_key, e->map_key_len);
        if (at(it))
            tpc__keyed_release(k, entry_of(tpc_hash_remove(m, it)));
        if (m->count)
            return;
    } else if (e->kind == TPC__KEYED_MAP_DELETE) {
        return;
    }
    tpc__keyed_remove(k, s);
}

tpc_error_t *tpc__keyed_load(tpc__task_t *t, const tpc__slice_t *entries, size_t n)
{
    bool reserved = false;
    for (size_t i = 0; i < n; i++) {
        tpc__keyed_entry_t e;
        if (!tpc__keyed_parse(entries[i].p, entries[i].len, &e))
            return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL,
                                 "malformed keyed state entry %zu of %zu bytes", i, entries[i].len);
        uint64_t kh = tpc__key_hash(e.key, e.key_len);
        /* The group travels with the entry (restore hands entries out by it): it must be its
         * key's, or the entry would sit where no lookup of that key ever goes. */
        int maxp = t->attempt->job->conf.max_parallelism;
        if (e.group != tpc__key_group_of(kh, maxp))
            return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL,
                                 "keyed state entry %zu says key group %d, but its key belongs to "
                                 "group %d of %d",
                                 i, (int)e.group, tpc__key_group_of(kh, maxp), maxp);
        if (e.kind == TPC__KEYED_TIMER) {
            /* It would fire into an operator that cannot take it. */
            if (t->ops->version < 2 || !t->ops->on_timer)
                return tpc_error_hint(
                    tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                  "the restored checkpoint holds timers of vertex \"%s\", whose "
                                  "operator has no on_timer callback",
                                  t->attempt->job->vertices[t->vertex].name),
                    "fill on_timer in the ops table (TPC_OPERATOR_OPS_VERSION 2 or later), or "
                    "start the job over without state (restore.mode=fresh)");
            tpc__timers_add(t, e.group, kh, e.key, e.key_len, e.at_ms);
            continue;
        }
        tpc__keyed_t *k = tpc__keyed_of(t);
        /* The table takes its full size before the first key: a full snapshot lists its keys
         * in the order of their slots, and inserting them so into a table that grows on the way
         * piles them into one run of slots, which every later insertion probes to its end. */
        if (!reserved && !tpc_slots_reserve(&k->t, n - i))
            tpc__out_of_memory((n - i) * 2 * sizeof *k->t.slots);
        reserved = true;
        char *s = tpc__xmalloc(e.name_len + 1);
        memcpy(s, e.name, e.name_len);
        s[e.name_len] = 0;
        if (e.kind >= TPC__KEYED_DELETE) { /* from an incremental snapshot */
            int idx = tpc__keyed_name(k, s, 0, false);
            free(s);
            if (idx >= 0)
                load_delete(k, &e, idx, kh);
            continue;
        }
        int kind = e.kind == TPC__KEYED_MAP ? KIND_MAP : KIND_VALUE;
        int idx = tpc__keyed_name(k, s, kind, true);
        free(s);
        if (k->names[idx].kind != kind)
            return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL,
                                 "keyed state \"%s\" holds both value and map entries",
                                 k->names[idx].name);
        if (kind == KIND_VALUE)
            tpc__keyed_set(k, idx, e.group, kh, e.key, e.key_len, e.value, e.value_len);
        else
            tpc__keyed_map_set(k, idx, e.group, kh, e.key, e.key_len, e.map_key, e.map_key_len,
                               e.value, e.value_len);
    }
    return NULL;
}
