/*
 * Assertions that several Check suites share. Only macros, expanded in the test that uses them,
 * so the support objects stay free of Check (benchmarks link them without it).
 */
#ifndef TPC_TEST_CHECK_H
#define TPC_TEST_CHECK_H

#include <check.h>
#include <string.h>

/** Assert that @p call (an expression giving a tpc_error_t *) succeeds; on failure the message
 * names the call and the error. */
#define TPC_TEST_OK(call)                                                                          \
    do {                                                                                           \
        tpc_error_t *err_ = (call);                                                                \
        ck_assert_msg(err_ == NULL, "%s: %s", #call, tpc_error_message(err_));                     \
    } while (0)

/** Assert that @p needle does not occur in @p text (several lines); on failure the message names
 * @p what and shows the line that holds it. */
#define TPC_TEST_ASSERT_ABSENT(text, needle, what)                                                 \
    do {                                                                                           \
        const char *text_ = (text), *at_ = strstr(text_, (needle));                                \
        if (at_) {                                                                                 \
            while (at_ > text_ && at_[-1] != '\n')                                                 \
                at_--;                                                                             \
            ck_abort_msg("%s: \"%s\" is in: %.*s", (what), (needle), (int)strcspn(at_, "\n"),      \
                         at_);                                                                     \
        }                                                                                          \
    } while (0)

#endif
