/*
 * Exactly-once into Kafka under crashes, against the real broker. A separate process (this binary
 * run again with "--crash-child") runs sequence source -> Kafka sink with a checkpoint folder and
 * is killed with SIGKILL, then started again on the same folder and topic until a run ends on its
 * own. A read_committed consumer must then find every record exactly once: nothing lost, nothing
 * twice. Two ways to kill:
 *   - at random moments (startup and recovery, writing, pre-commit, between a checkpoint's
 *     completion and its commit);
 *   - exactly when a checkpoint has completed and before its transaction is committed (the child
 *     kills itself in the checkpoint callback): the next run must commit that transaction with
 *     EndTxn during recovery, and its records appear once.
 * Restarts also show that lingering transactions of killed runs never block the consumer. The
 * seed is printed; set TWOPC_CRASH_SEED to repeat a run.
 */
#include "check_kafka_common.h"
#include "tpc_kafka.h"
#include "tpc_test_ops.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define RECORDS     3000
#define RANDOM_KILL 10

static const char *bootstrap;

static void on_checkpoint(void *opaque, uint64_t id, bool completed, uint64_t us, const char *why)
{
    (void)us, (void)why;
    if (completed && id == *(uint64_t *)opaque)
        kill(getpid(), SIGKILL);
}

static void log_line(void *opaque, tpc_log_level_t level, const char *message)
{
    (void)opaque, (void)level;
    fprintf(stderr, "%s\n", message);
}

static int child_main(const char *bs, const char *topic, const char *prefix, const char *ckpt,
                      uint64_t kill_at)
{
    alarm(60);
    tpc_test_seq_conf_t src = {.count_default = RECORDS, .per_poll = 8, .sleep_us = 4000};
    tpc_job_t *job = tpc_job_new("kafka-crash");
    tpc_txn_sink_t *sink = NULL;
    int s, k;
    tpc_job_set_logger(job, log_line, NULL, TPC_LOG_INFO);
    if (kill_at)
        tpc_job_set_checkpoint_callback(job, on_checkpoint, &kill_at);
    tpc_error_t *err = tpc_job_set(job, "checkpoint.dir", ckpt);
    if (!err)
        err = tpc_job_set(job, "checkpoint.interval.ms", "50");
    if (!err)
        err = tpc_kafka_sink_new(bs, topic, &sink);
    if (!err)
        err = tpc_txn_sink_set(sink, "transactional.id.prefix", prefix);
    if (!err)
        err = tpc_txn_sink_set(sink, "kafka.linger.ms", "2");
    if (!err)
        err = tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s);
    if (!err)
        err = tpc_txn_sink_add_to_job(sink, job, "kafka", 1, &k);
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

typedef struct {
    char topic[128];
    char prefix[128];
    char *ckpt;
    char log[4200];
    char self[4096];
} scenario_t;

static void scenario_init(scenario_t *sc)
{
    bootstrap = tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP");
    ck_assert_msg(bootstrap != NULL, "TWOPC_TEST_KAFKA_BOOTSTRAP is not set");
    tpc_test_unique_name(sc->topic, sizeof sc->topic, "twopc-crash", '-');
    tpc_test_unique_name(sc->prefix, sizeof sc->prefix, "twopc-crash", '-');
    kt_create_topic(bootstrap, sc->topic, 1);
    sc->ckpt = tpc_test_tmpdir("kafka-crash");
    snprintf(sc->log, sizeof sc->log, "%s.log", sc->ckpt);
    ssize_t n = readlink("/proc/self/exe", sc->self, sizeof sc->self - 1);
    ck_assert_int_gt(n, 0);
    sc->self[n] = '\0';
}

static pid_t spawn(const scenario_t *sc, uint64_t kill_at)
{
    char at[32];
    snprintf(at, sizeof at, "%llu", (unsigned long long)kill_at);
    pid_t pid = fork();
    if (pid == 0) {
        FILE *f = freopen(sc->log, "a", stderr);
        (void)f;
        execl(sc->self, sc->self, "--crash-child", bootstrap, sc->topic, sc->prefix, sc->ckpt, at,
              (char *)NULL);
        _exit(127);
    }
    ck_assert_int_gt(pid, 0);
    return pid;
}

static bool wait_for(pid_t pid, int ms, int *status)
{
    for (int waited = 0;; waited += 2) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid)
            return true;
        if (waited >= ms)
            return false;
        usleep(2000);
    }
}

