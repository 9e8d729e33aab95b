/*
 * Kafka to Kafka exactly once under crashes, against the real broker. The input topic is written
 * in transactions, some aborted. A separate process (this binary run again with "--child") runs
 * Kafka source (bounded) -> a slow pass-through -> exactly-once Kafka sink with a checkpoint
 * folder, and is killed with SIGKILL at random moments, then started again on the same folder
 * until a run ends on its own. Three such scenarios, each with its own topics and folder, run side
 * by side, up to 11 kills each, so that one `make test` kills 33 runs in little more time than one
 * scenario takes; a scenario whose job ends on its own before its kills is checked and followed
 * by a fresh one. A read_committed consumer must then find in the output topic every
 * committed input record exactly once, and every key's records in input order: the source
 * resumed each time at the offsets of the restored checkpoint, neither before (duplicates) nor
 * after them (losses). The seed is printed; set TWOPC_CRASH_SEED to repeat a run.
 */
#include "check_kafka_common.h"
#include "check_kafka_source_fill.h"
#include "tpc_kafka.h"
#include "tpc_test_ops.h"

#include <dirent.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* Scenarios at once, kills of one scenario at most, and kills in all (a scenario whose job ends
 * on its own first is followed by a fresh one). */
#define SCENARIOS      3
#define KILLS_PER_SCEN 11
#define KILLS_WANTED   (SCENARIOS * KILLS_PER_SCEN)
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

/* One input topic, one output topic, one checkpoint folder: a job killed and restarted on its
 * own, beside the others. */
typedef struct {
    char in[128], out[128], prefix[128];
    char *ckpt;
    char log[4200];
    uint64_t committed;
} scenario_t;

typedef struct {
    scenario_t sc[SCENARIOS];
    char self[4096];
    uint64_t seed;
    int restored; /* runs that resumed from a checkpoint's offsets, in all scenarios */
} crash_runs_t;

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

static void scenario_init(void *opaque, int slot)
{
    scenario_t *sc = &((crash_runs_t *)opaque)->sc[slot];
    memset(sc, 0, sizeof *sc);
    tpc_test_unique_name(sc->in, sizeof sc->in, "twopc-src-in", '-');
    tpc_test_unique_name(sc->out, sizeof sc->out, "twopc-src-out", '-');
    tpc_test_unique_name(sc->prefix, sizeof sc->prefix, "twopc-src", '-');
    kt_create_topic(bootstrap, sc->in, 3);
    kt_create_topic(bootstrap, sc->out, 3);
    sc->committed = kf_fill(bootstrap, sc->in, TXNS, 100, 4);
    sc->ckpt = tpc_test_tmpdir("kafka-source-crash");
    snprintf(sc->log, sizeof sc->log, "%s.log", sc->ckpt);
}

static pid_t scenario_spawn(void *opaque, int slot)
{
    crash_runs_t *runs = opaque;
    scenario_t *sc = &runs->sc[slot];
    const char *argv[] = {runs->self, "--child",  bootstrap, sc->in,
                          sc->out,    sc->prefix, sc->ckpt,  NULL};
    return tpc_test_spawn(argv, sc->log, -1);
}

/* The scenario's job ran to its end: check its output topic. */
static void scenario_finish(void *opaque, int slot, int kills)
{
    crash_runs_t *runs = opaque;
    scenario_t *sc = &runs->sc[slot];
    if (count_in_log(sc, "crash child:") > 0) {
        tpc_test_dump_log(sc->log);
        ck_abort_msg("a run of %s failed", sc->in);
    }
    runs->restored += count_in_log(sc, "from the restored offsets");

    values_t got = {0};
    kt_read_topic(bootstrap, sc->out, "read_committed", keep, &got);
    kf_check_t c = kf_check(got.values, got.n, sc->committed);
    if (c.dups || c.missing || c.foreign || c.disorder)
        tpc_test_dump_log(sc->log);
    ck_assert_msg(!c.dups && !c.missing && !c.foreign && !c.disorder,
                  "%d kills, seed %llu: %zu records, %ld duplicates, %ld missing, %ld foreign, "
                  "%ld out of key order",
                  kills, (unsigned long long)runs->seed, got.n, c.dups, c.missing, c.foreign,
                  c.disorder);
    free(got.values);
    unlink(sc->log);
    tpc_test_rmdir(sc->ckpt);
    free(sc->ckpt);
    sc->ckpt = NULL;
}

