/*
 * The transaction handles of a checkpoint read from outside a job, and their description for
 * people. The runtime hands out each subtask's state entries (tpc_checkpoint_state()); which of
 * them are transaction entries, and whose connector wrote them, only this layer knows, from its
 * envelope. A handle is described by the connector its envelope names, never by trying decoders
 * until one fits: the bytes of one connector can look like another's.
 */
#include "tpc_kit.h"
#include "txn_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tpc_error_t *add_handle(tpc_txn_checkpoint_handle_t **out, size_t *n, size_t *cap,
                               const tpc_txn_checkpoint_handle_t *h, const tpc__txn_entry_t *e)
{
    if (!tpc_array_grow(out, cap, *n + 1, sizeof **out))
        return tpc_error_nomem();
    char *name = NULL;
    if (e->connector) {
        name = malloc(e->connector_len + 1);
        if (!name)
            return tpc_error_nomem();
        memcpy(name, e->connector, e->connector_len);
        name[e->connector_len] = '\0';
    }
    (*out)[*n] = *h;
    (*out)[(*n)++].connector = name;
    return NULL;
}

tpc_error_t *tpc_txn_checkpoint_handles(const tpc_checkpoint_t *c,
                                        tpc_txn_checkpoint_handle_t **out, size_t *n)
{
    static const tpc_state_kind_t kinds[] = {TPC_STATE_LIST, TPC_STATE_UNION, TPC_STATE_OWNED};
    *out = NULL;
    *n = 0;
    size_t cap = 0;
    tpc_error_t *err = NULL;
    for (int v = 0; v < tpc_checkpoint_vertex_count(c) && !err; v++) {
        int par;
        const char *sink = tpc_checkpoint_vertex(c, v, &par);
        for (int s = 0; s < par && !err; s++) {
            const tpc_state_reader_t *r = tpc_checkpoint_state(c, v, s);
            for (size_t k = 0; k < sizeof kinds / sizeof *kinds && !err; k++)
                for (size_t i = 0; i < tpc_state_count(r, kinds[k]) && !err; i++) {
                    const void *bytes;
                    size_t len;
                    tpc_state_get(r, kinds[k], i, &bytes, &len);
                    tpc__txn_entry_t e;
                    tpc_error_t *not_txn = tpc__txn_entry_decode(bytes, len, &e);
                    if (not_txn) {
                        tpc_error_destroy(not_txn); /* another operator's entry, or damaged */
                        continue;
                    }
                    tpc_txn_checkpoint_handle_t h = {
                        .sink = sink,
                        .subtask = s,
                        .origin = e.origin,
                        .pending = e.kind == TPC__TXN_PENDING,
                        .checkpoint = e.checkpoint_id,
                        .start_ms = e.start_ms,
                        .handle = e.handle,
                        .handle_len = e.handle_len,
                    };
                    err = add_handle(out, n, &cap, &h, &e);
                }
        }
    }
    if (err) {
        tpc_txn_checkpoint_handles_free(*out, *n);
        *out = NULL;
        *n = 0;
    }
    return err;
}

void tpc_txn_checkpoint_handles_free(tpc_txn_checkpoint_handle_t *handles, size_t n)
{
    for (size_t i = 0; handles && i < n; i++)
        free((char *)handles[i].connector);
    free(handles);
}

static void add_field(tpc_txn_handle_view_t *view, const char *name, bool is_number, int64_t number,
                      const char *text)
{
    if (!view || view->nfields < 0 || view->nfields >= TPC_TXN_HANDLE_FIELDS_MAX)
        return;
    int i = view->nfields++;
    view->fields[i].name = name;
    view->fields[i].is_number = is_number;
    view->fields[i].number = number;
    snprintf(view->fields[i].text, sizeof view->fields[i].text, "%s", text ? text : "");
}

void tpc_txn_handle_text(tpc_txn_handle_view_t *view, const char *name, const char *value)
{
    add_field(view, name, false, 0, value);
}

void tpc_txn_handle_number(tpc_txn_handle_view_t *view, const char *name, int64_t value)
{
    add_field(view, name, true, value, NULL);
}

void tpc_txn_describe_handle(const tpc_txn_connector_ops_t *ops, const void *bytes, size_t len,
                             tpc_txn_handle_view_t *out)
{
    *out = (tpc_txn_handle_view_t){0};
    if (!ops || ops->version < 4 || !ops->describe_handle) {
        snprintf(out->line, sizeof out->line, "handle of %zu bytes", len);
        return;
    }
    tpc_error_t *err = ops->describe_handle(bytes, len, out);
    if (err) {
        *out = (tpc_txn_handle_view_t){0};
        snprintf(out->line, sizeof out->line, "unreadable handle of %zu bytes: %s", len,
                 tpc_error_message(err));
        tpc_error_destroy(err);
    }
}
