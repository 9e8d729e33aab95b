/*
 * The kill -9 check of the connector conformance suite (tpc_conformance.h): whole jobs, sequence
 * source (2 subtasks) -> the connector's sink, in child processes that are killed with SIGKILL in
 * every phase of a transaction and started again on the same checkpoint folder, at changing
 * parallelism, until a last run ends the job. Then every record must be visible exactly once and
 * nothing may be left open.
 *
 * To kill in a chosen phase the child wraps the connector: a sink of its own whose ops call the
 * connector's ops and kill the process before, during or after the n-th call of one op, counted
 * over all subtasks of the run. "During" arms a thread that kills a random 0 to 3 ms into the call
 * (and the call waits for it if it returns first): for a commit that is often halfway through.
 */
#include "tpc_conformance.h"
#include "tpc_test_crash.h"
#include "tpc_test_env.h"
#include "tpc_test_ops.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- the kill point (child only) ------------------------------------------------------------ */

typedef enum { WHEN_BEFORE, WHEN_DURING, WHEN_AFTER } when_t;

static const char *const op_names[] = {"begin",
                                       "write",
                                       "flush",
                                       "pre_commit",
                                       "commit",
                                       "abort",
                                       "recover_and_commit",
                                       "recover_and_abort",
                                       "abort_lingering"};
enum {
    OP_BEGIN,
    OP_WRITE,
    OP_FLUSH,
    OP_PRE_COMMIT,
    OP_COMMIT,
    OP_ABORT,
    OP_RECOVER_COMMIT,
    OP_RECOVER_ABORT,
    OP_LINGERING,
    OP_COUNT
};

static struct {
    int op; /* -1: none */
    when_t when;
    int nth;
    atomic_int calls;
    unsigned delay_us;
} kill_point = {.op = -1};

static const tpc_txn_connector_ops_t *inner_ops;

static void die(void)
{
    kill(getpid(), SIGKILL);
    for (;;)
        pause();
}

static void *killer(void *arg)
{
    (void)arg;
    struct timespec ts = {0, (long)kill_point.delay_us * 1000};
    nanosleep(&ts, NULL);
    die();
    return NULL;
}

/* At the entry of a call of @op: @returns true when this is the call to kill in. */
static bool enter(int op)
{
    if (op != kill_point.op)
        return false;
    if (atomic_fetch_add(&kill_point.calls, 1) + 1 != kill_point.nth)
        return false;
    fprintf(stderr, "conformance child: kill -9 %s %s call %d\n",
            kill_point.when == WHEN_BEFORE   ? "before"
            : kill_point.when == WHEN_DURING ? "during"
                                             : "after",
            op_names[op], kill_point.nth);
    if (kill_point.when == WHEN_BEFORE)
        die();
    if (kill_point.when == WHEN_DURING) {
        pthread_t th;
        if (pthread_create(&th, NULL, killer, NULL) != 0)
            die();
    }
    return true;
}

/* At the exit of the call that enter() chose. */
static tpc_error_t *leave(bool chosen, tpc_error_t *err)
{
    if (chosen)
        die(); /* after it, or the killer thread is about to */
    return err;
}

#define WRAP(op, call)                                                                             \
    do {                                                                                           \
        bool chosen_ = enter(op);                                                                  \
        return leave(chosen_, (call));                                                             \
    } while (0)

typedef struct {
    tpc_txn_sink_t *inner;
    void *arg;
} wrap_t;

