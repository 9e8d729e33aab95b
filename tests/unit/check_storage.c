/*
 * Checkpoint storage, the promises every backend keeps (tpc_storage.h), checked through the
 * interface alone, on the local folder and on S3 (a moto server on 127.0.0.1 that
 * tests/services/s3.sh starts; without one the S3 cases say so and pass nothing off as run): a
 * second create of a name is refused and leaves the first object as it was; a compare-and-set
 * against a stale version is refused and writes nothing, and of several processes that race with
 * the same version exactly one wins; listing shows the objects of a prefix and nothing being
 * written; kill -9 during a write leaves no partial object. Then the completion record's owner
 * epoch: a take-over raises it by compare-and-set, an older owner can no longer write the record,
 * and without owners the record keeps its version 2 layout.
 */
#include "runtime_internal.h"
#include "tpc_test_check.h"
#include "tpc_s3.h"
#include "tpc_test_ops.h"
#include "tpc_test_s3.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static tpc_test_s3_t local_s3; /* the local S3 server: endpoint NULL, none */
#define S3_BUCKET "twopc-test"

typedef struct {
    tpc__store_folder_t folder;
    tpc_storage_t *s;
    char *dir;
} fixture_t;

static bool use_s3; /* the cases of the running test go to S3 */

static void open_store(fixture_t *f, const char *tag)
{
    f->dir = NULL;
    if (!use_s3) {
        f->dir = tpc_test_tmpdir(tag);
        tpc__store_folder_init(&f->folder, f->dir);
        f->s = &f->folder.base;
        return;
    }
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s-%ld-%lld/", tag, (long)getpid(), (long long)tpc_clock_us());
    tpc_s3_config_t c = {.endpoint = local_s3.endpoint,
                         .bucket = S3_BUCKET,
                         .prefix = prefix,
                         .region = "us-east-1",
                         .access_key_id = "twopc-test",
                         .secret_access_key = "twopc-test-secret",
                         .timeout_ms = 60000};
    TPC_TEST_OK(tpc_s3_storage_new(&c, &f->s));
}

static void close_store(fixture_t *f)
{
    if (f->dir) {
        tpc_test_rmdir(f->dir);
        free(f->dir);
    } else {
        tpc_storage_destroy(f->s);
    }
}

/* The object's contents as a string ("" when missing), and its version (free both). */
static char *get_str(tpc_storage_t *s, const char *name, char **version)
{
    uint8_t *p = NULL;
    size_t n = 0;
    bool found;
    TPC_TEST_OK(s->ops->get(s, name, &p, &n, version, &found));
    char *str = tpc__xmalloc(n + 1);
    if (found)
        memcpy(str, p, n);
    str[found ? n : 0] = 0;
    free(p);
    return str;
}

static bool put_new(tpc_storage_t *s, const char *name, const char *text)
{
    bool exists = true;
    TPC_TEST_OK(s->ops->put_new(s, name, (const uint8_t *)text, strlen(text), &exists));
    return !exists;
}

/* compare-and-set; true when it was written */
static bool swap(tpc_storage_t *s, const char *name, const char *expected, const char *text,
                 char **version)
{
    bool stale = true;
    TPC_TEST_OK(
        s->ops->swap(s, name, expected, (const uint8_t *)text, strlen(text), &stale, version));
    return !stale;
}

static void case_create_only(void)
{
    fixture_t f;
    open_store(&f, "store-create");
    ck_assert_msg(put_new(f.s, "chk-1", "first"), "a first create must succeed");
    ck_assert_msg(!put_new(f.s, "chk-1", "second"), "a second create of chk-1 was not refused");
    char *v = NULL, *got = get_str(f.s, "chk-1", &v);
    ck_assert_str_eq(got, "first");
    ck_assert_ptr_nonnull(v);
    free(got);
    free(v);
    got = get_str(f.s, "chk-2", &v);
    ck_assert_msg(got[0] == 0 && v == NULL, "a missing object must read as not found");
    free(got);
    close_store(&f);
}

