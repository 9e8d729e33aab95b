/**
 * @file tpc_runtime.h
 * @brief twopc runtime: a small checkpointing dataflow engine.
 *
 * A job is a DAG of vertices (sources, operators, sinks), each run as `parallelism` subtasks on
 * threads of their own. Records travel in batches through bounded channels; checkpoint barriers
 * travel in-band. The checkpoint coordinator runs on the thread that called tpc_job_run(). It keeps
 * checkpointing after some tasks have finished and takes a final checkpoint as soon as every task
 * has finished, so a bounded job ends with everything its sinks wrote committed.
 *
 * Threads: a tpc_job_t is built and run from one thread (the "job thread"). Operator callbacks run
 * on their subtask's thread, one callback at a time per subtask. tpc_job_stop_with_savepoint(),
 * tpc_job_cancel() and tpc_job_get_stats() may be called from any thread while tpc_job_run() runs.
 */
#ifndef TPC_RUNTIME_H
#define TPC_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TPC_API          __attribute__((visibility("default")))
#define TPC_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define TPC_API
#define TPC_PRINTF(f, a)
#endif

/** @name Version
 * The version of these headers (the Makefile reads it from here: one statement of it), and of
 * the library a program runs with, which may be newer: a program built against 0.1 runs with a
 * later 0.x whose TPC_VERSION_HEX is larger.
 * @{ */
#define TPC_VERSION_MAJOR  0
#define TPC_VERSION_MINOR  1
#define TPC_VERSION_PATCH  0
#define TPC_VERSION_STRING "0.1.0"
/** 0xMMmmpp: compare versions as numbers. */
#define TPC_VERSION_HEX ((TPC_VERSION_MAJOR << 16) | (TPC_VERSION_MINOR << 8) | TPC_VERSION_PATCH)
/** @returns TPC_VERSION_HEX of the library the program runs with. */
TPC_API int tpc_version(void);
/** @returns TPC_VERSION_STRING of the library the program runs with. */
TPC_API const char *tpc_version_string(void);
/** @} */

/* ------------------------------------------------------------------------------------------ */
/** @name Errors
 * One error type for the whole library. A function that can fail returns `tpc_error_t *`:
 * NULL is success; otherwise the caller owns the error and frees it with tpc_error_destroy().
 * @{ */

/** X-macro table of error codes: name, value, one-line description. */
#define TPC_ERRNO_MAP(X)                                                                           \
    X(INVALID_ARG, -1, "invalid argument")                                                         \
    X(CONFIG, -2, "invalid configuration")                                                         \
    X(STATE, -3, "operation not allowed in this state")                                            \
    X(IO, -4, "input/output error")                                                                \
    X(CORRUPT, -5, "corrupt data")                                                                 \
    X(NOT_FOUND, -6, "not found")                                                                  \
    X(CANCELED, -7, "canceled")                                                                    \
    X(TIMEOUT, -8, "timed out")                                                                    \
    X(NOMEM, -9, "out of memory")                                                                  \
    X(CHECKPOINT, -10, "checkpoint failed")                                                        \
    X(RESTART_LIMIT, -11, "restart attempts exhausted")                                            \
    X(TASK, -12, "task failed")                                                                    \
    X(EXTERNAL, -13, "external system error")                                                      \
    X(COMMIT, -14, "commit failed")                                                                \
    X(DATA_LOSS, -15, "data lost")                                                                 \
    X(UNSUPPORTED, -16, "not supported")                                                           \
    X(CONNECT, -17, "could not connect")                                                           \
    X(FENCED, -18, "fenced by a newer instance")

typedef enum {
    TPC_OK = 0,
#define TPC__ERR_ENUM(name, val, desc) TPC_ERR_##name = (val),
    TPC_ERRNO_MAP(TPC__ERR_ENUM)
#undef TPC__ERR_ENUM
} tpc_err_t;

/**
 * Flags of an error. They decide what tpc_job_run() does with an error that failed an attempt
 * (docs/guarantees.md, "Which errors restart a job"):
 * - fatal (tpc_error_is_fatal()): no restart can mend it; the job ends at once with this error's
 *   own message and hint;
 * - anything else restarts the job from its latest completed checkpoint, within restart.attempts.
 */
enum {
    TPC_ERROR_FATAL = 1 << 0,     /**< no retry and no restart can help: the job ends at once */
    TPC_ERROR_RETRIABLE = 1 << 1, /**< the same call may succeed later */
};

typedef struct tpc_error_s tpc_error_t;

/** @brief Make an error. @returns a new error (never NULL; on OOM a static one). */
TPC_API tpc_error_t *tpc_error_new(tpc_err_t code, int flags, const char *fmt, ...)
    TPC_PRINTF(3, 4);
/** @brief The out-of-memory error (TPC_ERR_NOMEM, fatal): a static one that needs no allocation;
 * tpc_error_destroy() on it does nothing. */
