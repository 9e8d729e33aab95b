/*
 * A checkpoint folder as a restart sees it: the checkpoint files (read and checked with the
 * runtime's own decoder), the completion record, which of the files a restart restores, and the
 * sinks' transaction handles in it, decoded by the connectors' own deserializers. Nothing here
 * writes to the folder.
 */
#include "file_internal.h"
#include "kafka_sink_internal.h"
#include "pg_internal.h"
#include "runtime_internal.h"
#include "twopc_cli.h"
#include "txn_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char *dup_or_die(const char *s)
{
    char *d = strdup(s ? s : "");
    if (!d)
        abort();
    return d;
}

/* Decode @handle of a sink entry: whichever connector's deserializer takes it names it. */
static void describe_handle(const tpc__txn_entry_t *e, twopc_txn_t *t)
{
    void *txn = NULL;
    tpc_error_t *err = tpc__kafka_ops.deserialize(NULL, e->handle, e->handle_len, &txn);
    if (!err) {
        const tpc__kafka_txn_t *k = txn;
        t->connector = "kafka";
        snprintf(t->id, sizeof t->id, "%s", k->id);
        t->producer_id = k->pid;
        t->producer_epoch = k->epoch;
        t->kafka_start_ms = k->start_ms;
        tpc__kafka_ops.describe(NULL, txn, t->name, sizeof t->name);
        tpc__kafka_ops.free_txn(NULL, txn);
        return;
    }
    tpc_error_destroy(err);
    err = tpc__pg_ops.deserialize(NULL, e->handle, e->handle_len, &txn);
    if (!err) {
        t->connector = "postgres";
        snprintf(t->id, sizeof t->id, "%s", ((const tpc__pg_txn_t *)txn)->gid);
        snprintf(t->name, sizeof t->name, "%s", t->id);
        tpc__pg_ops.free_txn(NULL, txn);
        return;
    }
    tpc_error_destroy(err);
    err = tpc__file_ops.deserialize(NULL, e->handle, e->handle_len, &txn);
    if (!err) {
        const tpc__file_txn_t *f = txn;
        t->connector = "file";
        snprintf(t->name, sizeof t->name, "subtask %d, %u part files, token %llu", f->subtask,
                 (unsigned)f->nparts, (unsigned long long)f->token);
        tpc__file_ops.free_txn(NULL, txn);
        return;
    }
    tpc_error_destroy(err);
    t->connector = "unknown";
    snprintf(t->name, sizeof t->name, "handle of %zu bytes", e->handle_len);
}

/* Every entry of a subtask's list, union and owned state that is a transaction entry. */
static void collect(twopc_checkpoint_t *c, const tpc__vertex_snapshot_t *vs, int s)
{
    const tpc_state_writer_t *w = &vs->subtasks[s].state;
    const tpc__buf_t *bufs[] = {&w->list, &w->uni, &w->owned};
    const uint32_t counts[] = {w->nlist, w->nunion, w->nowned};
    for (int k = 0; k < 3; k++) {
        tpc__rd_t r = {bufs[k]->data, bufs[k]->len, 0, false};
        for (uint32_t i = 0; i < counts[k] && !r.bad; i++) {
            size_t len;
            const uint8_t *p = tpc__rd_bytes(&r, &len);
            tpc__txn_entry_t e;
            tpc_error_t *err = p ? tpc__txn_entry_decode(p, len, &e) : NULL;
            if (!p || err) {
                tpc_error_destroy(err);
                continue;
            }
            c->txns = realloc(c->txns, (c->ntxns + 1) * sizeof *c->txns);
            if (!c->txns)
                abort();
            twopc_txn_t *t = &c->txns[c->ntxns++];
            *t = (twopc_txn_t){
                .sink = vs->name,
                .subtask = s,
                .origin = e.origin,
                .kind = e.kind == TPC__TXN_PENDING ? TWOPC_TXN_PENDING : TWOPC_TXN_CURRENT,
                .checkpoint = e.checkpoint_id,
                .start_ms = e.start_ms,
                .producer_id = -1,
                .producer_epoch = -1,
                .kafka_start_ms = -1,
            };
            describe_handle(&e, t);
        }
    }
}

