/*
 * The kit's hash table (tpc_kit.h), for the runtime's keyed state and timers and anything else that
 * looks entries up by key. It is chained, and its nodes are the caller's, embedded in entries that
 * hold their key and value in the same allocation: the table never copies, compares or frees an
 * entry, so a caller with millions of small entries pays one allocation and two words per entry
 * for it. Buckets are a power of two at most three quarters full; growing doubles them and moves
 * the chains over in bucket order, so iteration order depends only on the sequence of operations
 * (checkpoints list keyed state in that order).
 */
#include "tpc_kit.h"

#include <stdint.h>
#include <stdlib.h>

/* The number of buckets of a table's first allocation (a power of two). */
#define FIRST_BUCKETS 16

bool tpc_hash_reserve(tpc_hash_t *t, size_t extra)
{
    if (extra <= SIZE_MAX - t->count && t->count + extra <= t->nbuckets * 3 / 4)
        return true;
    if (extra > SIZE_MAX / 2 - t->count)
        return false;
    size_t n = t->nbuckets ? t->nbuckets : FIRST_BUCKETS / 2;
    do {
        if (n > SIZE_MAX / 2 / sizeof *t->buckets)
            return false;
        n *= 2;
    } while (t->count + extra > n * 3 / 4);
    tpc_hash_node_t **b = calloc(n, sizeof *b);
    if (!b)
        return false;
    /* Each chain in bucket order, each node to the head of its new bucket. */
    for (size_t i = 0; i < t->nbuckets; i++)
        for (tpc_hash_node_t *e = t->buckets[i], *nx; e; e = nx) {
            nx = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
        }
    free(t->buckets);
    t->buckets = b;
    t->nbuckets = n;
    return true;
}

void tpc_hash_insert(tpc_hash_t *t, tpc_hash_node_t **link, tpc_hash_node_t *node)
{
    node->next = *link;
    *link = node;
    t->count++;
}

void tpc_hash_replace(tpc_hash_node_t **link, tpc_hash_node_t *node)
{
    node->next = (*link)->next;
    *link = node;
}

tpc_hash_node_t *tpc_hash_remove(tpc_hash_t *t, tpc_hash_node_t **link)
{
    tpc_hash_node_t *node = *link;
    *link = node->next;
    t->count--;
    return node;
}

tpc_hash_node_t *tpc_hash_first(const tpc_hash_t *t, tpc_hash_iter_t *it)
{
    *it = (tpc_hash_iter_t){.table = t};
    return tpc_hash_next(it);
}

tpc_hash_node_t *tpc_hash_next(tpc_hash_iter_t *it)
{
    while (!it->next && it->bucket < it->table->nbuckets)
        it->next = it->table->buckets[it->bucket++];
    tpc_hash_node_t *node = it->next;
    if (node)
        it->next = node->next;
    return node;
}

void tpc_hash_free(tpc_hash_t *t)
{
    free(t->buckets);
    *t = (tpc_hash_t){0};
}
