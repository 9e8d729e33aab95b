/*
 * Durable checkpoint files. A checkpoint is one file, `chk-<id>` (or `savepoint-<id>`), holding
 * the metadata (job, vertices, which subtasks had closed or finished) and every subtask's state,
 * followed by a SHA-256 of everything before it. It is put into the checkpoint storage (store.c)
 * create-only, whole or not at all: an existing file of that name was written by another instance
 * of the job. Readers verify the checksum and the structure; a torn or corrupt file is an error
 * that recovery reports and skips. The layout is described in docs/architecture.md.
 */
#include "runtime_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "TPCCKPT1"
#define FORMAT_VERSION                                                                             \
    4u /* 1: no max-parallelism, no keyed state; 2: no links; 3: no owner epoch */
#define DIGEST_LEN     32
#define VERTEX_MIN     8  /* name length u32 + parallelism u32 */
#define SUBTASK_MIN    17 /* flags u8, then count u32 + length u32 for list and for union state */
#define SUBTASK_MIN_V2 33 /* and for owned and keyed state */

tpc_error_t *(*tpc__checkpoint_write_fault)(uint64_t id);
void (*tpc__checkpoint_write_probe)(const tpc__checkpoint_t *c);

void tpc__checkpoint_free(tpc__checkpoint_t *c)
{
    if (!c)
        return;
    for (int v = 0; v < c->nvertices; v++) {
        tpc__vertex_snapshot_t *vs = &c->vertices[v];
        for (int s = 0; vs->subtasks && s < vs->parallelism; s++)
            tpc__state_writer_free(&vs->subtasks[s].state);
        free(vs->subtasks);
        free(vs->name);
    }
    free(c->vertices);
    free(c->refs);
    free(c->job_name);
    *c = (tpc__checkpoint_t){0};
}

bool tpc__vertex_fully_closed(const tpc__vertex_snapshot_t *v)
{
    for (int s = 0; s < v->parallelism; s++)
        if (!v->subtasks[s].closed)
            return false;
    return true;
}

bool tpc__vertex_partly_closed(const tpc__vertex_snapshot_t *v)
{
    bool any = false;
    for (int s = 0; s < v->parallelism; s++)
        any |= v->subtasks[s].closed;
    return any && !tpc__vertex_fully_closed(v);
}

void tpc__sha256(const uint8_t *p, size_t len, uint8_t out[32])
{
    unsigned int n = DIGEST_LEN;
    EVP_Digest(p, len, out, &n, EVP_sha256(), NULL);
}

static int by_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

void tpc__checkpoint_collect_refs(tpc__checkpoint_t *c)
{
    free(c->refs);
    c->refs = NULL;
    c->nrefs = 0;
    size_t cap = 0;
    for (int v = 0; v < c->nvertices; v++)
        for (int s = 0; s < c->vertices[v].parallelism; s++) {
            const tpc_state_writer_t *w = &c->vertices[v].subtasks[s].state;
            for (uint32_t i = 0; i < w->nlinks; i++) {
                bool seen = false;
                for (uint32_t j = 0; j < c->nrefs && !seen; j++)
                    seen = c->refs[j] == w->links[i];
                if (seen)
                    continue;
                tpc__xgrow(&c->refs, &cap, c->nrefs + 1, sizeof *c->refs);
                c->refs[c->nrefs++] = w->links[i];
            }
        }
    if (c->nrefs)
        qsort(c->refs, c->nrefs, sizeof *c->refs, by_u64);
}

/* Format 3 only when some subtask's keyed state is incremental, 4 when an owner wrote it (with the
 * links of format 3, maybe none): a checkpoint without either stays readable by versions that
 * know format 2. */
