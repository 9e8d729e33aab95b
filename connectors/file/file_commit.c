/*
 * Commit, recovery and cleanup of the file sink. All of it works from a handle and the folder
 * alone, because after a crash the handle comes from a checkpoint and the files from a process
 * that is gone.
 *
 * Commit renames each in-progress part to its final name without replacing anything, then
 * fsyncs the folder. It is idempotent: a part whose in-progress file is gone but whose final file
 * exists with the recorded size was committed before (a crash after the rename, or a repeated
 * recovery). A part with neither file is lost data and a final name held by a different file is a
 * collision: both are loud errors, never skipped.
 *
 * Cleanup deletes in-progress files that no checkpoint can commit. A transaction is only ever
 * pre-committed in a checkpoint at least as new as the one its name carries, so after a restore
 * from checkpoint R every in-progress file naming a checkpoint above R is dead, whichever run made
 * it; at or below R, a file may be pending in R, possibly restored to another subtask after a
 * parallelism change, and is left alone. Each subtask cleans only names of subtasks it owns
 * (tpc_txn_owns()), so no two subtasks race over a file and files of subtasks that no longer exist
 * are cleaned too. A start without state refuses when its names could collide with files an
 * earlier run committed (check_fresh_start()).
 *
 * Under owners (checkpoint.owner=claim) in-progress names carry the owner epoch, and the epoch
 * decides first. A file of a newer epoch is never touched: its owner took the job over from this
 * one. A file of an older epoch is dead once this owner's restore has committed the pending
 * transactions of the checkpoint it took over (which the framework does before any cleanup): no
 * checkpoint of this owner or a later one lists a transaction of an older epoch, and no later
 * restore takes a checkpoint file of one. So the cleanup at start deletes every file of an older
 * epoch, whatever checkpoint it names, and so does each pre-commit after it
 * (tpc__file_sweep_older()): a zombie, an older owner still running after the take-over until its
 * next completion is refused, may go on creating in-progress files, and pre-commit them, after that
 * cleanup. Names without an epoch (written without owners, or before names carried it) read as
 * epoch 0, the oldest.
 */
#include "file_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

tpc_error_t *tpc__file_fsync_dir(tpc__file_conn_t *c)
{
    if (fsync(c->dirfd) != 0)
        return tpc__file_errno(errno, "fsync folder", c->conf->dir);
    return NULL;
}

