/*
 * Recovery: find the latest valid checkpoint in checkpoint.dir (a corrupt or torn one is reported
 * and skipped for the one before it) and hand each subtask its part of it. Vertices are matched by
 * name. A vertex whose subtasks had all closed is not run again: its subtasks start closed and
 * only send end of data. List state goes back to the subtask that wrote it when the parallelism is
 * unchanged and is spread round robin otherwise; union state goes to every subtask. A graph that
 * contradicts the finished state of the checkpoint is refused with a clear error.
 */
#include "tpc_task.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tpc_error_t *no_valid(const tpc_job_t *job, size_t n)
{
    return tpc_error_hint(
        tpc_error_new(TPC_ERR_CORRUPT, 0,
                      "none of the %zu checkpoints in \"%s\" is valid, refusing to start over", n,
                      job->conf.dir),
        "set \"restore.mode\" to \"fresh\" to start without state (sinks then may write again "
        "what the lost checkpoints covered), or restore a backup of the directory");
}

tpc_error_t *tpc__restore_load(tpc_job_t *job, tpc__checkpoint_t *out)
{
    *out = (tpc__checkpoint_t){0};
    tpc__checkpoint_file_t *files;
    size_t n;
    tpc_error_t *err = tpc__checkpoint_list(job->conf.dir, &files, &n);
    if (err)
        return err;
    /* Once this run has listed the directory, every id it took is below next_checkpoint_id: a
     * newer file came from elsewhere, and restoring it would take over from whoever wrote it. */
    if (job->dir_listed && n && files[0].id >= job->next_checkpoint_id) {
        err = tpc_error_prefix(tpc__checkpoint_other_writer(),
                               "\"%s\" holds checkpoint %" PRIu64 ", which this run of job \"%s\" "
                               "did not write (its newest is %" PRIu64 ")",
                               job->conf.dir, files[0].id, job->name, job->next_checkpoint_id - 1);
        tpc__checkpoint_files_free(files, n);
        return err;
    }
    job->dir_listed = true;
    /* New checkpoint ids go past every file seen, valid or not, so no id is ever reused. */
    if (n && files[0].id >= job->next_checkpoint_id)
        job->next_checkpoint_id = files[0].id + 1;
    if (job->conf.restore == TPC__RESTORE_FRESH) {
        tpc__checkpoint_files_free(files, n);
        return NULL;
    }
    size_t i = 0;
    for (; i < n; i++) {
        err = tpc__checkpoint_read(files[i].path, out);
        if (!err)
            break;
        tpc__logf(&job->log, TPC_LOG_ERROR, "skipping checkpoint %" PRIu64 ": %s", files[i].id,
                  tpc_error_message(err));
        tpc_error_destroy(err);
        err = NULL;
    }
    if (i < n && strcmp(out->job_name, job->name) != 0) {
        err = tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, 0,
                                           "checkpoint \"%s\" belongs to job \"%s\", not \"%s\"",
                                           files[i].path, out->job_name, job->name),
                             "give each job its own \"checkpoint.dir\"");
        tpc__checkpoint_free(out);
    } else if (i == n && n > 0) {
        err = no_valid(job, n);
    } else if (i == n && job->conf.restore == TPC__RESTORE_REQUIRED) {
        err = tpc_error_hint(
            tpc_error_new(TPC_ERR_NOT_FOUND, 0, "no checkpoint in \"%s\"", job->conf.dir),
            "\"restore.mode\" is \"required\"; use \"auto\" to start fresh");
    } else if (i < n) {
        tpc__logf(&job->log, TPC_LOG_INFO, "restoring job \"%s\" from \"%s\"", job->name,
                  files[i].path);
    }
    tpc__checkpoint_files_free(files, n);
    return err;
}

static const tpc__vertex_snapshot_t *find_vertex(const tpc__checkpoint_t *c, const char *name)
{
    for (int v = 0; v < c->nvertices; v++)
        if (strcmp(c->vertices[v].name, name) == 0)
            return &c->vertices[v];
    return NULL;
}

static bool any_finished(const tpc__vertex_snapshot_t *vs)
{
    for (int s = 0; s < vs->parallelism; s++)
        if (vs->subtasks[s].operator_finished || vs->subtasks[s].closed)
            return true;
    return false;
}

static tpc_error_t *graph_error(const char *fmt, const char *a, const char *b)
{
    return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, 0, fmt, a, b),
                          "restore with the graph the checkpoint was taken with, or set "
                          "\"restore.mode\" to \"fresh\"");
}

