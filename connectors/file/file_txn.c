/*
 * Writing one transaction of the file sink: records are encoded into a per-subtask buffer and
 * written to the transaction's current in-progress part file when the buffer fills, the part is
 * rolled before it would exceed file.part-size, and pre-commit flushes and fsyncs so that after
 * it the data survives a crash and commit is a rename. Part files are created on the first record,
 * so begin costs nothing and an empty transaction touches no file. Also the handle's bytes.
 */
#include "file_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

tpc_error_t *tpc__file_open(void *arg, const tpc_txn_subtask_t *st, void **out)
{
    const tpc__file_conf_t *conf = arg;
    tpc__file_conn_t *c = calloc(1, sizeof *c);
    if (!c)
        return tpc_error_nomem();
    c->conf = conf;
    c->st = st;
    c->durable = st->guarantee != TPC_TXN_NONE;
    c->cap = conf->buffer_size;
    c->buf = malloc(c->cap);
    c->dirfd = open(conf->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (c->dirfd < 0 || !c->buf) {
        tpc_error_t *err =
            c->buf ? tpc__file_errno(errno, "open folder", conf->dir) : tpc_error_nomem();
        tpc__file_close(c);
        return err;
    }
    *out = c;
    return NULL;
}

void tpc__file_close(void *conn)
{
    tpc__file_conn_t *c = conn;
    if (c->dirfd >= 0)
        close(c->dirfd);
    free(c->buf);
    free(c);
}

tpc_error_t *tpc__file_begin(void *conn, uint64_t checkpoint_id, void **txn)
{
    tpc__file_conn_t *c = conn;
    tpc__file_txn_t *t = calloc(1, sizeof *t);
    if (!t)
        return tpc_error_nomem();
    t->subtask = c->st->subtask;
    t->begin_ckpt = checkpoint_id;
    t->token = tpc__file_token();
    t->epoch = c->st->owner_epoch;
    t->fd = -1;
    c->len = 0;
    *txn = t;
    return NULL;
}

static tpc_error_t *write_all(int fd, const unsigned char *p, size_t n, const char *name)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return tpc__file_errno(errno, "write to file", name);
        p += w;
        n -= (size_t)w;
    }
    return NULL;
}

/* Write the first @n buffered bytes to the open part, keeping the rest at the buffer's start. */
static tpc_error_t *drain(tpc__file_conn_t *c, tpc__file_txn_t *t, size_t n)
{
    if (n == 0)
        return NULL;
    char name[TPC__FILE_NAME_MAX];
    tpc__file_inprogress_name(name, c->conf->prefix, t, t->nparts - 1);
    tpc_error_t *err = write_all(t->fd, c->buf, n, name);
    if (err)
        return err;
    memmove(c->buf, c->buf + n, c->len - n);
    c->len -= n;
    return NULL;
}

/* Finish the open part. At a roll (@sync false) the data is only handed to the disk: waiting for
 * it would stall the writer for the whole part, and pre-commit waits for all parts anyway. */
