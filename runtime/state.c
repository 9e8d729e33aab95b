/*
 * Operator state as the operator sees it: a writer that collects list and union entries during
 * snapshot_state, and a reader over the entries handed back in initialize_state. Entries are
 * opaque bytes; how they are split over subtasks on restore is decided in job.c.
 */
#include "runtime_internal.h"

#include <stdlib.h>

void tpc__state_writer_init(tpc_state_writer_t *w)
{
    *w = (tpc_state_writer_t){0};
}

void tpc__state_writer_free(tpc_state_writer_t *w)
{
    tpc__buf_free(&w->list);
    tpc__buf_free(&w->uni);
    tpc__buf_free(&w->owned);
    tpc__buf_free(&w->keyed);
    free(w->links);
    w->links = NULL;
    w->nlinks = 0;
    w->nlist = w->nunion = w->nowned = w->nkeyed = 0;
}

tpc_error_t *tpc_state_add(tpc_state_writer_t *w, tpc_state_kind_t kind, const void *bytes,
                           size_t len)
{
    if (!w || (len && !bytes))
        return tpc_error_new(TPC_ERR_INVALID_ARG, 0, "state entry without bytes");
    if (len > UINT32_MAX / 2)
        return tpc_error_new(TPC_ERR_INVALID_ARG, 0, "state entry of %zu bytes is too large", len);
    if (kind == TPC_STATE_LIST) {
        tpc__buf_put_bytes(&w->list, bytes, len);
        w->nlist++;
    } else if (kind == TPC_STATE_UNION) {
        tpc__buf_put_bytes(&w->uni, bytes, len);
        w->nunion++;
    } else if (kind == TPC_STATE_OWNED) {
        tpc__buf_put_bytes(&w->owned, bytes, len);
        w->nowned++;
    } else {
        return tpc_error_new(TPC_ERR_INVALID_ARG, 0, "unknown state kind %d", (int)kind);
    }
    return NULL;
}

size_t tpc_state_count(const tpc_state_reader_t *r, tpc_state_kind_t kind)
{
    if (!r)
        return 0;
    return kind == TPC_STATE_UNION   ? r->nunion
           : kind == TPC_STATE_OWNED ? r->nowned
           : kind == TPC_STATE_LIST  ? r->nlist
                                     : 0;
}

void tpc_state_get(const tpc_state_reader_t *r, tpc_state_kind_t kind, size_t i, const void **bytes,
                   size_t *len)
{
    const tpc__slice_t *s = kind == TPC_STATE_UNION   ? &r->uni[i]
                            : kind == TPC_STATE_OWNED ? &r->owned[i]
                                                      : &r->list[i];
    *bytes = s->p;
    *len = s->len;
}

void tpc__state_reader_free(tpc_state_reader_t *r)
{
    if (!r)
        return;
    free(r->list);
    free(r->uni);
    free(r->owned);
    free(r->keyed);
    r->list = r->uni = r->owned = r->keyed = NULL;
    r->nlist = r->nunion = r->nowned = r->nkeyed = 0;
    r->cap_list = r->cap_union = r->cap_owned = r->cap_keyed = 0;
}

void tpc__state_reader_add(tpc_state_reader_t *r, tpc_state_kind_t kind, const tpc__buf_t *b,
                           uint32_t count)
{
    tpc__slice_t **arr = kind == TPC_STATE_LIST    ? &r->list
                         : kind == TPC_STATE_UNION ? &r->uni
                                                   : &r->owned;
    size_t *n = kind == TPC_STATE_LIST    ? &r->nlist
                : kind == TPC_STATE_UNION ? &r->nunion
                                          : &r->nowned;
    size_t *cap = kind == TPC_STATE_LIST    ? &r->cap_list
                  : kind == TPC_STATE_UNION ? &r->cap_union
                                            : &r->cap_owned;
    tpc__rd_t rd = {b->data, b->len, 0, false};
    tpc__xgrow(arr, cap, *n + count, sizeof **arr);
    for (uint32_t i = 0; i < count; i++) {
        size_t len;
        const uint8_t *p = tpc__rd_bytes(&rd, &len);
        if (!p)
            break; /* the decoder checked the framing; never here */
        (*arr)[(*n)++] = (tpc__slice_t){p, len};
    }
}
