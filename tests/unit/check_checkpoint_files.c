/*
 * Checkpoint files: every kind of damage (truncated, a flipped byte, an empty or foreign file) is
 * detected by the reader; recovery reports a damaged latest checkpoint, skips it for the one
 * before, and the restored job still counts every record exactly once. Retention keeps the newest
 * checkpoints only; restore.mode decides what happens when nothing valid is there. A checkpoint
 * that another instance of the job wrote is never replaced, nor restored by a restart.
 */
#include "runtime_internal.h"
#include "tpc_test_ops.h"
#include "tpc_test_sink.h"

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void write_sample(const char *dir, uint64_t id, char **path)
{
    tpc__checkpoint_t c = {.id = id, .timestamp_ms = 1, .job_name = "j", .nvertices = 1};
    tpc__vertex_snapshot_t v = {.name = "v", .parallelism = 2};
    tpc__subtask_snapshot_t subs[2] = {{0}};
    v.subtasks = subs;
    c.vertices = &v;
    ck_assert_ptr_null(tpc_state_add(&subs[0].state, TPC_STATE_LIST, "hello", 5));
    ck_assert_ptr_null(tpc_state_add(&subs[1].state, TPC_STATE_UNION, "world!", 6));
    subs[1].operator_finished = true;
    ck_assert_ptr_null(tpc__checkpoint_write(dir, &c, path));
    tpc__state_writer_free(&subs[0].state);
    tpc__state_writer_free(&subs[1].state);
}

static size_t file_size(const char *path)
{
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    return (size_t)st.st_size;
}

START_TEST(test_roundtrip)
{
    char *dir = tpc_test_tmpdir("files"), *path;
    write_sample(dir, 7, &path);
    tpc__checkpoint_t c;
    tpc_error_t *err = tpc__checkpoint_read(path, &c);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    ck_assert_uint_eq(c.id, 7);
    ck_assert_str_eq(c.job_name, "j");
    ck_assert_int_eq(c.nvertices, 1);
    ck_assert_int_eq(c.vertices[0].parallelism, 2);
    ck_assert_uint_eq(c.vertices[0].subtasks[0].state.nlist, 1);
    ck_assert_uint_eq(c.vertices[0].subtasks[1].state.nunion, 1);
    ck_assert(c.vertices[0].subtasks[1].operator_finished);
    ck_assert(!c.vertices[0].subtasks[0].operator_finished);
    tpc__checkpoint_free(&c);
    free(path);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

static void expect_corrupt(const char *path)
{
    tpc__checkpoint_t c;
    tpc_error_t *err = tpc__checkpoint_read(path, &c);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CORRUPT);
    ck_assert_ptr_nonnull(strstr(tpc_error_message(err), path));
    tpc_error_destroy(err);
}

