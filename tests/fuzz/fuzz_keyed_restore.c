/*
 * libFuzzer harness: keyed state entries and timers restored into a running job (runtime/restore.c
 * hands the entries out by key group, keyed_snapshot.c loads them into the tables of a subtask,
 * timers.c arms the timers and fires those that are due, and the final checkpoint writes everything
 * back). The entries are fuzzed; around them the harness builds a checkpoint that restores: a
 * completion record naming checkpoint 1, and checkpoint 1 of the job below with a valid digest, the
 * job's vertices and max-parallelism, and the fuzzed entries as the keyed state of vertex "keyed".
 *
 * Input: byte 0 chooses the parallelism of "keyed" in the checkpoint (bits 0-1: 1 to 4) and in
 * the job (bits 2-3: 1 to 4, a rescale when they differ), bit 4 writes each entry's key group from
 * its key (so that most entries pass the group check and reach the tables), bit 5 gives the
 * operator no on_timer (a restore with timers must then be refused); then the entries, each a
 * 2-byte big-endian length and its bytes, dealt round robin to the checkpoint's subtasks.
 *
 * The job is a source that ends at once, a hash edge, and "keyed", whose operator reads the state
 * "v" (value) and "m" (map) of every key it meets, in initialize_state and in on_timer; its
 * checkpoint.dir is the harness's own folder (in /dev/shm where it can be), emptied before each
 * input and removed at exit.
 */
#include "runtime_internal.h"
#include "tpc_kit.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAXP 16 /* the job's max-parallelism: key groups 0 to 15 */

static char dir[64];

static tpc_error_t *src_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx;
    (void)arg;
    *self = NULL;
    return NULL;
}

static tpc_error_t *src_init(void *self, tpc_ctx_t *ctx, const tpc_state_reader_t *restored)
{
    (void)self;
    (void)ctx;
    (void)restored;
    return NULL;
}

static tpc_error_t *src_poll(void *self, tpc_ctx_t *ctx, tpc_poll_result_t *result)
{
    (void)self;
    (void)ctx;
    *result = TPC_POLL_END;
    return NULL;
}

static tpc_error_t *snap(void *self, tpc_ctx_t *ctx, uint64_t id, tpc_state_writer_t *w)
{
    (void)self;
    (void)ctx;
    (void)id;
    (void)w;
    return NULL;
}

static tpc_error_t *done(void *self, tpc_ctx_t *ctx, uint64_t id)
{
    (void)self;
    (void)ctx;
    (void)id;
    return NULL;
}

static const tpc_operator_ops_t src_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = src_open,
    .initialize_state = src_init,
    .poll = src_poll,
    .snapshot_state = snap,
    .notify_checkpoint_complete = done,
};

static tpc_error_t *visit_item(void *opaque, const void *key, size_t key_len, const void *value,
                               size_t value_len)
{
    (void)opaque;
    (void)key;
    (void)key_len;
    (void)value;
    (void)value_len;
    return NULL;
}

/* An error of the keyed calls that the entries may cause: a state used as the other kind. Any
 * other (TPC_ERR_STATE: a key of another subtask's group) means restore put an entry where it does
 * not belong. */
static tpc_error_t *expected(tpc_error_t *err)
{
    if (err && tpc_error_code(err) != TPC_ERR_INVALID_ARG)
        abort();
    tpc_error_destroy(err);
    return NULL;
}

/* Every value and map entry of a key, read as an operator reads them. */
static tpc_error_t *read_key(tpc_ctx_t *ctx, const void *key, size_t key_len)
{
    const void *v = NULL;
    size_t vlen = 0;
    for (int i = 0; i < 2; i++) {
        const char *state = i ? "m" : "v";
        expected(tpc_keyed_get(ctx, state, key, key_len, &v, &vlen));
        expected(tpc_keyed_map_foreach(ctx, state, key, key_len, visit_item, NULL));
    }
    return NULL;
}

static tpc_error_t *visit_key(void *ctx, const void *key, size_t key_len, const void *value,
                              size_t value_len)
{
    (void)value;
    (void)value_len;
    return read_key(ctx, key, key_len);
}

static tpc_error_t *keyed_init(void *self, tpc_ctx_t *ctx, const tpc_state_reader_t *restored)
{
    (void)self;
    (void)restored;
    expected(tpc_keyed_foreach(ctx, "v", visit_key, ctx));
    return expected(tpc_keyed_foreach(ctx, "m", visit_key, ctx));
}

static tpc_error_t *keyed_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)self;
    (void)ctx;
    (void)batch;
    return NULL;
}

static tpc_error_t *keyed_timer(void *self, tpc_ctx_t *ctx, const void *key, size_t key_len,
                                int64_t at_ms)
{
    (void)self;
    (void)at_ms;
    return read_key(ctx, key, key_len);
}

static const tpc_operator_ops_t keyed_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = src_open,
    .initialize_state = keyed_init,
    .process = keyed_process,
    .snapshot_state = snap,
    .notify_checkpoint_complete = done,
    .on_timer = keyed_timer,
};

