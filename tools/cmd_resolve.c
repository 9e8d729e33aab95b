/*
 * `twopc resolve`: for a job that is being retired, do to the external systems exactly what its
 * next start would do, without running it. The way to be exact is to run the library's own
 * restore: a job of the checkpoint's name and vertices (each at its parallelism) is built, the
 * sinks named on the command line with the settings the job used, every other vertex a stand-in
 * that ends at once, and it is run against a copy of the checkpoint folder (hard links where the
 * file system allows). The sinks' subtasks restore their handles from the checkpoint a restart
 * picks, commit what it promised, abort what it did not and the lingering transactions of their
 * ids or gids, then end with a final checkpoint of empty transactions, which costs no external
 * call. The copy is removed; the job's own folder is not written.
 */
#include "tpc_file.h"
#include "tpc_kafka.h"
#include "tpc_pg.h"
#include "twopc_cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char resolve_help[] =
    "usage: twopc resolve --checkpoint-dir DIR --sink NAME=TYPE [--set NAME.KEY=VALUE]...\n"
    "                     [--dry-run] [--verbose]\n"
    "\n"
    "Does to Kafka and PostgreSQL what the job's next start would do, without running the job:\n"
    "commits the transactions the newest completed checkpoint promised, aborts its current ones\n"
    "and every lingering transaction of the sinks' transactional ids or gids. For a job that is\n"
    "being retired; run it only when no instance of the job runs. DIR is not written.\n"
    "\n"
    "  --sink NAME=TYPE      a sink vertex of the job: TYPE postgres, kafka or file. Every vertex\n"
    "                        whose checkpoint state holds transactions must be named.\n"
    "  --set NAME.KEY=VALUE  a setting of sink NAME, with the key the program gives\n"
    "                        tpc_txn_sink_set(): pg.conninfo, pg.table, pg.gid-prefix, ...;\n"
    "                        kafka.bootstrap.servers, topic, transactional.id.prefix,\n"
    "                        kafka.security.protocol, ...; for file sinks: dir\n"
    "  --dry-run             print what the checkpoint says would be done, and stop\n"
    "  --verbose             print the library's log lines (info and above)\n"
    "\n"
    "Exit status 0: done (the summary says what was committed and aborted); 1: failed, with the\n"
    "library's message (a transaction that can no longer be committed is named as data loss).\n";

typedef struct {
    const char *name;
    const char *type;
    tpc_txn_sink_t *sink;
} sink_arg_t;

/* ---- a stand-in for every vertex that is not a sink: a source that ends at once ------------ */

static tpc_error_t *stand_in_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx, (void)arg, (void)self;
    return NULL;
}

static tpc_error_t *stand_in_restore(void *self, tpc_ctx_t *ctx, const tpc_state_reader_t *state)
{
    (void)self, (void)ctx, (void)state;
    return NULL;
}

static tpc_error_t *stand_in_poll(void *self, tpc_ctx_t *ctx, tpc_poll_result_t *result)
{
    (void)self, (void)ctx;
    *result = TPC_POLL_END;
    return NULL;
}

static void stand_in_close(void *self, tpc_ctx_t *ctx)
{
    (void)self, (void)ctx;
}

static const tpc_operator_ops_t stand_in_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = stand_in_open,
    .initialize_state = stand_in_restore,
    .poll = stand_in_poll,
    .close = stand_in_close,
};

/* ---- the copy of the folder --------------------------------------------------------------- */

static bool copy_file(const char *from, const char *to)
{
    if (link(from, to) == 0)
        return true;
    int in = open(from, O_RDONLY | O_CLOEXEC);
    int out = in < 0 ? -1 : open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    bool ok = in >= 0 && out >= 0;
    char buf[65536];
    ssize_t n;
    while (ok && (n = read(in, buf, sizeof buf)) != 0)
        ok = n > 0 && write(out, buf, (size_t)n) == n;
    if (in >= 0)
        close(in);
    if (out >= 0 && close(out) != 0)
        ok = false;
    return ok;
}

