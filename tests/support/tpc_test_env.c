/*
 * Environment, naming and clock helpers shared by the tests (see tpc_test_env.h).
 */
#include "tpc_test_env.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

const char *tpc_test_env(const char *name)
{
    const char *value = getenv(name);
    return value && *value ? value : NULL;
}

const char *tpc_test_env_require(const char *name)
{
    const char *value = tpc_test_env(name);
    if (!value)
        fprintf(stderr,
                "environment variable %s is not set: run the integration tests with "
                "'make test-integration' (which starts the test servers), or start servers with "
                "'make services-up' and export what it prints\n",
                name);
    return value;
}

char *tpc_test_unique_name(char *buf, size_t len, const char *prefix, char sep)
{
    static atomic_uint counter;
    struct timespec ts;
    uint64_t mix;

    clock_gettime(CLOCK_REALTIME, &ts);
    mix = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15u ^ (uint64_t)getpid() << 32;
    mix ^= mix >> 29;
    snprintf(buf, len, "%s%c%ld%c%lld%c%u%c%06x", prefix, sep, (long)getpid(), sep,
             (long long)ts.tv_sec, sep, atomic_fetch_add(&counter, 1) + 1, sep,
             (unsigned)(mix & 0xffffff));
    return buf;
}

double tpc_test_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int64_t tpc_test_now_ms(void)
{
    return (int64_t)(tpc_test_now_s() * 1000.0);
}
