/*
 * After a crash, a read_committed consumer is not blocked by the transactions the crashed run
 * left open. A first run writes into a transaction that is never pre-committed (no checkpoint is
 * taken) and is killed with SIGKILL: its open transaction holds back the topic's last stable
 * offset, which would keep read_committed consumers from everything written after it until
 * kafka.transaction.timeout.ms (120 s here) ends it. The restarted job aborts it while it opens;
 * a read_committed consumer then sees the restarted job's records (other data, written after the
 * lingering transaction) within seconds, well before the timeout, and in the end every record
 * exactly once.
 */
#include "check_kafka_child.h"

#include <dirent.h>

#define RECORDS        2000
#define TXN_TIMEOUT_MS 120000

static rd_kafka_t *consumer(const kc_scenario_t *sc, const char *isolation)
{
    char errstr[512], group[128];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    kt_set(conf, "bootstrap.servers", sc->bootstrap);
    kt_set(conf, "group.id", tpc_test_unique_name(group, sizeof group, "twopc-linger", '-'));
    kt_set(conf, "isolation.level", isolation);
    kt_set(conf, "enable.auto.commit", "false");
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    ck_assert_msg(rk != NULL, "could not create consumer: %s", errstr);
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, sc->topic, 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
    ck_assert_int_eq(rd_kafka_assign(rk, list), 0);
    rd_kafka_topic_partition_list_destroy(list);
    return rk;
}

/* Milliseconds until @rk returns its first record, or -1 after @limit_ms. */
static int64_t first_record_ms(rd_kafka_t *rk, int64_t limit_ms)
{
    int64_t t0 = tpc_test_now_ms();
    while (tpc_test_now_ms() - t0 < limit_ms) {
        rd_kafka_message_t *msg = rd_kafka_consumer_poll(rk, 50);
        bool record = msg && !msg->err;
        if (msg)
            rd_kafka_message_destroy(msg);
        if (record)
            return tpc_test_now_ms() - t0;
    }
    return -1;
}

static bool has_checkpoint(const char *dir)
{
    DIR *d = opendir(dir);
    bool found = false;
    for (struct dirent *e; d && !found && (e = readdir(d));)
        found = strncmp(e->d_name, "chk-", 4) == 0;
    if (d)
        closedir(d);
    return found;
}

static void close_consumer(rd_kafka_t *rk)
{
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
}

START_TEST(test_lingering_transaction_does_not_block_consumers_after_restart)
{
    kc_scenario_t sc;
    kc_scenario_init(&sc, "twopc-linger");
    char timeout[64];
    snprintf(timeout, sizeof timeout, "sink.kafka.transaction.timeout.ms=%d", TXN_TIMEOUT_MS);
    /* No checkpoint in 10 minutes keeps the transaction open; the sink key tells the open-time
     * check (timeout >= 3 checkpoint intervals) to judge by 1 s instead of the job's interval. */
    const char *const lingering[] = {"records=1000000", "job.checkpoint.interval.ms=600000",
                                     "sink.checkpoint.interval.ms=1000", timeout, NULL};
    pid_t first = kc_spawn(&sc, lingering);
    rd_kafka_t *uncommitted = consumer(&sc, "read_uncommitted");
    int64_t seen = first_record_ms(uncommitted, 30000);
    close_consumer(uncommitted);
    tpc_test_kill(first);
    ck_assert_msg(seen >= 0, "the first run wrote nothing within 30 s");
    ck_assert_msg(!has_checkpoint(sc.ckpt), "the first run took a checkpoint");

    rd_kafka_t *committed = consumer(&sc, "read_committed");
    const char *const restarted[] = {"records=2000", timeout, NULL};
    pid_t second = kc_spawn(&sc, restarted);
    int64_t visible = first_record_ms(committed, 60000);
    close_consumer(committed);
    int status = 0;
    bool ended = tpc_test_wait(second, 60000, &status);
    if (!ended)
        tpc_test_kill(second);
    if (visible < 0 || !ended || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        tpc_test_dump_log(sc.log);
    ck_assert_msg(visible >= 0, "read_committed consumer saw nothing within 60 s of the restart");
    ck_assert_msg(ended && WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "the restarted job did not finish");
    printf("kafka lingering: read_committed consumer saw the restarted job's data %lld ms after "
           "the restart (transaction timeout %d ms)\n",
           (long long)visible, TXN_TIMEOUT_MS);
    ck_assert_msg(visible < 20000,
                  "the consumer waited %lld ms: blocked by a lingering transaction",
                  (long long)visible);
    kc_check_exactly_once(&sc, RECORDS, "kafka lingering (restarted job finished)");
    kc_scenario_clean(&sc);
}
END_TEST

int main(int argc, char **argv)
{
    if (kc_is_child(argc, argv))
        return kc_child_main(argc, argv);
    Suite *s = suite_create("kafka_lingering");
    TCase *tc = tcase_create("lingering");
    tcase_set_timeout(tc, 150);
    tcase_add_test(tc, test_lingering_transaction_does_not_block_consumers_after_restart);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