static tpc_error_t *copy_folder(const char *dir, char *tmp, size_t cap)
{
    const char *base = getenv("TMPDIR");
    snprintf(tmp, cap, "%s/twopc-resolve-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmp))
        return tpc_error_new(TPC_ERR_IO, 0, "could not create a folder \"%s\": %s", tmp,
                             strerror(errno));
    DIR *d = opendir(dir);
    if (!d)
        return tpc_error_new(TPC_ERR_IO, 0, "could not open \"%s\": %s", dir, strerror(errno));
    struct dirent *e;
    tpc_error_t *err = NULL;
    while (!err && (e = readdir(d))) {
        if (strncmp(e->d_name, "chk-", 4) != 0 && strncmp(e->d_name, "savepoint-", 10) != 0 &&
            strcmp(e->d_name, "completed") != 0)
            continue;
        char from[4096], to[4096];
        snprintf(from, sizeof from, "%s/%s", dir, e->d_name);
        snprintf(to, sizeof to, "%s/%s", tmp, e->d_name);
        if (!copy_file(from, to))
            err = tpc_error_hint(tpc_error_new(TPC_ERR_IO, 0, "could not copy \"%s\" to \"%s\": %s",
                                               from, to, strerror(errno)),
                                 "set TMPDIR to a folder with room for a copy of the checkpoints");
    }
    closedir(d);
    return err;
}

static void remove_folder(const char *tmp)
{
    DIR *d = opendir(tmp);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
    rmdir(tmp);
}

/* ---- sinks -------------------------------------------------------------------------------- */

static const char *setting(const twopc_args_t *a, const char *sink, const char *key)
{
    size_t ns = strlen(sink), nk = strlen(key);
    const char *v = NULL;
    for (size_t i = 0; twopc_arg_nth(a, "set", i); i++) {
        const char *kv = twopc_arg_nth(a, "set", i);
        if (strncmp(kv, sink, ns) == 0 && kv[ns] == '.' && strncmp(kv + ns + 1, key, nk) == 0 &&
            kv[ns + 1 + nk] == '=')
            v = kv + ns + 2 + nk;
    }
    return v;
}

/* Resolving writes no rows: an encoder of its own spares the sink the check of the default
 * mapping (key and value columns) against a table the job fills with an encoder of its own. */
static tpc_error_t *no_rows(void *opaque, const tpc_record_t *record, tpc_pg_row_t *row)
{
    (void)opaque, (void)record, (void)row;
    return tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL, "twopc resolve writes no rows");
}

static tpc_error_t *make_sink(const twopc_args_t *a, sink_arg_t *s)
{
    tpc_error_t *err;
    if (strcmp(s->type, "postgres") == 0 || strcmp(s->type, "pg") == 0) {
        err = tpc_pg_sink_new(&s->sink);
        if (!err)
            err = tpc_pg_sink_set_encoder(s->sink, no_rows, NULL);
    } else if (strcmp(s->type, "kafka") == 0)
        err = tpc_kafka_sink_new(setting(a, s->name, "kafka.bootstrap.servers"),
                                 setting(a, s->name, "topic"), &s->sink);
    else if (strcmp(s->type, "file") == 0)
        err = setting(a, s->name, "dir")
                  ? tpc_file_sink_new(setting(a, s->name, "dir"), &s->sink)
                  : tpc_error_hint(tpc_error_new(TPC_ERR_INVALID_ARG, 0,
                                                 "file sink \"%s\" needs its folder", s->name),
                                   "--set %s.dir=FOLDER", s->name);
    else
        err = tpc_error_new(TPC_ERR_INVALID_ARG, 0,
                            "sink \"%s\" has unknown type \"%s\" (postgres, kafka, file)", s->name,
                            s->type);
    size_t ns = strlen(s->name);
    for (size_t i = 0; !err && twopc_arg_nth(a, "set", i); i++) {
        const char *kv = twopc_arg_nth(a, "set", i), *eq = strchr(kv, '=');
        if (strncmp(kv, s->name, ns) != 0 || kv[ns] != '.' || !eq)
            continue;
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)(eq - kv - (long)ns - 1), kv + ns + 1);
        if (strcmp(key, "dir") == 0 && strcmp(s->type, "file") == 0)
            continue;
        if (strcmp(key, "kafka.bootstrap.servers") == 0 && strcmp(s->type, "kafka") == 0)
            continue; /* given to tpc_kafka_sink_new() */
        err = tpc_txn_sink_set(s->sink, key, eq + 1);
    }
    return err ? tpc_error_prefix(err, "sink \"%s\"", s->name) : NULL;
}

/* ---- logging ------------------------------------------------------------------------------ */

static void log_line(void *opaque, tpc_log_level_t level, const char *message)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    bool verbose = *(bool *)opaque;
    if (level <= TPC_LOG_WARN || verbose)
        fprintf(stderr, "twopc resolve: %s: %s\n", names[level], message);
}

/* ---- the command -------------------------------------------------------------------------- */

