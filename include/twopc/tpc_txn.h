/**
 * @file tpc_txn.h
 * @brief twopc two-phase-commit sinks: transactions tied to checkpoints.
 *
 * A connector (file, Kafka, PostgreSQL, ...) says how to begin, write, pre-commit, commit and
 * abort a transaction in its external system by filling a tpc_txn_connector_ops_t. The framework
 * turns it into a sink vertex of a job (tpc_txn_sink_t) and decides *when* each call happens:
 *
 * | runtime event               | what the sink does (exactly-once)                              |
 * |-----------------------------|----------------------------------------------------------------|
 * | initialize_state (restored) | recover_and_commit every restored pending transaction in       |
 * |                             | checkpoint order, recover_and_abort the restored current one,  |
 * |                             | abort_lingering, then begin                                    |
 * | process(batch)              | write the batch into the current transaction                   |
 * | snapshot_state(n)           | pre_commit the current transaction, keep it as pending[n],     |
 * |                             | begin a new one unless finished, store the handles as state    |
 * | notify_checkpoint_complete(n)| commit every pending transaction <= n, in order              |
 * | notify_checkpoint_aborted(n)| nothing: pending transactions wait for a later checkpoint      |
 * | finish()                    | flush only; the next snapshot pre-commits the last transaction |
 * | close()                     | abort the current transaction; never touch pending ones        |
 *
 * No transaction is begun after finish(). A transaction into which nothing was written (is_empty)
 * is released without pre_commit, commit or abort: it costs no call to the external system.
 * Commits happen nowhere else than on notify_checkpoint_complete and on recovery of a completed
 * checkpoint; a commit that cannot succeed fails the job with an error naming the transaction and
 * the checkpoint. See docs/guarantees.md.
 *
 * Threads: a tpc_txn_sink_t is configured on one thread before it is added to a job. Connector
 * callbacks run on the thread of their subtask, one at a time per subtask; different subtasks
 * run concurrently, so whatever a connector shares between subtasks (its `arg`) is read-only
 * after configuration. tpc_txn_sink_get_stats() may be called from any thread at any time.
 */
#ifndef TPC_TXN_H
#define TPC_TXN_H

#include "tpc_kit.h"
#include "tpc_props.h"
#include "tpc_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Delivery guarantee of a sink. */
typedef enum {
    /** Transactions tied to checkpoints: every record is visible once, after its checkpoint. */
    TPC_TXN_EXACTLY_ONCE = 0,
    /** Flush and commit at every checkpoint without waiting for it to complete: nothing is lost,
     * records written after the last completed checkpoint are written again after a failure. */
    TPC_TXN_AT_LEAST_ONCE = 1,
    /** Commit at every checkpoint, the connector may skip durability work: records may be lost
     * or repeated after a failure. */
    TPC_TXN_NONE = 2,
} tpc_txn_guarantee_t;

/** @returns "exactly-once", "at-least-once" or "none". */
TPC_API const char *tpc_txn_guarantee_name(tpc_txn_guarantee_t g);

/* ------------------------------------------------------------------------------------------ */
/** @name What a connector sees of its subtask
 * @{ */

/**
 * The subtask a connector instance serves. Owned by the framework, valid from the connector's
 * open until its close returns; read it only on the subtask's thread.
 */
typedef struct tpc_txn_subtask {
    const char *job_name;  /**< the job's name */
    const char *sink_name; /**< the sink vertex's name (unique within the job) */
    int subtask;           /**< index of this subtask, 0 <= subtask < parallelism */
    int parallelism;       /**< subtasks of the sink vertex in this run */
    int attempt;           /**< 0 for the first run in this process, +1 per restart */
    tpc_txn_guarantee_t guarantee;
    /** Id of the checkpoint this attempt restored from, 0 on a fresh start. */
    uint64_t restored_checkpoint;
    /** Parallelism of the sink in the restored checkpoint; 0 on a fresh start. */
    int restored_parallelism;
    /** The highest parallelism the sink has run with in this checkpoint.dir (at least
     * parallelism): subtasks up to it may have left transactions behind. */
    int highest_parallelism;
    /** The lowest id a checkpoint of this attempt can have: above every checkpoint id the
     * directory has seen, also those of runs that were started over. */
    uint64_t first_checkpoint;
    void *tpc__env; /**< private to the framework */
    /** The job's checkpoint.interval.ms (0: no periodic checkpoints); a transaction stays open
     * at least this long. */
    int64_t checkpoint_interval_ms;
    /** The owner epoch of this run (checkpoint.owner=claim, tpc_ctx_owner_epoch()); 0 without
     * owners. A connector puts it into the names of its transactions (gids, transactional ids,
     * file names) and never touches those of a newer epoch: their owner took the job over. */
    uint64_t owner_epoch;
} tpc_txn_subtask_t;

