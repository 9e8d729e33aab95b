/*
 * libFuzzer harness: the checkpoint file decoder (runtime/storage.c), which reads files that a
 * crash may have torn, a disk may have altered, or anyone with write access to checkpoint.dir may
 * have written. The input is a file without its trailing SHA-256 digest, which the harness appends,
 * so that the fuzzer explores the contents rather than the checksum; an input whose first byte is
 * odd is also decoded as it is, digest and all. A decoded checkpoint is checked for the bounds its
 * users rely on and freed.
 */
#include "runtime_internal.h"

#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>

static void check(const tpc__checkpoint_t *c)
{
    if (c->nvertices < 0 || (c->nvertices && !c->vertices))
        abort();
    for (int v = 0; v < c->nvertices; v++) {
        const tpc__vertex_snapshot_t *vs = &c->vertices[v];
        if (vs->parallelism < 1 || !vs->subtasks || !vs->name)
            abort();
        (void)tpc__vertex_fully_closed(vs);
        (void)tpc__vertex_partly_closed(vs);
    }
}

static void decode(const uint8_t *p, size_t len)
{
    tpc__checkpoint_t c;
    tpc_error_t *err = tpc__checkpoint_decode(p, len, &c);
    if (err) {
        tpc_error_destroy(err);
        return;
    }
    check(&c);
    tpc__checkpoint_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size && (data[0] & 1))
        decode(data, size);
    uint8_t *p = malloc(size + SHA256_DIGEST_LENGTH);
    if (!p)
        return 0;
    if (size)
        memcpy(p, data, size);
    SHA256(p, size, p + size);
    decode(p, size + SHA256_DIGEST_LENGTH);
    free(p);
    return 0;
}
