/*
 * One meaning for fatal: an error that no restart can mend (flagged TPC_ERROR_FATAL, or of a
 * code that says so: configuration, data loss, fencing, ...) ends the job at once with its own
 * message and hint; any other error restarts it within restart.attempts, and when the restarts
 * run out the error keeps its own hint.
 */
#include "tpc_runtime.h"

#include <check.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    tpc_err_t code;
    int flags;
    const char *hint; /* NULL = none */
    atomic_int opens;
} failing_conf_t;

static tpc_error_t *failing_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx;
    failing_conf_t *c = arg;
    atomic_fetch_add(&c->opens, 1);
    *self = c;
    return NULL;
}

/* Fails on its first poll, in every attempt. */
static tpc_error_t *failing_poll(void *self, tpc_ctx_t *ctx, tpc_poll_result_t *result)
{
    (void)ctx, (void)result;
    failing_conf_t *c = self;
    tpc_error_t *err = tpc_error_new(c->code, c->flags, "the operator gave up");
    return c->hint ? tpc_error_hint(err, "%s", c->hint) : err;
}

static const tpc_operator_ops_t failing_ops = {
    .version = TPC_OPERATOR_OPS_VERSION, .open = failing_open, .poll = failing_poll};

/* Runs a job of one failing source with restart.attempts = 2; @returns its error. */
static tpc_error_t *run_failing(failing_conf_t *c, uint64_t *restarts)
{
    tpc_job_t *job = tpc_job_new("classes");
    ck_assert_ptr_null(tpc_job_set(job, "restart.attempts", "2"));
    ck_assert_ptr_null(tpc_job_set(job, "restart.delay.ms", "1"));
    tpc_job_set_logger(job, NULL, NULL, TPC_LOG_ERROR);
    ck_assert_ptr_null(tpc_job_add_vertex(job, "op", 1, &failing_ops, c, NULL));
    tpc_error_t *err = tpc_job_run(job, NULL);
    tpc_job_stats_t st;
    tpc_job_get_stats(job, &st);
    *restarts = st.restarts;
    tpc_job_destroy(job);
    ck_assert_ptr_nonnull(err);
    return err;
}

static void assert_ended_at_once(tpc_err_t code, int flags)
{
    failing_conf_t c = {.code = code, .flags = flags, .hint = "do this one thing"};
    uint64_t restarts;
    tpc_error_t *err = run_failing(&c, &restarts);
    ck_assert_msg(atomic_load(&c.opens) == 1 && restarts == 0,
                  "%s (flags %d): %d attempts, %llu restarts; a fatal error must end the job at "
                  "once",
                  tpc_err_name(code), flags, atomic_load(&c.opens), (unsigned long long)restarts);
    ck_assert_int_eq(tpc_error_code(err), code);
    ck_assert_msg(strstr(tpc_error_message(err), "the operator gave up") &&
                      !strstr(tpc_error_message(err), "restart"),
                  "message: %s", tpc_error_message(err));
    ck_assert_str_eq(tpc_error_hint_text(err), "do this one thing");
    tpc_error_destroy(err);
}

START_TEST(test_operator_declared_fatal_ends_at_once)
{
    assert_ended_at_once(TPC_ERR_EXTERNAL, TPC_ERROR_FATAL);
    assert_ended_at_once(TPC_ERR_IO, TPC_ERROR_FATAL);
}
END_TEST

START_TEST(test_lasting_codes_end_at_once)
{
    assert_ended_at_once(TPC_ERR_CONFIG, 0);
    assert_ended_at_once(TPC_ERR_DATA_LOSS, 0);
    assert_ended_at_once(TPC_ERR_FENCED, 0);
    assert_ended_at_once(TPC_ERR_INVALID_ARG, 0);
    assert_ended_at_once(TPC_ERR_UNSUPPORTED, 0);
}
END_TEST