START_TEST(test_every_byte_flip_detected)
{
    char *dir = tpc_test_tmpdir("files-flip"), *path;
    write_sample(dir, 1, &path);
    size_t n = file_size(path);
    for (size_t off = 0; off < n; off++) {
        int fd = open(path, O_RDWR);
        uint8_t b;
        ck_assert_int_eq(pread(fd, &b, 1, (off_t)off), 1);
        b ^= 0x10;
        ck_assert_int_eq(pwrite(fd, &b, 1, (off_t)off), 1);
        expect_corrupt(path);
        b ^= 0x10;
        ck_assert_int_eq(pwrite(fd, &b, 1, (off_t)off), 1);
        close(fd);
    }
    free(path);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

START_TEST(test_every_truncation_detected)
{
    char *dir = tpc_test_tmpdir("files-trunc"), *path;
    write_sample(dir, 1, &path);
    size_t n = file_size(path);
    for (size_t len = n; len-- > 0;) {
        ck_assert_int_eq(truncate(path, (off_t)len), 0);
        expect_corrupt(path);
    }
    free(path);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* A file with a valid checksum whose state-entry counts are near 2^32 (list state of one subtask,
 * union state of the other) is refused as corrupt at once, not after looping over the counts. */
START_TEST(test_huge_entry_count_refused_at_once)
{
    char *dir = tpc_test_tmpdir("files-count");
    tpc__checkpoint_t c = {.id = 3, .timestamp_ms = 1, .job_name = "j", .nvertices = 1};
    tpc__vertex_snapshot_t v = {.name = "v", .parallelism = 2};
    tpc__subtask_snapshot_t subs[2] = {{0}};
    v.subtasks = subs;
    c.vertices = &v;
    ck_assert_ptr_null(tpc_state_add(&subs[0].state, TPC_STATE_LIST, "hello", 5));
    ck_assert_ptr_null(tpc_state_add(&subs[1].state, TPC_STATE_UNION, "world!", 6));
    for (int which = 0; which < 2; which++) {
        subs[0].state.nlist = which == 0 ? UINT32_MAX : 1;
        subs[1].state.nunion = which == 1 ? UINT32_MAX - 1 : 1;
        char *path;
        c.id = 3 + (uint64_t)which;
        ck_assert_ptr_null(tpc__checkpoint_write(dir, &c, &path));
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        expect_corrupt(path);
        double took = seconds_since(&t0);
        ck_assert_msg(took < 0.5, "decoding took %.2f s", took);
        free(path);
    }
    subs[0].state.nlist = subs[1].state.nunion = 1;
    tpc__state_writer_free(&subs[0].state);
    tpc__state_writer_free(&subs[1].state);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

START_TEST(test_foreign_file_detected)
{
    char *dir = tpc_test_tmpdir("files-foreign");
    char path[600];
    snprintf(path, sizeof path, "%s/chk-00000000000000000001", dir);
    FILE *f = fopen(path, "w");
    fputs("this is not a checkpoint, but it is long enough to have a trailer of 32 bytes\n", f);
    fclose(f);
    expect_corrupt(path);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* ---- recovery over damaged files ---------------------------------------------------------- */

#define N 20000

static tpc_job_t *count_job(const char *dir, tpc_test_seq_conf_t *src, tpc_test_count_t *cnt)
{
    tpc_job_t *job = tpc_job_new("files");
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.dir", dir));
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.interval.ms", "10"));
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.retained", "3"));
    int s, c;
    ck_assert_ptr_null(tpc_job_add_vertex(job, "source", 2, &tpc_test_seq_source_ops, src, &s));
    ck_assert_ptr_null(tpc_job_add_vertex(job, "count", 1, &tpc_test_count_ops, cnt, &c));
    ck_assert_ptr_null(tpc_job_connect(job, s, c, TPC_EDGE_REBALANCE));
    return job;
}

static void *cancel_later(void *arg)
{
    tpc_job_t *job = arg;
    tpc_job_stats_t st;
    do {
        tpc__sleep_us(2000);
        tpc_job_get_stats(job, &st);
    } while (st.checkpoints_completed < 8);
    tpc_job_cancel(job);
    return NULL;
}

typedef struct {
    char lines[8][512];
    int n;
} log_capture_t;

static void capture(void *opaque, tpc_log_level_t level, const char *msg)
{
    log_capture_t *c = opaque;
    if (level <= TPC_LOG_ERROR && c->n < 8)
        snprintf(c->lines[c->n++], sizeof c->lines[0], "%s", msg);
}

/* Run until canceled mid-way, so checkpoint files of an unfinished job remain. */
static void run_and_cancel(const char *dir, tpc_test_seq_conf_t *src)
{
    tpc_test_count_t cnt;
    tpc_test_count_init(&cnt);
    tpc_job_t *job = count_job(dir, src, &cnt);
    pthread_t th;
    pthread_create(&th, NULL, cancel_later, job);
    tpc_job_result_t res;
    tpc_error_t *err = tpc_job_run(job, &res);
    pthread_join(th, NULL);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    ck_assert_int_eq(res, TPC_JOB_CANCELED);
    tpc_job_destroy(job);
}

static void expect_counts(tpc_test_count_t *cnt)
{
    for (int s = 0; s < 2; s++) {
        uint64_t count, sum;
        tpc_test_count_total(cnt, s, &count, &sum);
        ck_assert_uint_eq(count, N);
        ck_assert_uint_eq(sum, (uint64_t)N * (N - 1) / 2);
    }
}

/* The newest checkpoint completed and the sinks may have committed it: a damaged copy is refused,
 * not skipped for an older one, unless the operator accepts at-least-once. */
START_TEST(test_damaged_newest_is_refused_unless_fallback)
{
    char *dir = tpc_test_tmpdir("files-refuse");
    tpc_test_seq_conf_t src = {.count_default = N, .per_poll = 20, .sleep_us = 500};
    run_and_cancel(dir, &src);
    tpc__checkpoint_file_t *files;
    size_t n;
    ck_assert_ptr_null(tpc__checkpoint_list(dir, &files, &n));
    ck_assert_uint_eq(n, 3); /* checkpoint.retained */
    ck_assert_uint_eq(truncate(files[0].path, 40), 0);
    char newest[64];
    snprintf(newest, sizeof newest, "checkpoint %llu completed", (unsigned long long)files[0].id);
    tpc__checkpoint_files_free(files, n);

    tpc_test_count_t cnt;
    tpc_test_count_init(&cnt);
    log_capture_t lines = {0};
    tpc_job_t *job = count_job(dir, &src, &cnt);
    tpc_job_set_logger(job, capture, &lines, TPC_LOG_WARN);
    tpc_error_t *err = tpc_job_run(job, NULL);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CORRUPT);
    ck_assert_msg(strstr(tpc_error_message(err), newest), "%s", tpc_error_message(err));
    ck_assert_ptr_nonnull(strstr(tpc_error_hint_text(err), "restore.fallback"));
    tpc_error_destroy(err);
    tpc_job_stats_t stats;
    tpc_job_get_stats(job, &stats);
    ck_assert_uint_eq(stats.restarts, 0); /* refused at once, no futile loop */

    ck_assert_ptr_null(tpc_job_set(job, "restore.fallback", "at-least-once"));
    err = tpc_job_run(job, NULL);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    bool warned = false;
    for (int i = 0; i < lines.n; i++)
        warned |= strstr(lines.lines[i], "AT-LEAST-ONCE") != NULL;
    ck_assert(warned);
    expect_counts(&cnt);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* A checkpoint file newer than the completion record was never announced to a sink (the record is
 * written first): damaged, it is skipped for the one the record names. */
START_TEST(test_damaged_unannounced_checkpoint_skipped)
{
    char *dir = tpc_test_tmpdir("files-skip");
    tpc_test_seq_conf_t src = {.count_default = N, .per_poll = 20, .sleep_us = 500};
    run_and_cancel(dir, &src);
    tpc__checkpoint_file_t *files;
    size_t n;
    ck_assert_ptr_null(tpc__checkpoint_list(dir, &files, &n));
    ck_assert_uint_eq(n, 3);
    tpc__record_t rec;
    bool found;
    ck_assert_ptr_null(tpc__record_read(dir, &rec, &found));
    ck_assert(found);
    ck_assert_uint_eq(rec.newest, files[0].id);
    rec.newest = files[1].id;
    ck_assert_ptr_null(tpc__record_write(dir, &rec));
    tpc__record_free(&rec);
    ck_assert_uint_eq(truncate(files[0].path, 40), 0);
    char skipped[64];
    snprintf(skipped, sizeof skipped, "skipping checkpoint %llu", (unsigned long long)files[0].id);
    tpc__checkpoint_files_free(files, n);

    tpc_test_count_t cnt;
    tpc_test_count_init(&cnt);
    log_capture_t lines = {0};
    tpc_job_t *job = count_job(dir, &src, &cnt);
    tpc_job_set_logger(job, capture, &lines, TPC_LOG_WARN);
    tpc_error_t *err = tpc_job_run(job, NULL);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    ck_assert_int_ge(lines.n, 1);
    ck_assert_msg(strstr(lines.lines[0], skipped), "%s", lines.lines[0]);
    expect_counts(&cnt);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

typedef struct {
    const char *dir;
    uint64_t at;
    bool whole_dir; /* the completion record too */
} remove_at_t;

/* Checkpoint callback: from checkpoint @at on, remove the checkpoint files as they complete (by
 * hand, as an operator might), and with them the completion record when @whole_dir. */
static void remove_on_complete(void *opaque, uint64_t id, bool completed, uint64_t us,
                               const char *why)
{
    (void)us, (void)why;
    remove_at_t *r = opaque;
    if (!completed || id < r->at)
        return;
    tpc__checkpoint_file_t *files;
    size_t n;
    ck_assert_ptr_null(tpc__checkpoint_list(r->dir, &files, &n));
    for (size_t i = 0; i < n; i++)
        unlink(files[i].path);
    tpc__checkpoint_files_free(files, n);
    if (r->whole_dir) {
        char path[4200];
        snprintf(path, sizeof path, "%s/completed", r->dir);
        unlink(path);
    }
}

/* Checkpoint files removed while the job runs, then a failure: the run does not restore "nothing"
 * and start from zero; it refuses at once, whether or not the completion record went too. */
static void removed_mid_run(bool whole_dir)
{
    char *dir = tpc_test_tmpdir("files-removed");
    tpc_test_seq_conf_t src = {
        .count_default = N, .per_poll = 20, .sleep_us = 500, .fail_at = N / 2};
    tpc_test_count_t cnt;
    tpc_test_count_init(&cnt);
    tpc_job_t *job = count_job(dir, &src, &cnt);
    remove_at_t rm = {.dir = dir, .at = 3, .whole_dir = whole_dir};
    tpc_job_set_checkpoint_callback(job, remove_on_complete, &rm);
    tpc_error_t *err = tpc_job_run(job, NULL);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_NOT_FOUND);
    ck_assert_msg(strstr(tpc_error_message(err), "is missing"), "%s", tpc_error_message(err));
    ck_assert_ptr_nonnull(strstr(tpc_error_hint_text(err), "restore.fallback"));
    tpc_error_destroy(err);
    tpc_job_stats_t stats;
    tpc_job_get_stats(job, &stats);
    ck_assert_uint_eq(stats.restarts, 1); /* the failure, then the refusal: no loop */
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}

START_TEST(test_checkpoints_removed_mid_run_refused)
{
    removed_mid_run(false);
}
END_TEST

START_TEST(test_checkpoint_dir_emptied_mid_run_refused)
{
    removed_mid_run(true);
}
END_TEST

/* restore.mode=fresh starts over once per run: after a failure the run resumes from its own
 * checkpoints, never from zero again (that would count records twice) and never from the
 * checkpoints of before the start over. */
START_TEST(test_fresh_mode_restart_resumes_own_checkpoint)
{
    char *dir = tpc_test_tmpdir("files-fresh");
    tpc_test_seq_conf_t src = {.count_default = N, .per_poll = 20, .sleep_us = 500};
    run_and_cancel(dir, &src); /* checkpoints of an earlier run */
    tpc_test_seq_conf_t again = {
        .count_default = N, .per_poll = 20, .sleep_us = 500, .fail_at = N / 2};
    tpc_test_count_t cnt;
    tpc_test_count_init(&cnt);
    tpc_job_t *job = count_job(dir, &again, &cnt);
    ck_assert_ptr_null(tpc_job_set(job, "restore.mode", "fresh"));
    tpc_error_t *err = tpc_job_run(job, NULL);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    tpc_job_stats_t stats;
    tpc_job_get_stats(job, &stats);
    ck_assert_uint_eq(stats.restarts, 1);
    expect_counts(&cnt);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

static void *cancel_soon(void *arg)
{
    tpc__sleep_us(100 * 1000);
    tpc_job_cancel(arg);
    return NULL;
}

static void note_restore(void *opaque, tpc_log_level_t level, const char *msg)
{
    (void)level;
    if (strstr(msg, "restoring job"))
        atomic_fetch_add((atomic_int *)opaque, 1);
}

/* A start over that dies before its first checkpoint completed leaves the earlier checkpoints
 * behind, but the sinks have aborted what they held: the next run in restore.mode=auto starts
 * without state again instead of restoring them. */
START_TEST(test_start_over_is_not_undone_by_the_next_run)
{
    char *dir = tpc_test_tmpdir("files-over");
    tpc_test_seq_conf_t src = {.count_default = N, .per_poll = 20, .sleep_us = 500};
    run_and_cancel(dir, &src);
    tpc_test_count_t cnt;
    tpc_test_count_init(&cnt);
    tpc_job_t *job = count_job(dir, &src, &cnt);
    ck_assert_ptr_null(tpc_job_set(job, "restore.mode", "fresh"));
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.interval.ms", "600000"));
    pthread_t th;
    pthread_create(&th, NULL, cancel_soon, job); /* before any checkpoint of the new state */
    ck_assert_ptr_null(tpc_job_run(job, NULL));
    pthread_join(th, NULL);
    tpc_job_destroy(job);
    tpc__record_t rec;
    bool found;
    ck_assert_ptr_null(tpc__record_read(dir, &rec, &found));
    ck_assert(found);
    ck_assert_uint_gt(rec.first, rec.newest); /* nothing of the new state completed */
    tpc__record_free(&rec);

    atomic_int restores = 0;
    tpc_test_count_init(&cnt);
    job = count_job(dir, &src, &cnt);
    tpc_job_set_logger(job, note_restore, &restores, TPC_LOG_INFO);
    tpc_error_t *err = tpc_job_run(job, NULL);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    ck_assert_int_eq(atomic_load(&restores), 0);
    expect_counts(&cnt);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* The completion record belongs to one job, and a damaged one is refused with what to do. */
START_TEST(test_completion_record_checked)
{
    char *dir = tpc_test_tmpdir("files-record");
    tpc_test_seq_conf_t src = {.count_default = N, .per_poll = 20, .sleep_us = 500};
    run_and_cancel(dir, &src);
    char path[4200];
    snprintf(path, sizeof path, "%s/completed", dir);
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    fseek(f, 20, SEEK_SET);
    fputc('X', f);
    fclose(f);
    tpc_test_count_t cnt;
    tpc_test_count_init(&cnt);
    tpc_job_t *job = count_job(dir, &src, &cnt);
    tpc_error_t *err = tpc_job_run(job, NULL);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CORRUPT);
    ck_assert_msg(strstr(tpc_error_message(err), "completion record"), "%s",
                  tpc_error_message(err));
    ck_assert_ptr_nonnull(strstr(tpc_error_hint_text(err), "delete the record"));
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    /* Deleting it, as the hint allows, resumes from the newest checkpoint file. */
    ck_assert_int_eq(unlink(path), 0);
    job = count_job(dir, &src, &cnt);
    err = tpc_job_run(job, NULL);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    tpc_job_destroy(job);
    /* Another job on the same folder is told so. */
    job = tpc_job_new("another");
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.dir", dir));
    int s;
    ck_assert_ptr_null(tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s));
    err = tpc_job_run(job, NULL);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    ck_assert_msg(strstr(tpc_error_message(err), "holds the checkpoints of job \"files\""), "%s",
                  tpc_error_message(err));
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

START_TEST(test_no_valid_checkpoint_is_an_error_unless_fresh)
{
    char *dir = tpc_test_tmpdir("files-none");
    tpc_test_seq_conf_t src = {.count_default = N, .per_poll = 20, .sleep_us = 500};
    run_and_cancel(dir, &src);
    tpc__checkpoint_file_t *files;
    size_t n;
    ck_assert_ptr_null(tpc__checkpoint_list(dir, &files, &n));
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(truncate(files[i].path, 10), 0);
    tpc__checkpoint_files_free(files, n);

    tpc_test_count_t cnt;
    tpc_test_count_init(&cnt);
    log_capture_t lines = {0};
    tpc_job_t *job = count_job(dir, &src, &cnt);
    tpc_job_set_logger(job, capture, &lines, TPC_LOG_WARN);
    tpc_error_t *err = tpc_job_run(job, NULL);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CORRUPT);
    ck_assert_ptr_nonnull(strstr(tpc_error_message(err), "is damaged"));
    ck_assert_ptr_nonnull(strstr(tpc_error_hint_text(err), "restore.mode"));
    tpc_error_destroy(err);
    ck_assert_ptr_null(tpc_job_set(job, "restore.mode", "fresh"));
    err = tpc_job_run(job, NULL);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    uint64_t count, sum;
    tpc_test_count_total(&cnt, 1, &count, &sum);
    ck_assert_uint_eq(count, N);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

START_TEST(test_restore_required_without_checkpoint)
{
    char *dir = tpc_test_tmpdir("files-required");
    tpc_test_seq_conf_t src = {.count_default = 10};
    tpc_test_count_t cnt;
    tpc_test_count_init(&cnt);
    tpc_job_t *job = count_job(dir, &src, &cnt);
    ck_assert_ptr_null(tpc_job_set(job, "restore.mode", "required"));
    tpc_error_t *err = tpc_job_run(job, NULL);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_NOT_FOUND);
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* A second writer of the directory (another instance of the job took the same id): the file
 * already there is neither replaced nor touched, and the error says what is going on. */
START_TEST(test_existing_checkpoint_never_replaced)
{
    char *dir = tpc_test_tmpdir("files-taken"), *path;
    write_sample(dir, 7, &path);
    size_t size = file_size(path);
    tpc__checkpoint_t c = {.id = 7, .timestamp_ms = 2, .job_name = "other", .nvertices = 0};
    tpc_error_t *err = tpc__checkpoint_write(dir, &c, NULL);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(tpc_error_message(err), "another instance"));
    ck_assert_ptr_nonnull(tpc_error_hint_text(err));
    tpc_error_destroy(err);
    tpc__checkpoint_t back;
    err = tpc__checkpoint_read(path, &back);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    ck_assert_str_eq(back.job_name, "j");
    ck_assert_uint_eq(file_size(path), size);
    tpc__checkpoint_free(&back);
    /* an older id than the newest file: this instance was overtaken by another one */
    c.id = 5;
    err = tpc__checkpoint_write(dir, &c, NULL);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    ck_assert_msg(strstr(tpc_error_message(err), "newer than checkpoint 5"), "%s",
                  tpc_error_message(err));
    tpc_error_destroy(err);
    /* nothing else is left behind (no temporary file either), and a temporary file of a crashed
     * write goes when the next run starts */
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int entries = 0;
    for (struct dirent *e; (e = readdir(d));)
        entries += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    ck_assert_int_eq(entries, 1);
    char stale[512];
    snprintf(stale, sizeof stale, "%s/.chk-00000000000000000008.123-456.tmp", dir);
    int fd = open(stale, O_WRONLY | O_CREAT, 0644);
    ck_assert_int_ge(fd, 0);
    close(fd);
    tpc__checkpoint_dir_clean(dir);
    ck_assert_int_ne(access(stale, F_OK), 0);
    ck_assert_int_eq(access(path, F_OK), 0);
    free(path);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* While the job fails checkpoint 4, "another instance" puts a newer checkpoint into the
 * directory. The restart must not restore it (that would take over the other instance's
 * transactions): the run fails with a configuration error instead of restarting again. */
static char *foreign_dir;
static tpc_error_t *foreign_write_then_fail(uint64_t id)
{
    if (id != 4)
        return NULL;
    /* the other instance's checkpoint: same job, same graph, a newer id */
    tpc__checkpoint_file_t *files;
    size_t n;
    ck_assert_ptr_null(tpc__checkpoint_list(foreign_dir, &files, &n));
    ck_assert_uint_gt(n, 0);
    tpc__checkpoint_t c;
    tpc_error_t *err = tpc__checkpoint_read(files[0].path, &c);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    c.id = 1000;
    ck_assert_ptr_null(tpc__checkpoint_write(foreign_dir, &c, NULL));
    tpc__checkpoint_free(&c);
    tpc__checkpoint_files_free(files, n);
    return tpc_error_new(TPC_ERR_IO, TPC_ERROR_RETRIABLE, "injected write failure");
}

START_TEST(test_restart_refuses_a_checkpoint_it_did_not_write)
{
    char *dir = tpc_test_tmpdir("files-foreign");
    tpc_test_seq_conf_t src = {.count_default = 1000000, .per_poll = 10, .sleep_us = 1000};
    tpc_test_count_t cnt;
    tpc_test_count_init(&cnt);
    tpc_job_t *job = count_job(dir, &src, &cnt);
    ck_assert_ptr_null(tpc_job_set(job, "restart.delay.ms", "10"));
    foreign_dir = dir;
    tpc__checkpoint_write_fault = foreign_write_then_fail;
    tpc_error_t *err = tpc_job_run(job, NULL);
    tpc__checkpoint_write_fault = NULL;
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    ck_assert_msg(strstr(tpc_error_message(err), "did not write") &&
                      strstr(tpc_error_message(err), "another instance"),
                  "%s", tpc_error_message(err));
    tpc_job_stats_t st;
    tpc_job_get_stats(job, &st);
    ck_assert_uint_eq(st.restarts, 1);
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* A start cleans the temporary completion record a killed process left, and leaves alone one a
 * live process (a second instance) is writing. */
START_TEST(test_leftover_record_tmp_cleaned)
{
    char *dir = tpc_test_tmpdir("record-tmp");
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    ck_assert_int_gt(dead, 0);
    ck_assert_int_eq(waitpid(dead, NULL, 0), dead);
    char gone[4200], live[4200];
    snprintf(gone, sizeof gone, "%s/completed.%ld.tmp", dir, (long)dead);
    snprintf(live, sizeof live, "%s/completed.%ld.tmp", dir, (long)getpid());
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(i ? live : gone, "w");
        ck_assert_ptr_nonnull(f);
        fputs("partial", f);
        fclose(f);
    }
    tpc__checkpoint_dir_clean(dir);
    ck_assert_int_ne(access(gone, F_OK), 0);
    ck_assert_int_eq(access(live, F_OK), 0);
    unlink(live);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("checkpoint_files");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_roundtrip);
    tcase_add_test(tc, test_every_byte_flip_detected);
    tcase_add_test(tc, test_every_truncation_detected);
    tcase_add_test(tc, test_foreign_file_detected);
    tcase_add_test(tc, test_huge_entry_count_refused_at_once);
    tcase_add_test(tc, test_damaged_newest_is_refused_unless_fallback);
    tcase_add_test(tc, test_damaged_unannounced_checkpoint_skipped);
    tcase_add_test(tc, test_checkpoints_removed_mid_run_refused);
    tcase_add_test(tc, test_checkpoint_dir_emptied_mid_run_refused);
    tcase_add_test(tc, test_fresh_mode_restart_resumes_own_checkpoint);
    tcase_add_test(tc, test_completion_record_checked);
    tcase_add_test(tc, test_start_over_is_not_undone_by_the_next_run);
    tcase_add_test(tc, test_no_valid_checkpoint_is_an_error_unless_fresh);
    tcase_add_test(tc, test_restore_required_without_checkpoint);
    tcase_add_test(tc, test_existing_checkpoint_never_replaced);
    tcase_add_test(tc, test_restart_refuses_a_checkpoint_it_did_not_write);
    tcase_add_test(tc, test_leftover_record_tmp_cleaned);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
