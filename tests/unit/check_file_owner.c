/*
 * The file sink under owners (checkpoint.owner=claim): a zombie's files do not outlive it.
 *
 * Owner A writes records 0..99 and commits them. Its sink is then held inside the first record of
 * a new transaction (the encoder blocks before the transaction has any file) while owner B takes
 * the job over, restores A's last checkpoint, writes records 100..149 and completes checkpoints.
 * Resumed, A creates the transaction's in-progress file (after B's cleanup at start), pre-commits
 * it in a checkpoint whose completion is refused, and ends with TPC_ERR_FENCED: the file stays
 * behind, pending in a checkpoint that never completed, named with owner epoch 1. B's next
 * checkpoint deletes it; at the end the folder holds every record exactly once, in order, and no
 * in-progress file.
 */
#include "tpc_file.h"
#include "tpc_test_check.h"
#include "tpc_test_file.h"
#include "tpc_test_ops.h"
#include "tpc_txn.h"

#include <check.h>
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECORDS 400

static char *ckpt_dir, *out_dir;

/* A source of records 0..RECORDS-1 (the sequence source's keys and values) that emits only up to
 * `allowed` and is idle there, so a test decides when each owner has records to write. */
typedef struct {
    atomic_ullong allowed;
    atomic_ullong next;     /* where the open instance stands */
    atomic_ullong snap_pos; /* where it stood at its last snapshot */
} gate_t;

typedef struct {
    gate_t *g;
    uint64_t next;
} gate_src_t;

/* One owner: its job, its sink, the gate of its source, and an encoder that can be held. */
typedef struct {
    tpc_job_t *job;
    tpc_txn_sink_t *sink;
    gate_t gate;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool hold_next; /* the encoder's next call waits until it is cleared */
    bool held;      /* the encoder is waiting */
    pthread_t thread;
    tpc_error_t *err;
    tpc_job_result_t result;
    atomic_bool ended;
} owner_t;

static tpc_error_t *gate_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx;
    gate_src_t *s = calloc(1, sizeof *s);
    s->g = arg;
    *self = s;
    return NULL;
}

static tpc_error_t *gate_init(void *self, tpc_ctx_t *ctx, const tpc_state_reader_t *restored)
{
    (void)ctx;
    gate_src_t *s = self;
    for (size_t i = 0; i < tpc_state_count(restored, TPC_STATE_LIST); i++) {
        const void *p;
        size_t len;
        tpc_state_get(restored, TPC_STATE_LIST, i, &p, &len);
        ck_assert_uint_eq(len, sizeof s->next);
        memcpy(&s->next, p, sizeof s->next);
    }
    atomic_store(&s->g->next, s->next);
    return NULL;
}

static tpc_error_t *gate_poll(void *self, tpc_ctx_t *ctx, tpc_poll_result_t *result)
{
    gate_src_t *s = self;
    uint64_t allowed = atomic_load(&s->g->allowed);
    for (int i = 0; i < 8 && s->next < allowed && s->next < RECORDS; i++) {
        unsigned char key[8];
        uint64_t v = s->next;
        for (int b = 7; b >= 0; b--, v >>= 8)
            key[b] = (unsigned char)v;
        tpc_record_t r = {.key = key, .key_len = 8, .value = key, .value_len = 8};
        tpc_err_t rc = tpc_emit(ctx, &r);
        if (rc == TPC_ERR_CANCELED)
            return NULL;
        if (rc != TPC_OK)
            return tpc_error_new(rc, 0, "emit: %s", tpc_strerror(rc));
        s->next++;
    }
    atomic_store(&s->g->next, s->next);
    *result = s->next >= RECORDS ? TPC_POLL_END : s->next < allowed ? TPC_POLL_MORE : TPC_POLL_IDLE;
    return NULL;
}

static tpc_error_t *gate_snapshot(void *self, tpc_ctx_t *ctx, uint64_t id, tpc_state_writer_t *w)
{
    (void)ctx;
    (void)id;
    gate_src_t *s = self;
    atomic_store(&s->g->snap_pos, s->next);
    return tpc_state_add(w, TPC_STATE_LIST, &s->next, sizeof s->next);
}

