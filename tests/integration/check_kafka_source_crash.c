/*
 * Kafka to Kafka exactly once under crashes, against the real broker. The input topic is written
 * in transactions, some aborted. A separate process (this binary run again with "--child") runs
 * Kafka source (bounded) -> a slow pass-through -> exactly-once Kafka sink with a checkpoint
 * folder, and is killed with SIGKILL at random moments, then started again on the same folder
 * until a run ends on its own. A read_committed consumer must then find in the output topic every
 * committed input record exactly once, and every key's records in input order: the source
 * resumed each time at the offsets of the restored checkpoint, neither before (duplicates) nor
 * after them (losses). The seed is printed; set TWOPC_CRASH_SEED to repeat a run.
 */
#include "check_kafka_common.h"
#include "check_kafka_source_fill.h"
#include "tpc_kafka.h"
#include "tpc_test_ops.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define KILLS 8

static const char *bootstrap;

static void log_line(void *opaque, tpc_log_level_t level, const char *message)
{
    (void)opaque, (void)level;
    fprintf(stderr, "%s\n", message);
}

/* Passes records on, slowly enough that kills land in the middle of the input. */
static tpc_error_t *slow_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx, (void)arg;
    *self = NULL;
    return NULL;
}

static tpc_error_t *slow_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)self;
    for (size_t i = 0; i < tpc_batch_count(batch); i++) {
        tpc_record_t r;
        tpc_batch_get(batch, i, &r);
        if (tpc_emit(ctx, &r) != TPC_OK)
            return NULL; /* canceled */
    }
    usleep(40000);
    return NULL;
}

static tpc_error_t *slow_notify(void *self, tpc_ctx_t *ctx, uint64_t id)
{
    (void)self, (void)ctx, (void)id;
    return NULL;
}

static const tpc_operator_ops_t slow_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = slow_open,
    .process = slow_process,
    .notify_checkpoint_complete = slow_notify,
};

static int child_main(const char *bs, const char *in, const char *out, const char *prefix,
                      const char *ckpt)
{
    alarm(60);
    tpc_job_t *job = tpc_job_new("kafka-source-crash");
    tpc_kafka_source_t *src = NULL;
    tpc_txn_sink_t *sink = NULL;
    int s, m, k;
    tpc_job_set_logger(job, log_line, NULL, TPC_LOG_INFO);
    tpc_error_t *err = tpc_job_set(job, "checkpoint.dir", ckpt);
    if (!err)
        err = tpc_job_set(job, "checkpoint.interval.ms", "100");
    if (!err)
        err = tpc_kafka_source_new(bs, in, &src);
    if (!err)
        err = tpc_kafka_source_set(src, "bounded", "true");
    if (!err)
        err = tpc_kafka_source_set(src, "max.batch", "16");
    if (!err)
        err = tpc_kafka_sink_new(bs, out, &sink);
    if (!err)
        err = tpc_txn_sink_set(sink, "transactional.id.prefix", prefix);
    if (!err)
        err = tpc_txn_sink_set(sink, "kafka.linger.ms", "2");
    if (!err)
        err = tpc_kafka_source_add_to_job(src, job, "source", 2, &s);
    if (!err)
        err = tpc_job_add_vertex(job, "slow", 2, &slow_ops, NULL, &m);
    if (!err)
        err = tpc_txn_sink_add_to_job(sink, job, "sink", 2, &k);
    if (!err)
        err = tpc_job_connect(job, s, m, TPC_EDGE_FORWARD);
    if (!err)
        err = tpc_job_connect(job, m, k, TPC_EDGE_FORWARD);
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
    tpc_kafka_source_destroy(src);
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
    char in[128], out[128], prefix[128];
    char *ckpt;
    char log[4200];
    char self[4096];
} scenario_t;

static pid_t spawn(const scenario_t *sc)
{
    pid_t pid = fork();
    if (pid == 0) {
        FILE *f = freopen(sc->log, "a", stderr);
        (void)f;
        execl(sc->self, sc->self, "--child", bootstrap, sc->in, sc->out, sc->prefix, sc->ckpt,
              (char *)NULL);
        _exit(127);
    }
    ck_assert_int_gt(pid, 0);
    return pid;
}

