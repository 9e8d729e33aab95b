/*
 * Crash tests: the test binary runs itself again as a child process that does the real work, and
 * kills that child with SIGKILL at random moments, starting it again until one run ends on its
 * own. This file holds the parts every such test needs: a seeded random generator (the seed comes
 * from TWOPC_CRASH_SEED, so that a printed seed repeats a run), starting and waiting for children,
 * the kill loop itself, and showing a child's log when something went wrong.
 *
 * No Check calls here: benchmarks link this too. Functions report failures, the caller asserts.
 */
#ifndef TPC_TEST_CRASH_H
#define TPC_TEST_CRASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/** The variable that sets the seed of a crash test's random choices, in decimal. */
#define TPC_TEST_CRASH_SEED_ENV "TWOPC_CRASH_SEED"

/** A small xorshift generator: the same seed gives the same kill moments. */
typedef struct {
    uint64_t state;
} tpc_test_rng_t;

/**
 * The seed of this run: TWOPC_CRASH_SEED if set, else one from the time and the process id.
 * @returns the seed, to be printed with the test's results.
 */
uint64_t tpc_test_crash_seed(void);
void tpc_test_rng_init(tpc_test_rng_t *rng, uint64_t seed);
uint64_t tpc_test_rng_next(tpc_test_rng_t *rng);

/** The path of the running binary into @p buf. @returns false if it cannot be read. */
bool tpc_test_self_path(char *buf, size_t len);

/**
 * Start a child process running @p argv (argv[0] the program, NULL-terminated), with its stderr
 * appended to @p log unless that is NULL, and its stdout on @p stdout_fd unless that is negative.
 * @returns the child's pid, or -1 if fork() failed.
 */
pid_t tpc_test_spawn(const char *const *argv, const char *log, int stdout_fd);

/**
 * Wait up to @p ms milliseconds for child @p pid to end.
 * @returns true with its wait status in @p status if it ended (status -1 if waitpid() failed),
 * false if it still runs.
 */
bool tpc_test_wait(pid_t pid, double ms, int *status);

/** Kill child @p pid with SIGKILL and reap it. */
void tpc_test_kill(pid_t pid);

/** Copy the file @p log to stderr, if it exists. */
void tpc_test_dump_log(const char *log);

/** One scenario of a kill loop. */
typedef struct {
    const char *const *argv; /**< the child's command line, argv[0] the program, NULL-terminated */
    const char *log;         /**< the child's stderr is appended here; NULL: inherited */
    int kills;               /**< kill this many runs, then let one run end on its own */
    /** When to kill a run, after its start: with a chance of 1 in @c early_one_in (0: never)
     * within the first @c early_ms (start-up and recovery), else between @c min_ms and
     * @c min_ms + @c span_ms. */
    int early_one_in, early_ms, min_ms, span_ms;
    int last_run_ms; /**< how long the last run may take; 0: no limit */
} tpc_test_crash_plan_t;

typedef struct {
    int runs;   /**< children started */
    int kills;  /**< children killed */
    bool ended; /**< the last run ended (within last_run_ms) */
    int status; /**< its wait status */
} tpc_test_crash_result_t;

/**
 * Run @p plan: start the child, kill it at a random moment drawn from @p rng, start it again, and
 * so on; a run that ends before its kill, or the one after the last kill, is the last run. A last
 * run that exceeds last_run_ms is killed.
 * @returns true if the last run ended with exit status 0; otherwise false, after copying the
 * child's log to stderr.
 */
bool tpc_test_crash_run(const tpc_test_crash_plan_t *plan, tpc_test_rng_t *rng,
                        tpc_test_crash_result_t *result);

/** At most this many scenarios side by side. */
#define TPC_TEST_CRASH_SLOTS_MAX 8

/**
 * Kill loops side by side, for children that mostly wait (for a broker, say): in rounds, each of
 * @c slots slots runs a fresh scenario as tpc_test_crash_run() does, killing its runs at random
 * moments until @c kills kills were made in all (or @c kills_per_scenario in that scenario), after
 * which a run is the scenario's last. A scenario whose run ends on its own, early or last, is done
 * for the round. When all are done, each one's output is checked (finish); if kills are still
 * wanted, because runs ended on their own before their kill moments (a fast machine), another
 * round follows with fresh scenarios, as many as kills are still wanted, at most @c slots.
 * Checking and setting up scenarios happen between rounds only, never while children run unseen.
 */
typedef struct {
    int slots;              /**< scenarios at once, at most TPC_TEST_CRASH_SLOTS_MAX */
    int kills;              /**< kills wanted in all */
    int kills_per_scenario; /**< then a scenario's next run is its last */
    /** When to kill a run, as in tpc_test_crash_plan_t. */
    int early_one_in, early_ms, min_ms, span_ms;
    int last_run_ms; /**< how long a last run may take; 0: no limit */
    void *opaque;    /**< passed to the functions below */
    /** Set up a fresh scenario in @p slot (for the first one too). */
    void (*fresh)(void *opaque, int slot);
    /** Start a run of the scenario in @p slot. @returns its pid, or -1. */
    pid_t (*spawn)(void *opaque, int slot);
    /** The scenario in @p slot is done: a run ended on its own with exit status 0, after @p kills
     * kills of that scenario. Check its output and remove it. */
    void (*finish)(void *opaque, int slot, int kills);
    /** The log of the scenario in @p slot, or NULL. */
    const char *(*log)(void *opaque, int slot);
} tpc_test_crash_slots_t;

typedef struct {
    int runs;      /**< children started */
    int kills;     /**< children killed */
    int scenarios; /**< scenarios finished */
    int slot;      /**< on failure: the slot whose run failed */
    bool ended;    /**< on failure: that run ended (else it exceeded last_run_ms) */
    int status;    /**< on failure: its wait status (-1: it could not be started) */
} tpc_test_crash_slots_result_t;

/**
 * Run @p plan with kill moments drawn from @p rng, until @c kills kills were made or a round made
 * none (the caller compares result->kills with what it wants).
 * @returns true when every scenario was finished; false as soon as a run fails (ends with another
 * status than 0, or by a signal not sent here) or a last run exceeds last_run_ms, after copying
 * that scenario's log to stderr and killing every other child.
 */
bool tpc_test_crash_run_slots(const tpc_test_crash_slots_t *plan, tpc_test_rng_t *rng,
                              tpc_test_crash_slots_result_t *result);

#endif
