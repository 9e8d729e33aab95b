/*
 * The completion record, "<checkpoint.dir>/completed": the id of the newest checkpoint that was
 * complete and the highest parallelism each vertex has run with in this directory. It is ground
 * truth for recovery. The coordinator writes it after the checkpoint file is durable and before
 * any sink hears that the checkpoint is complete, so no sink can have committed anything of a
 * checkpoint newer than the record; a restore that cannot find the checkpoint the record names, or
 * finds it damaged, knows that going back further would write again what the sinks already made
 * visible, and refuses (restore.c). The parallelisms tell the sinks which subtasks may have left
 * transactions behind after the job was scaled down.
 *
 * A start over (restore.mode=fresh) writes the id of its first checkpoint as the record's first
 * id before any task opens: the checkpoints before it belong to the state the job gave up, whose
 * transactions the new start aborts, so no later restore may go back to them.
 *
 * Layout: magic "TPCDONE1", u32 version, job name (u32 length + bytes), u64 newest, u64 first
 * (version 2), u32 vertex count, then per vertex its name and u32 highest parallelism, then a
 * SHA-256 of all before it. Integers are encoded as in the checkpoint files (docs/architecture.md).
 */
#include "runtime_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECORD_MAGIC   "TPCDONE1"
#define RECORD_VERSION 2u /* 1 had no first id */
#define RECORD_NAME    "completed"
#define DIGEST         32

static char *record_path(const char *dir)
{
    size_t n = strlen(dir) + sizeof RECORD_NAME + 2;
    char *p = tpc__xmalloc(n);
    snprintf(p, n, "%s/%s", dir, RECORD_NAME);
    return p;
}

void tpc__record_free(tpc__record_t *rec)
{
    for (int v = 0; v < rec->nvertices; v++)
        free(rec->names[v]);
    free(rec->names);
    free(rec->highest);
    free(rec->job_name);
    *rec = (tpc__record_t){0};
}

static tpc_error_t *damaged(const char *path, const char *why);

static tpc_error_t *damaged(const char *path, const char *why)
{
    return tpc_error_hint(
        tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL,
                      "the completion record \"%s\" is damaged (%s): it is what tells which "
                      "checkpoint the sinks may already have committed",
                      path, why),
        "restore it from a backup of the checkpoint directory; or, if you are sure that the "
        "newest checkpoint file in the directory is the newest one that completed, delete the "
        "record and it is written again");
}

tpc_error_t *tpc__record_decode(const char *path, const uint8_t *p, size_t len, tpc__record_t *out)
{
    *out = (tpc__record_t){0};
    if (len < 8 + DIGEST || memcmp(p, RECORD_MAGIC, 8) != 0)
        return damaged(path, "bad header or too short");
    uint8_t digest[DIGEST];
    tpc__sha256(p, len - DIGEST, digest);
    if (memcmp(digest, p + len - DIGEST, DIGEST) != 0)
        return damaged(path, "checksum mismatch");
    tpc__rd_t r = {p + 8, len - 8 - DIGEST, 0, false};
    uint32_t version = tpc__rd_u32(&r);
    if (version < 1 || version > RECORD_VERSION)
        return damaged(path, "unknown version");
    out->job_name = tpc__rd_string(&r);
    out->newest = tpc__rd_u64(&r);
    out->first = version >= 2 ? tpc__rd_u64(&r) : 0;
    uint32_t nv = tpc__rd_u32(&r);
    if (r.bad || nv > (r.len - r.off) / 8)
        goto bad;
    out->names = tpc__xcalloc(nv ? nv : 1, sizeof *out->names);
    out->highest = tpc__xcalloc(nv ? nv : 1, sizeof *out->highest);
    for (uint32_t v = 0; v < nv && !r.bad; v++) {
        out->names[v] = tpc__rd_string(&r);
        uint32_t h = tpc__rd_u32(&r);
        out->nvertices = (int)v + 1;
        if (h == 0 || h > 100000)
            goto bad;
        out->highest[v] = (int)h;
    }
    if (r.bad || r.off != r.len || !out->job_name)
        goto bad;
    return NULL;
bad:
    tpc__record_free(out);
    return damaged(path, "its contents do not match its size");
}

tpc_error_t *tpc__record_read(const char *dir, tpc__record_t *out, bool *found)
{
    *out = (tpc__record_t){0};
    *found = false;
    char *path = record_path(dir);
    uint8_t *p;
    size_t len;
    int errnum;
    tpc_error_t *err = tpc__file_read(path, &p, &len, &errnum);
    if (err && errnum == ENOENT) {
        tpc_error_destroy(err);
        err = NULL; /* no record: a new folder, or one of an older version */
    } else if (!err) {
        err = tpc__record_decode(path, p, len, out);
        *found = !err;
    }
    free(p);
    free(path);
    return err;
}

tpc_error_t *tpc__record_write(const char *dir, const tpc__record_t *rec)
{
    tpc__buf_t b = {0};
    tpc__buf_put(&b, RECORD_MAGIC, 8);
    tpc__buf_put_u32(&b, RECORD_VERSION);
    tpc__buf_put_bytes(&b, rec->job_name, strlen(rec->job_name));
    tpc__buf_put_u64(&b, rec->newest);
    tpc__buf_put_u64(&b, rec->first);
    tpc__buf_put_u32(&b, (uint32_t)rec->nvertices);
    for (int v = 0; v < rec->nvertices; v++) {
        tpc__buf_put_bytes(&b, rec->names[v], strlen(rec->names[v]));
        tpc__buf_put_u32(&b, (uint32_t)rec->highest[v]);
    }
    uint8_t digest[DIGEST];
    tpc__sha256(b.data, b.len, digest);
    tpc__buf_put(&b, digest, DIGEST);
    char *path = record_path(dir);
    tpc_error_t *err = tpc__file_replace(dir, path, b.data, b.len);
    free(path);
    tpc__buf_free(&b);
    return err;
}

int tpc__record_highest(const tpc__record_t *rec, const char *name)
{
    for (int v = 0; v < rec->nvertices; v++)
        if (strcmp(rec->names[v], name) == 0)
            return rec->highest[v];
    return 0;
}

bool tpc__record_note_parallelism(tpc__record_t *rec, const char *name, int parallelism)
{
    for (int v = 0; v < rec->nvertices; v++) {
        if (strcmp(rec->names[v], name) != 0)
            continue;
        if (rec->highest[v] >= parallelism)
            return false;
        rec->highest[v] = parallelism;
        return true;
    }
    rec->names = tpc__xrealloc(rec->names, (size_t)(rec->nvertices + 1) * sizeof *rec->names);
    rec->highest = tpc__xrealloc(rec->highest, (size_t)(rec->nvertices + 1) * sizeof *rec->highest);
    rec->names[rec->nvertices] = tpc__xstrdup(name);
    rec->highest[rec->nvertices++] = parallelism;
    return true;
}
