/*
 * Batches: the unit records travel in. A batch holds up to `cap` records whose bytes live in one
 * arena, so a record costs a copy into the arena and no allocation; batches are recycled through
 * their channel so the steady state allocates nothing.
 */
#include "runtime_internal.h"

#include <stdlib.h>
#include <string.h>

tpc_batch_t *tpc__batch_new(size_t cap)
{
    tpc_batch_t *b = tpc__xcalloc(1, sizeof(*b));
    b->recs = tpc__xmalloc(cap * sizeof(*b->recs));
    b->cap = cap;
    b->bytes_cap = cap * 32;
    b->bytes = tpc__xmalloc(b->bytes_cap);
    return b;
}

void tpc__batch_destroy(tpc_batch_t *b)
{
    if (!b)
        return;
    free(b->recs);
    free(b->bytes);
    free(b);
}

void tpc__batch_reset(tpc_batch_t *b)
{
    b->count = 0;
    b->used = 0;
}

void tpc__batch_append(tpc_batch_t *b, const tpc_record_t *rec)
{
    size_t need = rec->key_len + rec->value_len;
    if (b->used + need > b->bytes_cap) {
        size_t cap = b->bytes_cap * 2;
        while (cap < b->used + need)
            cap *= 2;
        b->bytes = tpc__xrealloc(b->bytes, cap);
        b->bytes_cap = cap;
    }
    tpc__rec_t *r = &b->recs[b->count++];
    r->key_off = (uint32_t)b->used;
    r->key_len = (uint32_t)rec->key_len;
    if (rec->key_len)
        memcpy(b->bytes + b->used, rec->key, rec->key_len);
    b->used += rec->key_len;
    r->value_off = (uint32_t)b->used;
    r->value_len = (uint32_t)rec->value_len;
    if (rec->value_len)
        memcpy(b->bytes + b->used, rec->value, rec->value_len);
    b->used += rec->value_len;
    r->timestamp = rec->timestamp;
}

size_t tpc_batch_count(const tpc_batch_t *batch)
{
    return batch->count;
}

void tpc_batch_get(const tpc_batch_t *batch, size_t i, tpc_record_t *out)
{
    const tpc__rec_t *r = &batch->recs[i];
    out->key = batch->bytes + r->key_off;
    out->key_len = r->key_len;
    out->value = batch->bytes + r->value_off;
    out->value_len = r->value_len;
    out->timestamp = r->timestamp;
}