static void case_compare_and_set(void)
{
    fixture_t f;
    open_store(&f, "store-cas");
    char *v1 = NULL, *v2 = NULL, *v3 = NULL, *now = NULL;
    ck_assert(swap(f.s, "completed", TPC_STORAGE_ABSENT, "one", &v1));
    ck_assert_ptr_nonnull(v1);
    ck_assert_msg(!swap(f.s, "completed", TPC_STORAGE_ABSENT, "again", NULL),
                  "create-if-absent of an existing object was not refused");
    ck_assert(swap(f.s, "completed", v1, "two", &v2));
    ck_assert_str_ne(v1, v2);
    ck_assert_msg(!swap(f.s, "completed", v1, "stale", NULL),
                  "a compare-and-set against a stale version was not refused");
    char *got = get_str(f.s, "completed", &now);
    ck_assert_str_eq(got, "two");
    ck_assert_str_eq(now, v2);
    free(got);
    free(now);
    ck_assert(swap(f.s, "completed", TPC_STORAGE_ANY, "three", &v3));
    ck_assert_msg(!swap(f.s, "completed", v2, "stale", NULL), "the version must change");
    TPC_TEST_OK(f.s->ops->remove(f.s, "completed"));
    ck_assert_msg(!swap(f.s, "completed", v3, "gone", NULL),
                  "a compare-and-set of a removed object must be refused");
    free(v1);
    free(v2);
    free(v3);
    close_store(&f);
}

/* Several processes race to replace the same version: exactly one may win, every round. */
static void case_compare_and_set_race(void)
{
    fixture_t f;
    open_store(&f, "store-race");
    char *v = NULL;
    ck_assert(swap(f.s, "completed", TPC_STORAGE_ABSENT, "round 0", &v));
    enum { RACERS = 6, ROUNDS = 15 };
    for (int round = 1; round <= ROUNDS; round++) {
        pid_t pids[RACERS];
        for (int i = 0; i < RACERS; i++) {
            pids[i] = fork();
            ck_assert_int_ge(pids[i], 0);
            if (pids[i] == 0) {
                char text[64];
                snprintf(text, sizeof text, "round %d racer %d", round, i);
                bool stale = true;
                tpc_error_t *err = f.s->ops->swap(f.s, "completed", v, (const uint8_t *)text,
                                                  strlen(text), &stale, NULL);
                _exit(err ? 2 : stale ? 1 : 0);
            }
        }
        int won = 0;
        for (int i = 0; i < RACERS; i++) {
            int st;
            ck_assert_int_eq(waitpid(pids[i], &st, 0), pids[i]);
            ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) < 2, "a racer failed with an error");
            won += WEXITSTATUS(st) == 0;
        }
        ck_assert_msg(won == 1, "round %d: %d processes replaced the same version", round, won);
        free(v);
        free(get_str(f.s, "completed", &v));
    }
    free(v);
    close_store(&f);
}

static bool has(char **names, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return true;
    return false;
}

static void case_list_and_remove(void)
{
    fixture_t f;
    open_store(&f, "store-list");
    ck_assert(put_new(f.s, "chk-1", "a"));
    ck_assert(put_new(f.s, "chk-2", "b"));
    ck_assert(put_new(f.s, "savepoint-3", "c"));
    ck_assert(swap(f.s, "completed", TPC_STORAGE_ABSENT, "r", NULL));
    char **names;
    size_t n;
    TPC_TEST_OK(f.s->ops->list(f.s, "chk-", &names, &n));
    ck_assert_uint_eq(n, 2);
    ck_assert(has(names, n, "chk-1") && has(names, n, "chk-2"));
    tpc_storage_names_free(names, n);
    TPC_TEST_OK(f.s->ops->list(f.s, "", &names, &n));
    ck_assert_msg(n == 4, "%zu objects listed, not 4 (lock or temporary files listed?)", n);
    tpc_storage_names_free(names, n);
    TPC_TEST_OK(f.s->ops->remove(f.s, "chk-1"));
    TPC_TEST_OK(f.s->ops->remove(f.s, "chk-1")); /* gone already: no error */
    TPC_TEST_OK(f.s->ops->list(f.s, "chk-", &names, &n));
    ck_assert_uint_eq(n, 1);
    ck_assert(has(names, n, "chk-2"));
    tpc_storage_names_free(names, n);
    close_store(&f);
}

/* kill -9 of a process while it writes a large object: afterwards the object is absent or whole,
 * never partial, and nothing of the write is listed. */
