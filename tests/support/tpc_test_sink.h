/*
 * Sinks that tests use to observe what the runtime did:
 * - the recording sink remembers, across all its subtasks, every record (decoded as written by the
 *   sequence source), every snapshot and notification, and when finish() ran;
 * - the counting operator keeps per-source-subtask count and sum of sequence numbers as operator
 *   state, so after failures and restores its totals show whether a record was lost or doubled.
 */
#ifndef TPC_TEST_SINK_H
#define TPC_TEST_SINK_H

#include "tpc_runtime.h"

#include <pthread.h>

#define TPC_TEST_MAX_EVENTS 4096

typedef struct {
    pthread_mutex_t mu;
    uint64_t max_seq; /* sequence numbers per source subtask that `seen` can hold */
    uint8_t *seen;    /* [16 * max_seq] counts */
    uint64_t records, duplicates, out_of_range;
    uint64_t snapshots[TPC_TEST_MAX_EVENTS];
    int nsnapshots;
    uint64_t notifies[TPC_TEST_MAX_EVENTS];
    int nnotifies;
    uint64_t aborts[TPC_TEST_MAX_EVENTS];
    int naborts;
    int finishes, closes, opens;
    uint64_t first_notify_after_finish; /* id of the first notify after any finish() */
    bool snapshot_after_finish;
    uint64_t first_snapshot_after_finish; /* id of the first snapshot after any finish() */
} tpc_test_rec_t;

void tpc_test_rec_init(tpc_test_rec_t *r, uint64_t max_seq);
void tpc_test_rec_free(tpc_test_rec_t *r);
/* Records of source subtask @p sub with seq < @p count that were not seen exactly once. */
uint64_t tpc_test_rec_missing(tpc_test_rec_t *r, int sub, uint64_t count);
extern const tpc_operator_ops_t tpc_test_rec_sink_ops; /* arg: tpc_test_rec_t * */

typedef struct {
    pthread_mutex_t mu;
    /* [counter subtask][source subtask], as of each counter subtask's last finish() */
    uint64_t count[16][16], sum[16][16];
    int finishes;
    bool use_union; /* also write the totals as union state (for the union-state tests) */
} tpc_test_count_t;

void tpc_test_count_init(tpc_test_count_t *c);
/* Totals over the counter's subtasks for records of source subtask @p src. */
void tpc_test_count_total(tpc_test_count_t *c, int src, uint64_t *count, uint64_t *sum);
extern const tpc_operator_ops_t tpc_test_count_ops; /* arg: tpc_test_count_t * */

#endif
