/*
 * Smoke test of the Kafka broker the integration tests run against: it must be a real broker,
 * because the exactly-once guarantees of twopc rest on what only a real one does. It shows, through
 * librdkafka, that
 *   - aborted transactional records are hidden from read_committed consumers (and only from them),
 *   - records of a still-open transaction are hidden until it commits (the last stable offset),
 *   - a second producer with the same transactional.id fences the first.
 * librdkafka's built-in mock cluster gets each of these wrong. TWOPC_TEST_KAFKA_MOCK=1 points the
 * test at a mock cluster instead of TWOPC_TEST_KAFKA_BOOTSTRAP, to show that it then fails.
 */
#include "tpc_test_env.h"

#include <check.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TIMEOUT_MS 30000
#define NAME_LEN   128

/* Bootstrap servers of the broker under test; in mock mode, of the mock cluster held by
 * mock_holder. */
static const char *bootstrap;
static rd_kafka_t *mock_holder;

static void set_or_die(rd_kafka_conf_t *conf, const char *name, const char *value)
{
    char errstr[512];
    if (rd_kafka_conf_set(conf, name, value, errstr, sizeof errstr) != RD_KAFKA_CONF_OK)
        ck_abort_msg("could not set %s=%s: %s", name, value, errstr);
}

static rd_kafka_conf_t *base_conf(void)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set_or_die(conf, "bootstrap.servers", bootstrap);
    return conf;
}

static void setup(void)
{
    char errstr[512];

    if (!tpc_test_env("TWOPC_TEST_KAFKA_MOCK")) {
        bootstrap = tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP");
        ck_assert_msg(bootstrap != NULL, "TWOPC_TEST_KAFKA_BOOTSTRAP is not set");
        return;
    }
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set_or_die(conf, "test.mock.num.brokers", "3");
    mock_holder = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    ck_assert_msg(mock_holder != NULL, "could not create a mock cluster: %s", errstr);
    bootstrap = rd_kafka_mock_cluster_bootstraps(rd_kafka_handle_mock_cluster(mock_holder));
    fprintf(stderr, "TWOPC_TEST_KAFKA_MOCK is set: testing librdkafka's mock cluster at %s\n",
            bootstrap);
}

static void teardown(void)
{
    if (mock_holder)
        rd_kafka_destroy(mock_holder);
    mock_holder = NULL;
}

static void create_topic(const char *topic)
{
    char errstr[512];

    if (mock_holder) {
        rd_kafka_resp_err_t err =
            rd_kafka_mock_topic_create(rd_kafka_handle_mock_cluster(mock_holder), topic, 1, 1);
        ck_assert_msg(err == RD_KAFKA_RESP_ERR_NO_ERROR, "mock topic: %s", rd_kafka_err2str(err));
        return;
    }

    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, base_conf(), errstr, sizeof errstr);
    ck_assert_msg(rk != NULL, "%s", errstr);
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, 1, 1, errstr, sizeof errstr);
    ck_assert_msg(nt != NULL, "%s", errstr);
    rd_kafka_queue_t *queue = rd_kafka_queue_new(rk);
    rd_kafka_CreateTopics(rk, &nt, 1, NULL, queue);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(queue, TIMEOUT_MS);
    ck_assert_msg(ev != NULL, "no answer to CreateTopics for \"%s\"", topic);
    ck_assert_msg(!rd_kafka_event_error(ev), "could not create topic \"%s\": %s", topic,
                  rd_kafka_event_error_string(ev));

    size_t n = 0;
    const rd_kafka_topic_result_t **results =
        rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_msg(!rd_kafka_topic_result_error(results[0]), "could not create topic \"%s\": %s",
                  topic, rd_kafka_topic_result_error_string(results[0]));

    rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(queue);
    rd_kafka_NewTopic_destroy(nt);
    rd_kafka_destroy(rk);
}

/* Delivery reports and errors of one producer. */
typedef struct {
    int delivered;
    int failed;
} delivery_count_t;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    delivery_count_t *count = opaque;
    (void)rk;
    if (msg->err)
        count->failed++;
    else
        count->delivered++;
}

static void on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    (void)opaque;
    fprintf(stderr, "%s: %s: %s\n", rd_kafka_name(rk), rd_kafka_err2name(err), reason);
}

static rd_kafka_t *new_txn_producer(const char *transactional_id, delivery_count_t *count)
{
    char errstr[512];
    rd_kafka_conf_t *conf = base_conf();

    set_or_die(conf, "transactional.id", transactional_id);
    set_or_die(conf, "transaction.timeout.ms", "60000");
    set_or_die(conf, "linger.ms", "5");
    rd_kafka_conf_set_opaque(conf, count);
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_conf_set_error_cb(conf, on_error);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    ck_assert_msg(rk != NULL, "could not create producer: %s", errstr);
    return rk;
}

static void txn_ok(rd_kafka_error_t *error, const char *what)
{
    if (error) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", rd_kafka_error_string(error));
        rd_kafka_error_destroy(error);
        ck_abort_msg("%s failed: %s", what, msg);
    }
}