void twopc_folder_load(twopc_folder_t *f, size_t index)
{
    twopc_checkpoint_t *c = &f->files[index];
    if (c->checkpoint || c->error)
        return;
    tpc__checkpoint_t *ck = calloc(1, sizeof *ck);
    if (!ck)
        abort();
    tpc_error_t *err = tpc__checkpoint_read(c->path, ck);
    if (err) {
        c->error = dup_or_die(tpc_error_message(err));
        tpc_error_destroy(err);
        free(ck);
        return;
    }
    c->valid = true;
    c->checkpoint = ck;
    for (int v = 0; v < ck->nvertices; v++)
        for (int s = 0; s < ck->vertices[v].parallelism; s++)
            collect(c, &ck->vertices[v], s);
}

tpc_error_t *twopc_folder_read(const char *dir, bool load_all, twopc_folder_t *out)
{
    *out = (twopc_folder_t){.restore_index = -1};
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return tpc_error_hint(tpc_error_new(TPC_ERR_NOT_FOUND, 0, "\"%s\" is not a directory", dir),
                              "give the job's \"checkpoint.dir\"");
    tpc__record_t rec;
    tpc_error_t *err = tpc__record_read(dir, &rec, &out->record_found);
    if (err) {
        out->record_error = dup_or_die(tpc_error_message(err));
        tpc_error_destroy(err);
    } else if (out->record_found) {
        out->record_newest = rec.newest;
        out->record_job = dup_or_die(rec.job_name);
        tpc__record_free(&rec);
    }
    tpc__checkpoint_file_t *files;
    size_t n;
    err = tpc__checkpoint_list(dir, &files, &n);
    if (err)
        return err;
    out->files = calloc(n ? n : 1, sizeof *out->files);
    if (!out->files)
        abort();
    out->nfiles = n;
    for (size_t i = 0; i < n; i++) {
        twopc_checkpoint_t *c = &out->files[i];
        c->path = dup_or_die(files[i].path);
        c->id = files[i].id;
        c->savepoint = files[i].savepoint;
        c->size = stat(c->path, &st) == 0 ? (int64_t)st.st_size : -1;
    }
    tpc__checkpoint_files_free(files, n);
    /* As restore.c picks: the newest completed checkpoint, by the record when there is one (files
     * newer than it were never announced to a sink), else the newest file. */
    for (size_t i = 0; i < n; i++) {
        if (out->record_found && out->files[i].id > out->record_newest)
            continue;
        out->restore_index = (long)i;
        break;
    }
    for (size_t i = 0; i < n; i++)
        if (load_all || (long)i == out->restore_index)
            twopc_folder_load(out, i);
    return NULL;
}

void twopc_folder_free(twopc_folder_t *f)
{
    for (size_t i = 0; i < f->nfiles; i++) {
        twopc_checkpoint_t *c = &f->files[i];
        if (c->checkpoint)
            tpc__checkpoint_free(c->checkpoint);
        free(c->checkpoint);
        free(c->txns);
        free(c->path);
        free(c->error);
    }
    free(f->files);
    free(f->record_job);
    free(f->record_error);
    *f = (twopc_folder_t){0};
}

const char *twopc_checkpoint_job(const twopc_checkpoint_t *c)
{
    return ((const tpc__checkpoint_t *)c->checkpoint)->job_name;
}

int64_t twopc_checkpoint_time_ms(const twopc_checkpoint_t *c)
{
    return (int64_t)((const tpc__checkpoint_t *)c->checkpoint)->timestamp_ms;
}

int twopc_checkpoint_max_parallelism(const twopc_checkpoint_t *c)
{
    return (int)((const tpc__checkpoint_t *)c->checkpoint)->max_parallelism;
}

int twopc_checkpoint_vertex_count(const twopc_checkpoint_t *c)
{
    return ((const tpc__checkpoint_t *)c->checkpoint)->nvertices;
}

const char *twopc_checkpoint_vertex(const twopc_checkpoint_t *c, int v, int *parallelism)
{
    const tpc__vertex_snapshot_t *vs = &((const tpc__checkpoint_t *)c->checkpoint)->vertices[v];
    *parallelism = vs->parallelism;
    return vs->name;
}

void twopc_checkpoint_subtask(const twopc_checkpoint_t *c, int v, int s, bool *closed,
                              bool *finished, size_t *state_entries, size_t *state_bytes)
{
    const tpc__subtask_snapshot_t *ss =
        &((const tpc__checkpoint_t *)c->checkpoint)->vertices[v].subtasks[s];
    *closed = ss->closed;
    *finished = ss->operator_finished;
    const tpc_state_writer_t *w = &ss->state;
    *state_entries = (size_t)w->nlist + w->nunion + w->nowned + w->nkeyed;
    *state_bytes = w->list.len + w->uni.len + w->owned.len + w->keyed.len;
}
