/*
 * Recovery: find the checkpoint to restore in checkpoint.dir and hand each subtask its part of it.
 * The rule: a restore never goes behind the newest completed checkpoint, as the completion record
 * (record.c) and this run remember it, because the sinks may have committed it. When that
 * checkpoint is damaged or gone the job refuses, saying which and what the operator can do
 * (restore.fallback=at-least-once takes an older one with a loud warning); a damaged file newer
 * than the record was never announced to a sink and is skipped. Vertices are matched by
 * name. A vertex whose subtasks had all closed is not run again: its subtasks start closed and
 * only send end of data. List state goes back to the subtask that wrote it when the parallelism is
 * unchanged and is spread round robin otherwise; union state goes to every subtask. A graph that
 * contradicts the finished state of the checkpoint is refused with a clear error.
 */
#include "runtime_task.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What an operator can do when the checkpoint the sinks may have committed cannot be restored. */
static const char refuse_hint[] =
    "copy the checkpoint back from a backup; or set \"restore.fallback\" to \"at-least-once\" to "
    "restore the newest older valid checkpoint (the sinks then write again what the lost ones "
    "covered: duplicates); or set \"restore.mode\" to \"fresh\" to start over without state";

static tpc_error_t *refuse(const char *job, tpc_err_t code, const char *fmt, uint64_t id,
                           const char *where)
{
    tpc_error_t *err = tpc_error_new(code, TPC_ERROR_FATAL, fmt, id, where);
    return tpc_error_hint(tpc_error_prefix(err, "job \"%s\" refuses to restore", job), refuse_hint);
}

/* The inputs of the restore rule (tpc__restore_pick()): the job, its storage and where that is,
 * whether restore.fallback=at-least-once is set, and where its lines go (NULL: nowhere, for a
 * look). With owners (@owners), a file newer than the record is restored only if the owner epoch
 * @epoch wrote it: the epoch the record carried when this owner took the job over (a crash of
 * that owner between its file and the record), never an older one (a zombie's file, which no sink
 * was told of and whose transactions a take-over may have aborted). */
typedef struct {
    const char *job, *dir;
    tpc_storage_t *st;
    bool fallback, owners;
    uint64_t epoch;
    const tpc__logger_t *log;
} rule_t;

static void note(const rule_t *r, const char *fmt, ...) TPC_PRINTF(2, 3);
static void note(const rule_t *r, const char *fmt, ...)
{
    if (!r->log)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tpc__logf(r->log, TPC_LOG_ERROR, "%s", msg);
}

/* The newest checkpoint the sinks may have acted on: the completion record, what this run
 * completed, and, without a record (a directory of an older version, or a record deleted by
 * hand), the newest checkpoint file, which was complete when it was written. */
static uint64_t newest_completed(const tpc_job_t *job, const tpc__checkpoint_file_t *files,
                                 size_t n)
{
    uint64_t bound = job->record_found ? job->record.newest : 0;
    if (job->run_newest > bound)
        bound = job->run_newest;
    if (!job->record_found && n && files[0].id > bound)
        bound = files[0].id;
    return bound;
}

static tpc_error_t *missing(const rule_t *r, uint64_t bound)
{
    return refuse(r->job, TPC_ERR_NOT_FOUND,
                  "checkpoint %" PRIu64 " completed, and the sinks may have committed it, but its "
                  "file is missing from \"%s\"",
                  bound, r->dir);
}

static const tpc__vertex_snapshot_t *find_vertex(const tpc__checkpoint_t *c, const char *name);

/* Append the keyed entries of @p from to @p to, leaving out timers (the newest link holds them
 * all). */
static void add_link_entries(tpc_state_writer_t *to, const tpc_state_writer_t *from)
{
    tpc__rd_t rd = {from->keyed.data, from->keyed.len, 0, false};
    for (uint32_t e = 0; e < from->nkeyed; e++) {
        size_t len;
        const uint8_t *p = tpc__rd_bytes(&rd, &len);
        tpc__keyed_entry_t ke;
        if (tpc__keyed_parse(p, len, &ke) && ke.kind == TPC__KEYED_TIMER)
            continue;
        tpc__buf_put_bytes(&to->keyed, p, len);
        to->nkeyed++;
    }
}