TPC_API tpc_error_t *tpc_error_nomem(void);
/** @brief Prefix @p err's message with context ("context: message"). Takes and returns @p err. */
TPC_API tpc_error_t *tpc_error_prefix(tpc_error_t *err, const char *fmt, ...) TPC_PRINTF(2, 3);
/** @brief Attach a hint ("how to fix"). Takes and returns @p err. */
TPC_API tpc_error_t *tpc_error_hint(tpc_error_t *err, const char *fmt, ...) TPC_PRINTF(2, 3);
TPC_API tpc_err_t tpc_error_code(const tpc_error_t *err);
/** @returns the message, lower case, no trailing period. Owned by @p err. */
TPC_API const char *tpc_error_message(const tpc_error_t *err);
/** @returns the hint or NULL. Owned by @p err. */
TPC_API const char *tpc_error_hint_text(const tpc_error_t *err);
/**
 * @returns true when no restart can mend @p err: it carries TPC_ERROR_FATAL, or its code is one
 * of TPC_ERR_CONFIG, TPC_ERR_INVALID_ARG, TPC_ERR_NOT_FOUND, TPC_ERR_CORRUPT, TPC_ERR_DATA_LOSS,
 * TPC_ERR_UNSUPPORTED or TPC_ERR_FENCED and it does not carry TPC_ERROR_RETRIABLE.
 * tpc_job_run() ends the job at once on such an error and restarts on any other.
 */
TPC_API bool tpc_error_is_fatal(const tpc_error_t *err);
TPC_API bool tpc_error_is_retriable(const tpc_error_t *err);
/** @brief Free an error. NULL is fine. */
TPC_API void tpc_error_destroy(tpc_error_t *err);
/** @returns "TPC_ERR_IO" etc. */
TPC_API const char *tpc_err_name(tpc_err_t code);
/** @returns a one-line description of @p code. */
TPC_API const char *tpc_strerror(tpc_err_t code);

/**
 * @brief Parse a whole number as configuration values are written: decimal digits, with '-' in
 * front of a negative one; nothing else (no spaces, no '+', no other base, no trailing text).
 * Every integer key of the library reads its value with this.
 * @returns true and the number in @p out when @p s is one from @p min to @p max.
 */
TPC_API bool tpc_parse_int(const char *s, int64_t min, int64_t max, int64_t *out);
/** @} */

/* ------------------------------------------------------------------------------------------ */
/** @name Records and batches
 * @{ */

/** A record header (as Kafka has them): a name and a value, both bytes. A NULL @p value is a
 * null value, which is not the same as an empty one. Bytes are borrowed like the record's. */
typedef struct {
    const char *name; /**< @p name_len bytes, not necessarily NUL-terminated */
    size_t name_len;
    const void *value; /**< NULL: a null value */
    size_t value_len;
} tpc_header_t;

/** A record. Bytes are borrowed: valid only during the callback that received them. */
typedef struct {
    const void *key;
    size_t key_len;
    const void *value;
    size_t value_len;
    int64_t timestamp; /**< milliseconds since the epoch, or whatever the job uses */
    /** Headers, in order; names may repeat. NULL and 0 for none (a record written without them).
     * tpc_emit() copies them with the record, so they travel through every edge to the sinks. */
    const tpc_header_t *headers;
    size_t header_count;
    /** TPC_RECORD_NULL_KEY, TPC_RECORD_NULL_VALUE: the key or value is absent rather than empty
     * (Kafka's null key, and its null value, a tombstone); the bytes are then empty. */
    unsigned flags;
} tpc_record_t;

#define TPC_RECORD_NULL_KEY   0x1u /**< tpc_record_t.flags: the key is null, not empty */
#define TPC_RECORD_NULL_VALUE 0x2u /**< tpc_record_t.flags: the value is null, not empty */

/** A read-only batch of records handed to tpc_operator_ops_t.process. */
typedef struct tpc_batch_s tpc_batch_t;
TPC_API size_t tpc_batch_count(const tpc_batch_t *batch);
/** @brief Fill @p out with record @p i (0 <= i < count). Bytes point into the batch. */
TPC_API void tpc_batch_get(const tpc_batch_t *batch, size_t i, tpc_record_t *out);
/** @} */

/* ------------------------------------------------------------------------------------------ */
/** @name Task context
 * What an operator sees of its subtask. Valid from open to close; subtask thread only.
 * @{ */

typedef struct tpc_ctx_s tpc_ctx_t;

TPC_API const char *tpc_ctx_job_name(const tpc_ctx_t *ctx);
TPC_API const char *tpc_ctx_vertex_name(const tpc_ctx_t *ctx);
TPC_API int tpc_ctx_subtask(const tpc_ctx_t *ctx);
TPC_API int tpc_ctx_parallelism(const tpc_ctx_t *ctx);
/** @returns the attempt number: 0 for the first run in this process, +1 per restart. */
TPC_API int tpc_ctx_attempt(const tpc_ctx_t *ctx);
/** @returns the id of the checkpoint this attempt restored from, 0 when it started fresh. */
TPC_API uint64_t tpc_ctx_restored_checkpoint(const tpc_ctx_t *ctx);
/** @returns the parallelism this vertex had in the restored checkpoint, 0 when it started fresh
 * or the checkpoint has no state for it. */
TPC_API int tpc_ctx_restored_parallelism(const tpc_ctx_t *ctx);
/** @returns the highest parallelism this vertex has run with in checkpoint.dir (at least the
 * current one): subtasks up to it may have left work behind that this run has to clean up. */
TPC_API int tpc_ctx_highest_parallelism(const tpc_ctx_t *ctx);
/** @returns true when this attempt restored an older checkpoint than the newest completed one (or
 * none), because that one was damaged or missing and restore.fallback is at-least-once: what the
 * lost checkpoints covered is written again, and their transactions may be committed already. */
TPC_API bool tpc_ctx_restored_behind(const tpc_ctx_t *ctx);
/** @returns the lowest id a checkpoint of this attempt can have: above every checkpoint id the
 * directory has seen, also those of runs that were started over. */
