/*
 * `twopc checkpoints DIR` and `twopc checkpoint DIR [ID]`: what a checkpoint folder holds, read
 * with the runtime's own decoder, never written. The listing marks the checkpoint a restart
 * restores; the detail of one checkpoint shows its vertices, which subtasks had finished, and
 * per sink the transactions a restart commits (pending) or aborts (current).
 */
#include "twopc_cli.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char checkpoints_help[] =
    "usage: twopc checkpoints DIR [--json]\n"
    "The checkpoint files in DIR (a job's checkpoint.dir), newest first: id, kind, time (UTC),\n"
    "size, job, and whether the file is valid. The one a restart restores is marked \"restore\";\n"
    "files newer than the completion record were never announced to a sink.\n";

static const char checkpoint_help[] =
    "usage: twopc checkpoint DIR [ID] [--json]\n"
    "One checkpoint of DIR (default: the one a restart restores): id, time, size, job, vertices\n"
    "with parallelism and finished subtasks, and per sink its transactions: pending ones (a\n"
    "restart commits them) with their transactional ids, producer ids and epochs or gids, and\n"
    "current ones (a restart aborts them).\n";

static void print_record(const twopc_folder_t *f, const char *dir)
{
    if (f->record_error)
        printf("completion record: damaged: %s\n", f->record_error);
    else if (f->record_found)
        printf("completion record: job \"%s\", newest completed checkpoint %" PRIu64 "\n",
               f->record_job, f->record_newest);
    else
        printf("completion record: none in \"%s\" (the newest file counts as completed)\n", dir);
}

int twopc_cmd_checkpoints(int argc, char **argv)
{
    static const twopc_opt_t spec[] = {{"json", false, false}, {"help", false, false}, {NULL}};
    twopc_args_t a;
    if (!twopc_args_parse("checkpoints", argc, argv, spec, &a))
        return TWOPC_EXIT_USAGE;
    if (twopc_flag(&a, "help")) {
        fputs(checkpoints_help, stdout);
        twopc_args_free(&a);
        return TWOPC_EXIT_OK;
    }
    if (a.npos != 1) {
        twopc_args_free(&a);
        return twopc_usage_error("checkpoints", "give one checkpoint directory");
    }
    const char *dir = a.pos[0];
    bool json = twopc_flag(&a, "json");
    twopc_args_free(&a);
    twopc_folder_t f;
    tpc_error_t *err = twopc_folder_read(dir, true, &f);
    if (err)
        return twopc_fail("checkpoints", err);
    if (json) {
        printf("{\"dir\":");
        twopc_json_str(stdout, dir);
        printf(",\"completed\":");
        if (f.record_found)
            printf("%" PRIu64, f.record_newest);
        else
            printf("null");
        printf(",\"restore\":");
        if (f.restore_index >= 0)
            printf("%" PRIu64, f.files[f.restore_index].id);
        else
            printf("null");
        if (f.dir.restore_refusal) {
            printf(",\"refusal\":");
            twopc_json_str(stdout, f.dir.restore_refusal);
        }
        printf(",\"checkpoints\":[");
        for (size_t i = 0; i < f.nfiles; i++) {
            const twopc_checkpoint_t *c = &f.files[i];
            printf("%s{\"id\":%" PRIu64 ",\"kind\":\"%s\",\"path\":", i ? "," : "", c->id,
                   c->savepoint ? "savepoint" : "checkpoint");
            twopc_json_str(stdout, c->path);
            printf(",\"size\":%" PRId64 ",\"status\":\"%s\",\"valid\":%s", c->size, c->status,
                   c->valid ? "true" : "false");
            if (c->valid) {
                printf(",\"time_ms\":%" PRId64 ",\"job\":", tpc_checkpoint_time_ms(c->checkpoint));
                twopc_json_str(stdout, tpc_checkpoint_job(c->checkpoint));
                size_t pending = 0;
                for (size_t k = 0; k < c->ntxns; k++)
                    pending += c->txns[k].kind == TWOPC_TXN_PENDING;
                printf(",\"vertices\":%d,\"pending_transactions\":%zu",
                       tpc_checkpoint_vertex_count(c->checkpoint), pending);
            } else {
                printf(",\"error\":");
                twopc_json_str(stdout, c->error);
            }
            printf("}");
        }
        printf("]}\n");
    } else {
        print_record(&f, dir);
        if (!f.nfiles)
            printf("no checkpoint files in \"%s\"\n", dir);
        else
            printf("%-8s %-10s %-24s %10s %-14s %-8s %s\n", "ID", "KIND", "TIME (UTC)", "BYTES",
                   "STATUS", "PENDING", "JOB");
        for (size_t i = 0; i < f.nfiles; i++) {
            const twopc_checkpoint_t *c = &f.files[i];
            char when[40] = "-";
            size_t pending = 0;
            if (c->valid)
                twopc_format_time(tpc_checkpoint_time_ms(c->checkpoint), when, sizeof when);
            for (size_t k = 0; k < c->ntxns; k++)
                pending += c->txns[k].kind == TWOPC_TXN_PENDING;
            printf("%-8" PRIu64 " %-10s %-24s %10" PRId64 " %-14s %-8zu %s\n", c->id,
                   c->savepoint ? "savepoint" : "checkpoint", when, c->size, c->status, pending,
                   c->valid ? tpc_checkpoint_job(c->checkpoint) : c->error);
        }
        if (f.dir.restore_refusal)
            printf("a restart refuses: %s\n", f.dir.restore_refusal);
    }
    twopc_folder_free(&f);
    return TWOPC_EXIT_OK;
}

