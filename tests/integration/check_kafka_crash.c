/*
 * Exactly-once into Kafka under crashes, against the real broker. A child process (see
 * check_kafka_child.h) runs sequence source -> Kafka sink with a checkpoint folder and is killed
 * with SIGKILL, then started again on the same folder and topic until a run ends on its own. A
 * read_committed consumer must then find every record exactly once: nothing lost, nothing twice.
 * Two ways to kill:
 *   - at random moments (startup and recovery, writing, pre-commit, between a checkpoint's
 *     completion and its commit), in three independent scenarios at once, 10 kills each;
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

static tpc_test_rng_t rng;

static const char *const crash_options[] = {"records=4000", NULL};

typedef struct {
    kc_scenario_t sc;
    pid_t pid;       /* the running child, 0 when none */
    int64_t kill_at; /* when to kill it (monotonic ms) */
    int kills;
    bool ended; /* a child ended on its own: no more kills */
} random_run_t;

static void start_child(random_run_t *r)
{
    r->pid = kc_spawn(&r->sc, crash_options);
    /* A quarter of the kills land in start-up and recovery, the rest while records flow. */
    int ms = tpc_test_rng_next(&rng) % 4 == 0 ? (int)(tpc_test_rng_next(&rng) % 300)
                                              : 300 + (int)(tpc_test_rng_next(&rng) % 1000);
    r->kill_at = tpc_test_now_ms() + ms;
}

START_TEST(test_kill_9_at_random_and_restart)
{
    uint64_t seed = tpc_test_crash_seed();
    tpc_test_rng_init(&rng, seed);
    random_run_t runs[SCENARIOS];
    memset(runs, 0, sizeof runs);
    for (int i = 0; i < SCENARIOS; i++) {
        kc_scenario_init(&runs[i].sc, "twopc-crash");
        start_child(&runs[i]);
    }
    /* The scenarios run side by side: most of a run is waiting for the broker. */
    for (int busy = SCENARIOS; busy > 0;) {
        busy = 0;
        for (int i = 0; i < SCENARIOS; i++) {
            random_run_t *r = &runs[i];
            if (!r->pid)
                continue;
            int status = 0;
            if (waitpid(r->pid, &status, WNOHANG) == r->pid) {
                r->pid = 0;
                r->ended = true;
                continue;
            }
            busy++;
            if (tpc_test_now_ms() < r->kill_at)
                continue;
            tpc_test_kill(r->pid);
            r->pid = 0;
            if (++r->kills < KILLS_PER_SCEN)
                start_child(r);
        }
        usleep(2000);
    }
    int kills = 0;
    for (int i = 0; i < SCENARIOS; i++) {
        kc_run_to_end(&runs[i].sc, crash_options, 60000);
        char what[128];
        snprintf(what, sizeof what, "kafka crash test (%d random kill -9, seed %llu)",
                 runs[i].kills, (unsigned long long)seed);
        kc_check_exactly_once(&runs[i].sc, RECORDS, what);
        kc_scenario_clean(&runs[i].sc);
        kills += runs[i].kills;
    }
    printf("kafka crash test: %d random kill -9 in %d scenarios\n", kills, SCENARIOS);
    ck_assert_msg(kills >= SCENARIOS * KILLS_PER_SCEN - 3,
                  "only %d kills: the jobs ended on their own too early", kills);
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
