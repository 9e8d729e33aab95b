/*
 * The conformance suite over every layout of the PostgreSQL sink (tpc_conformance_pg.h), as Check
 * suites, one per layout, for a test binary's main. Include it instead of tpc_conformance_check.h,
 * in one file per test binary.
 */
#ifndef TPC_CONFORMANCE_PG_CHECK_H
#define TPC_CONFORMANCE_PG_CHECK_H

#include "tpc_conformance_check.h"
#include "tpc_conformance_pg.h"

#include <stdlib.h>

/* The layout of a run, which the kill -9 check's children inherit. */
#define TPC_CONFORMANCE_PG_LAYOUT_ENV "TWOPC_CONFORMANCE_PG_LAYOUT"

/** A child of the kill -9 check: its layout from the environment. */
static inline int tpc_conformance_pg_child(const char *commit, int argc, char **argv)
{
    const char *layout = getenv(TPC_CONFORMANCE_PG_LAYOUT_ENV);
    return tpc_conformance_child_main(tpc_conformance_pg_layout(commit, layout ? layout : "copy"),
                                      argc, argv);
}

/** Every layout with the checks that apply to it (or those of TWOPC_CONFORMANCE_CHECKS, when
 * set). @returns EXIT_SUCCESS when all passed. */
static inline int tpc_conformance_pg_layouts_main(const char *commit, int argc, char **argv)
{
    int rc = EXIT_SUCCESS;
    bool chosen = getenv("TWOPC_CONFORMANCE_CHECKS") != NULL;
    for (size_t i = 0; tpc_conformance_pg_layouts[i]; i++) {
        const char *layout = tpc_conformance_pg_layouts[i];
        const char *checks = tpc_conformance_pg_checks(layout);
        if (checks && chosen)
            continue;
        setenv(TPC_CONFORMANCE_PG_LAYOUT_ENV, layout, 1);
        if (checks)
            setenv("TWOPC_CONFORMANCE_CHECKS", checks, 1);
        if (tpc_conformance_main(tpc_conformance_pg_layout(commit, layout), argc, argv) !=
            EXIT_SUCCESS)
            rc = EXIT_FAILURE;
        if (checks)
            unsetenv("TWOPC_CONFORMANCE_CHECKS");
    }
    return rc;
}

#endif