static void encode(const tpc__checkpoint_t *c, tpc__buf_t *b)
{
    bool links = c->nrefs > 0 || c->owner_epoch;
    tpc__buf_put(b, MAGIC, 8);
    tpc__buf_put_u32(b, c->owner_epoch ? 4u : links ? 3u : 2u);
    tpc__buf_put_u64(b, c->id);
    tpc__buf_put_u64(b, c->timestamp_ms);
    tpc__buf_put_u8(b, c->savepoint);
    tpc__buf_put_u32(b, c->max_parallelism);
    if (links) { /* in the header, so that retention reads them alone */
        tpc__buf_put_u32(b, c->nrefs);
        for (uint32_t i = 0; i < c->nrefs; i++)
            tpc__buf_put_u64(b, c->refs[i]);
    }
    if (c->owner_epoch)
        tpc__buf_put_u64(b, c->owner_epoch);
    tpc__buf_put_bytes(b, c->job_name, strlen(c->job_name));
    tpc__buf_put_u32(b, (uint32_t)c->nvertices);
    for (int v = 0; v < c->nvertices; v++) {
        const tpc__vertex_snapshot_t *vs = &c->vertices[v];
        tpc__buf_put_bytes(b, vs->name, strlen(vs->name));
        tpc__buf_put_u32(b, (uint32_t)vs->parallelism);
        for (int s = 0; s < vs->parallelism; s++) {
            const tpc__subtask_snapshot_t *ss = &vs->subtasks[s];
            tpc__buf_put_u8(b, (uint8_t)(ss->closed | ss->operator_finished << 1));
            tpc__buf_put_u32(b, ss->state.nlist);
            tpc__buf_put_bytes(b, ss->state.list.data, ss->state.list.len);
            tpc__buf_put_u32(b, ss->state.nunion);
            tpc__buf_put_bytes(b, ss->state.uni.data, ss->state.uni.len);
            tpc__buf_put_u32(b, ss->state.nowned);
            tpc__buf_put_bytes(b, ss->state.owned.data, ss->state.owned.len);
            tpc__buf_put_u32(b, ss->state.nkeyed);
            tpc__buf_put_bytes(b, ss->state.keyed.data, ss->state.keyed.len);
            if (!links)
                continue;
            tpc__buf_put_u32(b, ss->state.nlinks);
            for (uint32_t i = 0; i < ss->state.nlinks; i++)
                tpc__buf_put_u64(b, ss->state.links[i]);
        }
    }
    uint8_t digest[DIGEST_LEN];
    tpc__sha256(b->data, b->len, digest);
    tpc__buf_put(b, digest, DIGEST_LEN);
}

/* Check that @p n entries (u32 len + bytes) fill @p p exactly. Each entry takes at least its 4
 * length bytes, so a count beyond len / 4 is refused before looping: a crafted count near 2^32
 * would otherwise spin for seconds. */
static bool entries_valid(const uint8_t *p, size_t len, uint32_t n)
{
    if (n > len / 4)
        return false;
    tpc__rd_t r = {p, len, 0, false};
    for (uint32_t i = 0; i < n && !r.bad; i++) {
        size_t l;
        tpc__rd_bytes(&r, &l);
    }
    return !r.bad && r.off == len;
}

char *tpc__rd_string(tpc__rd_t *r)
{
    size_t n;
    const uint8_t *p = tpc__rd_bytes(r, &n);
    if (!p)
        return NULL;
    char *s = tpc__xmalloc(n + 1);
    memcpy(s, p, n);
    s[n] = 0;
    return s;
}

