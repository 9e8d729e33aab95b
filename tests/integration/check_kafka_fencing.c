/*
 * Two running instances of one exactly-once Kafka job, against the real broker: the older one
 * (A) is paused with SIGSTOP, as a stalled or cut-off process would be, while a second instance
 * (B) of the same job starts on the same checkpoint folder with the same transactional id
 * prefix. B restores A's latest complete checkpoint, commits its pending transactions, takes
 * over every transactional id (fencing A's producers) and runs to the end. When A resumes, it
 * fails without restarting (a restart would fence B in turn) and commits nothing more: either
 * the broker fences its writes and commits (the error, of code TPC_ERR_FENCED, names the fencing
 * and the prefix), or its
 * checkpoint directory refuses it first, since B has written newer checkpoints there. A
 * read_committed consumer finds each record exactly once, before and after A resumed.
 */
#include "check_kafka_child.h"

#define RECORDS 6000

START_TEST(test_older_instance_is_fenced_and_fails)
{
    kc_scenario_t sc;
    kc_scenario_init(&sc, "twopc-fence");
    const char *const options[] = {"records=6000", "job.checkpoint.interval.ms=100",
                                   "job.restart.attempts=3", NULL};
    pid_t older = kc_spawn(&sc, options);
    int status = 0;
    /* Let it commit a few checkpoints; it needs about 3 s for all records. */
    ck_assert_msg(!tpc_test_wait(older, 1500, &status), "the first instance ended too early");
    ck_assert_int_eq(kill(older, SIGSTOP), 0);

    kc_run_to_end(&sc, options, 60000);
    kc_check_exactly_once(&sc, RECORDS, "kafka fencing (second instance finished)");

    ck_assert_int_eq(kill(older, SIGCONT), 0);
    bool ended = tpc_test_wait(older, 60000, &status);
    if (!ended)
        tpc_test_kill(older);
    /* Fenced by the broker, or, when A was stopped while writing a checkpoint, refused by the
     * checkpoint directory that B has written into since. */
    bool fenced = kc_log_has(&sc, "the producer was fenced") &&
                  kc_log_has(&sc, "kafka child code: TPC_ERR_FENCED");
    bool hinted = kc_log_has(&sc, "its own transactional.id.prefix");
    if (kc_log_has(&sc, "another instance of the job writes"))
        fenced = hinted = true;
    bool restarted = kc_log_has(&sc, "restarts (attempt");
    if (!ended || !fenced || !hinted || restarted)
        tpc_test_dump_log(sc.log);
    ck_assert_msg(ended, "the fenced instance did not end");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 1,
                  "the fenced instance should fail (status %d)", status);
    ck_assert_msg(fenced && hinted, "the fenced instance's error does not say it was fenced");
    ck_assert_msg(!restarted, "a fenced instance must not restart");
    kc_check_exactly_once(&sc, RECORDS, "kafka fencing (fenced instance ended)");
    kc_scenario_clean(&sc);
}
END_TEST

int main(int argc, char **argv)
{
    if (kc_is_child(argc, argv))
        return kc_child_main(argc, argv);
    Suite *s = suite_create("kafka_fencing");
    TCase *tc = tcase_create("fencing");
    tcase_set_timeout(tc, 150);
    tcase_add_test(tc, test_older_instance_is_fenced_and_fails);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