static bool log_has(const scenario_t *sc, const char *needle)
{
    FILE *f = fopen(sc->log, "r");
    char line[1024];
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f))
        found = strstr(line, needle) != NULL;
    if (f)
        fclose(f);
    return found;
}

static void dump_log(const scenario_t *sc)
{
    FILE *f = fopen(sc->log, "r");
    char line[1024];
    while (f && fgets(line, sizeof line, f))
        fputs(line, stderr);
    if (f)
        fclose(f);
}

static void run_to_end(const scenario_t *sc)
{
    int status = 0;
    pid_t pid = spawn(sc, 0);
    bool ended = wait_for(pid, 60000, &status);
    if (!ended) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    if (!ended || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        dump_log(sc);
        ck_abort_msg("the last run %s", ended ? "failed" : "did not end");
    }
}

static void tally(void *opaque, const rd_kafka_message_t *msg)
{
    int st = 0;
    uint64_t seq = 0;
    unsigned char *seen = opaque;
    if (tpc_test_seq_decode(msg->key, msg->key_len, &st, &seq) && st == 0 && seq < RECORDS)
        seen[seq] = seen[seq] < 255 ? seen[seq] + 1 : 255;
    else
        seen[RECORDS]++;
}

static void check_and_clean(scenario_t *sc, const char *what)
{
    unsigned char *seen = calloc(RECORDS + 1, 1);
    long total = kt_read_topic(bootstrap, sc->topic, "read_committed", tally, seen);
    long dups = 0, missing = 0;
    for (int i = 0; i < RECORDS; i++) {
        missing += seen[i] == 0;
        dups += seen[i] > 1 ? seen[i] - 1 : 0;
    }
    long foreign = seen[RECORDS];
    free(seen);
    if (dups || missing || foreign)
        dump_log(sc);
    ck_assert_msg(!dups && !missing && !foreign && total == RECORDS,
                  "%s: %ld records, %ld duplicates, %ld missing, %ld foreign", what, total, dups,
                  missing, foreign);
    printf("kafka crash test (%s): %ld records read_committed, 0 duplicates, 0 missing\n", what,
           total);
    fflush(stdout);
    unlink(sc->log);
    tpc_test_rmdir(sc->ckpt);
    free(sc->ckpt);
}

START_TEST(test_kill_9_at_random_and_restart)
{
    const char *seed_env = getenv("TWOPC_CRASH_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10) : (uint64_t)time(NULL) ^ getpid();
    rng_state = seed ? seed : 1;
    scenario_t sc;
    scenario_init(&sc);
    int kills = 0;
    while (kills < RANDOM_KILL) {
        pid_t pid = spawn(&sc, 0);
        int status = 0;
        int ms = rnd() % 4 == 0 ? (int)(rnd() % 300) : 300 + (int)(rnd() % 1000);
        if (wait_for(pid, ms, &status))
            break; /* it ended on its own */
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        kills++;
    }
    run_to_end(&sc);
    char what[96];
    snprintf(what, sizeof what, "%d random kill -9, seed %llu", kills, (unsigned long long)seed);
    check_and_clean(&sc, what);
}
END_TEST

START_TEST(test_kill_between_completion_and_commit)
{
    scenario_t sc;
    scenario_init(&sc);
    for (uint64_t at = 3; at <= 9; at += 3) {
        pid_t pid = spawn(&sc, at);
        int status = 0;
        ck_assert(wait_for(pid, 30000, &status));
        ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                      "the child was to kill itself at checkpoint %llu", (unsigned long long)at);
    }
    run_to_end(&sc);
    bool recovered = log_has(&sc, "during recovery");
    if (!recovered)
        dump_log(&sc);
    ck_assert_msg(recovered, "no transaction was committed during recovery");
    check_and_clean(&sc, "killed after checkpoint completion, before commit");
}
END_TEST

int main(int argc, char **argv)
{
    if (argc == 7 && strcmp(argv[1], "--crash-child") == 0)
        return child_main(argv[2], argv[3], argv[4], argv[5], strtoull(argv[6], NULL, 10));
    Suite *s = suite_create("kafka_crash");
    TCase *tc = tcase_create("crash");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_kill_between_completion_and_commit);
    tcase_add_test(tc, test_kill_9_at_random_and_restart);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
