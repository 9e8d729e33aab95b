/*
 * The operator's paths, against the real servers: one job writes the same records exactly-once
 * into a Kafka topic, a PostgreSQL table and a folder of files (sequence source -> three sinks of
 * parallelism P), in child processes that are killed with kill -9 and started again:
 *
 * - Parallelism changes (2 -> 3, 3 -> 1, 4 -> 2): a run at the old parallelism is killed right
 *   after checkpoint 3 completed and before its commits, so checkpoint 3 lists pending
 *   transactions of every old subtask; a run at the new parallelism is killed either before its
 *   first checkpoint (long interval: it recovers, writes into open transactions and dies) or
 *   right after its first checkpoint completed; a last run at the new parallelism ends the job.
 *   Every record must then be in each output exactly once, read back as users read: Kafka with
 *   read_committed (a transaction left open on an id of a subtask that no longer runs would hold
 *   the reader back), SQL, and the final files; and no prepared transaction may be left.
 * - Starting over: with restore.mode=fresh the job starts again from record 0 next to what an
 *   earlier run committed, and every sink takes the new run: twice the records, each exactly
 *   twice. With a new checkpoint.dir instead, the file sink refuses at open, naming the file and
 *   saying how to start over.
 * - Checkpoint files removed while the job runs, then a kill -9: the restart refuses (the
 *   completion record names a checkpoint that is gone) instead of starting from zero.
 * - The newest checkpoint damaged after its commits: refused; with restore.fallback=at-least-once
 *   the job restores the one before and every record is in every output at least once.
 *
 * The child is this test binary run again with "--child" (see child_main()).
 */
#include "check_kafka_child.h"
#include "runtime_internal.h"
#include "tpc_file.h"
#include "tpc_pg.h"
#include "tpc_test_file.h"
#include "tpc_test_pg.h"

#include <dirent.h>

#define RECORDS 3000

/* ---- the child ---------------------------------------------------------------------------- */

typedef struct {
    const char *bootstrap, *topic, *kprefix, *table, *gprefix, *marker, *files, *ckpt;
    int parallelism;
    const char *interval, *restore_mode;
    bool kill_first;  /* kill -9 itself when the first checkpoint of this run completes */
    uint64_t kill_at; /* ... or when checkpoint kill_at completes */
} child_args_t;

static void kill_on_checkpoint(void *opaque, uint64_t id, bool completed, uint64_t us,
                               const char *why)
{
    (void)us, (void)why;
    const child_args_t *a = opaque;
    if (completed && (a->kill_first || id == a->kill_at))
        kill(getpid(), SIGKILL);
}

static tpc_error_t *set_all(tpc_txn_sink_t *sink, const char *const (*kv)[2], size_t n)
{
    tpc_error_t *err = NULL;
    for (size_t i = 0; i < n && !err; i++)
        err = tpc_txn_sink_set(sink, kv[i][0], kv[i][1]);
    return err;
}

