/*
 * The connector kit (tpc_kit.h): clocks, a cancel-aware sleep and exponential backoff with a
 * deadline, shared by the framework's commit retries and by every connector.
 */
#include "tpc_kit.h"

#include <time.h>

static int64_t clock_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t tpc_clock_ms(void)
{
    return clock_ms(CLOCK_MONOTONIC);
}

int64_t tpc_wall_ms(void)
{
    return clock_ms(CLOCK_REALTIME);
}

bool tpc_txn_subtask_canceled(void *arg)
{
    return arg && tpc_txn_is_canceled(arg);
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
