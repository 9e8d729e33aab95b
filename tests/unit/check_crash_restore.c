/*
 * kill -9 of a process running a job with a counting stateful operator, at random moments, then
 * restart on the same checkpoint.dir until the job ends: the final counts equal the input exactly
 * once. The test re-executes its own binary as the job process ("--child DIR OUT",
 * tpc_test_crash.h); set TWOPC_CRASH_SEED to repeat the kill moments of a run.
 */
#include "tpc_test_crash.h"
#include "tpc_test_ops.h"
#include "tpc_test_sink.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N     60000
#define KILLS 12

static char self_path[4096];

static int child_main(const char *dir, const char *out)
{
    tpc_test_seq_conf_t src = {.count_default = N, .per_poll = 20, .sleep_us = 500};
    tpc_test_count_t cnt;
    tpc_test_count_init(&cnt);
    tpc_job_t *job = tpc_job_new("crash");
    int s, c;
    if (tpc_job_set(job, "checkpoint.dir", dir) ||
        tpc_job_set(job, "checkpoint.interval.ms", "15") ||
        tpc_job_add_vertex(job, "source", 2, &tpc_test_seq_source_ops, &src, &s) ||
        tpc_job_add_vertex(job, "count", 2, &tpc_test_count_ops, &cnt, &c) ||
        tpc_job_connect(job, s, c, TPC_EDGE_HASH))
        return 3;
    tpc_error_t *err = tpc_job_run(job, NULL);
    if (err) {
        fprintf(stderr, "child: %s\n", tpc_error_message(err));
        return 2;
    }
    FILE *f = fopen(out, "w");
    for (int k = 0; k < 2; k++) {
        uint64_t count, sum;
        tpc_test_count_total(&cnt, k, &count, &sum);
        fprintf(f, "%llu %llu\n", (unsigned long long)count, (unsigned long long)sum);
    }
    fclose(f);
    tpc_job_destroy(job);
    return 0;
}

START_TEST(test_kill9_and_restart_counts_exactly_once)
{
    char *dir = tpc_test_tmpdir("crash");
    char out[600];
    snprintf(out, sizeof out, "%s/result", dir);
    char ckdir[600];
    snprintf(ckdir, sizeof ckdir, "%s/ckpt", dir);
    uint64_t seed = tpc_test_crash_seed();
    tpc_test_rng_t rng;
    tpc_test_rng_init(&rng, seed);
    const char *argv[] = {self_path, "--child", ckdir, out, NULL};
    tpc_test_crash_plan_t plan = {.argv = argv, .kills = KILLS, .min_ms = 20, .span_ms = 150};
    tpc_test_crash_result_t res;
    bool ok = tpc_test_crash_run(&plan, &rng, &res);
    ck_assert_msg(ok, "run %d (seed %llu) ended with status %d", res.runs - 1,
                  (unsigned long long)seed, res.status);
    FILE *f = fopen(out, "r");
    ck_assert_ptr_nonnull(f);
    for (int k = 0; k < 2; k++) {
        unsigned long long count = 0, sum = 0;
        ck_assert_int_eq(fscanf(f, "%llu %llu", &count, &sum), 2);
        ck_assert_msg(count == N, "seed %llu: source %d counted %llu, expected %d",
                      (unsigned long long)seed, k, count, N);
        ck_assert_uint_eq(sum, (unsigned long long)N * (N - 1) / 2);
    }
    fclose(f);
    ck_assert_int_ge(res.kills, KILLS / 2);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--child") == 0)
        return child_main(argv[2], argv[3]);
    if (!tpc_test_self_path(self_path, sizeof self_path))
        return EXIT_FAILURE;
    Suite *s = suite_create("crash_restore");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_kill9_and_restart_counts_exactly_once);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
