/*
 * A recording connector for testing the transaction framework (txn/). It plays the external
 * system too: transactions live in the recorder, so they survive restarts of the job within the
 * process, and a commit makes their records "visible" exactly as a real system would. It records
 * every call in order, checks the contract as it goes (a violation is counted and described, never
 * fatal, so tests can assert on it), and can be told to fail or to be slow at any call.
 *
 * Records are expected to carry keys of the sequence source (tpc_test_ops.h), so that visible
 * records can be checked for losses and duplicates.
 */
#ifndef TPC_TEST_TXN_CONN_H
#define TPC_TEST_TXN_CONN_H

#include "tpc_txn.h"

#include <pthread.h>

typedef enum {
    TPC_TEST_TXN_OPEN,
    TPC_TEST_TXN_BEGIN,
    TPC_TEST_TXN_WRITE,
    TPC_TEST_TXN_FLUSH,
    TPC_TEST_TXN_PRE_COMMIT,
    TPC_TEST_TXN_COMMIT,
    TPC_TEST_TXN_ABORT,
    TPC_TEST_TXN_RECOVER_COMMIT,
    TPC_TEST_TXN_RECOVER_ABORT,
    TPC_TEST_TXN_LINGERING,
    TPC_TEST_TXN_CLOSE,
    TPC_TEST_TXN_NOPS
} tpc_test_txn_op_t;

typedef struct {
    tpc_test_txn_op_t op;
    int subtask;
    uint64_t txn;  /* transaction id (1, 2, ... in order of begin), 0 if none */
    uint64_t ckpt; /* begin: lowest checkpoint; pre_commit: checkpoint; lingering: restored */
} tpc_test_txn_event_t;

typedef struct {
    uint64_t begin_ckpt; /* lowest checkpoint given to begin */
    uint64_t ckpt;       /* pre-committed in, 0 if not */
    int subtask;         /* that began it */
    bool committed, aborted, expired;
    uint64_t *keys; /* raw 8-byte keys as integers */
    size_t nkeys, cap;
} tpc_test_txn_t;

typedef struct {
    pthread_mutex_t mu;
    tpc_test_txn_event_t *events;
    size_t nevents, events_cap;
    tpc_test_txn_t *txns; /* index = id - 1 */
    size_t ntxns, txns_cap;
    int calls[TPC_TEST_TXN_NOPS];
    struct {
        int from_call; /* 1-based; 0 = never */
        int times;
        bool retriable;
        int delay_ms; /* instead of failing: sleep that long */
    } inject[TPC_TEST_TXN_NOPS];
    int slow_final_pre_commit_ms; /* the first pre_commit after a flush sleeps this long */
    bool flushed;
    int violations;
    char first_violation[256];
    uint64_t max_seq; /* visible-record accounting: [16][max_seq] counts */
    uint8_t *visible;
    uint64_t visible_records;
} tpc_test_txn_rec_t;

void tpc_test_txn_rec_init(tpc_test_txn_rec_t *r, uint64_t max_seq);
void tpc_test_txn_rec_free(tpc_test_txn_rec_t *r);

/* Make calls @from_call .. @from_call + @times - 1 (1-based, over all subtasks) of @op fail. */
void tpc_test_txn_fail(tpc_test_txn_rec_t *r, tpc_test_txn_op_t op, int from_call, int times,
                       bool retriable);
/* Make call @call of @op sleep @ms milliseconds first. */
void tpc_test_txn_delay(tpc_test_txn_rec_t *r, tpc_test_txn_op_t op, int call, int ms);
/* The external system forgets transaction @id (as after a transaction timeout): committing it
 * fails from now on unless it was committed already. */
void tpc_test_txn_expire(tpc_test_txn_rec_t *r, uint64_t id);

/* The calls of subtask @subtask (-1: all) as text, one word per call, e.g.
 * "open lingering@0 begin:1@1 write:1 pre_commit:1@1 begin:2@2 commit:1 close";
 * consecutive writes to one transaction are shown once. Malloc'd. */
char *tpc_test_txn_trace(tpc_test_txn_rec_t *r, int subtask);
/* Records of source subtask @sub with seq < @count that are not visible exactly once. */
uint64_t tpc_test_txn_missing(tpc_test_txn_rec_t *r, int sub, uint64_t count);
int tpc_test_txn_count(tpc_test_txn_rec_t *r, tpc_test_txn_op_t op);

/* arg for tpc_txn_sink_new: the recorder (not released by the sink). */
extern const tpc_txn_connector_ops_t tpc_test_txn_ops;

#endif