static tpc_error_t *close_part(tpc__file_conn_t *c, tpc__file_txn_t *t, size_t keep, bool sync)
{
    if (t->fd < 0)
        return NULL;
    char name[TPC__FILE_NAME_MAX];
    tpc__file_inprogress_name(name, c->conf->prefix, t, t->nparts - 1);
    tpc_error_t *err = drain(c, t, c->len - keep);
    if (!err && c->durable && sync && fsync(t->fd) != 0)
        err = tpc__file_errno(errno, "fsync file", name);
    if (!err && c->durable && !sync)
        sync_file_range(t->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
    if (close(t->fd) != 0 && !err)
        err = tpc__file_errno(errno, "close file", name);
    t->fd = -1;
    return err;
}

/* Wait until the parts closed at rolls are on disk. */
static tpc_error_t *sync_rolled_parts(tpc__file_conn_t *c, tpc__file_txn_t *t, uint32_t count)
{
    char name[TPC__FILE_NAME_MAX];
    for (uint32_t i = 0; i < count; i++) {
        tpc__file_inprogress_name(name, c->conf->prefix, t, i);
        int fd = openat(c->dirfd, name, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return tpc__file_errno(errno, "open file", name);
        int rc = fsync(fd);
        int e = errno;
        close(fd);
        if (rc != 0)
            return tpc__file_errno(e, "fsync file", name);
    }
    return NULL;
}

static tpc_error_t *open_part(tpc__file_conn_t *c, tpc__file_txn_t *t)
{
    if (!tpc_array_grow(&t->sizes, &t->sizes_cap, (size_t)t->nparts + 1, sizeof *t->sizes))
        return tpc_error_nomem();
    char name[TPC__FILE_NAME_MAX];
    if (!tpc__file_inprogress_name(name, c->conf->prefix, t, t->nparts))
        return tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                             "file name for prefix \"%s\" is too "
                             "long",
                             c->conf->prefix);
    /* O_EXCL: a name is never reused, so an existing file means something is badly wrong. */
    t->fd = openat(c->dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (t->fd < 0)
        return tpc__file_errno(errno, "create file", name);
    t->sizes[t->nparts++] = 0;
    return NULL;
}

static tpc_error_t *grow(tpc__file_conn_t *c, size_t need)
{
    return tpc_array_grow(&c->buf, &c->cap, need, 1) ? NULL : tpc_error_nomem();
}

static bool overflows(const tpc__file_txn_t *t, size_t n, uint64_t limit)
{
    return t->fd >= 0 && t->sizes[t->nparts - 1] > 0 && t->sizes[t->nparts - 1] + n > limit;
}

/* The default encoding, value + '\n': its length is known before copying, so the roll comes
 * first and the bytes are copied once. */
static tpc_error_t *write_value(tpc__file_conn_t *c, tpc__file_txn_t *t, const tpc_record_t *r,
                                uint64_t limit)
{
    size_t n = r->value_len + 1;
    tpc_error_t *err = overflows(t, n, limit) ? close_part(c, t, 0, false) : NULL;
    if (!err && t->fd < 0)
        err = open_part(c, t);
    if (!err && n > c->cap - c->len) {
        err = drain(c, t, c->len);
        if (!err && n > c->cap)
            err = grow(c, n);
    }
    if (err)
        return err;
    if (r->value_len)
        memcpy(c->buf + c->len, r->value, r->value_len);
    c->buf[c->len + r->value_len] = '\n';
    c->len += n;
    t->sizes[t->nparts - 1] += n;
    return c->len == c->cap ? drain(c, t, c->len) : NULL;
}

/* A user's encoder tells the length only by encoding: the record lands at the buffer's end first,
 * and if it overflows the open part, the bytes before it finish that part and it starts the next.
 */
static tpc_error_t *write_encoded(tpc__file_conn_t *c, tpc__file_txn_t *t, const tpc_record_t *r,
                                  uint64_t limit)
{
    const tpc__file_conf_t *conf = c->conf;
    size_t n = conf->encode(conf->encode_opaque, r, c->buf + c->len, c->cap - c->len);
    if (n > c->cap - c->len) {
        /* It did not fit: write out what belongs to the open part, make room, encode again. */
        tpc_error_t *err = t->fd >= 0 ? drain(c, t, c->len) : NULL;
        if (!err && n > c->cap)
            err = grow(c, n);
        if (err)
            return err;
        size_t again = conf->encode(conf->encode_opaque, r, c->buf + c->len, c->cap - c->len);
        if (again != n)
            return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                                 "file sink encoder returned %zu bytes, then %zu for the same "
                                 "record",
                                 n, again);
    }
    c->len += n;
    tpc_error_t *err = overflows(t, n, limit) ? close_part(c, t, n, false) : NULL;
    if (!err && t->fd < 0)
        err = open_part(c, t);
    if (err)
        return err;
    t->sizes[t->nparts - 1] += n;
    return c->len == c->cap ? drain(c, t, c->len) : NULL;
}

tpc_error_t *tpc__file_write(void *conn, void *txn, const tpc_record_t *records, size_t count)
{
    tpc__file_conn_t *c = conn;
    tpc__file_txn_t *t = txn;
    const uint64_t limit = c->conf->part_size;
    tpc_error_t *err = NULL;
    if (!c->conf->encode)
        for (size_t i = 0; i < count && !err; i++)
            err = write_value(c, t, &records[i], limit);
    else
        for (size_t i = 0; i < count && !err; i++)
            err = write_encoded(c, t, &records[i], limit);
    return err;
}

tpc_error_t *tpc__file_flush(void *conn, void *txn)
{
    tpc__file_conn_t *c = conn;
    tpc__file_txn_t *t = txn;
    return t->fd >= 0 ? drain(c, t, c->len) : NULL;
}

tpc_error_t *tpc__file_pre_commit(void *conn, void *txn, uint64_t checkpoint_id)
{
    tpc__file_conn_t *c = conn;
    tpc__file_txn_t *t = txn;
    uint32_t rolled = t->fd >= 0 ? t->nparts - 1 : t->nparts;
    tpc_error_t *err = close_part(c, t, 0, true);
    if (!err && c->durable && rolled)
        err = sync_rolled_parts(c, t, rolled);
    if (!err)
        err = tpc__file_sweep_older(c);
    if (err)
        return err;
    t->ckpt = checkpoint_id;
    t->token_in_name = c->st->guarantee != TPC_TXN_EXACTLY_ONCE;
    char name[TPC__FILE_NAME_MAX];
    for (uint32_t i = 0; i < t->nparts; i++)
        if (!tpc__file_final_name(name, c->conf, t, i))
            return tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                 "file name for prefix \"%s\" is too long", c->conf->prefix);
    /* The files' data is on disk; their names must be too, or a crash could lose them. */
    return c->durable ? tpc__file_fsync_dir(c) : NULL;
}

