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
    free(b->hdrs);
    free(b);
}

void tpc__batch_reset(tpc_batch_t *b)
{
    b->count = 0;
    b->used = 0;
    b->nhdrs = 0;
}

/* Room for @need more bytes. A new arena rather than realloc, so that the headers' pointers into
 * the old one can be moved along while it still exists. */
static void reserve(tpc_batch_t *b, size_t need)
{
    if (b->used + need <= b->bytes_cap)
        return;
    size_t cap = tpc_array_next_cap(b->bytes_cap, b->used + need, 1);
    uint8_t *bytes = tpc__xmalloc(cap ? cap : SIZE_MAX); /* SIZE_MAX: out of memory, said so */
    if (b->used)
        memcpy(bytes, b->bytes, b->used);
    for (size_t i = 0; i < b->nhdrs; i++) {
        tpc_header_t *h = &b->hdrs[i];
        h->name = (const char *)bytes + ((const uint8_t *)h->name - b->bytes);
        if (h->value)
            h->value = bytes + ((const uint8_t *)h->value - b->bytes);
    }
    free(b->bytes);
    b->bytes = bytes;
    b->bytes_cap = cap;
}

static uint32_t put(tpc_batch_t *b, const void *bytes, size_t len)
{
    uint32_t off = (uint32_t)b->used;
    if (len)
        memcpy(b->bytes + b->used, bytes, len);
    b->used += len;
    return off;
}

static void append_headers(tpc_batch_t *b, tpc__rec_t *r, const tpc_record_t *rec)
{
    if (b->nhdrs + rec->header_count > b->hdrs_cap)
        tpc__xgrow(&b->hdrs, &b->hdrs_cap, b->nhdrs + rec->header_count, sizeof *b->hdrs);
    r->hdr_first = (uint32_t)b->nhdrs;
    for (size_t i = 0; i < rec->header_count; i++) {
        const tpc_header_t *from = &rec->headers[i];
        tpc_header_t *h = &b->hdrs[b->nhdrs++];
        h->name_len = from->name_len;
        h->name = (const char *)b->bytes + put(b, from->name, from->name_len);
        h->value_len = from->value ? from->value_len : 0;
        h->value = from->value ? b->bytes + put(b, from->value, h->value_len) : NULL;
    }
}

void tpc__batch_append(tpc_batch_t *b, const tpc_record_t *rec)
{
    size_t need = rec->key_len + rec->value_len;
    for (size_t i = 0; i < rec->header_count; i++)
        need += rec->headers[i].name_len + (rec->headers[i].value ? rec->headers[i].value_len : 0);
    reserve(b, need);
    tpc__rec_t *r = &b->recs[b->count++];
    r->key_len = (uint32_t)rec->key_len;
    r->key_off = put(b, rec->key, rec->key_len);
    r->value_len = (uint32_t)rec->value_len;
    r->value_off = put(b, rec->value, rec->value_len);
    r->timestamp = rec->timestamp;
    r->flags = rec->flags;
    r->hdr_count = (uint32_t)rec->header_count;
    r->hdr_first = 0;
    if (rec->header_count)
        append_headers(b, r, rec);
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
    out->headers = r->hdr_count ? &batch->hdrs[r->hdr_first] : NULL;
    out->header_count = r->hdr_count;
    out->flags = r->flags;
}
