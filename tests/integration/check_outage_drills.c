/*
 * Outage drills with the example pipeline, as an operator meets them.
 *
 * SIGTERM while a server is away, as a rolling update meets an outage: the example
 * pipeline (exactly_once_pipeline, PostgreSQL and Kafka sinks) runs, PostgreSQL or the broker is
 * stopped, and a few seconds into the outage the process gets SIGTERM. It must end within the
 * job's stop.timeout.ms (20 s, the default the example keeps) and 5 s more, with exit status 0
 * and the line that says whether it stopped with a savepoint or without one. Then the server comes
 * back on its port and storage, the job is started again and runs to its end, and the independent
 * reader (verify_output: a read_committed consumer and SQL) finds every record exactly once, with
 * no prepared transaction left behind.
 *
 * A 30 s broker outage under a running job costs fewer than 30 log lines (librdkafka's repeats
 * counted, not repeated: connectors/kafka/wire/kafka_logq.c), and the job finishes exactly once
 * once the broker is back.
 *
 * The servers are stopped and started with the commands with-services.sh exports for servers it
 * started itself (TWOPC_TEST_PG_STOP / _RESUME, TWOPC_TEST_KAFKA_STOP / _RESUME); without them
 * (servers started elsewhere, shared by others) each drill is skipped, saying so. Whatever
 * happens, the servers are started again after each drill, before anything is asserted, and once
 * more when the suite ends.
 */
#include "tpc_test_crash.h"
#include "tpc_test_env.h"
#include "tpc_test_ops.h"
#include "tpc_test_pg.h"

#include <check.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define RECORDS   "20000"
#define RECORDS_N 20000
/* The job's stop.timeout.ms: the default, which the example does not change. */
#define STOP_TIMEOUT_MS 20000
#define STOP_SLACK_MS   5000

static char examples_dir[4096];

typedef struct {
    const char *what; /* "PostgreSQL", "Kafka broker" */
    const char *stop_env, *resume_env;
    int outage_ms; /* how long the server is away before SIGTERM */
} drill_t;

static char *example_path(const char *prog)
{
    static char path[2][4200];
    static int n;
    char *p = path[n++ % 2];
    snprintf(p, sizeof path[0], "%s/%s", examples_dir, prog);
    return p;
}

/* Run examples/<prog> to its end (within @ms), stderr into @log; @returns its exit status, or
 * -1 when it did not end (it is then killed). */
static int run_example(const char *const *argv, const char *log, int ms)
{
    pid_t pid = tpc_test_spawn(argv, log, -1);
    ck_assert_int_gt(pid, 0);
    int status = 0;
    if (!tpc_test_wait(pid, ms, &status)) {
        tpc_test_kill(pid);
        return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static bool log_has(const char *log, const char *needle)
{
    FILE *f = fopen(log, "r");
    char line[4096];
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f))
        found = strstr(line, needle) != NULL;
    if (f)
        fclose(f);
    return found;
}

/* Lines of @log after its first @from bytes. */
static long lines_after(const char *log, long from)
{
    FILE *f = fopen(log, "r");
    long lines = 0;
    if (f && fseek(f, from, SEEK_SET) == 0)
        for (int ch; (ch = fgetc(f)) != EOF;)
            lines += ch == '\n';
    if (f)
        fclose(f);
    return lines;
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "r");
    long size = f && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : 0;
    if (f)
        fclose(f);
    return size;
}

