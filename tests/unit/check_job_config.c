/*
 * Building and configuring a job: unknown keys and bad values are refused with a message that
 * names the key and what it accepts; invalid graphs (forward edges between different
 * parallelisms, cycles, duplicate names, unconnected operators) are refused before anything runs;
 * errors carry names and descriptions from one table; a NULL job is refused by every function
 * that takes one.
 */
#include "tpc_runtime.h"
#include "tpc_test_ops.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static void expect_config_error(tpc_job_t *job, const char *key, const char *value,
                                const char *needle)
{
    tpc_error_t *err = tpc_job_set(job, key, value);
    ck_assert_msg(err != NULL, "%s=%s accepted", key, value);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    ck_assert_msg(strstr(tpc_error_message(err), needle), "message \"%s\" lacks \"%s\"",
                  tpc_error_message(err), needle);
    ck_assert_ptr_nonnull(tpc_error_hint_text(err));
    tpc_error_destroy(err);
}

START_TEST(test_configuration_errors)
{
    tpc_job_t *job = tpc_job_new("conf");
    expect_config_error(job, "checkpoint.intervall.ms", "10",
                        "unknown configuration key "
                        "\"checkpoint.intervall.ms\"");
    expect_config_error(job, "checkpoint.interval.ms", "-1", "\"checkpoint.interval.ms\"");
    expect_config_error(job, "checkpoint.interval.ms", "10s", "invalid value \"10s\"");
    expect_config_error(job, "checkpoint.retained", "0", "\"checkpoint.retained\"");
    expect_config_error(job, "checkpoint.after-finish", "yes", "\"checkpoint.after-finish\"");
    expect_config_error(job, "restore.mode", "latest", "\"restore.mode\"");
    expect_config_error(job, "checkpoint.dir", "", "\"checkpoint.dir\"");
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.interval.ms", "0"));
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.max-concurrent", "2"));
    ck_assert_ptr_null(tpc_job_set(job, "restore.mode", "fresh"));
    tpc_job_destroy(job);
}
END_TEST

/* Every function that takes a job refuses a NULL one instead of crashing. */
START_TEST(test_null_job_refused)
{
    tpc_job_stats_t st;
    ck_assert_int_eq(tpc_job_get_stats(NULL, &st), TPC_ERR_INVALID_ARG);
    ck_assert_int_eq(tpc_job_cancel(NULL), TPC_ERR_INVALID_ARG);
    ck_assert_int_eq(tpc_job_set_logger(NULL, NULL, NULL, TPC_LOG_INFO), TPC_ERR_INVALID_ARG);
    ck_assert_int_eq(tpc_job_set_checkpoint_callback(NULL, NULL, NULL), TPC_ERR_INVALID_ARG);
    char *path = NULL;
    tpc_error_t *err = tpc_job_stop_with_savepoint(NULL, true, &path);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_INVALID_ARG);
    ck_assert_ptr_null(path);
    tpc_error_destroy(err);
    err = tpc_job_stop_with_savepoint(NULL, false, NULL);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_INVALID_ARG);
    tpc_error_destroy(err);
    err = tpc_job_set(NULL, "batch.size", "1");
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_INVALID_ARG);
    tpc_error_destroy(err);
    err = tpc_job_run(NULL, NULL);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_INVALID_ARG);
    tpc_error_destroy(err);

    tpc_job_t *job = tpc_job_new("null-args");
    ck_assert_int_eq(tpc_job_get_stats(job, NULL), TPC_ERR_INVALID_ARG);
    ck_assert_int_eq(tpc_job_get_stats(job, &st), TPC_OK);
    ck_assert_int_eq(tpc_job_set_logger(job, NULL, NULL, TPC_LOG_WARN), TPC_OK);
    ck_assert_int_eq(tpc_job_set_checkpoint_callback(job, NULL, NULL), TPC_OK);
    ck_assert_int_eq(tpc_job_cancel(job), TPC_OK);
    tpc_job_destroy(job);
}
END_TEST

static void expect_graph_error(tpc_error_t *err, const char *needle)
{
    ck_assert_msg(err != NULL, "accepted, expected an error with \"%s\"", needle);
    ck_assert_msg(strstr(tpc_error_message(err), needle), "message \"%s\" lacks \"%s\"",
                  tpc_error_message(err), needle);
    tpc_error_destroy(err);
}