/* Check the graph against the finished state of the checkpoint. */
static tpc_error_t *check_graph(const tpc_job_t *job, const tpc__checkpoint_t *c)
{
    for (int v = 0; v < c->nvertices; v++) {
        bool found = false;
        for (int w = 0; w < job->nvertices; w++)
            found |= strcmp(job->vertices[w].name, c->vertices[v].name) == 0;
        if (!found)
            return graph_error("checkpoint has state for vertex \"%s\" that job \"%s\" lacks",
                               c->vertices[v].name, job->name);
    }
    for (int e = 0; e < job->nedges; e++) {
        const char *from = job->vertices[job->edges[e].from].name;
        const char *to = job->vertices[job->edges[e].to].name;
        const tpc__vertex_snapshot_t *vf = find_vertex(c, from), *vt = find_vertex(c, to);
        if (vt && tpc__vertex_fully_closed(vt) && !(vf && tpc__vertex_fully_closed(vf)))
            return graph_error("vertex \"%s\" finished in the checkpoint but its input \"%s\" "
                               "did not",
                               to, from);
    }
    for (int w = 0; w < job->nvertices; w++) {
        const tpc__vertex_snapshot_t *vs = find_vertex(c, job->vertices[w].name);
        if (!vs || vs->parallelism == job->vertices[w].parallelism || tpc__vertex_fully_closed(vs))
            continue;
        if (any_finished(vs)) {
            char par[64];
            snprintf(par, sizeof par, "%d to %d", vs->parallelism, job->vertices[w].parallelism);
            return graph_error("vertex \"%s\" is partly finished in the checkpoint and its "
                               "parallelism changed from %s",
                               vs->name, par);
        }
    }
    return NULL;
}

static void add_slices(tpc__slice_t **arr, size_t *n, const tpc__buf_t *b, uint32_t count)
{
    tpc__rd_t r = {b->data, b->len, 0, false};
    for (uint32_t i = 0; i < count; i++) {
        size_t len;
        const uint8_t *p = tpc__rd_bytes(&r, &len);
        *arr = tpc__xrealloc(*arr, (*n + 1) * sizeof(**arr));
        (*arr)[(*n)++] = (tpc__slice_t){p, len};
    }
}

tpc_error_t *tpc__restore_plan(tpc__attempt_t *a)
{
    const tpc__checkpoint_t *c = &a->restored;
    tpc_error_t *err = check_graph(a->job, c);
    if (err)
        return err;
    for (int i = 0; i < a->ntasks; i++) {
        tpc__task_t *t = &a->tasks[i];
        const tpc__vertex_t *vx = &a->job->vertices[t->vertex];
        const tpc__vertex_snapshot_t *vs = find_vertex(c, vx->name);
        if (!vs)
            continue; /* a vertex added since: starts without state */
        if (tpc__vertex_fully_closed(vs)) {
            t->start_closed = true;
            continue;
        }
        t->has_restored = true;
        tpc_state_reader_t *r = &t->restored;
        if (vs->parallelism == vx->parallelism) {
            const tpc__subtask_snapshot_t *ss = &vs->subtasks[t->subtask];
            t->start_closed = ss->closed;
            t->restored_finished = ss->operator_finished;
            add_slices(&r->list, &r->nlist, &ss->state.list, ss->state.nlist);
        } else {
            /* Round robin over the concatenation of every old subtask's list entries. */
            size_t k = 0;
            for (int s = 0; s < vs->parallelism; s++) {
                const tpc__subtask_snapshot_t *ss = &vs->subtasks[s];
                tpc__rd_t rd = {ss->state.list.data, ss->state.list.len, 0, false};
                for (uint32_t e = 0; e < ss->state.nlist; e++, k++) {
                    size_t len;
                    const uint8_t *p = tpc__rd_bytes(&rd, &len);
                    if ((int)(k % (size_t)vx->parallelism) != t->subtask)
                        continue;
                    r->list = tpc__xrealloc(r->list, (r->nlist + 1) * sizeof(*r->list));
                    r->list[r->nlist++] = (tpc__slice_t){p, len};
                }
            }
        }
        for (int s = 0; s < vs->parallelism; s++)
            add_slices(&r->uni, &r->nunion, &vs->subtasks[s].state.uni,
                       vs->subtasks[s].state.nunion);
    }
    return NULL;
}
