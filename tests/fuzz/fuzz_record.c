/*
 * libFuzzer harness: what a restore reads from checkpoint.dir besides the checkpoint files' frame.
 * The first byte chooses: even, the completion record (runtime/record.c), with its SHA-256 digest
 * appended by the harness so that the fuzzer explores the contents; odd, one keyed state entry
 * (runtime/keyed.c), as it comes out of a checkpoint whose checksum was valid. A decoded record
 * or entry is checked for the bounds its users rely on.
 */
#include "runtime_internal.h"

#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>

static void record(const uint8_t *data, size_t size)
{
    uint8_t *p = malloc(size + SHA256_DIGEST_LENGTH);
    if (!p)
        return;
    if (size)
        memcpy(p, data, size);
    SHA256(p, size, p + size);
    tpc__record_t rec;
    tpc_error_t *err = tpc__record_decode("fuzz", p, size + SHA256_DIGEST_LENGTH, &rec);
    free(p);
    if (err) {
        tpc_error_destroy(err);
        return;
    }
    if (!rec.job_name || rec.nvertices < 0)
        abort();
    for (int v = 0; v < rec.nvertices; v++)
        if (!rec.names[v] || rec.highest[v] < 1 || tpc__record_highest(&rec, rec.names[v]) < 1)
            abort();
    tpc__record_free(&rec);
}

static void keyed(const uint8_t *data, size_t size)
{
    tpc__keyed_entry_t e;
    if (!tpc__keyed_parse(data, size, &e))
        return;
    if (e.group < 0 || (e.name_len == 0) != (e.kind == TPC__KEYED_TIMER) ||
        e.name + e.name_len > data + size || e.key + e.key_len > data + size ||
        e.value + e.value_len > data + size ||
        (e.kind == TPC__KEYED_MAP && e.map_key + e.map_key_len > data + size))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size)
        return 0;
    if (data[0] & 1)
        keyed(data + 1, size - 1);
    else
        record(data + 1, size - 1);
    return 0;
}