tpc_error_t *tpc__checkpoint_decode(const uint8_t *p, size_t len, tpc__checkpoint_t *out)
{
    *out = (tpc__checkpoint_t){0};
    if (len < 8 + DIGEST_LEN || memcmp(p, MAGIC, 8) != 0)
        return tpc_error_new(TPC_ERR_CORRUPT, 0, "not a checkpoint file (bad header or too short)");
    uint8_t digest[DIGEST_LEN];
    tpc__sha256(p, len - DIGEST_LEN, digest);
    if (memcmp(digest, p + len - DIGEST_LEN, DIGEST_LEN) != 0)
        return tpc_error_new(TPC_ERR_CORRUPT, 0, "checksum mismatch (torn or altered file)");
    tpc__rd_t r = {p + 8, len - 8 - DIGEST_LEN, 0, false};
    uint32_t version = tpc__rd_u32(&r);
    if (version < 1 || version > FORMAT_VERSION)
        return tpc_error_new(TPC_ERR_CORRUPT, 0, "unsupported checkpoint format version %u",
                             version);
    out->id = tpc__rd_u64(&r);
    out->timestamp_ms = tpc__rd_u64(&r);
    out->savepoint = tpc__rd_u8(&r) != 0;
    out->max_parallelism = version >= 2 ? tpc__rd_u32(&r) : 0;
    if (version >= 3) {
        uint32_t nrefs = tpc__rd_u32(&r);
        if (r.bad || nrefs > (r.len - r.off) / 8)
            goto bad;
        out->refs = tpc__xmalloc((nrefs ? nrefs : 1) * sizeof *out->refs);
        out->nrefs = nrefs;
        for (uint32_t i = 0; i < nrefs; i++) {
            out->refs[i] = tpc__rd_u64(&r);
            if (out->refs[i] >= out->id || (i && out->refs[i] <= out->refs[i - 1]))
                goto bad; /* ascending, and only older checkpoints */
        }
    }
    out->owner_epoch = version >= 4 ? tpc__rd_u64(&r) : 0;
    out->job_name = tpc__rd_string(&r);
    /* Counts are bounded by the bytes left before anything is allocated: a vertex takes at least
     * VERTEX_MIN bytes, a subtask SUBTASK_MIN. */
    uint32_t nv = tpc__rd_u32(&r);
    if (r.bad || nv > 100000 || nv > (r.len - r.off) / VERTEX_MIN)
        goto bad;
    out->vertices = tpc__xcalloc(nv, sizeof(*out->vertices));
    out->nvertices = (int)nv;
    for (uint32_t v = 0; v < nv; v++) {
        tpc__vertex_snapshot_t *vs = &out->vertices[v];
        vs->name = tpc__rd_string(&r);
        uint32_t par = tpc__rd_u32(&r);
        if (r.bad || par == 0 || par > 100000 ||
            par > (r.len - r.off) / (version >= 2 ? SUBTASK_MIN_V2 : SUBTASK_MIN))
            goto bad;
        vs->subtasks = tpc__xcalloc(par, sizeof(*vs->subtasks));
        vs->parallelism = (int)par;
        for (uint32_t s = 0; s < par; s++) {
            tpc__subtask_snapshot_t *ss = &vs->subtasks[s];
            uint8_t flags = tpc__rd_u8(&r);
            ss->closed = flags & 1;
            ss->operator_finished = (flags >> 1) & 1;
            size_t n;
            const uint8_t *e;
            ss->state.nlist = tpc__rd_u32(&r);
            e = tpc__rd_bytes(&r, &n);
            if (r.bad || !entries_valid(e, n, ss->state.nlist))
                goto bad;
            tpc__buf_put(&ss->state.list, e, n);
            ss->state.nunion = tpc__rd_u32(&r);
            e = tpc__rd_bytes(&r, &n);
            if (r.bad || !entries_valid(e, n, ss->state.nunion))
                goto bad;
            tpc__buf_put(&ss->state.uni, e, n);
            if (version < 2)
                continue;
            ss->state.nowned = tpc__rd_u32(&r);
            e = tpc__rd_bytes(&r, &n);
            if (r.bad || !entries_valid(e, n, ss->state.nowned))
                goto bad;
            tpc__buf_put(&ss->state.owned, e, n);
            ss->state.nkeyed = tpc__rd_u32(&r);
            e = tpc__rd_bytes(&r, &n);
            if (r.bad || !entries_valid(e, n, ss->state.nkeyed))
                goto bad;
            tpc__buf_put(&ss->state.keyed, e, n);
            if (version < 3)
                continue;
            uint32_t nl = tpc__rd_u32(&r);
            if (r.bad || nl > out->nrefs)
                goto bad;
            ss->state.links = tpc__xmalloc((nl ? nl : 1) * sizeof *ss->state.links);
            ss->state.nlinks = nl;
            for (uint32_t i = 0; i < nl; i++) {
                ss->state.links[i] = tpc__rd_u64(&r);
                bool listed = false; /* each link is among the header's refs, in order */
                for (uint32_t j = 0; j < out->nrefs; j++)
                    listed |= out->refs[j] == ss->state.links[i];
                if (!listed || (i && ss->state.links[i] <= ss->state.links[i - 1]))
                    goto bad;
            }
        }
    }
    if (r.bad || r.off != r.len)
        goto bad;
    return NULL;
bad:
    tpc__checkpoint_free(out);
    return tpc_error_new(
        TPC_ERR_CORRUPT, 0,
        "malformed checkpoint contents: its counts and lengths do not match its size");
}

