/*
 * What keyed.c (the table of keyed state) and keyed_snapshot.c (its snapshots, the chain of
 * incremental ones, and restore) share: the entries, the subtask's table and the functions of
 * each that the other calls.
 */
#ifndef TPC_KEYED_INTERNAL_H
#define TPC_KEYED_INTERNAL_H

#include "runtime_task.h"
#include "tpc_kit.h"

#include <string.h>

typedef struct {
    tpc_hash_node_t node; /* first: a map's links; the key's hash (the map key's in a map) */
    int name;             /* index in names; 0 in a map's own table */
    int group;
    uint32_t key_len, value_len, value_cap;
    uint32_t epoch; /* the table's epoch when written: older ones may be frozen */
    uint32_t dirty; /* 1 + its index in the table's dirty list; 0: not listed */
    uint8_t key[];  /* then the value: one allocation per entry */
} entry_t;

#define VALUE(e) ((e)->key + (e)->key_len)

static inline entry_t *entry_of(tpc_hash_node_t *n)
{
    return (entry_t *)n;
}

/* The entry a link from tpc__keyed_map_find() points to, or NULL. */
static inline entry_t *at(tpc_hash_node_t **link)
{
    return link && *link ? entry_of(*link) : NULL;
}

enum { KIND_VALUE = 0, KIND_MAP = 1 };

typedef struct {
    char *name;
    int kind;
} name_t;

/* One frozen value, or one frozen map entry with its map's entry. */
typedef struct {
    const entry_t *e, *item;
} frozen_ref_t;

struct tpc__frozen {
    frozen_ref_t *refs;
    size_t n;
    char **names; /* copies: the subtask may add names meanwhile */
    int nnames;
    /* An incremental snapshot: the deletes (entries, framed) and the chain it builds on. */
    tpc__buf_t deletes;
    uint32_t ndeletes;
    uint64_t *links;
    uint32_t nlinks;
};

/* A snapshot taken while incremental snapshots are on, until it completes or aborts. */
typedef struct {
    uint64_t id;
    uint32_t epoch;     /* the epoch after it: entries changed since have this one or later */
    size_t deletes_len; /* bytes of the delete log it covered */
    uint32_t ndeletes;  /* and entries */
    uint64_t *links;    /* the chain that ends with it: the next snapshot builds on this */
    uint32_t nlinks;
} taken_t;

/* Entries of up to POOL_MAX bytes, in classes of POOL_STEP bytes: slabs and a free list each. */
#define POOL_STEP  16u
#define POOL_MAX   256u
#define SLAB_BYTES (256u * 1024u)

typedef struct slab {
    struct slab *next;
    max_align_t align[]; /* then the entries */
} slab_t;

typedef struct {
    slab_t *slabs;
    uint8_t *cur, *end; /* the unused part of the newest slab */
    void *free[POOL_MAX / POOL_STEP];
    size_t nbig; /* entries of more than POOL_MAX bytes: malloc()'s, freed one by one */
} pool_t;

struct tpc__keyed {
    name_t *names;
    int nnames;
    tpc_slots_t t; /* of the keys' hashes; value state: the value; map state: a tpc_hash_t * in
                    * the value bytes */
    pool_t pool;
    /* Copy-on-write while a snapshot is written: entries of an older epoch are frozen. */
    uint32_t epoch;
    bool frozen;
    entry_t **retired;
    size_t nretired, retired_cap;
    /* Incremental snapshots (state.incremental): a snapshot writes what changed since the last
     * link of the chain of completed snapshots it builds on; after max_chain links a full one. */
    int max_chain; /* 0: every snapshot is full */
    uint64_t *links;
    uint32_t nlinks;
    frozen_ref_t *dirty; /* entries changed since the chain's last link; {NULL, NULL}: gone */
    size_t ndirty, dirty_cap;
    tpc__buf_t deletes; /* deletes since then, as framed checkpoint entries */
    uint32_t ndeletes;
    taken_t *taken;
    size_t ntaken, taken_cap;
    /* The batch process() has, with its keys' hashes and, once checked, groups (-1 before). */
    const tpc_batch_t *batch;
    uint64_t *batch_hash;
    int *batch_group;
    size_t batch_cap, batch_at; /* the record the operator is at, as far as keyed calls tell */
    /* The slot a get of the batch's record memo_record found (its entry, or the empty slot where
     * it would go), for the put of that record that mostly follows: good while no slot moved
     * since, that is while edits (insertions, removals, growth) is still memo_edits. */
    tpc_slot_t *memo_slot;
    size_t memo_record;
    int memo_name;
    uint64_t edits, memo_edits;
};

/* A map state's table, whose pointer is its entry's value. */
static inline tpc_hash_t *map_of(const entry_t *e)
{
    tpc_hash_t *m;
    memcpy(&m, VALUE(e), sizeof m);
    return m;
}

/* keyed.c */
/* The subtask's keyed state, created empty when it has none yet. */
tpc__keyed_t *tpc__keyed_of(tpc__task_t *t);
/* The index of state @p name (of @p kind when @p add adds it), or -1 when absent and not added. */
int tpc__keyed_name(tpc__keyed_t *k, const char *name, int kind, bool add);
/* The slot of (name, key) in @p t, or the empty slot where it would go; NULL while @p t has no
 * slots. */
tpc_slot_t *tpc__keyed_find(const tpc_slots_t *t, int name, uint64_t h, const void *key,
                            size_t len);
/* The link to @p key in map table @p t, or the empty link where it would go; NULL while @p t is
 * empty and has never been written. */
tpc_hash_node_t **tpc__keyed_map_find(tpc_hash_t *t, uint64_t h, const void *key, size_t len);
/* Set (name, key) to @p value in the subtask's table; returns the entry. */
entry_t *tpc__keyed_set(tpc__keyed_t *k, int name, int group, uint64_t h, const void *key,
                        size_t klen, const void *value, size_t vlen);
/* Set map key @p map_key of map state (name, key) to @p value, creating the map when absent. */
void tpc__keyed_map_set(tpc__keyed_t *k, int name, int group, uint64_t kh, const void *key,
                        size_t key_len, const void *map_key, size_t map_key_len, const void *value,
                        size_t value_len);
/* Free @p e, or keep it for the snapshot writer until tpc__keyed_thaw. */
void tpc__keyed_release(tpc__keyed_t *k, entry_t *e);
/* Remove the entry at @p s (with its map, for a map state). */
void tpc__keyed_remove(tpc__keyed_t *k, tpc_slot_t *s);
/* Free @p e, which has its key and value capacity still. */
void tpc__keyed_entry_free(pool_t *p, entry_t *e);

/* keyed_snapshot.c */
/* One keyed entry in a checkpoint into @p one (emptied first). */
void tpc__keyed_entry_encode(tpc__buf_t *one, int group, int kind, const char *name,
                             const void *key, size_t key_len, const void *map_key,
                             size_t map_key_len, const void *value, size_t value_len);

#endif