static bool wait_for(pid_t pid, int ms, int *status)
{
    for (int waited = 0;; waited += 2) {
        if (waitpid(pid, status, WNOHANG) == pid)
            return true;
        if (waited >= ms)
            return false;
        usleep(2000);
    }
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

typedef struct {
    uint64_t *values;
    size_t n, cap;
} values_t;

static void keep(void *opaque, const rd_kafka_message_t *msg)
{
    values_t *v = opaque;
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 1024;
        v->values = realloc(v->values, v->cap * sizeof *v->values);
    }
    v->values[v->n++] = kf_value_of(msg->payload, msg->len);
}

START_TEST(test_kafka_to_kafka_exactly_once_under_kill_9)
{
    const char *seed_env = getenv("TWOPC_CRASH_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10) : (uint64_t)time(NULL) ^ getpid();
    rng_state = seed ? seed : 1;
    bootstrap = tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP");
    ck_assert_msg(bootstrap != NULL, "TWOPC_TEST_KAFKA_BOOTSTRAP is not set");

    scenario_t sc;
    tpc_test_unique_name(sc.in, sizeof sc.in, "twopc-src-in", '-');
    tpc_test_unique_name(sc.out, sizeof sc.out, "twopc-src-out", '-');
    tpc_test_unique_name(sc.prefix, sizeof sc.prefix, "twopc-src", '-');
    kt_create_topic(bootstrap, sc.in, 3);
    kt_create_topic(bootstrap, sc.out, 3);
    uint64_t committed = kf_fill(bootstrap, sc.in, 24, 100, 4);
    sc.ckpt = tpc_test_tmpdir("kafka-source-crash");
    snprintf(sc.log, sizeof sc.log, "%s.log", sc.ckpt);
    ssize_t len = readlink("/proc/self/exe", sc.self, sizeof sc.self - 1);
    ck_assert_int_gt(len, 0);
    sc.self[len] = '\0';

    int kills = 0, status = 0;
    bool ended = false;
    while (kills < KILLS && !ended) {
        pid_t pid = spawn(&sc);
        int ms = rnd() % 4 == 0 ? (int)(rnd() % 300) : 300 + (int)(rnd() % 1200);
        ended = wait_for(pid, ms, &status);
        if (!ended) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            kills++;
        }
    }
    if (!ended) {
        pid_t pid = spawn(&sc);
        ended = wait_for(pid, 60000, &status);
        if (!ended) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
        }
    }
    if (!ended || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        dump_log(&sc);
        ck_abort_msg("the last run %s", ended ? "failed" : "did not end");
    }

    /* Some run resumed from a checkpoint's offsets rather than starting fresh. */
    FILE *f = fopen(sc.log, "r");
    char line[1024];
    int restored = 0;
    while (f && fgets(line, sizeof line, f))
        restored += strstr(line, "from the restored offsets") != NULL;
    if (f)
        fclose(f);
    ck_assert_msg(kills == 0 || restored > 0, "no run restored the source's offsets");

    values_t got = {0};
    kt_read_topic(bootstrap, sc.out, "read_committed", keep, &got);
    kf_check_t c = kf_check(got.values, got.n, committed);
    if (c.dups || c.missing || c.foreign || c.disorder)
        dump_log(&sc);
    ck_assert_msg(!c.dups && !c.missing && !c.foreign && !c.disorder,
                  "%d kills, seed %llu: %zu records, %ld duplicates, %ld missing, %ld foreign, "
                  "%ld out of key order",
                  kills, (unsigned long long)seed, got.n, c.dups, c.missing, c.foreign, c.disorder);
    printf("kafka source crash test: %d kill -9, %d subtask restores, seed %llu: %zu records "
           "read_committed, 0 duplicates, 0 missing, key order kept\n",
           kills, restored, (unsigned long long)seed, got.n);
    fflush(stdout);
    free(got.values);
    unlink(sc.log);
    tpc_test_rmdir(sc.ckpt);
    free(sc.ckpt);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc == 7 && strcmp(argv[1], "--child") == 0)
        return child_main(argv[2], argv[3], argv[4], argv[5], argv[6]);
    Suite *s = suite_create("kafka_source_crash");
    TCase *tc = tcase_create("crash");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_kafka_to_kafka_exactly_once_under_kill_9);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