static tpc_error_t *io_error(const char *what, const char *path)
{
    return tpc_error_hint(tpc_error_new(TPC_ERR_IO, TPC_ERROR_RETRIABLE, "could not %s \"%s\": %s",
                                        what, path, strerror(errno)),
                          "check that \"checkpoint.dir\" is writable and the disk is not full");
}

void tpc__checkpoint_dir_clean(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        bool ours =
            strncmp(e->d_name, ".chk-", 5) == 0 || strncmp(e->d_name, ".savepoint-", 11) == 0;
        if (ours && len > 4 && strcmp(e->d_name + len - 4, ".tmp") == 0)
            unlinkat(dirfd(d), e->d_name, 0);
        /* completed.<pid>.tmp: the completion record of a process that died while writing it
         * (one that lives, a second instance, is left to finish) */
        long pid;
        if (sscanf(e->d_name, "completed.%ld.tmp", &pid) == 1 && len > 4 &&
            strcmp(e->d_name + len - 4, ".tmp") == 0 && pid > 0 && kill((pid_t)pid, 0) != 0 &&
            errno == ESRCH)
            unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

tpc_error_t *tpc__checkpoint_dir_prepare(const char *dir)
{
    char *p = tpc__xstrdup(dir);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            tpc_error_t *err = io_error("create directory", p);
            free(p);
            return err;
        }
        *s = '/';
    }
    free(p);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return io_error("create directory", dir);
    if (access(dir, W_OK | X_OK) != 0)
        return io_error("write into directory", dir);
    return NULL;
}

tpc_error_t *tpc__checkpoint_other_writer(void)
{
    return tpc_error_hint(
        tpc_error_new(TPC_ERR_CONFIG, 0,
                      "another instance of the job writes checkpoints into the same directory"),
        "stop the other instance; two instances of a job must not share a \"checkpoint.dir\"");
}

const char *tpc__storage_where(tpc_storage_t *st)
{
    if (st->ops->where)
        return st->ops->where(st);
    return st->ops->kind;
}

/* The name of checkpoint @id's object. */
static void object_name(char *name, size_t size, bool savepoint, uint64_t id)
{
    snprintf(name, size, "%s-%020" PRIu64, savepoint ? "savepoint" : "chk", id);
}

static char *object_path(tpc_storage_t *st, const char *name)
{
    const char *where = tpc__storage_where(st);
    bool folder = strcmp(st->ops->kind, "folder") == 0;
    size_t n = strlen(where) + strlen(name) + 2;
    char *p = tpc__xmalloc(n);
    snprintf(p, n, folder ? "%s/%s" : "%s%s", where, name);
    return p;
}

/* Checkpoint @c meets checkpoint @id of another writer (@err says how). Without owners that is
 * another instance of the job. An owner asks the record: when another owner holds it, @err stands
 * (the coordinator fences this one, tpc__restore_owner_check()); when it is still this owner's,
 * the file is one that an owner it took the job over from wrote afterwards, before that owner was
 * fenced: the attempt fails without harm, and the next one takes ids past it. */
