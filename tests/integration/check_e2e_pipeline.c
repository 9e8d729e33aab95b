/*
 * exactly_once_pipeline does what docs/examples.md says, in the small: after a kill -9 half-way and
 * a restart, both outputs hold every input record exactly once (verify_output exits 0), and running
 * the finished job once more adds nothing. `make torture` does the same many times with random
 * kills and server restarts; this is the one run that `make test` always makes.
 */
#include "tpc_test_env.h"
#include "tpc_test_ops.h"

#include <check.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char examples_dir[4096];

/* Start examples/<prog> with @p argv (NULL-terminated, argv[0] included) in a child. */
static pid_t start(const char *prog, char *const argv[])
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", examples_dir, prog);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        execv(path, argv);
        _exit(127);
    }
    return pid;
}

static int finish(pid_t pid)
{
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

START_TEST(test_kill_restart_verify)
{
    ck_assert_ptr_nonnull(tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP"));
    ck_assert_ptr_nonnull(tpc_test_env_require("TWOPC_TEST_PG_CONNINFO"));
    setenv("TWOPC_KAFKA_BOOTSTRAP", tpc_test_env("TWOPC_TEST_KAFKA_BOOTSTRAP"), 1);
    setenv("TWOPC_PG_CONNINFO", tpc_test_env("TWOPC_TEST_PG_CONNINFO"), 1);
    char name[128];
    tpc_test_unique_name(name, sizeof name, "e2e-pipeline", '-');
    char *ckpt = tpc_test_tmpdir("e2e-pipeline");

    char *fill[] = {"exactly_once_pipeline", "--fill", "--name", name, "--records", "6000", NULL};
    ck_assert_int_eq(finish(start("exactly_once_pipeline", fill)), 0);

    /* About three seconds of work at this pace: the kill lands in the middle of it. */
    char *run[] = {"exactly_once_pipeline",
                   "--name",
                   name,
                   "--checkpoint-dir",
                   ckpt,
                   "--rate",
                   "2000",
                   "--interval",
                   "200",
                   "--progress",
                   "off",
                   NULL};
    pid_t pid = start("exactly_once_pipeline", run);
    usleep(1500 * 1000);
    kill(pid, SIGKILL);
    ck_assert_int_eq(finish(pid), 128 + SIGKILL);

    ck_assert_int_eq(finish(start("exactly_once_pipeline", run)), 0);
    /* Finished: the final checkpoint says so, and a new run reads and writes nothing. */
    ck_assert_int_eq(finish(start("exactly_once_pipeline", run)), 0);

    char *verify[] = {"verify_output", "--name", name, "--records", "6000", NULL};
    ck_assert_int_eq(finish(start("verify_output", verify)), 0);
    tpc_test_rmdir(ckpt);
    free(ckpt);
}
END_TEST

int main(void)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return EXIT_FAILURE;
    self[n] = 0;
    snprintf(examples_dir, sizeof examples_dir, "%s/../examples", dirname(self));
    Suite *s = suite_create("e2e_pipeline");
    TCase *tc = tcase_create("pipeline");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_kill_restart_verify);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
