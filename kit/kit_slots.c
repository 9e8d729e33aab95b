/*
 * The kit's open-addressing table (tpc_kit.h): slots of a hash and the caller's pointer, linear
 * probing from the slot named by the top bits of the hash, mixed (tpc_slots_home()). Growing
 * reads the old slots in order and, since a slot's place in the doubled table is about twice its
 * place in the old one, writes the new slots nearly in order too; the items are never touched.
 * Removal moves back every later slot of the run that the hole would hide from its probe.
 */
#include "tpc_kit.h"

#include <stdint.h>
#include <stdlib.h>

/* The number of slots of a table's first allocation (a power of two). */
#define FIRST_SLOTS 64

bool tpc_slots_reserve(tpc_slots_t *t, size_t extra)
{
    if (extra <= SIZE_MAX / 8 - t->count && (t->count + extra) * 8 <= t->nslots * 5)
        return true;
    if (extra > SIZE_MAX / 8 - t->count)
        return false;
    size_t n = t->nslots ? t->nslots : FIRST_SLOTS / 2;
    int bits = 0;
    do {
        if (n > SIZE_MAX / 2 / sizeof(tpc_slot_t))
            return false;
        n *= 2;
    } while ((t->count + extra) * 8 > n * 5);
    while (((size_t)1 << bits) < n)
        bits++;
    tpc_slot_t *slots = calloc(n, sizeof *slots);
    if (!slots)
        return false;
    tpc_slots_t grown = {slots, n, t->count, 64 - bits};
    for (size_t i = 0; i < t->nslots; i++) {
        const tpc_slot_t *s = &t->slots[i];
        if (!s->item)
            continue;
        size_t j = tpc_slots_home(&grown, s->hash);
        while (grown.slots[j].item)
            j = j + 1 == n ? 0 : j + 1;
        grown.slots[j] = *s;
    }
    free(t->slots);
    *t = grown;
    return true;
}

void tpc_slots_insert(tpc_slots_t *t, tpc_slot_t *slot, uint64_t hash, void *item)
{
    *slot = (tpc_slot_t){hash, item};
    t->count++;
}

void tpc_slots_remove(tpc_slots_t *t, tpc_slot_t *slot)
{
    size_t n = t->nslots, hole = (size_t)(slot - t->slots);
    for (size_t i = hole + 1 == n ? 0 : hole + 1; t->slots[i].item; i = i + 1 == n ? 0 : i + 1) {
        size_t home = tpc_slots_home(t, t->slots[i].hash);
        /* Slot i moves into the hole unless its probe starts cyclically after the hole, at or
         * before i: then the hole does not lie on its probe. */
        size_t from_home = i >= home ? i - home : i + n - home;
        size_t from_hole = i >= hole ? i - hole : i + n - hole;
        if (from_home >= from_hole) {
            t->slots[hole] = t->slots[i];
            hole = i;
        }
    }
    t->slots[hole] = (tpc_slot_t){0, NULL};
    t->count--;
}

void tpc_slots_free(tpc_slots_t *t)
{
    free(t->slots);
    *t = (tpc_slots_t){0};
}