static tpc_error_t *link_error(tpc_err_t code, uint64_t link, const char *what)
{
    return tpc_error_new(code, TPC_ERROR_FATAL,
                         "its keyed state is incremental and builds on checkpoint %" PRIu64
                         ", which %s",
                         link, what);
}

/* Read checkpoint @p files[i] into @p out and, when its keyed state is incremental, the links it
 * builds on: each subtask's keyed entries become those of its chain in order (full snapshot,
 * then each increment, deletes included), as if the checkpoint held them all. A link that is
 * missing, damaged or does not continue the chain makes the checkpoint unusable, like a damaged
 * file. The links are read one at a time. */
static tpc_error_t *read_chain(tpc_storage_t *st, const tpc__checkpoint_file_t *files, size_t n,
                               size_t i, tpc__checkpoint_t *out)
{
    tpc_error_t *err = tpc__checkpoint_read_at(st, &files[i], out);
    if (err || !out->nrefs)
        return err;
    /* The entries each subtask's chain gives it so far. */
    tpc_state_writer_t **acc = tpc__xcalloc((size_t)out->nvertices, sizeof *acc);
    for (int v = 0; v < out->nvertices; v++)
        acc[v] = tpc__xcalloc((size_t)out->vertices[v].parallelism, sizeof **acc);
    for (uint32_t r = 0; r < out->nrefs && !err; r++) {
        uint64_t id = out->refs[r];
        size_t f = n;
        for (size_t j = 0; j < n && f == n; j++)
            if (files[j].id == id)
                f = j;
        if (f == n) {
            err = link_error(TPC_ERR_NOT_FOUND, id, "is missing");
            break;
        }
        tpc__checkpoint_t link;
        err = tpc__checkpoint_read_at(st, &files[f], &link);
        if (err) {
            err = tpc_error_prefix(err,
                                   "its keyed state is incremental and builds on checkpoint "
                                   "%" PRIu64 ", which is damaged",
                                   id);
            break;
        }
        for (int v = 0; v < out->nvertices && !err; v++) {
            const tpc__vertex_snapshot_t *vs = &out->vertices[v];
            for (int s = 0; s < vs->parallelism && !err; s++) {
                const tpc_state_writer_t *w = &vs->subtasks[s].state;
                uint32_t at = 0;
                while (at < w->nlinks && w->links[at] != id)
                    at++;
                if (at == w->nlinks)
                    continue;
                const tpc__vertex_snapshot_t *lv = find_vertex(&link, vs->name);
                const tpc_state_writer_t *lw =
                    lv && lv->parallelism == vs->parallelism ? &lv->subtasks[s].state : NULL;
                /* The link's own chain must be this chain up to it. */
                bool continues =
                    lw && lw->nlinks == at && strcmp(link.job_name, out->job_name) == 0;
                for (uint32_t x = 0; continues && x < at; x++)
                    continues = lw->links[x] == w->links[x];
                if (!continues) {
                    char what[256];
                    snprintf(what, sizeof what, "does not hold the chain's part of \"%s\"[%d]",
                             vs->name, s);
                    err = link_error(TPC_ERR_CORRUPT, id, what);
                    break;
                }
                add_link_entries(&acc[v][s], lw);
            }
        }
        tpc__checkpoint_free(&link);
    }
    for (int v = 0; v < out->nvertices; v++) {
        for (int s = 0; s < out->vertices[v].parallelism; s++) {
            tpc_state_writer_t *w = &out->vertices[v].subtasks[s].state, *a = &acc[v][s];
            if (!err && w->nlinks) {
                tpc__buf_put(&a->keyed, w->keyed.data, w->keyed.len);
                tpc__buf_free(&w->keyed);
                w->keyed = a->keyed;
                w->nkeyed += a->nkeyed;
                a->keyed = (tpc__buf_t){0};
            }
            tpc__buf_free(&a->keyed);
        }
        free(acc[v]);
    }
    free(acc);
    if (err)
        tpc__checkpoint_free(out);
    return err;
}