static void print_plan(const twopc_checkpoint_t *c, bool dry)
{
    printf("checkpoint %" PRIu64 " of job \"%s\" is the one a restart restores\n", c->id,
           tpc_checkpoint_job(c->checkpoint));
    for (size_t i = 0; i < c->ntxns; i++) {
        const twopc_txn_t *t = &c->txns[i];
        printf("  %s %-8s %s subtask %d: %s\n", dry ? "would" : "will",
               t->kind == TWOPC_TXN_PENDING ? "commit" : "abort", t->sink, t->subtask,
               t->view.line);
    }
    printf("  %s abort the lingering transactions of every sink's ids or gids\n",
           dry ? "would" : "will");
}

int twopc_cmd_resolve(int argc, char **argv)
{
    static const twopc_opt_t spec[] = {
        {"checkpoint-dir", true, false},
        {"sink", true, true},
        {"set", true, true},
        {"dry-run", false, false},
        {"verbose", false, false},
        {"help", false, false},
        {NULL},
    };
    const char *cmd = "resolve";
    twopc_args_t a;
    if (!twopc_args_parse(cmd, argc, argv, spec, &a))
        return TWOPC_EXIT_USAGE;
    if (twopc_flag(&a, "help")) {
        fputs(resolve_help, stdout);
        twopc_args_free(&a);
        return TWOPC_EXIT_OK;
    }
    const char *dir = twopc_arg_required(&a, cmd, "checkpoint-dir");
    if (!dir || a.npos) {
        twopc_args_free(&a);
        return dir ? twopc_usage_error(cmd, "unexpected argument \"%s\"", a.pos[0])
                   : TWOPC_EXIT_USAGE;
    }
    bool dry = twopc_flag(&a, "dry-run"), verbose = twopc_flag(&a, "verbose");
    size_t nsinks = 0;
    while (twopc_arg_nth(&a, "sink", nsinks))
        nsinks++;
    sink_arg_t *sinks = calloc(nsinks + 1, sizeof *sinks);
    char **names = calloc(nsinks + 1, sizeof *names);
    int rc = TWOPC_EXIT_OK;
    for (size_t i = 0; i < nsinks && rc == TWOPC_EXIT_OK; i++) {
        const char *kv = twopc_arg_nth(&a, "sink", i), *eq = strchr(kv, '=');
        if (!eq || eq == kv) {
            rc = twopc_usage_error(cmd, "--sink takes NAME=TYPE, not \"%s\"", kv);
            break;
        }
        names[i] = strndup(kv, (size_t)(eq - kv));
        sinks[i] = (sink_arg_t){.name = names[i], .type = eq + 1};
    }

    twopc_folder_t f = {0};
    tpc_error_t *err = NULL;
    const twopc_checkpoint_t *c = NULL;
    /* While the command commits and aborts, no job may start on the folder, and none may run. */
    tpc_dir_lease_t *lease = NULL;
    if (rc == TWOPC_EXIT_OK && !dry)
        lease = twopc_lease(cmd, dir, &rc);
    if (rc == TWOPC_EXIT_OK)
        err = twopc_folder_read(dir, false, &f);
    if (rc == TWOPC_EXIT_OK && !err)
        err = twopc_folder_refusal(&f);
    if (rc == TWOPC_EXIT_OK && !err) {
        if (f.restore_index < 0)
            err = tpc_error_hint(
                tpc_error_new(TPC_ERR_NOT_FOUND, 0, "no completed checkpoint in \"%s\"", dir),
                "a restart would start without state and only abort lingering transactions: "
                "do that with twopc pg resolve and twopc kafka abort");
        else
            c = &f.files[f.restore_index];
        if (c && !c->valid)
            err = tpc_error_hint(tpc_error_new(TPC_ERR_CORRUPT, 0,
                                               "checkpoint %" PRIu64
                                               ", the newest completed one, is damaged: %s",
                                               c->id, c->error),
                                 "a restart refuses it too; restore the file from a backup");
    }
    /* Every vertex holding transactions must be a named sink: a restart would commit them. */
    for (size_t i = 0; c && !err && i < c->ntxns; i++) {
        bool named = false;
        for (size_t k = 0; k < nsinks; k++)
            named |= strcmp(sinks[k].name, c->txns[i].sink) == 0;
        if (!named)
            err = tpc_error_hint(
                tpc_error_new(TPC_ERR_INVALID_ARG, 0,
                              "checkpoint %" PRIu64 " holds transactions of "
                              "sink \"%s\" (%s), which is not named",
                              c->id, c->txns[i].sink, c->txns[i].connector),
                "add --sink %s=%s and its settings (--set %s.KEY=VALUE)", c->txns[i].sink,
                c->txns[i].named ? c->txns[i].connector : "CONNECTOR", c->txns[i].sink);
    }
    for (size_t k = 0; c && !err && k < nsinks; k++) {
        bool found = false;
        for (int v = 0; v < tpc_checkpoint_vertex_count(c->checkpoint); v++) {
            int par;
            found |= strcmp(tpc_checkpoint_vertex(c->checkpoint, v, &par), sinks[k].name) == 0;
        }
        if (!found)
            err = tpc_error_hint(tpc_error_new(TPC_ERR_INVALID_ARG, 0,
                                               "checkpoint %" PRIu64 " has no vertex \"%s\"", c->id,
                                               sinks[k].name),
                                 "its vertices are listed by: twopc checkpoint %s", dir);
    }
    if (rc == TWOPC_EXIT_OK && !err && c) {
        print_plan(c, dry);
        fflush(stdout);
    }
    for (size_t k = 0; !dry && rc == TWOPC_EXIT_OK && !err && k < nsinks; k++)
        err = make_sink(&a, &sinks[k]);

    char tmp[4096] = "";
    tpc_job_t *job = NULL;
    if (!dry && rc == TWOPC_EXIT_OK && !err) {
        err = copy_folder(dir, tmp, sizeof tmp);
        job = tpc_job_new(tpc_checkpoint_job(c->checkpoint));
        tpc_job_set_logger(job, log_line, &verbose, TPC_LOG_INFO);
        char maxp[16];
        snprintf(maxp, sizeof maxp, "%d", tpc_checkpoint_max_parallelism(c->checkpoint));
        if (!err)
            err = tpc_job_set(job, "checkpoint.dir", tmp);
        if (!err)
            err = tpc_job_set(job, "restore.mode", "required");
        if (!err)
            err = tpc_job_set(job, "restart.attempts", "0");
        if (!err && tpc_checkpoint_max_parallelism(c->checkpoint) > 0)
            err = tpc_job_set(job, "max-parallelism", maxp);
        int feed = -1;
        if (!err)
            err = tpc_job_add_vertex(job, "twopc-resolve", 1, &stand_in_ops, NULL, &feed);
        for (int v = 0; !err && v < tpc_checkpoint_vertex_count(c->checkpoint); v++) {
            int par, id;
            const char *name = tpc_checkpoint_vertex(c->checkpoint, v, &par);
            sink_arg_t *s = NULL;
            for (size_t k = 0; k < nsinks; k++)
                if (strcmp(sinks[k].name, name) == 0)
                    s = &sinks[k];
            bool all_closed = true;
            for (int i = 0; i < par; i++) {
                tpc_checkpoint_subtask_t st;
                tpc_checkpoint_subtask(c->checkpoint, v, i, &st);
                all_closed &= st.closed;
            }
            /* A sink whose subtasks all closed committed everything before: it is not run. */
            if (!s || all_closed) {
                err = tpc_job_add_vertex(job, name, par, &stand_in_ops, NULL, &id);
                continue;
            }
            err = tpc_txn_sink_add_to_job(s->sink, job, name, par, &id);
            if (!err)
                err = tpc_job_connect(job, feed, id, TPC_EDGE_REBALANCE);
        }
        if (!err)
            err = tpc_job_run(job, NULL);
    }
    if (job && !err) {
        printf("done:");
        for (size_t k = 0; k < nsinks; k++) {
            if (!sinks[k].sink)
                continue;
            tpc_txn_sink_stats_t st;
            tpc_txn_sink_get_stats(sinks[k].sink, &st);
            printf(" sink \"%s\" committed %" PRIu64 " and aborted %" PRIu64 " restored "
                   "transactions;",
                   sinks[k].name, (uint64_t)st.recovered_commits, (uint64_t)st.aborts);
        }
        printf(" lingering ones aborted\n");
    }
    tpc_job_destroy(job);
    if (*tmp)
        remove_folder(tmp);
    for (size_t k = 0; k < nsinks; k++) {
        tpc_txn_sink_destroy(sinks[k].sink);
        free(names[k]);
    }
    free(sinks);
    free(names);
    twopc_folder_free(&f);
    twopc_args_free(&a);
    tpc_checkpoint_dir_release(lease);
    if (err)
        return twopc_fail(cmd, err);
    return rc;
}
