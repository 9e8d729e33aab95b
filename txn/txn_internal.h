/*
 * Private to txn/: the sink object shared by its subtasks, the state entry format, and the
 * per-subtask transaction state machine ("task"). The state machine does not see the runtime: it
 * gets a small environment (names, subtask, restored checkpoint, a logger, a cancel flag) and
 * state entries as plain byte strings, so that txn_operator.c is a thin adapter to
 * tpc_operator_ops_t and the unit tests can drive every transition in any order they need.
 */
#ifndef TPC_TXN_INTERNAL_H
#define TPC_TXN_INTERNAL_H

#include "tpc_txn.h"

#include <stdatomic.h>

/* ---- growable buffer --------------------------------------------------------------------- */

struct tpc_txn_buf {
    unsigned char *data;
    size_t len;
    size_t cap;
};

void tpc__txn_buf_free(tpc_txn_buf_t *buf);

/* ---- the sink, shared read-only by its subtasks once added to a job ----------------------- */

typedef struct {
    tpc_txn_guarantee_t guarantee;
    uint64_t timeout_ms;
    double warn_ratio;
    bool expired_log; /* recovery.expired=log */
    uint64_t retry_deadline_ms;
    uint64_t backoff_ms;
    uint64_t backoff_max_ms;
} tpc__txn_conf_t;

/* Buckets of the commit latency histogram (txn_metrics.c). */
#define TPC__TXN_COMMIT_NBOUNDS 15

typedef struct {
    atomic_uint_fast64_t pending;
    atomic_uint_fast64_t begun;
    atomic_uint_fast64_t pre_commits;
    atomic_uint_fast64_t commits;
    atomic_uint_fast64_t recovered_commits;
    atomic_uint_fast64_t aborts;
    atomic_uint_fast64_t empty_skipped;
    atomic_uint_fast64_t commit_retries;
    atomic_uint_fast64_t commit_latency_us;
    atomic_uint_fast64_t commit_latency_max_us;
    atomic_uint_fast64_t expired_lost;
    atomic_uint_fast64_t records;
    /* commit calls by duration (txn_metrics.c's bounds; the last: above every bound) */
    atomic_uint_fast64_t commit_buckets[TPC__TXN_COMMIT_NBOUNDS + 1];
    /* Per subtask, once added to a job: wall-clock ms at which the oldest transaction it
     * pre-committed and has not committed yet began, 0 for none. Kept when a subtask closes with
     * pending transactions (they stay open in the external system until a restore commits them),
     * replaced when the next attempt restores. */
    _Atomic int64_t *oldest_pending_ms;
    int nsubtasks;
} tpc__txn_counters_t;

struct tpc_txn_sink_s {
    const tpc_txn_connector_ops_t *ops;
    void *arg;
    tpc__txn_conf_t conf;
    bool added; /* configuration is frozen once a job holds the sink */
    char *name; /* the vertex name it was added as */
    tpc__txn_counters_t stats;
};

/* txn_metrics.c: the sink's part of a scrape of the job's metrics endpoint; arg = the sink. */
void tpc__txn_metrics(void *arg, tpc_metrics_writer_t *w);
/* txn_metrics.c: a commit call took @us (retries included), for the latency histogram. */
void tpc__txn_observe_commit(tpc__txn_counters_t *c, uint64_t us);
/* txn_metrics.c: subtask @subtask's oldest pending transaction began at @start_ms (wall clock),
 * 0: it has none. */
void tpc__txn_publish_oldest(tpc__txn_counters_t *c, int subtask, int64_t start_ms);

/* ---- state entries ----------------------------------------------------------------------- */

/* One state entry per transaction handle, in a versioned envelope around the connector's own
 * bytes: magic "TPCX", version, kind, origin (the writing subtask + 1, u16; 0 in entries of older
 * versions), checkpoint id, start time, handle length (28 bytes so far), then since version 2 the
 * connector's name (u8 length + bytes, ops->name), then the handle. Version 1 had no name: the
 * handle follows the 28 bytes. Entries are OWNED state: after a
 * parallelism change the runtime hands old subtask s's entries to the subtask that owns s
 * (tpc_txn_owns()), and a sink subtask that closed takes none along (it committed everything
 * before), so a partly finished sink checkpoints normally; older versions wrote LIST state. */