static tpc_error_t *w_configure(void *arg, const char *key, const char *value)
{
    wrap_t *w = arg;
    tpc_error_t *err = inner_ops->props ? tpc_props_set(inner_ops->props, w->arg, key, value)
                                        : tpc_error_new(TPC_ERR_NOT_FOUND, 0, "unknown key");
    if (err && tpc_error_code(err) == TPC_ERR_NOT_FOUND && inner_ops->configure) {
        tpc_error_destroy(err);
        err = inner_ops->configure(w->arg, key, value);
    }
    return err;
}
static void w_release(void *arg)
{
    wrap_t *w = arg;
    tpc_txn_sink_destroy(w->inner);
    free(w);
}
static tpc_error_t *w_open(void *arg, const tpc_txn_subtask_t *st, void **conn)
{
    wrap_t *w = arg;
    return inner_ops->open(w->arg, st, conn);
}
static void w_close(void *conn)
{
    inner_ops->close(conn);
}
static tpc_error_t *w_begin(void *conn, uint64_t id, void **txn)
{
    WRAP(OP_BEGIN, inner_ops->begin(conn, id, txn));
}
static tpc_error_t *w_write(void *conn, void *txn, const tpc_record_t *r, size_t n)
{
    WRAP(OP_WRITE, inner_ops->write(conn, txn, r, n));
}
static tpc_error_t *w_flush(void *conn, void *txn)
{
    WRAP(OP_FLUSH, inner_ops->flush ? inner_ops->flush(conn, txn) : NULL);
}
static tpc_error_t *w_pre_commit(void *conn, void *txn, uint64_t id)
{
    WRAP(OP_PRE_COMMIT, inner_ops->pre_commit(conn, txn, id));
}
static tpc_error_t *w_commit(void *conn, void *txn)
{
    WRAP(OP_COMMIT, inner_ops->commit(conn, txn));
}
static tpc_error_t *w_abort(void *conn, void *txn)
{
    WRAP(OP_ABORT, inner_ops->abort(conn, txn));
}
static tpc_error_t *w_recover_commit(void *conn, void *txn)
{
    WRAP(OP_RECOVER_COMMIT, inner_ops->recover_and_commit(conn, txn));
}
static tpc_error_t *w_recover_abort(void *conn, void *txn)
{
    WRAP(OP_RECOVER_ABORT, inner_ops->recover_and_abort(conn, txn));
}
static tpc_error_t *w_lingering(void *conn, const tpc_txn_lingering_t *l)
{
    WRAP(OP_LINGERING, inner_ops->abort_lingering ? inner_ops->abort_lingering(conn, l) : NULL);
}
static tpc_error_t *w_serialize(void *conn, const void *txn, tpc_txn_buf_t *out)
{
    return inner_ops->serialize(conn, txn, out);
}
static tpc_error_t *w_deserialize(void *conn, const void *b, size_t len, void **txn)
{
    return inner_ops->deserialize(conn, b, len, txn);
}
static bool w_is_empty(void *conn, const void *txn)
{
    return inner_ops->is_empty(conn, txn);
}
static void w_free_txn(void *conn, void *txn)
{
    inner_ops->free_txn(conn, txn);
}
static void w_describe(void *conn, const void *txn, char *buf, size_t cap)
{
    inner_ops->describe(conn, txn, buf, cap);
}

static const tpc_txn_connector_ops_t wrap_ops = {
    .version = TPC_TXN_CONNECTOR_OPS_VERSION,
    .name = "conformance-kill",
    .configure = w_configure,
    .release = w_release,
    .open = w_open,
    .close = w_close,
    .begin = w_begin,
    .write = w_write,
    .flush = w_flush,
    .pre_commit = w_pre_commit,
    .commit = w_commit,
    .abort = w_abort,
    .recover_and_commit = w_recover_commit,
    .recover_and_abort = w_recover_abort,
    .abort_lingering = w_lingering,
    .serialize = w_serialize,
    .deserialize = w_deserialize,
    .is_empty = w_is_empty,
    .free_txn = w_free_txn,
    .describe = w_describe,
};

/* "op.when=n" (e.g. "commit.during=2") or "none". */
static bool parse_kill(const char *spec)
{
    if (strcmp(spec, "none") == 0)
        return true;
    const char *dot = strrchr(spec, '.'), *eq = strchr(spec, '=');
    if (!dot || !eq || eq < dot)
        return false;
    for (int op = 0; op < OP_COUNT; op++)
        if ((size_t)(dot - spec) == strlen(op_names[op]) &&
            strncmp(spec, op_names[op], (size_t)(dot - spec)) == 0)
            kill_point.op = op;
    if (strncmp(dot + 1, "before=", 7) == 0)
        kill_point.when = WHEN_BEFORE;
    else if (strncmp(dot + 1, "during=", 7) == 0)
        kill_point.when = WHEN_DURING;
    else if (strncmp(dot + 1, "after=", 6) == 0)
        kill_point.when = WHEN_AFTER;
    else
        return false;
    kill_point.nth = atoi(eq + 1);
    return kill_point.op >= 0 && kill_point.nth > 0;
}

/* ---- the child ------------------------------------------------------------------------------ */