/**
 * @brief Ownership after a parallelism change, decided here for every connector: subtask index
 * @p index of any earlier run (0 <= index < highest_parallelism) belongs to subtask
 * `index % parallelism` of this run. The owner, and no other subtask, recovers the transactions
 * that subtask @p index stored in the restored checkpoint (the framework hands it exactly those)
 * and cleans up whatever else @p index left behind: its transactional ids, gids or file names.
 * With an unchanged parallelism every subtask owns just itself. Any thread.
 */
TPC_API bool tpc_txn_owns(const tpc_txn_subtask_t *st, int index);

/** @brief Log through the job's logger, prefixed with sink name and subtask. Subtask thread. */
TPC_API void tpc_txn_log(const tpc_txn_subtask_t *st, tpc_log_level_t level, const char *fmt, ...)
    TPC_PRINTF(3, 4);
/** @returns true once the job is being canceled; a long retry loop should give up then. */
TPC_API bool tpc_txn_is_canceled(const tpc_txn_subtask_t *st);
/** @brief A tpc_canceled_fn (tpc_kit.h) over a sink subtask (@p arg is a const
 * tpc_txn_subtask_t *): true once its job is being canceled. For tpc_sleep_ms() and
 * tpc_backoff_wait(). Any thread. */
TPC_API bool tpc_txn_subtask_canceled(void *arg);

/** What abort_lingering may clean up. Valid during the call only. */
typedef struct {
    /** Id of the restored checkpoint, 0 on a fresh start (then no checkpoint knows anything). */
    uint64_t restored_checkpoint;
    /** Handles this subtask restored (pending and current), already committed or aborted: all
     * handles that the subtasks it owns (tpc_txn_owns()) stored in that checkpoint, and no
     * other subtask's. */
    void *const *known;
    size_t known_count;
} tpc_txn_lingering_t;

/** @} */

/* ------------------------------------------------------------------------------------------ */
/** @name Connector contract
 *
 * A connector fills a tpc_txn_connector_ops_t with designated initializers and sets `version`
 * to TPC_TXN_CONNECTOR_OPS_VERSION; later versions only add fields at the end, so a connector
 * built against an older header keeps working. `conn` is the per-subtask instance made by open;
 * `txn` is a transaction handle made by begin or deserialize, released by free_txn. Every
 * function returning `tpc_error_t *` returns NULL on success; an error marked
 * TPC_ERROR_RETRIABLE makes the framework retry commits (see tpc_txn_sink_set()).
 * @{ */

#define TPC_TXN_CONNECTOR_OPS_VERSION 4

/** Growable byte buffer for serialize. Append with tpc_txn_buf_append(). */
typedef struct tpc_txn_buf tpc_txn_buf_t;
/** @brief Append @p len bytes. @returns NULL or TPC_ERR_NOMEM. */
TPC_API tpc_error_t *tpc_txn_buf_append(tpc_txn_buf_t *buf, const void *bytes, size_t len);
/** @brief Write the low @p bytes bytes (1..8) of @p v big-endian at *@p p and advance *@p p. For
 * building handle bytes; the caller owns the space. Any thread. */
TPC_API void tpc_txn_put_be(unsigned char **p, uint64_t v, int bytes);
/** @brief Read @p bytes bytes (1..8) big-endian at *@p p and advance *@p p. The caller has checked
 * that they are there. Any thread. */
TPC_API uint64_t tpc_txn_get_be(const unsigned char **p, int bytes);

/** The most named values a handle's description holds (tpc_txn_handle_view_t). */
#define TPC_TXN_HANDLE_FIELDS_MAX 8

/**
 * A transaction handle described for people and for tools (describe_handle,
 * tpc_txn_describe_handle()): one line, and a few named values that tools print as members of a
 * JSON object, in order. Fill the values with tpc_txn_handle_text() and tpc_txn_handle_number().
 */
typedef struct tpc_txn_handle_view {
    /** One line for people: the transactional id, gid, file name, ... as an operator knows it. */
    char line[256];
    int nfields;
    struct {
        const char *name; /**< a JSON member name, static: "gid", "producer_id", ... */
        bool is_number;
        int64_t number;
        char text[256]; /**< when not a number; NUL-terminated, truncated if need be */
    } fields[TPC_TXN_HANDLE_FIELDS_MAX];
} tpc_txn_handle_view_t;