static tpc_error_t *other_writer(tpc_storage_t *st, const tpc__checkpoint_t *c, uint64_t id,
                                 tpc_error_t *err)
{
    if (!c->owner_epoch)
        return err;
    tpc_error_t *not_mine = tpc__record_owned_at(st, c->owner_epoch);
    if (not_mine) {
        tpc_error_destroy(not_mine);
        return err;
    }
    tpc_error_destroy(err);
    return tpc_error_new(TPC_ERR_STATE, TPC_ERROR_RETRIABLE,
                         "\"%s\" holds checkpoint %" PRIu64 " of an owner that this one (owner "
                         "epoch %" PRIu64 ") took the job's checkpoints over from: the attempt "
                         "restarts with checkpoint ids past it",
                         tpc__storage_where(st), id, c->owner_epoch);
}

/* This instance takes checkpoint ids in increasing order and writes a checkpoint only after those
 * before it: a file with a larger id was written by another instance of the job (or, with owners,
 * by an owner that took the job over or that this one took it over from). */
static tpc_error_t *check_newest(tpc_storage_t *st, const tpc__checkpoint_t *c)
{
    tpc__checkpoint_file_t *files;
    size_t n;
    tpc_error_t *err = tpc__checkpoint_list_at(st, &files, &n);
    if (!err && n && files[0].id > c->id)
        err = other_writer(st, c, files[0].id,
                           tpc_error_prefix(tpc__checkpoint_other_writer(),
                                            "\"%s\" holds checkpoint %" PRIu64
                                            ", newer than checkpoint %" PRIu64
                                            " that this instance is writing",
                                            tpc__storage_where(st), files[0].id, c->id));
    tpc__checkpoint_files_free(files, n);
    return err;
}

static tpc_error_t *taken(tpc_storage_t *st, const tpc__checkpoint_t *c, const char *path)
{
    return other_writer(
        st, c, c->id,
        tpc_error_prefix(tpc__checkpoint_other_writer(), "checkpoint \"%s\" exists already", path));
}

tpc_error_t *tpc__checkpoint_write_at(tpc_storage_t *st, const tpc__checkpoint_t *c,
                                      char **path_out, uint64_t *size)
{
    if (tpc__checkpoint_write_fault) {
        tpc_error_t *e = tpc__checkpoint_write_fault(c->id);
        if (e)
            return e;
    }
    tpc__buf_t b = {0};
    encode(c, &b);
    char name[64];
    object_name(name, sizeof name, c->savepoint, c->id);
    char *path = object_path(st, name);
    bool exists = false;
    tpc_error_t *err = check_newest(st, c);
    if (!err && tpc__checkpoint_write_probe)
        tpc__checkpoint_write_probe(c);
    if (!err)
        err = st->ops->put_new(st, name, b.data, b.len, &exists);
    if (!err && exists)
        err = taken(st, c, path);
    if (size)
        *size = b.len;
    tpc__buf_free(&b);
    if (err) {
        free(path);
        return err;
    }
    if (path_out)
        *path_out = path;
    else
        free(path);
    return NULL;
}

tpc_error_t *tpc__checkpoint_write(const char *dir, const tpc__checkpoint_t *c, char **path_out)
{
    tpc__store_folder_t f;
    tpc__store_folder_init(&f, dir);
    return tpc__checkpoint_write_at(&f.base, c, path_out, NULL);
}

tpc_error_t *tpc__file_read(const char *path, uint8_t **data, size_t *len, int *errnum)
{
    *data = NULL;
    *len = 0;
    *errnum = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *errnum = errno;
        return io_error("open", path);
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        *errnum = errno;
        close(fd);
        return io_error("stat", path);
    }
    size_t n = (size_t)st.st_size, off = 0;
    uint8_t *p = tpc__xmalloc(n ? n : 1);
    while (off < n) {
        ssize_t r = read(fd, p + off, n - off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        off += (size_t)r;
    }
    *errnum = errno;
    close(fd);
    if (off != n) {
        free(p);
        return io_error("read", path);
    }
    *data = p;
    *len = n;
    return NULL;
}

