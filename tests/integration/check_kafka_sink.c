/*
 * The Kafka sink in a job against the real broker: a bounded exactly-once job (two source
 * subtasks, one ending early, into two sink subtasks) leaves every record exactly once in the
 * topic as a read_committed consumer reads it, its final checkpoint committing the last
 * transactions; at-least-once delivers every record; bad configurations fail at open with a clear
 * message: no transactional id prefix, a transaction timeout above the broker's maximum or too
 * close to the checkpoint interval, an unreachable cluster; records stamped older than the
 * topic's retention.ms are named in a warning (the broker would delete them soon after commit).
 */
#include "check_kafka_common.h"
#include "tpc_kafka.h"
#include "tpc_test_ops.h"

#include <stdlib.h>

static const char *bootstrap;

static void setup(void)
{
    bootstrap = tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP");
    ck_assert_msg(bootstrap != NULL, "TWOPC_TEST_KAFKA_BOOTSTRAP is not set");
}

typedef struct {
    uint64_t n[2];
    unsigned char *seen[2];
    long dups;
    long bad;
} tally_t;

static void tally_record(void *opaque, const rd_kafka_message_t *msg)
{
    tally_t *t = opaque;
    int st = 0;
    uint64_t seq = 0;
    if (!tpc_test_seq_decode(msg->key, msg->key_len, &st, &seq) || st < 0 || st > 1 ||
        seq >= t->n[st]) {
        t->bad++;
        return;
    }
    if (t->seen[st][seq]++)
        t->dups++;
}

/* Read the topic and check that it holds each record of the sequence exactly once. */
static void check_exactly_once(const char *topic, uint64_t n0, uint64_t n1)
{
    tally_t t = {.n = {n0, n1}};
    t.seen[0] = calloc(n0 + 1, 1);
    t.seen[1] = calloc(n1 + 1, 1);
    long total = kt_read_topic(bootstrap, topic, "read_committed", tally_record, &t);
    long missing = 0;
    for (int s = 0; s < 2; s++)
        for (uint64_t i = 0; i < t.n[s]; i++)
            missing += !t.seen[s][i];
    free(t.seen[0]);
    free(t.seen[1]);
    ck_assert_msg(t.dups == 0 && missing == 0 && t.bad == 0,
                  "topic \"%s\": %ld records, %ld duplicates, %ld missing, %ld foreign", topic,
                  total, t.dups, missing, t.bad);
}

typedef struct {
    tpc_job_t *job;
    tpc_txn_sink_t *sink;
    char *ckpt;
    tpc_test_seq_conf_t src;
} pipeline_t;

static void set_ok(tpc_error_t *err)
{
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
}

static void build(pipeline_t *p, const char *topic, const char *interval)
{
    p->ckpt = tpc_test_tmpdir("kafka-sink");
    p->job = tpc_job_new("kafka-sink");
    set_ok(tpc_job_set(p->job, "checkpoint.dir", p->ckpt));
    set_ok(tpc_job_set(p->job, "checkpoint.interval.ms", interval));
    set_ok(tpc_job_set(p->job, "restart.attempts", "0"));
    set_ok(tpc_kafka_sink_new(bootstrap, topic, &p->sink));
    set_ok(tpc_txn_sink_set(p->sink, "kafka.linger.ms", "5"));
}

static tpc_error_t *run(pipeline_t *p, tpc_job_result_t *result)
{
    int s, k;
    set_ok(tpc_job_add_vertex(p->job, "source", 2, &tpc_test_seq_source_ops, &p->src, &s));
    set_ok(tpc_txn_sink_add_to_job(p->sink, p->job, "kafka", 2, &k));
    set_ok(tpc_job_connect(p->job, s, k, TPC_EDGE_FORWARD));
    return tpc_job_run(p->job, result);
}

static void teardown_pipeline(pipeline_t *p)
{
    tpc_job_destroy(p->job);
    tpc_txn_sink_destroy(p->sink);
    tpc_test_rmdir(p->ckpt);
    free(p->ckpt);
}

