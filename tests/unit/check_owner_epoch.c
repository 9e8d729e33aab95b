/*
 * Owners of a job's checkpoints (checkpoint.owner=claim), on the local folder and on S3 (a moto
 * server on 127.0.0.1 that tests/services/s3.sh starts; without one the S3 cases say so and pass
 * nothing off as run):
 *
 * - the zombie: owner A is paused inside a checkpoint (its sink's snapshot blocks) while owner B
 *   takes the checkpoints over; A, resumed, writes its checkpoint file but its completion is
 *   refused (TPC_ERR_FENCED): the job ends without a restart and its sink never hears that the
 *   checkpoint completed;
 * - the restore rule: a third owner restores the record's checkpoint, not the zombie's newer file;
 * - the settings: checkpoint.storage=s3 without the backend, checkpoint.owner=claim without
 *   checkpoints, and the checkpoint format (4 with an owner epoch, 2 without).
 */
#include "runtime_internal.h"
#include "tpc_props.h"
#include "tpc_s3.h"
#include "tpc_test_check.h"
#include "tpc_test_ops.h"
#include "tpc_test_s3.h"

#include <check.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static tpc_test_s3_t local_s3; /* the local S3 server: endpoint NULL, none */
#define S3_BUCKET "twopc-test"

/* A sink that remembers which checkpoints it was told of, writes the id of each checkpoint into
 * its state, and can be held inside a snapshot. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t pause_from; /* a snapshot of this checkpoint or a later one waits for release */
    bool release;
    uint64_t paused_id; /* the checkpoint whose snapshot waits (0: none) */
    uint64_t notified[4096];
    int nnotified;
    uint64_t epoch;    /* tpc_ctx_owner_epoch() at open */
    uint64_t restored; /* the checkpoint id its restored state names (0: none) */
    bool opened;
    bool ended;     /* its job's tpc_job_run() returned */
    bool fence_now; /* the next process() fails once with TPC_ERR_FENCED, as a fenced sink */
} watch_t;

static void watch_init(watch_t *w)
{
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    tpc_cond_init(&w->cv); /* monotonic, for tpc_deadline_us() */
}

static void watch_destroy(watch_t *w)
{
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
}

static tpc_error_t *watch_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    watch_t *w = arg;
    pthread_mutex_lock(&w->mu);
    w->epoch = tpc_ctx_owner_epoch(ctx);
    pthread_mutex_unlock(&w->mu);
    *self = w;
    return NULL;
}

static tpc_error_t *watch_init_state(void *self, tpc_ctx_t *ctx, const tpc_state_reader_t *r)
{
    (void)ctx;
    watch_t *w = self;
    const void *p;
    size_t n;
    uint64_t id = 0;
    for (size_t i = 0; r && i < tpc_state_count(r, TPC_STATE_LIST); i++) {
        tpc_state_get(r, TPC_STATE_LIST, i, &p, &n);
        if (n == sizeof id)
            memcpy(&id, p, sizeof id);
    }
    pthread_mutex_lock(&w->mu);
    w->restored = id;
    w->opened = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static tpc_error_t *watch_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *b)
{
    (void)ctx, (void)b;
    watch_t *w = self;
    pthread_mutex_lock(&w->mu);
    bool fence = w->fence_now;
    w->fence_now = false;
    pthread_mutex_unlock(&w->mu);
    if (fence)
        return tpc_error_new(TPC_ERR_FENCED, TPC_ERROR_FATAL,
                             "the sink's producer was fenced (as Kafka's transaction timeout "
                             "fences it)");
    return NULL;
}