tpc_error_t *tpc__checkpoint_read(const char *path, tpc__checkpoint_t *out)
{
    *out = (tpc__checkpoint_t){0};
    uint8_t *p;
    size_t len;
    int errnum;
    tpc_error_t *err = tpc__file_read(path, &p, &len, &errnum);
    if (!err)
        err = tpc__checkpoint_decode(p, len, out);
    free(p);
    return err ? tpc_error_prefix(err, "checkpoint \"%s\"", path) : NULL;
}

tpc_error_t *tpc__checkpoint_read_at(tpc_storage_t *st, const tpc__checkpoint_file_t *file,
                                     tpc__checkpoint_t *out)
{
    *out = (tpc__checkpoint_t){0};
    uint8_t *p = NULL;
    size_t len = 0;
    bool found = false;
    tpc_error_t *err = st->ops->get(st, file->name, &p, &len, NULL, &found);
    if (!err && !found)
        err = tpc_error_new(TPC_ERR_NOT_FOUND, 0, "it is gone");
    if (!err)
        err = tpc__checkpoint_decode(p, len, out);
    free(p);
    return err ? tpc_error_prefix(err, "checkpoint \"%s\"", file->path) : NULL;
}

static int by_id_desc(const void *a, const void *b)
{
    const tpc__checkpoint_file_t *x = a, *y = b;
    return x->id < y->id ? 1 : x->id > y->id ? -1 : 0;
}

tpc_error_t *tpc__checkpoint_list_at(tpc_storage_t *st, tpc__checkpoint_file_t **files, size_t *n)
{
    *files = NULL;
    *n = 0;
    char **names;
    size_t nn;
    tpc_error_t *err = st->ops->list(st, "", &names, &nn);
    if (err)
        return err;
    size_t cap = 0;
    for (size_t i = 0; i < nn; i++) {
        uint64_t id;
        bool sp;
        char tail;
        if (sscanf(names[i], "chk-%" SCNu64 "%c", &id, &tail) == 1)
            sp = false;
        else if (sscanf(names[i], "savepoint-%" SCNu64 "%c", &id, &tail) == 1)
            sp = true;
        else
            continue;
        tpc__xgrow(files, &cap, *n + 1, sizeof **files);
        (*files)[(*n)++] =
            (tpc__checkpoint_file_t){id, sp, object_path(st, names[i]), tpc__xstrdup(names[i])};
    }
    tpc_storage_names_free(names, nn);
    if (*n)
        qsort(*files, *n, sizeof(**files), by_id_desc);
    return NULL;
}

tpc_error_t *tpc__checkpoint_list(const char *dir, tpc__checkpoint_file_t **files, size_t *n)
{
    tpc__store_folder_t f;
    tpc__store_folder_init(&f, dir);
    return tpc__checkpoint_list_at(&f.base, files, n);
}

void tpc__checkpoint_files_free(tpc__checkpoint_file_t *files, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(files[i].path);
        free(files[i].name);
    }
    free(files);
}

