/*
 * The file sink's transactions on disk, one sink subtask driven by hand: what a checkpoint leaves
 * in the folder, that commit is a rename and is idempotent (also half done, also repeated by
 * recovery), that a missing or foreign file is a loud error, that cleanup deletes exactly the dead
 * in-progress files of this sink and no others, and that configuration mistakes are named.
 */
#include "tpc_test_check.h"
#include "tpc_file.h"
#include "tpc_test_file.h"
#include "tpc_test_ops.h"
#include "tpc_test_txn_drive.h"

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *dir;
static tpc_txn_sink_t *sink;
static tpc_test_txn_sub_t sub;

static void setup(void)
{
    dir = tpc_test_tmpdir("file-sink");
    ck_assert_ptr_nonnull(dir);
    ck_assert_ptr_null(tpc_file_sink_new(dir, &sink));
}

static void teardown(void)
{
    tpc_txn_sink_destroy(sink);
    tpc_test_rmdir(dir);
    free(dir);
}

static void start(uint64_t restored, const tpc_test_txn_state_t *state)
{
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, restored, state));
}

/* Write records [first, first + n) in batches. */
static void write_range(uint64_t first, uint64_t n)
{
    for (uint64_t i = 0; i < n; i += 64)
        TPC_TEST_OK(tpc_test_txn_sub_write(&sub, first + i, n - i < 64 ? n - i : 64));
}

static tpc_test_file_out_t read_out(void)
{
    tpc_test_file_out_t out;
    char why[256];
    ck_assert_msg(tpc_test_file_read(dir, "part", &out, why, sizeof why), "%s", why);
    return out;
}

/* Records 0 .. n-1, each once, in order, nothing in progress. */
static void expect_committed(uint64_t n, int inprogress)
{
    tpc_test_file_out_t out = read_out();
    char why[256];
    ck_assert_msg(tpc_test_file_check(&out, 0, 1, &n, true, why, sizeof why), "%s", why);
    ck_assert_int_eq(out.inprogress, inprogress);
    tpc_test_file_out_free(&out);
}

static bool exists(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

static void touch(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "x", 1), 1);
    close(fd);
}

START_TEST(test_checkpoint_then_commit)
{
    start(0, NULL);
    write_range(0, 100);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    expect_committed(0, 1); /* pre-committed: hidden, durable, not visible */
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1));
    ck_assert(exists("part-0-0000000001-0000"));
    expect_committed(100, 0);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 2, NULL)); /* empty: no file at all */
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 2));
    tpc_test_file_out_t out = read_out();
    ck_assert_int_eq(out.files, 1);
    tpc_test_file_out_free(&out);
    write_range(100, 50);
    tpc_test_txn_sub_close(&sub); /* the current transaction is aborted: its file goes */
    expect_committed(100, 0);
}
END_TEST

START_TEST(test_parts_roll_by_size)
{
    TPC_TEST_OK(tpc_txn_sink_set(sink, "file.part-size", "200")); /* 9-byte records: 22 per part */
    start(0, NULL);
    write_range(0, 1000);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1));
    tpc_test_txn_sub_close(&sub);
    tpc_test_file_out_t out = read_out();
    ck_assert_int_eq(out.files, 46);
    ck_assert_uint_le(out.largest, 200);
    tpc_test_file_out_free(&out);
    ck_assert(exists("part-0-0000000001-0045"));
    expect_committed(1000, 0);
}
END_TEST

/* Recovery commits a pending transaction whose commit was cut short after some renames, and
 * committing it again (a second recovery) changes nothing. */