START_TEST(test_exactly_once_job_with_early_ending_source)
{
    char topic[128], prefix[128];
    tpc_test_unique_name(topic, sizeof topic, "twopc-sink", '-');
    kt_create_topic(bootstrap, topic, 3);
    pipeline_t p = {.src = {.count = {4000, 300}, .per_poll = 50, .sleep_us = 1000}};
    build(&p, topic, "100");
    set_ok(tpc_txn_sink_set(p.sink, "transactional.id.prefix",
                            tpc_test_unique_name(prefix, sizeof prefix, "twopc-sink", '-')));
    set_ok(tpc_txn_sink_set(p.sink, "checkpoint.interval.ms", "100"));
    tpc_job_result_t result = TPC_JOB_CANCELED;
    tpc_error_t *err = run(&p, &result);
    ck_assert_msg(err == NULL, "job failed: %s", tpc_error_message(err));
    ck_assert_int_eq(result, TPC_JOB_FINISHED);
    tpc_txn_sink_stats_t stats;
    tpc_txn_sink_get_stats(p.sink, &stats);
    ck_assert_uint_eq(stats.records, 4300);
    ck_assert_uint_eq(stats.pending, 0);
    ck_assert_uint_eq(stats.commits, stats.pre_commits);
    teardown_pipeline(&p);
    check_exactly_once(topic, 4000, 300);
}
END_TEST

static void count_old_warnings(void *opaque, tpc_log_level_t level, const char *msg)
{
    if (level == TPC_LOG_WARN && strstr(msg, "stamped older than topic"))
        (*(int *)opaque)++;
}

/* The test source stamps record n with n ms after 1970: far older than a topic that keeps records
 * a minute, which the sink says once per subtask; a topic that keeps them for ever (the test
 * broker's default) gets no warning. */
START_TEST(test_records_older_than_retention_are_named)
{
    for (int keeps = 0; keeps < 2; keeps++) {
        char topic[128], prefix[128];
        tpc_test_unique_name(topic, sizeof topic, "twopc-sink-old", '-');
        if (keeps)
            kt_create_topic(bootstrap, topic, 1);
        else
            kt_create_topic_with(bootstrap, topic, 1, "retention.ms", "60000");
        pipeline_t p = {.src = {.count = {200, 100}, .per_poll = 50, .sleep_us = 1000}};
        build(&p, topic, "100");
        set_ok(tpc_txn_sink_set(p.sink, "transactional.id.prefix",
                                tpc_test_unique_name(prefix, sizeof prefix, "twopc-old", '-')));
        int warnings = 0;
        ck_assert_int_eq(tpc_job_set_logger(p.job, count_old_warnings, &warnings, TPC_LOG_INFO),
                         TPC_OK);
        tpc_job_result_t result = TPC_JOB_CANCELED;
        tpc_error_t *err = run(&p, &result);
        ck_assert_msg(err == NULL, "job failed: %s", tpc_error_message(err));
        ck_assert_int_eq(result, TPC_JOB_FINISHED);
        teardown_pipeline(&p);
        if (keeps)
            ck_assert_int_eq(warnings, 0);
        else
            ck_assert_int_eq(warnings, 2); /* once per sink subtask */
        kt_delete_topic(bootstrap, topic);
    }
}
END_TEST

START_TEST(test_at_least_once_delivers_everything)
{
    char topic[128];
    tpc_test_unique_name(topic, sizeof topic, "twopc-sink-alo", '-');
    kt_create_topic(bootstrap, topic, 1);
    pipeline_t p = {.src = {.count_default = 500, .per_poll = 50}};
    build(&p, topic, "100");
    set_ok(tpc_txn_sink_set(p.sink, "guarantee", "at-least-once"));
    tpc_job_result_t result = TPC_JOB_CANCELED;
    tpc_error_t *err = run(&p, &result);
    ck_assert_msg(err == NULL, "job failed: %s", tpc_error_message(err));
    teardown_pipeline(&p);
    check_exactly_once(topic, 500, 500); /* no failure happened, so no repeats either */
}
END_TEST

