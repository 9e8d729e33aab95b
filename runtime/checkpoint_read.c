/*
 * A checkpoint folder read from outside a job, for the operator's tools and for programs that look
 * before they restart: the checkpoint files (decoded and checked with the same code recovery uses),
 * the completion record, and which file a restart restores, picked by restore.c's rule. Nothing
 * here writes to the folder or takes its lease. Each subtask's list, union and owned entries are
 * handed out through the public state reader, so that the layers above (the transactional sinks'
 * handles) read their own entries without knowing the file format.
 */
#include "runtime_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct tpc_checkpoint_s {
    tpc__checkpoint_t ck;
    tpc_state_reader_t *readers; /* per subtask, vertex after vertex */
    int *first;                  /* index in readers of each vertex's subtask 0 */
};

static void checkpoint_free(tpc_checkpoint_t *c)
{
    if (!c)
        return;
    int total = c->ck.nvertices ? c->first[c->ck.nvertices] : 0;
    for (int i = 0; c->readers && i < total; i++)
        tpc__state_reader_free(&c->readers[i]);
    free(c->readers);
    free(c->first);
    tpc__checkpoint_free(&c->ck);
    free(c);
}

static tpc_checkpoint_t *checkpoint_index(tpc_checkpoint_t *c)
{
    c->first = tpc__xcalloc((size_t)c->ck.nvertices + 1, sizeof *c->first);
    for (int v = 0; v < c->ck.nvertices; v++)
        c->first[v + 1] = c->first[v] + c->ck.vertices[v].parallelism;
    c->readers = tpc__xcalloc(c->first[c->ck.nvertices] ? (size_t)c->first[c->ck.nvertices] : 1,
                              sizeof *c->readers);
    for (int v = 0; v < c->ck.nvertices; v++)
        for (int s = 0; s < c->ck.vertices[v].parallelism; s++) {
            const tpc_state_writer_t *w = &c->ck.vertices[v].subtasks[s].state;
            tpc_state_reader_t *r = &c->readers[c->first[v] + s];
            tpc__state_reader_add(r, TPC_STATE_LIST, &w->list, w->nlist);
            tpc__state_reader_add(r, TPC_STATE_UNION, &w->uni, w->nunion);
            tpc__state_reader_add(r, TPC_STATE_OWNED, &w->owned, w->nowned);
        }
    return c;
}

const char *tpc_checkpoint_status_name(tpc_checkpoint_status_t status)
{
    switch (status) {
    case TPC_CHECKPOINT_RESTORE:
        return "restore";
    case TPC_CHECKPOINT_OLDER:
        return "older";
    case TPC_CHECKPOINT_NOT_COMPLETED:
        return "not-completed";
    case TPC_CHECKPOINT_DAMAGED:
        return "damaged";
    }
    return "unknown";
}

void tpc_checkpoint_folder_load(tpc_checkpoint_folder_t *f, size_t index)
{
    tpc_checkpoint_info_t *info = &f->files[index];
    if (info->checkpoint || info->error)
        return;
    tpc_checkpoint_t *c = tpc__xcalloc(1, sizeof *c);
    tpc_error_t *err = tpc__checkpoint_read(info->path, &c->ck);
    if (err) {
        info->error = tpc__xstrdup(tpc_error_message(err));
        info->status = TPC_CHECKPOINT_DAMAGED;
        tpc_error_destroy(err);
        free(c);
        return;
    }
    info->checkpoint = checkpoint_index(c);
}

