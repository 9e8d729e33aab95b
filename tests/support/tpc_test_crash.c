/*
 * Child processes and the kill loop of the crash tests (see tpc_test_crash.h).
 */
#include "tpc_test_crash.h"

#include "tpc_test_env.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

uint64_t tpc_test_crash_seed(void)
{
    const char *env = tpc_test_env(TPC_TEST_CRASH_SEED_ENV);
    return env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL) ^ (uint64_t)getpid();
}

void tpc_test_rng_init(tpc_test_rng_t *rng, uint64_t seed)
{
    rng->state = seed ? seed : 1;
}

uint64_t tpc_test_rng_next(tpc_test_rng_t *rng)
{
    rng->state ^= rng->state << 13;
    rng->state ^= rng->state >> 7;
    rng->state ^= rng->state << 17;
    return rng->state;
}

bool tpc_test_self_path(char *buf, size_t len)
{
    ssize_t n = readlink("/proc/self/exe", buf, len - 1);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    return true;
}

pid_t tpc_test_spawn(const char *const *argv, const char *log, int stdout_fd)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (log) {
            FILE *f = freopen(log, "a", stderr);
            (void)f;
        }
        if (stdout_fd >= 0)
            dup2(stdout_fd, 1);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

bool tpc_test_wait(pid_t pid, double ms, int *status)
{
    double end = tpc_test_now_s() + ms / 1000.0;
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid)
            return true;
        if (r < 0) {
            *status = -1;
            return true;
        }
        if (tpc_test_now_s() >= end)
            return false;
        struct timespec ts = {0, 500000};
        nanosleep(&ts, NULL);
    }
}

void tpc_test_kill(pid_t pid)
{
    int status;
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
}

void tpc_test_dump_log(const char *log)
{
    FILE *f = fopen(log, "r");
    char line[2048];
    while (f && fgets(line, sizeof line, f))
        fputs(line, stderr);
    if (f)
        fclose(f);
}

bool tpc_test_crash_run(const tpc_test_crash_plan_t *plan, tpc_test_rng_t *rng,
                        tpc_test_crash_result_t *result)
{
    *result = (tpc_test_crash_result_t){.status = -1};
    for (;;) {
        pid_t pid = tpc_test_spawn(plan->argv, plan->log, -1);
        if (pid < 0)
            return false;
        result->runs++;
        if (result->kills < plan->kills) {
            bool early = plan->early_one_in > 0 &&
                         tpc_test_rng_next(rng) % (uint64_t)plan->early_one_in == 0;
            double ms =
                early ? (double)(tpc_test_rng_next(rng) % (uint64_t)plan->early_ms)
                      : plan->min_ms + (double)(tpc_test_rng_next(rng) % (uint64_t)plan->span_ms);
            if (!tpc_test_wait(pid, ms, &result->status)) {
                tpc_test_kill(pid);
                result->kills++;
                continue;
            }
            result->ended = true;
        } else if (plan->last_run_ms > 0) {
            result->ended = tpc_test_wait(pid, plan->last_run_ms, &result->status);
            if (!result->ended)
                tpc_test_kill(pid);
        } else {
            result->ended = waitpid(pid, &result->status, 0) == pid;
        }
        bool ok = result->ended && WIFEXITED(result->status) && WEXITSTATUS(result->status) == 0;
        if (!ok && plan->log)
            tpc_test_dump_log(plan->log);
        return ok;
    }
}