/** @brief Add the text value @p name = @p value to @p view (dropped once it holds
 * TPC_TXN_HANDLE_FIELDS_MAX). @p name must be a static string. Any thread. */
TPC_API void tpc_txn_handle_text(tpc_txn_handle_view_t *view, const char *name, const char *value);
/** @brief Add the number @p name = @p value to @p view, as tpc_txn_handle_text(). */
TPC_API void tpc_txn_handle_number(tpc_txn_handle_view_t *view, const char *name, int64_t value);

typedef struct tpc_txn_connector_ops {
    int version;      /**< TPC_TXN_CONNECTOR_OPS_VERSION */
    const char *name; /**< short connector name for messages ("file", "kafka", ...) */

    /** Optional. Set a connector key; return TPC_ERR_NOT_FOUND for a key it does not know. */
    tpc_error_t *(*configure)(void *arg, const char *key, const char *value);
    /** Optional. Free @p arg when the sink is destroyed. */
    void (*release)(void *arg);

    /** Make the instance of one subtask. @p st stays valid until close. */
    tpc_error_t *(*open)(void *arg, const tpc_txn_subtask_t *st, void **conn);
    /** Free the instance. Transactions are already released. */
    void (*close)(void *conn);

    /** Start a transaction. Must not contact the external system (do that on the first write):
     * it runs at every checkpoint, and an unused transaction must stay free. @p checkpoint_id is
     * the lowest checkpoint id it can be pre-committed in, useful in names. */
    tpc_error_t *(*begin)(void *conn, uint64_t checkpoint_id, void **txn);
    /** Write records into @p txn. Record bytes are valid during the call only. */
    tpc_error_t *(*write)(void *conn, void *txn, const tpc_record_t *records, size_t count);
    /** Optional. Push buffered records towards the external system (finish()). */
    tpc_error_t *(*flush)(void *conn, void *txn);
    /** Make @p txn durable and ready to commit, as part of checkpoint @p checkpoint_id. After
     * success a commit must succeed unless the external system is gone. Not called when empty. */
    tpc_error_t *(*pre_commit)(void *conn, void *txn, uint64_t checkpoint_id);
    /** Make a pre-committed @p txn visible. Idempotent: committing an already committed
     * transaction succeeds. */
    tpc_error_t *(*commit)(void *conn, void *txn);
    /** Drop @p txn and what it wrote. Not called when empty. */
    tpc_error_t *(*abort)(void *conn, void *txn);
    /** Commit a pre-committed transaction restored from a completed checkpoint (possibly made by
     * another process). Idempotent like commit. */
    tpc_error_t *(*recover_and_commit)(void *conn, void *txn);
    /** Drop a restored current transaction, whatever it wrote after its handle was stored. It
     * may even have been pre-committed since, for a checkpoint that never completed: drop it
     * all the same. Unknown or already gone is success. */
    tpc_error_t *(*recover_and_abort)(void *conn, void *txn);
    /** Optional. Drop transactions of this sink that no checkpoint knows; runs once per attempt
     * after recovery, before the first begin. Must leave other sinks' transactions alone. */
    tpc_error_t *(*abort_lingering)(void *conn, const tpc_txn_lingering_t *lingering);

    /** Append the handle's bytes to @p out; the connector versions its own format. */
    tpc_error_t *(*serialize)(void *conn, const void *txn, tpc_txn_buf_t *out);
    /** Make a handle from bytes written by serialize (of this or an older connector version). */
    tpc_error_t *(*deserialize)(void *conn, const void *bytes, size_t len, void **txn);
    /** True when nothing was written into @p txn (for a handle from begin). */
    bool (*is_empty)(void *conn, const void *txn);
    /** Release the in-memory handle only; never touches the external system. NULL is fine. */
    void (*free_txn)(void *conn, void *txn);
    /** Name @p txn for messages (file name, gid, transactional id, ...), NUL-terminated into
     * @p buf of @p cap bytes, truncated if needed. */
    void (*describe)(void *conn, const void *txn, char *buf, size_t cap);

    /* ---- version 2 ---- */
    /** Optional. The connector's keys as a property table (tpc_props.h) over the configuration
     * struct @p arg given to tpc_txn_sink_new(): tpc_txn_sink_set() parses them with it (before
     * trying configure), and docs/configuration.md documents them from it. The connector applies
     * the defaults (tpc_props_init()) before tpc_txn_sink_new() and frees the strings
     * (tpc_props_free()) in release. */
    const tpc_props_t *props;

    /* ---- version 3 ---- */
    /** Optional. Add the connector's own metrics of the sink (configuration @p arg) named
     * @p sink to a scrape of the job's metrics endpoint (tpc_metrics_add(), label "sink"). Called
     * on the metrics server's thread while subtasks run: read only what is safe to share. */
    void (*metrics)(void *arg, const char *sink, tpc_metrics_writer_t *w);

    /* ---- version 4 ---- */
    /** Optional. Describe the handle whose bytes serialize wrote (of this or an older connector
     * version), for people, without an instance and without the external system: the `twopc`
     * command calls it on the handles of a checkpoint file. Fill @p out (cleared by the caller)
     * with one line and, if useful, named values (tpc_txn_handle_text(), tpc_txn_handle_number())
     * such as the name the external system knows the transaction by. Any thread. @returns NULL,
     * or TPC_ERR_CORRUPT for bytes this connector cannot read. A connector without it is shown by
     * its name and the handle's size. */
    tpc_error_t *(*describe_handle)(const void *bytes, size_t len, tpc_txn_handle_view_t *out);
} tpc_txn_connector_ops_t;

