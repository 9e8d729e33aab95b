/*
 * Assertions that several Check suites share. Only macros, expanded in the test that uses them,
 * so the support objects stay free of Check (benchmarks link them without it).
 */
#ifndef TPC_TEST_CHECK_H
#define TPC_TEST_CHECK_H

#include <check.h>

/** Assert that @p call (an expression giving a tpc_error_t *) succeeds; on failure the message
 * names the call and the error. */
#define TPC_TEST_OK(call)                                                                          \
    do {                                                                                           \
        tpc_error_t *err_ = (call);                                                                \
        ck_assert_msg(err_ == NULL, "%s: %s", #call, tpc_error_message(err_));                     \
    } while (0)

#endif