START_TEST(test_commit_is_idempotent)
{
    TPC_TEST_OK(tpc_txn_sink_set(sink, "file.part-size", "90"));
    start(0, NULL);
    tpc_test_txn_state_t state = {.count = 0};
    write_range(0, 30);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, &state)); /* 3 parts, pending */
    tpc_test_txn_sub_close(&sub); /* the crash, before the notification */
    tpc_test_file_out_t out = read_out();
    ck_assert_int_eq(out.inprogress, 3);
    tpc_test_file_out_free(&out);
    /* A commit that renamed part 0 only, then died. */
    char from[1024];
    DIR *d = opendir(dir);
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strstr(de->d_name, "-0000.inprogress"))
            snprintf(from, sizeof from, "%s/%s", dir, de->d_name);
    closedir(d);
    char to[1024];
    snprintf(to, sizeof to, "%s/part-0-0000000001-0000", dir);
    ck_assert_int_eq(rename(from, to), 0);
    for (int i = 0; i < 2; i++) {
        start(1, &state);
        tpc_test_txn_sub_close(&sub);
        expect_committed(30, 0);
    }
    tpc_txn_sink_stats_t st;
    tpc_txn_sink_get_stats(sink, &st);
    ck_assert_uint_eq(st.recovered_commits, 2);
    tpc_test_txn_state_free(&state);
}
END_TEST

START_TEST(test_missing_file_is_data_loss)
{
    start(0, NULL);
    tpc_test_txn_state_t state = {.count = 0};
    write_range(0, 10);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, &state));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1));
    tpc_test_txn_sub_close(&sub);
    char path[1024];
    snprintf(path, sizeof path, "%s/part-0-0000000001-0000", dir);
    ck_assert_int_eq(unlink(path), 0);
    TPC_TEST_OK(tpc_test_txn_sub_open(&sub, sink, 0, 1, 1));
    tpc_error_t *err = tpc__txn_task_initialize(sub.task, state.entries, state.count);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_DATA_LOSS);
    ck_assert_msg(strstr(tpc_error_message(err), "could not commit transaction "
                                                 "\"part-0-0000000001-0000\" of checkpoint 1 "
                                                 "during recovery: in-progress file") != NULL,
                  "%s", tpc_error_message(err));
    ck_assert_ptr_nonnull(strstr(tpc_error_message(err), "are both missing"));
    tpc_error_destroy(err);
    tpc_test_txn_sub_close(&sub);
    tpc_test_txn_state_free(&state);
}
END_TEST

START_TEST(test_foreign_final_file_is_not_replaced)
{
    start(0, NULL);
    write_range(0, 10);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    touch("part-0-0000000001-0000");
    tpc_error_t *err = tpc__txn_task_complete(sub.task, 1);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_COMMIT);
    ck_assert_ptr_nonnull(strstr(tpc_error_message(err), "a different file of that name exists"));
    ck_assert_ptr_nonnull(strstr(tpc_error_hint_text(err), "own prefix"));
    tpc_error_destroy(err);
    tpc_test_txn_sub_close(&sub);
    tpc_test_file_out_t out = read_out();
    ck_assert_int_eq(out.inprogress, 1); /* still pending: never deleted */
    ck_assert_uint_eq(out.len, 1);
    tpc_test_file_out_free(&out);
}
END_TEST

/* After a restore from checkpoint 5, subtask 0 of 2 deletes in-progress files of its own prefix,
 * of subtasks 0, 2, 4, ..., naming a checkpoint above 5; nothing else. */