static void case_kill_during_write(void)
{
    fixture_t f;
    open_store(&f, "store-kill");
    size_t big = 48u << 20;
    uint8_t *data = tpc__xmalloc(big);
    for (size_t i = 0; i < big; i++)
        data[i] = (uint8_t)(i * 7 + 3);
    int partial_kills = 0;
    for (int round = 0; round < 3; round++) {
        char name[32];
        snprintf(name, sizeof name, "chk-%d", round + 1);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            bool exists;
            tpc_error_t *err = f.s->ops->put_new(f.s, name, data, big, &exists);
            _exit(err ? 2 : 0);
        }
        /* kill it once its write is under way: after 0, 20 or 60 ms */
        usleep((useconds_t)(round * round * 20000 + 1000));
        kill(pid, SIGKILL);
        int st;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        partial_kills += WIFSIGNALED(st);
        uint8_t *p = NULL;
        size_t n = 0;
        bool found;
        TPC_TEST_OK(f.s->ops->get(f.s, name, &p, &n, NULL, &found));
        ck_assert_msg(!found || (n == big && memcmp(p, data, big) == 0),
                      "%s is visible but not whole (%zu of %zu bytes) after kill -9", name, n, big);
        free(p);
        char **names;
        size_t nn;
        TPC_TEST_OK(f.s->ops->list(f.s, "", &names, &nn));
        ck_assert_msg(nn <= (size_t)round + 1, "a write in flight is listed");
        tpc_storage_names_free(names, nn);
    }
    ck_assert_msg(partial_kills > 0, "no write was killed while under way: the test saw nothing");
    free(data);
    close_store(&f);
}