static tpc_error_t *watch_snapshot(void *self, tpc_ctx_t *ctx, uint64_t id, tpc_state_writer_t *wr)
{
    (void)ctx;
    watch_t *w = self;
    pthread_mutex_lock(&w->mu);
    if (w->pause_from && id >= w->pause_from && !w->release) {
        w->paused_id = id;
        pthread_cond_broadcast(&w->cv);
        while (!w->release)
            pthread_cond_wait(&w->cv, &w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return tpc_state_add(wr, TPC_STATE_LIST, &id, sizeof id);
}

static tpc_error_t *watch_notify(void *self, tpc_ctx_t *ctx, uint64_t id)
{
    (void)ctx;
    watch_t *w = self;
    pthread_mutex_lock(&w->mu);
    if (w->nnotified < (int)(sizeof w->notified / sizeof *w->notified))
        w->notified[w->nnotified++] = id;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static const tpc_operator_ops_t watch_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = watch_open,
    .initialize_state = watch_init_state,
    .process = watch_process,
    .snapshot_state = watch_snapshot,
    .notify_checkpoint_complete = watch_notify,
};

typedef struct {
    tpc_job_t *job;
    pthread_t thread;
    tpc_error_t *err;
    tpc_job_result_t result;
    tpc_test_seq_conf_t seq;
    watch_t watch;
} owner_t;

static bool use_s3;
static char where[256]; /* the folder, or the S3 prefix, of the running case */

static void owner_new(owner_t *o, const char *interval_ms)
{
    memset(o, 0, sizeof *o);
    watch_init(&o->watch);
    o->seq.count_default = UINT64_MAX / 2;
    o->seq.per_poll = 8;
    o->seq.sleep_us = 2000;
    o->job = tpc_job_new("owned");
    ck_assert_ptr_nonnull(o->job);
    if (use_s3) {
        TPC_TEST_OK(tpc_job_use_storage(o->job, tpc_s3_storage_backend()));
        TPC_TEST_OK(tpc_job_set(o->job, "checkpoint.storage", "s3"));
        TPC_TEST_OK(tpc_job_set(o->job, "checkpoint.s3.endpoint", local_s3.endpoint));
        TPC_TEST_OK(tpc_job_set(o->job, "checkpoint.s3.bucket", S3_BUCKET));
        TPC_TEST_OK(tpc_job_set(o->job, "checkpoint.s3.prefix", where));
        TPC_TEST_OK(tpc_job_set(o->job, "checkpoint.s3.region", "us-east-1"));
    } else {
        TPC_TEST_OK(tpc_job_set(o->job, "checkpoint.dir", where));
    }
    TPC_TEST_OK(tpc_job_set(o->job, "checkpoint.owner", "claim"));
    TPC_TEST_OK(tpc_job_set(o->job, "checkpoint.interval.ms", interval_ms));
    TPC_TEST_OK(tpc_job_set(o->job, "restart.attempts", "3"));
    TPC_TEST_OK(tpc_job_set(o->job, "restart.delay.ms", "10"));
    int src, sink;
    TPC_TEST_OK(tpc_job_add_vertex(o->job, "source", 1, &tpc_test_seq_source_ops, &o->seq, &src));
    TPC_TEST_OK(tpc_job_add_vertex(o->job, "watch", 1, &watch_ops, &o->watch, &sink));
    TPC_TEST_OK(tpc_job_connect(o->job, src, sink, TPC_EDGE_FORWARD));
}

static void *owner_main(void *arg)
{
    owner_t *o = arg;
    o->err = tpc_job_run(o->job, &o->result);
    pthread_mutex_lock(&o->watch.mu);
    o->watch.ended = true;
    pthread_cond_broadcast(&o->watch.cv);
    pthread_mutex_unlock(&o->watch.mu);
    return NULL;
}

static void owner_start(owner_t *o)
{
    ck_assert_int_eq(pthread_create(&o->thread, NULL, owner_main, o), 0);
}

static void owner_free(owner_t *o)
{
    tpc_error_destroy(o->err);
    tpc_job_destroy(o->job);
    watch_destroy(&o->watch);
}

/* Wait until @cond holds for @w (checked under its lock), at most 60 s. */
#define WAIT_FOR(w, cond)                                                                          \
    do {                                                                                           \
        struct timespec until_ = tpc_deadline_us(60 * 1000000);                                    \
        pthread_mutex_lock(&(w)->mu);                                                              \
        while (!(cond))                                                                            \
            if (pthread_cond_timedwait(&(w)->cv, &(w)->mu, &until_) != 0)                          \
                break;                                                                             \
        bool held_ = (cond);                                                                       \
        pthread_mutex_unlock(&(w)->mu);                                                            \
        ck_assert_msg(held_, "timed out waiting for " #cond);                                      \
    } while (0)

static void case_setup(const char *tag)
{
    if (!use_s3) {
        char *dir = tpc_test_tmpdir(tag);
        snprintf(where, sizeof where, "%s", dir);
        free(dir);
    } else {
        snprintf(where, sizeof where, "%s-%ld-%lld/", tag, (long)getpid(),
                 (long long)tpc_clock_us());
    }
}

static void case_teardown(void)
{
    if (!use_s3)
        tpc_test_rmdir(where);
}

static bool notified(watch_t *w, uint64_t from)
{
    for (int i = 0; i < w->nnotified; i++)
        if (w->notified[i] >= from)
            return true;
    return false;
}

/* A paused owner resumed after a take-over is fenced at its next completion, tells its sink
 * nothing of it and does not restart; a later owner restores the record's checkpoint, not the
 * paused owner's newer file. */
static void case_zombie(void)
{
    case_setup("zombie");
    owner_t a, b, c;
    owner_new(&a, "50");
    a.watch.pause_from = 4;
    owner_start(&a);
    WAIT_FOR(&a.watch, a.watch.paused_id != 0);
    uint64_t paused = a.watch.paused_id;
    ck_assert_uint_eq(a.watch.epoch, 1);
    ck_assert(notified(&a.watch, paused - 1)); /* the checkpoint before it completed */

    /* B takes over while A is frozen in checkpoint `paused`; B takes no checkpoint yet. */
    owner_new(&b, "600000");
    owner_start(&b);
    WAIT_FOR(&b.watch, b.watch.opened);
    ck_assert_uint_eq(b.watch.epoch, 2);
    ck_assert_uint_eq(b.watch.restored, paused - 1);

    /* A resumes: its file is written, its completion refused. */
    pthread_mutex_lock(&a.watch.mu);
    a.watch.release = true;
    pthread_cond_broadcast(&a.watch.cv);
    pthread_mutex_unlock(&a.watch.mu);
    WAIT_FOR(&a.watch, a.watch.ended || notified(&a.watch, paused));
    pthread_mutex_lock(&a.watch.mu);
    bool told = notified(&a.watch, paused);
    pthread_mutex_unlock(&a.watch.mu);
    ck_assert_msg(!told,
                  "the owner whose checkpoints were taken over told its sink that "
                  "checkpoint %" PRIu64 " completed",
                  paused);
    pthread_join(a.thread, NULL);
    ck_assert_ptr_nonnull(a.err);
    fprintf(stderr, "check_owner_epoch: %s: the resumed owner ended with: %s\n",
            use_s3 ? "s3" : "folder", tpc_error_message(a.err));
    ck_assert_int_eq(tpc_error_code(a.err), TPC_ERR_FENCED);
    ck_assert_ptr_nonnull(strstr(tpc_error_message(a.err), "another owner has taken"));
    tpc_job_stats_t st;
    ck_assert_int_eq(tpc_job_get_stats(a.job, &st), TPC_OK);
    ck_assert_uint_eq(st.restarts, 0);

    ck_assert_int_eq(tpc_job_cancel(b.job), TPC_OK);
    pthread_join(b.thread, NULL);
    ck_assert_ptr_null(b.err);

    /* The zombie's file is there, newer than the record, and no restore takes it. */
    if (!use_s3) {
        tpc_checkpoint_folder_t f;
        TPC_TEST_OK(tpc_checkpoint_folder_read(where, false, &f));
        ck_assert_uint_ge(f.nfiles, 2);
        ck_assert_uint_eq(f.files[0].id, paused);
        ck_assert_int_eq(f.files[0].status, TPC_CHECKPOINT_NOT_COMPLETED);
        ck_assert_int_ge(f.restore_index, 0);
        ck_assert_uint_eq(f.files[f.restore_index].id, paused - 1);
        tpc_checkpoint_folder_free(&f);
    }
    owner_new(&c, "600000");
    owner_start(&c);
    WAIT_FOR(&c.watch, c.watch.opened);
    ck_assert_uint_eq(c.watch.epoch, 3);
    ck_assert_uint_eq(c.watch.restored, paused - 1);
    ck_assert_int_eq(tpc_job_cancel(c.job), TPC_OK);
    pthread_join(c.thread, NULL);
    ck_assert_ptr_null(c.err);
    owner_free(&a);
    owner_free(&b);
    owner_free(&c);
    case_teardown();
}

/* The owner that took over writes the checkpoint id whose file the zombie wrote after the
 * take-over (B listed the checkpoints before A's file was there): B's checkpoint finds the name
 * taken, and the record, still B's, says that the file is a fenced owner's. B restarts past it and
 * goes on completing checkpoints; nothing ends B as if another instance shared its storage. */
static void case_successor(void)
{
    case_setup("successor");
    owner_t a, b;
    owner_new(&a, "50");
    a.watch.pause_from = 4;
    owner_start(&a);
    WAIT_FOR(&a.watch, a.watch.paused_id != 0);
    uint64_t paused = a.watch.paused_id;

    /* B takes over and is held in its first checkpoint, which takes the id of A's. */
    owner_new(&b, "50");
    b.watch.pause_from = 1;
    owner_start(&b);
    WAIT_FOR(&b.watch, b.watch.paused_id != 0);
    ck_assert_uint_eq(b.watch.epoch, 2);
    ck_assert_uint_eq(b.watch.paused_id, paused);

    /* A resumes: its file is written, its completion refused. */
    pthread_mutex_lock(&a.watch.mu);
    a.watch.release = true;
    pthread_cond_broadcast(&a.watch.cv);
    pthread_mutex_unlock(&a.watch.mu);
    pthread_join(a.thread, NULL);
    ck_assert_ptr_nonnull(a.err);
    ck_assert_int_eq(tpc_error_code(a.err), TPC_ERR_FENCED);

    /* B resumes and completes checkpoints past A's file. */
    pthread_mutex_lock(&b.watch.mu);
    b.watch.release = true;
    pthread_cond_broadcast(&b.watch.cv);
    pthread_mutex_unlock(&b.watch.mu);
    WAIT_FOR(&b.watch, b.watch.ended || notified(&b.watch, paused + 1));
    pthread_mutex_lock(&b.watch.mu);
    bool ended = b.watch.ended, told = notified(&b.watch, paused + 1);
    pthread_mutex_unlock(&b.watch.mu);
    if (ended)
        pthread_join(b.thread, NULL);
    ck_assert_msg(!ended && told, "the owner that took over ended at checkpoint %" PRIu64 ": %s",
                  paused, ended && b.err ? tpc_error_message(b.err) : "(no error)");
    ck_assert_int_eq(tpc_job_cancel(b.job), TPC_OK);
    pthread_join(b.thread, NULL);
    ck_assert_ptr_null(b.err);
    owner_free(&a);
    owner_free(&b);
    case_teardown();
}

/* A sink fenced while its owner still holds the record (Kafka's transaction timeout aborts a
 * transaction and fences its producer) is no take-over: the job restarts and goes on completing
 * checkpoints as the same owner, and nothing ends it as if another owner held its checkpoints. */
static void case_sink_fenced(void)
{
    case_setup("sinkfenced");
    owner_t a;
    owner_new(&a, "50");
    owner_start(&a);
    WAIT_FOR(&a.watch, notified(&a.watch, 2));
    pthread_mutex_lock(&a.watch.mu);
    a.watch.fence_now = true;
    pthread_mutex_unlock(&a.watch.mu);
    WAIT_FOR(&a.watch, !a.watch.fence_now);
    pthread_mutex_lock(&a.watch.mu);
    uint64_t after = a.watch.nnotified ? a.watch.notified[a.watch.nnotified - 1] + 3 : 3;
    pthread_mutex_unlock(&a.watch.mu);
    WAIT_FOR(&a.watch, a.watch.ended || notified(&a.watch, after));
    pthread_mutex_lock(&a.watch.mu);
    bool ended = a.watch.ended;
    pthread_mutex_unlock(&a.watch.mu);
    if (ended)
        pthread_join(a.thread, NULL);
    ck_assert_msg(!ended, "a fenced sink of the owner that holds the record ended its job: %s",
                  a.err ? tpc_error_message(a.err) : "(no error)");
    tpc_job_stats_t st;
    ck_assert_int_eq(tpc_job_get_stats(a.job, &st), TPC_OK);
    ck_assert_uint_eq(st.restarts, 1);
    ck_assert_uint_eq(a.watch.epoch, 1);
    ck_assert_int_eq(tpc_job_cancel(a.job), TPC_OK);
    pthread_join(a.thread, NULL);
    ck_assert_ptr_null(a.err);
    owner_free(&a);
    case_teardown();
}

/* The same fenced sink after another owner took the checkpoints over: that is a take-over, and
 * the job ends fenced without restarting. */
static void case_sink_fenced_taken(void)
{
    case_setup("sinktaken");
    owner_t a, b;
    owner_new(&a, "50");
    owner_start(&a);
    WAIT_FOR(&a.watch, notified(&a.watch, 2));
    owner_new(&b, "600000");
    owner_start(&b);
    WAIT_FOR(&b.watch, b.watch.opened);
    ck_assert_uint_eq(b.watch.epoch, 2);
    pthread_mutex_lock(&a.watch.mu);
    a.watch.fence_now = true;
    pthread_mutex_unlock(&a.watch.mu);
    pthread_join(a.thread, NULL);
    ck_assert_ptr_nonnull(a.err);
    ck_assert_int_eq(tpc_error_code(a.err), TPC_ERR_FENCED);
    tpc_job_stats_t st;
    ck_assert_int_eq(tpc_job_get_stats(a.job, &st), TPC_OK);
    ck_assert_uint_eq(st.restarts, 0);
    ck_assert_int_eq(tpc_job_cancel(b.job), TPC_OK);
    pthread_join(b.thread, NULL);
    ck_assert_ptr_null(b.err);
    owner_free(&a);
    owner_free(&b);
    case_teardown();
}

/* Each case on the folder, and on S3 when the local server runs. */
#define BOTH(c)                                                                                    \
    START_TEST(folder_##c)                                                                         \
    {                                                                                              \
        use_s3 = false;                                                                            \
        case_##c();                                                                                \
    }                                                                                              \
    END_TEST                                                                                       \
    START_TEST(s3_##c)                                                                             \
    {                                                                                              \
        if (!local_s3.endpoint) {                                                                  \
            fprintf(stderr, "check_owner_epoch: S3 case %s NOT RUN: no local S3 server (%s)\n",    \
                    #c, local_s3.missing);                                                         \
            return;                                                                                \
        }                                                                                          \
        use_s3 = true;                                                                             \
        case_##c();                                                                                \
    }                                                                                              \
    END_TEST

BOTH(zombie)
BOTH(successor)
BOTH(sink_fenced)
BOTH(sink_fenced_taken)

/* The settings refuse what cannot work, with a message that says what to do. */
START_TEST(test_settings)
{
    tpc_job_t *job = tpc_job_new("settings");
    int src, sink;
    tpc_test_seq_conf_t seq = {.count_default = 10};
    TPC_TEST_OK(tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &seq, &src));
    TPC_TEST_OK(tpc_job_add_vertex(job, "sink", 1, &tpc_test_discard_ops, NULL, &sink));
    TPC_TEST_OK(tpc_job_connect(job, src, sink, TPC_EDGE_FORWARD));
    /* the S3 keys are the backend's: unknown until the job has it */
    tpc_error_t *err = tpc_job_set(job, "checkpoint.s3.bucket", "b");
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    tpc_error_destroy(err);
    TPC_TEST_OK(tpc_job_set(job, "checkpoint.storage", "s3"));
    err = tpc_job_run(job, NULL);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(tpc_error_hint_text(err), "tpc_s3_storage_backend()"));
    tpc_error_destroy(err);
    TPC_TEST_OK(tpc_job_use_storage(job, tpc_s3_storage_backend()));
    err = tpc_job_use_storage(job, tpc_s3_storage_backend());
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_STATE);
    tpc_error_destroy(err);
    err = tpc_job_run(job, NULL); /* no bucket */
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(tpc_error_message(err), "checkpoint.s3.bucket"));
    tpc_error_destroy(err);
    err = tpc_job_set(job, "checkpoint.s3.timeout.ms", "5");
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    tpc_error_destroy(err);
    /* the backend's keys come from a file and the environment like the job's own */
    tpc_config_t *cfg = tpc_config_new();
    static const char text[] = "checkpoint.s3.bucket = from-file\n";
    TPC_TEST_OK(tpc_config_read_text(cfg, "t.conf", text, sizeof text - 1));
    char *envp[] = {"TWOPC_CHECKPOINT_S3_PREFIX=from-env/", NULL};
    TPC_TEST_OK(tpc_config_read_env(cfg, envp));
    TPC_TEST_OK(tpc_job_configure(job, cfg));
    TPC_TEST_OK(tpc_config_check_used(cfg));
    tpc_config_destroy(cfg);
    TPC_TEST_OK(tpc_job_set(job, "checkpoint.storage", "folder"));
    TPC_TEST_OK(tpc_job_set(job, "checkpoint.owner", "claim"));
    err = tpc_job_run(job, NULL); /* no checkpoint.dir */
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(tpc_error_message(err), "checkpoint.owner"));
    tpc_error_destroy(err);
    tpc_job_destroy(job);
}
END_TEST

/* Format 4 carries the owner epoch; without one a checkpoint is written in format 2 as before. */
/* A run canceled before it starts (a unit lost while its job was about to run) takes nothing
 * over: the record keeps the epoch of the owner that holds it, which goes on unfenced. */
START_TEST(test_cancel_first)
{
    use_s3 = false;
    case_setup("cancel-first");
    owner_t a, b;
    owner_new(&a, "50");
    owner_start(&a);
    WAIT_FOR(&a.watch, a.watch.nnotified > 0);
    owner_new(&b, "50");
    ck_assert_int_eq(tpc_job_cancel(b.job), TPC_OK);
    tpc_job_result_t result;
    TPC_TEST_OK(tpc_job_run(b.job, &result));
    ck_assert_int_eq(result, TPC_JOB_CANCELED);
    tpc__record_t rec;
    bool found;
    TPC_TEST_OK(tpc__record_read(where, &rec, &found));
    ck_assert(found);
    ck_assert_uint_eq(rec.owner_epoch, 1);
    tpc__record_free(&rec);
    pthread_mutex_lock(&a.watch.mu);
    int before = a.watch.nnotified;
    pthread_mutex_unlock(&a.watch.mu);
    WAIT_FOR(&a.watch, a.watch.ended || a.watch.nnotified > before + 2);
    ck_assert_msg(!a.watch.ended, "the owner ended: %s",
                  a.err ? tpc_error_message(a.err) : "(no error)");
    ck_assert_int_eq(tpc_job_cancel(a.job), TPC_OK);
    pthread_join(a.thread, NULL);
    ck_assert_ptr_null(a.err);
    owner_free(&a);
    owner_free(&b);
    case_teardown();
}
END_TEST

START_TEST(test_format)
{
    char *dir = tpc_test_tmpdir("format");
    tpc__vertex_snapshot_t v = {.name = "v", .parallelism = 1};
    tpc__subtask_snapshot_t s = {0};
    v.subtasks = &s;
    for (uint64_t epoch = 0; epoch <= 7; epoch += 7) {
        tpc__checkpoint_t c = {.id = 1 + epoch,
                               .max_parallelism = 128,
                               .owner_epoch = epoch,
                               .job_name = "j",
                               .nvertices = 1,
                               .vertices = &v};
        char *path;
        TPC_TEST_OK(tpc__checkpoint_write(dir, &c, &path));
        uint8_t *p;
        size_t n;
        int errnum;
        TPC_TEST_OK(tpc__file_read(path, &p, &n, &errnum));
        ck_assert_uint_eq(p[8] | p[9] << 8 | p[10] << 16 | (uint32_t)p[11] << 24,
                          epoch ? 4 : 2); /* the version after the magic */
        free(p);
        tpc__checkpoint_t back;
        TPC_TEST_OK(tpc__checkpoint_read(path, &back));
        ck_assert_uint_eq(back.owner_epoch, epoch);
        ck_assert_uint_eq(back.id, 1 + epoch);
        tpc__checkpoint_free(&back);
        free(path);
    }
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

int main(void)
{
    /* moto takes any credentials; the job reads them from the environment */
    setenv("AWS_ACCESS_KEY_ID", "twopc-test", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "twopc-test-secret", 1);
    tpc_test_s3_start(&local_s3, "check_owner_epoch", S3_BUCKET);
    Suite *s = suite_create("owner_epoch");
    TCase *tc = tcase_create("folder");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_settings);
    tcase_add_test(tc, test_format);
    tcase_add_test(tc, test_cancel_first);
    tcase_add_test(tc, folder_zombie);
    tcase_add_test(tc, folder_successor);
    tcase_add_test(tc, folder_sink_fenced);
    tcase_add_test(tc, folder_sink_fenced_taken);
    suite_add_tcase(s, tc);
    TCase *t3 = tcase_create("s3");
    tcase_set_timeout(t3, 300);
    tcase_add_test(t3, s3_zombie);
    tcase_add_test(t3, s3_successor);
    tcase_add_test(t3, s3_sink_fenced);
    tcase_add_test(t3, s3_sink_fenced_taken);
    suite_add_tcase(s, t3);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    tpc_test_s3_stop(&local_s3, "check_owner_epoch");
    return failed ? 1 : 0;
}
