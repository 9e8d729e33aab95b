/*
 * `twopc pg transactions` and `twopc pg drop-staged` on the rows a PostgreSQL sink in write-ahead
 * mode (pg.commit=write-ahead) leaves in its write-ahead table when it is killed with kill -9,
 * against the real server.
 *
 * The job (this binary run again with "--child") writes a sequence into the sink, one subtask,
 * checkpoints every 100 ms, and kills itself in the sink's pre-commit of checkpoint 4, right after
 * the rows of that checkpoint were committed into the write-ahead table. The move of checkpoint 3
 * (its commit once it completed) is held back in the child until then, as it is when the job dies
 * before the notification of a completed checkpoint reached the sink: checkpoint 3, the one a
 * restart restores, lists its transaction as pending, and its rows wait in the write-ahead table;
 * checkpoint 4 never completed, so no checkpoint will ever move its rows.
 *
 * - `pg transactions` lists both with their checkpoint, parts, rows and age: checkpoint 3's as
 *   pending (a restart moves them), checkpoint 4's as lingering (a restart drops them).
 * - `pg drop-staged --gid` of the pending one is refused with the reason and drops nothing; while a
 *   job holds the folder's lease it is refused too; --dry-run drops nothing.
 * - `pg drop-staged` drops the lingering rows and keeps the pending ones, and a restart of the job
 *   then moves those and ends with every record in the table exactly once and nothing left in the
 *   write-ahead table.
 */
#include "tpc_pg.h"
#include "tpc_test_crash.h"
#include "tpc_test_env.h"
#include "tpc_test_ops.h"
#include "tpc_test_pg.h"

#include <check.h>
#include <libgen.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define RECORDS 2000
#define KILL_AT 4 /* the pre-commit of this checkpoint kills the job */

/* ---- the child: sequence -> write-ahead sink, kill -9 in the pre-commit of KILL_AT ---------- */

static const tpc_txn_connector_ops_t *real_ops;
static tpc_txn_connector_ops_t child_ops;
static uint64_t kill_at;
static void *held; /* the transaction of checkpoint kill_at - 1, whose move is held back */

static tpc_error_t *killing_pre_commit(void *conn, void *txn, uint64_t checkpoint_id)
{
    tpc_error_t *err = real_ops->pre_commit(conn, txn, checkpoint_id);
    if (!err && checkpoint_id == kill_at - 1)
        held = txn;
    if (!err && checkpoint_id == kill_at)
        kill(getpid(), SIGKILL);
    return err;
}

static tpc_error_t *holding_commit(void *conn, void *txn)
{
    return txn == held ? NULL : real_ops->commit(conn, txn);
}

/* BINARY --child TABLE GPREFIX MARKER STAGING CKPT KILL_AT (0: run to the end) */
static int child_main(int argc, char **argv)
{
    alarm(120);
    if (argc != 8)
        return 2;
    kill_at = strtoull(argv[7], NULL, 10);
    tpc_test_seq_conf_t src = {.count_default = RECORDS, .per_poll = 4, .sleep_us = 4000};
    tpc_job_t *job = tpc_job_new("twopc-pg-staged");
    tpc_txn_sink_t *conf = NULL, *sink = NULL;
    tpc_error_t *err = tpc_job_set(job, "checkpoint.dir", argv[6]);
    if (!err)
        err = tpc_job_set(job, "checkpoint.interval.ms", "100");
    if (!err)
        err = tpc_pg_sink_new(&conf);
    const char *const kv[][2] = {{"pg.conninfo", tpc_test_env("TWOPC_TEST_PG_CONNINFO")},
                                 {"pg.table", argv[2]},
                                 {"pg.gid-prefix", argv[3]},
                                 {"pg.marker-table", argv[4]},
                                 {"pg.write-ahead-table", argv[5]},
                                 {"pg.commit", "write-ahead"}};
    for (size_t i = 0; !err && i < sizeof kv / sizeof kv[0]; i++)
        err = tpc_txn_sink_set(conf, kv[i][0], kv[i][1]);
    if (!err) {
        /* conf keeps owning the configuration; the sink with the wrapped ops borrows it. */
        real_ops = tpc_txn_sink_connector_ops(conf);
        child_ops = *real_ops;
        if (kill_at) {
            child_ops.pre_commit = killing_pre_commit;
            child_ops.commit = holding_commit;
        }
        child_ops.configure = NULL;
        child_ops.release = NULL;
        err = tpc_txn_sink_new(&child_ops, tpc_txn_sink_connector_arg(conf), &sink);
    }
    int s, k;
    if (!err)
        err = tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s);
    if (!err)
        err = tpc_txn_sink_add_to_job(sink, job, "rows", 1, &k);
    if (!err)
        err = tpc_job_connect(job, s, k, TPC_EDGE_FORWARD);
    tpc_job_result_t result = TPC_JOB_CANCELED;
    if (!err)
        err = tpc_job_run(job, &result);
    int rc = err || result != TPC_JOB_FINISHED;
    if (rc)
        fprintf(stderr, "child: %s\n", err ? tpc_error_message(err) : "did not finish");
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(sink);
    tpc_txn_sink_destroy(conf);
    return rc;
}

