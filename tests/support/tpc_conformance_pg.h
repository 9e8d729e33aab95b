/*
 * The PostgreSQL sink as the connector conformance suite (tpc_conformance.h) drives it, against the
 * server of TWOPC_TEST_PG_CONNINFO: each check gets its own table, gid prefix, marker table and
 * write-ahead table; the other sink of a check shares the table, the marker and write-ahead table.
 */
#ifndef TPC_CONFORMANCE_PG_H
#define TPC_CONFORMANCE_PG_H

#include "tpc_conformance.h"

/** The connector whose sinks commit as pg.commit=@p commit ("prepared", "write-ahead"); the
 * string must outlive the suite. One per process. */
const tpc_conformance_t *tpc_conformance_pg(const char *commit);

#endif