START_TEST(test_lingering_cleanup_rules)
{
    static const struct {
        const char *name;
        bool deleted;
    } files[] = {
        {".part-0-0000000006-00000000000000ab-0000.inprogress", true},
        {".part-0-0000000009-00000000000000ab-0003.inprogress", true},
        {".part-2-0000000007-00000000000000cd-0000.inprogress", true},
        {".part-0-0000000005-00000000000000ab-0000.inprogress", false},   /* may be pending */
        {".part-1-0000000007-00000000000000ab-0000.inprogress", false},   /* subtask 1's */
        {".part-x-0-0000000009-00000000000000ab-0000.inprogress", false}, /* prefix part-x */
        {".other-0-0000000009-00000000000000ab-0000.inprogress", false},
        {".part-0-0000000009-00000000000000ab-0000.tmp", false},
        {"part-0-0000000009-0000", false},
    };
    size_t n = sizeof files / sizeof files[0];
    for (size_t i = 0; i < n; i++)
        touch(files[i].name);
    TPC_TEST_OK(tpc_test_txn_sub_open(&sub, sink, 0, 2, 5));
    TPC_TEST_OK(tpc__txn_task_initialize(sub.task, NULL, 0));
    tpc_test_txn_sub_close(&sub);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(exists(files[i].name) != files[i].deleted, "%s was %s", files[i].name,
                      files[i].deleted ? "kept" : "deleted");
    ck_assert_ptr_nonnull(strstr(sub.log, "deleted 3 in-progress files"));
    /* A start without state next to a file an earlier run committed for checkpoint 9 would
     * collide with it: refused, saying how to start over, and the file is left alone. */
    tpc_error_t *err = tpc_test_txn_sub_start(&sub, sink, 0, NULL);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    ck_assert_msg(strstr(tpc_error_message(err), "part-0-0000000009-0000"), "%s",
                  tpc_error_message(err));
    ck_assert_ptr_nonnull(strstr(tpc_error_hint_text(err), "restore.mode=fresh"));
    tpc_error_destroy(err);
    tpc_test_txn_sub_close(&sub);
    ck_assert(exists(files[8].name));
    /* Without it, a fresh start owns every in-progress file of its subtasks. */
    char moved[1024];
    snprintf(moved, sizeof moved, "%s/%s", dir, files[8].name);
    ck_assert_int_eq(unlink(moved), 0);
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    tpc_test_txn_sub_close(&sub);
    ck_assert(!exists(files[3].name) && !exists(files[4].name));
    ck_assert(exists(files[5].name) && exists(files[6].name));
}
END_TEST

/* The name of the one in-progress file of the prefix "part" that contains @part, or "". */
static void find_inprogress(const char *part, char *name, size_t cap)
{
    name[0] = '\0';
    DIR *d = opendir(dir);
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strncmp(de->d_name, ".part-", 6) == 0 && strstr(de->d_name, part) &&
            strstr(de->d_name, ".inprogress"))
            snprintf(name, cap, "%s", de->d_name);
    closedir(d);
}

/* Under owners the owner epoch decides first. A job without owners (epoch 0, names and handles
 * as before owners existed) left checkpoint 1 pending; owner epoch 2 takes the job over at
 * parallelism 2: it commits that checkpoint, then deletes its subtasks' in-progress files of older
 * epochs whatever checkpoint they name, and those of its own epoch above the restored one; a
 * newer epoch's file is never touched. A zombie's file (epoch 1) that appears later goes at the
 * owner's next checkpoint, and a zombie restarting from the old checkpoint leaves the owner's
 * files alone. */
