/*
 * Checkpoint storage: the interface every backend implements (tpc_storage.h) and its local
 * folder backend. The checkpoint files (storage.c) and the completion
 * record (record.c) go through it.
 *
 * The folder backend keeps the folder as it always was: a checkpoint is written to a temporary
 * name of its own, fsynced, linked into place, never over an existing file (link() refuses to
 * replace; where the file system has no hard links, a check and rename() have to do), and the
 * folder fsynced, so a crash leaves either no file or the whole one. The completion record is
 * replaced by a temporary file renamed over it. A compare-and-set of the record takes an flock on
 * ".completed.lock" for the read, the comparison and the rename, so two processes on one folder
 * cannot both replace the version they read; the lock dies with its process (kill -9 included).
 * A version is the hex SHA-256 of the contents: the record's contents never repeat (its newest id
 * and its owner epoch only grow), so a version never comes back.
 */
#include "runtime_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

const char tpc_storage_any[] = "*";

void tpc_storage_destroy(tpc_storage_t *s)
{
    if (s && s->ops->destroy)
        s->ops->destroy(s);
}

void tpc_storage_names_free(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

char *tpc__store_folder_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = tpc__xmalloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static tpc_error_t *io_error(const char *what, const char *path)
{
    return tpc_error_hint(tpc_error_new(TPC_ERR_IO, TPC_ERROR_RETRIABLE, "could not %s \"%s\": %s",
                                        what, path, strerror(errno)),
                          "check that \"checkpoint.dir\" is writable and the disk is not full");
}

static tpc_error_t *fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return io_error("open directory", dir);
    int rc = fsync(fd);
    close(fd);
    return rc ? io_error("fsync directory", dir) : NULL;
}

static tpc_error_t *write_all(int fd, const uint8_t *p, size_t n, const char *path)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return io_error("write", path);
        p += w;
        n -= (size_t)w;
    }
    return NULL;
}

/* @p/@n into a new file @tmp, fsynced. */
static tpc_error_t *write_new(const char *tmp, int flags, const uint8_t *p, size_t n)
{
    int fd = open(tmp, O_WRONLY | O_CREAT | flags | O_CLOEXEC, 0644);
    if (fd < 0)
        return io_error("create", tmp);
    tpc_error_t *err = write_all(fd, p, n, tmp);
    if (!err && fsync(fd) != 0)
        err = io_error("fsync", tmp);
    close(fd);
    return err;
}

static char *version_of(const uint8_t *p, size_t n)
{
    uint8_t d[32];
    tpc__sha256(p, n, d);
    char *v = tpc__xmalloc(65);
    for (int i = 0; i < 32; i++)
        snprintf(v + 2 * i, 3, "%02x", d[i]);
    return v;
}

/* Put the finished temporary file in place unless a file of that name exists. */
static tpc_error_t *put_in_place(const char *dir, const char *tmp, const char *path, bool *exists)
{
    if (link(tmp, path) == 0) {
        unlink(tmp);
        return NULL;
    }
    int link_errno = errno;
    if (link_errno == EEXIST) {
        /* Over NFS a retransmitted link() can report EEXIST for a link it made. */
        struct stat a, b;
        if (stat(tmp, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
            a.st_ino == b.st_ino) {
            unlink(tmp);
            return NULL;
        }
        *exists = true;
        return NULL;
    }
    if (link_errno == ENOENT && access(dir, F_OK) == 0) /* someone else cleans this directory */
        return tpc_error_prefix(tpc__checkpoint_other_writer(),
                                "\"%s\" was removed while it was written", tmp);
    errno = link_errno;
    if (errno != EPERM && errno != ENOTSUP && errno != EOPNOTSUPP && errno != ENOSYS)
        return io_error("link", tmp);
    if (access(path, F_OK) == 0) {
        *exists = true;
        return NULL;
    }
    return rename(tmp, path) == 0 ? NULL : io_error("rename", tmp);
}

static tpc_error_t *folder_put_new(tpc_storage_t *s, const char *name, const uint8_t *p, size_t n,
                                   bool *exists)
{
    const char *dir = ((tpc__store_folder_t *)s)->dir;
    *exists = false;
    size_t cap = strlen(dir) + strlen(name) + 64;
    char *tmp = tpc__xmalloc(cap), *path = tpc__store_folder_path(dir, name);
    /* A name no other writer uses, even another instance that writes the same object. */
    snprintf(tmp, cap, "%s/.%s.%ld-%" PRIu64 ".tmp", dir, name, (long)getpid(), tpc__now_us());
    tpc_error_t *err = write_new(tmp, O_EXCL, p, n);
    if (!err)
        err = put_in_place(dir, tmp, path, exists);
    if (!err && !*exists)
        err = fsync_dir(dir);
    if (err || *exists)
        unlink(tmp);
    free(tmp);
    free(path);
    return err;
}

static tpc_error_t *folder_get(tpc_storage_t *s, const char *name, uint8_t **p, size_t *n,
                               char **version, bool *found)
{
    char *path = tpc__store_folder_path(((tpc__store_folder_t *)s)->dir, name);
    int errnum;
    *found = false;
    if (version)
        *version = NULL;
    tpc_error_t *err = tpc__file_read(path, p, n, &errnum);
    free(path);
    if (err && errnum == ENOENT) {
        tpc_error_destroy(err);
        return NULL;
    }
    if (err)
        return err;
    *found = true;
    if (version)
        *version = version_of(*p, *n);
    return NULL;
}

static tpc_error_t *folder_list(tpc_storage_t *s, const char *prefix, char ***names, size_t *n)
{
    const char *dir = ((tpc__store_folder_t *)s)->dir;
    *names = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            return NULL;
        return io_error("open directory", dir);
    }
    size_t cap = 0, plen = strlen(prefix);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        /* temporary files of writes in flight, locks and the lease are not objects */
        if (e->d_name[0] == '.' || strcmp(e->d_name, "LOCK") == 0 ||
            (len > 4 && strcmp(e->d_name + len - 4, ".tmp") == 0) ||
            strncmp(e->d_name, prefix, plen) != 0)
            continue;
        tpc__xgrow(names, &cap, *n + 1, sizeof **names);
        (*names)[(*n)++] = tpc__xstrdup(e->d_name);
    }
    closedir(d);
    return NULL;
}

