/*
 * The default logger: every event is one line on stderr with its time (UTC, milliseconds), level,
 * vertex and subtask ("-" for lines of the job as a whole), also when the message has line breaks.
 * A job whose source fails once (a job-level restart warning) and whose operator logs a warning
 * with a line break in it is run with stderr captured; every line it wrote must have that shape.
 * librdkafka's own log lines (a broker that refuses connections) reach the job's logger as the
 * subtask's lines, not stderr in librdkafka's format. libpq's notices: check_logging_pg.c.
 */
#include "tpc_kafka.h"
#include "tpc_test_capture.h"
#include "tpc_test_check.h"
#include "tpc_test_ops.h"

#include <check.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tpc_error_t *noisy_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx, (void)arg;
    *self = calloc(1, sizeof(bool));
    return NULL;
}

static tpc_error_t *noisy_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)batch;
    bool *said = self;
    if (!*said)
        tpc_log(ctx, TPC_LOG_WARN, "first batch seen\nsecond line of the same event");
    *said = true;
    return NULL;
}

static void noisy_close(void *self, tpc_ctx_t *ctx)
{
    (void)ctx;
    free(self);
}

static const tpc_operator_ops_t noisy_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = noisy_open,
    .process = noisy_process,
    .close = noisy_close,
};

START_TEST(test_default_logger_writes_one_line_per_event)
{
    tpc_test_seq_conf_t src = {.count_default = 200, .per_poll = 10, .fail_at = 100};
    tpc_job_t *job = tpc_job_new("logging");
    int s, n;
    TPC_TEST_OK(tpc_job_set(job, "restart.delay.ms", "0"));
    TPC_TEST_OK(tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s));
    TPC_TEST_OK(tpc_job_add_vertex(job, "noisy op", 2, &noisy_ops, NULL, &n));
    TPC_TEST_OK(tpc_job_connect(job, s, n, TPC_EDGE_REBALANCE));
    ck_assert(tpc_test_capture_start());
    tpc_error_t *err = tpc_job_run(job, NULL);
    size_t lines = 0;
    const char *said = tpc_test_capture_stop(&lines);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    tpc_job_destroy(job);

    regex_t re;
    ck_assert_int_eq(
        regcomp(&re,
                "^stderr: [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z "
                "(ERROR|WARN |INFO |DEBUG) vertex=([^ ]+|\"[^\"]+\") subtask=([0-9]+|-) "
                "[^ ]",
                REG_EXTENDED | REG_NOSUB),
        0);
    int stderr_lines = 0, task_lines = 0, job_lines = 0;
    for (const char *l = said; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, "stderr: ", 8) != 0)
            continue;
        char line[2048];
        snprintf(line, sizeof line, "%.*s", (int)strcspn(l, "\n"), l);
        stderr_lines++;
        ck_assert_msg(regexec(&re, line, 0, NULL, 0) == 0, "not one event per line: %s", line);
        if (strstr(line, "vertex=\"noisy op\" subtask=") &&
            strstr(line, "first batch seen second line of the same event"))
            task_lines++;
        if (strstr(line, "vertex=- subtask=- job \"logging\" restarts"))
            job_lines++;
    }
    regfree(&re);
    ck_assert_msg(task_lines >= 2, "the operator's warning was not written per subtask:\n%s", said);
    ck_assert_msg(job_lines == 1, "the restart warning was not written once:\n%s", said);
    ck_assert_int_ge(stderr_lines, 3);
}
END_TEST

START_TEST(test_librdkafka_lines_go_to_the_job_logger)
{
    tpc_test_seq_conf_t src = {.count_default = 10};
    tpc_job_t *job = tpc_job_new("logging-kafka");
    tpc_txn_sink_t *sink = NULL;
    char *dir = tpc_test_tmpdir("logging-kafka");
    int s, k;
    tpc_job_set_logger(job, tpc_test_capture_log, NULL, TPC_LOG_DEBUG);
    TPC_TEST_OK(tpc_job_set(job, "checkpoint.dir", dir));
    TPC_TEST_OK(tpc_job_set(job, "restart.attempts", "0"));
    /* Nothing listens on port 1 of this machine: librdkafka reports refused connections. */
    TPC_TEST_OK(tpc_kafka_sink_new("127.0.0.1:1", "t", &sink));
    TPC_TEST_OK(tpc_txn_sink_set(sink, "transactional.id.prefix", "logging"));
    TPC_TEST_OK(tpc_txn_sink_set(sink, "open.timeout.ms", "1500"));
    TPC_TEST_OK(tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s));
    TPC_TEST_OK(tpc_txn_sink_add_to_job(sink, job, "out", 1, &k));
    TPC_TEST_OK(tpc_job_connect(job, s, k, TPC_EDGE_FORWARD));
    ck_assert(tpc_test_capture_start());
    tpc_error_t *err = tpc_job_run(job, NULL);
    const char *said = tpc_test_capture_stop(NULL);
    ck_assert_ptr_nonnull(err);
    tpc_error_destroy(err);
    bool routed = false;
    for (const char *l = said; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        ck_assert_msg(strncmp(l, "stderr: %", 9) != 0, "librdkafka wrote to stderr: %.200s", l);
        /* kafka_producer.c's on_log: "kafka producer[ ID]: FACILITY: librdkafka's line" */
        const char *end = strchr(l, '\n'), *at = strstr(l, "127.0.0.1:1");
        routed |= strncmp(l, "log: \"out\"[0]: kafka producer", 29) == 0 && at && at < end;
    }
    ck_assert_msg(routed, "no librdkafka line about the broker in the job's log:\n%s", said);
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(sink);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("logging");
    TCase *tc = tcase_create("default logger");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_default_logger_writes_one_line_per_event);
    tcase_add_test(tc, test_librdkafka_lines_go_to_the_job_logger);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
