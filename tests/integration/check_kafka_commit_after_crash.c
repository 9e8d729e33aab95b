/*
 * Committing a Kafka transaction after its producer died, over the Kafka protocol
 * (tpc_kafka_end_transaction: FindCoordinator + EndTxn), against the real broker. A child process
 * (this binary run again with "--child") opens a transaction with librdkafka, produces and
 * flushes, prints the transactional id's producer id and epoch from librdkafka's statistics, and
 * is killed with SIGKILL before it commits. Then:
 *   - committing makes exactly its records visible to a read_committed consumer; committing it
 *     again, named by its coordinator's start time, succeeds (its commit is proven), while a
 *     commit that names no start time is refused (an earlier transaction of the same producer id
 *     and epoch would be answered the same);
 *   - a transaction the broker aborted after its timeout is reported as data loss, and stays
 *     invisible;
 *   - a transaction fenced by a newer producer with the same id is reported as data loss;
 *   - an aborted transaction followed by a committed one of the same producer (same id, producer
 *     id and epoch) is reported as data loss, by the public call and by the sink's recovery from
 *     a handle: the id's state says "committed", but not of that transaction;
 *   - an unreachable cluster gives a clear error within the timeout.
 */
#include "check_kafka_common.h"
#include "kafka_sink_internal.h"
#include "tpc_kafka.h"

#include <stdlib.h>
#include <unistd.h>

#define RECORDS 100

static const char *bootstrap;

static void setup(void)
{
    bootstrap = tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP");
    ck_assert_msg(bootstrap != NULL, "TWOPC_TEST_KAFKA_BOOTSTRAP is not set");
}

/* The producer that crashes. */
static int child_main(const char *bs, const char *topic, const char *id, const char *timeout)
{
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", bs, errstr, sizeof errstr);
    return kt_crash_child(conf, topic, id, timeout, "crash", RECORDS);
}

/* Run the child, read its producer id and epoch, kill -9 it. */
static void crash_producer(const char *topic, const char *id, const char *timeout, int64_t *pid,
                           int16_t *epoch)
{
    const char *const args[] = {"--child", bootstrap, topic, id, timeout, NULL};
    kt_crash_producer(args, "producer process", pid, epoch);
}

/* The coordinator's description of @id now. */
static tpc__kafka_txn_info_t describe(const char *id)
{
    tpc__kafka_wire_conf_t wire = {.bootstrap = bootstrap};
    tpc__kafka_txn_info_t now;
    tpc_error_t *err = tpc__kafka_describe_transaction(&wire, id, 20000, &now);
    ck_assert_msg(err == NULL, "describe %s: %s", id, tpc_error_message(err));
    ck_assert_int_eq(now.error, 0);
    return now;
}

static void name_pair(char *topic, char *id, size_t cap)
{
    tpc_test_unique_name(topic, cap, "twopc-endtxn", '-');
    tpc_test_unique_name(id, cap, "twopc-endtxn-id", '-');
}

START_TEST(test_commit_after_crash_is_exact_and_idempotent)
{
    char topic[128], id[128];
    name_pair(topic, id, sizeof topic);
    kt_create_topic(bootstrap, topic, 1);
    int64_t pid;
    int16_t epoch;
    crash_producer(topic, id, "60000", &pid, &epoch);
    ck_assert_int_eq(kt_read_topic(bootstrap, topic, "read_committed", NULL, NULL), 0);

    tpc__kafka_txn_info_t open = describe(id);
    ck_assert_str_eq(open.state, "Ongoing");
    ck_assert_int_gt(open.start_ms, 0);

    tpc_error_t *err = tpc_kafka_end_transaction(bootstrap, NULL, id, pid, epoch, true, 20000);
    ck_assert_msg(err == NULL, "commit: %s", tpc_error_message(err));
    ck_assert_int_eq(kt_read_topic(bootstrap, topic, "read_committed", NULL, NULL), RECORDS);

    /* Named by its start time, the commit is proven again; unnamed, it cannot be. */
    err = tpc_kafka_commit_transaction(bootstrap, NULL, id, pid, epoch, open.start_ms, 20000);
    ck_assert_msg(err == NULL, "second commit, named: %s", tpc_error_message(err));
    err = tpc_kafka_end_transaction(bootstrap, NULL, id, pid, epoch, true, 20000);
    ck_assert_msg(err && tpc_error_code(err) == TPC_ERR_STATE,
                  "second commit, unnamed: expected TPC_ERR_STATE, got %s",
                  err ? tpc_error_message(err) : "success");
    ck_assert_msg(strstr(tpc_error_hint_text(err), "start time") != NULL, "%s",
                  tpc_error_hint_text(err));
    tpc_error_destroy(err);
    ck_assert_int_eq(kt_read_topic(bootstrap, topic, "read_committed", NULL, NULL), RECORDS);

    err = tpc_kafka_end_transaction(bootstrap, NULL, id, pid, epoch, false, 20000);
    ck_assert_msg(err && tpc_error_code(err) == TPC_ERR_STATE,
                  "abort of a committed transaction must fail with TPC_ERR_STATE");
    tpc_error_destroy(err);
}
END_TEST

