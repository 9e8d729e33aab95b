/*
 * Kafka to Kafka exactly once under crashes, against the real broker. The input topic is written
 * in transactions, some aborted. A separate process (this binary run again with "--child") runs
 * Kafka source (bounded) -> a slow pass-through -> exactly-once Kafka sink with a checkpoint
 * folder, and is killed with SIGKILL at random moments, then started again on the same folder
 * until a run ends on its own. Three such scenarios, each with its own topics and folder, run side
 * by side, 11 kills each, so that one `make test` kills at least 30 runs in little more time than
 * one scenario takes. A read_committed consumer must then find in the output topic every
 * committed input record exactly once, and every key's records in input order: the source
 * resumed each time at the offsets of the restored checkpoint, neither before (duplicates) nor
 * after them (losses). The seed is printed; set TWOPC_CRASH_SEED to repeat a run.
 */
#include "check_kafka_common.h"
#include "check_kafka_source_fill.h"
#include "tpc_kafka.h"
#include "tpc_test_ops.h"

#include <signal.h>
#include <string.h>
#include <time.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* Kills per scenario, and at least this many in all (a job may end on its own first). */
#define SCENARIOS      3
#define KILLS_PER_SCEN 11
#define MIN_KILLS      30
#define TXNS           32

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

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One input topic, one output topic, one checkpoint folder: a job killed and restarted on its
 * own, beside the others. */
typedef struct {
    char in[128], out[128], prefix[128];
    char *ckpt;
    char log[4200];
    uint64_t committed;
    pid_t pid;       /* the running child, 0 when none */
    int64_t kill_at; /* when to kill it (monotonic ms) */
    int kills;
    bool ended; /* a run ended on its own: no more kills */
} scenario_t;

static char self_path[4096];

static void spawn(scenario_t *sc)
{
    pid_t pid = fork();
    if (pid == 0) {
        FILE *f = freopen(sc->log, "a", stderr);
        (void)f;
        execl(self_path, self_path, "--child", bootstrap, sc->in, sc->out, sc->prefix, sc->ckpt,
              (char *)NULL);
        _exit(127);
    }
    ck_assert_int_gt(pid, 0);
    sc->pid = pid;
    /* A quarter of the kills land in start-up and restore, the rest while records flow. */
    int ms = rnd() % 4 == 0 ? (int)(rnd() % 300) : 300 + (int)(rnd() % 1200);
    sc->kill_at = now_ms() + ms;
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

static int count_in_log(const scenario_t *sc, const char *needle)
{
    FILE *f = fopen(sc->log, "r");
    char line[1024];
    int n = 0;
    while (f && fgets(line, sizeof line, f))
        n += strstr(line, needle) != NULL;
    if (f)
        fclose(f);
    return n;
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

static void scenario_init(scenario_t *sc)
{
    char in[sizeof sc->in];
    memset(sc, 0, sizeof *sc);
    tpc_test_unique_name(in, sizeof in, "twopc-src-in", '-');
    memcpy(sc->in, in, sizeof in);
    tpc_test_unique_name(sc->out, sizeof sc->out, "twopc-src-out", '-');
    tpc_test_unique_name(sc->prefix, sizeof sc->prefix, "twopc-src", '-');
    kt_create_topic(bootstrap, sc->in, 3);
    kt_create_topic(bootstrap, sc->out, 3);
    sc->committed = kf_fill(bootstrap, in, TXNS, 100, 4);
    sc->ckpt = tpc_test_tmpdir("kafka-source-crash");
    snprintf(sc->log, sizeof sc->log, "%s.log", sc->ckpt);
}

/* Run the scenario's job once more to its end, then check its output topic. */
static void scenario_finish(scenario_t *sc, uint64_t seed, int *restored)
{
    int status = 0;
    bool ended = sc->ended;
    if (!ended) {
        spawn(sc);
        ended = wait_for(sc->pid, 60000, &status);
        if (!ended) {
            kill(sc->pid, SIGKILL);
            waitpid(sc->pid, &status, 0);
        }
    }
    if (!ended || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
        count_in_log(sc, "crash child:") > 0) {
        dump_log(sc);
        ck_abort_msg("the last run of %s %s", sc->in, ended ? "failed" : "did not end");
    }
    *restored = count_in_log(sc, "from the restored offsets");

    values_t got = {0};
    kt_read_topic(bootstrap, sc->out, "read_committed", keep, &got);
    kf_check_t c = kf_check(got.values, got.n, sc->committed);
    if (c.dups || c.missing || c.foreign || c.disorder)
        dump_log(sc);
    ck_assert_msg(!c.dups && !c.missing && !c.foreign && !c.disorder,
                  "%d kills, seed %llu: %zu records, %ld duplicates, %ld missing, %ld foreign, "
                  "%ld out of key order",
                  sc->kills, (unsigned long long)seed, got.n, c.dups, c.missing, c.foreign,
                  c.disorder);
    free(got.values);
    unlink(sc->log);
    tpc_test_rmdir(sc->ckpt);
    free(sc->ckpt);
}

START_TEST(test_kafka_to_kafka_exactly_once_under_kill_9)
{
    const char *seed_env = getenv("TWOPC_CRASH_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10) : (uint64_t)time(NULL) ^ getpid();
    rng_state = seed ? seed : 1;
    bootstrap = tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP");
    ck_assert_msg(bootstrap != NULL, "TWOPC_TEST_KAFKA_BOOTSTRAP is not set");
    ssize_t len = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    ck_assert_int_gt(len, 0);
    self_path[len] = '\0';

    scenario_t sc[SCENARIOS];
    for (int i = 0; i < SCENARIOS; i++)
        scenario_init(&sc[i]);
    for (int i = 0; i < SCENARIOS; i++)
        spawn(&sc[i]);
    /* The scenarios run side by side: most of a run is start-up and waiting for the broker. */
    for (int busy = SCENARIOS; busy > 0;) {
        busy = 0;
        for (int i = 0; i < SCENARIOS; i++) {
            scenario_t *r = &sc[i];
            if (!r->pid)
                continue;
            int status = 0;
            if (waitpid(r->pid, &status, WNOHANG) == r->pid) {
                r->pid = 0;
                r->ended = WIFEXITED(status) && WEXITSTATUS(status) == 0;
                if (!r->ended) {
                    dump_log(r);
                    ck_abort_msg("a run of %s failed", r->in);
                }
                continue;
            }
            busy++;
            if (now_ms() < r->kill_at)
                continue;
            kill(r->pid, SIGKILL);
            waitpid(r->pid, &status, 0);
            r->pid = 0;
            if (++r->kills < KILLS_PER_SCEN)
                spawn(r);
        }
        usleep(2000);
    }
    int kills = 0, restored = 0;
    for (int i = 0; i < SCENARIOS; i++) {
        int n = 0;
        scenario_finish(&sc[i], seed, &n);
        kills += sc[i].kills;
        restored += n;
    }
    /* Some run resumed from a checkpoint's offsets rather than starting fresh (under a slow
     * build, one scenario's runs may all die before their first checkpoint). */
    ck_assert_msg(kills == 0 || restored > 0, "no run restored the source's offsets");
    printf("kafka source crash test: %d kill -9 in %d scenarios, %d subtask restores, seed %llu: "
           "every output read_committed, 0 duplicates, 0 missing, key order kept\n",
           kills, SCENARIOS, restored, (unsigned long long)seed);
    fflush(stdout);
    ck_assert_msg(kills >= MIN_KILLS, "only %d kills: the jobs ended on their own too early",
                  kills);
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