/* Run a job with one bad setting and return its error message. */
static void expect_open_error(const char *key, const char *value, const char *bootstrap_override,
                              const char *needle)
{
    char topic[128], prefix[128];
    tpc_test_unique_name(topic, sizeof topic, "twopc-sink-bad", '-');
    if (!bootstrap_override)
        kt_create_topic(bootstrap, topic, 1);
    pipeline_t p = {.src = {.count_default = 10}};
    const char *saved = bootstrap;
    if (bootstrap_override)
        bootstrap = bootstrap_override;
    build(&p, topic, "1000");
    bootstrap = saved;
    if (strcmp(key, "transactional.id.prefix") != 0)
        set_ok(tpc_txn_sink_set(p.sink, "transactional.id.prefix",
                                tpc_test_unique_name(prefix, sizeof prefix, "twopc-bad", '-')));
    if (value)
        set_ok(tpc_txn_sink_set(p.sink, key, value));
    set_ok(tpc_txn_sink_set(p.sink, "open.timeout.ms", "2000"));
    time_t t0 = time(NULL);
    tpc_job_result_t result;
    tpc_error_t *err = run(&p, &result);
    ck_assert_msg(err != NULL, "the job should fail (%s)", key);
    ck_assert_msg(strstr(tpc_error_message(err), needle) != NULL, "message \"%s\" lacks \"%s\"",
                  tpc_error_message(err), needle);
    ck_assert_int_le(time(NULL) - t0, 10);
    tpc_error_destroy(err);
    teardown_pipeline(&p);
}

START_TEST(test_exactly_once_needs_a_prefix)
{
    expect_open_error("transactional.id.prefix", NULL, NULL, "transactional id prefix");
}
END_TEST

START_TEST(test_timeout_above_broker_maximum)
{
    expect_open_error("kafka.transaction.timeout.ms", "1000000", NULL,
                      "transaction.max.timeout.ms 900000");
}
END_TEST

START_TEST(test_timeout_close_to_checkpoint_interval)
{
    expect_open_error("checkpoint.interval.ms", "30000", NULL, "checkpoint interval");
}
END_TEST

/* Without the sink key, the check uses the job's own interval: 30 s against the default
 * kafka.transaction.timeout.ms of 60 s is refused at open. */
START_TEST(test_timeout_close_to_job_interval)
{
    char topic[128], prefix[128];
    tpc_test_unique_name(topic, sizeof topic, "twopc-sink-bad", '-');
    kt_create_topic(bootstrap, topic, 1);
    pipeline_t p = {.src = {.count_default = 10}};
    build(&p, topic, "30000");
    set_ok(tpc_txn_sink_set(p.sink, "transactional.id.prefix",
                            tpc_test_unique_name(prefix, sizeof prefix, "twopc-bad", '-')));
    tpc_job_result_t result;
    tpc_error_t *err = run(&p, &result);
    ck_assert_msg(err != NULL, "a transaction timeout of 2 checkpoint intervals was accepted");
    ck_assert_msg(strstr(tpc_error_message(err), "checkpoint interval of 30000 ms"), "%s",
                  tpc_error_message(err));
    ck_assert(tpc_error_is_fatal(err));
    tpc_error_destroy(err);
    teardown_pipeline(&p);
}
END_TEST

START_TEST(test_unreachable_bootstrap)
{
    expect_open_error("open.timeout.ms", "2000", "127.0.0.1:1", "could not reach kafka");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kafka_sink");
    TCase *tc = tcase_create("sink");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_exactly_once_job_with_early_ending_source);
    tcase_add_test(tc, test_at_least_once_delivers_everything);
    tcase_add_test(tc, test_exactly_once_needs_a_prefix);
    tcase_add_test(tc, test_timeout_above_broker_maximum);
    tcase_add_test(tc, test_timeout_close_to_checkpoint_interval);
    tcase_add_test(tc, test_timeout_close_to_job_interval);
    tcase_add_test(tc, test_unreachable_bootstrap);
    tcase_add_test(tc, test_records_older_than_retention_are_named);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