static void print_txn_json(const twopc_txn_t *t)
{
    printf("{\"sink\":");
    twopc_json_str(stdout, t->sink);
    printf(",\"subtask\":%d,\"origin\":%d,\"kind\":\"%s\",\"checkpoint\":%" PRIu64
           ",\"start_ms\":%" PRId64 ",\"connector\":",
           t->subtask, t->origin, t->kind == TWOPC_TXN_PENDING ? "pending" : "current",
           t->checkpoint, t->start_ms);
    twopc_json_str(stdout, t->connector);
    printf(",\"name\":");
    twopc_json_str(stdout, t->view.line);
    /* What the connector tells of its handle: a gid, a transactional id with its producer. */
    for (int i = 0; i < t->view.nfields; i++) {
        printf(",");
        twopc_json_str(stdout, t->view.fields[i].name);
        if (t->view.fields[i].is_number) {
            printf(":%" PRId64, t->view.fields[i].number);
        } else {
            printf(":");
            twopc_json_str(stdout, t->view.fields[i].text);
        }
    }
    printf(",\"restart_does\":\"%s\"}", t->kind == TWOPC_TXN_PENDING ? "commit" : "abort");
}

static void print_detail_json(const twopc_folder_t *f, size_t i)
{
    const twopc_checkpoint_t *c = &f->files[i];
    printf("{\"id\":%" PRIu64 ",\"kind\":\"%s\",\"path\":", c->id,
           c->savepoint ? "savepoint" : "checkpoint");
    twopc_json_str(stdout, c->path);
    printf(",\"size\":%" PRId64 ",\"status\":\"%s\",\"time_ms\":%" PRId64 ",\"job\":", c->size,
           c->status, tpc_checkpoint_time_ms(c->checkpoint));
    twopc_json_str(stdout, tpc_checkpoint_job(c->checkpoint));
    printf(",\"max_parallelism\":%d,\"vertices\":[", tpc_checkpoint_max_parallelism(c->checkpoint));
    for (int v = 0; v < tpc_checkpoint_vertex_count(c->checkpoint); v++) {
        int par;
        const char *name = tpc_checkpoint_vertex(c->checkpoint, v, &par);
        printf("%s{\"name\":", v ? "," : "");
        twopc_json_str(stdout, name);
        printf(",\"parallelism\":%d,\"subtasks\":[", par);
        for (int s = 0; s < par; s++) {
            tpc_checkpoint_subtask_t st;
            tpc_checkpoint_subtask(c->checkpoint, v, s, &st);
            printf("%s{\"subtask\":%d,\"closed\":%s,\"finished\":%s,\"state_entries\":%zu,"
                   "\"state_bytes\":%zu}",
                   s ? "," : "", s, st.closed ? "true" : "false", st.finished ? "true" : "false",
                   st.state_entries, st.state_bytes);
        }
        printf("]}");
    }
    printf("],\"transactions\":[");
    for (size_t k = 0; k < c->ntxns; k++) {
        printf(k ? "," : "");
        print_txn_json(&c->txns[k]);
    }
    printf("]}\n");
}

