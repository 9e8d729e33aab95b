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

/* How long after its start to kill a run: with a chance of 1 in @p early_one_in within the first
 * @p early_ms, else between @p min_ms and @p min_ms + @p span_ms. */
static double kill_after_ms(int early_one_in, int early_ms, int min_ms, int span_ms,
                            tpc_test_rng_t *rng)
{
    bool early = early_one_in > 0 && tpc_test_rng_next(rng) % (uint64_t)early_one_in == 0;
    return early ? (double)(tpc_test_rng_next(rng) % (uint64_t)early_ms)
                 : min_ms + (double)(tpc_test_rng_next(rng) % (uint64_t)span_ms);
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
            double ms =
                kill_after_ms(plan->early_one_in, plan->early_ms, plan->min_ms, plan->span_ms, rng);
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

/* One slot of tpc_test_crash_run_slots(). */
typedef struct {
    pid_t pid;      /* the running child; 0: none, the slot is done */
    double started; /* when it was started (tpc_test_now_s()) */
    double kill_at; /* when to kill it; 0: never, it is the scenario's last run */
    int kills;      /* kills of the slot's scenario */
} crash_slot_t;

static bool slot_killing(const tpc_test_crash_slots_t *plan, const crash_slot_t *slot,
                         const tpc_test_crash_slots_result_t *result)
{
    return result->kills < plan->kills && slot->kills < plan->kills_per_scenario;
}

static bool slot_start(const tpc_test_crash_slots_t *plan, tpc_test_rng_t *rng, int i,
                       crash_slot_t *slot, tpc_test_crash_slots_result_t *result)
{
    slot->pid = plan->spawn(plan->opaque, i);
    if (slot->pid <= 0) {
        slot->pid = 0;
        return false;
    }
    result->runs++;
    slot->started = tpc_test_now_s();
    slot->kill_at = 0;
    if (slot_killing(plan, slot, result))
        slot->kill_at = slot->started + kill_after_ms(plan->early_one_in, plan->early_ms,
                                                      plan->min_ms, plan->span_ms, rng) /
                                            1000.0;
    return true;
}

/* Slot @p i failed: kill every other child, show the slot's log. */
static bool slots_fail(const tpc_test_crash_slots_t *plan, crash_slot_t *slots, int n, int i,
                       bool ended, int status, tpc_test_crash_slots_result_t *result)
{
    for (int j = 0; j < n; j++) {
        if (slots[j].pid > 0)
            tpc_test_kill(slots[j].pid);
        slots[j].pid = 0;
    }
    result->slot = i;
    result->ended = ended;
    result->status = status;
    const char *log = plan->log ? plan->log(plan->opaque, i) : NULL;
    if (log)
        tpc_test_dump_log(log);
    return false;
}

/* Run one round: fresh scenarios in slots 0 .. @p n - 1 side by side until each has ended on its
 * own, then finish them all. */
static bool slots_round(const tpc_test_crash_slots_t *plan, tpc_test_rng_t *rng,
                        crash_slot_t *slots, int n, tpc_test_crash_slots_result_t *result)
{
    for (int i = 0; i < n; i++) {
        slots[i] = (crash_slot_t){0};
        plan->fresh(plan->opaque, i);
    }
    for (int i = 0; i < n; i++)
        if (!slot_start(plan, rng, i, &slots[i], result))
            return slots_fail(plan, slots, n, i, false, -1, result);
    for (int busy = n; busy > 0;) {
        busy = 0;
        for (int i = 0; i < n; i++) {
            crash_slot_t *slot = &slots[i];
            if (!slot->pid)
                continue;
            busy++;
            int status = 0;
            pid_t r = waitpid(slot->pid, &status, WNOHANG);
            if (r != 0) {
                /* Ended on its own: a success only with exit status 0. */
                slot->pid = 0;
                if (r < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                    return slots_fail(plan, slots, n, i, true, r < 0 ? -1 : status, result);
                continue;
            }
            double now = tpc_test_now_s();
            if (slot->kill_at > 0 && now >= slot->kill_at) {
                if (slot_killing(plan, slot, result)) {
                    tpc_test_kill(slot->pid);
                    slot->pid = 0;
                    slot->kills++;
                    result->kills++;
                    if (!slot_start(plan, rng, i, slot, result))
                        return slots_fail(plan, slots, n, i, false, -1, result);
                    continue;
                }
                slot->kill_at = 0; /* enough kills elsewhere: this is the last run */
            }
            if (slot->kill_at == 0 && plan->last_run_ms > 0 &&
                now - slot->started > plan->last_run_ms / 1000.0)
                return slots_fail(plan, slots, n, i, false, -1, result);
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    /* Checking outputs and setting up scenarios takes a while: never while children run, whose
     * kill moments would pass unseen. */
    for (int i = 0; i < n; i++) {
        plan->finish(plan->opaque, i, slots[i].kills);
        result->scenarios++;
    }
    return true;
}

bool tpc_test_crash_run_slots(const tpc_test_crash_slots_t *plan, tpc_test_rng_t *rng,
                              tpc_test_crash_slots_result_t *result)
{
    *result = (tpc_test_crash_slots_result_t){.slot = -1, .status = -1};
    crash_slot_t slots[TPC_TEST_CRASH_SLOTS_MAX];
    int n = plan->slots < TPC_TEST_CRASH_SLOTS_MAX ? plan->slots : TPC_TEST_CRASH_SLOTS_MAX;
    for (;;) {
        int before = result->kills;
        if (!slots_round(plan, rng, slots, n, result))
            return false;
        int wanted = plan->kills - result->kills;
        /* A round without kills: the runs end before any kill moment, fresh scenarios too. */
        if (wanted <= 0 || result->kills == before)
            return true;
        /* No more fresh scenarios than kills wanted: each scenario is to be killed. */
        if (n > wanted)
            n = wanted;
    }
}
