/*
 * Exactly-once under crashes: a separate process runs sequence source -> file sink with a
 * checkpoint folder and is killed with SIGKILL at random moments, then started again on the same
 * folders, until a run ends on its own. The committed files, concatenated in name order, must then
 * equal the input exactly: nothing lost, nothing twice, in order; and no in-progress file may be
 * left. Kills land anywhere: during startup and recovery, while writing, during pre-commit fsyncs,
 * between a checkpoint's completion and its commit, and halfway through multi-part renames (parts
 * are small so that every commit renames several files).
 *
 * The child is this test binary itself, run again with "--crash-child" (tpc_test_crash.h). The
 * random seed is printed; set TWOPC_CRASH_SEED to repeat a run.
 */
#include "tpc_file.h"
#include "tpc_test_crash.h"
#include "tpc_test_env.h"
#include "tpc_test_file.h"
#include "tpc_test_ops.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KILLS_WANTED       36 /* over all scenarios of one test run */
#define KILLS_PER_SCENARIO 12 /* then the scenario runs to its end */
#define RECORDS            20000
#define VALUE_PAD          7 /* 16-byte records with the newline */

static int child_main(const char *ckpt, const char *out)
{
    tpc_test_seq_conf_t src = {
        .count_default = RECORDS, .per_poll = 16, .sleep_us = 400, .value_pad = VALUE_PAD};
    tpc_job_t *job = tpc_job_new("crash");
    tpc_txn_sink_t *sink = NULL;
    int s, k;
    tpc_error_t *err = tpc_job_set(job, "checkpoint.dir", ckpt);
    if (!err)
        err = tpc_job_set(job, "checkpoint.interval.ms", "15");
    if (!err)
        err = tpc_job_set(job, "restart.delay.ms", "5");
    if (!err)
        err = tpc_file_sink_new(out, &sink);
    if (!err)
        err = tpc_txn_sink_set(sink, "file.part-size", "1024");
    if (!err)
        err = tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s);
    if (!err)
        err = tpc_txn_sink_add_to_job(sink, job, "files", 1, &k);
    if (!err)
        err = tpc_job_connect(job, s, k, TPC_EDGE_FORWARD);
    tpc_job_result_t result = TPC_JOB_CANCELED;
    if (!err)
        err = tpc_job_run(job, &result);
    int rc = 0;
    if (err || result != TPC_JOB_FINISHED) {
        fprintf(stderr, "crash child: %s\n", err ? tpc_error_message(err) : "did not finish");
        rc = 1;
    }
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(sink);
    return rc;
}

START_TEST(test_kill_9_and_restart)
{
    uint64_t seed = tpc_test_crash_seed();
    tpc_test_rng_t rng;
    tpc_test_rng_init(&rng, seed);
    char self[4096];
    ck_assert(tpc_test_self_path(self, sizeof self));

    int kills = 0, runs = 0, scenarios = 0;
    double t0 = tpc_test_now_s();
    while (kills < KILLS_WANTED) {
        char *ckpt = tpc_test_tmpdir("crash-ckpt");
        char *out = tpc_test_tmpdir("crash-out");
        char log[4200];
        snprintf(log, sizeof log, "%s.log", ckpt);
        const char *argv[] = {self, "--crash-child", ckpt, out, NULL};
        /* Mostly anywhere in a run, sometimes right at its start (recovery). */
        tpc_test_crash_plan_t plan = {.argv = argv,
                                      .log = log,
                                      .kills = KILLS_PER_SCENARIO < KILLS_WANTED - kills
                                                   ? KILLS_PER_SCENARIO
                                                   : KILLS_WANTED - kills,
                                      .early_one_in = 5,
                                      .early_ms = 15,
                                      .min_ms = 10,
                                      .span_ms = 110,
                                      .last_run_ms = 60000};
        tpc_test_crash_result_t res;
        bool ok = tpc_test_crash_run(&plan, &rng, &res);
        kills += res.kills;
        runs += res.runs;
        ck_assert_msg(ok, "child run %d (seed %llu) %s", runs, (unsigned long long)seed,
                      res.ended ? "failed" : "did not end");
        tpc_test_file_out_t files;
        char why[256];
        uint64_t count = RECORDS;
        ck_assert_msg(tpc_test_file_read(out, "part", &files, why, sizeof why), "%s", why);
        ok = tpc_test_file_check(&files, VALUE_PAD, 1, &count, true, why, sizeof why);
        if (!ok)
            tpc_test_dump_log(log);
        ck_assert_msg(ok, "after %d kills (seed %llu): %s", res.kills, (unsigned long long)seed,
                      why);
        ck_assert_msg(files.inprogress == 0, "%d in-progress files left (seed %llu)",
                      files.inprogress, (unsigned long long)seed);
        ck_assert_uint_eq(files.len, (size_t)RECORDS * (9 + VALUE_PAD));
        tpc_test_file_out_free(&files);
        unlink(log);
        tpc_test_rmdir(ckpt);
        tpc_test_rmdir(out);
        free(ckpt);
        free(out);
        scenarios++;
    }
    printf("file crash test: %d kill -9 over %d runs in %d scenarios, %.1f s, seed %llu\n", kills,
           runs, scenarios, tpc_test_now_s() - t0, (unsigned long long)seed);
    fflush(stdout);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--crash-child") == 0)
        return child_main(argv[2], argv[3]);
    Suite *s = suite_create("file_crash");
    TCase *tc = tcase_create("crash");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_kill_9_and_restart);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