bool tpc_conformance_is_child(int argc, char **argv)
{
    return argc == 7 && strcmp(argv[1], TPC_CONFORMANCE_CHILD_ARG) == 0;
}

static void log_line(void *opaque, tpc_log_level_t level, const char *message)
{
    (void)opaque, (void)level;
    fprintf(stderr, "%s\n", message);
}

/* argv: self --conformance-child NS CHECKPOINT_DIR PARALLELISM KILL_POINT DELAY_US */
int tpc_conformance_child_main(const tpc_conformance_t *c, int argc, char **argv)
{
    alarm((unsigned)(c->crash_run_ms / 1000 + 30)); /* never outlive the test */
    if (argc != 7 || !parse_kill(argv[5])) {
        fprintf(stderr, "conformance child: bad arguments\n");
        return 2;
    }
    kill_point.delay_us = (unsigned)strtoul(argv[6], NULL, 10);
    tpc_test_seq_conf_t src = {.count_default = c->crash_records, .per_poll = 4, .sleep_us = 4000};
    char interval[32];
    snprintf(interval, sizeof interval, "%d", c->crash_interval_ms);
    tpc_job_t *job = tpc_job_new("conformance");
    tpc_txn_sink_t *inner = NULL, *sink = NULL;
    wrap_t *w = calloc(1, sizeof *w);
    tpc_job_set_logger(job, log_line, NULL, TPC_LOG_INFO);
    tpc_error_t *err = tpc_job_set(job, "checkpoint.dir", argv[3]);
    if (!err)
        err = tpc_job_set(job, "checkpoint.interval.ms", interval);
    if (!err)
        err = tpc_job_set(job, "restart.delay.ms", "50");
    if (!err)
        err = c->sink_new(argv[2], &inner);
    if (!err) {
        inner_ops = tpc_txn_sink_connector_ops(inner);
        w->inner = inner;
        w->arg = tpc_txn_sink_connector_arg(inner);
        err = tpc_txn_sink_new(&wrap_ops, w, &sink); /* takes w (and the inner sink) over */
        w = NULL;
        inner = NULL;
    }
    if (!err)
        err = tpc_txn_sink_set(sink, "commit.retry.backoff.ms", "5");
    int s, k;
    if (!err)
        err = tpc_job_add_vertex(job, "source", 2, &tpc_test_seq_source_ops, &src, &s);
    if (!err)
        err = tpc_txn_sink_add_to_job(sink, job, "sink", atoi(argv[4]), &k);
    if (!err)
        err = tpc_job_connect(job, s, k, TPC_EDGE_REBALANCE);
    tpc_job_result_t result = TPC_JOB_CANCELED;
    if (!err)
        err = tpc_job_run(job, &result);
    int rc = 0;
    if (err || result != TPC_JOB_FINISHED) {
        fprintf(stderr, "conformance child: %s\n", err ? tpc_error_message(err) : "did not finish");
        rc = 1;
    }
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(sink);
    tpc_txn_sink_destroy(inner);
    free(w);
    return rc;
}

/* ---- the check ------------------------------------------------------------------------------ */

/* One run after the other on the same checkpoint folder, each killed at its point; parallelism
 * changes on the way. Each kill point is one its run must reach: what the run before it left
 * (a completed checkpoint with pending transactions, an open transaction) makes sure of it. */
static const struct {
    int parallelism;
    const char *kill;
} runs[] = {
    {2, "write.after=30"},             /* records in open transactions, maybe one pre-commit */
    {2, "pre_commit.before=2"},        /* a checkpoint half taken */
    {3, "pre_commit.after=2"},         /* 2 -> 3; pre-committed, checkpoint not complete */
    {3, "commit.before=2"},            /* checkpoint complete, not committed */
    {3, "recover_and_commit.after=1"}, /* committed by recovery, which must run again */
    {2, "recover_and_abort.after=1"},  /* 3 -> 2 */
    {2, "commit.during=3"},            /* halfway through a commit */
    {2, "recover_and_commit.during=1"},
    {1, "abort_lingering.before=1"}, /* 2 -> 1, before cleaning up */
    {1, "commit.after=2"},           /* committed, not yet known to anyone */
    {2, "abort_lingering.after=1"},  /* 1 -> 2 */
    {2, "none"},                     /* to the end */
};

