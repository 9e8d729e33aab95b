/*
 * Exactly-once under crashes: a separate process runs sequence source -> file sink with a
 * checkpoint folder and is killed with SIGKILL at random moments, then started again on the same
 * folders, until a run ends on its own. The committed files, concatenated in name order, must then
 * equal the input exactly: nothing lost, nothing twice, in order; and no in-progress file may be
 * left. Kills land anywhere: during startup and recovery, while writing, during pre-commit fsyncs,
 * between a checkpoint's completion and its commit, and halfway through multi-part renames (parts
 * are small so that every commit renames several files).
 *
 * The child is this test binary itself, run again with "--crash-child". The random seed is
 * printed; set TWOPC_CRASH_SEED to repeat a run.
 */
#include "tpc_file.h"
#include "tpc_test_file.h"
#include "tpc_test_ops.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
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

static uint64_t rng_state;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static pid_t spawn(const char *self, const char *ckpt, const char *out, const char *log)
{
    pid_t pid = fork();
    if (pid == 0) {
        FILE *f = freopen(log, "a", stderr);
        (void)f;
        execl(self, self, "--crash-child", ckpt, out, (char *)NULL);
        _exit(127);
    }
    ck_assert_int_gt(pid, 0);
    return pid;
}

/* Wait up to @ms for @pid; @returns true with its status if it ended. */
static bool wait_for(pid_t pid, double ms, int *status)
{
    double end = now_s() + ms / 1000.0;
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid)
            return true;
        ck_assert_int_eq(r, 0);
        if (now_s() >= end)
            return false;
        struct timespec ts = {0, 500000};
        nanosleep(&ts, NULL);
    }
}

static void dump_log(const char *log)
{
    FILE *f = fopen(log, "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        fputs(line, stderr);
    if (f)
        fclose(f);
}

START_TEST(test_kill_9_and_restart)
{
    const char *seed_env = getenv("TWOPC_CRASH_SEED");
    uint64_t seed =
        seed_env ? strtoull(seed_env, NULL, 10) : (uint64_t)time(NULL) ^ (uint64_t)getpid();
    rng_state = seed ? seed : 1;
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    ck_assert_int_gt(n, 0);
    self[n] = '\0';

    int kills = 0, runs = 0, scenarios = 0;
    double t0 = now_s();
    while (kills < KILLS_WANTED) {
        char *ckpt = tpc_test_tmpdir("crash-ckpt");
        char *out = tpc_test_tmpdir("crash-out");
        char log[4200];
        snprintf(log, sizeof log, "%s.log", ckpt);
        int here = 0;
        for (;;) {
            pid_t pid = spawn(self, ckpt, out, log);
            runs++;
            int status = 0;
            bool ended;
            if (here < KILLS_PER_SCENARIO && kills < KILLS_WANTED) {
                /* Mostly anywhere in a run, sometimes right at its start (recovery). */
                double ms = rnd() % 5 == 0 ? (double)(rnd() % 15) : 10.0 + (double)(rnd() % 110);
                ended = wait_for(pid, ms, &status);
                if (!ended) {
                    kill(pid, SIGKILL);
                    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
                    kills++;
                    here++;
                    continue;
                }
            } else {
                ended = wait_for(pid, 60000, &status);
                if (!ended) {
                    kill(pid, SIGKILL);
                    waitpid(pid, &status, 0);
                }
            }
            if (!ended || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                dump_log(log);
                ck_abort_msg("child run %d (seed %llu) %s", runs, (unsigned long long)seed,
                             ended ? "failed" : "did not end");
            }
            break;
        }
        tpc_test_file_out_t files;
        char why[256];
        uint64_t count = RECORDS;
        ck_assert_msg(tpc_test_file_read(out, "part", &files, why, sizeof why), "%s", why);
        bool ok = tpc_test_file_check(&files, VALUE_PAD, 1, &count, true, why, sizeof why);
        if (!ok)
            dump_log(log);
        ck_assert_msg(ok, "after %d kills (seed %llu): %s", here, (unsigned long long)seed, why);
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
           runs, scenarios, now_s() - t0, (unsigned long long)seed);
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