tpc_error_t *tpc__file_abort(void *conn, void *txn)
{
    tpc__file_conn_t *c = conn;
    tpc__file_txn_t *t = txn;
    if (t->fd >= 0) {
        close(t->fd);
        t->fd = -1;
    }
    c->len = 0;
    char name[TPC__FILE_NAME_MAX];
    for (uint32_t i = 0; i < t->nparts; i++) {
        tpc__file_inprogress_name(name, c->conf->prefix, t, i);
        if (unlinkat(c->dirfd, name, 0) != 0 && errno != ENOENT)
            return tpc__file_errno(errno, "delete file", name);
    }
    return NULL;
}

bool tpc__file_is_empty(void *conn, const void *txn)
{
    (void)conn;
    const tpc__file_txn_t *t = txn;
    return t->nparts == 0;
}

void tpc__file_free_txn(void *conn, void *txn)
{
    (void)conn;
    tpc__file_txn_t *t = txn;
    if (t->fd >= 0)
        close(t->fd);
    free(t->sizes);
    free(t);
}

void tpc__file_describe(void *conn, const void *txn, char *buf, size_t cap)
{
    tpc__file_conn_t *c = conn;
    const tpc__file_txn_t *t = txn;
    char name[TPC__FILE_NAME_MAX];
    if (t->ckpt)
        tpc__file_final_name(name, c->conf, t, 0);
    else
        tpc__file_inprogress_name(name, c->conf->prefix, t, 0);
    if (t->nparts > 1)
        snprintf(buf, cap, "%s (+%" PRIu32 " parts)", name, t->nparts - 1);
    else
        snprintf(buf, cap, "%s", name);
}

/* Handle bytes, big-endian: version u8, flags u8 (1 = token in final names), subtask u32, begin
 * checkpoint u64, token u64, pre-commit checkpoint u64, part count u32, then each part's size u64.
 * Version 2, written for transactions of an owner (epoch > 0), adds the owner epoch u64 after the
 * part count; version 1 reads as epoch 0, whose names carry no epoch. */
#define HANDLE_FIXED_V1 34
#define HANDLE_FIXED_V2 42