TPC_API uint64_t tpc_ctx_first_checkpoint_id(const tpc_ctx_t *ctx);
/**
 * @returns true when this job takes checkpoints that survive the process (checkpoint.dir is set)
 * and keeps taking them after tasks finish (checkpoint.after-finish is true), so every subtask gets
 * a notify for a checkpoint taken after its finish(). An exactly-once sink needs both.
 */
TPC_API bool tpc_ctx_checkpointing(const tpc_ctx_t *ctx);
/** @returns the job's checkpoint.interval.ms, 0 when it takes no periodic checkpoints (none
 * without checkpoint.dir). A sink whose transactions must outlive a checkpoint interval checks its
 * timeout against this. */
TPC_API int64_t tpc_ctx_checkpoint_interval_ms(const tpc_ctx_t *ctx);
/** @returns the owner epoch this run took the job's checkpoints over with (checkpoint.owner=claim;
 * docs/architecture.md, "Owner epoch"), 0 without owners. A sink puts it into the names of its
 * transactions, so that a take-over can tell an older owner's transactions from its own. */
TPC_API uint64_t tpc_ctx_owner_epoch(const tpc_ctx_t *ctx);
/** @returns true once the job is being canceled; long-running callbacks should return soon. */
TPC_API bool tpc_ctx_is_canceled(const tpc_ctx_t *ctx);

/**
 * @brief Emit a record downstream. Copies the bytes. May block while downstream is full
 * (backpressure). Callable from poll, process, snapshot_state and finish (never after finish).
 * A vertex without outgoing edges discards what it emits.
 * @returns TPC_OK, TPC_ERR_CANCELED when the job is being canceled (drop and return), or
 * TPC_ERR_STATE when called after finish().
 */
TPC_API tpc_err_t tpc_emit(tpc_ctx_t *ctx, const tpc_record_t *rec);

/** Log levels for tpc_log() and the log callback. */
typedef enum { TPC_LOG_ERROR = 0, TPC_LOG_WARN, TPC_LOG_INFO, TPC_LOG_DEBUG } tpc_log_level_t;
/** @brief Log through the job's log callback, prefixed with vertex and subtask. */
TPC_API void tpc_log(tpc_ctx_t *ctx, tpc_log_level_t level, const char *fmt, ...) TPC_PRINTF(3, 4);
/** @} */

/* ------------------------------------------------------------------------------------------ */
/** @name Operator state
 * Operators write state in snapshot_state and read it back in initialize_state. Three kinds:
 * - list state: entries are spread over the new subtasks on restore (each subtask gets its own
 *   entries back when the parallelism is unchanged, round robin otherwise);
 * - union state: every subtask gets every subtask's entries;
 * - owned state: entries that belong to the subtask index that wrote them: subtask i of a run at
 *   parallelism P gets back the entries of every old subtask s with s % P == i (its own when the
 *   parallelism is unchanged). A subtask that closed is done with its entries, so unlike union
 *   state a partly finished vertex checkpoints normally. The two-phase-commit sinks keep their
 *   transactions so (tpc_txn_owns()).
 * A vertex whose subtasks wrote union state and that is only partly finished makes checkpoints
 * decline until it is fully finished (see docs/architecture.md).
 * @{ */

typedef enum { TPC_STATE_LIST = 0, TPC_STATE_UNION = 1, TPC_STATE_OWNED = 2 } tpc_state_kind_t;

typedef struct tpc_state_writer_s tpc_state_writer_t;
/** @brief Add one entry (bytes are copied). Only inside snapshot_state. */
TPC_API tpc_error_t *tpc_state_add(tpc_state_writer_t *w, tpc_state_kind_t kind, const void *bytes,
                                   size_t len);

typedef struct tpc_state_reader_s tpc_state_reader_t;
TPC_API size_t tpc_state_count(const tpc_state_reader_t *r, tpc_state_kind_t kind);
/** @brief Entry @p i of @p kind. Bytes stay valid until initialize_state returns; they have no
 * particular alignment, so copy them out (memcpy) rather than cast them to a wider type. */
TPC_API void tpc_state_get(const tpc_state_reader_t *r, tpc_state_kind_t kind, size_t i,
                           const void **bytes, size_t *len);
/** @} */

/**
 * @name Key groups and keyed state
 *
 * A job splits keys into max-parallelism *key groups* (tpc_job_set() "max-parallelism", default
 * 128, fixed for a job's checkpoints). A key's group is the 64-bit FNV-1a hash of its bytes modulo
 * max-parallelism; subtask s of a vertex at parallelism P owns the contiguous groups g with
 * g * P / max-parallelism == s. A TPC_EDGE_HASH edge sends each record to the subtask that owns its
 * key's group. The mapping is part of the format: it does not change between versions.
 *
 * Keyed state: named state per key, for an operator whose every input is a hash edge (any other
 * vertex gets TPC_ERR_STATE, fatal, at its first keyed call), read and written on its subtask's
 * thread (in process(), on_timer(), finish() or snapshot_state()) for keys of its own groups (the
 * key of the record being processed, or of the timer that fired); another key is an error too.
 * A state is either a *value* state (tpc_keyed_get/put/delete) or a *map* state
 * (tpc_keyed_map_get/put/delete/foreach: per key a map from map key to value); its first use
 * decides which. State that was never put reads as absent (empty), not as an error. It is
 * checkpointed with the operator's state, one entry per value and per map entry with its key
 * group, and a restore at any parallelism up to max-parallelism gives each subtask exactly the
 * keys of its groups. Use list state for what belongs to a subtask (offsets, buffers), keyed state
 * for what belongs to a key (totals, sessions). docs/keyed-state.md has the details.
 * @{ */