/* ---- the parent --------------------------------------------------------------------------- */

static char twopc_bin[4096], self[4096];
static char table[96], gprefix[96], marker[96], staging[96], logfile[4200];
static char *ckpt;
static const char *conninfo;
static PGconn *pg;
static char out[65536];

static void setup(void)
{
    conninfo = tpc_test_env_require("TWOPC_TEST_PG_CONNINFO");
    ck_assert_ptr_nonnull(conninfo);
    pg = tpc_test_pg_connect();
    ck_assert_ptr_nonnull(pg);
    tpc_test_unique_name(table, sizeof table, "pgst", '_');
    tpc_test_unique_name(gprefix, sizeof gprefix, "pgst", '-');
    tpc_test_unique_name(marker, sizeof marker, "pgst_markers", '_');
    tpc_test_unique_name(staging, sizeof staging, "pgst_staging", '_');
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea, v bytea)", table));
    ckpt = tpc_test_tmpdir("pgst");
    snprintf(logfile, sizeof logfile, "%s.log", ckpt);
}

static void teardown(void)
{
    tpc_test_pg_exec(pg, "DROP TABLE IF EXISTS %s", table);
    tpc_test_pg_exec(pg, "DROP TABLE IF EXISTS %s", marker);
    tpc_test_pg_exec(pg, "DROP TABLE IF EXISTS %s", staging);
    PQfinish(pg);
    tpc_test_rmdir(ckpt);
    free(ckpt);
    unlink(logfile);
}