/**
 * @brief Describe the handle @p bytes of @p len bytes with @p ops (the version rule applied: a
 * table older than version 4 has no describe_handle): its describe_handle, or, without one, or
 * with @p ops NULL (a connector this program does not know), "handle of N bytes" and no values.
 * Bytes the connector cannot read give "unreadable handle of N bytes: why". Any thread.
 */
TPC_API void tpc_txn_describe_handle(const tpc_txn_connector_ops_t *ops, const void *bytes,
                                     size_t len, tpc_txn_handle_view_t *out);

/** @} */

/* ------------------------------------------------------------------------------------------ */
/** @name Transaction handles in a checkpoint
 *
 * A sink stores each transaction as a state entry of its own: an envelope (pending or current,
 * the checkpoint, the start time, the subtask that wrote it, and since this version the name of
 * the connector, ops->name) around the connector's handle bytes. Handles written by earlier
 * versions do not name their connector; jobs restore them as before, since a sink knows its
 * connector, but a reader of the checkpoint alone cannot tell it (connector NULL).
 * @{ */

/** One transaction handle found in a checkpoint (tpc_txn_checkpoint_handles()). */
typedef struct {
    const char *sink; /**< the sink vertex's name */
    int subtask;      /**< the subtask whose state holds it */
    int origin;       /**< the subtask that wrote it, -1 when unknown (earlier versions) */
    bool pending;     /**< pre-committed, a restart commits it; false: current, a restart aborts */
    uint64_t checkpoint; /**< pending: pre-committed in; current: the lowest it could be in */
    int64_t start_ms;    /**< when it began, milliseconds since the epoch */
    /** The name of the connector that wrote it (its ops->name), NULL in handles of earlier
     * versions, which do not say (and for a name longer than 255 bytes, which is not stored). */
    const char *connector;
    const void *handle; /**< the connector's bytes (its serialize), valid as long as the list */
    size_t handle_len;
} tpc_txn_checkpoint_handle_t;

/**
 * @brief The transaction handles of checkpoint @p c (tpc_checkpoint_folder_read()), vertex by
 * vertex and subtask by subtask: every list, union and owned state entry that is a sink's
 * transaction entry; other entries are left out.
 * @param[out] out the handles (pointing into @p c, which must outlive them); free the array
 *        with tpc_txn_checkpoint_handles_free().
 * @returns NULL or TPC_ERR_NOMEM. Any thread.
 */
TPC_API tpc_error_t *tpc_txn_checkpoint_handles(const tpc_checkpoint_t *c,
                                                tpc_txn_checkpoint_handle_t **out, size_t *n);
/** @brief Free what tpc_txn_checkpoint_handles() made (NULL is fine). */
TPC_API void tpc_txn_checkpoint_handles_free(tpc_txn_checkpoint_handle_t *handles, size_t n);

/** @} */

/* ------------------------------------------------------------------------------------------ */
/** @name Sinks
 * @{ */

typedef struct tpc_txn_sink_s tpc_txn_sink_t;

/**
 * @brief New sink over a connector. Any thread; the sink is then configured on one thread.
 * Connectors wrap this in their own constructor (tpc_file_sink_new(), ...).
 * @param ops borrowed; must outlive the sink (normally a static const table).
 * @param arg the connector's configuration, passed to ops->open for every subtask. The sink takes
 *            it over: ops->release(arg) runs in tpc_txn_sink_destroy() (also when this fails).
 * @param[out] out the new sink, owned by the caller (tpc_txn_sink_destroy()).
 * @returns NULL, or TPC_ERR_INVALID_ARG for an incomplete or newer ops table.
 */
