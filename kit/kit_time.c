/*
 * Time in the kit (tpc_kit.h): the monotonic and wall clocks, deadlines for condition variables on
 * the monotonic clock, a cancel-aware sleep and exponential backoff with a deadline. Every layer
 * measures durations and waits with these, so a wait never jumps with the wall clock.
 */
#include "tpc_kit.h"

#include <time.h>

static int64_t clock_us(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t tpc_clock_ms(void)
{
    return clock_us(CLOCK_MONOTONIC) / 1000;
}

int64_t tpc_clock_us(void)
{
    return clock_us(CLOCK_MONOTONIC);
}

int64_t tpc_wall_ms(void)
{
    return clock_us(CLOCK_REALTIME) / 1000;
}

int tpc_cond_init(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    int rc = pthread_condattr_init(&attr);
    if (rc)
        return rc;
    rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (!rc)
        rc = pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
    return rc;
}

struct timespec tpc_deadline_us(int64_t us)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    if (us < 0)
        us = 0;
    ts.tv_sec += (time_t)(us / 1000000);
    ts.tv_nsec += (long)(us % 1000000) * 1000;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

int tpc_cond_wait_us(pthread_cond_t *cond, pthread_mutex_t *mu, int64_t us)
{
    struct timespec until = tpc_deadline_us(us);
    return pthread_cond_timedwait(cond, mu, &until);
}

#define SLICE_MS 20

bool tpc_sleep_ms(int64_t ms, tpc_canceled_fn canceled, void *arg)
{
    int64_t end = tpc_clock_ms() + (ms > 0 ? ms : 0);
    for (;;) {
        if (canceled && canceled(arg))
            return false;
        int64_t left = end - tpc_clock_ms();
        if (left <= 0)
            return true;
        int64_t slice = canceled && left > SLICE_MS ? SLICE_MS : left;
        struct timespec ts = {(time_t)(slice / 1000), (long)(slice % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

void tpc_backoff_init(tpc_backoff_t *b, int64_t deadline_ms, int64_t first_ms, int64_t max_ms)
{
    *b = (tpc_backoff_t){.start_ms = tpc_clock_ms(),
                         .deadline_ms = deadline_ms,
                         .next_ms = first_ms > 0 ? first_ms : 1,
                         .max_ms = max_ms > first_ms ? max_ms : first_ms};
}

bool tpc_backoff_wait(tpc_backoff_t *b, tpc_canceled_fn canceled, void *arg)
{
    b->canceled = false;
    if (tpc_clock_ms() + b->next_ms > b->deadline_ms)
        return false;
    if (!tpc_sleep_ms(b->next_ms, canceled, arg)) {
        b->canceled = true;
        return false;
    }
    b->retries++;
    b->next_ms = b->next_ms * 2 > b->max_ms ? b->max_ms : b->next_ms * 2;
    return true;
}

int64_t tpc_backoff_next_ms(const tpc_backoff_t *b)
{
    return b->next_ms;
}

int64_t tpc_backoff_elapsed_ms(const tpc_backoff_t *b)
{
    return tpc_clock_ms() - b->start_ms;
}