START_TEST(test_timed_out_transaction_is_data_loss)
{
    char topic[128], id[128];
    name_pair(topic, id, sizeof topic);
    kt_create_topic(bootstrap, topic, 1);
    int64_t pid;
    int16_t epoch;
    crash_producer(topic, id, "1000", &pid, &epoch);
    sleep(3); /* the broker aborts it within timeout + its 1 s check interval */
    tpc_error_t *err = tpc_kafka_end_transaction(bootstrap, NULL, id, pid, epoch, true, 20000);
    ck_assert_msg(err && tpc_error_code(err) == TPC_ERR_DATA_LOSS, "expected data loss, got %s",
                  err ? tpc_error_message(err) : "success");
    ck_assert_msg(strstr(tpc_error_message(err), id) != NULL, "message names no id: %s",
                  tpc_error_message(err));
    tpc_error_destroy(err);
    ck_assert_int_eq(kt_read_topic(bootstrap, topic, "read_committed", NULL, NULL), 0);
    /* Aborting what is already aborted is success. */
    err = tpc_kafka_end_transaction(bootstrap, NULL, id, pid, epoch, false, 20000);
    ck_assert_msg(err == NULL, "abort: %s", tpc_error_message(err));
}
END_TEST

START_TEST(test_fenced_transaction_is_data_loss)
{
    char topic[128], id[128], errstr[512];
    name_pair(topic, id, sizeof topic);
    kt_create_topic(bootstrap, topic, 1);
    int64_t pid;
    int16_t epoch;
    crash_producer(topic, id, "60000", &pid, &epoch);
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    kt_set(conf, "bootstrap.servers", bootstrap);
    kt_set(conf, "transactional.id", id);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    ck_assert_ptr_nonnull(rk);
    ck_assert_ptr_null(rd_kafka_init_transactions(rk, KT_TIMEOUT_MS));
    rd_kafka_destroy(rk);
    tpc_error_t *err = tpc_kafka_end_transaction(bootstrap, NULL, id, pid, epoch, true, 20000);
    ck_assert_msg(err && tpc_error_code(err) == TPC_ERR_DATA_LOSS, "expected data loss, got %s",
                  err ? tpc_error_message(err) : "success");
    tpc_error_destroy(err);
    ck_assert_int_eq(kt_read_topic(bootstrap, topic, "read_committed", NULL, NULL), 0);
}
END_TEST

static void count_lost(void *opaque, const rd_kafka_message_t *msg)
{
    if (msg->len >= 4 && memcmp(msg->payload, "lost", 4) == 0)
        ++*(long *)opaque;
}

/* On a live producer: T1 (its records tagged "lost"), aborted; T2 ("kept") of the same producer
 * id and epoch, committed. @returns how T1 was named while it was open. */
static tpc__kafka_txn_info_t abort_then_commit(const char *topic, const char *id)
{
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    kt_set(conf, "bootstrap.servers", bootstrap);
    kt_set(conf, "transactional.id", id);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    ck_assert_msg(rk != NULL, "%s", errstr);
    ck_assert_ptr_null(rd_kafka_init_transactions(rk, KT_TIMEOUT_MS));
    tpc__kafka_txn_info_t t1 = {0};
    for (int n = 0; n < 2; n++) {
        ck_assert_ptr_null(rd_kafka_begin_transaction(rk));
        for (int i = 0; i < 10; i++) {
            char value[32];
            int len = snprintf(value, sizeof value, "%s-%d", n ? "kept" : "lost", i);
            ck_assert_int_eq(
                rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_VALUE(value, (size_t)len),
                                  RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
                0);
        }
        ck_assert_int_eq(rd_kafka_flush(rk, KT_TIMEOUT_MS), 0);
        if (n == 0) {
            t1 = describe(id);
            ck_assert_str_eq(t1.state, "Ongoing");
            ck_assert_ptr_null(rd_kafka_abort_transaction(rk, KT_TIMEOUT_MS));
        } else {
            ck_assert_ptr_null(rd_kafka_commit_transaction(rk, KT_TIMEOUT_MS));
        }
    }
    rd_kafka_destroy(rk);
    tpc__kafka_txn_info_t now = describe(id);
    ck_assert_int_eq(now.producer_id, t1.producer_id);
    ck_assert_msg(now.start_ms != t1.start_ms, "two transactions with one start time");
    return t1;
}

