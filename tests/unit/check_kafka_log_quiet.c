/*
 * librdkafka's repeated lines in an outage are counted, not repeated (connectors/kafka/wire/
 * kafka_logq.c): the first of a kind is logged; the same text again, from another producer, with
 * other numbers, with librdkafka's own "(after ..., 1 identical error(s) suppressed)" tail, as an
 * error event rather than a log line, is held back within the window; other text is logged. The
 * TLS guess librdkafka adds to a dropped plaintext connection is left out for plaintext clients
 * only.
 */
#include "kafka_wire.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_repeats_are_held_back)
{
    char out[512];
    ck_assert(!tpc__kafka_log_quiet("FAIL",
                                    "[thrd:TxnCoordinator]: TxnCoordinator: 127.0.0.1:40336: "
                                    "Connect to ipv4#127.0.0.1:40336 failed: Connection refused "
                                    "(after 0ms in state CONNECT)",
                                    NULL, out, sizeof out));
    ck_assert_ptr_nonnull(strstr(out, "Connection refused"));
    ck_assert(
        tpc__kafka_log_quiet("_TRANSPORT",
                             "TxnCoordinator: 127.0.0.1:40999: Connect to ipv4#127.0.0.1:40999 "
                             "failed: Connection refused (after 3ms in state CONNECT, 1 "
                             "identical error(s) suppressed)",
                             NULL, out, sizeof out));
    ck_assert(!tpc__kafka_log_quiet("FAIL", "[thrd:main]: something else entirely", NULL, out,
                                    sizeof out));
}
END_TEST

START_TEST(test_tls_guess_left_out_for_plaintext)
{
    static const char line[] = "127.0.0.1:9/1: Disconnected while requesting ApiVersion: might be "
                               "caused by incorrect security.protocol configuration (connecting to "
                               "a SSL listener?) or broker version is < 0.10";
    char out[512];
    ck_assert(!tpc__kafka_log_quiet("FAIL", line, "plaintext", out, sizeof out));
    ck_assert_str_eq(out, "127.0.0.1:9/1: Disconnected while requesting ApiVersion or broker "
                          "version is < 0.10");
    /* With TLS the guess may be right: kept (a new kind of line: "SSL listener" differs). */
    static const char tls[] = "10.0.0.1:9/1: Disconnected: might be caused by incorrect "
                              "security.protocol configuration (connecting to a SSL listener?) "
                              "over TLS";
    ck_assert(!tpc__kafka_log_quiet("FAIL", tls, "SSL", out, sizeof out));
    ck_assert_ptr_nonnull(strstr(out, "SSL listener"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kafka_log_quiet");
    TCase *tc = tcase_create("quiet");
    tcase_add_test(tc, test_repeats_are_held_back);
    tcase_add_test(tc, test_tls_guess_left_out_for_plaintext);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