/* Pick the checkpoint to restore from @files (newest first, none below @lowest); *picked stays n
 * for none. A file newer than @bound was written but no sink was told of it (the record is written
 * first): damaged, it is skipped safely. The checkpoint at @bound must be there and valid:
 * anything older misses what the sinks may have committed since, and is taken only with
 * restore.fallback=at-least-once, loudly. */
static tpc_error_t *pick(const rule_t *r, tpc__checkpoint_file_t *files, size_t n, uint64_t bound,
                         uint64_t lowest, tpc__checkpoint_t *out, size_t *picked)
{
    bool fallback = r->fallback, damaged = false;
    *picked = n;
    for (size_t i = 0; i < n && files[i].id >= lowest; i++) {
        if (files[i].id < bound && !damaged && !fallback)
            return missing(r, bound);
        tpc_error_t *err = read_chain(r->st, files, n, i, out);
        if (!err && r->owners && files[i].id > bound && out->owner_epoch != r->epoch) {
            note(r,
                 "skipping checkpoint %" PRIu64 ", written by owner epoch %" PRIu64
                 " after the job's checkpoints were taken over (owner epoch %" PRIu64
                 "): no sink was told of it",
                 files[i].id, out->owner_epoch, r->epoch);
            tpc__checkpoint_free(out);
            continue;
        }
        if (err && files[i].id > bound) {
            note(r, "skipping checkpoint %" PRIu64 ", which no sink was told of: %s", files[i].id,
                 tpc_error_message(err));
            tpc_error_destroy(err);
            continue;
        }
        if (err && !fallback)
            return tpc_error_hint(
                tpc_error_prefix(tpc_error_prefix(err,
                                                  "checkpoint %" PRIu64
                                                  " completed, and the sinks may have committed "
                                                  "it, but is damaged",
                                                  files[i].id),
                                 "job \"%s\" refuses to restore", r->job),
                refuse_hint);
        if (err) {
            note(r, "checkpoint %" PRIu64 " is damaged: %s", files[i].id, tpc_error_message(err));
            tpc_error_destroy(err);
            damaged = true;
            continue;
        }
        if (files[i].id < bound)
            note(r,
                 "AT-LEAST-ONCE: checkpoint %" PRIu64 " completed but is %s; restoring the older "
                 "checkpoint %" PRIu64 " as restore.fallback=at-least-once asks: the sinks write "
                 "again what the checkpoints after it covered",
                 bound, damaged ? "damaged" : "missing", files[i].id);
        *picked = i;
        return NULL;
    }
    if (bound == 0 || bound < lowest)
        return NULL; /* nothing completed: a fresh start loses nothing */
    if (!fallback)
        return missing(r, bound);
    note(r,
         "AT-LEAST-ONCE: checkpoint %" PRIu64 " completed but no valid checkpoint is left in "
         "\"%s\"; starting without state as restore.fallback=at-least-once asks: the sinks "
         "write again everything",
         bound, r->dir);
    return NULL;
}

tpc_error_t *tpc__restore_pick(const char *dir, const char *job, tpc__checkpoint_file_t *files,
                               size_t n, const tpc__record_t *rec, size_t *picked)
{
    /* As a new process of the job with restore.mode=auto and no fallback would decide (with
     * owners, one that takes the job over from the record's owner). */
    tpc__store_folder_t f;
    tpc__store_folder_init(&f, dir);
    rule_t r = {.job = job ? job : (rec && rec->job_name ? rec->job_name : "?"),
                .dir = dir,
                .st = &f.base,
                .owners = rec && rec->owner_epoch,
                .epoch = rec ? rec->owner_epoch : 0};
    uint64_t bound = rec ? rec->newest : n ? files[0].id : 0;
    tpc__checkpoint_t c;
    tpc_error_t *err = pick(&r, files, n, bound, rec ? rec->first : 0, &c, picked);
    if (!err && *picked < n)
        tpc__checkpoint_free(&c);
    return err;
}

