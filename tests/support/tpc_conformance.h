/*
 * The connector conformance suite: the checks every two-phase-commit connector must pass, written
 * once against the connector contract of tpc_txn.h and run for each connector by a small test file
 * (tests/unit/check_conformance_file.c, tests/integration/check_conformance_pg.c, ...).
 *
 * A connector takes part by filling a tpc_conformance_t: how to make a fresh namespace (a folder, a
 * table, a topic and id prefix), a configured sink writing into it, and how to read back what is
 * committed there the way a user would (the files listed in the folder, SELECT from the table, a
 * read_committed consumer), two counts of what the external system holds, and a second sink for
 * the same namespace. The suite then drives sink subtasks by hand through the orders of checkpoint
 * events the framework produces (late, subsumed and partial notifications, aborted checkpoints,
 * finish; txn/txn_task.c through tpc_test_txn_drive.h), crashes them with SIGKILL in child
 * processes, restores them at the same or another parallelism, and compares what is visible with
 * what must be, record by record: nothing lost, nothing twice, nothing early. The kill -9 check
 * runs whole jobs in child processes and kills them at every phase of a transaction.
 *
 * Records are those of the sequence source (tpc_test_ops.h): the key and the value are the same
 * 8 bytes, big-endian (source subtask << 40 | sequence number). A reader returns the 8-byte values
 * it finds as numbers.
 *
 * No Check calls here (the support objects are linked into benchmarks too): each check returns
 * false with a reason; tpc_conformance_check.h turns the checks into a Check suite.
 */
#ifndef TPC_CONFORMANCE_H
#define TPC_CONFORMANCE_H

#include "tpc_txn.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Longest namespace name, with its NUL. */
#define TPC_CONFORMANCE_NS_MAX 512

/** Records read back: the 8-byte values as numbers, in any order, duplicates kept. */
typedef struct {
    uint64_t *keys;
    size_t len, cap;
} tpc_conformance_keys_t;

/** Add one record read back. @p bytes must be the 8 bytes the sink was given; anything else is
 * kept as a record that no check ever writes (UINT64_MAX), so that it shows as foreign. */
void tpc_conformance_keys_add(tpc_conformance_keys_t *keys, const void *bytes, size_t len);
void tpc_conformance_keys_free(tpc_conformance_keys_t *keys);

/** @returns true when @p got holds exactly the records of @p want, each as often; else false with
 * the counts and the first difference in @p why. */
bool tpc_conformance_compare(const tpc_conformance_keys_t *got, const tpc_conformance_keys_t *want,
                             char *why, size_t why_len);

/**
 * What a connector gives the suite. Every function returns false with a reason in @p why (of
 * @p why_len bytes) when it cannot do its part; the check then fails with that reason.
 */
typedef struct {
    const char *name; /**< "file", "postgresql", ... for messages */

    /** Make a fresh namespace that no other check and no other run uses, and write its name
     * (a folder path, a table or topic name, ...) into @p ns. */
    bool (*ns_new)(char *ns, size_t cap, char *why, size_t why_len);
    /** Remove what ns_new made and what the checks left there. */
    void (*ns_free)(const char *ns);
    /** Make a configured sink that writes into @p ns. Called in the test and in the children of
     * the kill -9 check (with the environment inherited). */
    tpc_error_t *(*sink_new)(const char *ns, tpc_txn_sink_t **out);
    /** Read every committed record of @p ns, as an independent reader sees it. */
    bool (*read)(const char *ns, tpc_conformance_keys_t *out, char *why, size_t why_len);
    /** How much the external system holds for @p ns, in any unit that grows with any pre-commit
     * or commit (directory entries, rows of the marker table plus prepared transactions, log end
     * offsets): an empty transaction must not change it. */
    bool (*footprint)(const char *ns, long long *out, char *why, size_t why_len);
    /** How many transactions of @p ns the external system holds open or prepared (in-progress
     * files, prepared transactions, partitions whose last stable offset lags). Must be 0 once
     * recovery is over and after a sink closed. */
    bool (*leftovers)(const char *ns, long long *out, char *why, size_t why_len);

    /** A second sink writing into the same namespace, as another job would configure it: its
     * own prefix, chosen so that its names resemble those of sink_new's sink as much as the
     * connector allows (a prefix that starts with the first one's, a shared marker table). */
    tpc_error_t *(*other_sink_new)(const char *ns, tpc_txn_sink_t **out);
    /** read also shows the other sink's records (a table or topic both write into); leftovers
     * counts only the first sink's transactions. */
    bool other_visible;

    /** The kill -9 check: records per source subtask (2 source subtasks), the job's
     * checkpoint.interval.ms, and how long one run may take before it counts as stuck. */
    uint64_t crash_records;
    int crash_interval_ms;
    int crash_run_ms;
} tpc_conformance_t;

/** One check of the suite. */
typedef struct {
    const char *name;
    const char *what; /**< one line: what it proves */
    bool (*run)(const tpc_conformance_t *c, char *why, size_t why_len);
} tpc_conformance_check_t;

/** The checks, in the order they run. */
extern const tpc_conformance_check_t tpc_conformance_checks[];
extern const size_t tpc_conformance_check_count;

/** The kill -9 check (tpc_conformance_kill.c). */
bool tpc_conformance_kill_9(const tpc_conformance_t *c, char *why, size_t why_len);

/** The argument that makes a test binary a child of the kill -9 check. */
#define TPC_CONFORMANCE_CHILD_ARG "--conformance-child"

/** @returns true when this process is a child of the kill -9 check (argv[1]). */
bool tpc_conformance_is_child(int argc, char **argv);
/** Run the child's job. @returns its exit status. */
int tpc_conformance_child_main(const tpc_conformance_t *c, int argc, char **argv);

#endif
