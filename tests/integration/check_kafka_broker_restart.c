/*
 * The broker is killed and started again (TWOPC_TEST_KAFKA_RESTART, set by with-services.sh when
 * it started the broker) while an exactly-once job writes to it. The job fails over to restarts
 * (restart.attempts) or waits, and once the broker is back it restores its latest checkpoint,
 * commits what that checkpoint left pending and finishes: a read_committed consumer finds every
 * record exactly once. The test is skipped, saying so, for a broker started elsewhere.
 */
#include "check_kafka_child.h"

#define RECORDS 8000

START_TEST(test_broker_restart_mid_run)
{
    const char *restart = tpc_test_env("TWOPC_TEST_KAFKA_RESTART");
    if (!restart) {
        fprintf(stderr, "check_kafka_broker_restart: TWOPC_TEST_KAFKA_RESTART is not set (the "
                        "broker was started elsewhere), so the broker restart test is skipped\n");
        return;
    }
    kc_scenario_t sc;
    kc_scenario_init(&sc, "twopc-brestart");
    const char *const options[] = {"records=8000",
                                   "job.checkpoint.interval.ms=100",
                                   "job.restart.attempts=40",
                                   "job.restart.delay.ms=500",
                                   "sink.open.timeout.ms=5000",
                                   NULL};
    pid_t pid = kc_spawn(&sc, options);
    int status = 0;
    ck_assert_msg(!tpc_test_wait(pid, 1500, &status), "the job ended before the broker restart");
    int64_t t0 = tpc_test_now_ms();
    int rc = system(restart);
    ck_assert_msg(rc == 0, "the broker restart command failed (%d)", rc);
    int64_t down = tpc_test_now_ms() - t0;
    bool ended = tpc_test_wait(pid, 120000, &status);
    if (!ended)
        tpc_test_kill(pid);
    if (!ended || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        tpc_test_dump_log(sc.log);
    ck_assert_msg(ended, "the job did not end within 120 s of the broker restart");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the job failed");
    /* What the outage cost in log lines: librdkafka's repeats are counted, not repeated. */
    long lines = 0;
    FILE *lf = fopen(sc.log, "r");
    for (int ch; lf && (ch = fgetc(lf)) != EOF;)
        lines += ch == '\n';
    if (lf)
        fclose(lf);
    char what[200];
    snprintf(what, sizeof what, "kafka broker restart (broker away %lld ms, job %s, %ld log lines)",
             (long long)down, kc_log_has(&sc, "restarts (attempt") ? "restarted" : "waited", lines);
    kc_check_exactly_once(&sc, RECORDS, what);
    kc_scenario_clean(&sc);
}
END_TEST

int main(int argc, char **argv)
{
    if (kc_is_child(argc, argv))
        return kc_child_main(argc, argv);
    Suite *s = suite_create("kafka_broker_restart");
    TCase *tc = tcase_create("broker_restart");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_broker_restart_mid_run);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
