/*
 * libFuzzer harness: a checkpoint folder as the `twopc` command reads it (runtime/checkpoint_read.c
 * with the job's restore rule, txn/txn_handles.c, the connectors' describe_handle), on folders
 * that anyone with write access to checkpoint.dir may have made. The input is split in two by its
 * first two bytes (a big-endian length): a completion record and a checkpoint file, each without
 * its trailing SHA-256 digest, which the harness appends so that the fuzzer explores contents
 * rather than checksums. The harness writes them as "completed" and as checkpoints 1 and 2 (the
 * second a byte shorter: damaged) into a folder of its own, reads the folder with every file
 * decoded, and walks what it found as the command does: vertices, subtasks, state entries, and
 * every transaction handle described by the three connectors and by none.
 */
#include "runtime_internal.h"
#include "tpc_file.h"
#include "tpc_kafka.h"
#include "tpc_pg.h"
#include "tpc_txn.h"

#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static void put(const char *name, const uint8_t *p, size_t n, bool digest)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    if (n)
        fwrite(p, 1, n, f);
    if (digest) {
        uint8_t d[SHA256_DIGEST_LENGTH];
        SHA256(p, n, d);
        fwrite(d, 1, sizeof d, f);
    }
    fclose(f);
}

static void walk(const tpc_checkpoint_t *c)
{
    (void)tpc_checkpoint_job(c);
    (void)tpc_checkpoint_time_ms(c);
    for (int v = 0; v < tpc_checkpoint_vertex_count(c); v++) {
        int par = 0;
        if (!tpc_checkpoint_vertex(c, v, &par) || par < 1)
            abort();
        for (int s = 0; s < par; s++) {
            tpc_checkpoint_subtask_t sub;
            tpc_checkpoint_subtask(c, v, s, &sub);
            const tpc_state_reader_t *r = tpc_checkpoint_state(c, v, s);
            for (int k = TPC_STATE_LIST; k <= TPC_STATE_OWNED; k++)
                for (size_t i = 0; r && i < tpc_state_count(r, (tpc_state_kind_t)k); i++) {
                    const void *bytes;
                    size_t len;
                    tpc_state_get(r, (tpc_state_kind_t)k, i, &bytes, &len);
                }
        }
    }
    tpc_txn_checkpoint_handle_t *h = NULL;
    size_t n = 0;
    tpc_error_t *err = tpc_txn_checkpoint_handles(c, &h, &n);
    if (err) {
        tpc_error_destroy(err);
        return;
    }
    const tpc_txn_connector_ops_t *ops[] = {tpc_file_sink_ops(), tpc_pg_sink_ops(),
                                            tpc_kafka_sink_ops(), NULL};
    for (size_t i = 0; i < n; i++)
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
            tpc_txn_handle_view_t view;
            tpc_txn_describe_handle(ops[o], h[i].handle, h[i].handle_len, &view);
            if (memchr(view.line, 0, sizeof view.line) == NULL)
                abort(); /* a line must be a string */
        }
    tpc_txn_checkpoint_handles_free(h, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!*dir) {
        snprintf(dir, sizeof dir, "/tmp/twopc-fuzz-folder-%ld", (long)getpid());
        (void)mkdir(dir, 0700);
    }
    if (size < 2)
        return 0;
    size_t rlen = (size_t)data[0] << 8 | data[1];
    if (rlen > size - 2)
        rlen = size - 2;
    const uint8_t *rec = data + 2, *ck = data + 2 + rlen;
    size_t cklen = size - 2 - rlen;
    put("completed", rec, rlen, true);
    put("chk-00000000000000000001", ck, cklen, true);
    put("chk-00000000000000000002", ck, cklen ? cklen - 1 : 0, true);
    tpc_checkpoint_folder_t f;
    tpc_error_t *err = tpc_checkpoint_folder_read(dir, true, &f);
    if (err) {
        tpc_error_destroy(err);
    } else {
        if (f.restore_index >= (long)f.nfiles || (f.restore_index >= 0 && f.restore_refusal))
            abort(); /* a pick and a refusal never come together */
        for (size_t i = 0; i < f.nfiles; i++) {
            (void)tpc_checkpoint_status_name(f.files[i].status);
            if (f.files[i].checkpoint)
                walk(f.files[i].checkpoint);
        }
    }
    tpc_checkpoint_folder_free(&f);
    return 0;
}