tpc_error_t *tpc__checkpoint_read_refs(const char *path, uint64_t **refs, uint32_t *n)
{
    *refs = NULL;
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return io_error("open", path);
    uint8_t head[8 + 4 + 8 + 8 + 1 + 4 + 4];
    size_t got = fread(head, 1, sizeof head, f);
    tpc__rd_t r = {head + 8, got > 8 ? got - 8 : 0, 0, false};
    uint32_t version = tpc__rd_u32(&r);
    tpc__rd_u64(&r);
    tpc__rd_u64(&r);
    tpc__rd_u8(&r);
    tpc__rd_u32(&r);
    uint32_t count = tpc__rd_u32(&r);
    tpc_error_t *err = NULL;
    if (got < 8 + 4 || memcmp(head, MAGIC, 8) != 0 || version < 1 || version > FORMAT_VERSION)
        err = tpc_error_new(TPC_ERR_CORRUPT, 0, "\"%s\" is not a checkpoint file", path);
    else if (version >= 3 && (r.bad || count > 1u << 20))
        err = tpc_error_new(TPC_ERR_CORRUPT, 0, "\"%s\" has a malformed header", path);
    if (!err && version >= 3 && count) {
        uint8_t *p = tpc__xmalloc((size_t)count * 8);
        if (fread(p, 8, count, f) != count) {
            err = tpc_error_new(TPC_ERR_CORRUPT, 0, "\"%s\" has a malformed header", path);
            free(p);
        } else {
            tpc__rd_t rr = {p, (size_t)count * 8, 0, false};
            *refs = tpc__xmalloc((size_t)count * sizeof **refs);
            for (uint32_t i = 0; i < count; i++)
                (*refs)[i] = tpc__rd_u64(&rr);
            *n = count;
            free(p);
        }
    }
    fclose(f);
    return err;
}

/* The refs of @file: from a folder's file header alone, from another store by reading it whole. */
static tpc_error_t *read_refs_at(tpc_storage_t *st, const tpc__checkpoint_file_t *file,
                                 uint64_t **refs, uint32_t *n)
{
    if (strcmp(st->ops->kind, "folder") == 0)
        return tpc__checkpoint_read_refs(file->path, refs, n);
    *refs = NULL;
    *n = 0;
    tpc__checkpoint_t c;
    tpc_error_t *err = tpc__checkpoint_read_at(st, file, &c);
    if (err)
        return err;
    *refs = c.refs;
    *n = c.nrefs;
    c.refs = NULL;
    c.nrefs = 0;
    tpc__checkpoint_free(&c);
    return NULL;
}

void tpc__checkpoint_retain_at(tpc_storage_t *st, int retained)
{
    tpc__checkpoint_file_t *files;
    size_t n;
    tpc_error_t *err = tpc__checkpoint_list_at(st, &files, &n);
    if (err) {
        tpc_error_destroy(err);
        return;
    }
    /* Kept: savepoints, the newest checkpoints, and whatever files those list as their refs (the
     * links of incremental keyed state). A kept file whose refs cannot be read keeps everything
     * older than itself. Files are newest first and refs point only to older ones, so one pass
     * sees a file's keepers before the file.
     *
     * The first request that fails ends the pass: it runs on the coordinator's thread, whose next
     * checkpoint (and, after a savepoint, the stop that waits for it) waits until it returns, and
     * a store that stopped answering would make each further request wait out its timeout and
     * attempts. What is left is removed next time. */
    bool *keep = tpc__xcalloc(n ? n : 1, sizeof *keep);
    int kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (files[i].savepoint || kept < retained)
            keep[i] = true;
        if (!files[i].savepoint && kept < retained)
            kept++;
        if (!keep[i])
            continue;
        uint64_t *refs;
        uint32_t nrefs;
        err = read_refs_at(st, &files[i], &refs, &nrefs);
        if (err) {
            tpc_error_destroy(err);
            for (size_t k = i + 1; k < n; k++)
                keep[k] = true;
            break;
        }
        for (uint32_t j = 0; j < nrefs; j++)
            for (size_t k = i + 1; k < n; k++)
                keep[k] |= files[k].id == refs[j];
        free(refs);
    }
    for (size_t i = 0; i < n; i++) {
        if (keep[i])
            continue;
        err = st->ops->remove(st, files[i].name);
        if (err) {
            tpc_error_destroy(err);
            break;
        }
    }
    free(keep);
    tpc__checkpoint_files_free(files, n);
}

void tpc__checkpoint_retain(const char *dir, int retained)
{
    tpc__store_folder_t f;
    tpc__store_folder_init(&f, dir);
    tpc__checkpoint_retain_at(&f.base, retained);
}