/** @returns the key group of @p key (0 .. max_parallelism - 1), or -1 for bad arguments. */
TPC_API int tpc_key_group(const void *key, size_t len, int max_parallelism);
/** @returns the subtask that owns @p group at @p parallelism, or -1 for bad arguments. */
TPC_API int tpc_key_group_subtask(int group, int max_parallelism, int parallelism);
/** @returns the job's max-parallelism (its number of key groups). */
TPC_API int tpc_ctx_max_parallelism(const tpc_ctx_t *ctx);

/** @brief The value of state @p state for @p key, or *value = NULL when absent. The bytes stay
 * valid until the next put or delete of that state and key. Errors: TPC_ERR_STATE for a key of
 * another subtask's group (no hash edge in front), TPC_ERR_INVALID_ARG. */
TPC_API tpc_error_t *tpc_keyed_get(tpc_ctx_t *ctx, const char *state, const void *key,
                                   size_t key_len, const void **value, size_t *value_len);
/** @brief Set state @p state for @p key to a copy of @p value. Errors as tpc_keyed_get(). */
TPC_API tpc_error_t *tpc_keyed_put(tpc_ctx_t *ctx, const char *state, const void *key,
                                   size_t key_len, const void *value, size_t value_len);
/** @brief Remove state @p state of @p key (absent is fine). Errors as tpc_keyed_get(). */
TPC_API tpc_error_t *tpc_keyed_delete(tpc_ctx_t *ctx, const char *state, const void *key,
                                      size_t key_len);
typedef tpc_error_t *(*tpc_keyed_visit_fn)(void *opaque, const void *key, size_t key_len,
                                           const void *value, size_t value_len);
/** @brief Call @p visit for every key of state @p state in this subtask, in no order (for a map
 * state: each key whose map is not empty, with value NULL); an error from it stops the walk and is
 * returned. Do not put or delete during the walk. */
TPC_API tpc_error_t *tpc_keyed_foreach(tpc_ctx_t *ctx, const char *state, tpc_keyed_visit_fn visit,
                                       void *opaque);

/** @brief The value under @p map_key in map state @p state of @p key, or *value = NULL when
 * absent (also when the key has no map yet). The bytes stay valid until the next change of that
 * map. Errors as tpc_keyed_get(), and TPC_ERR_INVALID_ARG when @p state is a value state. */
TPC_API tpc_error_t *tpc_keyed_map_get(tpc_ctx_t *ctx, const char *state, const void *key,
                                       size_t key_len, const void *map_key, size_t map_key_len,
                                       const void **value, size_t *value_len);
/** @brief Set @p map_key in map state @p state of @p key to a copy of @p value. */
TPC_API tpc_error_t *tpc_keyed_map_put(tpc_ctx_t *ctx, const char *state, const void *key,
                                       size_t key_len, const void *map_key, size_t map_key_len,
                                       const void *value, size_t value_len);
/** @brief Remove @p map_key from map state @p state of @p key (absent is fine); a map left empty
 * is gone. tpc_keyed_delete() removes a key's whole map. */
TPC_API tpc_error_t *tpc_keyed_map_delete(tpc_ctx_t *ctx, const char *state, const void *key,
                                          size_t key_len, const void *map_key, size_t map_key_len);
/** @brief Call @p visit(opaque, map key, value) for every entry of the map of @p key in map state
 * @p state, in no order; nothing for a key without a map. Do not change that map during the walk.
 */
TPC_API tpc_error_t *tpc_keyed_map_foreach(tpc_ctx_t *ctx, const char *state, const void *key,
                                           size_t key_len, tpc_keyed_visit_fn visit, void *opaque);

/** @brief Processing time: the wall clock in milliseconds since 1970, as timers read it. Any
 * thread. */
TPC_API int64_t tpc_processing_time_ms(void);
/** @brief A processing-time timer for @p key at @p at_ms (tpc_processing_time_ms() scale): once
 * that time has come the subtask's thread calls the operator's on_timer() with the key and time,
 * between two batches. Registering the same key and time again is one timer. Timers are keyed
 * state: the same rule applies (every input a hash edge, a key of this subtask's groups), they are
 * checkpointed per key group and, after a restore at any parallelism, a timer fires on the subtask
 * that owns its key then — once for the restored state: one that fired before the checkpoint was
 * taken is not in it. A timer whose time passed while the job was down fires soon after the
 * restore. Timers still pending when the operator's input ends do not fire (finish() may read
 * the keyed state instead). The operator needs on_timer (TPC_OPERATOR_OPS_VERSION 2). */
TPC_API tpc_error_t *tpc_timer_register(tpc_ctx_t *ctx, const void *key, size_t key_len,
                                        int64_t at_ms);
/** @brief Remove the timer of @p key at @p at_ms (absent is fine). Same rules. */
TPC_API tpc_error_t *tpc_timer_delete(tpc_ctx_t *ctx, const void *key, size_t key_len,
                                      int64_t at_ms);
/** @} */

