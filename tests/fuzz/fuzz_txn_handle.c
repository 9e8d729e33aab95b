/*
 * libFuzzer harness: what a restore decodes for a two-phase-commit sink. The txn layer's state
 * entry (txn/txn_state.c) and the transaction handles of the PostgreSQL, Kafka and file
 * connectors, as checkpoint files hold them. The first input byte chooses the connector (0, 1, 2
 * modulo 3) and whether the rest is a whole state entry (bit 2) or a bare handle. Any bytes are
 * described for people as the twopc command describes them (describe_handle). A handle that
 * decodes is described (the file connector derives file names from it), serialized and decoded
 * again, which must succeed; the PostgreSQL and Kafka handles must come back byte for byte (a
 * Kafka handle of version 1 as the same one in version 2, with an unknown start time).
 */
#include "file_internal.h"
#include "kafka_sink_internal.h"
#include "pg_internal.h"
#include "txn_internal.h"

#include <stdlib.h>
#include <string.h>

static const tpc_txn_connector_ops_t *const connectors[] = {&tpc__pg_ops, &tpc__kafka_ops,
                                                            &tpc__file_ops};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int which = data[0] % 3;
    const tpc_txn_connector_ops_t *ops = connectors[which];
    const void *handle = data + 1;
    size_t len = size - 1;
    if (data[0] & 4) {
        tpc__txn_entry_t e;
        tpc_error_t *err = tpc__txn_entry_decode(data + 1, size - 1, &e);
        if (err) {
            tpc_error_destroy(err);
            return 0;
        }
        handle = e.handle;
        len = e.handle_len;
    }
    /* The file connector names files from its configuration; the others ignore conn. */
    tpc__file_conf_t fconf = {.prefix = "part", .suffix = ".txt"};
    tpc__file_conn_t fconn = {.conf = &fconf, .dirfd = -1};
    void *conn = which == 2 ? &fconn : NULL;

    /* What the twopc command shows of any bytes: a line that fits, values within their room. */
    tpc_txn_handle_view_t view;
    tpc_txn_describe_handle(ops, handle, len, &view);
    if (strnlen(view.line, sizeof view.line) >= sizeof view.line || view.nfields < 0 ||
        view.nfields > TPC_TXN_HANDLE_FIELDS_MAX)
        abort();

    void *txn = NULL;
    tpc_error_t *err = ops->deserialize(conn, handle, len, &txn);
    if (err) {
        tpc_error_destroy(err);
        return 0;
    }
    char name[512];
    ops->describe(conn, txn, name, sizeof name);
    if (strlen(name) >= sizeof name)
        abort();
    tpc_txn_buf_t out = {0};
    err = ops->serialize(conn, txn, &out);
    if (err)
        abort(); /* what was read must be writable again */
    void *again = NULL;
    err = ops->deserialize(conn, out.data, out.len, &again);
    if (err)
        abort();
    if (which == 1 && len > 0 && *(const uint8_t *)handle == 1) {
        static const uint8_t unknown[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
        const uint8_t *o = out.data;
        if (out.len != len + 8 || o[0] != 2 ||
            memcmp(o + 1, (const uint8_t *)handle + 1, len - 1) || memcmp(o + len, unknown, 8))
            abort();
    } else if (which != 2 && (out.len != len || memcmp(out.data, handle, len) != 0)) {
        abort();
    }
    ops->free_txn(conn, again);
    ops->free_txn(conn, txn);
    tpc__txn_buf_free(&out);
    return 0;
}