bool tpc_conformance_kill_9(const tpc_conformance_t *c, char *why, size_t why_len)
{
    char ns[TPC_CONFORMANCE_NS_MAX], self[4096], log[4200], par[16], delay[16];
    if (!tpc_test_self_path(self, sizeof self)) {
        snprintf(why, why_len, "cannot find the test binary");
        return false;
    }
    if (!c->ns_new(ns, sizeof ns, why, why_len))
        return false;
    char *ckpt = tpc_test_tmpdir("conformance-ckpt");
    snprintf(log, sizeof log, "%s.log", ckpt);
    tpc_test_rng_t rng;
    uint64_t seed = tpc_test_crash_seed();
    tpc_test_rng_init(&rng, seed);
    bool passed = true;
    size_t nruns = sizeof runs / sizeof runs[0];
    double t0 = tpc_test_now_s();
    size_t before_last = 0;
    for (size_t r = 0; passed && r < nruns; r++) {
        if (r + 1 == nruns) {
            /* How far the killed runs got: the kills must spread over the job, not its end. */
            tpc_conformance_keys_t got = {0};
            passed = c->read(ns, &got, why, why_len);
            before_last = got.len;
            tpc_conformance_keys_free(&got);
            if (!passed)
                break;
        }
        snprintf(par, sizeof par, "%d", runs[r].parallelism);
        snprintf(delay, sizeof delay, "%u", (unsigned)(tpc_test_rng_next(&rng) % 3000));
        const char *argv[] = {self, TPC_CONFORMANCE_CHILD_ARG, ns, ckpt, par, runs[r].kill, delay,
                              NULL};
        pid_t pid = tpc_test_spawn(argv, log, -1);
        int status = 0;
        bool ended = pid > 0 && tpc_test_wait(pid, c->crash_run_ms, &status);
        bool last = r + 1 == nruns;
        if (!ended) {
            if (pid > 0)
                tpc_test_kill(pid);
            snprintf(why, why_len, "run %zu (%s) did not end within %d ms", r + 1, runs[r].kill,
                     c->crash_run_ms);
            passed = false;
        } else if (last && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
            snprintf(why, why_len, "the last run failed (wait status %d)", status);
            passed = false;
        } else if (!last && !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
            snprintf(why, why_len, "run %zu was to be killed %s, but it %s (wait status %d)", r + 1,
                     runs[r].kill,
                     WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "finished the job first"
                                                                   : "failed",
                     status);
            passed = false;
        }
    }
    if (passed) {
        tpc_conformance_keys_t got = {0}, want = {0};
        unsigned char b[8], *p;
        for (uint64_t sub = 0; sub < 2; sub++)
            for (uint64_t i = 0; i < c->crash_records; i++) {
                p = b;
                tpc_txn_put_be(&p, sub << 40 | i, 8);
                tpc_conformance_keys_add(&want, b, 8);
            }
        char detail[1024] = "";
        passed = c->read(ns, &got, detail, sizeof detail) &&
                 tpc_conformance_compare(&got, &want, detail, sizeof detail);
        if (!passed)
            snprintf(why, why_len, "after %zu runs killed in every phase: %s", nruns - 1, detail);
        long long left = -1;
        if (passed && !c->leftovers(ns, &left, detail, sizeof detail)) {
            snprintf(why, why_len, "after the last run: %s", detail);
            passed = false;
        } else if (passed && left != 0) {
            snprintf(why, why_len, "after the last run %lld transactions are left open", left);
            passed = false;
        }
        tpc_conformance_keys_free(&got);
        tpc_conformance_keys_free(&want);
    }
    if (!passed) {
        tpc_test_dump_log(log);
        size_t n = strlen(why);
        snprintf(why + n, why_len - n, " (seed %llu)", (unsigned long long)seed);
    } else {
        printf("conformance %s: %zu runs, %zu killed in every phase, %zu of %llu records committed "
               "before the last run, %.1f s, seed %llu\n",
               c->name, nruns, nruns - 1, before_last, (unsigned long long)(2 * c->crash_records),
               tpc_test_now_s() - t0, (unsigned long long)seed);
        fflush(stdout);
    }
    unlink(log);
    tpc_test_rmdir(ckpt);
    free(ckpt);
    c->ns_free(ns);
    return passed;
}