START_TEST(test_owner_epoch_cleanup_rules)
{
    tpc_test_txn_origin_t old_run = {.first_checkpoint = 1};
    TPC_TEST_OK(tpc_test_txn_sub_open_from(&sub, sink, 0, 2, &old_run));
    TPC_TEST_OK(tpc__txn_task_initialize(sub.task, NULL, 0));
    tpc_test_txn_state_t state = {.count = 0};
    write_range(0, 20);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, &state));
    tpc_test_txn_sub_close(&sub); /* the crash, before the notification */
    char pending[256];
    find_inprogress("-0000000001-", pending, sizeof pending);
    /* ".part-0-0000000001-<token>-0000.inprogress": no epoch field */
    ck_assert_msg(strlen(pending) == 51, "%s", pending);

    static const struct {
        const char *name;
        bool deleted;
    } files[] = {
        {".part-0-0000000001-00000000000000ab-0000.inprogress", true},     /* no epoch: 0 */
        {".part-2-0000000001-e1-00000000000000cd-0000.inprogress", true},  /* older epoch */
        {".part-0-0000000003-e2-00000000000000ab-0001.inprogress", true},  /* above 1 */
        {".part-0-0000000001-e2-00000000000000ef-0000.inprogress", false}, /* may be pending */
        {".part-0-0000000009-e3-0000000000000012-0000.inprogress", false}, /* newer owner's */
        {".part-1-0000000001-e1-00000000000000ab-0000.inprogress", false}, /* subtask 1's */
        {".part-e1-0-0000000009-00000000000000ab-0000.inprogress", false}, /* prefix part-e1 */
        {".part-0-0000000009-e-00000000000000ab-0000.inprogress", false},  /* not a name */
        {".part-0-0000000009-e0-00000000000000ab-0000.inprogress", false}, /* not a name */
    };
    size_t n = sizeof files / sizeof files[0];
    for (size_t i = 0; i < n; i++)
        touch(files[i].name);
    tpc_test_txn_origin_t owner = {
        .restored = 1, .restored_parallelism = 2, .first_checkpoint = 2, .owner_epoch = 2};
    TPC_TEST_OK(tpc_test_txn_sub_open_from(&sub, sink, 0, 2, &owner));
    TPC_TEST_OK(tpc__txn_task_initialize(sub.task, state.entries, state.count));
    ck_assert(!exists(pending));
    ck_assert(exists("part-0-0000000001-0000"));
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(exists(files[i].name) != files[i].deleted, "%s was %s", files[i].name,
                      files[i].deleted ? "kept" : "deleted");

    /* A zombie of epoch 1 creates a file after that; the owner's next checkpoint deletes it. */
    const char *zombie = ".part-0-0000000002-e1-0000000000000077-0000.inprogress";
    touch(zombie);
    write_range(20, 20);
    char mine[256];
    find_inprogress("-0000000002-e2-", mine, sizeof mine);
    ck_assert_msg(strncmp(mine, ".part-0-0000000002-e2-", 22) == 0, "%s", mine);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 2, NULL));
    ck_assert(!exists(zombie));
    ck_assert(exists(files[4].name) && exists(mine));
    ck_assert_ptr_nonnull(strstr(sub.log, "older owner epoch than 2"));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 2));
    write_range(40, 10);
    find_inprogress("-0000000003-e2-", mine, sizeof mine);
    ck_assert(mine[0]);

    /* The zombie restarts from checkpoint 1 (it read the record before the take-over): it finds
     * that checkpoint committed and deletes none of the owner's files. */
    tpc_test_txn_sub_t zombie_sub;
    tpc_test_txn_origin_t old_owner = {
        .restored = 1, .restored_parallelism = 2, .first_checkpoint = 2, .owner_epoch = 1};
    TPC_TEST_OK(tpc_test_txn_sub_open_from(&zombie_sub, sink, 0, 2, &old_owner));
    TPC_TEST_OK(tpc__txn_task_initialize(zombie_sub.task, state.entries, state.count));
    tpc_test_txn_sub_close(&zombie_sub);
    ck_assert(exists(mine) && exists(files[3].name) && exists(files[4].name));

    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 3, NULL));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 3));
    tpc_test_txn_sub_close(&sub);
    tpc_test_file_out_t out = read_out();
    char why[256];
    uint64_t count = 50;
    ck_assert_msg(tpc_test_file_check(&out, 0, 1, &count, true, why, sizeof why), "%s", why);
    tpc_test_file_out_free(&out);
    tpc_test_txn_state_free(&state);
}
END_TEST

/* A run without owners on a folder that a run with owners wrote into: the epoch in a name decides
 * nothing, and such files go by the checkpoint rule as every other file. */