tpc_error_t *tpc__restore_record_store(tpc_job_t *job)
{
    if (!job->owner_epoch)
        return tpc__record_swap_at(job->store, &job->record, TPC_STORAGE_ANY, NULL);
    /* An owner writes the record only over the version it last wrote: if another owner took the
     * job over meanwhile, this one is fenced (TPC_ERR_FENCED, fatal) and tells no sink anything. */
    char *version = NULL;
    tpc_error_t *err = tpc__record_swap_at(job->store, &job->record, job->record.version, &version);
    if (err)
        return tpc_error_prefix(err, "job \"%s\" (owner epoch %" PRIu64 ")", job->name,
                                job->owner_epoch);
    free(job->record.version);
    job->record.version = version;
    return NULL;
}

/* Note the parallelism of every vertex in the record (written before any task opens, so a later
 * run at a lower parallelism knows which subtasks to clean up after) and hand the attempt its
 * view of it. */
static tpc_error_t *note_parallelism(tpc__attempt_t *a, bool changed)
{
    tpc_job_t *job = a->job;
    tpc__record_t *rec = &job->record;
    changed |= !job->record_found;
    if (!rec->job_name)
        rec->job_name = tpc__xstrdup(job->name);
    a->restored_parallelism = tpc__xcalloc((size_t)job->nvertices, sizeof(int));
    a->highest_parallelism = tpc__xcalloc((size_t)job->nvertices, sizeof(int));
    for (int v = 0; v < job->nvertices; v++) {
        const char *name = job->vertices[v].name;
        for (int w = 0; w < a->restored.nvertices; w++)
            if (strcmp(a->restored.vertices[w].name, name) == 0) {
                a->restored_parallelism[v] = a->restored.vertices[w].parallelism;
                changed |= tpc__record_note_parallelism(rec, name, a->restored_parallelism[v]);
            }
        changed |= tpc__record_note_parallelism(rec, name, job->vertices[v].parallelism);
        a->highest_parallelism[v] = tpc__record_highest(rec, name);
    }
    if (job->run_newest > rec->newest || (a->restored.id > rec->newest)) {
        rec->newest = a->restored.id > job->run_newest ? a->restored.id : job->run_newest;
        changed = true;
    }
    tpc_error_t *err = changed ? tpc__restore_record_store(job) : NULL;
    if (!err)
        job->record_found = true;
    return err;
}

static tpc_error_t *taken_over(tpc_job_t *job, uint64_t epoch)
{
    return tpc_error_prefix(
        tpc_error_hint(tpc_error_new(TPC_ERR_FENCED, TPC_ERROR_FATAL,
                                     "the completion record in \"%s\" holds owner epoch %" PRIu64
                                     ": another owner has taken the job's checkpoints over",
                                     tpc__storage_where(job->store), epoch),
                       "stop this process; the job runs on in the owner that took it over"),
        "job \"%s\" (owner epoch %" PRIu64 ")", job->name, job->owner_epoch);
}

tpc_error_t *tpc__restore_owner_check(tpc_job_t *job, tpc_error_t *err)
{
    if (!job->owner_epoch || tpc_error_code(err) == TPC_ERR_FENCED)
        return err;
    tpc__record_t rec;
    bool found;
    tpc_error_t *rerr = tpc__record_read_at(job->store, &rec, &found);
    uint64_t epoch = !rerr && found ? rec.owner_epoch : 0;
    tpc_error_destroy(rerr);
    tpc__record_free(&rec);
    if (epoch <= job->owner_epoch)
        return err;
    tpc_error_t *fenced = tpc_error_prefix(taken_over(job, epoch), "%s", tpc_error_message(err));
    tpc_error_destroy(err);
    return fenced;
}