#define TPC__TXN_ENTRY_VERSION 2
#define TPC__TXN_ENTRY_HEADER  28

typedef enum { TPC__TXN_PENDING = 0, TPC__TXN_CURRENT = 1 } tpc__txn_kind_t;

typedef struct {
    tpc__txn_kind_t kind;
    uint64_t checkpoint_id; /* pending: pre-committed in; current: lowest it could be */
    int64_t start_ms;       /* wall clock at begin, milliseconds since the epoch */
    int origin;             /* the subtask that wrote it, -1 when unknown (older versions) */
    /* begin: the connector's name (NUL-terminated, NULL for none); decode: points into the entry,
     * connector_len bytes, not NUL-terminated; NULL in entries of version 1, which have none */
    const char *connector;
    size_t connector_len;
    const void *handle; /* decode: points into the entry */
    size_t handle_len;
} tpc__txn_entry_t;

/* Reset @out and write the envelope of @e; the connector's bytes follow, then call
 * tpc__txn_entry_seal() to fix the handle length. */
tpc_error_t *tpc__txn_entry_begin(const tpc__txn_entry_t *e, tpc_txn_buf_t *out);
void tpc__txn_entry_seal(tpc_txn_buf_t *out);
tpc_error_t *tpc__txn_entry_decode(const void *bytes, size_t len, tpc__txn_entry_t *out);

/* ---- per-subtask state machine ----------------------------------------------------------- */

typedef struct {
    const char *job_name;
    const char *sink_name;
    int subtask;
    int parallelism;
    int attempt;
    uint64_t restored_checkpoint;
    int restored_parallelism;  /* of the sink in the restored checkpoint, 0 for none */
    int highest_parallelism;   /* the sink has run with in checkpoint.dir, >= parallelism */
    uint64_t first_checkpoint; /* lowest id a checkpoint of this attempt can have */
    bool restored_behind;      /* restore.fallback=at-least-once restored an older checkpoint */
    int64_t checkpoint_interval_ms;
    uint64_t owner_epoch;
    void (*log)(void *opaque, tpc_log_level_t level, const char *message);
    bool (*is_canceled)(void *opaque);
    void *opaque;
} tpc__txn_env_t;

typedef struct {
    const void *bytes;
    size_t len;
} tpc__txn_bytes_t;

typedef tpc_error_t *(*tpc__txn_state_add_fn)(void *w, const void *bytes, size_t len);

typedef struct tpc__txn_task tpc__txn_task_t;

/* A pre-committed transaction waiting for its checkpoint to complete. */
typedef struct {
    uint64_t checkpoint_id; /* pre-committed as part of this checkpoint */
    int64_t start_ms;
    void *txn;
    tpc_txn_buf_t state; /* its state entry, made once at pre-commit: handles do not change */
    bool warned;         /* the approaching-timeout warning was given */
} tpc__txn_pending_t;

struct tpc__txn_task {
    const tpc_txn_connector_ops_t *ops;
    const tpc__txn_conf_t *conf;
    tpc__txn_counters_t *stats;
    tpc__txn_env_t env;
    tpc_txn_subtask_t st;
    void *conn;

    void *current; /* NULL after finish() once pre-committed, or before initialize */
    uint64_t current_checkpoint;
    int64_t current_start_ms;

    tpc__txn_pending_t *pending; /* ordered by checkpoint id */
    size_t npending;
    size_t pending_cap;

    uint64_t last_checkpoint; /* highest checkpoint snapshotted or restored */
    bool finished;
    bool failed; /* a call of this attempt returned an error */
    tpc_txn_buf_t buf;
};

/* Calls that are retried while they fail with TPC_ERROR_RETRIABLE (txn_retry.c). */
typedef enum {
    TPC__TXN_OP_COMMIT,
    TPC__TXN_OP_RECOVER_COMMIT,
    TPC__TXN_OP_RECOVER_ABORT,
} tpc__txn_op_t;