TPC_API tpc_error_t *tpc_txn_sink_new(const tpc_txn_connector_ops_t *ops, void *arg,
                                      tpc_txn_sink_t **out);

/**
 * @brief Set a configuration key, on the configuring thread, before tpc_txn_sink_add_to_job().
 * Keys the sink does not know go to the connector's table (ops->props), then to its configure.
 * @p key and @p value are copied or parsed, not kept. The keys every sink takes (guarantee,
 * transaction.timeout.ms, transaction.timeout.warn-ratio, recovery.expired,
 * commit.retry.deadline.ms, commit.retry.backoff.ms, commit.retry.backoff-max.ms) and each
 * connector's own are in docs/configuration.md, generated from the tables
 * (tpc_txn_sink_properties() and the connectors' own).
 *
 * @returns NULL, TPC_ERR_CONFIG naming the key and accepted values, or TPC_ERR_STATE after the
 * sink was added to a job.
 */
/** @returns the keys every transactional sink takes (tpc_txn_sink_set()). */
TPC_API const tpc_props_t *tpc_txn_sink_properties(void);
TPC_API tpc_error_t *tpc_txn_sink_set(tpc_txn_sink_t *sink, const char *key, const char *value);

/**
 * @brief Set the keys that @p cfg holds for the component named @p name (its section [name] of
 * a file, its `TWOPC_<NAME>__<KEY>` environment variables; tpc_props.h) through
 * tpc_txn_sink_set(), before tpc_txn_sink_add_to_job(). Give the name the sink's vertex will
 * have. The file and the environment override what the program set before; what it sets after
 * overrides them.
 * @returns NULL, or TPC_ERR_CONFIG starting with the file and line or the variable's name.
 */
TPC_API tpc_error_t *tpc_txn_sink_configure(tpc_txn_sink_t *sink, tpc_config_t *cfg,
                                            const char *name);

/**
 * @brief Add the sink as a vertex of @p job (job thread, before tpc_job_run()). The sink is
 * borrowed by the job: destroy it only after the job. A sink is added to one job once.
 * @param[out] vertex_id the vertex's id for tpc_job_connect().
 */
TPC_API tpc_error_t *tpc_txn_sink_add_to_job(tpc_txn_sink_t *sink, tpc_job_t *job, const char *name,
                                             int parallelism, int *vertex_id);

/** @returns the connector's @p arg given to tpc_txn_sink_new(), owned by the sink; for the
 * connector's own setters, on the configuring thread. */
TPC_API void *tpc_txn_sink_connector_arg(const tpc_txn_sink_t *sink);
/** @returns the connector's ops table given to tpc_txn_sink_new(). */
TPC_API const tpc_txn_connector_ops_t *tpc_txn_sink_connector_ops(const tpc_txn_sink_t *sink);

/** Statistics of a sink, summed over its subtasks and over restarts. */
typedef struct {
    uint64_t pending;               /**< pre-committed transactions waiting for their checkpoint */
    uint64_t begun;                 /**< transactions begun */
    uint64_t pre_commits;           /**< transactions pre-committed */
    uint64_t commits;               /**< transactions committed on notify */
    uint64_t recovered_commits;     /**< transactions committed on recovery */
    uint64_t aborts;                /**< transactions aborted (close, restored current) */
    uint64_t empty_skipped;         /**< empty transactions released without external calls */
    uint64_t commit_retries;        /**< retried commit calls */
    uint64_t commit_latency_us;     /**< total time spent committing, retries included */
    uint64_t commit_latency_max_us; /**< longest single commit, retries included */
    uint64_t expired_lost;          /**< transactions lost to the timeout (recovery.expired=log) */
    uint64_t records;               /**< records written */
} tpc_txn_sink_stats_t;

/** @brief Copy current statistics. Any thread. */
TPC_API void tpc_txn_sink_get_stats(const tpc_txn_sink_t *sink, tpc_txn_sink_stats_t *out);

/** @brief Free the sink and its connector arg, on the configuring thread, once no job that holds
 * it exists any more (after tpc_job_destroy()). NULL is fine. */
TPC_API void tpc_txn_sink_destroy(tpc_txn_sink_t *sink);

/** @} */

#ifdef __cplusplus
}
#endif
#endif /* TPC_TXN_H */