/* Produce values "<label>-0" .. "<label>-<n-1>". @returns the first error. */
static rd_kafka_resp_err_t produce(rd_kafka_t *rk, const char *topic, const char *label, int n)
{
    for (int i = 0; i < n; i++) {
        char value[64];
        int len = snprintf(value, sizeof value, "%s-%d", label, i);
        rd_kafka_resp_err_t err;
        while ((err = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic),
                                        RD_KAFKA_V_VALUE(value, (size_t)len),
                                        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                        RD_KAFKA_V_END)) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(rk, 10);
        if (err)
            return err;
    }
    return RD_KAFKA_RESP_ERR_NO_ERROR;
}

static void produce_ok(rd_kafka_t *rk, const char *topic, const char *label, int n)
{
    rd_kafka_resp_err_t err = produce(rk, topic, label, n);
    ck_assert_msg(err == RD_KAFKA_RESP_ERR_NO_ERROR, "produce: %s", rd_kafka_err2str(err));
}

static void flush_all(rd_kafka_t *rk, delivery_count_t *count, int expected)
{
    rd_kafka_resp_err_t err = rd_kafka_flush(rk, TIMEOUT_MS);
    ck_assert_msg(err == RD_KAFKA_RESP_ERR_NO_ERROR, "flush: %s", rd_kafka_err2str(err));
    ck_assert_int_eq(count->failed, 0);
    ck_assert_int_eq(count->delivered, expected);
}

/* What a consumer read from the topic: how many records, and how many carry each label. */
typedef struct {
    int total;
    int with_label[4];
} read_count_t;

/* Read partition 0 of the topic from the beginning to its end as seen with the given isolation
 * level (the high watermark for read_uncommitted, the last stable offset for read_committed),
 * counting the values that start with each of the labels. */
