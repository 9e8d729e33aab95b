/*
 * How a sink stores its transactions in checkpoint state: one state entry per handle, in a
 * small envelope of our own around the connector's bytes. The envelope carries what the framework
 * needs on restore without asking the connector (pending or current, the checkpoint, when the
 * transaction began), the connector's name, so that a reader of the checkpoint alone (the `twopc`
 * command) knows whose bytes follow, and its own version, so that the framework and each connector
 * can change their formats independently. Entries of version 1 have no name and restore as
 * before. Integers are big-endian so that checkpoints move between machines.
 */
#include "txn_internal.h"

#include <stdlib.h>
#include <string.h>

static const unsigned char entry_magic[4] = {'T', 'P', 'C', 'X'};

tpc_error_t *tpc_txn_buf_append(tpc_txn_buf_t *buf, const void *bytes, size_t len)
{
    if (len == 0)
        return NULL;
    if (buf->len + len > buf->cap && !tpc_array_grow(&buf->data, &buf->cap, buf->len + len, 1))
        return tpc_error_nomem();
    memcpy(buf->data + buf->len, bytes, len);
    buf->len += len;
    return NULL;
}

void tpc__txn_buf_free(tpc_txn_buf_t *buf)
{
    free(buf->data);
    buf->data = NULL;
    buf->len = buf->cap = 0;
}

void tpc_txn_put_be(unsigned char **p, uint64_t v, int bytes)
{
    tpc_store_be(*p, v, bytes);
    *p += bytes;
}

uint64_t tpc_txn_get_be(const unsigned char **p, int bytes)
{
    uint64_t v = tpc_load_be(*p, bytes);
    *p += bytes;
    return v;
}

tpc_error_t *tpc__txn_entry_begin(const tpc__txn_entry_t *e, tpc_txn_buf_t *out)
{
    unsigned char h[TPC__TXN_ENTRY_HEADER];
    memcpy(h, entry_magic, 4);
    h[4] = TPC__TXN_ENTRY_VERSION;
    h[5] = (unsigned char)e->kind;
    tpc_store_be(h + 6, e->origin >= 0 && e->origin < 0xffff ? (uint64_t)e->origin + 1 : 0, 2);
    tpc_store_be(h + 8, e->checkpoint_id, 8);
    tpc_store_be(h + 16, (uint64_t)e->start_ms, 8);
    tpc_store_be(h + 24, 0, 4); /* handle length, filled in by tpc__txn_entry_seal() */
    out->len = 0;
    size_t nlen = e->connector ? strlen(e->connector) : 0;
    unsigned char name_len = (unsigned char)(nlen > 255 ? 0 : nlen); /* too long: not named */
    tpc_error_t *err = tpc_txn_buf_append(out, h, sizeof h);
    if (!err)
        err = tpc_txn_buf_append(out, &name_len, 1);
    if (!err)
        err = tpc_txn_buf_append(out, e->connector, name_len);
    return err;
}

void tpc__txn_entry_seal(tpc_txn_buf_t *out)
{
    size_t name = 1 + (size_t)out->data[TPC__TXN_ENTRY_HEADER];
    tpc_store_be(out->data + 24, (uint64_t)(out->len - TPC__TXN_ENTRY_HEADER - name), 4);
}

tpc_error_t *tpc__txn_entry_decode(const void *bytes, size_t len, tpc__txn_entry_t *out)
{
    const unsigned char *p = bytes;
    if (len < TPC__TXN_ENTRY_HEADER || memcmp(p, entry_magic, 4) != 0)
        return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL,
                             "state entry of %zu bytes is not a transaction entry", len);
    if (p[4] > TPC__TXN_ENTRY_VERSION) {
        tpc_error_t *err = tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL,
                                         "transaction entry has version %u, this library reads "
                                         "up to %u",
                                         (unsigned)p[4], (unsigned)TPC__TXN_ENTRY_VERSION);
        return tpc_error_hint(err, "restore with the twopc version that wrote the checkpoint");
    }
    if (p[5] != TPC__TXN_PENDING && p[5] != TPC__TXN_CURRENT)
        return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL,
                             "transaction entry has unknown kind %u", (unsigned)p[5]);
    /* Version 2 names the connector between the fixed part and the handle. */
    size_t name = 0;
    if (p[4] >= 2) {
        if (len == TPC__TXN_ENTRY_HEADER || len - TPC__TXN_ENTRY_HEADER - 1 < p[28])
            return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL,
                                 "transaction entry of %zu bytes is too short for its connector's "
                                 "name",
                                 len);
        name = 1 + (size_t)p[28];
    }
    uint64_t hlen = tpc_load_be(p + 24, 4);
    if (hlen != len - TPC__TXN_ENTRY_HEADER - name)
        return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL,
                             "transaction entry says %llu handle bytes but holds %zu",
                             (unsigned long long)hlen, len - TPC__TXN_ENTRY_HEADER - name);
    out->kind = (tpc__txn_kind_t)p[5];
    out->origin = (int)tpc_load_be(p + 6, 2) - 1;
    out->checkpoint_id = tpc_load_be(p + 8, 8);
    out->start_ms = (int64_t)tpc_load_be(p + 16, 8);
    out->connector = name > 1 ? (const char *)p + TPC__TXN_ENTRY_HEADER + 1 : NULL;
    out->connector_len = name > 1 ? name - 1 : 0;
    out->handle = p + TPC__TXN_ENTRY_HEADER + name;
    out->handle_len = (size_t)hlen;
    return NULL;
}
