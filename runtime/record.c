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
 * The owner epoch says which process holds the checkpoints when a job runs as units on several
 * processes: a process that takes a unit over raises it by compare-and-set (tpc__record_claim()),
 * and an older owner, a zombie that resumes after the take-over, can then no longer write the
 * record, so it fails before it tells any sink that a checkpoint completed (docs/model.md,
 * "Owners of a unit"). Without owners the epoch is 0 and the record keeps its version 2 layout.
 *
 * Layout: magic "TPCDONE1", u32 version, job name (u32 length + bytes), u64 newest, u64 first
 * (version 2), u64 owner epoch (version 3), u32 vertex count, then per vertex its name and u32
 * highest parallelism, then a SHA-256 of all before it. Integers are encoded as in the checkpoint
 * files (docs/architecture.md). The record lives in the checkpoint storage (store.c) as
 * "completed".
 */
#include "runtime_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECORD_MAGIC   "TPCDONE1"
#define RECORD_VERSION 3u /* 1 had no first id, 2 no owner epoch */
#define RECORD_NAME    "completed"
#define DIGEST         32

/* The record's name in messages: a folder's file path, else where the store is and the name. */
static char *record_path(tpc_storage_t *st)
{
    const char *where = tpc__storage_where(st);
    size_t n = strlen(where) + sizeof RECORD_NAME + 1;
    char *p = tpc__xmalloc(n);
    snprintf(p, n, strcmp(st->ops->kind, "folder") == 0 ? "%s/%s" : "%s%s", where, RECORD_NAME);
    return p;
}

void tpc__record_free(tpc__record_t *rec)
{
    for (int v = 0; v < rec->nvertices; v++)
        free(rec->names[v]);
    free(rec->names);
    free(rec->highest);
    free(rec->job_name);
    free(rec->version);
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
    out->owner_epoch = version >= 3 ? tpc__rd_u64(&r) : 0;
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
    tpc__store_folder_t f;
    tpc__store_folder_init(&f, dir);
    return tpc__record_read_at(&f.base, out, found);
}

tpc_error_t *tpc__record_read_at(tpc_storage_t *st, tpc__record_t *out, bool *found)
{
    *out = (tpc__record_t){0};
    *found = false;
    uint8_t *p = NULL;
    size_t len = 0;
    char *version = NULL;
    bool there;
    /* no record: a new folder, or one of an older version */
    tpc_error_t *err = st->ops->get(st, RECORD_NAME, &p, &len, &version, &there);
    if (!err && there) {
        char *path = record_path(st);
        err = tpc__record_decode(path, p, len, out);
        free(path);
        *found = !err;
        if (!err) {
            out->version = version;
            version = NULL;
        }
    }
    free(version);
    free(p);
    return err;
}

static void encode(const tpc__record_t *rec, tpc__buf_t *b)
{
    tpc__buf_put(b, RECORD_MAGIC, 8);
    tpc__buf_put_u32(b, rec->owner_epoch ? 3u : 2u);
    tpc__buf_put_bytes(b, rec->job_name, strlen(rec->job_name));
    tpc__buf_put_u64(b, rec->newest);
    tpc__buf_put_u64(b, rec->first);
    if (rec->owner_epoch)
        tpc__buf_put_u64(b, rec->owner_epoch);
    tpc__buf_put_u32(b, (uint32_t)rec->nvertices);
    for (int v = 0; v < rec->nvertices; v++) {
        tpc__buf_put_bytes(b, rec->names[v], strlen(rec->names[v]));
        tpc__buf_put_u32(b, (uint32_t)rec->highest[v]);
    }
    uint8_t digest[DIGEST];
    tpc__sha256(b->data, b->len, digest);
    tpc__buf_put(b, digest, DIGEST);
}

static tpc_error_t *fenced(tpc_storage_t *st, const char *what)
{
    return tpc_error_hint(
        tpc_error_new(TPC_ERR_FENCED, TPC_ERROR_FATAL,
                      "the completion record in \"%s\" %s: another owner has taken the job's "
                      "checkpoints over, and this process must not tell any sink that a "
                      "checkpoint completed",
                      tpc__storage_where(st), what),
        "stop this process; the job runs on in the owner that took it over");
}

tpc_error_t *tpc__record_swap_at(tpc_storage_t *st, const tpc__record_t *rec, const char *expected,
                                 char **version)
{
    tpc__buf_t b = {0};
    encode(rec, &b);
    bool stale = false;
    tpc_error_t *err = st->ops->swap(st, RECORD_NAME, expected, b.data, b.len, &stale, version);
    tpc__buf_free(&b);
    if (!err && stale)
        err = fenced(st, expected == TPC_STORAGE_ABSENT ? "was created by another process"
                                                        : "changed since this process read it");
    return err;
}

tpc_error_t *tpc__record_swap(const char *dir, const tpc__record_t *rec, const char *expected,
                              char **version)
{
    tpc__store_folder_t f;
    tpc__store_folder_init(&f, dir);
    return tpc__record_swap_at(&f.base, rec, expected, version);
}

tpc_error_t *tpc__record_write(const char *dir, const tpc__record_t *rec)
{
    return tpc__record_swap(dir, rec, TPC_STORAGE_ANY, NULL);
}

tpc_error_t *tpc__record_claim_at(tpc_storage_t *st, const char *job, uint64_t epoch,
                                  tpc__record_t *out)
{
    for (;;) {
        bool found;
        tpc_error_t *err = tpc__record_read_at(st, out, &found);
        if (err)
            return err;
        if (found && out->owner_epoch >= epoch) {
            char what[96];
            snprintf(what, sizeof what, "holds owner epoch %" PRIu64 ", not older than %" PRIu64,
                     out->owner_epoch, epoch);
            tpc__record_free(out);
            return fenced(st, what);
        }
        if (!found)
            out->job_name = tpc__xstrdup(job);
        char *expected = out->version; /* NULL when there is none: TPC_STORAGE_ABSENT */
        out->version = NULL;
        out->owner_epoch = epoch;
        err = tpc__record_swap_at(st, out, expected, &out->version);
        free(expected);
        if (!err)
            return NULL;
        tpc__record_free(out);
        if (tpc_error_code(err) != TPC_ERR_FENCED)
            return err;
        tpc_error_destroy(err); /* another writer came first: read again */
    }
}

tpc_error_t *tpc__record_owned_at(tpc_storage_t *st, uint64_t epoch)
{
    tpc__record_t rec;
    bool found;
    tpc_error_t *err = tpc__record_read_at(st, &rec, &found);
    if (!err && (!found || rec.owner_epoch != epoch)) {
        char what[96];
        snprintf(what, sizeof what, "holds owner epoch %" PRIu64 ", not %" PRIu64,
                 found ? rec.owner_epoch : 0, epoch);
        err = fenced(st, what);
    }
    tpc__record_free(&rec);
    return err;
}

tpc_error_t *tpc__record_claim(const char *dir, const char *job, uint64_t epoch, tpc__record_t *out)
{
    tpc__store_folder_t f;
    tpc__store_folder_init(&f, dir);
    return tpc__record_claim_at(&f.base, job, epoch, out);
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
