/*
 * Operators shared by tests and benchmarks: a deterministic, restorable sequence source and a few
 * small operators. Records of the sequence source are
 *   key   = 8 bytes, big-endian: (subtask << 40) | sequence number
 *   value = the same 8 bytes followed by `value_pad` zero bytes
 * so that any reader can tell exactly which record it holds and count duplicates and losses.
 */
#ifndef TPC_TEST_OPS_H
#define TPC_TEST_OPS_H

#include "tpc_runtime.h"

#include <pthread.h>
#include <stdatomic.h>

/** Configuration of the sequence source; must outlive the job. */
typedef struct {
    uint64_t count[16];     /**< records per subtask (index = subtask); 0 = count_default */
    uint64_t count_default; /**< records for subtasks whose count[] is 0 */
    uint32_t per_poll;      /**< records per poll (default 64) */
    uint32_t value_pad;     /**< extra zero bytes after the 8-byte value */
    uint32_t sleep_us;      /**< sleep after each poll (0 = none) */
    /** Fail the poll (returning an error) once the subtask reached this sequence number; 0 = never.
     * Only in attempt 0, so the restarted attempt goes on. */
    uint64_t fail_at;
    int fail_subtask;
    atomic_int opens; /**< counts open() calls (all subtasks, all attempts) */
} tpc_test_seq_conf_t;

extern const tpc_operator_ops_t tpc_test_seq_source_ops;

/** Decode a record written by the sequence source. @returns false if it is not one. */
bool tpc_test_seq_decode(const void *key, size_t key_len, int *subtask, uint64_t *seq);

/** A map operator that passes every record through unchanged. No state. */
extern const tpc_operator_ops_t tpc_test_identity_ops;
/** A sink that drops everything. No state. */
extern const tpc_operator_ops_t tpc_test_discard_ops;

/** An operator that holds a snapshot: a snapshot of checkpoint pause_from or later (0: never) sets
 * paused_id, broadcasts cv and waits under mu until release is set. Its records pass through
 * (forward) or are dropped. The argument of tpc_job_add_vertex() is the tpc_test_hold_t, shared by
 * every subtask; tpc_test_hold_init() / tpc_test_hold_destroy() set up and free mu and cv. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t pause_from, paused_id;
    bool release, forward;
} tpc_test_hold_t;
extern const tpc_operator_ops_t tpc_test_hold_ops;
void tpc_test_hold_init(tpc_test_hold_t *h, bool forward);
void tpc_test_hold_destroy(tpc_test_hold_t *h);

/** A new empty directory under $TMPDIR (malloc'd path); tpc_test_rmdir() removes it again. */
char *tpc_test_tmpdir(const char *tag);
void tpc_test_rmdir(const char *path);

#endif