static int child_main(int argc, char **argv)
{
    alarm(120);
    if (argc < 14)
        return 2;
    child_args_t a = {.bootstrap = argv[2],
                      .topic = argv[3],
                      .kprefix = argv[4],
                      .table = argv[5],
                      .gprefix = argv[6],
                      .marker = argv[7],
                      .files = argv[8],
                      .ckpt = argv[9],
                      .parallelism = atoi(argv[10]),
                      .interval = argv[11],
                      .restore_mode = argv[12],
                      .kill_first = strcmp(argv[13], "first") == 0,
                      .kill_at = strtoull(argv[13], NULL, 10)};
    tpc_test_seq_conf_t src = {.count_default = RECORDS, .per_poll = 4, .sleep_us = 4000};
    tpc_job_t *job = tpc_job_new("rescale");
    tpc_txn_sink_t *kafka = NULL, *pg = NULL, *file = NULL;
    tpc_job_set_logger(job, kc_log_line, NULL, TPC_LOG_INFO);
    tpc_error_t *err = tpc_job_set(job, "checkpoint.dir", a.ckpt);
    if (!err)
        err = tpc_job_set(job, "checkpoint.interval.ms", a.interval);
    if (!err)
        err = tpc_job_set(job, "restore.mode", a.restore_mode);
    if (!err)
        err = tpc_job_set(job, "restart.delay.ms", "100");
    if (!err && argc > 14)
        err = tpc_job_set(job, "restore.fallback", argv[14]);
    if (!err)
        err = tpc_kafka_sink_new(a.bootstrap, a.topic, &kafka);
    if (!err) {
        const char *const kv[][2] = {{"transactional.id.prefix", a.kprefix},
                                     {"kafka.linger.ms", "2"}};
        err = set_all(kafka, kv, 2);
    }
    if (!err)
        err = tpc_pg_sink_new(&pg);
    if (!err) {
        const char *const kv[][2] = {{"pg.conninfo", tpc_test_env("TWOPC_TEST_PG_CONNINFO")},
                                     {"pg.table", a.table},
                                     {"pg.gid-prefix", a.gprefix},
                                     {"pg.marker-table", a.marker}};
        err = set_all(pg, kv, 4);
    }
    if (!err)
        err = tpc_file_sink_new(a.files, &file);
    if (a.kill_first || a.kill_at)
        tpc_job_set_checkpoint_callback(job, kill_on_checkpoint, &a);
    int s, k, p, f;
    if (!err)
        err = tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s);
    if (!err)
        err = tpc_txn_sink_add_to_job(kafka, job, "kafka", a.parallelism, &k);
    if (!err)
        err = tpc_txn_sink_add_to_job(pg, job, "rows", a.parallelism, &p);
    if (!err)
        err = tpc_txn_sink_add_to_job(file, job, "files", a.parallelism, &f);
    if (!err)
        err = tpc_job_connect(job, s, k, TPC_EDGE_REBALANCE);
    if (!err)
        err = tpc_job_connect(job, s, p, TPC_EDGE_REBALANCE);
    if (!err)
        err = tpc_job_connect(job, s, f, TPC_EDGE_REBALANCE);
    tpc_job_result_t result = TPC_JOB_CANCELED;
    if (!err)
        err = tpc_job_run(job, &result);
    int rc = 0;
    if (err || result != TPC_JOB_FINISHED) {
        fprintf(stderr, "rescale child: %s: %s\n", err ? tpc_err_name(tpc_error_code(err)) : "",
                err ? tpc_error_message(err) : "did not finish");
        if (err && tpc_error_hint_text(err))
            fprintf(stderr, "rescale child hint: %s\n", tpc_error_hint_text(err));
        rc = err && (tpc_error_code(err) == TPC_ERR_CORRUPT ||
                     tpc_error_code(err) == TPC_ERR_NOT_FOUND ||
                     tpc_error_code(err) == TPC_ERR_CONFIG)
                 ? 3
                 : 1;
    }
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(kafka);
    tpc_txn_sink_destroy(pg);
    tpc_txn_sink_destroy(file);
    return rc;
}

/* ---- the parent --------------------------------------------------------------------------- */

typedef struct {
    kc_scenario_t kc; /* topic, transactional id prefix, checkpoint folder, log */
    char table[96], gprefix[96], marker[96];
    char *files;
    PGconn *pg;
} scenario_t;

static void scenario_init(scenario_t *sc, const char *tag)
{
    kc_scenario_init(&sc->kc, tag);
    tpc_test_unique_name(sc->table, sizeof sc->table, "rescale", '_');
    tpc_test_unique_name(sc->gprefix, sizeof sc->gprefix, "rescale", '-');
    tpc_test_unique_name(sc->marker, sizeof sc->marker, "rescale_markers", '_');
    sc->files = tpc_test_tmpdir("rescale-files");
    sc->pg = tpc_test_pg_connect();
    ck_assert_ptr_nonnull(sc->pg);
    ck_assert(tpc_test_pg_exec(sc->pg, "CREATE TABLE %s (k bytea, v bytea)", sc->table));
}