static tpc_error_t *folder_remove(tpc_storage_t *s, const char *name)
{
    char *path = tpc__store_folder_path(((tpc__store_folder_t *)s)->dir, name);
    tpc_error_t *err = unlink(path) != 0 && errno != ENOENT ? io_error("remove", path) : NULL;
    free(path);
    return err;
}

/* Replace @path by a temporary file renamed over it, then fsync the folder. */
static tpc_error_t *replace(const char *dir, const char *path, const uint8_t *p, size_t n)
{
    size_t cap = strlen(path) + 64;
    char *tmp = tpc__xmalloc(cap);
    snprintf(tmp, cap, "%s.%ld.tmp", path, (long)getpid());
    tpc_error_t *err = write_new(tmp, O_TRUNC, p, n);
    if (!err && rename(tmp, path) != 0)
        err = io_error("rename", tmp);
    if (!err)
        err = fsync_dir(dir);
    if (err)
        unlink(tmp);
    free(tmp);
    return err;
}

static tpc_error_t *folder_swap(tpc_storage_t *s, const char *name, const char *expected,
                                const uint8_t *p, size_t n, bool *stale, char **version)
{
    const char *dir = ((tpc__store_folder_t *)s)->dir;
    *stale = false;
    if (version)
        *version = NULL;
    char *path = tpc__store_folder_path(dir, name);
    if (expected == TPC_STORAGE_ANY) {
        tpc_error_t *err = replace(dir, path, p, n);
        free(path);
        if (!err && version)
            *version = version_of(p, n);
        return err;
    }
    size_t cap = strlen(dir) + strlen(name) + 16;
    char *lock = tpc__xmalloc(cap);
    snprintf(lock, cap, "%s/.%s.lock", dir, name);
    tpc_error_t *err = NULL;
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        err = io_error("create", lock);
    while (!err && flock(fd, LOCK_EX) != 0)
        if (errno != EINTR)
            err = io_error("lock", lock);
    if (!err) {
        uint8_t *cur = NULL;
        size_t len = 0;
        bool found;
        char *now = NULL;
        err = folder_get(s, name, &cur, &len, &now, &found);
        if (!err)
            *stale = expected == TPC_STORAGE_ABSENT ? found : !found || strcmp(now, expected) != 0;
        if (!err && !*stale)
            err = replace(dir, path, p, n);
        if (!err && !*stale && version)
            *version = version_of(p, n);
        free(cur);
        free(now);
    }
    if (fd >= 0)
        close(fd); /* and with it the lock */
    free(lock);
    free(path);
    return err;
}

static const char *folder_where(tpc_storage_t *s)
{
    return ((tpc__store_folder_t *)s)->dir;
}

static const tpc_storage_ops_t folder_ops = {
    .kind = "folder",
    .put_new = folder_put_new,
    .get = folder_get,
    .list = folder_list,
    .remove = folder_remove,
    .swap = folder_swap,
    .where = folder_where,
};

void tpc__store_folder_init(tpc__store_folder_t *f, const char *dir)
{
    f->base.ops = &folder_ops;
    f->dir = dir;
}
