/*
 * A checkpoint folder as a restart sees it: the checkpoint files, the completion record and which
 * of the files a restart restores, read by the library (tpc_checkpoint_folder_read()), and the
 * sinks' transaction handles in it (tpc_txn_checkpoint_handles()), each described by the connector
 * its envelope names. Handles of earlier versions name no connector: they are shown as unknown,
 * never guessed at; a command that looks at one system (twopc pg, twopc kafka) asks that system's
 * connector alone about them. Nothing here writes to the folder.
 */
#include "tpc_file.h"
#include "tpc_kafka.h"
#include "tpc_pg.h"
#include "twopc_cli.h"

#include <stdlib.h>
#include <string.h>

/* The connectors this command knows, by the name their envelopes carry. */
static const tpc_txn_connector_ops_t *connector_named(const char *name)
{
    const tpc_txn_connector_ops_t *known[] = {tpc_kafka_sink_ops(), tpc_pg_sink_ops(),
                                              tpc_file_sink_ops()};
    for (size_t i = 0; name && i < sizeof known / sizeof *known; i++)
        if (strcmp(known[i]->name, name) == 0)
            return known[i];
    return NULL;
}

static void collect(twopc_checkpoint_t *c)
{
    size_t n = 0;
    tpc_error_t *err = tpc_txn_checkpoint_handles(c->checkpoint, &c->handles, &n);
    if (err) {
        tpc_error_destroy(err); /* out of memory: shown as no transactions */
        return;
    }
    c->txns = calloc(n ? n : 1, sizeof *c->txns);
    if (!c->txns)
        abort();
    c->ntxns = n;
    for (size_t i = 0; i < n; i++) {
        const tpc_txn_checkpoint_handle_t *h = &c->handles[i];
        twopc_txn_t *t = &c->txns[i];
        *t = (twopc_txn_t){
            .sink = h->sink,
            .subtask = h->subtask,
            .origin = h->origin,
            .kind = h->pending ? TWOPC_TXN_PENDING : TWOPC_TXN_CURRENT,
            .checkpoint = h->checkpoint,
            .start_ms = h->start_ms,
            .connector = h->connector ? h->connector : "unknown",
            .named = h->connector != NULL,
            .handle = h->handle,
            .handle_len = h->handle_len,
        };
        if (t->named)
            tpc_txn_describe_handle(connector_named(h->connector), h->handle, h->handle_len,
                                    &t->view);
        else
            snprintf(t->view.line, sizeof t->view.line,
                     "handle of %zu bytes, of a version that did not name its connector",
                     h->handle_len);
    }
}

/* The tool's view of file @i mirrors the library's, which loading changes. */
static void mirror(twopc_folder_t *f, size_t i)
{
    const tpc_checkpoint_info_t *info = &f->dir.files[i];
    twopc_checkpoint_t *c = &f->files[i];
    c->path = info->path;
    c->id = info->id;
    c->savepoint = info->savepoint;
    c->size = info->size;
    c->valid = info->checkpoint != NULL;
    c->error = info->error;
    c->status = tpc_checkpoint_status_name(info->status);
    if (info->checkpoint && !c->checkpoint) {
        c->checkpoint = info->checkpoint;
        collect(c);
    }
}

void twopc_folder_load(twopc_folder_t *f, size_t index)
{
    tpc_checkpoint_folder_load(&f->dir, index);
    mirror(f, index);
}

tpc_error_t *twopc_folder_read(const char *dir, bool load_all, twopc_folder_t *out)
{
    *out = (twopc_folder_t){.restore_index = -1};
    tpc_error_t *err = tpc_checkpoint_folder_read(dir, load_all, &out->dir);
    if (err) {
        tpc_checkpoint_folder_free(&out->dir);
        return err;
    }
    out->nfiles = out->dir.nfiles;
    out->files = calloc(out->nfiles ? out->nfiles : 1, sizeof *out->files);
    if (!out->files)
        abort();
    for (size_t i = 0; i < out->nfiles; i++)
        mirror(out, i);
    out->record_found = out->dir.record_found;
    out->record_newest = out->dir.record_newest;
    out->record_job = out->dir.record_job;
    out->record_error = out->dir.record_error;
    out->restore_index = out->dir.restore_index;
    return NULL;
}

tpc_error_t *twopc_folder_refusal(const twopc_folder_t *f)
{
    if (!f->dir.restore_refusal)
        return NULL;
    tpc_error_t *err =
        tpc_error_new(TPC_ERR_STATE, 0, "a restart would refuse: %s", f->dir.restore_refusal);
    return f->dir.restore_hint ? tpc_error_hint(err, "%s", f->dir.restore_hint) : err;
}

void twopc_folder_free(twopc_folder_t *f)
{
    for (size_t i = 0; i < f->nfiles; i++) {
        free(f->files[i].txns);
        tpc_txn_checkpoint_handles_free(f->files[i].handles, f->files[i].ntxns);
    }
    free(f->files);
    tpc_checkpoint_folder_free(&f->dir);
    *f = (twopc_folder_t){.restore_index = -1};
}

bool twopc_txn_of(const twopc_txn_t *t, const tpc_txn_connector_ops_t *ops,
                  tpc_txn_handle_view_t *view)
{
    if (t->named) {
        if (strcmp(t->connector, ops->name) != 0)
            return false;
        *view = t->view;
        return true;
    }
    if (ops->version < 4 || !ops->describe_handle)
        return false;
    *view = (tpc_txn_handle_view_t){0};
    tpc_error_t *err = ops->describe_handle(t->handle, t->handle_len, view);
    tpc_error_destroy(err);
    return err == NULL;
}

const char *twopc_view_text(const tpc_txn_handle_view_t *view, const char *name)
{
    for (int i = 0; i < view->nfields; i++)
        if (!view->fields[i].is_number && strcmp(view->fields[i].name, name) == 0)
            return view->fields[i].text;
    return NULL;
}

int64_t twopc_view_number(const tpc_txn_handle_view_t *view, const char *name, int64_t dflt)
{
    for (int i = 0; i < view->nfields; i++)
        if (view->fields[i].is_number && strcmp(view->fields[i].name, name) == 0)
            return view->fields[i].number;
    return dflt;
}
