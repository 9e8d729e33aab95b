/*
 * The PostgreSQL sink as the connector conformance suite (tpc_conformance.h) drives it, against the
 * server of TWOPC_TEST_PG_CONNINFO: each check gets its own table, gid prefix, marker table and
 * write-ahead table; the other sink of a check shares the table, the marker and write-ahead table.
 * The rows go into the table by COPY, as a changelog, or into two tables of one sink.
 */
#ifndef TPC_CONFORMANCE_PG_H
#define TPC_CONFORMANCE_PG_H

#include "tpc_conformance.h"

/** The connector whose sinks commit as pg.commit=@p commit ("prepared", "write-ahead"); the
 * string must outlive the suite. One per process. */
const tpc_conformance_t *tpc_conformance_pg(const char *commit);

/** The same with the rows written in @p layout: "copy" (as tpc_conformance_pg()), "insert"
 * (pg.mode=insert), "upsert" (pg.mode=upsert into a table keyed by k), "changelog"
 * (pg.mode=changelog into a table keyed by k: every record an upsert), "changelog-deletes" (each
 * record also deletes a row the table started with; reading back fails when a record's row and
 * the row it deletes are both there or both gone) or "two-tables" (each record a row in the table
 * and the same row in a second table of the same sink; reading back fails unless both hold the
 * same rows). */
const tpc_conformance_t *tpc_conformance_pg_layout(const char *commit, const char *layout);

/** The layouts, NULL-terminated, in the order a test binary runs them. */
extern const char *const tpc_conformance_pg_layouts[];

/** The checks (for TWOPC_CONFORMANCE_CHECKS) that apply to @p layout, or NULL for all. With
 * deletes a subtask keeps at most one transaction prepared (the sink refuses to pre-commit deletes
 * beside an earlier prepared transaction, docs/postgres.md), so the checks that hold two are left
 * out. */
const char *tpc_conformance_pg_checks(const char *layout);

#endif