static void scenario_clean(scenario_t *sc)
{
    /* A refused run leaves the killed run's prepared transactions, which hold locks on the table.
     */
    tpc_test_pg_rollback_prefix(sc->pg, sc->gprefix);
    tpc_test_pg_exec(sc->pg, "DROP TABLE %s", sc->table);
    tpc_test_pg_exec(sc->pg, "DROP TABLE IF EXISTS %s", sc->marker);
    PQfinish(sc->pg);
    tpc_test_rmdir(sc->files);
    free(sc->files);
    kc_scenario_clean(&sc->kc);
}

/* Start a child at @parallelism; @kill is "first", a checkpoint id, or "0" for none. */
static pid_t spawn_with(const scenario_t *sc, const char *ckpt, int parallelism,
                        const char *interval, const char *restore_mode, const char *kill,
                        const char *fallback)
{
    char par[16];
    snprintf(par, sizeof par, "%d", parallelism);
    const char *argv[] = {sc->kc.self, "--child",   sc->kc.bootstrap, sc->kc.topic, sc->kc.prefix,
                          sc->table,   sc->gprefix, sc->marker,       sc->files,    ckpt,
                          par,         interval,    restore_mode,     kill,         fallback,
                          NULL};
    pid_t pid = tpc_test_spawn(argv, sc->kc.log, -1);
    ck_assert_int_gt(pid, 0);
    return pid;
}

/* Start a child at @parallelism; @kill is "first", a checkpoint id, or "0" for none. */
static pid_t spawn(const scenario_t *sc, const char *ckpt, int parallelism, const char *interval,
                   const char *restore_mode, const char *kill)
{
    return spawn_with(sc, ckpt, parallelism, interval, restore_mode, kill, NULL);
}

/* Wait for the child; @want: "killed", "ok" or "refused" (exit code 3). */
static void expect_end(const scenario_t *sc, pid_t pid, const char *want, const char *what)
{
    int status = 0;
    bool ended = tpc_test_wait(pid, 90000, &status);
    if (!ended)
        tpc_test_kill(pid);
    bool ok = ended && (strcmp(want, "killed") == 0 ? WIFSIGNALED(status)
                        : strcmp(want, "ok") == 0   ? WIFEXITED(status) && !WEXITSTATUS(status)
                                                  : WIFEXITED(status) && WEXITSTATUS(status) == 3);
    if (!ok) {
        tpc_test_dump_log(sc->kc.log);
        ck_abort_msg("%s: the child %s, expected %s", what,
                     !ended                ? "did not end"
                     : WIFSIGNALED(status) ? "was killed"
                                           : (WEXITSTATUS(status) == 3 ? "refused" : "failed"),
                     want);
    }
}

/* Each output holds every record @times times, and nothing else; nothing is left prepared or in
 * progress. */