/* ------------------------------------------------------------------------------------------ */
/** @name Operators
 * A vertex's behaviour is a versioned ops table. Sources fill `poll`; operators and sinks fill
 * `process`. Every callback runs on the subtask's thread. A callback that returns an error fails
 * the subtask, and with it the current attempt of the job (which then restarts from the latest
 * completed checkpoint, per the restart strategy).
 *
 * Lifecycle: open → initialize_state → (poll|process, snapshot_state, notify_*)* → finish →
 * (snapshot_state, notify_*)* → close. finish() is called once when input has ended (a source's
 * poll said TPC_POLL_END, or every input delivered end of data); the task then still takes part in
 * checkpoints and closes only after a checkpoint triggered after finish() completed. close() is
 * always called once open() succeeded, also on failure and cancel (then without finish()).
 * @{ */

/** Version 2 added on_timer; tables of version 1 are still accepted. */
#define TPC_OPERATOR_OPS_VERSION 2

/** What a source's poll reports. */
typedef enum {
    TPC_POLL_MORE = 0, /**< emitted records (or may have more soon): poll again */
    TPC_POLL_IDLE = 1, /**< nothing now: the task waits briefly before polling again */
    TPC_POLL_END = 2,  /**< input exhausted: the task finishes */
} tpc_poll_result_t;

typedef struct tpc_operator_ops {
    int version; /**< TPC_OPERATOR_OPS_VERSION */
    /** Create the subtask's instance. @p arg is the pointer given to tpc_job_add_vertex(). */
    tpc_error_t *(*open)(tpc_ctx_t *ctx, void *arg, void **self);
    /** @p restored is NULL on a fresh start. */
    tpc_error_t *(*initialize_state)(void *self, tpc_ctx_t *ctx,
                                     const tpc_state_reader_t *restored);
    /** Sources only: emit a few records with tpc_emit() and say how it went. */
    tpc_error_t *(*poll)(void *self, tpc_ctx_t *ctx, tpc_poll_result_t *result);
    /** Operators and sinks: handle one batch. */
    tpc_error_t *(*process)(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch);
    /** Write state for checkpoint @p checkpoint_id. Also runs after finish(). */
    tpc_error_t *(*snapshot_state)(void *self, tpc_ctx_t *ctx, uint64_t checkpoint_id,
                                   tpc_state_writer_t *w);
    /** Checkpoint @p checkpoint_id is durable. Also for ids this subtask never snapshotted
     * (subsumed); ids <= the restored checkpoint are never delivered. Ids increase and are unique
     * among completed checkpoints; a new process may reuse the id of a checkpoint that never
     * completed before the crash, so names built from ids must be cleaned up at restore. */
    tpc_error_t *(*notify_checkpoint_complete)(void *self, tpc_ctx_t *ctx, uint64_t checkpoint_id);
    /** Checkpoint @p checkpoint_id was aborted. Optional. */
    tpc_error_t *(*notify_checkpoint_aborted)(void *self, tpc_ctx_t *ctx, uint64_t checkpoint_id);
    /** Input has ended: flush. Records may be emitted here, never after. Optional. */
    tpc_error_t *(*finish)(void *self, tpc_ctx_t *ctx);
    /** Release everything. Called once, whatever happened. Optional. */
    void (*close)(void *self, tpc_ctx_t *ctx);
    /** Version 2: the timer of @p key at @p at_ms came due (tpc_timer_register()). It may use
     * keyed state of @p key, emit records and register timers. Optional. */
    tpc_error_t *(*on_timer)(void *self, tpc_ctx_t *ctx, const void *key, size_t key_len,
                             int64_t at_ms);
} tpc_operator_ops_t;

/** @} */

/* ------------------------------------------------------------------------------------------ */
/** @name Jobs
 * @{ */

typedef struct tpc_job_s tpc_job_t;

/** How records go from one vertex's subtasks to the next's. */
typedef enum {
    TPC_EDGE_FORWARD = 0,   /**< subtask i → subtask i; parallelisms must be equal */
    TPC_EDGE_REBALANCE = 1, /**< round robin over all downstream subtasks */
    TPC_EDGE_HASH = 2,      /**< to the subtask that owns the key's group (tpc_key_group()) */
    TPC_EDGE_BROADCAST = 3, /**< every record to every downstream subtask */
} tpc_edge_t;

/** Log callback: called from any thread, must be thread-safe. */
typedef void (*tpc_log_cb)(void *opaque, tpc_log_level_t level, const char *message);

/**
 * @brief New job. @p name is used in logs and state. @returns NULL only if out of memory.
 * Defaults are documented with tpc_job_set().
 */
TPC_API tpc_job_t *tpc_job_new(const char *name);
/** @brief Free a job that is not running. NULL is fine. */
TPC_API void tpc_job_destroy(tpc_job_t *job);

/**
 * @brief Set a configuration key (string key/value; job thread, before tpc_job_run()).
 *
 * The keys, what each takes and its default are in docs/configuration.md, generated from the
 * job's property table (tpc_job_properties(), tpc_props.h): checkpoint.interval.ms,
 * checkpoint.timeout.ms, checkpoint.dir, checkpoint.storage, checkpoint.owner,
 * checkpoint.retained, checkpoint.max-concurrent,
 * checkpoint.min-pause.ms, checkpoint.tolerable-failures, checkpoint.after-finish,
 * restart.attempts, restart.delay.ms, restore.mode, restore.fallback, channel.capacity,
 * batch.size, max-parallelism.
 *
 * @returns NULL, or TPC_ERR_CONFIG naming the key and the accepted values.
 */
TPC_API tpc_error_t *tpc_job_set(tpc_job_t *job, const char *key, const char *value);

/** @brief Route log lines to @p cb (default: stderr, warnings and errors); a NULL @p cb means
 * stderr. @returns TPC_OK, or TPC_ERR_INVALID_ARG when @p job is NULL. */