/* Rename without replacing; falls back where the file system lacks RENAME_NOREPLACE. */
static int rename_noreplace(int dirfd, const char *from, const char *to)
{
    if (renameat2(dirfd, from, dirfd, to, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return -1;
    struct stat st;
    if (fstatat(dirfd, to, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        errno = EEXIST;
        return -1;
    }
    return renameat(dirfd, from, dirfd, to);
}

static tpc_error_t *commit_part(tpc__file_conn_t *c, const tpc__file_txn_t *t, uint32_t part)
{
    char from[TPC__FILE_NAME_MAX], to[TPC__FILE_NAME_MAX];
    if (!tpc__file_inprogress_name(from, c->conf->prefix, t, part) ||
        !tpc__file_final_name(to, c->conf, t, part))
        return tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                             "file name for prefix \"%s\" is too long", c->conf->prefix);
    if (rename_noreplace(c->dirfd, from, to) == 0)
        return NULL;
    int rename_errno = errno;
    if (rename_errno != ENOENT && rename_errno != EEXIST)
        return tpc__file_errno(rename_errno, "rename file", from);

    struct stat st;
    bool have_final = fstatat(c->dirfd, to, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (rename_errno == EEXIST) {
        tpc_error_t *err = tpc_error_new(TPC_ERR_COMMIT, TPC_ERROR_FATAL,
                                         "could not rename \"%s\" to \"%s\": a different file of "
                                         "that name exists in \"%s\"",
                                         from, to, c->conf->dir);
        return tpc_error_hint(err,
                              "another sink with the prefix \"%s\" writes to this folder, or "
                              "the job was restored from an older checkpoint than one it had "
                              "committed; give each sink its own prefix",
                              c->conf->prefix);
    }
    if (have_final && (uint64_t)st.st_size == t->sizes[part])
        return NULL; /* committed before */
    tpc_error_t *err;
    if (have_final)
        err = tpc_error_new(TPC_ERR_DATA_LOSS, TPC_ERROR_FATAL,
                            "in-progress file \"%s\" is gone and \"%s\" in \"%s\" has %llu bytes, "
                            "not the %llu written",
                            from, to, c->conf->dir, (unsigned long long)st.st_size,
                            (unsigned long long)t->sizes[part]);
    else
        err = tpc_error_new(TPC_ERR_DATA_LOSS, TPC_ERROR_FATAL,
                            "in-progress file \"%s\" and final file \"%s\" are both missing in "
                            "\"%s\"",
                            from, to, c->conf->dir);
    return tpc_error_hint(err, "something other than this sink moved or deleted files in the "
                               "folder; the records of this transaction are lost");
}

tpc_error_t *tpc__file_commit(void *conn, void *txn)
{
    tpc__file_conn_t *c = conn;
    tpc__file_txn_t *t = txn;
    if (t->fd >= 0 || !t->ckpt)
        return tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL,
                             "file transaction committed before it was pre-committed");
    for (uint32_t i = 0; i < t->nparts; i++) {
        tpc_error_t *err = commit_part(c, t, i);
        if (err)
            return err;
    }
    /* Make the new names durable before the checkpoint's state forgets the transaction. */
    return c->durable && t->nparts ? tpc__file_fsync_dir(c) : NULL;
}

/* The sink's folder for listing, through its descriptor (the folder may have been renamed). */
static tpc_error_t *open_folder(const tpc__file_conn_t *c, DIR **out)
{
    int fd = openat(c->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    *out = fd >= 0 ? fdopendir(fd) : NULL;
    if (*out)
        return NULL;
    int e = errno;
    if (fd >= 0)
        close(fd);
    return tpc__file_errno(e, "list folder", c->conf->dir);
}

typedef bool (*dead_fn)(const tpc__file_conn_t *c, const void *arg,
                        const tpc__file_inprogress_t *f);

/* Delete every in-progress file of this sink for which @dead says so. */
static tpc_error_t *sweep(tpc__file_conn_t *c, dead_fn dead, const void *arg, size_t *deleted)
{
    DIR *d;
    tpc_error_t *open_err = open_folder(c, &d);
    if (open_err)
        return open_err;
    tpc_error_t *err = NULL;
    struct dirent *de;
    *deleted = 0;
    while (!err && (errno = 0, de = readdir(d)) != NULL) {
        tpc__file_inprogress_t f;
        if (!tpc__file_parse_inprogress(de->d_name, c->conf->prefix, &f) || !dead(c, arg, &f))
            continue;
        if (unlinkat(c->dirfd, de->d_name, 0) == 0)
            (*deleted)++;
        else if (errno != ENOENT)
            err = tpc__file_errno(errno, "delete file", de->d_name);
    }
    if (!err && errno)
        err = tpc__file_errno(errno, "list folder", c->conf->dir);
    closedir(d);
    return err;
}

static bool same_txn(const tpc__file_conn_t *c, const void *arg, const tpc__file_inprogress_t *f)
{
    (void)c;
    const tpc__file_txn_t *t = arg;
    return f->subtask == t->subtask && f->begin_ckpt == t->begin_ckpt && f->token == t->token &&
           f->epoch == t->epoch;
}

tpc_error_t *tpc__file_recover_and_abort(void *conn, void *txn)
{
    /* The handle was stored before the crash; parts written after it are not in it. */
    size_t deleted;
    return sweep(conn, same_txn, txn, &deleted);
}

static bool lingering(const tpc__file_conn_t *c, const void *arg, const tpc__file_inprogress_t *f)
{
    const tpc_txn_lingering_t *l = arg;
    uint64_t mine = c->st->owner_epoch;
    if (!tpc_txn_owns(c->st, f->subtask))
        return false;
    /* Without owners the epoch decides nothing: files that a run with owners left in the folder
     * go by the checkpoint rule, as every other file. */
    if (!mine)
        return f->begin_ckpt > l->restored_checkpoint;
    return f->epoch <= mine && (f->epoch < mine || f->begin_ckpt > l->restored_checkpoint);
}

static bool older_epoch(const tpc__file_conn_t *c, const void *arg, const tpc__file_inprogress_t *f)
{
    (void)arg;
    return tpc_txn_owns(c->st, f->subtask) && f->epoch < c->st->owner_epoch;
}

tpc_error_t *tpc__file_sweep_older(tpc__file_conn_t *c)
{
    if (!c->st->owner_epoch)
        return NULL;
    size_t deleted;
    tpc_error_t *err = sweep(c, older_epoch, NULL, &deleted);
    if (deleted)
        tpc_txn_log(c->st, TPC_LOG_WARN,
                    "deleted %zu in-progress files of prefix \"%s\" in \"%s\" that an older owner "
                    "epoch than %" PRIu64 " wrote after this owner took over",
                    deleted, c->conf->prefix, c->conf->dir, c->st->owner_epoch);
    /* A leftover that cannot be deleted now is garbage, never output (no checkpoint of this
     * owner names it): it must not fail the checkpoint, and the next one tries again. */
    if (err) {
        tpc_txn_log(c->st, TPC_LOG_WARN,
                    "could not delete an older owner epoch's in-progress files of prefix \"%s\" "
                    "in \"%s\"; the next checkpoint tries again: %s",
                    c->conf->prefix, c->conf->dir, tpc_error_message(err));
        tpc_error_destroy(err);
    }
    return NULL;
}

/* A start without state (a run started over, or the first one) whose checkpoint ids do not go
 * past the files that an earlier run committed here would collide with them at its first commit:
 * refuse now, saying how to start over. Ids continue past everything a checkpoint.dir has seen,
 * so this happens only with a new or emptied checkpoint.dir. */
static tpc_error_t *check_fresh_start(tpc__file_conn_t *c)
{
    const tpc_txn_subtask_t *st = c->st;
    uint64_t first = st->first_checkpoint ? st->first_checkpoint : 1;
    DIR *d;
    tpc_error_t *open_err = open_folder(c, &d);
    if (open_err)
        return open_err;
    tpc_error_t *err = NULL;
    struct dirent *de;
    while (!err && (de = readdir(d)) != NULL) {
        int sub;
        uint64_t ckpt;
        if (!tpc__file_parse_final(de->d_name, c->conf, &sub, &ckpt) || !tpc_txn_owns(st, sub) ||
            ckpt < first)
            continue;
        err = tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                            "sink \"%s\" starts without state, but \"%s\" in \"%s\" holds "
                            "\"%s\", committed by an earlier run for checkpoint %" PRIu64
                            ", and this run's checkpoints start at %" PRIu64
                            ": its files would collide",
                            st->sink_name, c->conf->prefix, c->conf->dir, de->d_name, ckpt, first);
        err = tpc_error_hint(err,
                             "to resume, point checkpoint.dir at the earlier run's checkpoints; "
                             "to start over, keep that checkpoint.dir and set restore.mode=fresh "
                             "(checkpoint ids then continue past the earlier ones), or move the "
                             "earlier files out of \"%s\", or give the sink another prefix",
                             c->conf->dir);
    }
    closedir(d);
    return err;
}

tpc_error_t *tpc__file_abort_lingering(void *conn, const tpc_txn_lingering_t *l)
{
    tpc__file_conn_t *c = conn;
    size_t deleted;
    tpc_error_t *err = sweep(c, lingering, l, &deleted);
    if (!err && !l->restored_checkpoint && c->st->guarantee == TPC_TXN_EXACTLY_ONCE)
        err = check_fresh_start(c);
    if (deleted)
        tpc_txn_log(c->st, TPC_LOG_INFO,
                    "deleted %zu in-progress files in \"%s\" that no checkpoint up to %" PRIu64
                    " holds",
                    deleted, c->conf->dir, l->restored_checkpoint);
    return err;
}