static void expect_outputs(const scenario_t *sc, int times, const char *what)
{
    kc_tally_t t = {.records = RECORDS, .seen = calloc(RECORDS + 1, 1)};
    long total = kt_read_topic(sc->kc.bootstrap, sc->kc.topic, "read_committed", kc_tally, &t);
    long off = 0;
    for (uint64_t i = 0; i < RECORDS; i++)
        off += t.seen[i] != times;
    free(t.seen);
    if (off || t.foreign || total != (long)RECORDS * times)
        tpc_test_dump_log(sc->kc.log);
    ck_assert_msg(!off && !t.foreign && total == (long)RECORDS * times,
                  "%s: kafka (read_committed): %ld records, %ld of %d not seen %d times", what,
                  total, off, RECORDS, times);

    long long rows = tpc_test_pg_long(sc->pg, "SELECT count(*) FROM %s", sc->table);
    long long distinct = tpc_test_pg_long(sc->pg, "SELECT count(DISTINCT k) FROM %s", sc->table);
    long long exact = tpc_test_pg_long(
        sc->pg, "SELECT count(*) FROM (SELECT k FROM %s GROUP BY k HAVING count(*) = %d) x",
        sc->table, times);
    ck_assert_msg(rows == (long long)RECORDS * times && distinct == RECORDS && exact == RECORDS,
                  "%s: postgresql: %lld rows, %lld distinct, %lld keys %d times", what, rows,
                  distinct, exact, times);
    ck_assert_int_eq(tpc_test_pg_prepared(sc->pg, sc->gprefix), 0);

    tpc_test_file_out_t out;
    char why[256];
    ck_assert_msg(tpc_test_file_read(sc->files, "part", &out, why, sizeof why), "%s", why);
    unsigned char *seen = calloc(RECORDS, 1);
    long bad = 0;
    for (size_t i = 0; i + 9 <= out.len; i += 9) {
        int sub;
        uint64_t seq;
        if (out.data[i + 8] != '\n' || !tpc_test_seq_decode(out.data + i, 8, &sub, &seq) ||
            seq >= RECORDS)
            bad++;
        else
            seen[seq]++;
    }
    long wrong = 0;
    for (int i = 0; i < RECORDS; i++)
        wrong += seen[i] != times;
    free(seen);
    ck_assert_msg(out.len % 9 == 0 && !bad && !wrong && out.inprogress == 0,
                  "%s: files: %zu bytes, %ld bad lines, %ld of %d records not %d times, %d in "
                  "progress",
                  what, out.len, bad, wrong, RECORDS, times, out.inprogress);
    tpc_test_file_out_free(&out);
    printf("%s: kafka, postgresql and files hold every record %d time%s\n", what, times,
           times > 1 ? "s" : "");
    fflush(stdout);
}

/* Parallelism @from, killed after checkpoint 3 completed and before its commits; then @to, killed
 * before (@before) or right after its first checkpoint; then @to to the end. */
static void rescale(int from, int to, bool before)
{
    scenario_t sc;
    scenario_init(&sc, "rescale");
    char what[128];
    snprintf(what, sizeof what, "parallelism %d -> %d, killed %s the first new checkpoint", from,
             to, before ? "before" : "after");
    expect_end(&sc, spawn(&sc, sc.kc.ckpt, from, "100", "auto", "3"), "killed", what);
    if (before) {
        pid_t pid = spawn(&sc, sc.kc.ckpt, to, "15000", "auto", "0");
        /* Recovered and writing into open transactions of every new subtask. */
        for (int i = 0; i < 100 && !kc_log_has(&sc.kc, "restored"); i++)
            usleep(50 * 1000);
        usleep(800 * 1000);
        int status;
        bool ended = tpc_test_wait(pid, 0, &status);
        if (ended)
            tpc_test_dump_log(sc.kc.log);
        ck_assert_msg(!ended, "%s: the run at %d ended by itself", what, to);
        tpc_test_kill(pid);
    } else {
        expect_end(&sc, spawn(&sc, sc.kc.ckpt, to, "100", "auto", "first"), "killed", what);
    }
    expect_end(&sc, spawn(&sc, sc.kc.ckpt, to, "100", "auto", "0"), "ok", what);
    expect_outputs(&sc, 1, what);
    scenario_clean(&sc);
}

START_TEST(test_rescale_2_to_3_before)
{
    rescale(2, 3, true);
}
END_TEST

START_TEST(test_rescale_2_to_3_after)
{
    rescale(2, 3, false);
}
END_TEST

START_TEST(test_rescale_3_to_1_before)
{
    rescale(3, 1, true);
}
END_TEST

START_TEST(test_rescale_3_to_1_after)
{
    rescale(3, 1, false);
}
END_TEST

START_TEST(test_rescale_4_to_2_before)
{
    rescale(4, 2, true);
}
END_TEST

START_TEST(test_rescale_4_to_2_after)
{
    rescale(4, 2, false);
}
END_TEST

/* restore.mode=fresh next to what an earlier run committed: every sink takes the new run, which
 * writes everything once more. Killed before its first checkpoint, the next run (auto) starts over
 * again rather than go back to the earlier run's checkpoints; killed after it, the next run resumes
 * from that checkpoint. */