static const tpc_operator_ops_t timerless_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = src_open,
    .initialize_state = keyed_init,
    .process = keyed_process,
    .snapshot_state = snap,
    .notify_checkpoint_complete = done,
};

/* The job's log lines on stderr when FUZZ_VERBOSE is set (to see what an input does), else none. */
static void quiet(void *opaque, tpc_log_level_t level, const char *message)
{
    (void)opaque;
    (void)level;
    if (getenv("FUZZ_VERBOSE"))
        fprintf(stderr, "job: %s\n", message);
}

static void empty_dir(void)
{
    DIR *d = opendir(dir);
    if (!d)
        abort();
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char path[384];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
}

/* Write the completion record and checkpoint 1 that restore the fuzzed entries. */
static void write_folder(const uint8_t *p, size_t n, int ck_par, bool fix_groups)
{
    tpc__subtask_snapshot_t src_sub = {0}, keyed_sub[4] = {{0}};
    tpc__vertex_snapshot_t vs[2] = {
        {.name = "source", .parallelism = 1, .subtasks = &src_sub},
        {.name = "keyed", .parallelism = ck_par, .subtasks = keyed_sub},
    };
    tpc__checkpoint_t c = {.id = 1,
                           .timestamp_ms = 1,
                           .max_parallelism = MAXP,
                           .job_name = "fuzz-keyed",
                           .nvertices = 2,
                           .vertices = vs};
    uint8_t entry[1 << 16];
    for (size_t i = 0, off = 0; off + 2 <= n; i++) {
        size_t len = (size_t)p[off] << 8 | p[off + 1];
        off += 2;
        if (len > n - off)
            len = n - off;
        memcpy(entry, p + off, len);
        off += len;
        tpc__keyed_entry_t e;
        if (fix_groups && tpc__keyed_parse(entry, len, &e)) {
            int g = tpc_key_group(e.key, e.key_len, MAXP);
            tpc_store_le(entry, (uint32_t)e.kind << 24 | (uint32_t)g, 4);
        }
        tpc_state_writer_t *w = &keyed_sub[i % (size_t)ck_par].state;
        tpc__buf_put_bytes(&w->keyed, entry, len);
        w->nkeyed++;
    }
    char *names[] = {"source", "keyed"};
    int highest[] = {1, ck_par};
    tpc__record_t rec = {.job_name = "fuzz-keyed",
                         .newest = 1,
                         .first = 1,
                         .nvertices = 2,
                         .names = names,
                         .highest = highest};
    tpc_error_t *err = tpc__checkpoint_write(dir, &c, NULL);
    if (!err)
        err = tpc__record_write(dir, &rec);
    for (int s = 0; s < 4; s++)
        tpc__buf_free(&keyed_sub[s].state.keyed);
    if (err)
        abort(); /* the folder is the harness's own: writing it cannot fail */
}

/* The folder goes when the fuzzer exits (it may be in memory). */
static void remove_dir(void)
{
    empty_dir();
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!*dir) {
        /* In memory where there is a tmpfs: each input writes and fsyncs four files. */
        snprintf(dir, sizeof dir, "/dev/shm/twopc-fuzz-keyed-%ld", (long)getpid());
        if (mkdir(dir, 0700) != 0) {
            snprintf(dir, sizeof dir, "/tmp/twopc-fuzz-keyed-%ld", (long)getpid());
            (void)mkdir(dir, 0700);
        }
        atexit(remove_dir);
    }
    if (size < 1)
        return 0;
    int ck_par = 1 + (data[0] & 3), par = 1 + (data[0] >> 2 & 3);
    bool timerless = data[0] & 32;
    empty_dir();
    write_folder(data + 1, size - 1, ck_par, data[0] & 16);

    tpc_job_t *job = tpc_job_new("fuzz-keyed");
    if (!job)
        abort();
    int s, k;
    tpc_job_set_logger(job, quiet, NULL, getenv("FUZZ_VERBOSE") ? TPC_LOG_DEBUG : TPC_LOG_ERROR);
    if (tpc_job_set(job, "checkpoint.dir", dir) || tpc_job_set(job, "max-parallelism", "16") ||
        tpc_job_set(job, "checkpoint.interval.ms", "60000") ||
        tpc_job_set(job, "restart.attempts", "0") ||
        tpc_job_add_vertex(job, "source", 1, &src_ops, NULL, &s) ||
        tpc_job_add_vertex(job, "keyed", par, timerless ? &timerless_ops : &keyed_ops, NULL, &k) ||
        tpc_job_connect(job, s, k, TPC_EDGE_HASH))
        abort();
    tpc_error_t *err = tpc_job_run(job, NULL);
    if (err && getenv("FUZZ_VERBOSE"))
        fprintf(stderr, "run: %s\n", tpc_error_message(err));
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    return 0;
}
