/*
 * The connector author's kit: what every connector needs besides its own protocol, written once.
 * Configuration is in tpc_props.h (one table of keys per connector); this header adds clocks, a
 * sleep that a cancel cuts short, and a retry loop with exponential backoff and a deadline. The
 * file, PostgreSQL and Kafka connectors use these in place of their own copies, and so should a
 * new one (docs/writing-a-connector.md). Every function here is safe on any thread.
 */
#ifndef TPC_KIT_H
#define TPC_KIT_H

#include "tpc_props.h"
#include "tpc_txn.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @returns milliseconds of a monotonic clock: for deadlines and durations, never for names. */
TPC_API int64_t tpc_clock_ms(void);
/** @returns milliseconds since the epoch (wall clock): for timestamps and names. */
TPC_API int64_t tpc_wall_ms(void);

/** A cancel test: true when the caller should stop waiting. */
typedef bool (*tpc_canceled_fn)(void *arg);

/** @brief tpc_canceled_fn over a sink subtask (@p arg is a const tpc_txn_subtask_t *): true once
 * its job is being canceled (tpc_txn_is_canceled()). */
TPC_API bool tpc_txn_subtask_canceled(void *arg);

/**
 * @brief Sleep @p ms milliseconds, waking every 20 ms at most to ask @p canceled (NULL: never
 * canceled) so that a cancel never waits behind a long pause.
 * @returns true after the whole pause, false when cut short by a cancel.
 */
TPC_API bool tpc_sleep_ms(int64_t ms, tpc_canceled_fn canceled, void *arg);

/**
 * Exponential backoff towards a deadline. Typical use:
 *
 *     tpc_backoff_t b;
 *     tpc_backoff_init(&b, tpc_clock_ms() + deadline_ms, 50, 2000);
 *     for (;;) {
 *         err = try_once();
 *         if (!err || !tpc_error_is_retriable(err) || !tpc_backoff_wait(&b, canceled, arg))
 *             break;
 *         tpc_error_destroy(err);
 *     }
 */
typedef struct {
    int64_t start_ms;    /**< tpc_clock_ms() at init */
    int64_t deadline_ms; /**< tpc_clock_ms() time after which no pause is taken */
    int64_t next_ms;     /**< the next pause */
    int64_t max_ms;      /**< the longest pause */
    int retries;         /**< pauses taken so far */
    bool canceled;       /**< the last wait was cut short by a cancel */
} tpc_backoff_t;

/** @brief Start a backoff: first pause @p first_ms, doubling up to @p max_ms, no pause that would
 * end after @p deadline_ms (a tpc_clock_ms() time). */
TPC_API void tpc_backoff_init(tpc_backoff_t *b, int64_t deadline_ms, int64_t first_ms,
                              int64_t max_ms);
/**
 * @brief Pause before the next attempt. @returns true after the pause; false, without sleeping,
 * when the pause would pass the deadline, or when a cancel cut it short (then b->canceled is set).
 */
TPC_API bool tpc_backoff_wait(tpc_backoff_t *b, tpc_canceled_fn canceled, void *arg);
/** @returns the pause tpc_backoff_wait() would take next, in milliseconds (for log lines). */
TPC_API int64_t tpc_backoff_next_ms(const tpc_backoff_t *b);
/** @returns milliseconds since tpc_backoff_init(). */
TPC_API int64_t tpc_backoff_elapsed_ms(const tpc_backoff_t *b);

#ifdef __cplusplus
}
#endif

#endif
