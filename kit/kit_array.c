/*
 * Growable arrays in the kit (tpc_kit.h). Every layer appends to arrays whose length it cannot know
 * in advance: mailboxes, record headers, pending transactions, topics and partitions. The growth
 * is written once, here: the capacity at least doubles, the size is checked for overflow, and a
 * failure leaves the array as it was, so each caller only chooses what out of memory means to its
 * layer (the runtime aborts, the framework and the connectors return TPC_ERR_NOMEM).
 */
#include "tpc_kit.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The capacity of an array's first allocation, in elements. */
#define FIRST_CAP 8

size_t tpc_array_next_cap(size_t cap, size_t need, size_t size)
{
    if (!size)
        size = 1;
    if (need > SIZE_MAX / size)
        return 0;
    size_t n = cap <= SIZE_MAX / 2 ? cap * 2 : need;
    if (n < FIRST_CAP)
        n = FIRST_CAP;
    if (n < need || n > SIZE_MAX / size)
        n = need;
    return n;
}

bool tpc_array_grow(void *items, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return true;
    if (!size)
        size = 1;
    size_t n = tpc_array_next_cap(*cap, need, size);
    if (!n)
        return false;
    /* The array's pointer is read and written as bytes: it may be of any object pointer type. */
    void *old;
    memcpy(&old, items, sizeof old);
    void *p = realloc(old, n * size);
    if (!p && n > need) /* the doubled size failed: just what was asked for may still fit */
        p = realloc(old, (n = need) * size);
    if (!p)
        return false;
    memcpy(items, &p, sizeof p);
    *cap = n;
    return true;
}