/* Each case on the folder, and on S3 when the local server runs. */
#define ON_BOTH(c)                                                                                 \
    START_TEST(folder_##c)                                                                         \
    {                                                                                              \
        use_s3 = false;                                                                            \
        case_##c();                                                                                \
    }                                                                                              \
    END_TEST                                                                                       \
    START_TEST(s3_##c)                                                                             \
    {                                                                                              \
        if (!local_s3.endpoint) {                                                                  \
            fprintf(stderr, "check_storage: S3 case %s NOT RUN: no local S3 server (%s)\n", #c,    \
                    local_s3.missing);                                                             \
            return;                                                                                \
        }                                                                                          \
        use_s3 = true;                                                                             \
        case_##c();                                                                                \
    }                                                                                              \
    END_TEST

ON_BOTH(create_only)
ON_BOTH(compare_and_set)
ON_BOTH(compare_and_set_race)
ON_BOTH(list_and_remove)
ON_BOTH(kill_during_write)

/* The errors an operator meets, said plainly and without the secret: a bucket that does not
 * exist, a store that does not answer, no credentials. */
START_TEST(s3_errors)
{
    if (!local_s3.endpoint) {
        fprintf(stderr, "check_storage: S3 case errors NOT RUN: no local S3 server (%s)\n",
                local_s3.missing);
        return;
    }
    const char *secret = "do-not-show-this-secret";
    tpc_s3_config_t c = {.endpoint = local_s3.endpoint,
                         .bucket = "no-such-bucket-here",
                         .region = "us-east-1",
                         .access_key_id = "twopc-test",
                         .secret_access_key = secret,
                         .timeout_ms = 2000,
                         .attempts = 2};
    tpc_storage_t *st;
    TPC_TEST_OK(tpc_s3_storage_new(&c, &st));
    bool exists;
    tpc_error_t *err = st->ops->put_new(st, "chk-1", (const uint8_t *)"x", 1, &exists);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    ck_assert_msg(strstr(tpc_error_message(err), "\"no-such-bucket-here\" does not exist"), "%s",
                  tpc_error_message(err));
    ck_assert(!strstr(tpc_error_message(err), secret));
    tpc_error_destroy(err);
    tpc_storage_destroy(st);

    /* a port nobody listens on: two attempts, then a retriable connect error */
    c.bucket = S3_BUCKET;
    c.endpoint = "http://127.0.0.1:1";
    TPC_TEST_OK(tpc_s3_storage_new(&c, &st));
    uint8_t *p;
    size_t n;
    bool found;
    err = st->ops->get(st, "completed", &p, &n, NULL, &found);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONNECT);
    ck_assert(tpc_error_is_retriable(err));
    ck_assert_msg(strstr(tpc_error_message(err), "2 attempts"), "%s", tpc_error_message(err));
    ck_assert(!strstr(tpc_error_message(err), secret));
    tpc_error_destroy(err);
    tpc_storage_destroy(st);

    tpc_s3_config_t none = {.bucket = S3_BUCKET};
    if (!getenv("AWS_ACCESS_KEY_ID")) {
        err = tpc_s3_storage_new(&none, &st);
        ck_assert_ptr_nonnull(err);
        ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
        ck_assert_msg(strstr(tpc_error_hint_text(err), "AWS_ACCESS_KEY_ID"), "%s",
                      tpc_error_hint_text(err));
        tpc_error_destroy(err);
    }
}
END_TEST

START_TEST(test_record_owner_epoch)
{
    char *dir = tpc_test_tmpdir("record-epoch");
    tpc__record_t a, b, rec;
    bool found;
    TPC_TEST_OK(tpc__record_claim(dir, "j", 1, &a));
    ck_assert_uint_eq(a.owner_epoch, 1);
    ck_assert_ptr_nonnull(a.version);
    TPC_TEST_OK(tpc__record_read(dir, &rec, &found));
    ck_assert(found);
    ck_assert_uint_eq(rec.owner_epoch, 1);
    ck_assert_str_eq(rec.job_name, "j");
    tpc__record_free(&rec);

    /* the owner of epoch 1 completes checkpoint 4 against the version it holds */
    a.newest = 4;
    char *v = NULL;
    TPC_TEST_OK(tpc__record_swap(dir, &a, a.version, &v));
    free(a.version);
    a.version = v;

    /* an equal or older epoch is refused; a newer one takes over from what is there */
    tpc_error_t *err = tpc__record_claim(dir, "j", 1, &b);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_FENCED);
    tpc_error_destroy(err);
    TPC_TEST_OK(tpc__record_claim(dir, "j", 2, &b));
    ck_assert_uint_eq(b.owner_epoch, 2);
    ck_assert_uint_eq(b.newest, 4);

    /* the zombie of epoch 1 completes checkpoint 5: refused, the record is untouched */
    a.newest = 5;
    err = tpc__record_swap(dir, &a, a.version, NULL);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_FENCED);
    ck_assert_msg(strstr(tpc_error_message(err), "another owner"), "%s", tpc_error_message(err));
    tpc_error_destroy(err);
    TPC_TEST_OK(tpc__record_read(dir, &rec, &found));
    ck_assert_uint_eq(rec.owner_epoch, 2);
    ck_assert_uint_eq(rec.newest, 4);
    tpc__record_free(&rec);
    tpc__record_free(&a);
    tpc__record_free(&b);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* Without owners the record is written as before: version 2, no epoch, readable by older
 * versions of the library. */