static read_count_t read_topic(const char *topic, const char *isolation, const char *const *labels,
                               int n_labels)
{
    char errstr[512], group[NAME_LEN];
    read_count_t count = {0, {0}};
    rd_kafka_conf_t *conf = base_conf();

    set_or_die(conf, "group.id", tpc_test_unique_name(group, sizeof group, "twopc-smoke", '-'));
    set_or_die(conf, "isolation.level", isolation);
    set_or_die(conf, "enable.partition.eof", "true");
    set_or_die(conf, "enable.auto.commit", "false");
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    ck_assert_msg(rk != NULL, "could not create consumer: %s", errstr);
    rd_kafka_poll_set_consumer(rk);

    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(parts, topic, 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_resp_err_t err = rd_kafka_assign(rk, parts);
    ck_assert_msg(err == RD_KAFKA_RESP_ERR_NO_ERROR, "assign: %s", rd_kafka_err2str(err));
    rd_kafka_topic_partition_list_destroy(parts);

    time_t deadline = time(NULL) + TIMEOUT_MS / 1000;
    int at_end = 0;
    while (!at_end && time(NULL) < deadline) {
        rd_kafka_message_t *msg = rd_kafka_consumer_poll(rk, 200);
        if (!msg)
            continue;
        if (msg->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            at_end = 1;
        } else if (msg->err) {
            fprintf(stderr, "consumer (%s): %s\n", isolation, rd_kafka_message_errstr(msg));
        } else {
            count.total++;
            for (int i = 0; i < n_labels; i++) {
                size_t len = strlen(labels[i]);
                if (msg->len > len && memcmp(msg->payload, labels[i], len) == 0 &&
                    ((const char *)msg->payload)[len] == '-')
                    count.with_label[i]++;
            }
        }
        rd_kafka_message_destroy(msg);
    }
    ck_assert_msg(at_end, "%s consumer did not reach the end of \"%s\" in %d s", isolation, topic,
                  TIMEOUT_MS / 1000);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return count;
}

START_TEST(test_read_committed_skips_aborted_records)
{
    static const char *const labels[] = {"committed", "aborted"};
    char topic[NAME_LEN], txn_id[NAME_LEN];
    delivery_count_t count = {0, 0};

    create_topic(tpc_test_unique_name(topic, sizeof topic, "twopc-smoke", '-'));
    rd_kafka_t *rk =
        new_txn_producer(tpc_test_unique_name(txn_id, sizeof txn_id, "twopc-smoke", '-'), &count);

    txn_ok(rd_kafka_init_transactions(rk, TIMEOUT_MS), "init_transactions");
    txn_ok(rd_kafka_begin_transaction(rk), "begin_transaction");
    produce_ok(rk, topic, "committed", 100);
    txn_ok(rd_kafka_commit_transaction(rk, TIMEOUT_MS), "commit_transaction");

    /* The aborted records really reach the broker's log before the abort. */
    txn_ok(rd_kafka_begin_transaction(rk), "begin_transaction");
    produce_ok(rk, topic, "aborted", 100);
    flush_all(rk, &count, 200);
    txn_ok(rd_kafka_abort_transaction(rk, TIMEOUT_MS), "abort_transaction");
    rd_kafka_destroy(rk);

    read_count_t committed = read_topic(topic, "read_committed", labels, 2);
    ck_assert_msg(committed.with_label[1] == 0,
                  "read_committed consumer saw %d aborted records: aborted data is not filtered",
                  committed.with_label[1]);
    ck_assert_int_eq(committed.with_label[0], 100);
    ck_assert_int_eq(committed.total, 100);

    read_count_t uncommitted = read_topic(topic, "read_uncommitted", labels, 2);
    ck_assert_int_eq(uncommitted.with_label[0], 100);
    ck_assert_int_eq(uncommitted.with_label[1], 100);
    ck_assert_int_eq(uncommitted.total, 200);
}
END_TEST

START_TEST(test_open_transaction_is_invisible_until_commit)
{
    static const char *const labels[] = {"open"};
    char topic[NAME_LEN], txn_id[NAME_LEN];
    delivery_count_t count = {0, 0};

    create_topic(tpc_test_unique_name(topic, sizeof topic, "twopc-smoke", '-'));
    rd_kafka_t *rk =
        new_txn_producer(tpc_test_unique_name(txn_id, sizeof txn_id, "twopc-smoke", '-'), &count);
    txn_ok(rd_kafka_init_transactions(rk, TIMEOUT_MS), "init_transactions");
    txn_ok(rd_kafka_begin_transaction(rk), "begin_transaction");
    produce_ok(rk, topic, "open", 10);
    flush_all(rk, &count, 10);

    read_count_t before = read_topic(topic, "read_committed", labels, 1);
    ck_assert_msg(
        before.total == 0,
        "read_committed consumer saw %d records of an open transaction: the broker has no "
        "last stable offset",
        before.total);
    ck_assert_int_eq(read_topic(topic, "read_uncommitted", labels, 1).total, 10);

    txn_ok(rd_kafka_commit_transaction(rk, TIMEOUT_MS), "commit_transaction");
    rd_kafka_destroy(rk);
    ck_assert_int_eq(read_topic(topic, "read_committed", labels, 1).with_label[0], 10);
}
END_TEST

START_TEST(test_second_producer_fences_first)
{
    static const char *const labels[] = {"first", "second"};
    char topic[NAME_LEN], txn_id[NAME_LEN], reason[512];
    delivery_count_t count1 = {0, 0}, count2 = {0, 0};

    create_topic(tpc_test_unique_name(topic, sizeof topic, "twopc-smoke", '-'));
    tpc_test_unique_name(txn_id, sizeof txn_id, "twopc-smoke", '-');

    rd_kafka_t *first = new_txn_producer(txn_id, &count1);
    txn_ok(rd_kafka_init_transactions(first, TIMEOUT_MS), "init_transactions (first)");
    txn_ok(rd_kafka_begin_transaction(first), "begin_transaction (first)");
    produce_ok(first, topic, "first", 1);
    flush_all(first, &count1, 1);

    /* Same transactional.id: the broker bumps the epoch and aborts the first one's transaction. */
    rd_kafka_t *second = new_txn_producer(txn_id, &count2);
    txn_ok(rd_kafka_init_transactions(second, TIMEOUT_MS), "init_transactions (second)");
    txn_ok(rd_kafka_begin_transaction(second), "begin_transaction (second)");
    produce_ok(second, topic, "second", 1);
    txn_ok(rd_kafka_commit_transaction(second, TIMEOUT_MS), "commit_transaction (second)");

    /* The first producer learns that it is fenced on its next request; its produce call itself may
     * already fail if it has. */
    produce(first, topic, "first", 1);
    rd_kafka_error_t *error = rd_kafka_commit_transaction(first, TIMEOUT_MS);
    ck_assert_msg(error != NULL,
                  "the first producer committed after a second producer with the "
                  "same transactional.id was initialised: the broker does not fence");
    ck_assert_msg(rd_kafka_error_is_fatal(error),
                  "commit of the fenced producer failed, but not fatally: %s",
                  rd_kafka_error_string(error));
    rd_kafka_error_destroy(error);
    rd_kafka_resp_err_t fatal = rd_kafka_fatal_error(first, reason, sizeof reason);
    ck_assert_msg(fatal == RD_KAFKA_RESP_ERR__FENCED ||
                      fatal == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
                      fatal == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH,
                  "fatal error of the first producer is %s (%s), not a fencing error",
                  rd_kafka_err2name(fatal), reason);
    rd_kafka_destroy(first);
    rd_kafka_destroy(second);

    read_count_t seen = read_topic(topic, "read_committed", labels, 2);
    ck_assert_int_eq(seen.with_label[0], 0);
    ck_assert_int_eq(seen.with_label[1], 1);
}
END_TEST

static Suite *kafka_smoke_suite(void)
{
    Suite *s = suite_create("kafka_smoke");
    TCase *tc = tcase_create("transactions");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_read_committed_skips_aborted_records);
    tcase_add_test(tc, test_open_transaction_is_invisible_until_commit);
    tcase_add_test(tc, test_second_producer_fences_first);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(kafka_smoke_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