tpc_error_t *tpc__file_serialize(void *conn, const void *txn, tpc_txn_buf_t *out)
{
    (void)conn;
    const tpc__file_txn_t *t = txn;
    unsigned char fixed[HANDLE_FIXED_V2], *p = fixed;
    tpc_txn_put_be(&p, t->epoch ? 2 : 1, 1);
    tpc_txn_put_be(&p, t->token_in_name ? 1 : 0, 1);
    tpc_txn_put_be(&p, (uint64_t)t->subtask, 4);
    tpc_txn_put_be(&p, t->begin_ckpt, 8);
    tpc_txn_put_be(&p, t->token, 8);
    tpc_txn_put_be(&p, t->ckpt, 8);
    tpc_txn_put_be(&p, t->nparts, 4);
    if (t->epoch)
        tpc_txn_put_be(&p, t->epoch, 8);
    tpc_error_t *err = tpc_txn_buf_append(out, fixed, (size_t)(p - fixed));
    for (uint32_t i = 0; i < t->nparts && !err; i++) {
        unsigned char s[8], *q = s;
        tpc_txn_put_be(&q, t->sizes[i], 8);
        err = tpc_txn_buf_append(out, s, sizeof s);
    }
    return err;
}

tpc_error_t *tpc__file_deserialize(void *conn, const void *bytes, size_t len, void **txn)
{
    (void)conn;
    const unsigned char *p = bytes;
    if (len < 1 || (p[0] != 1 && p[0] != 2))
        return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL,
                             len ? "file transaction handle has unknown version %u"
                                 : "file transaction handle is empty",
                             len ? (unsigned)p[0] : 0u);
    size_t fixed = p[0] == 1 ? HANDLE_FIXED_V1 : HANDLE_FIXED_V2;
    if (len < fixed)
        return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL,
                             "file transaction handle of %zu bytes is too short", len);
    bool has_epoch = p[0] == 2;
    bool token_in_name = p[1] & 1;
    p += 2;
    tpc__file_txn_t *t = calloc(1, sizeof *t);
    if (!t)
        return tpc_error_nomem();
    t->fd = -1;
    t->token_in_name = token_in_name;
    t->subtask = (int)tpc_txn_get_be(&p, 4);
    t->begin_ckpt = tpc_txn_get_be(&p, 8);
    t->token = tpc_txn_get_be(&p, 8);
    t->ckpt = tpc_txn_get_be(&p, 8);
    uint64_t nparts = tpc_txn_get_be(&p, 4);
    t->epoch = has_epoch ? tpc_txn_get_be(&p, 8) : 0;
    if (t->subtask < 0 || (has_epoch && !t->epoch) || nparts != (len - fixed) / 8 ||
        (len - fixed) % 8) {
        free(t);
        return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL,
                             "file transaction handle of %zu bytes does not hold %llu parts", len,
                             (unsigned long long)nparts);
    }
    t->nparts = (uint32_t)nparts;
    t->sizes_cap = nparts;
    t->sizes = nparts ? calloc(nparts, sizeof *t->sizes) : NULL;
    if (nparts && !t->sizes) {
        free(t);
        return tpc_error_nomem();
    }
    for (uint32_t i = 0; i < t->nparts; i++)
        t->sizes[i] = tpc_txn_get_be(&p, 8);
    *txn = t;
    return NULL;
}

/* Without an instance the final name is not known (it needs the sink's folder and prefix): the
 * line says what the handle holds. */
tpc_error_t *tpc__file_describe_handle(const void *bytes, size_t len, tpc_txn_handle_view_t *out)
{
    void *txn = NULL;
    tpc_error_t *err = tpc__file_deserialize(NULL, bytes, len, &txn);
    if (err)
        return err;
    const tpc__file_txn_t *t = txn;
    char epoch[48] = "";
    if (t->epoch)
        snprintf(epoch, sizeof epoch, ", owner epoch %llu", (unsigned long long)t->epoch);
    snprintf(out->line, sizeof out->line, "subtask %d, %u part files, token %llu%s", t->subtask,
             (unsigned)t->nparts, (unsigned long long)t->token, epoch);
    tpc__file_free_txn(NULL, txn);
    return NULL;
}
