/*
 * The PostgreSQL sink passes the connector conformance suite (tests/support/tpc_conformance.h)
 * against the real server, committing with prepared transactions: every order of checkpoint
 * events, crashes, restores at another parallelism and kill -9 in every phase, with what is
 * committed read back by SELECT on a connection of its own (tpc_conformance_pg.h). The write-ahead
 * mode runs the same suite in check_pg_write_ahead.c, on a server without prepared transactions.
 */
#include "tpc_conformance_check.h"
#include "tpc_conformance_pg.h"

int main(int argc, char **argv)
{
    return tpc_conformance_main(tpc_conformance_pg("prepared"), argc, argv);
}