START_TEST(test_start_over_with_restore_mode_fresh)
{
    scenario_t sc;
    scenario_init(&sc, "startover");
    expect_end(&sc, spawn(&sc, sc.kc.ckpt, 2, "100", "auto", "0"), "ok", "first run");
    expect_outputs(&sc, 1, "first run");
    /* Killed before its first checkpoint: the next run (auto) must not go back to the earlier
     * run's checkpoints, whose transactions the start over has aborted; it starts over again. */
    pid_t pid = spawn(&sc, sc.kc.ckpt, 2, "15000", "fresh", "0");
    for (int i = 0; i < 100 && !kc_log_has(&sc.kc, "starts over"); i++)
        usleep(50 * 1000);
    usleep(500 * 1000);
    tpc_test_kill(pid);
    expect_end(&sc, spawn(&sc, sc.kc.ckpt, 2, "100", "auto", "first"), "killed", "started over");
    expect_end(&sc, spawn(&sc, sc.kc.ckpt, 2, "100", "auto", "0"), "ok", "started over");
    expect_outputs(&sc, 2, "started over with restore.mode=fresh, killed, resumed");
    scenario_clean(&sc);
}
END_TEST

/* A new, empty checkpoint.dir is a start over too: the PostgreSQL and Kafka sinks could take it,
 * but the file sink's names would collide with the earlier run's files, so the job refuses at
 * once (no restart loop), naming the file and the ways to start over. */
START_TEST(test_start_over_with_a_new_checkpoint_dir)
{
    scenario_t sc;
    scenario_init(&sc, "newdir");
    expect_end(&sc, spawn(&sc, sc.kc.ckpt, 2, "100", "auto", "0"), "ok", "first run");
    char *other = tpc_test_tmpdir("newdir-ckpt");
    expect_end(&sc, spawn(&sc, other, 2, "100", "auto", "0"), "refused", "new checkpoint.dir");
    ck_assert(kc_log_has(&sc.kc, "would collide"));
    ck_assert(kc_log_has(&sc.kc, "restore.mode=fresh"));
    expect_outputs(&sc, 1, "after the refused start over");
    tpc_test_rmdir(other);
    free(other);
    scenario_clean(&sc);
}
END_TEST

static int count_checkpoints(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        n += strncmp(e->d_name, "chk-", 4) == 0;
    if (d)
        closedir(d);
    return n;
}

static void remove_checkpoints(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    char path[4200];
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "chk-", 4) == 0) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    closedir(d);
}

/* Each output holds every record at least once and nothing else (restore.fallback=at-least-once),
 * and nothing is left prepared. */
static void expect_at_least_once(const scenario_t *sc, const char *what)
{
    kc_tally_t t = {.records = RECORDS, .seen = calloc(RECORDS + 1, 1)};
    long total = kt_read_topic(sc->kc.bootstrap, sc->kc.topic, "read_committed", kc_tally, &t);
    long missing = 0;
    for (uint64_t i = 0; i < RECORDS; i++)
        missing += t.seen[i] == 0;
    free(t.seen);
    ck_assert_msg(!missing && !t.foreign, "%s: kafka: %ld records, %ld missing, %ld foreign", what,
                  total, missing, t.foreign);
    long long distinct = tpc_test_pg_long(sc->pg, "SELECT count(DISTINCT k) FROM %s", sc->table);
    ck_assert_msg(distinct == RECORDS, "%s: postgresql: %lld distinct keys", what, distinct);
    ck_assert_int_eq(tpc_test_pg_prepared(sc->pg, sc->gprefix), 0);
    printf("%s: every record at least once (kafka %ld records for %d)\n", what, total, RECORDS);
    fflush(stdout);
}

/* The newest checkpoint damaged after its commits: refused, with what to do; with
 * restore.fallback=at-least-once the job restores the one before, says so loudly, and ends with
 * every record at least once in every sink (no endless failure on PostgreSQL's marker rows). */