TPC_API tpc_err_t tpc_job_set_logger(tpc_job_t *job, tpc_log_cb cb, void *opaque,
                                     tpc_log_level_t max_level);

/**
 * @brief Add a vertex. @p ops is borrowed and must outlive the job; @p arg is passed to open().
 * @param[out] vertex_id the new vertex's id, for tpc_job_connect().
 * Names must be unique within a job: state is matched to vertices by name on restore.
 */
TPC_API tpc_error_t *tpc_job_add_vertex(tpc_job_t *job, const char *name, int parallelism,
                                        const tpc_operator_ops_t *ops, void *arg, int *vertex_id);
/** @brief Connect two vertices. The graph must stay acyclic. */
TPC_API tpc_error_t *tpc_job_connect(tpc_job_t *job, int from_vertex, int to_vertex,
                                     tpc_edge_t edge);

/** How tpc_job_run() ended without error. */
typedef enum {
    TPC_JOB_FINISHED = 0, /**< every task finished and the final checkpoint completed */
    TPC_JOB_STOPPED = 1,  /**< stopped with a savepoint (drain or not) */
    TPC_JOB_CANCELED = 2, /**< tpc_job_cancel() */
} tpc_job_result_t;

/**
 * @brief Run the job to the end on the calling thread (which becomes the coordinator).
 * Restores from checkpoint.dir per restore.mode, restarts on failure per restart.attempts.
 * @param[out] result how it ended (may be NULL).
 * @returns NULL on success, or the error that made the job fail after its restarts.
 */
TPC_API tpc_error_t *tpc_job_run(tpc_job_t *job, tpc_job_result_t *result);

/**
 * @brief Stop with a savepoint; any thread, while tpc_job_run() runs.
 * drain: sources end their input, every task finishes, the final checkpoint is the savepoint.
 * no drain: a savepoint is taken and notified, then tasks are canceled without finish().
 * Blocks until the job has stopped (tpc_job_run() then returns TPC_JOB_STOPPED).
 * @param[out] path receives a malloc'd path (caller frees) of the savepoint file; may be NULL.
 * A stop that is in progress when the job fails and restarts starts over in the new attempt.
 * A drain stop that arrives while the job's own final checkpoint is in flight makes that
 * checkpoint the savepoint; one that arrives after it completed fails (TPC_ERR_STATE, the job
 * ends TPC_JOB_FINISHED), as does any stop of a job that ends otherwise before its savepoint.
 * @returns NULL, TPC_ERR_INVALID_ARG when @p job is NULL, TPC_ERR_STATE when the job is not
 * running or a stop is in progress, or
 * TPC_ERR_CONFIG without checkpoint.dir, or (no drain) TPC_ERR_CHECKPOINT when the savepoint was
 * aborted (timeout, decline, a task finished meanwhile): the job then goes on running; or
 * TPC_ERR_TIMEOUT when no savepoint came within the job key stop.timeout.ms (default 20 s, through
 * failures, restarts and outages): the job is then canceled (tpc_job_run() returns
 * TPC_JOB_CANCELED), and nothing a completed checkpoint promised is lost: the next start commits
 * it. So a stop ends the process in bounded time whatever the job is doing, as long as its
 * operators' own calls return (the sinks' retries watch for the cancel).
 */
TPC_API tpc_error_t *tpc_job_stop_with_savepoint(tpc_job_t *job, bool drain, char **path);

/**
 * @brief Ask the job to cancel (any thread); tpc_job_run() returns TPC_JOB_CANCELED.
 *
 * Tasks are closed without finish(). A cancel during the pause before a restart ends that pause at
 * once; one that comes before tpc_job_run() starts cancels that run before it opens anything. A run
 * consumes every cancel made while it ran (one that came too late to stop it included), so a later
 * tpc_job_run() starts afresh.
 * @returns TPC_OK, or TPC_ERR_INVALID_ARG when @p job is NULL.
 */
TPC_API tpc_err_t tpc_job_cancel(tpc_job_t *job);

/** Statistics of a vertex. */
typedef struct {
    const char *name; /**< owned by the job */
    uint64_t records_in;
    uint64_t records_out;
    uint64_t backpressure_ms; /**< time its subtasks spent blocked on full output channels */
    int subtasks_finished;    /**< of the current attempt: operator finished or closed */
    int parallelism;
} tpc_vertex_stats_t;

/** Statistics of a job. Counters add up over restarts. */
typedef struct {
    uint64_t checkpoints_completed;
    uint64_t checkpoints_aborted;
    uint64_t last_checkpoint_id; /**< last completed */
    uint64_t last_checkpoint_duration_us;
    uint64_t restarts;
    int vertex_count;
    tpc_vertex_stats_t vertices[32]; /**< the first 32 vertices */
} tpc_job_stats_t;

/** @brief Copy current statistics (any thread).
 * @returns TPC_OK, or TPC_ERR_INVALID_ARG when @p job or @p out is NULL. */
TPC_API tpc_err_t tpc_job_get_stats(tpc_job_t *job, tpc_job_stats_t *out);