START_TEST(test_restartable_errors_restart)
{
    const struct {
        tpc_err_t code;
        int flags;
    } cases[] = {{TPC_ERR_EXTERNAL, 0},
                 {TPC_ERR_CONNECT, TPC_ERROR_RETRIABLE},
                 {TPC_ERR_TIMEOUT, 0},
                 /* a malformed reply of a broker that is restarting: its maker says retry */
                 {TPC_ERR_CORRUPT, TPC_ERROR_RETRIABLE}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        failing_conf_t c = {.code = cases[i].code, .flags = cases[i].flags};
        uint64_t restarts;
        tpc_error_t *err = run_failing(&c, &restarts);
        ck_assert_msg(atomic_load(&c.opens) == 3 && restarts == 2,
                      "%s (flags %d): %d attempts, %llu restarts, expected 3 and 2",
                      tpc_err_name(cases[i].code), cases[i].flags, atomic_load(&c.opens),
                      (unsigned long long)restarts);
        ck_assert_int_eq(tpc_error_code(err), cases[i].code);
        ck_assert_msg(strstr(tpc_error_message(err), "failed after 2 restarts"), "message: %s",
                      tpc_error_message(err));
        tpc_error_destroy(err);
    }
}
END_TEST

/* When the restarts run out, the hint that names the cause stays, and the advice about
 * restart.attempts comes after it. */
START_TEST(test_hint_kept_when_restarts_run_out)
{
    failing_conf_t c = {.code = TPC_ERR_COMMIT,
                        .hint = "the transaction outlived transaction.timeout.ms: raise it"};
    uint64_t restarts;
    tpc_error_t *err = run_failing(&c, &restarts);
    ck_assert_int_eq(atomic_load(&c.opens), 3);
    const char *hint = tpc_error_hint_text(err);
    ck_assert_ptr_nonnull(hint);
    ck_assert_msg(strncmp(hint, c.hint, strlen(c.hint)) == 0, "the specific hint is lost: %s",
                  hint);
    ck_assert_msg(strstr(hint, "restart.attempts"), "hint: %s", hint);
    tpc_error_destroy(err);

    failing_conf_t bare = {.code = TPC_ERR_EXTERNAL};
    err = run_failing(&bare, &restarts);
    ck_assert_msg(tpc_error_hint_text(err) && strstr(tpc_error_hint_text(err), "restart.attempts"),
                  "an error without a hint gets the general one");
    tpc_error_destroy(err);
}
END_TEST

START_TEST(test_is_fatal_by_flag_and_code)
{
    const struct {
        tpc_err_t code;
        int flags;
        bool fatal;
    } cases[] = {
        {TPC_ERR_EXTERNAL, 0, false},
        {TPC_ERR_EXTERNAL, TPC_ERROR_FATAL, true},
        {TPC_ERR_IO, TPC_ERROR_RETRIABLE, false},
        {TPC_ERR_CONFIG, 0, true},
        {TPC_ERR_CORRUPT, 0, true},
        {TPC_ERR_CORRUPT, TPC_ERROR_RETRIABLE, false},
        {TPC_ERR_NOT_FOUND, 0, true},
        {TPC_ERR_DATA_LOSS, 0, true},
        {TPC_ERR_FENCED, 0, true},
        {TPC_ERR_COMMIT, 0, false},
        {TPC_ERR_CONNECT, 0, false},
        {TPC_ERR_TIMEOUT, 0, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tpc_error_t *err = tpc_error_new(cases[i].code, cases[i].flags, "x");
        ck_assert_msg(tpc_error_is_fatal(err) == cases[i].fatal, "%s flags %d",
                      tpc_err_name(cases[i].code), cases[i].flags);
        tpc_error_destroy(err);
    }
    ck_assert(!tpc_error_is_fatal(NULL));
    ck_assert_str_eq(tpc_err_name(TPC_ERR_FENCED), "TPC_ERR_FENCED");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("error_classes");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_operator_declared_fatal_ends_at_once);
    tcase_add_test(tc, test_lasting_codes_end_at_once);
    tcase_add_test(tc, test_restartable_errors_restart);
    tcase_add_test(tc, test_hint_kept_when_restarts_run_out);
    tcase_add_test(tc, test_is_fatal_by_flag_and_code);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