tpc_error_t *tpc_checkpoint_folder_read(const char *dir, bool load_all,
                                        tpc_checkpoint_folder_t *out)
{
    *out = (tpc_checkpoint_folder_t){.restore_index = -1};
    struct stat st;
    if (!dir || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return tpc_error_hint(
            tpc_error_new(TPC_ERR_NOT_FOUND, 0, "\"%s\" is not a directory", dir ? dir : "(null)"),
            "give the job's \"checkpoint.dir\"");
    tpc__record_t rec = {0};
    tpc_error_t *err = tpc__record_read(dir, &rec, &out->record_found);
    if (err) {
        /* The job refuses too: a damaged record cannot say what the sinks may have committed. */
        out->record_error = tpc__xstrdup(tpc_error_message(err));
        out->restore_refusal = tpc__xstrdup(tpc_error_message(err));
        tpc_error_destroy(err);
    } else if (out->record_found) {
        out->record_newest = rec.newest;
        out->record_job = tpc__xstrdup(rec.job_name ? rec.job_name : "");
    }
    tpc__checkpoint_file_t *files;
    size_t n;
    err = tpc__checkpoint_list(dir, &files, &n);
    if (err) {
        tpc__record_free(&rec);
        return err;
    }
    /* The job's own rule picks the checkpoint a restart restores, or gives its refusal. */
    size_t picked = n;
    tpc_error_t *refusal =
        out->restore_refusal
            ? NULL
            : tpc__restore_pick(dir, NULL, files, n, out->record_found ? &rec : NULL, &picked);
    if (refusal) {
        out->restore_refusal = tpc__xstrdup(tpc_error_message(refusal));
        if (tpc_error_hint_text(refusal))
            out->restore_hint = tpc__xstrdup(tpc_error_hint_text(refusal));
        tpc_error_destroy(refusal);
    }
    uint64_t bound = out->record_found ? rec.newest : n ? files[0].id : 0;
    tpc__record_free(&rec);
    out->files = tpc__xcalloc(n ? n : 1, sizeof *out->files);
    out->nfiles = n;
    for (size_t i = 0; i < n; i++) {
        tpc_checkpoint_info_t *c = &out->files[i];
        c->path = tpc__xstrdup(files[i].path);
        c->id = files[i].id;
        c->savepoint = files[i].savepoint;
        c->size = stat(c->path, &st) == 0 ? (int64_t)st.st_size : -1;
    }
    tpc__checkpoint_files_free(files, n);
    /* Newer than the record: no sink was told of it (restored only if complete and the newest
     * such, as the pick says); anything else but the pick is older. */
    for (size_t i = 0; i < n; i++)
        out->files[i].status = i == picked                ? TPC_CHECKPOINT_RESTORE
                               : out->files[i].id > bound ? TPC_CHECKPOINT_NOT_COMPLETED
                                                          : TPC_CHECKPOINT_OLDER;
    if (picked < n)
        out->restore_index = (long)picked;
    for (size_t i = 0; i < n; i++)
        if (load_all || (long)i == out->restore_index)
            tpc_checkpoint_folder_load(out, i);
    return NULL;
}

void tpc_checkpoint_folder_free(tpc_checkpoint_folder_t *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->nfiles; i++) {
        checkpoint_free(f->files[i].checkpoint);
        free(f->files[i].path);
        free(f->files[i].error);
    }
    free(f->files);
    free(f->record_job);
    free(f->record_error);
    free(f->restore_refusal);
    free(f->restore_hint);
    *f = (tpc_checkpoint_folder_t){.restore_index = -1};
}

const char *tpc_checkpoint_job(const tpc_checkpoint_t *c)
{
    return c->ck.job_name;
}

int64_t tpc_checkpoint_time_ms(const tpc_checkpoint_t *c)
{
    return (int64_t)c->ck.timestamp_ms;
}

int tpc_checkpoint_max_parallelism(const tpc_checkpoint_t *c)
{
    return (int)c->ck.max_parallelism;
}

int tpc_checkpoint_vertex_count(const tpc_checkpoint_t *c)
{
    return c->ck.nvertices;
}

const char *tpc_checkpoint_vertex(const tpc_checkpoint_t *c, int v, int *parallelism)
{
    *parallelism = c->ck.vertices[v].parallelism;
    return c->ck.vertices[v].name;
}

void tpc_checkpoint_subtask(const tpc_checkpoint_t *c, int v, int s, tpc_checkpoint_subtask_t *out)
{
    const tpc__subtask_snapshot_t *ss = &c->ck.vertices[v].subtasks[s];
    const tpc_state_writer_t *w = &ss->state;
    *out = (tpc_checkpoint_subtask_t){
        .closed = ss->closed,
        .finished = ss->operator_finished,
        .state_entries = (size_t)w->nlist + w->nunion + w->nowned + w->nkeyed,
        .state_bytes = w->list.len + w->uni.len + w->owned.len + w->keyed.len,
    };
}

const tpc_state_reader_t *tpc_checkpoint_state(const tpc_checkpoint_t *c, int v, int s)
{
    return &c->readers[c->first[v] + s];
}
