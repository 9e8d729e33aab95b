/*
 * The lease of a checkpoint folder: while a job runs, a manual command's exclusive lease is refused
 * with a message that names the job's process; jobs share it; a command's lease keeps a job from
 * starting; and the lease dies with its process, kill -9 included, leaving nothing to clean up.
 */
#include "tpc_runtime.h"
#include "tpc_test_ops.h"

#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static bool says(const tpc_error_t *err, const char *what)
{
    return err && strstr(tpc_error_message(err), what);
}

START_TEST(test_jobs_share_commands_exclude)
{
    char *dir = tpc_test_tmpdir("lease");
    tpc_dir_lease_t *job_a = NULL, *job_b = NULL, *cmd = NULL;
    ck_assert_ptr_null(tpc_checkpoint_dir_lease(dir, false, &job_a));
    ck_assert_ptr_null(tpc_checkpoint_dir_lease(dir, false, &job_b));

    tpc_error_t *err = tpc_checkpoint_dir_lease(dir, true, &cmd);
    ck_assert_ptr_nonnull(err);
    ck_assert_ptr_null(cmd);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_STATE);
    ck_assert_msg(says(err, "in use by a running job"), "%s", tpc_error_message(err));
    char pid[32];
    snprintf(pid, sizeof pid, "pid %ld", (long)getpid());
    ck_assert_msg(says(err, pid), "the message names no pid: %s", tpc_error_message(err));
    tpc_error_destroy(err);

    tpc_checkpoint_dir_release(job_a);
    err = tpc_checkpoint_dir_lease(dir, true, &cmd);
    ck_assert_msg(err != NULL, "one job still runs: a command must be refused");
    tpc_error_destroy(err);
    tpc_checkpoint_dir_release(job_b);

    ck_assert_ptr_null(tpc_checkpoint_dir_lease(dir, true, &cmd));
    err = tpc_checkpoint_dir_lease(dir, false, &job_a);
    ck_assert_msg(says(err, "in use by a twopc command"), "%s",
                  err ? tpc_error_message(err) : "a job started beside a command");
    tpc_error_destroy(err);
    tpc_checkpoint_dir_release(cmd);
    tpc_checkpoint_dir_release(NULL);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

START_TEST(test_lease_dies_with_its_process)
{
    char *dir = tpc_test_tmpdir("lease-kill");
    int ready[2];
    ck_assert_int_eq(pipe(ready), 0);
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        tpc_dir_lease_t *l = NULL;
        tpc_error_t *err = tpc_checkpoint_dir_lease(dir, false, &l);
        char c = err ? 'n' : 'y';
        if (write(ready[1], &c, 1) != 1)
            _exit(2);
        for (;;)
            pause();
    }
    char c = 0;
    ck_assert_int_eq(read(ready[0], &c, 1), 1);
    ck_assert_int_eq(c, 'y');
    tpc_dir_lease_t *cmd = NULL;
    tpc_error_t *err = tpc_checkpoint_dir_lease(dir, true, &cmd);
    ck_assert_msg(err != NULL, "a command took the lease of a live job's folder");
    tpc_error_destroy(err);

    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    err = tpc_checkpoint_dir_lease(dir, true, &cmd);
    ck_assert_msg(!err, "the lease outlived its process: %s", err ? tpc_error_message(err) : "");
    tpc_checkpoint_dir_release(cmd);
    close(ready[0]);
    close(ready[1]);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

START_TEST(test_missing_folder_is_named)
{
    tpc_dir_lease_t *l = NULL;
    tpc_error_t *err = tpc_checkpoint_dir_lease("/nonexistent-twopc-folder/x", true, &l);
    ck_assert_ptr_null(l);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_NOT_FOUND);
    ck_assert_msg(says(err, "/nonexistent-twopc-folder/x/LOCK"), "%s", tpc_error_message(err));
    tpc_error_destroy(err);
}
END_TEST

typedef struct {
    tpc_job_t *job;
    tpc_error_t *err;
} run_arg_t;

static void *run_job(void *arg)
{
    run_arg_t *r = arg;
    r->err = tpc_job_run(r->job, NULL);
    return NULL;
}

/* tpc_job_run() holds the lease for as long as it runs, and gives it back when it returns. */
START_TEST(test_running_job_holds_the_lease)
{
    char *dir = tpc_test_tmpdir("lease-job");
    static tpc_test_seq_conf_t src = {.count_default = 1000000, .per_poll = 16, .sleep_us = 1000};
    tpc_job_t *job = tpc_job_new("lease");
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.dir", dir));
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.interval.ms", "20"));
    int s, k;
    ck_assert_ptr_null(tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s));
    ck_assert_ptr_null(tpc_job_add_vertex(job, "sink", 1, &tpc_test_discard_ops, NULL, &k));
    ck_assert_ptr_null(tpc_job_connect(job, s, k, TPC_EDGE_FORWARD));
    run_arg_t r = {.job = job};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, run_job, &r), 0);

    /* A completed checkpoint says the run is past its start, so it holds the lease by now (taking
     * the lease in a loop instead could hold it just when the job asks, and fail the job). */
    tpc_job_stats_t st = {0};
    for (int i = 0; i < 2500 && st.checkpoints_completed == 0; i++) {
        usleep(2000);
        ck_assert_int_eq(tpc_job_get_stats(job, &st), TPC_OK);
    }
    ck_assert_msg(st.checkpoints_completed > 0, "the job completed no checkpoint in 5 s");
    tpc_dir_lease_t *cmd = NULL;
    tpc_error_t *err = tpc_checkpoint_dir_lease(dir, true, &cmd);
    ck_assert_ptr_null(cmd);
    ck_assert_msg(says(err, "in use by a running job"), "a running job's folder was not held");
    tpc_error_destroy(err);

    tpc_job_cancel(job);
    pthread_join(t, NULL);
    ck_assert_ptr_null(r.err);
    err = tpc_checkpoint_dir_lease(dir, true, &cmd);
    ck_assert_msg(!err, "the job kept its lease after it returned: %s",
                  err ? tpc_error_message(err) : "");
    tpc_checkpoint_dir_release(cmd);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("checkpoint lease");
    TCase *tc = tcase_create("lease");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_jobs_share_commands_exclude);
    tcase_add_test(tc, test_lease_dies_with_its_process);
    tcase_add_test(tc, test_missing_folder_is_named);
    tcase_add_test(tc, test_running_job_holds_the_lease);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
