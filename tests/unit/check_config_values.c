/*
 * Configuration values are judged when they are set: an integer is digits with an optional '-'
 * ("100"), never " 100" or "+100", for every integer key of the job, the transactional sink and
 * each connector; a `kafka.` property of a sink or a source is checked by librdkafka and, for the
 * TLS and SASL settings, by the recovery client at tpc_txn_sink_set() / tpc_kafka_source_set(),
 * not first when the job opens. No server is needed: nothing here connects.
 */
#include "tpc_file.h"
#include "tpc_kafka.h"
#include "tpc_pg.h"
#include "tpc_test_check.h"
#include "tpc_test_ops.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void expect_refused(tpc_error_t *err, const char *key, const char *value)
{
    ck_assert_msg(err != NULL, "\"%s\" = \"%s\" was accepted", key, value);
    ck_assert_msg(tpc_error_code(err) == TPC_ERR_CONFIG ||
                      tpc_error_code(err) == TPC_ERR_UNSUPPORTED,
                  "\"%s\" = \"%s\": %s (%s)", key, value, tpc_error_message(err),
                  tpc_err_name(tpc_error_code(err)));
    tpc_error_destroy(err);
}

START_TEST(test_parse_int)
{
    int64_t v = 0;
    ck_assert(tpc_parse_int("100", 0, 1000, &v) && v == 100);
    ck_assert(tpc_parse_int("-5", -10, 10, &v) && v == -5);
    ck_assert(tpc_parse_int("0", 0, 0, &v) && v == 0);
    static const char *const bad[] = {" 100", "+100", "100 ", "",    "-",   "0x10",
                                      "1e3",  "1.0",  "--1",  "- 1", "\t7", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(!tpc_parse_int(bad[i], INT64_MIN, INT64_MAX, &v), "\"%s\" accepted", bad[i]);
    ck_assert(!tpc_parse_int("1001", 0, 1000, &v));
    ck_assert(!tpc_parse_int(NULL, 0, 1000, &v));
}
END_TEST

static const char *const signed_or_spaced[] = {" 100", "+100", "100 ", "\t100"};

START_TEST(test_integers_are_digits_only)
{
    tpc_job_t *job = tpc_job_new("values");
    tpc_txn_sink_t *pg = NULL, *kafka = NULL, *file = NULL;
    tpc_kafka_source_t *src = NULL;
    char *dir = tpc_test_tmpdir("values");
    TPC_TEST_OK(tpc_pg_sink_new(&pg));
    TPC_TEST_OK(tpc_kafka_sink_new("127.0.0.1:9092", "t", &kafka));
    TPC_TEST_OK(tpc_file_sink_new(dir, &file));
    TPC_TEST_OK(tpc_kafka_source_new("127.0.0.1:9092", "t", &src));
    for (size_t i = 0; i < sizeof signed_or_spaced / sizeof *signed_or_spaced; i++) {
        const char *v = signed_or_spaced[i];
        expect_refused(tpc_job_set(job, "checkpoint.interval.ms", v), "checkpoint.interval.ms", v);
        expect_refused(tpc_job_set(job, "restart.attempts", v), "restart.attempts", v);
        expect_refused(tpc_txn_sink_set(pg, "transaction.timeout.ms", v), "transaction.timeout.ms",
                       v);
        expect_refused(tpc_txn_sink_set(pg, "commit.retry.deadline.ms", v),
                       "commit.retry.deadline.ms", v);
        expect_refused(tpc_txn_sink_set(pg, "pg.batch-size", v), "pg.batch-size", v);
        expect_refused(tpc_txn_sink_set(pg, "pg.connect.deadline.ms", v), "pg.connect.deadline.ms",
                       v);
        expect_refused(tpc_txn_sink_set(kafka, "open.timeout.ms", v), "open.timeout.ms", v);
        expect_refused(tpc_txn_sink_set(kafka, "kafka.transaction.timeout.ms", v),
                       "kafka.transaction.timeout.ms", v);
        expect_refused(tpc_txn_sink_set(file, "file.part-size", v), "file.part-size", v);
        expect_refused(tpc_kafka_source_set(src, "max.batch", v), "max.batch", v);
        char ts[32];
        snprintf(ts, sizeof ts, "timestamp:%s", v);
        expect_refused(tpc_kafka_source_set(src, "start", ts), "start", ts);
    }
    expect_refused(tpc_txn_sink_set(pg, "transaction.timeout.warn-ratio", " 0.5"),
                   "transaction.timeout.warn-ratio", " 0.5");
    expect_refused(tpc_txn_sink_set(pg, "transaction.timeout.warn-ratio", "+0.5"),
                   "transaction.timeout.warn-ratio", "+0.5");
    /* The plain forms still work. */
    TPC_TEST_OK(tpc_job_set(job, "checkpoint.interval.ms", "100"));
    TPC_TEST_OK(tpc_txn_sink_set(pg, "transaction.timeout.ms", "100"));
    TPC_TEST_OK(tpc_txn_sink_set(pg, "transaction.timeout.warn-ratio", "0.5"));
    TPC_TEST_OK(tpc_txn_sink_set(kafka, "open.timeout.ms", "1000"));
    TPC_TEST_OK(tpc_txn_sink_set(file, "file.part-size", "100000"));
    TPC_TEST_OK(tpc_kafka_source_set(src, "max.batch", "100"));
    TPC_TEST_OK(tpc_kafka_source_set(src, "start", "timestamp:100"));
    tpc_kafka_source_destroy(src);
    tpc_txn_sink_destroy(file);
    tpc_txn_sink_destroy(kafka);
    tpc_txn_sink_destroy(pg);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* What the sink used to accept at set and refuse only when the job opened (or at the first
 * recovery after a crash, for the TLS and SASL settings). */
static const char *const bad_props[][2] = {
    {"kafka.no.such.property", "1"},
    {"kafka.linger.ms", "soon"},
    {"kafka.security.protocol", "tls"},
    {"kafka.enable.ssl.certificate.verification", "maybe"},
    {"kafka.ssl.endpoint.identification.algorithm", "sometimes"},
    {"kafka.ssl.ca.location", "no/such/ca.pem"},
    {"kafka.ssl.certificate.location", "no/such/client.pem"},
    {"kafka.ssl.key.location", "no/such/client.key"},
};

START_TEST(test_kafka_properties_checked_when_set)
{
    tpc_txn_sink_t *sink = NULL;
    TPC_TEST_OK(tpc_kafka_sink_new("127.0.0.1:9092", "t", &sink));
    tpc_kafka_source_t *src = NULL;
    TPC_TEST_OK(tpc_kafka_source_new("127.0.0.1:9092", "t", &src));
    for (size_t i = 0; i < sizeof bad_props / sizeof *bad_props; i++) {
        expect_refused(tpc_txn_sink_set(sink, bad_props[i][0], bad_props[i][1]), bad_props[i][0],
                       bad_props[i][1]);
        expect_refused(tpc_kafka_source_set(src, bad_props[i][0], bad_props[i][1]), bad_props[i][0],
                       bad_props[i][1]);
    }
    char big[300];
    memset(big, 'p', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    tpc_error_t *err = tpc_txn_sink_set(sink, "kafka.sasl.password", big);
    ck_assert_msg(err && !strstr(tpc_error_message(err), big), "a 299-byte password");
    tpc_error_destroy(err);
    TPC_TEST_OK(tpc_txn_sink_set(sink, "kafka.security.protocol", "SASL_SSL"));
    TPC_TEST_OK(tpc_txn_sink_set(sink, "kafka.ssl.ca.location", "probe"));
    TPC_TEST_OK(tpc_txn_sink_set(sink, "kafka.enable.ssl.certificate.verification", "false"));
    TPC_TEST_OK(tpc_txn_sink_set(sink, "kafka.linger.ms", "5"));
    tpc_kafka_source_destroy(src);
    tpc_txn_sink_destroy(sink);
}
END_TEST

/* Topic patterns with back-references are refused (matching them can take exponential time);
 * an escaped backslash before a digit is no back-reference. */
START_TEST(test_topic_pattern_back_references_refused)
{
    static const char *const bad[] = {"^(a+)\\1", "^orders-(x)\\9", "^x\\\\\\2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tpc_kafka_source_t *src = NULL;
        tpc_error_t *err = tpc_kafka_source_new("127.0.0.1:9092", bad[i], &src);
        ck_assert_msg(err && strstr(tpc_error_message(err), "back-reference"), "\"%s\" taken",
                      bad[i]);
        ck_assert_ptr_null(src);
        tpc_error_destroy(err);
    }
    static const char *const good[] = {"^orders-[0-9]+", "^a\\\\1", "^a\\.b"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        tpc_kafka_source_t *src = NULL;
        tpc_error_t *err = tpc_kafka_source_new("127.0.0.1:9092", good[i], &src);
        ck_assert_msg(!err, "\"%s\": %s", good[i], err ? tpc_error_message(err) : "");
        tpc_kafka_source_destroy(src);
    }
}
END_TEST

/* The library says the version its headers say, and the twopc command and the Makefile agree. */
START_TEST(test_version)
{
    ck_assert_int_eq(tpc_version(), TPC_VERSION_HEX);
    ck_assert_str_eq(tpc_version_string(), TPC_VERSION_STRING);
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", TPC_VERSION_MAJOR, TPC_VERSION_MINOR,
             TPC_VERSION_PATCH);
    ck_assert_str_eq(TPC_VERSION_STRING, want);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("config_values");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_parse_int);
    tcase_add_test(tc, test_integers_are_digits_only);
    tcase_add_test(tc, test_kafka_properties_checked_when_set);
    tcase_add_test(tc, test_topic_pattern_back_references_refused);
    tcase_add_test(tc, test_version);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