/* One more scenario whose kill waits for the run's first checkpoint file, so that the restart
 * resumes from the source's stored offsets: for when every planned kill landed before a
 * checkpoint (a slow or busy machine). */
static void kill_after_a_checkpoint(crash_runs_t *runs)
{
    scenario_init(runs, 0);
    scenario_t *sc = &runs->sc[0];
    pid_t pid = scenario_spawn(runs, 0);
    ck_assert_int_gt(pid, 0);
    bool written = false;
    for (int i = 0; i < 3000 && !written; i++) {
        DIR *d = opendir(sc->ckpt);
        for (struct dirent *e; d && (e = readdir(d)) != NULL;)
            written |= strncmp(e->d_name, "chk-", 4) == 0;
        if (d)
            closedir(d);
        if (!written)
            usleep(20 * 1000);
    }
    tpc_test_kill(pid);
    ck_assert_msg(written, "the scenario wrote no checkpoint in 60 s");
    pid = scenario_spawn(runs, 0);
    int status = 0;
    bool ended = tpc_test_wait(pid, 90000, &status);
    if (!ended)
        tpc_test_kill(pid);
    ck_assert_msg(ended && WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "the run after the kill %s", ended ? "failed" : "did not end");
    scenario_finish(runs, 0, 1);
}

static const char *scenario_log(void *opaque, int slot)
{
    return ((crash_runs_t *)opaque)->sc[slot].log;
}

START_TEST(test_kafka_to_kafka_exactly_once_under_kill_9)
{
    crash_runs_t runs = {.seed = tpc_test_crash_seed()};
    tpc_test_rng_t rng;
    tpc_test_rng_init(&rng, runs.seed);
    bootstrap = tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP");
    ck_assert_msg(bootstrap != NULL, "TWOPC_TEST_KAFKA_BOOTSTRAP is not set");
    ck_assert(tpc_test_self_path(runs.self, sizeof runs.self));

    /* The scenarios run side by side: most of a run is start-up and waiting for the broker. A
     * quarter of the kills land in start-up and restore, the rest while records flow. When jobs end
     * on their own before their kills, their outputs are checked and fresh scenarios follow, so
     * that every kill is made however fast the machine. */
    tpc_test_crash_slots_t plan = {.slots = SCENARIOS,
                                   .kills = KILLS_WANTED,
                                   .kills_per_scenario = KILLS_PER_SCEN,
                                   .early_one_in = 4,
                                   .early_ms = 300,
                                   .min_ms = 300,
                                   .span_ms = 1200,
                                   .last_run_ms = 60000,
                                   .opaque = &runs,
                                   .fresh = scenario_init,
                                   .spawn = scenario_spawn,
                                   .finish = scenario_finish,
                                   .log = scenario_log};
    tpc_test_crash_slots_result_t res;
    bool ok = tpc_test_crash_run_slots(&plan, &rng, &res);
    ck_assert_msg(ok, "a run of %s (seed %llu) %s, wait status %d", runs.sc[res.slot].in,
                  (unsigned long long)runs.seed, res.ended ? "failed" : "did not end", res.status);
    /* Some run resumed from a checkpoint's offsets rather than starting fresh. On a slow or busy
     * machine every planned kill may land before a checkpoint: then one more, after one. */
    if (res.kills > 0 && runs.restored == 0)
        kill_after_a_checkpoint(&runs);
    ck_assert_msg(res.kills == 0 || runs.restored > 0, "no run restored the source's offsets");
    printf("kafka source crash test: %d kill -9 in %d scenarios, %d subtask restores, seed %llu: "
           "every output read_committed, 0 duplicates, 0 missing, key order kept\n",
           res.kills, res.scenarios, runs.restored, (unsigned long long)runs.seed);
    fflush(stdout);
    ck_assert_msg(res.kills >= KILLS_WANTED, "only %d kills: the jobs ended on their own too early",
                  res.kills);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc == 7 && strcmp(argv[1], "--child") == 0)
        return child_main(argv[2], argv[3], argv[4], argv[5], argv[6]);
    Suite *s = suite_create("kafka_source_crash");
    TCase *tc = tcase_create("crash");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_kafka_to_kafka_exactly_once_under_kill_9);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