START_TEST(test_no_owner_cleans_owned_files)
{
    tpc_test_txn_origin_t old_run = {.first_checkpoint = 1};
    TPC_TEST_OK(tpc_test_txn_sub_open_from(&sub, sink, 0, 2, &old_run));
    TPC_TEST_OK(tpc__txn_task_initialize(sub.task, NULL, 0));
    tpc_test_txn_state_t state = {.count = 0};
    write_range(0, 20);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, &state));
    tpc_test_txn_sub_close(&sub);
    const char *above = ".part-0-0000000003-e2-00000000000000ab-0000.inprogress";
    const char *at = ".part-0-0000000001-e2-00000000000000ef-0000.inprogress";
    touch(above);
    touch(at);
    tpc_test_txn_origin_t again = {.restored = 1, .restored_parallelism = 2, .first_checkpoint = 2};
    TPC_TEST_OK(tpc_test_txn_sub_open_from(&sub, sink, 0, 2, &again));
    TPC_TEST_OK(tpc__txn_task_initialize(sub.task, state.entries, state.count));
    ck_assert_msg(!exists(above), "%s was kept", above);
    ck_assert_msg(exists(at), "%s was deleted", at);
    ck_assert(exists("part-0-0000000001-0000"));
    tpc_test_txn_sub_close(&sub);
    tpc_test_txn_state_free(&state);
}
END_TEST

/* The restored current transaction is dropped with everything it wrote after its handle was
 * stored, and the restored pending one is committed. */
START_TEST(test_restore_commits_pending_and_drops_current)
{
    start(0, NULL);
    tpc_test_txn_state_t state = {.count = 0};
    write_range(0, 20);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, &state));
    write_range(20, 20);
    tpc_test_file_out_t out = read_out();
    ck_assert_int_eq(out.inprogress, 2);
    tpc_test_file_out_free(&out);
    /* The crash leaves the current transaction's file behind; close() would delete it, so keep
     * a second name for it across the close. */
    char cur[1024] = "", keep[1024];
    DIR *d = opendir(dir);
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strncmp(de->d_name, ".part-0-0000000002-", 19) == 0)
            snprintf(cur, sizeof cur, "%s/%s", dir, de->d_name);
    closedir(d);
    snprintf(keep, sizeof keep, "%s/kept", dir);
    ck_assert_int_eq(link(cur, keep), 0);
    tpc_test_txn_sub_close(&sub);
    ck_assert_int_eq(rename(keep, cur), 0);
    start(1, &state);
    tpc_test_txn_sub_close(&sub);
    expect_committed(20, 0);
    tpc_test_txn_state_free(&state);
}
END_TEST

START_TEST(test_at_least_once_visible_at_checkpoint)
{
    TPC_TEST_OK(tpc_txn_sink_set(sink, "guarantee", "at-least-once"));
    start(0, NULL);
    write_range(0, 10);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    expect_committed(10, 0); /* no waiting for the checkpoint to complete */
    tpc_test_txn_sub_close(&sub);
    /* Checkpoint 1 never completed; a new process numbers its next checkpoint 1 again. The
     * names differ by their token, so nothing collides. */
    start(0, NULL);
    write_range(10, 10);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    tpc_test_txn_sub_close(&sub);
    tpc_test_file_out_t out = read_out();
    ck_assert_int_eq(out.files, 2);
    tpc_test_file_out_free(&out);
}
END_TEST

static size_t seq_as_text(void *opaque, const tpc_record_t *r, void *buf, size_t cap)
{
    (void)opaque;
    const unsigned char *k = r->key;
    unsigned long long seq = 0;
    for (int b = 0; b < 8; b++)
        seq = seq << 8 | k[b];
    char line[64];
    int n = snprintf(line, sizeof line, "%llu ", seq);
    size_t pad = seq % 50 == 0 ? 9000 : 0; /* now and then larger than the write buffer */
    size_t need = (size_t)n + pad + 1;
    if (need <= cap) {
        memcpy(buf, line, (size_t)n);
        memset((char *)buf + n, 'x', pad);
        ((char *)buf)[need - 1] = '\n';
    }
    return need;
}

