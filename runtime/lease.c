/*
 * The lease of a checkpoint folder: a running job holds it, so that a manual command that would
 * commit or abort what the job's checkpoints promise (twopc resolve, kafka commit/abort, pg
 * resolve) can tell that the job is alive and refuse. It is an flock(2) on the folder's file
 * "LOCK", so it dies with its process however that ends (kill -9 included): nothing stale to clean
 * up. Job instances share it (a second instance of a job is caught by the checkpoint files
 * themselves, docs/architecture.md); a manual command takes it alone. The file also says who took
 * it last (pid, host, since), for the message of whoever is refused.
 */
#include "runtime_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

struct tpc_dir_lease_s {
    int fd;
};

#define LEASE_FILE "LOCK"

/* "pid 123 on host h since 2026-12-05T19:01:06Z (a job)" from the file, or "" when unreadable. */
static void read_holder(int fd, char *out, size_t cap)
{
    char buf[512];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    out[0] = 0;
    if (n <= 0)
        return;
    buf[n] = 0;
    long pid = 0;
    char host[256] = "", since[64] = "", who[32] = "";
    if (sscanf(buf, "pid %ld host %255s since %63s holder %31s", &pid, host, since, who) == 4)
        snprintf(out, cap, " (the last to take it: %s, pid %ld on host \"%s\" since %s)", who, pid,
                 host, since);
}

static void write_holder(int fd, bool exclusive)
{
    char host[256] = "unknown";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = 0;
    for (char *c = host; *c; c++)
        if (*c <= ' ' || *c > '~')
            *c = '?';
    char since[64] = "?";
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm))
        strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ", &tm);
    char line[512];
    int n = snprintf(line, sizeof line, "pid %ld host %s since %s holder %s\n", (long)getpid(),
                     host, since, exclusive ? "twopc" : "job");
    /* Best effort: the lock is the lease, the text only names its holder. */
    if (n > 0 && ftruncate(fd, 0) == 0 && pwrite(fd, line, (size_t)n, 0) < 0)
        return;
}

tpc_error_t *tpc_checkpoint_dir_lease(const char *dir, bool exclusive, tpc_dir_lease_t **out)
{
    if (!dir || !out)
        return tpc_error_new(TPC_ERR_INVALID_ARG, 0, "tpc_checkpoint_dir_lease needs a folder");
    *out = NULL;
    size_t cap = strlen(dir) + sizeof LEASE_FILE + 2;
    char *path = malloc(cap);
    if (!path)
        return tpc_error_nomem();
    snprintf(path, cap, "%s/%s", dir, LEASE_FILE);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        tpc_error_t *err = tpc_error_hint(
            tpc_error_new(e == ENOENT ? TPC_ERR_NOT_FOUND : TPC_ERR_IO, 0,
                          "could not open the lease \"%s\" of the checkpoint folder: %s", path,
                          strerror(e)),
            "point at the job's \"checkpoint.dir\", a folder this user may write into");
        free(path);
        return err;
    }
    if (flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
        int e = errno;
        char holder[400];
        read_holder(fd, holder, sizeof holder);
        tpc_error_t *err;
        if (e == EWOULDBLOCK && exclusive)
            err = tpc_error_hint(
                tpc_error_new(TPC_ERR_STATE, 0,
                              "the checkpoint folder \"%s\" is in use by a running job%s", dir,
                              holder),
                "stop the job first (SIGTERM takes a savepoint); a manual commit or abort beside "
                "a running job can break exactly-once");
        else if (e == EWOULDBLOCK)
            err = tpc_error_hint(
                tpc_error_new(TPC_ERR_STATE, 0,
                              "the checkpoint folder \"%s\" is in use by a twopc command%s", dir,
                              holder),
                "wait until the command has ended, then start the job again");
        else
            err = tpc_error_new(TPC_ERR_IO, 0, "could not lock \"%s\": %s", path, strerror(e));
        close(fd);
        free(path);
        return err;
    }
    free(path);
    write_holder(fd, exclusive);
    tpc_dir_lease_t *l = malloc(sizeof *l);
    if (!l) {
        close(fd);
        return tpc_error_nomem();
    }
    l->fd = fd;
    *out = l;
    return NULL;
}

void tpc_checkpoint_dir_release(tpc_dir_lease_t *lease)
{
    if (!lease)
        return;
    close(lease->fd); /* the lock goes with the last descriptor */
    free(lease);
}