static void gate_close(void *self, tpc_ctx_t *ctx)
{
    (void)ctx;
    free(self);
}

static const tpc_operator_ops_t gate_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = gate_open,
    .initialize_state = gate_init,
    .poll = gate_poll,
    .snapshot_state = gate_snapshot,
    .close = gate_close,
};

/* The default encoding (value and a newline), held on request. It runs before the sink creates
 * the file of a transaction's first record, so a transaction held there has no file yet. */
static size_t held_encoder(void *opaque, const tpc_record_t *r, void *buf, size_t cap)
{
    owner_t *o = opaque;
    pthread_mutex_lock(&o->mu);
    if (o->hold_next) {
        o->held = true;
        pthread_cond_broadcast(&o->cv);
        while (o->hold_next)
            pthread_cond_wait(&o->cv, &o->mu);
        o->held = false;
    }
    pthread_mutex_unlock(&o->mu);
    size_t need = r->value_len + 1;
    if (need <= cap) {
        memcpy(buf, r->value, r->value_len);
        ((char *)buf)[r->value_len] = '\n';
    }
    return need;
}

static void owner_new(owner_t *o, uint64_t allowed)
{
    memset(o, 0, sizeof *o);
    atomic_store(&o->gate.allowed, allowed);
    pthread_mutex_init(&o->mu, NULL);
    pthread_cond_init(&o->cv, NULL);
    o->job = tpc_job_new("file-owned");
    TPC_TEST_OK(tpc_job_set(o->job, "checkpoint.dir", ckpt_dir));
    TPC_TEST_OK(tpc_job_set(o->job, "checkpoint.owner", "claim"));
    TPC_TEST_OK(tpc_job_set(o->job, "checkpoint.interval.ms", "30"));
    TPC_TEST_OK(tpc_job_set(o->job, "checkpoint.max-concurrent", "1"));
    /* A held sink keeps a checkpoint open; it must not end the job meanwhile. */
    TPC_TEST_OK(tpc_job_set(o->job, "checkpoint.timeout.ms", "600000"));
    TPC_TEST_OK(tpc_file_sink_new(out_dir, &o->sink));
    TPC_TEST_OK(tpc_file_sink_set_encoder(o->sink, held_encoder, o));
    int src, sink;
    TPC_TEST_OK(tpc_job_add_vertex(o->job, "source", 1, &gate_ops, &o->gate, &src));
    TPC_TEST_OK(tpc_txn_sink_add_to_job(o->sink, o->job, "files", 1, &sink));
    TPC_TEST_OK(tpc_job_connect(o->job, src, sink, TPC_EDGE_FORWARD));
}

static void *owner_main(void *arg)
{
    owner_t *o = arg;
    o->err = tpc_job_run(o->job, &o->result);
    atomic_store(&o->ended, true);
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
    tpc_txn_sink_destroy(o->sink);
    pthread_mutex_destroy(&o->mu);
    pthread_cond_destroy(&o->cv);
}

static uint64_t completed(owner_t *o)
{
    tpc_job_stats_t st;
    ck_assert_int_eq(tpc_job_get_stats(o->job, &st), TPC_OK);
    return st.checkpoints_completed;
}

/* Wait until @o's source stands at @position and @more checkpoints completed after that (so the
 * transaction holding its last record is committed and the open one is empty). */
static void wait_settled(owner_t *o, uint64_t position, uint64_t more)
{
    int i = 0;
    for (; i < 6000 && atomic_load(&o->gate.next) < position && !atomic_load(&o->ended); i++)
        tpc_sleep_ms(10, NULL, NULL);
    ck_assert_uint_eq(atomic_load(&o->gate.next), position);
    uint64_t at = completed(o);
    for (i = 0; i < 6000 && completed(o) < at + more && !atomic_load(&o->ended); i++)
        tpc_sleep_ms(10, NULL, NULL);
    ck_assert_uint_ge(completed(o), at + more);
}

/* In-progress files of the sink's prefix ("part") whose name carries owner epoch @epoch. */
static int inprogress_of_epoch(int epoch)
{
    char tag[32];
    snprintf(tag, sizeof tag, "-e%d-", epoch);
    int n = 0;
    DIR *d = opendir(out_dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strncmp(de->d_name, ".part-", 6) == 0 && strstr(de->d_name, tag) &&
            strstr(de->d_name, ".inprogress"))
            n++;
    closedir(d);
    return n;
}