START_TEST(test_encoder)
{
    TPC_TEST_OK(tpc_txn_sink_set(sink, "file.buffer-size", "4096"));
    TPC_TEST_OK(tpc_file_sink_set_encoder(sink, seq_as_text, NULL));
    start(0, NULL);
    write_range(0, 300);
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    TPC_TEST_OK(tpc__txn_task_complete(sub.task, 1));
    tpc_test_txn_sub_close(&sub);
    tpc_test_file_out_t out = read_out();
    out.data[out.len] = '\0';
    char *save = NULL, *line = strtok_r((char *)out.data, "\n", &save);
    for (unsigned long long i = 0; i < 300; i++, line = strtok_r(NULL, "\n", &save)) {
        ck_assert_ptr_nonnull(line);
        ck_assert_uint_eq(strtoull(line, NULL, 10), i);
        ck_assert_uint_eq(strlen(line),
                          (size_t)snprintf(NULL, 0, "%llu ", i) + (i % 50 ? 0 : 9000));
    }
    ck_assert_ptr_null(line);
    tpc_test_file_out_free(&out);
}
END_TEST

START_TEST(test_configuration_errors)
{
    tpc_txn_sink_t *s = NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/missing", dir);
    tpc_error_t *err = tpc_file_sink_new(path, &s);
    ck_assert_ptr_nonnull(err);
    ck_assert_ptr_nonnull(strstr(tpc_error_message(err), "could not use folder"));
    ck_assert_str_eq(tpc_error_hint_text(err), "create the folder first");
    tpc_error_destroy(err);
    touch("plain");
    snprintf(path, sizeof path, "%s/plain", dir);
    err = tpc_file_sink_new(path, &s);
    ck_assert_ptr_nonnull(strstr(tpc_error_message(err), "is not a folder"));
    tpc_error_destroy(err);
    ck_assert_ptr_null(s);

    static const char *bad[][2] = {
        {"file.prefix", ".hidden"}, {"file.prefix", "a/b"},  {"file.prefix", ""},
        {"file.suffix", "x/y"},     {"file.part-size", "0"}, {"file.part-size", "12k"},
        {"file.buffer-size", "10"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err = tpc_txn_sink_set(sink, bad[i][0], bad[i][1]);
        ck_assert_msg(err && tpc_error_code(err) == TPC_ERR_CONFIG, "%s=%s", bad[i][0], bad[i][1]);
        ck_assert_ptr_nonnull(strstr(tpc_error_message(err), bad[i][0]));
        ck_assert_ptr_nonnull(tpc_error_hint_text(err));
        tpc_error_destroy(err);
    }
    err = tpc_txn_sink_set(sink, "file.nope", "1");
    ck_assert_str_eq(tpc_error_message(err),
                     "unknown configuration key \"file.nope\" for a file sink");
    tpc_error_destroy(err);
    TPC_TEST_OK(tpc_txn_sink_set(sink, "file.prefix", "app-log_1.v2"));
    TPC_TEST_OK(tpc_txn_sink_set(sink, "file.suffix", ".log"));
    TPC_TEST_OK(tpc_txn_sink_set(sink, "guarantee", "none"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("file_sink");
    TCase *tc = tcase_create("file");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_checkpoint_then_commit);
    tcase_add_test(tc, test_parts_roll_by_size);
    tcase_add_test(tc, test_commit_is_idempotent);
    tcase_add_test(tc, test_missing_file_is_data_loss);
    tcase_add_test(tc, test_foreign_final_file_is_not_replaced);
    tcase_add_test(tc, test_lingering_cleanup_rules);
    tcase_add_test(tc, test_owner_epoch_cleanup_rules);
    tcase_add_test(tc, test_no_owner_cleans_owned_files);
    tcase_add_test(tc, test_restore_commits_pending_and_drops_current);
    tcase_add_test(tc, test_at_least_once_visible_at_checkpoint);
    tcase_add_test(tc, test_encoder);
    tcase_add_test(tc, test_configuration_errors);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