/* Run the job; @kill_at_ckpt 0 runs it to its end. */
static void run_child(int kill_at_ckpt)
{
    char kill_arg[16];
    snprintf(kill_arg, sizeof kill_arg, "%d", kill_at_ckpt);
    const char *argv[] = {self, "--child", table, gprefix, marker, staging, ckpt, kill_arg, NULL};
    pid_t pid = tpc_test_spawn(argv, logfile, -1);
    ck_assert_int_gt(pid, 0);
    int status = 0;
    bool ended = tpc_test_wait(pid, 90000, &status);
    if (!ended)
        tpc_test_kill(pid);
    bool ok = ended && (kill_at_ckpt ? WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL
                                     : WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (!ok)
        tpc_test_dump_log(logfile);
    ck_assert_msg(ok, "the job %s", kill_at_ckpt ? "was not killed in its pre-commit" : "failed");
}

/* Run `twopc ARGS` (a shell command line after the program); its stdout into out. @returns its
 * exit status, -1 when it did not exit. */
static int twopc(const char *fmt, ...) TPC_PRINTF(1, 2);
static int twopc(const char *fmt, ...)
{
    char args[8192], line[sizeof args + sizeof twopc_bin + 8];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(line, sizeof line, "'%s' %s", twopc_bin, args);
    FILE *p = popen(line, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int status = pclose(p);
    printf("$ twopc %s\n%s", args, out);
    fflush(stdout);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* A line of the write-ahead listing: GID STATE CLASS ACTION CKPT SUB PARTS ROWS AGE_S WRITTEN. */
typedef struct {
    char state[32], cls[32], action[32];
    unsigned long long ckpt;
    int sub;
    long long parts, rows, age;
} staged_line_t;

static bool find_staged(const char *gid, staged_line_t *st)
{
    for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        char g[200];
        if (sscanf(l, "%199s %31s %31s %31s %llu %d %lld %lld %lld", g, st->state, st->cls,
                   st->action, &st->ckpt, &st->sub, &st->parts, &st->rows, &st->age) == 9 &&
            strcmp(g, gid) == 0)
            return true;
    }
    return false;
}

static long long staged_rows(const char *gid)
{
    return tpc_test_pg_long(pg, "SELECT coalesce(sum(row_count), 0) FROM %s WHERE gid = '%s'",
                            staging, gid);
}

START_TEST(test_staged_rows_listed_and_dropped_by_the_restore_rule)
{
    run_child(KILL_AT);
    char pending[160], lingering[160];
    snprintf(pending, sizeof pending, "%s:0:1:%d", gprefix, KILL_AT - 1);
    snprintf(lingering, sizeof lingering, "%s:0:1:%d", gprefix, KILL_AT);
    ck_assert_int_eq(twopc("checkpoints %s --json", ckpt), 0);
    ck_assert_msg(strstr(out, "\"restore\":3,"), "checkpoint 3 is not the one to restore");
    long long pending_rows = staged_rows(pending), lingering_rows = staged_rows(lingering);
    ck_assert_msg(pending_rows > 0 && lingering_rows > 0,
                  "written ahead: %lld rows of checkpoint 3, %lld of checkpoint 4", pending_rows,
                  lingering_rows);

    /* The listing, judged by checkpoint 3. */
    ck_assert_int_eq(twopc("pg transactions --conninfo '%s' --prefix %s --marker-table %s "
                           "--write-ahead-table %s --checkpoint-dir %s --check",
                           conninfo, gprefix, marker, staging, ckpt),
                     3);
    staged_line_t st;
    ck_assert_msg(find_staged(pending, &st), "%s is not listed", pending);
    ck_assert_str_eq(st.state, "staged");
    ck_assert_str_eq(st.cls, "pending");
    ck_assert_str_eq(st.action, "move");
    ck_assert_int_eq(st.ckpt, KILL_AT - 1);
    ck_assert_int_eq(st.rows, pending_rows);
    ck_assert_msg(st.parts >= 1 && st.age >= 0 && st.age < 120, "parts %lld, age %lld s", st.parts,
                  st.age);
    ck_assert_msg(find_staged(lingering, &st), "%s is not listed", lingering);
    ck_assert_str_eq(st.cls, "lingering");
    ck_assert_str_eq(st.action, "drop");
    ck_assert_int_eq(st.ckpt, KILL_AT);
    ck_assert_int_eq(st.rows, lingering_rows);
    ck_assert_int_eq(twopc("pg transactions --conninfo '%s' --prefix %s --marker-table %s "
                           "--write-ahead-table %s --checkpoint-dir %s --json",
                           conninfo, gprefix, marker, staging, ckpt),
                     0);
    char want[400];
    snprintf(want, sizeof want,
             "{\"gid\":\"%s\",\"state\":\"staged\",\"class\":\"pending\",\"action\":\"move\","
             "\"checkpoint\":3,\"subtask\":0,",
             pending);
    ck_assert_ptr_nonnull(strstr(out, want));
    snprintf(want, sizeof want,
             "{\"gid\":\"%s\",\"state\":\"staged\",\"class\":\"lingering\",\"action\":\"drop\","
             "\"checkpoint\":4,\"subtask\":0,",
             lingering);
    ck_assert_ptr_nonnull(strstr(out, want));

    /* The pending rows may not be dropped: the whole command is refused, nothing goes. */
    ck_assert_int_eq(twopc("pg drop-staged --conninfo '%s' --write-ahead-table %s "
                           "--checkpoint-dir %s --gid %s --gid %s 2>&1",
                           conninfo, staging, ckpt, lingering, pending),
                     1);
    ck_assert_ptr_nonnull(strstr(out, "refusing to drop the rows written ahead"));
    ck_assert_ptr_nonnull(strstr(out, "a restart moves these"));
    ck_assert_ptr_nonnull(strstr(out, "hint:"));
    ck_assert_int_eq(staged_rows(pending), pending_rows);
    ck_assert_int_eq(staged_rows(lingering), lingering_rows);
    /* Nor anything while a job holds the folder. */
    tpc_dir_lease_t *lease = NULL;
    tpc_error_t *err = tpc_checkpoint_dir_lease(ckpt, true, &lease);
    ck_assert_msg(!err, "lease: %s", err ? tpc_error_message(err) : "");
    ck_assert_int_eq(twopc("pg drop-staged --conninfo '%s' --write-ahead-table %s "
                           "--checkpoint-dir %s 2>&1",
                           conninfo, staging, ckpt),
                     1);
    tpc_checkpoint_dir_release(lease);
    ck_assert_int_eq(staged_rows(lingering), lingering_rows);
    /* A dry run says what it would drop, and drops nothing. */
    ck_assert_int_eq(twopc("pg drop-staged --conninfo '%s' --write-ahead-table %s "
                           "--checkpoint-dir %s --dry-run",
                           conninfo, staging, ckpt),
                     0);
    ck_assert_msg(find_staged(lingering, &st) && strcmp(st.action, "drop") == 0,
                  "the dry run does not show the drop");
    ck_assert_int_eq(staged_rows(lingering), lingering_rows);

    /* Without --gid and --prefix: the lingering rows of the checkpoint's prefixes go, the pending
     * ones stay. */
    ck_assert_int_eq(twopc("pg drop-staged --conninfo '%s' --write-ahead-table %s "
                           "--checkpoint-dir %s",
                           conninfo, staging, ckpt),
                     0);
    ck_assert_msg(find_staged(lingering, &st) && strcmp(st.action, "dropped") == 0,
                  "the lingering rows are not reported dropped");
    ck_assert_msg(find_staged(pending, &st) && strcmp(st.action, "move") == 0,
                  "the pending rows are not reported kept for the restart");
    ck_assert_int_eq(staged_rows(lingering), 0);
    ck_assert_int_eq(staged_rows(pending), pending_rows);

    /* The restart agrees: it moves the pending rows and writes the rest once. */
    run_child(0);
    long long rows = tpc_test_pg_long(pg, "SELECT count(*) FROM %s", table);
    long long distinct = tpc_test_pg_long(pg, "SELECT count(DISTINCT k) FROM %s", table);
    ck_assert_msg(rows == RECORDS && distinct == RECORDS, "%lld rows, %lld distinct of %d", rows,
                  distinct, RECORDS);
    ck_assert_int_eq(tpc_test_pg_long(pg, "SELECT count(*) FROM %s", staging), 0);
    ck_assert_int_eq(twopc("pg transactions --conninfo '%s' --prefix %s --marker-table %s "
                           "--write-ahead-table %s --checkpoint-dir %s --check",
                           conninfo, gprefix, marker, staging, ckpt),
                     0);
}
END_TEST

START_TEST(test_drop_staged_usage)
{
    ck_assert_int_eq(twopc("pg drop-staged --conninfo '%s' 2>&1", conninfo), 2);
    ck_assert_ptr_nonnull(strstr(out, "--checkpoint-dir"));
    ck_assert_int_eq(twopc("pg transactions --conninfo '%s' --gid x:0:1:1 2>&1", conninfo), 2);
    ck_assert_ptr_nonnull(strstr(out, "--gid belongs to drop-staged"));
    /* A gid with no rows written ahead is named, not ignored. */
    run_child(KILL_AT);
    ck_assert_int_eq(twopc("pg drop-staged --conninfo '%s' --write-ahead-table %s "
                           "--checkpoint-dir %s --gid %s:0:1:99 2>&1",
                           conninfo, staging, ckpt, gprefix),
                     1);
    ck_assert_ptr_nonnull(strstr(out, "no rows written ahead for transaction"));
}
END_TEST

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--child") == 0)
        return child_main(argc, argv);
    if (!tpc_test_self_path(self, sizeof self))
        return 2;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", self);
    snprintf(twopc_bin, sizeof twopc_bin, "%s/../bin/twopc", dirname(dir));
    Suite *s = suite_create("twopc_pg_staged");
    TCase *tc = tcase_create("killed write-ahead job");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_staged_rows_listed_and_dropped_by_the_restore_rule);
    tcase_add_test(tc, test_drop_staged_usage);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
