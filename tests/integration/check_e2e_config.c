/*
 * exactly_once_pipeline configured from a file and the environment only (docs/examples.md,
 * "--config"): the job, the source and both sinks take their keys from `--config FILE` and from
 * TWOPC_ variables, the environment over the file, and the run writes every input record once
 * into PostgreSQL and Kafka (verify_output exits 0); a file that names a vertex the job does not
 * have stops the program before it runs, saying the file and the line.
 */
#include "tpc_test_env.h"
#include "tpc_test_ops.h"
#include "tpc_test_pg.h"

#include <check.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char examples_dir[4096];

/* Run examples/<prog> with @argv (NULL-terminated, argv[0] included) and the extra environment
 * @env ("NAME=value", NULL-terminated) to its end, its stderr into @log; its exit status. */
static int run(const char *prog, char *const argv[], char *const env[], const char *log)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", examples_dir, prog);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        for (size_t i = 0; env && env[i]; i++)
            putenv(env[i]);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0)
            dup2(fd, STDERR_FILENO);
        execv(path, argv);
        _exit(127);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static char *slurp(const char *path)
{
    static char buf[65536];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
    return buf;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

START_TEST(test_demo_from_file_and_environment)
{
    ck_assert_ptr_nonnull(tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP"));
    ck_assert_ptr_nonnull(tpc_test_env_require("TWOPC_TEST_PG_CONNINFO"));
    /* The examples' servers: the names services.sh exports beside the TWOPC_TEST_ ones. */
    setenv("TWOPC_KAFKA_BOOTSTRAP", tpc_test_env("TWOPC_TEST_KAFKA_BOOTSTRAP"), 1);
    setenv("TWOPC_PG_CONNINFO", tpc_test_env("TWOPC_TEST_PG_CONNINFO"), 1);
    char name[128], tag[128];
    tpc_test_unique_name(name, sizeof name, "e2e-config", '-');
    snprintf(tag, sizeof tag, "%s", name);
    for (char *p = tag; *p; p++)
        if (*p == '-')
            *p = '_';
    char *dir = tpc_test_tmpdir("e2e-config");
    char conf[4200], ckpt[4200], log[4200], text[16384];
    snprintf(conf, sizeof conf, "%s/pipeline.conf", dir);
    snprintf(ckpt, sizeof ckpt, "%s/checkpoints", dir);
    snprintf(log, sizeof log, "%s/stderr.log", dir);

    char *fill[] = {"exactly_once_pipeline", "--fill", "--name", name, "--records", "6000", NULL};
    ck_assert_int_eq(run("exactly_once_pipeline", fill, NULL, log), 0);

    /* restore.mode = required would refuse the first run, which has no checkpoint: the run
     * below works only because the environment's auto wins over it; likewise the marker table
     * the PostgreSQL sink creates is the environment's, not the file's. */
    snprintf(text, sizeof text,
             "# exactly_once_pipeline, configured from outside the code\n"
             "checkpoint.dir = %s\n"
             "checkpoint.interval.ms = 200\n"
             "restart.attempts = 5\n"
             "restore.mode = required\n"
             "\n"
             "[source]\n"
             "max.batch = 100\n"
             "\n"
             "[postgres]\n"
             "pg.mode = insert\n"
             "pg.marker-table = %s_file_markers\n"
             "\n"
             "[kafka]\n"
             "kafka.linger.ms = 20\n"
             "transaction.timeout.ms = 60000\n",
             ckpt, tag);
    write_file(conf, text);
    char env_restore[] = "TWOPC_RESTORE_MODE=auto", env_markers[256];
    snprintf(env_markers, sizeof env_markers, "TWOPC_POSTGRES__PG_MARKER_TABLE=%s_env_markers",
             tag);
    char env_batch[] = "TWOPC_SOURCE__MAX_BATCH=50";
    char *env[] = {env_restore, env_markers, env_batch, NULL};
    char *job[] = {
        "exactly_once_pipeline", "--config", conf, "--name", name, "--progress", "off", NULL};
    int rc = run("exactly_once_pipeline", job, env, log);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, slurp(log));

    /* The checkpoints are where the file said, and the marker table is the environment's. */
    char completed[4300];
    snprintf(completed, sizeof completed, "%s/completed", ckpt);
    ck_assert_int_eq(access(completed, F_OK), 0);
    PGconn *pg = tpc_test_pg_connect();
    ck_assert_int_eq(tpc_test_pg_long(pg,
                                      "SELECT count(*) FROM pg_class WHERE relname = "
                                      "'%s_env_markers'",
                                      tag),
                     1);
    ck_assert_int_eq(tpc_test_pg_long(pg,
                                      "SELECT count(*) FROM pg_class WHERE relname = "
                                      "'%s_file_markers'",
                                      tag),
                     0);

    /* Finished: the same command again reads and writes nothing more. */
    rc = run("exactly_once_pipeline", job, env, log);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, slurp(log));
    char *verify[] = {"verify_output", "--name", name, "--records", "6000", NULL};
    rc = run("verify_output", verify, NULL, log);
    ck_assert_msg(rc == 0, "verify_output exit %d: %s", rc, slurp(log));
    tpc_test_pg_exec(pg, "DROP TABLE IF EXISTS %s_env_markers", tag);
    PQfinish(pg);

    /* A section for a vertex the job does not have: refused before the job runs. */
    write_file(conf, "checkpoint.interval.ms = 200\n\n[postgress]\npg.mode = insert\n");
    rc = run("exactly_once_pipeline", job, env, log);
    ck_assert_int_eq(rc, 1);
    char where[4300];
    snprintf(where, sizeof where, "%s:4: \"pg.mode\" of [postgress]", conf);
    ck_assert_msg(strstr(slurp(log), where), "stderr lacks \"%s\": %s", where, slurp(log));
    tpc_test_rmdir(dir);
    free(dir);
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
    Suite *s = suite_create("e2e_config");
    TCase *tc = tcase_create("config");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_demo_from_file_and_environment);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
