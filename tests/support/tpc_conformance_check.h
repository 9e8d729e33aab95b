/*
 * The connector conformance suite (tpc_conformance.h) as a Check suite: one test per check, each
 * asserting that the check passed and printing its reason when not. A connector's test file fills
 * a tpc_conformance_t and makes its main
 *
 *     int main(int argc, char **argv) { return tpc_conformance_main(&my_connector, argc, argv); }
 *
 * which also runs the children of the kill -9 check. TWOPC_CONFORMANCE_CHECKS=name,name,... runs
 * only the named checks (the names are in tpc_conformance_checks.c).
 *
 * Include this in one file per test binary only: it defines the test function.
 */
#ifndef TPC_CONFORMANCE_CHECK_H
#define TPC_CONFORMANCE_CHECK_H

#include "tpc_conformance.h"
#include "tpc_test_env.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const tpc_conformance_t *tpc_conformance_under_test;
static size_t tpc_conformance_selected[64];

START_TEST(test_conformance)
{
    const tpc_conformance_check_t *k = &tpc_conformance_checks[tpc_conformance_selected[_i]];
    const tpc_conformance_t *c = tpc_conformance_under_test;
    char why[4096] = "";
    double t0 = tpc_test_now_s();
    bool passed = k->run(c, why, sizeof why);
    ck_assert_msg(passed, "%s connector, check %s (%s): %s", c->name, k->name, k->what, why);
    printf("conformance %s: %s passed (%.1f s)\n", c->name, k->name, tpc_test_now_s() - t0);
    fflush(stdout);
}
END_TEST

/* The checks TWOPC_CONFORMANCE_CHECKS names, or all. @returns how many. */
static inline int tpc_conformance_select(void)
{
    const char *only = tpc_test_env("TWOPC_CONFORMANCE_CHECKS");
    int n = 0;
    for (size_t i = 0; i < tpc_conformance_check_count && n < 64; i++) {
        const char *name = tpc_conformance_checks[i].name, *at = only ? strstr(only, name) : NULL;
        size_t len = strlen(name);
        if (!only || (at && (at == only || at[-1] == ',') && (at[len] == ',' || !at[len])))
            tpc_conformance_selected[n++] = i;
    }
    return n;
}

static inline int tpc_conformance_main(const tpc_conformance_t *c, int argc, char **argv)
{
    if (tpc_conformance_is_child(argc, argv))
        return tpc_conformance_child_main(c, argc, argv);
    tpc_conformance_under_test = c;
    int n = tpc_conformance_select();
    Suite *s = suite_create("conformance");
    TCase *tc = tcase_create(c->name);
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_conformance, 0, n);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return n == 0 || failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
