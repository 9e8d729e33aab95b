/*
 * Exactly-once into Kafka under crashes, against the real broker. A child process (see
 * check_kafka_child.h) runs sequence source -> Kafka sink with a checkpoint folder and is killed
 * with SIGKILL, then started again on the same folder and topic until a run ends on its own. A
 * read_committed consumer must then find every record exactly once: nothing lost, nothing twice.
 * Two ways to kill:
 *   - at random moments (startup and recovery, writing, pre-commit, between a checkpoint's
 *     completion and its commit), in three independent scenarios at once, 30 kills in all (a
 *     scenario whose job ends before its 10th kill is checked and followed by a fresh one);
 *   - exactly when a checkpoint has completed and before its transaction is committed (the child
 *     kills itself in the checkpoint callback): the next run must commit that transaction with
 *     EndTxn during recovery, and its records appear once.
 * Restarts also show that lingering transactions of killed runs never block the consumer. The
 * seed is printed; set TWOPC_CRASH_SEED to repeat a run.
 */
#include "check_kafka_child.h"

#define RECORDS        4000
#define SCENARIOS      3
#define KILLS_PER_SCEN 10
#define KILLS_WANTED   (SCENARIOS * KILLS_PER_SCEN)

static const char *const crash_options[] = {"records=4000", NULL};

typedef struct {
    kc_scenario_t sc[SCENARIOS];
    uint64_t seed;
} random_runs_t;

static void fresh_scenario(void *opaque, int slot)
{
    random_runs_t *runs = opaque;
    kc_scenario_init(&runs->sc[slot], "twopc-crash");
}

static pid_t spawn_child(void *opaque, int slot)
{
    random_runs_t *runs = opaque;
    return kc_spawn(&runs->sc[slot], crash_options);
}

static void finish_scenario(void *opaque, int slot, int kills)
{
    random_runs_t *runs = opaque;
    char what[128];
    snprintf(what, sizeof what, "kafka crash test (%d random kill -9, seed %llu)", kills,
             (unsigned long long)runs->seed);
    kc_check_exactly_once(&runs->sc[slot], RECORDS, what);
    kc_scenario_clean(&runs->sc[slot]);
}

static const char *scenario_log(void *opaque, int slot)
{
    random_runs_t *runs = opaque;
    return runs->sc[slot].log;
}

START_TEST(test_kill_9_at_random_and_restart)
{
    random_runs_t runs = {.seed = tpc_test_crash_seed()};
    tpc_test_rng_t rng;
    tpc_test_rng_init(&rng, runs.seed);
    /* The scenarios run side by side: most of a run is waiting for the broker. A quarter of the
     * kills land in start-up and recovery, the rest while records flow. When jobs end
     * on their own before their kills, their outputs are checked and fresh scenarios follow, so
     * that every kill is made however fast the machine. */
    tpc_test_crash_slots_t plan = {.slots = SCENARIOS,
                                   .kills = KILLS_WANTED,
                                   .kills_per_scenario = KILLS_PER_SCEN,
                                   .early_one_in = 4,
                                   .early_ms = 300,
                                   .min_ms = 300,
                                   .span_ms = 1000,
                                   .last_run_ms = 60000,
                                   .opaque = &runs,
                                   .fresh = fresh_scenario,
                                   .spawn = spawn_child,
                                   .finish = finish_scenario,
                                   .log = scenario_log};
    tpc_test_crash_slots_result_t res;
    bool ok = tpc_test_crash_run_slots(&plan, &rng, &res);
    ck_assert_msg(ok, "a run of %s (seed %llu) %s, wait status %d", runs.sc[res.slot].topic,
                  (unsigned long long)runs.seed, res.ended ? "failed" : "did not end", res.status);
    printf("kafka crash test: %d random kill -9 in %d scenarios\n", res.kills, res.scenarios);
    ck_assert_msg(res.kills >= KILLS_WANTED, "only %d kills: the jobs ended on their own too early",
                  res.kills);
}
END_TEST

START_TEST(test_kill_between_completion_and_commit)
{
    kc_scenario_t sc;
    kc_scenario_init(&sc, "twopc-crash");
    for (int at = 3; at <= 9; at += 3) {
        char kill_at[32];
        snprintf(kill_at, sizeof kill_at, "kill_at=%d", at);
        const char *const options[] = {"records=3000", kill_at, NULL};
        pid_t pid = kc_spawn(&sc, options);
        int status = 0;
        ck_assert(tpc_test_wait(pid, 30000, &status));
        ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                      "the child was to kill itself at checkpoint %d", at);
    }
    const char *const options[] = {"records=3000", NULL};
    kc_run_to_end(&sc, options, 60000);
    bool recovered = kc_log_has(&sc, "during recovery");
    if (!recovered)
        tpc_test_dump_log(sc.log);
    ck_assert_msg(recovered, "no transaction was committed during recovery");
    kc_check_exactly_once(&sc, 3000,
                          "kafka crash test (3 kills after checkpoint completion, before commit)");
    kc_scenario_clean(&sc);
}
END_TEST

int main(int argc, char **argv)
{
    if (kc_is_child(argc, argv))
        return kc_child_main(argc, argv);
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