START_TEST(test_damaged_newest_refused_then_fallback)
{
    scenario_t sc;
    scenario_init(&sc, "damaged");
    pid_t pid = spawn(&sc, sc.kc.ckpt, 2, "100", "auto", "0");
    for (int i = 0; i < 200 && count_checkpoints(sc.kc.ckpt) < 3; i++)
        usleep(20 * 1000);
    usleep(300 * 1000);
    tpc_test_kill(pid);
    /* The checkpoint the completion record names: the sinks may have committed it. A newer file,
     * written just before the kill and never announced, would rightly be restored in its place
     * (it is complete), so it is damaged too: then nothing at or above the record is readable. */
    tpc__record_t rec;
    bool found;
    ck_assert_ptr_null(tpc__record_read(sc.kc.ckpt, &rec, &found));
    ck_assert(found && rec.newest > 0);
    DIR *d = opendir(sc.kc.ckpt);
    ck_assert_ptr_nonnull(d);
    int damaged = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        unsigned long long id;
        char path[8400];
        if (sscanf(e->d_name, "chk-%llu", &id) != 1 || id < rec.newest)
            continue;
        snprintf(path, sizeof path, "%s/%s", sc.kc.ckpt, e->d_name);
        ck_assert_int_eq(truncate(path, 100), 0);
        damaged += id == rec.newest;
    }
    closedir(d);
    tpc__record_free(&rec);
    ck_assert_int_eq(damaged, 1);
    expect_end(&sc, spawn(&sc, sc.kc.ckpt, 2, "100", "auto", "0"), "refused", "damaged newest");
    ck_assert(kc_log_has(&sc.kc, "is damaged"));
    ck_assert(kc_log_has(&sc.kc, "restore.fallback"));
    expect_end(&sc, spawn_with(&sc, sc.kc.ckpt, 2, "100", "auto", "0", "at-least-once"), "ok",
               "fallback");
    ck_assert(kc_log_has(&sc.kc, "AT-LEAST-ONCE"));
    expect_at_least_once(&sc, "damaged newest, restore.fallback=at-least-once");
    scenario_clean(&sc);
}
END_TEST

/* Checkpoint files removed by hand while the job runs, then kill -9: the next run must not start
 * from zero next to what the sinks committed; it refuses, naming the missing checkpoint. */
START_TEST(test_checkpoints_removed_then_crash_is_refused)
{
    scenario_t sc;
    scenario_init(&sc, "removed");
    pid_t pid = spawn(&sc, sc.kc.ckpt, 2, "100", "auto", "0");
    for (int i = 0; i < 200 && count_checkpoints(sc.kc.ckpt) < 2; i++)
        usleep(20 * 1000);
    usleep(300 * 1000); /* more checkpoints complete and commit */
    tpc_test_kill(pid);
    remove_checkpoints(sc.kc.ckpt);
    expect_end(&sc, spawn(&sc, sc.kc.ckpt, 2, "100", "auto", "0"), "refused", "files removed");
    ck_assert(kc_log_has(&sc.kc, "is missing"));
    ck_assert(kc_log_has(&sc.kc, "restore.fallback"));
    scenario_clean(&sc);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--child") == 0)
        return child_main(argc, argv);
    Suite *s = suite_create("rescale");
    TCase *tc = tcase_create("operator");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_rescale_2_to_3_before);
    tcase_add_test(tc, test_rescale_2_to_3_after);
    tcase_add_test(tc, test_rescale_3_to_1_before);
    tcase_add_test(tc, test_rescale_3_to_1_after);
    tcase_add_test(tc, test_rescale_4_to_2_before);
    tcase_add_test(tc, test_rescale_4_to_2_after);
    tcase_add_test(tc, test_start_over_with_restore_mode_fresh);
    tcase_add_test(tc, test_start_over_with_a_new_checkpoint_dir);
    suite_add_tcase(s, tc);
    TCase *tr = tcase_create("removed");
    tcase_set_timeout(tr, 300);
    tcase_add_test(tr, test_checkpoints_removed_then_crash_is_refused);
    tcase_add_test(tr, test_damaged_newest_refused_then_fallback);
    suite_add_tcase(s, tr);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