START_TEST(test_zombie_files_are_swept)
{
    owner_t a, b;
    owner_new(&a, 100);
    owner_start(&a);
    wait_settled(&a, 100, 3);

    /* A's sink waits in the first record of its next transaction, which has no file yet. */
    pthread_mutex_lock(&a.mu);
    a.hold_next = true;
    pthread_mutex_unlock(&a.mu);
    atomic_store(&a.gate.allowed, 200);
    pthread_mutex_lock(&a.mu);
    for (int i = 0; i < 600 && !a.held; i++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&a.cv, &a.mu, &ts);
    }
    ck_assert_msg(a.held, "owner 1's sink never took a record");
    pthread_mutex_unlock(&a.mu);
    /* A checkpoint whose barrier reached the sink before that record (its snapshot of an empty
     * transaction done) may still be completing; once the source has taken the snapshot of a
     * later one (a checkpoint starts after the one before it ended), A's next completion needs
     * the held sink, and pre-commits the held transaction. */
    for (int i = 0; i < 6000 && atomic_load(&a.gate.snap_pos) <= 100; i++)
        tpc_sleep_ms(10, NULL, NULL);
    ck_assert_uint_gt(atomic_load(&a.gate.snap_pos), 100);

    /* B takes over from A's last checkpoint (records 0..99), writes 100..149, and then has
     * nothing to write: its checkpoints after that are empty and touch no file. */
    owner_new(&b, 150);
    owner_start(&b);
    wait_settled(&b, 150, 3);

    /* A resumes: its transaction gets a file, is pre-committed, and the completion is refused. */
    pthread_mutex_lock(&a.mu);
    a.hold_next = false;
    pthread_cond_broadcast(&a.cv);
    pthread_mutex_unlock(&a.mu);
    pthread_join(a.thread, NULL);
    ck_assert_ptr_nonnull(a.err);
    ck_assert_msg(tpc_error_code(a.err) == TPC_ERR_FENCED, "%s", tpc_error_message(a.err));
    fprintf(stderr, "check_file_owner: owner 1 ended: %s\n", tpc_error_message(a.err));
    int left = inprogress_of_epoch(1);
    fprintf(stderr, "check_file_owner: owner 1 left %d in-progress files\n", left);
    ck_assert_int_ge(left, 1); /* what the test is about: its pending transaction's file */

    /* B writes the rest: its next checkpoint deletes A's file; its own records stay once each. */
    atomic_store(&b.gate.allowed, RECORDS);
    pthread_join(b.thread, NULL);
    ck_assert_msg(b.err == NULL, "%s", tpc_error_message(b.err));
    ck_assert_int_eq(b.result, TPC_JOB_FINISHED);
    tpc_job_stats_t st;
    ck_assert_int_eq(tpc_job_get_stats(b.job, &st), TPC_OK);
    ck_assert_uint_eq(st.restarts, 0);

    tpc_test_file_out_t out;
    char why[256];
    ck_assert_msg(tpc_test_file_read(out_dir, "part", &out, why, sizeof why), "%s", why);
    uint64_t count = RECORDS;
    ck_assert_msg(tpc_test_file_check(&out, 0, 1, &count, true, why, sizeof why), "%s", why);
    ck_assert_msg(out.inprogress == 0, "%d in-progress files left", out.inprogress);
    tpc_test_file_out_free(&out);
    owner_free(&a);
    owner_free(&b);
}
END_TEST

static void setup(void)
{
    ckpt_dir = tpc_test_tmpdir("file-owner-ckpt");
    out_dir = tpc_test_tmpdir("file-owner-out");
    ck_assert(ckpt_dir && out_dir);
}

static void teardown(void)
{
    tpc_test_rmdir(ckpt_dir);
    tpc_test_rmdir(out_dir);
    free(ckpt_dir);
    free(out_dir);
}

int main(void)
{
    Suite *s = suite_create("file_owner");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 180);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_zombie_files_are_swept);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
