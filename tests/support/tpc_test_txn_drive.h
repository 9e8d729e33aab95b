/*
 * Driving one sink subtask's transaction state machine (txn/txn_task.c) by hand, without a job:
 * the unit tests call its checkpoint events in exactly the order a scenario needs (late or
 * subsumed notifications, aborted checkpoints, restores from a chosen state) and compare the
 * recorded connector calls. The runtime adapter in txn/txn_operator.c only forwards to it.
 */
#ifndef TPC_TEST_TXN_DRIVE_H
#define TPC_TEST_TXN_DRIVE_H

#include "tpc_test_txn_conn.h"
#include "txn_internal.h"

#define TPC_TEST_TXN_MAX_ENTRIES 64

/* A snapshot's state entries, copied. */
typedef struct {
    tpc__txn_bytes_t entries[TPC_TEST_TXN_MAX_ENTRIES];
    size_t count;
} tpc_test_txn_state_t;

/* One subtask; log lines are kept for assertions. */
typedef struct {
    tpc__txn_task_t *task;
    tpc__txn_env_t env;
    char log[8192];
    size_t log_len;
} tpc_test_txn_sub_t;

/* Open subtask @subtask of @parallelism as restored from checkpoint @restored (0 = fresh). */
tpc_error_t *tpc_test_txn_sub_open(tpc_test_txn_sub_t *s, tpc_txn_sink_t *sink, int subtask,
                                   int parallelism, uint64_t restored);

/* Where a subtask starts from, as the runtime tells it: the restored checkpoint (0 = fresh), the
 * sink's parallelism in it, the highest parallelism the sink has run with, the lowest id a
 * checkpoint of this attempt can have, and the owner epoch of the run (0: no owners). Zeroes are
 * what a first start sees. */
typedef struct {
    uint64_t restored;
    int restored_parallelism;
    int highest_parallelism;
    uint64_t first_checkpoint;
    uint64_t owner_epoch;
} tpc_test_txn_origin_t;

/* tpc_test_txn_sub_open() starting from @from (NULL: a first start). */
tpc_error_t *tpc_test_txn_sub_open_from(tpc_test_txn_sub_t *s, tpc_txn_sink_t *sink, int subtask,
                                        int parallelism, const tpc_test_txn_origin_t *from);
/* Write @n records of source subtask 0 with sequence numbers from @first. */
tpc_error_t *tpc_test_txn_sub_write(tpc_test_txn_sub_t *s, uint64_t first, size_t n);
/* Snapshot into @state (which is reset first; may be NULL). */
tpc_error_t *tpc_test_txn_sub_snapshot(tpc_test_txn_sub_t *s, uint64_t id,
                                       tpc_test_txn_state_t *state);
/* Open subtask 0 of 1 as restored from checkpoint @restored, and initialize it with the entries
 * of @state (NULL: none). On failure nothing stays open (a close after it does nothing). */
tpc_error_t *tpc_test_txn_sub_start(tpc_test_txn_sub_t *s, tpc_txn_sink_t *sink, uint64_t restored,
                                    const tpc_test_txn_state_t *state);
void tpc_test_txn_sub_close(tpc_test_txn_sub_t *s);
void tpc_test_txn_state_free(tpc_test_txn_state_t *state);

/* A sink over the recording connector with short retry pauses. Check-free helpers: the caller
 * asserts. */
tpc_txn_sink_t *tpc_test_txn_sink(void *recorder);

/* The fixture of the hand-driven tests: initialize @rec for @max_seq records per source subtask
 * and make a sink over it (tpc_test_txn_sink()). @returns the sink, NULL on failure (@rec is then
 * freed again). tpc_test_txn_rec_sink_free() releases both. */
tpc_txn_sink_t *tpc_test_txn_rec_sink_new(tpc_test_txn_rec_t *rec, uint64_t max_seq);
void tpc_test_txn_rec_sink_free(tpc_test_txn_rec_t *rec, tpc_txn_sink_t *sink);

#endif