static void print_detail(const twopc_folder_t *f, size_t i)
{
    const twopc_checkpoint_t *c = &f->files[i];
    char when[40];
    twopc_format_time(tpc_checkpoint_time_ms(c->checkpoint), when, sizeof when);
    printf("checkpoint %" PRIu64 " (%s, %s)\n", c->id, c->savepoint ? "savepoint" : "checkpoint",
           c->status);
    printf("  file             %s (%" PRId64 " bytes)\n", c->path, c->size);
    printf("  time             %s\n", when);
    printf("  job              %s\n", tpc_checkpoint_job(c->checkpoint));
    printf("  max-parallelism  %d\n", tpc_checkpoint_max_parallelism(c->checkpoint));
    printf("  vertices\n");
    for (int v = 0; v < tpc_checkpoint_vertex_count(c->checkpoint); v++) {
        int par;
        const char *name = tpc_checkpoint_vertex(c->checkpoint, v, &par);
        int nclosed = 0, nfinished = 0;
        size_t entries = 0, bytes = 0;
        char finished_list[512] = "";
        for (int s = 0; s < par; s++) {
            tpc_checkpoint_subtask_t st;
            tpc_checkpoint_subtask(c->checkpoint, v, s, &st);
            nclosed += st.closed;
            nfinished += st.finished || st.closed;
            entries += st.state_entries;
            bytes += st.state_bytes;
            if ((st.finished || st.closed) && strlen(finished_list) < sizeof finished_list - 16)
                snprintf(finished_list + strlen(finished_list),
                         sizeof finished_list - strlen(finished_list), "%s%d%s",
                         *finished_list ? "," : "", s, st.closed ? "(closed)" : "");
        }
        printf("    %-24s parallelism %-3d finished %d/%d%s%s%s  state %zu entries, %zu bytes\n",
               name, par, nfinished, par, *finished_list ? " [" : "", finished_list,
               *finished_list ? "]" : "", entries, bytes);
    }
    if (!c->ntxns) {
        printf("  transactions     none\n");
        return;
    }
    printf("  transactions (a restart commits the pending ones and aborts the current ones)\n");
    printf("    %-20s %-4s %-8s %-6s %-9s %s\n", "SINK", "SUB", "KIND", "CKPT", "CONNECTOR",
           "TRANSACTION");
    for (size_t k = 0; k < c->ntxns; k++) {
        const twopc_txn_t *t = &c->txns[k];
        printf("    %-20s %-4d %-8s %-6" PRIu64 " %-9s %s\n", t->sink, t->subtask,
               t->kind == TWOPC_TXN_PENDING ? "pending" : "current", t->checkpoint, t->connector,
               t->view.line);
    }
}

int twopc_cmd_checkpoint(int argc, char **argv)
{
    static const twopc_opt_t spec[] = {{"json", false, false}, {"help", false, false}, {NULL}};
    twopc_args_t a;
    if (!twopc_args_parse("checkpoint", argc, argv, spec, &a))
        return TWOPC_EXIT_USAGE;
    if (twopc_flag(&a, "help")) {
        fputs(checkpoint_help, stdout);
        twopc_args_free(&a);
        return TWOPC_EXIT_OK;
    }
    if (a.npos < 1 || a.npos > 2) {
        twopc_args_free(&a);
        return twopc_usage_error("checkpoint", "give a checkpoint directory and optionally an id");
    }
    const char *dir = a.pos[0], *want = a.npos == 2 ? a.pos[1] : NULL;
    bool json = twopc_flag(&a, "json");
    int64_t id = -1;
    if (want && !tpc_parse_int(want, 1, INT64_MAX, &id)) {
        twopc_args_free(&a);
        return twopc_usage_error("checkpoint", "\"%s\" is not a checkpoint id", want);
    }
    twopc_args_free(&a);
    twopc_folder_t f;
    tpc_error_t *err = twopc_folder_read(dir, false, &f);
    if (err)
        return twopc_fail("checkpoint", err);
    long index = -1;
    for (size_t i = 0; i < f.nfiles && id >= 0; i++)
        if (f.files[i].id == (uint64_t)id && (index < 0 || !f.files[i].savepoint))
            index = (long)i;
    if (id < 0)
        index = f.restore_index;
    if (index < 0 && id < 0 && (err = twopc_folder_refusal(&f)) != NULL) {
        twopc_folder_free(&f);
        return twopc_fail("checkpoint", err);
    }
    if (index < 0) {
        err = id >= 0
                  ? tpc_error_hint(tpc_error_new(TPC_ERR_NOT_FOUND, 0,
                                                 "no checkpoint %" PRId64 " in \"%s\"", id, dir),
                                   "list them with: twopc checkpoints %s", dir)
                  : tpc_error_new(TPC_ERR_NOT_FOUND, 0,
                                  "no checkpoint in \"%s\" that a restart would restore", dir);
        twopc_folder_free(&f);
        return twopc_fail("checkpoint", err);
    }
    twopc_folder_load(&f, (size_t)index);
    const twopc_checkpoint_t *c = &f.files[index];
    if (!c->valid) {
        err =
            tpc_error_hint(tpc_error_new(TPC_ERR_CORRUPT, 0,
                                         "checkpoint %" PRIu64 " is damaged: %s", c->id, c->error),
                           "a restart refuses it unless restore.fallback=at-least-once; list the "
                           "others with: twopc checkpoints %s",
                           dir);
        twopc_folder_free(&f);
        return twopc_fail("checkpoint", err);
    }
    if (json)
        print_detail_json(&f, (size_t)index);
    else
        print_detail(&f, (size_t)index);
    twopc_folder_free(&f);
    return TWOPC_EXIT_OK;
}