tpc_error_t *tpc__restore_load(tpc__attempt_t *a)
{
    tpc_job_t *job = a->job;
    const char *where = tpc__storage_where(job->store);
    tpc__checkpoint_t *out = &a->restored;
    *out = (tpc__checkpoint_t){0};
    tpc__record_free(&job->record);
    tpc_error_t *err = tpc__record_read_at(job->store, &job->record, &job->record_found);
    if (err)
        return tpc_error_prefix(err, "job \"%s\" refuses to restore", job->name);
    if (job->owner_epoch && (!job->record_found || job->record.owner_epoch != job->owner_epoch))
        return taken_over(job, job->record.owner_epoch);
    if (job->record_found && strcmp(job->record.job_name, job->name) != 0)
        return tpc_error_hint(
            tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                          "\"%s\" holds the checkpoints of job \"%s\", not \"%s\"", where,
                          job->record.job_name, job->name),
            "give each job its own \"checkpoint.dir\"");
    tpc__checkpoint_file_t *files;
    size_t n;
    err = tpc__checkpoint_list_at(job->store, &files, &n);
    if (err)
        return err;
    /* Once this run has listed the directory, every id it took is below next_checkpoint_id: a
     * newer file came from elsewhere, and restoring it would take over from whoever wrote it. */
    if (job->dir_listed && !job->owner_epoch && n && files[0].id >= job->next_checkpoint_id) {
        err = tpc_error_prefix(tpc__checkpoint_other_writer(),
                               "\"%s\" holds checkpoint %" PRIu64 ", which this run of job \"%s\" "
                               "did not write (its newest is %" PRIu64 ")",
                               where, files[0].id, job->name, job->next_checkpoint_id - 1);
        tpc__checkpoint_files_free(files, n);
        return err;
    }
    job->dir_listed = true;
    /* New checkpoint ids go past every file seen, valid or not, and past the record, so no id is
     * ever reused, not even by a run that started over. */
    if (n && files[0].id >= job->next_checkpoint_id)
        job->next_checkpoint_id = files[0].id + 1;
    if (job->record_found && job->record.newest >= job->next_checkpoint_id)
        job->next_checkpoint_id = job->record.newest + 1;
    uint64_t bound = newest_completed(job, files, n);
    uint64_t lowest = 0;
    if (job->conf.restore == TPC__RESTORE_FRESH) {
        if (!job->run_newest) {
            /* Start over, once per run: its later attempts resume from its own checkpoints, and
             * no later run goes back to the checkpoints before it (the record says where the new
             * state begins, before any sink aborts what they hold). */
            job->run_first = job->next_checkpoint_id;
            job->record.first = job->run_first;
            job->restore_epoch = job->owner_epoch;
            tpc__checkpoint_files_free(files, n);
            tpc__logf(&job->log, TPC_LOG_INFO,
                      "job \"%s\" starts over without state (restore.mode=fresh); its "
                      "checkpoints begin at %" PRIu64,
                      job->name, job->run_first);
            return note_parallelism(a, true);
        }
        lowest = job->run_first;
        bound = job->run_newest;
    }
    /* Checkpoints from before the last start over are not this job's state any more. */
    if (job->record_found && job->record.first > lowest)
        lowest = job->record.first;
    size_t i = n;
    rule_t r = {.job = job->name,
                .dir = where,
                .st = job->store,
                .fallback = job->conf.fallback_at_least_once,
                .owners = job->owner_epoch != 0,
                .epoch = job->restore_epoch,
                .log = &job->log};
    err = pick(&r, files, n, bound, lowest, out, &i);
    if (!err && i < n && strcmp(out->job_name, job->name) != 0) {
        err = tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                           "checkpoint \"%s\" belongs to job \"%s\", not \"%s\"",
                                           files[i].path, out->job_name, job->name),
                             "give each job its own \"checkpoint.dir\"");
        tpc__checkpoint_free(out);
    } else if (!err && i == n && job->conf.restore == TPC__RESTORE_REQUIRED) {
        err = tpc_error_hint(
            tpc_error_new(TPC_ERR_NOT_FOUND, TPC_ERROR_FATAL, "no checkpoint in \"%s\"", where),
            "\"restore.mode\" is \"required\"; use \"auto\" to start fresh");
    } else if (!err && i < n) {
        tpc__logf(&job->log, TPC_LOG_INFO, "restoring job \"%s\" from \"%s\"", job->name,
                  files[i].path);
    }
    if (!err)
        a->restored_behind = (i < n && files[i].id < bound) || (i == n && bound >= lowest && bound);
    /* From now on a newer file is this owner's own (a later attempt after a crash between file
     * and record), or a zombie's. */
    if (!err)
        job->restore_epoch = job->owner_epoch;
    tpc__checkpoint_files_free(files, n);
    return err ? err : note_parallelism(a, false);
}