/** @name Metrics
 * With the job key `metrics.listen` set ("PORT" or "ADDRESS:PORT", IPv4; a bare port listens on
 * 127.0.0.1 only), the job serves `GET /metrics` in Prometheus' text exposition format, and the
 * probes `/healthz` and `/readyz` (docs/metrics.md), from the moment the key is set until
 * tpc_job_destroy() (libmicrohttpd, its own thread): before tpc_job_run(), while it runs, and
 * after it returned. It shows records in and out and backpressure per vertex and subtask,
 * checkpoints completed, failed and declined, their duration (a histogram) and size, the time
 * since the last completed checkpoint, restarts, the versions of twopc and its client libraries,
 * and what the job's components add with tpc_job_add_metrics() (the sinks: pending transactions
 * and the age of the oldest, commits, commit latency; Kafka clients: librdkafka's statistics; the
 * Kafka source: lag per partition, read-ahead, partitions). docs/metrics.md lists every metric.
 * @{ */

/** What a metrics callback writes into. Only valid during the callback. */
typedef struct tpc_metrics_writer_s tpc_metrics_writer_t;

/** Called on the metrics server's thread for every scrape; must be thread-safe and quick. */
typedef void (*tpc_metrics_fn)(void *opaque, tpc_metrics_writer_t *w);

/**
 * @brief Add @p fn to what the job's metrics endpoint shows (job thread, before tpc_job_run()).
 * @p opaque is borrowed and must outlive the job: @p fn is called until tpc_job_destroy(), also
 * after tpc_job_run() returned.
 * @returns TPC_OK, or TPC_ERR_INVALID_ARG / TPC_ERR_STATE while the job runs.
 */
TPC_API tpc_err_t tpc_job_add_metrics(tpc_job_t *job, tpc_metrics_fn fn, void *opaque);

/**
 * @brief Write one sample of metric family @p family (`twopc_..._total`, `..._seconds`, ...).
 * Samples of one family are grouped under one HELP and TYPE line whatever order they come in.
 * @param type "counter", "gauge", "histogram" or "summary".
 * @param suffix "" or, for histograms and summaries, "_bucket", "_sum", "_count".
 * @param labels name, value, name, value, ..., NULL (values are escaped); NULL for none.
 */
TPC_API void tpc_metrics_add(tpc_metrics_writer_t *w, const char *family, const char *type,
                             const char *help, const char *suffix, const char *const *labels,
                             double value);

/**
 * @brief Name a library the scraped component is built on, and its version, in the job's
 * `twopc_build_info{twopc="…",librdkafka="…",libpq="…"} 1` (from a metrics callback; the first
 * version named for a library counts, and twopc's own is always there).
 * @param library a label name ("librdkafka", "libpq"); copied.
 * @param version copied.
 */
TPC_API void tpc_metrics_build_info(tpc_metrics_writer_t *w, const char *library,
                                    const char *version);

/** @returns the port the metrics endpoint listens on (useful with port 0): from the moment
 * `metrics.listen` is set until tpc_job_destroy(), else 0. Any thread. */
TPC_API int tpc_job_metrics_port(tpc_job_t *job);

/** @} */

/** @name Reading a checkpoint folder
 * What a job's `checkpoint.dir` holds, read with the job's own decoder and never written: for the
 * operator's tools (the `twopc` command) and for programs that want to look before they restart.
 * The checkpoint a restart restores is picked by the job's own rule (runtime/restore.c), as a new
 * process of the job would pick it with restore.mode=auto and no restore.fallback: the newest valid
 * file at or above the completion record (a file newer than the record is complete but was never
 * announced; a damaged one is skipped), and a refusal, with the job's message, when the checkpoint
 * the record names is damaged or missing. Nothing here takes the
 * folder's lease; a job may be writing into the folder meanwhile. Any thread; one folder is used by
 * one thread at a time.
 * @{ */

/** Where a checkpoint file stands, as tpc_checkpoint_folder_read() finds it. */
typedef enum {
    TPC_CHECKPOINT_RESTORE = 0,       /**< the one a restart restores */
    TPC_CHECKPOINT_OLDER = 1,         /**< completed, older than the one a restart restores */
    TPC_CHECKPOINT_NOT_COMPLETED = 2, /**< newer than the completion record: no sink heard of it */
    TPC_CHECKPOINT_DAMAGED = 3,       /**< loaded, and unreadable: see error */
} tpc_checkpoint_status_t;

/** One checkpoint as decoded from its file; owned by its folder. */
typedef struct tpc_checkpoint_s tpc_checkpoint_t;

/** One checkpoint file of a folder. */
typedef struct {
    char *path;
    uint64_t id;
    bool savepoint; /**< the kind: a savepoint-<id> file, else a chk-<id> file */
    int64_t size;   /**< bytes, -1 when the file could not be looked at */
    /** Its standing; TPC_CHECKPOINT_DAMAGED only once loaded (tpc_checkpoint_folder_load()). */
    tpc_checkpoint_status_t status;
    tpc_checkpoint_t *checkpoint; /**< once loaded and readable, else NULL */
    char *error;                  /**< once loaded and damaged: why, else NULL */
} tpc_checkpoint_info_t;

/** A checkpoint folder as tpc_checkpoint_folder_read() found it. */
typedef struct {
    tpc_checkpoint_info_t *files; /**< newest first */
    size_t nfiles;
    bool record_found;      /**< the completion record is there (and readable) */
    uint64_t record_newest; /**< the record's newest completed checkpoint */
    char *record_job;       /**< the record's job name */
    char *record_error;     /**< a damaged record: why (then record_found is false) */
    /** Index in files of the checkpoint a restart restores, -1 when none (a fresh start, or a
     * refusal). */
    long restore_index;
    /** When a restart would refuse to restore: the job's message and hint; else NULL. */
    char *restore_refusal;
    char *restore_hint;
} tpc_checkpoint_folder_t;

