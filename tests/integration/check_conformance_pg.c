/*
 * The PostgreSQL sink passes the connector conformance suite (tests/support/tpc_conformance.h)
 * against the real server, committing with prepared transactions: every order of checkpoint
 * events, crashes, restores at another parallelism and kill -9 in every phase, with what is
 * committed read back by SELECT on a connection of its own (tpc_conformance_pg.h). It runs once
 * per layout (tpc_conformance_pg_layouts): rows by COPY, by INSERT (pg.mode=insert), as upserts
 * (pg.mode=upsert), as a changelog of upserts (pg.mode=changelog), as a changelog with deletes
 * (each record an upsert of its key and a delete of a row the table started with, so that a
 * snapshot never shows a record without its delete or a delete without its record; only the
 * checks that keep one transaction prepared per subtask), and each record a row in two tables of
 * one sink (read back only if both tables hold the same rows). The layout of a run is in
 * TWOPC_CONFORMANCE_PG_LAYOUT, which the crash children inherit. The write-ahead mode runs the
 * suite in check_pg_write_ahead.c, on a server without prepared transactions.
 */
#include "tpc_conformance_pg_check.h"

int main(int argc, char **argv)
{
    if (tpc_conformance_is_child(argc, argv))
        return tpc_conformance_pg_child("prepared", argc, argv);
    return tpc_conformance_pg_layouts_main("prepared", argc, argv);
}