START_TEST(test_aborted_before_a_committed_one_is_data_loss)
{
    char topic[128], id[128];
    name_pair(topic, id, sizeof topic);
    kt_create_topic(bootstrap, topic, 1);
    tpc__kafka_txn_info_t t1 = abort_then_commit(topic, id);
    int16_t epoch = (int16_t)t1.producer_epoch;

    tpc_error_t *err = tpc_kafka_commit_transaction(bootstrap, NULL, id, t1.producer_id, epoch,
                                                    t1.start_ms, 20000);
    ck_assert_msg(err && tpc_error_code(err) == TPC_ERR_DATA_LOSS, "expected data loss, got %s",
                  err ? tpc_error_message(err) : "success");
    ck_assert_msg(strstr(tpc_error_message(err), id) != NULL, "%s", tpc_error_message(err));
    tpc_error_destroy(err);
    /* Unnamed it is not "committed" either. */
    err = tpc_kafka_end_transaction(bootstrap, NULL, id, t1.producer_id, epoch, true, 20000);
    ck_assert_msg(err != NULL, "an unnamed commit of the aborted transaction succeeded");
    tpc_error_destroy(err);

    /* The sink's recovery, from the handle a checkpoint would have stored for T1. */
    unsigned char b[256], *p = b;
    size_t idlen = strlen(id);
    tpc_txn_put_be(&p, 2, 1);
    tpc_txn_put_be(&p, (uint64_t)t1.producer_id, 8);
    tpc_txn_put_be(&p, (uint64_t)epoch, 2);
    tpc_txn_put_be(&p, 7, 8);
    tpc_txn_put_be(&p, 7, 8);
    tpc_txn_put_be(&p, idlen, 2);
    memcpy(p, id, idlen);
    p += idlen;
    tpc_txn_put_be(&p, (uint64_t)t1.start_ms, 8);
    void *txn = NULL;
    err = tpc__kafka_ops.deserialize(NULL, b, (size_t)(p - b), &txn);
    ck_assert_msg(err == NULL, "deserialize: %s", tpc_error_message(err));
    tpc__kafka_conf_t conf = {.recovery_timeout_ms = 20000};
    tpc__kafka_sub_t sub = {.conf = &conf, .wire = {.bootstrap = bootstrap}};
    err = tpc__kafka_ops.recover_and_commit(&sub, txn);
    ck_assert_msg(err && tpc_error_code(err) == TPC_ERR_DATA_LOSS,
                  "recovery: expected data loss, got %s", err ? tpc_error_message(err) : "success");
    ck_assert_msg(strstr(tpc_error_message(err), "checkpoint 7") != NULL, "%s",
                  tpc_error_message(err));
    tpc_error_destroy(err);
    tpc__kafka_ops.free_txn(NULL, txn);

    long lost = 0;
    long seen = kt_read_topic(bootstrap, topic, "read_committed", count_lost, &lost);
    ck_assert_int_eq(seen, 10); /* T2's records only */
    ck_assert_int_eq(lost, 0);
}
END_TEST

START_TEST(test_unreachable_cluster_fails_within_timeout)
{
    time_t t0 = time(NULL);
    tpc_error_t *err =
        tpc_kafka_end_transaction("127.0.0.1:1", NULL, "twopc-nowhere", 1, 0, true, 1000);
    ck_assert_ptr_nonnull(err);
    ck_assert_msg(tpc_error_code(err) == TPC_ERR_CONNECT || tpc_error_code(err) == TPC_ERR_TIMEOUT,
                  "unexpected error: %s", tpc_error_message(err));
    ck_assert_msg(strstr(tpc_error_message(err), "127.0.0.1:1") != NULL, "%s",
                  tpc_error_message(err));
    tpc_error_destroy(err);
    ck_assert_int_le(time(NULL) - t0, 3);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc == 6 && strcmp(argv[1], "--child") == 0)
        return child_main(argv[2], argv[3], argv[4], argv[5]);
    Suite *s = suite_create("kafka_commit_after_crash");
    TCase *tc = tcase_create("end_txn");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_commit_after_crash_is_exact_and_idempotent);
    tcase_add_test(tc, test_timed_out_transaction_is_data_loss);
    tcase_add_test(tc, test_fenced_transaction_is_data_loss);
    tcase_add_test(tc, test_aborted_before_a_committed_one_is_data_loss);
    tcase_add_test(tc, test_unreachable_cluster_fails_within_timeout);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