static int shell(const char *cmd)
{
    int rc = system(cmd);
    return rc == -1 ? -1 : WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

static void run_drill(const drill_t *d)
{
    const char *stop = tpc_test_env(d->stop_env), *resume = tpc_test_env(d->resume_env);
    if (!stop || !resume) {
        fprintf(stderr,
                "check_outage_drills: %s is not set (the server was started elsewhere, and "
                "others may use it), so the %s outage drill is skipped\n",
                d->stop_env, d->what);
        return;
    }
    ck_assert_ptr_nonnull(tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP"));
    ck_assert_ptr_nonnull(tpc_test_env_require("TWOPC_TEST_PG_CONNINFO"));
    setenv("TWOPC_KAFKA_BOOTSTRAP", tpc_test_env("TWOPC_TEST_KAFKA_BOOTSTRAP"), 1);
    setenv("TWOPC_PG_CONNINFO", tpc_test_env("TWOPC_TEST_PG_CONNINFO"), 1);
    char name[128], table[160], log[4200];
    tpc_test_unique_name(name, sizeof name, "outage", '_');
    snprintf(table, sizeof table, "%s_out", name);
    char *ckpt = tpc_test_tmpdir("outage");
    snprintf(log, sizeof log, "%s.log", ckpt);

    const char *fill[] = {example_path("exactly_once_pipeline"),
                          "--fill",
                          "--name",
                          name,
                          "--records",
                          RECORDS,
                          NULL};
    int rc = run_example(fill, log, 120000);
    if (rc != 0)
        tpc_test_dump_log(log);
    ck_assert_msg(rc == 0, "--fill: exit status %d", rc);

    /* About twenty seconds of work at this pace: the outage comes in the middle of it. */
    const char *paced[] = {example_path("exactly_once_pipeline"),
                           "--name",
                           name,
                           "--checkpoint-dir",
                           ckpt,
                           "--rate",
                           "1000",
                           "--interval",
                           "200",
                           "--progress",
                           "off",
                           NULL};
    pid_t pid = tpc_test_spawn(paced, log, -1);
    ck_assert_int_gt(pid, 0);
    int status = 0;
    bool ended_early = tpc_test_wait(pid, 4000, &status);

    /* From here on the server is started again before any assertion. */
    int stop_rc = ended_early ? 0 : shell(stop);
    bool ended_in_outage =
        !ended_early && stop_rc == 0 && tpc_test_wait(pid, d->outage_ms, &status);
    bool ended = ended_early || ended_in_outage;
    int64_t sent = tpc_test_now_ms(), took_ms = -1;
    if (!ended) {
        kill(pid, SIGTERM);
        ended = tpc_test_wait(pid, STOP_TIMEOUT_MS + STOP_SLACK_MS, &status);
        took_ms = tpc_test_now_ms() - sent;
        if (!ended)
            tpc_test_kill(pid);
    }
    int resume_rc = shell(resume);

    if (ended_early || ended_in_outage || !ended || !WIFEXITED(status) || WEXITSTATUS(status))
        tpc_test_dump_log(log);
    ck_assert_msg(!ended_early, "the job ended before the %s outage", d->what);
    ck_assert_msg(stop_rc == 0, "stopping the %s failed (%d)", d->what, stop_rc);
    ck_assert_msg(resume_rc == 0, "starting the %s again failed (%d)", d->what, resume_rc);
    ck_assert_msg(!ended_in_outage, "the job ended in the %s outage before SIGTERM", d->what);
    ck_assert_msg(ended, "SIGTERM during the %s outage: the process still ran %d ms later", d->what,
                  STOP_TIMEOUT_MS + STOP_SLACK_MS);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "SIGTERM during the %s outage: exit status %d, not 0", d->what,
                  WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    bool with = log_has(log, "exactly_once_pipeline: stopped with a savepoint");
    bool without = log_has(log, "exactly_once_pipeline: stopped without a savepoint");
    ck_assert_msg(with || without, "no line says how the job stopped");
    printf("SIGTERM %d ms into the %s outage: exit 0 after %lld ms, stopped %s a savepoint\n",
           d->outage_ms, d->what, (long long)took_ms, with ? "with" : "without");
    fflush(stdout);

    /* The server is back: the job goes on from its checkpoint to the end of its input. */
    const char *rest[] = {example_path("exactly_once_pipeline"),
                          "--name",
                          name,
                          "--checkpoint-dir",
                          ckpt,
                          "--interval",
                          "200",
                          "--progress",
                          "off",
                          NULL};
    rc = run_example(rest, log, 180000);
    if (rc != 0)
        tpc_test_dump_log(log);
    ck_assert_msg(rc == 0, "the restart after the %s outage %s", d->what,
                  rc < 0 ? "did not end within 180 s" : "failed");
    const char *verify[] = {
        example_path("verify_output"), "--name", name, "--records", RECORDS, NULL};
    rc = run_example(verify, NULL, 180000);
    ck_assert_msg(rc == 0, "verify_output after the %s outage: exit status %d", d->what, rc);

    PGconn *pg = tpc_test_pg_connect();
    ck_assert_ptr_nonnull(pg);
    ck_assert_int_eq(tpc_test_pg_prepared(pg, table), 0);
    ck_assert(tpc_test_pg_exec(pg, "DROP TABLE %s", table));
    PQfinish(pg);
    unlink(log);
    tpc_test_rmdir(ckpt);
    free(ckpt);
}

START_TEST(test_sigterm_during_pg_outage)
{
    const drill_t d = {.what = "PostgreSQL",
                       .stop_env = "TWOPC_TEST_PG_STOP",
                       .resume_env = "TWOPC_TEST_PG_RESUME",
                       .outage_ms = 5000};
    run_drill(&d);
}
END_TEST

START_TEST(test_sigterm_during_broker_outage)
{
    const drill_t d = {.what = "Kafka broker",
                       .stop_env = "TWOPC_TEST_KAFKA_STOP",
                       .resume_env = "TWOPC_TEST_KAFKA_RESUME",
                       .outage_ms = 5000};
    run_drill(&d);
}
END_TEST

/* The broker away for 30 s (stopped, then started again on its ports and storage) while the
 * pipeline runs: what the outage costs in log lines, from the stop to the end of the job. */
START_TEST(test_broker_outage_30s_log_lines)
{
    const char *stop = tpc_test_env("TWOPC_TEST_KAFKA_STOP");
    const char *resume = tpc_test_env("TWOPC_TEST_KAFKA_RESUME");
    if (!stop || !resume) {
        fprintf(stderr, "check_outage_drills: TWOPC_TEST_KAFKA_STOP is not set (the broker was "
                        "started elsewhere, and others may use it), so the 30 s outage is "
                        "skipped\n");
        return;
    }
    ck_assert_ptr_nonnull(tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP"));
    ck_assert_ptr_nonnull(tpc_test_env_require("TWOPC_TEST_PG_CONNINFO"));
    setenv("TWOPC_KAFKA_BOOTSTRAP", tpc_test_env("TWOPC_TEST_KAFKA_BOOTSTRAP"), 1);
    setenv("TWOPC_PG_CONNINFO", tpc_test_env("TWOPC_TEST_PG_CONNINFO"), 1);
    char name[128], table[160], log[4200];
    tpc_test_unique_name(name, sizeof name, "quiet", '_');
    snprintf(table, sizeof table, "%s_out", name);
    char *ckpt = tpc_test_tmpdir("quiet");
    snprintf(log, sizeof log, "%s.log", ckpt);
    const char *fill[] = {example_path("exactly_once_pipeline"),
                          "--fill",
                          "--name",
                          name,
                          "--records",
                          RECORDS,
                          NULL};
    int rc = run_example(fill, log, 120000);
    if (rc != 0)
        tpc_test_dump_log(log);
    ck_assert_msg(rc == 0, "--fill: exit status %d", rc);

    /* Forty seconds of work at this pace, half of it still to do when the broker is back. */
    const char *paced[] = {example_path("exactly_once_pipeline"),
                           "--name",
                           name,
                           "--checkpoint-dir",
                           ckpt,
                           "--rate",
                           "500",
                           "--interval",
                           "200",
                           "--progress",
                           "off",
                           NULL};
    pid_t pid = tpc_test_spawn(paced, log, -1);
    ck_assert_int_gt(pid, 0);
    int status = 0;
    bool ended_early = tpc_test_wait(pid, 4000, &status);
    long from = file_size(log);
    int64_t t0 = tpc_test_now_ms();
    int stop_rc = ended_early ? 0 : shell(stop);
    int64_t stopped = tpc_test_now_ms();
    bool ended_in_outage = !ended_early && stop_rc == 0 && tpc_test_wait(pid, 30000, &status);
    int64_t resumed = tpc_test_now_ms();
    int resume_rc = shell(resume);
    int64_t back = tpc_test_now_ms();
    bool ended = ended_early || ended_in_outage || tpc_test_wait(pid, 180000, &status);
    if (!ended)
        tpc_test_kill(pid);
    long lines = lines_after(log, from);
    if (ended_early || ended_in_outage || !ended || !WIFEXITED(status) || WEXITSTATUS(status) ||
        lines >= 30)
        tpc_test_dump_log(log);
    ck_assert_msg(!ended_early && !ended_in_outage, "the job ended before the broker was back");
    ck_assert_msg(stop_rc == 0 && resume_rc == 0,
                  "stopping (%d) or starting (%d) the broker failed", stop_rc, resume_rc);
    ck_assert_msg(ended, "the job did not end within 180 s of the broker's return");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the job failed");
    printf("broker away %lld ms (stop %lld ms, held 30 s, start again %lld ms): %ld log lines "
           "from the stop to the end of the job\n",
           (long long)(back - t0), (long long)(stopped - t0), (long long)(back - resumed), lines);
    fflush(stdout);
    ck_assert_msg(lines < 30, "a 30 s broker outage cost %ld log lines", lines);
    const char *verify[] = {
        example_path("verify_output"), "--name", name, "--records", RECORDS, NULL};
    rc = run_example(verify, NULL, 180000);
    ck_assert_msg(rc == 0, "verify_output after the 30 s broker outage: exit status %d", rc);
    PGconn *pg = tpc_test_pg_connect();
    ck_assert_ptr_nonnull(pg);
    ck_assert_int_eq(tpc_test_pg_prepared(pg, table), 0);
    ck_assert(tpc_test_pg_exec(pg, "DROP TABLE %s", table));
    PQfinish(pg);
    unlink(log);
    tpc_test_rmdir(ckpt);
    free(ckpt);
}
END_TEST

/* After the suite, in the parent: a drill that timed out or crashed left its server stopped. */
static void resume_servers(void)
{
    const char *const cmds[] = {tpc_test_env("TWOPC_TEST_PG_RESUME"),
                                tpc_test_env("TWOPC_TEST_KAFKA_RESUME")};
    for (size_t i = 0; i < 2; i++)
        if (cmds[i] && shell(cmds[i]) != 0)
            fprintf(stderr, "check_outage_drills: \"%s\" failed\n", cmds[i]);
}

int main(void)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return EXIT_FAILURE;
    self[n] = 0;
    snprintf(examples_dir, sizeof examples_dir, "%s/../examples", dirname(self));
    Suite *s = suite_create("outage_drills");
    TCase *tc = tcase_create("drills");
    tcase_set_timeout(tc, 600);
    tcase_add_unchecked_fixture(tc, NULL, resume_servers);
    tcase_add_test(tc, test_sigterm_during_pg_outage);
    tcase_add_test(tc, test_sigterm_during_broker_outage);
    tcase_add_test(tc, test_broker_outage_30s_log_lines);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