/**
 * @brief List the checkpoint files of @p dir with their ids, kinds, sizes and standing, and read
 * its completion record.
 * @param load_all decode every file (tpc_checkpoint_folder_load()); false decodes only the one a
 *        restart restores.
 * @param[out] out the listing; free it with tpc_checkpoint_folder_free() (also after an error).
 * @returns NULL, TPC_ERR_NOT_FOUND when @p dir is not a directory, TPC_ERR_IO when it cannot be
 * listed. A damaged file or record is no error: it is reported in the listing.
 */
TPC_API tpc_error_t *tpc_checkpoint_folder_read(const char *dir, bool load_all,
                                                tpc_checkpoint_folder_t *out);
/** @brief Decode file @p index of @p f unless it is already: sets its checkpoint, or its error
 * and the status TPC_CHECKPOINT_DAMAGED. */
TPC_API void tpc_checkpoint_folder_load(tpc_checkpoint_folder_t *f, size_t index);
/** @brief Free what tpc_checkpoint_folder_read() made, the loaded checkpoints included. */
TPC_API void tpc_checkpoint_folder_free(tpc_checkpoint_folder_t *f);
/** @returns "restore", "older", "not-completed" or "damaged". */
TPC_API const char *tpc_checkpoint_status_name(tpc_checkpoint_status_t status);

/** @returns the name of the job that wrote checkpoint @p c. */
TPC_API const char *tpc_checkpoint_job(const tpc_checkpoint_t *c);
/** @returns when @p c was taken, in milliseconds since the epoch (wall clock). */
TPC_API int64_t tpc_checkpoint_time_ms(const tpc_checkpoint_t *c);
/** @returns the job's max-parallelism (key groups) in @p c, 0 in checkpoints of format 1. */
TPC_API int tpc_checkpoint_max_parallelism(const tpc_checkpoint_t *c);
/** @returns the number of vertices @p c holds. */
TPC_API int tpc_checkpoint_vertex_count(const tpc_checkpoint_t *c);
/** @returns the name of vertex @p v (0 <= v < tpc_checkpoint_vertex_count()) and its parallelism
 * in *@p parallelism. */
TPC_API const char *tpc_checkpoint_vertex(const tpc_checkpoint_t *c, int v, int *parallelism);

/** One subtask of a vertex in a checkpoint. */
typedef struct {
    bool closed;          /**< it had closed before the checkpoint: no state, not run again */
    bool finished;        /**< its operator had finished: its state is its final state */
    size_t state_entries; /**< list, union, owned and keyed entries */
    size_t state_bytes;   /**< their bytes, framing included */
} tpc_checkpoint_subtask_t;

/** @brief Subtask @p s (0 <= s < parallelism) of vertex @p v of @p c into *@p out. */
TPC_API void tpc_checkpoint_subtask(const tpc_checkpoint_t *c, int v, int s,
                                    tpc_checkpoint_subtask_t *out);
/** @returns the list, union and owned state entries that subtask @p s of vertex @p v wrote, for
 * tpc_state_count() and tpc_state_get() (keyed state is not given); valid as long as @p c. The
 * transactional sinks' handles are among them (tpc_txn_checkpoint_handles() in tpc_txn.h). */
TPC_API const tpc_state_reader_t *tpc_checkpoint_state(const tpc_checkpoint_t *c, int v, int s);

/** @} */

/** @name The lease of a checkpoint folder
 * A running job holds a lease on its `checkpoint.dir` (tpc_job_run() takes it, shared with other
 * instances of the job, and gives it back when it returns); a manual command that commits or
 * aborts what the checkpoints promise takes it alone, and so refuses while a job runs. The lease is
 * an flock(2) on the folder's file `LOCK`: it dies with its process, kill -9 included.
 * @{ */

/** A held lease. */
typedef struct tpc_dir_lease_s tpc_dir_lease_t;

/**
 * @brief Take the lease of checkpoint folder @p dir (which must exist), without waiting.
 * @param exclusive true for a manual command (refused while a job runs), false for a job
 *        (refused while a manual command holds it).
 * @param out receives the lease; the caller owns it and gives it back with
 *        tpc_checkpoint_dir_release().
 * @returns NULL, TPC_ERR_STATE naming the holder (pid, host, since) when it is held the other way,
 *          TPC_ERR_NOT_FOUND / TPC_ERR_IO when the folder cannot hold the lease file. Any thread.
 */
TPC_API tpc_error_t *tpc_checkpoint_dir_lease(const char *dir, bool exclusive,
                                              tpc_dir_lease_t **out);
/** @brief Give back a lease (NULL is fine). Any thread. */
TPC_API void tpc_checkpoint_dir_release(tpc_dir_lease_t *lease);

/** @} */

/** Checkpoint event callback, on the job thread: @p completed true = completed, else aborted. */
typedef void (*tpc_checkpoint_cb)(void *opaque, uint64_t checkpoint_id, bool completed,
                                  uint64_t duration_us, const char *reason);
/** @brief Called after every completed or aborted checkpoint (before notifying tasks).
 * @returns TPC_OK, or TPC_ERR_INVALID_ARG when @p job is NULL. */
TPC_API tpc_err_t tpc_job_set_checkpoint_callback(tpc_job_t *job, tpc_checkpoint_cb cb,
                                                  void *opaque);

/** @} */

#ifdef __cplusplus
}
#endif
#endif /* TPC_RUNTIME_H */