tpc_error_t *tpc__restore_note_complete(tpc_job_t *job, uint64_t id)
{
    job->run_newest = id;
    if (id <= job->record.newest)
        return NULL;
    job->record.newest = id;
    if (!job->record.job_name)
        job->record.job_name = tpc__xstrdup(job->name);
    tpc_error_t *err = tpc__restore_record_store(job);
    if (!err)
        job->record_found = true;
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
            bool all = true;
            for (int s = 0; s < vs->parallelism; s++)
                all &= vs->subtasks[s].operator_finished || vs->subtasks[s].closed;
            return graph_error(all ? "vertex \"%s\" had finished all its work in the checkpoint "
                                     "(its input ended), and its parallelism changed from %s"
                                   : "vertex \"%s\" is partly finished in the checkpoint and its "
                                     "parallelism changed from %s",
                               vs->name, par);
        }
    }
    return NULL;
}

/* Keyed entries of every old subtask whose key group the new subtask owns. */
static tpc_error_t *add_keyed(tpc_state_reader_t *r, const tpc__vertex_snapshot_t *vs, int maxp,
                              int parallelism, int subtask)
{
    for (int s = 0; s < vs->parallelism; s++) {
        const tpc__subtask_snapshot_t *ss = &vs->subtasks[s];
        tpc__rd_t rd = {ss->state.keyed.data, ss->state.keyed.len, 0, false};
        for (uint32_t e = 0; e < ss->state.nkeyed; e++) {
            size_t len;
            const uint8_t *p = tpc__rd_bytes(&rd, &len);
            tpc__keyed_entry_t ke;
            if (!tpc__keyed_parse(p, len, &ke) || ke.group >= maxp)
                return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL,
                                     "keyed state of vertex \"%s\" holds a malformed entry or a "
                                     "key group outside 0 .. %d",
                                     vs->name, maxp - 1);
            if (tpc_key_group_subtask(ke.group, maxp, parallelism) != subtask)
                continue;
            tpc__xgrow(&r->keyed, &r->cap_keyed, r->nkeyed + 1, sizeof *r->keyed);
            r->keyed[r->nkeyed++] = (tpc__slice_t){p, len};
        }
    }
    return NULL;
}

tpc_error_t *tpc__restore_plan(tpc__attempt_t *a)
{
    const tpc__checkpoint_t *c = &a->restored;
    int maxp = a->job->conf.max_parallelism;
    if (c->max_parallelism && (int)c->max_parallelism != maxp)
        return tpc_error_hint(
            tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                          "checkpoint %" PRIu64 " was taken with max-parallelism %u, job \"%s\" "
                          "has %d: its keyed state is split into %u key groups",
                          c->id, c->max_parallelism, a->job->name, maxp, c->max_parallelism),
            "set \"max-parallelism\" back to %u; it cannot change for a job's checkpoints (start "
            "over with \"restore.mode\"=fresh to change it)",
            c->max_parallelism);
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
            tpc__state_reader_add(r, TPC_STATE_LIST, &ss->state.list, ss->state.nlist);
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
                    tpc__xgrow(&r->list, &r->cap_list, r->nlist + 1, sizeof *r->list);
                    r->list[r->nlist++] = (tpc__slice_t){p, len};
                }
            }
        }
        for (int s = 0; s < vs->parallelism; s++)
            tpc__state_reader_add(r, TPC_STATE_UNION, &vs->subtasks[s].state.uni,
                                  vs->subtasks[s].state.nunion);
        for (int s = 0; s < vs->parallelism; s++)
            if (s % vx->parallelism == t->subtask)
                tpc__state_reader_add(r, TPC_STATE_OWNED, &vs->subtasks[s].state.owned,
                                      vs->subtasks[s].state.nowned);
        err = add_keyed(r, vs, maxp, vx->parallelism, t->subtask);
        if (err)
            return err;
    }
    return NULL;
}