START_TEST(test_graph_errors)
{
    tpc_job_t *job = tpc_job_new("graph");
    tpc_test_seq_conf_t src = {.count_default = 10};
    int s, m, k;
    ck_assert_ptr_null(tpc_job_add_vertex(job, "source", 2, &tpc_test_seq_source_ops, &src, &s));
    ck_assert_ptr_null(tpc_job_add_vertex(job, "map", 3, &tpc_test_identity_ops, NULL, &m));
    ck_assert_ptr_null(tpc_job_add_vertex(job, "sink", 3, &tpc_test_discard_ops, NULL, &k));
    expect_graph_error(tpc_job_add_vertex(job, "map", 1, &tpc_test_identity_ops, NULL, NULL),
                       "vertex \"map\" already exists");
    expect_graph_error(tpc_job_add_vertex(job, "x", 0, &tpc_test_identity_ops, NULL, NULL),
                       "parallelism 0");
    tpc_operator_ops_t future = tpc_test_identity_ops;
    future.version = 99;
    expect_graph_error(tpc_job_add_vertex(job, "y", 1, &future, NULL, NULL), "ops version 99");
    expect_graph_error(tpc_job_connect(job, s, m, TPC_EDGE_FORWARD),
                       "forward edge \"source\" -> \"map\" joins parallelism 2 to 3");
    expect_graph_error(tpc_job_connect(job, m, s, TPC_EDGE_REBALANCE), "is a source");
    ck_assert_ptr_null(tpc_job_connect(job, m, k, TPC_EDGE_FORWARD));
    expect_graph_error(tpc_job_connect(job, k, m, TPC_EDGE_HASH), "would make a cycle");
    expect_graph_error(tpc_job_connect(job, m, 42, TPC_EDGE_HASH), "unknown vertex");
    /* "map" has no input: the job refuses to run. */
    expect_graph_error(tpc_job_run(job, NULL), "vertex \"map\" has no input");
    tpc_job_destroy(job);
}
END_TEST

START_TEST(test_error_table)
{
    ck_assert_str_eq(tpc_err_name(TPC_ERR_DATA_LOSS), "TPC_ERR_DATA_LOSS");
    ck_assert_str_eq(tpc_strerror(TPC_ERR_CORRUPT), "corrupt data");
    ck_assert_str_eq(tpc_err_name((tpc_err_t)-999), "TPC_ERR_UNKNOWN");
    tpc_error_t *err = tpc_error_new(TPC_ERR_IO, TPC_ERROR_RETRIABLE, "could not read \"%s\"", "f");
    err = tpc_error_prefix(err, "checkpoint %d", 3);
    err = tpc_error_hint(err, "check the disk");
    ck_assert_str_eq(tpc_error_message(err), "checkpoint 3: could not read \"f\"");
    ck_assert_str_eq(tpc_error_hint_text(err), "check the disk");
    ck_assert(tpc_error_is_retriable(err));
    ck_assert(!tpc_error_is_fatal(err));
    tpc_error_destroy(err);
    tpc_error_destroy(NULL);
    tpc_job_destroy(NULL);
}
END_TEST

START_TEST(test_savepoint_needs_checkpoints)
{
    tpc_job_t *job = tpc_job_new("nodir");
    tpc_error_t *err = tpc_job_stop_with_savepoint(job, true, NULL);
    expect_graph_error(err, "is not running");
    tpc_job_destroy(job);
}
END_TEST

START_TEST(test_unwritable_checkpoint_dir)
{
    tpc_job_t *job = tpc_job_new("baddir");
    tpc_test_seq_conf_t src = {.count_default = 10};
    ck_assert_ptr_null(tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, NULL));
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.dir", "/proc/twopc-cannot-be-here"));
    tpc_error_t *err = tpc_job_run(job, NULL);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    ck_assert_msg(strstr(tpc_error_message(err), "\"checkpoint.dir\": could not create directory "
                                                 "\"/proc/twopc-cannot-be-here\""),
                  "%s", tpc_error_message(err));
    tpc_error_destroy(err);
    tpc_job_destroy(job);
}
END_TEST

static tpc_error_t *probe_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    *(int *)arg = tpc_ctx_checkpointing(ctx) ? 1 : 0;
    *self = arg;
    return NULL;
}

static tpc_error_t *probe_poll(void *self, tpc_ctx_t *ctx, tpc_poll_result_t *result)
{
    (void)self;
    (void)ctx;
    *result = TPC_POLL_END;
    return NULL;
}

static const tpc_operator_ops_t probe_ops = {
    .version = TPC_OPERATOR_OPS_VERSION, .open = probe_open, .poll = probe_poll};

/* Sinks can tell at open whether they will ever hear of a checkpoint after their finish(). */
START_TEST(test_ctx_checkpointing)
{
    char *dir = tpc_test_tmpdir("probe");
    const char *settings[3][2] = {{NULL, NULL}, {"checkpoint.after-finish", "false"}, {NULL, NULL}};
    int expected[3] = {0, 0, 1};
    for (int i = 0; i < 3; i++) {
        tpc_job_t *job = tpc_job_new("probe");
        int seen = -1;
        ck_assert_ptr_null(tpc_job_add_vertex(job, "probe", 1, &probe_ops, &seen, NULL));
        if (i > 0)
            ck_assert_ptr_null(tpc_job_set(job, "checkpoint.dir", dir));
        if (settings[i][0])
            ck_assert_ptr_null(tpc_job_set(job, settings[i][0], settings[i][1]));
        ck_assert_ptr_null(tpc_job_run(job, NULL));
        ck_assert_int_eq(seen, expected[i]);
        tpc_job_destroy(job);
    }
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("job_config");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_configuration_errors);
    tcase_add_test(tc, test_null_job_refused);
    tcase_add_test(tc, test_graph_errors);
    tcase_add_test(tc, test_error_table);
    tcase_add_test(tc, test_savepoint_needs_checkpoints);
    tcase_add_test(tc, test_unwritable_checkpoint_dir);
    tcase_add_test(tc, test_ctx_checkpointing);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