START_TEST(test_record_without_owner_keeps_layout)
{
    char *dir = tpc_test_tmpdir("record-v2");
    tpc__record_t rec = {.job_name = "j", .newest = 7, .first = 3};
    TPC_TEST_OK(tpc__record_write(dir, &rec));
    char *path = tpc__store_folder_path(dir, "completed");
    uint8_t *p;
    size_t n;
    int errnum;
    TPC_TEST_OK(tpc__file_read(path, &p, &n, &errnum));
    ck_assert_uint_eq(n, 8 + 4 + 4 + 1 + 8 + 8 + 4 + 32);
    ck_assert_int_eq(memcmp(p, "TPCDONE1\2\0\0\0", 12), 0);
    free(p);
    free(path);
    tpc__record_t back;
    bool found;
    TPC_TEST_OK(tpc__record_read(dir, &back, &found));
    ck_assert(found && back.newest == 7 && back.first == 3 && back.owner_epoch == 0);
    tpc__record_free(&back);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* A store that lists what a folder holds but then stops answering: no read (unless @reads) and
 * no removal gets an answer. */
typedef struct {
    tpc_storage_t base;
    tpc__store_folder_t *folder;
    bool reads;
    int gets, removes;
} halting_t;

static tpc_error_t *halting_get(tpc_storage_t *st, const char *name, uint8_t **p, size_t *n,
                                char **version, bool *found)
{
    halting_t *h = (halting_t *)st;
    h->gets++;
    if (h->reads)
        return h->folder->base.ops->get(&h->folder->base, name, p, n, version, found);
    return tpc_error_new(TPC_ERR_CONNECT, TPC_ERROR_RETRIABLE, "the store did not answer");
}

static tpc_error_t *halting_list(tpc_storage_t *st, const char *prefix, char ***names, size_t *n)
{
    halting_t *h = (halting_t *)st;
    return h->folder->base.ops->list(&h->folder->base, prefix, names, n);
}

static tpc_error_t *halting_remove(tpc_storage_t *st, const char *name)
{
    (void)name;
    ((halting_t *)st)->removes++;
    return tpc_error_new(TPC_ERR_CONNECT, TPC_ERROR_RETRIABLE, "the store did not answer");
}

static const tpc_storage_ops_t halting_ops = {
    .kind = "halting", .get = halting_get, .list = halting_list, .remove = halting_remove};

/* Retention after a completed checkpoint asks a store that stopped answering no more than it
 * must: the coordinator's next checkpoint, or the stop after a savepoint, waits for it, and each
 * request waits out its timeout and attempts. The first failed read keeps everything older, the
 * first failed removal leaves the rest for the next time. */
START_TEST(test_retention_stops_at_first_failure)
{
    char *dir = tpc_test_tmpdir("retain-halting");
    tpc__store_folder_t folder;
    tpc__store_folder_init(&folder, dir);
    for (uint64_t id = 1; id <= 6; id++) {
        tpc__checkpoint_t c = {.id = id, .job_name = "j"};
        TPC_TEST_OK(tpc__checkpoint_write_at(&folder.base, &c, NULL, NULL));
    }
    halting_t h = {.base = {.ops = &halting_ops}, .folder = &folder};
    tpc__checkpoint_retain_at(&h.base, 2);
    ck_assert_int_eq(h.gets, 1);
    ck_assert_int_eq(h.removes, 0);
    h = (halting_t){.base = {.ops = &halting_ops}, .folder = &folder, .reads = true};
    tpc__checkpoint_retain_at(&h.base, 2);
    ck_assert_int_eq(h.gets, 2); /* the two it keeps, for their links */
    ck_assert_int_eq(h.removes, 1);
    tpc__checkpoint_file_t *files;
    size_t n;
    TPC_TEST_OK(tpc__checkpoint_list(dir, &files, &n));
    ck_assert_uint_eq(n, 6);
    tpc__checkpoint_files_free(files, n);
    /* the store answers again: the next retention removes what is left */
    tpc__checkpoint_retain_at(&folder.base, 2);
    TPC_TEST_OK(tpc__checkpoint_list(dir, &files, &n));
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(files[0].id, 6);
    ck_assert_uint_eq(files[1].id, 5);
    tpc__checkpoint_files_free(files, n);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

int main(void)
{
    tpc_test_s3_start(&local_s3, "check_storage", S3_BUCKET);
    Suite *s = suite_create("storage");
    TCase *tc = tcase_create("folder");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, folder_create_only);
    tcase_add_test(tc, folder_compare_and_set);
    tcase_add_test(tc, folder_compare_and_set_race);
    tcase_add_test(tc, folder_list_and_remove);
    tcase_add_test(tc, folder_kill_during_write);
    tcase_add_test(tc, test_record_owner_epoch);
    tcase_add_test(tc, test_record_without_owner_keeps_layout);
    tcase_add_test(tc, test_retention_stops_at_first_failure);
    suite_add_tcase(s, tc);
    TCase *t3 = tcase_create("s3");
    tcase_set_timeout(t3, 300);
    tcase_add_test(t3, s3_create_only);
    tcase_add_test(t3, s3_compare_and_set);
    tcase_add_test(t3, s3_compare_and_set_race);
    tcase_add_test(t3, s3_list_and_remove);
    tcase_add_test(t3, s3_kill_during_write);
    tcase_add_test(t3, s3_errors);
    suite_add_tcase(s, t3);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    tpc_test_s3_stop(&local_s3, "check_storage");
    return failed ? 1 : 0;
}
