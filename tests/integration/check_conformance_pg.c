/*
 * The PostgreSQL sink passes the connector conformance suite (tests/support/tpc_conformance.h)
 * against the real server, committing with prepared transactions: every order of checkpoint
 * events, crashes, restores at another parallelism and kill -9 in every phase, with what is
 * committed read back by SELECT on a connection of its own (tpc_conformance_pg.h). It runs three
 * times: rows by COPY, the same records as a changelog (pg.mode=changelog, each an upsert of its
 * key), and each record a row in two tables of one sink (read back only if both tables hold the
 * same rows). The layout of a run is in TWOPC_CONFORMANCE_PG_LAYOUT, which the crash children
 * inherit. The write-ahead mode runs the suite in check_pg_write_ahead.c, on a server without
 * prepared transactions.
 */
#include "tpc_conformance_check.h"
#include "tpc_conformance_pg.h"

#include <stdlib.h>

#define LAYOUT_ENV "TWOPC_CONFORMANCE_PG_LAYOUT"

int main(int argc, char **argv)
{
    if (tpc_conformance_is_child(argc, argv)) {
        const char *layout = getenv(LAYOUT_ENV);
        return tpc_conformance_child_main(
            tpc_conformance_pg_layout("prepared", layout ? layout : "copy"), argc, argv);
    }
    static const char *const layouts[] = {"copy", "changelog", "two-tables"};
    int rc = EXIT_SUCCESS;
    for (size_t i = 0; i < sizeof layouts / sizeof *layouts; i++) {
        setenv(LAYOUT_ENV, layouts[i], 1);
        if (tpc_conformance_main(tpc_conformance_pg_layout("prepared", layouts[i]), argc, argv) !=
            EXIT_SUCCESS)
            rc = EXIT_FAILURE;
    }
    return rc;
}