/* Call @op on @txn (named @name in messages) with retries and backoff up to the deadline; commit
 * times count in the statistics. */
tpc_error_t *tpc__txn_call(tpc__txn_task_t *t, tpc__txn_op_t op, void *txn, const char *name);
void tpc__txn_describe(const tpc__txn_task_t *t, const void *txn, char *buf, size_t cap);
bool tpc__txn_canceled(const tpc__txn_task_t *t);

/* @env is copied; its strings must live until close. */
tpc_error_t *tpc__txn_task_open(tpc_txn_sink_t *sink, const tpc__txn_env_t *env,
                                tpc__txn_task_t **out);
/* Restore rules (entries may be NULL when @count is 0), then begin the first transaction. */
tpc_error_t *tpc__txn_task_initialize(tpc__txn_task_t *t, const tpc__txn_bytes_t *entries,
                                      size_t count);
tpc_error_t *tpc__txn_task_write(tpc__txn_task_t *t, const tpc_record_t *records, size_t count);
tpc_error_t *tpc__txn_task_snapshot(tpc__txn_task_t *t, uint64_t checkpoint_id,
                                    tpc__txn_state_add_fn add, void *w);
tpc_error_t *tpc__txn_task_complete(tpc__txn_task_t *t, uint64_t checkpoint_id);
tpc_error_t *tpc__txn_task_aborted(tpc__txn_task_t *t, uint64_t checkpoint_id);
tpc_error_t *tpc__txn_task_finish(tpc__txn_task_t *t);
/* Aborts the current transaction, forgets pending ones (they belong to recovery), frees @t. */
void tpc__txn_task_close(tpc__txn_task_t *t);

void tpc__txn_logf(const tpc__txn_env_t *env, tpc_log_level_t level, const char *fmt, ...)
    TPC_PRINTF(3, 4);

/* The operator the runtime hosts; arg = tpc_txn_sink_t *. */
extern const tpc_operator_ops_t tpc__txn_operator_ops;

/* ---- calling a connector ----------------------------------------------------------------- */

static inline tpc_error_t *tpc__txn_begin(const tpc_txn_connector_ops_t *ops, void *conn,
                                          uint64_t checkpoint_id, void **txn)
{
    return ops->begin(conn, checkpoint_id, txn);
}

static inline tpc_error_t *tpc__txn_write(const tpc_txn_connector_ops_t *ops, void *conn, void *txn,
                                          const tpc_record_t *records, size_t count)
{
    return ops->write(conn, txn, records, count);
}

static inline tpc_error_t *tpc__txn_flush(const tpc_txn_connector_ops_t *ops, void *conn, void *txn)
{
    return ops->flush ? ops->flush(conn, txn) : NULL;
}

static inline tpc_error_t *tpc__txn_pre_commit(const tpc_txn_connector_ops_t *ops, void *conn,
                                               void *txn, uint64_t checkpoint_id)
{
    return ops->pre_commit(conn, txn, checkpoint_id);
}

static inline tpc_error_t *tpc__txn_abort(const tpc_txn_connector_ops_t *ops, void *conn, void *txn)
{
    return ops->abort(conn, txn);
}

static inline tpc_error_t *tpc__txn_recover_and_abort(const tpc_txn_connector_ops_t *ops,
                                                      void *conn, void *txn)
{
    return ops->recover_and_abort(conn, txn);
}

static inline tpc_error_t *tpc__txn_abort_lingering(const tpc_txn_connector_ops_t *ops, void *conn,
                                                    const tpc_txn_lingering_t *l)
{
    return ops->abort_lingering ? ops->abort_lingering(conn, l) : NULL;
}

static inline bool tpc__txn_is_empty(const tpc_txn_connector_ops_t *ops, void *conn,
                                     const void *txn)
{
    return ops->is_empty(conn, txn);
}

static inline void tpc__txn_free(const tpc_txn_connector_ops_t *ops, void *conn, void *txn)
{
    if (txn)
        ops->free_txn(conn, txn);
}

#endif /* TPC_TXN_INTERNAL_H */
