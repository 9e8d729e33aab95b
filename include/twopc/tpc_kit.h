/*
 * The kit: the one home of the library's plumbing, written once and used by every layer (the
 * runtime, the two-phase-commit framework, the connectors and the tools) and by a new connector
 * (docs/writing-a-connector.md). Configuration is in tpc_props.h; this header holds clocks and
 * condition-variable deadlines, a sleep that a cancel cuts short, a retry loop with exponential
 * backoff, byte codecs with growable buffers, growable arrays and a hash table. The kit depends on
 * libc and pthreads only (its code is in kit/, below the runtime). Every function here is safe on
 * any thread; the data structures have one owner each and no lock of their own.
 *
 * Out of memory: the kit never aborts. A growing call that cannot allocate returns false (or a
 * negative code) and leaves what was there intact; buffers also keep a sticky flag, so that a codec
 * can write a whole message and check once. The runtime treats out of memory as fatal (it aborts
 * with a message), the framework and the connectors return TPC_ERR_NOMEM (docs/architecture.md).
 */
#ifndef TPC_KIT_H
#define TPC_KIT_H

#include "tpc_props.h"
#include "tpc_runtime.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @returns milliseconds of a monotonic clock: for deadlines and durations, never for names. */
TPC_API int64_t tpc_clock_ms(void);
/** @returns milliseconds since the epoch (wall clock): for timestamps and names. */
TPC_API int64_t tpc_wall_ms(void);
/** @returns microseconds of the same monotonic clock as tpc_clock_ms(). */
TPC_API int64_t tpc_clock_us(void);

/** @brief Initialise @p cond to measure timed waits on the monotonic clock (tpc_deadline()).
 * @returns 0 or the pthread error. */
TPC_API int tpc_cond_init(pthread_cond_t *cond);
/** @brief The absolute time @p us microseconds from now on the monotonic clock, for
 * pthread_cond_timedwait() on a condition made by tpc_cond_init(). Negative @p us counts as 0. */
TPC_API struct timespec tpc_deadline_us(int64_t us);
/** @brief pthread_cond_timedwait() until @p us microseconds from now on a condition made by
 * tpc_cond_init(). @returns 0 when signalled (or woken spuriously), ETIMEDOUT after the time. */
TPC_API int tpc_cond_wait_us(pthread_cond_t *cond, pthread_mutex_t *mu, int64_t us);

/** A cancel test: true when the caller should stop waiting. */
typedef bool (*tpc_canceled_fn)(void *arg);

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

/* ---- bytes: codecs and growable buffers ---------------------------------------------------- */

/* Fixed-width integers in and out of byte arrays, the one place that spells out byte order:
 * big-endian (network order: the Kafka protocol, PostgreSQL's binary COPY, the connectors'
 * handles) in @p n bytes (1 to 8, the low bytes of @p v), and little-endian (the checkpoint
 * files). No alignment is assumed. */
static inline void tpc_store_be(unsigned char *p, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--, v >>= 8)
        p[i] = (unsigned char)v;
}
static inline uint64_t tpc_load_be(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}
static inline void tpc_store_le(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++, v >>= 8)
        p[i] = (unsigned char)v;
}
static inline uint64_t tpc_load_le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* ---- growable arrays ------------------------------------------------------------------------ */

/* ---- hash table ----------------------------------------------------------------------------- */

#ifdef __cplusplus
}
#endif

#endif
