/*
 * The hand-driven checks of the connector conformance suite (tpc_conformance.h). Each check makes a
 * fresh namespace and sink, drives sink subtasks through one order of checkpoint events, and after
 * every step reads back what is visible and compares it with what must be, record by record.
 * A crash is a child process (fork) that drives subtasks, sends their state entries to the parent
 * and kills itself with SIGKILL: nothing is closed, connections and producers die with it, as in a
 * real crash. The parent then restores from those entries, as the runtime would.
 */
#include "tpc_conformance.h"
#include "tpc_test_txn_drive.h"

#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- records read back ---------------------------------------------------------------------- */

void tpc_conformance_keys_add(tpc_conformance_keys_t *keys, const void *bytes, size_t len)
{
    uint64_t k = UINT64_MAX;
    if (len == 8) {
        const unsigned char *p = bytes;
        k = tpc_txn_get_be(&p, 8);
    }
    if (keys->len == keys->cap) {
        size_t cap = keys->cap ? keys->cap * 2 : 256;
        uint64_t *n = realloc(keys->keys, cap * sizeof *n);
        if (!n)
            abort(); /* a test helper out of memory: nothing sensible to report */
        keys->keys = n;
        keys->cap = cap;
    }
    keys->keys[keys->len++] = k;
}

void tpc_conformance_keys_free(tpc_conformance_keys_t *keys)
{
    free(keys->keys);
    memset(keys, 0, sizeof *keys);
}

static int by_value(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void key_name(uint64_t k, char *buf, size_t cap)
{
    if (k == UINT64_MAX)
        snprintf(buf, cap, "a foreign record");
    else
        snprintf(buf, cap, "record %" PRIu64 " of source subtask %" PRIu64,
                 (uint64_t)(k & ((1ull << 40) - 1)), k >> 40);
}

bool tpc_conformance_compare(const tpc_conformance_keys_t *got, const tpc_conformance_keys_t *want,
                             char *why, size_t why_len)
{
    uint64_t *g = got->len ? malloc(got->len * sizeof *g) : NULL;
    uint64_t *w = want->len ? malloc(want->len * sizeof *w) : NULL;
    if ((got->len && !g) || (want->len && !w))
        abort();
    if (got->len)
        memcpy(g, got->keys, got->len * sizeof *g);
    if (want->len)
        memcpy(w, want->keys, want->len * sizeof *w);
    if (got->len)
        qsort(g, got->len, sizeof *g, by_value);
    if (want->len)
        qsort(w, want->len, sizeof *w, by_value);
    size_t i = 0, j = 0, missing = 0, extra = 0;
    char first[160] = "";
    while (i < got->len || j < want->len) {
        char name[96];
        if (j == want->len || (i < got->len && g[i] < w[j])) {
            key_name(g[i], name, sizeof name);
            bool twice = (i > 0 && g[i - 1] == g[i]) || (j > 0 && w[j - 1] == g[i]);
            if (!*first)
                snprintf(first, sizeof first, "%s is visible %s", name,
                         twice ? "twice" : "although it must not be (yet)");
            extra++;
            i++;
        } else if (i == got->len || w[j] < g[i]) {
            key_name(w[j], name, sizeof name);
            if (!*first)
                snprintf(first, sizeof first, "%s is missing", name);
            missing++;
            j++;
        } else {
            i++;
            j++;
        }
    }
    free(g);
    free(w);
    if (!missing && !extra)
        return true;
    snprintf(why, why_len, "%zu records visible, %zu expected: %zu missing, %zu too many; %s",
             got->len, want->len, missing, extra, first);
    return false;
}

/* ---- one check's context -------------------------------------------------------------------- */

#define MAX_SUBS 8

typedef struct {
    const tpc_conformance_t *c;
    char ns[TPC_CONFORMANCE_NS_MAX];
    bool ns_made;
    tpc_txn_sink_t *sink;
    char *why;
    size_t why_len;
    tpc_conformance_keys_t expect; /* must be visible, each once */
    tpc_test_txn_sub_t *open[MAX_SUBS];
    int crash_parallelism; /* for the crash function of the rescale checks */
} ctx_t;

static bool fail(ctx_t *x, const char *fmt, ...) TPC_PRINTF(2, 3);
static bool fail(ctx_t *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->why, x->why_len, fmt, ap);
    va_end(ap);
    return false;
}

/* @err of @step: false with its message and hint. */
static bool ok(ctx_t *x, const char *step, tpc_error_t *err)
{
    if (!err)
        return true;
    const char *hint = tpc_error_hint_text(err);
    fail(x, "%s: %s%s%s", step, tpc_error_message(err), hint ? " (hint: " : "", hint ? hint : "");
    if (hint)
        strncat(x->why, ")", x->why_len - strlen(x->why) - 1);
    tpc_error_destroy(err);
    return false;
}

static tpc_error_t *sink_new(const tpc_conformance_t *c, const char *ns, tpc_txn_sink_t **out)
{
    tpc_error_t *err = c->sink_new(ns, out);
    /* Short pauses between commit retries: a check never waits for a slow server. */
    if (!err)
        err = tpc_txn_sink_set(*out, "commit.retry.backoff.ms", "5");
    return err;
}

static bool ctx_open(ctx_t *x, const tpc_conformance_t *c, char *why, size_t why_len)
{
    memset(x, 0, sizeof *x);
    x->c = c;
    x->why = why;
    x->why_len = why_len;
    if (!c->ns_new(x->ns, sizeof x->ns, why, why_len))
        return false;
    x->ns_made = true;
    return ok(x, "make the sink", sink_new(c, x->ns, &x->sink));
}

static void sub_close(ctx_t *x, tpc_test_txn_sub_t *s)
{
    for (int i = 0; i < MAX_SUBS; i++)
        if (x->open[i] == s)
            x->open[i] = NULL;
    tpc_test_txn_sub_close(s);
}

/* Close what is still open (a check that failed half way), free everything; @returns @passed. */
static bool ctx_close(ctx_t *x, bool passed)
{
    for (int i = 0; i < MAX_SUBS; i++)
        if (x->open[i])
            sub_close(x, x->open[i]);
    tpc_txn_sink_destroy(x->sink);
    if (x->ns_made)
        x->c->ns_free(x->ns);
    tpc_conformance_keys_free(&x->expect);
    return passed;
}

/* ---- steps ---------------------------------------------------------------------------------- */

/* Open subtask @subtask of @parallelism from @from and restore it with @n entries. */
static bool start(ctx_t *x, tpc_test_txn_sub_t *s, int subtask, int parallelism,
                  const tpc_test_txn_origin_t *from, const tpc__txn_bytes_t *entries, size_t n)
{
    char step[96];
    snprintf(step, sizeof step, "open subtask %d of %d", subtask, parallelism);
    if (!ok(x, step, tpc_test_txn_sub_open_from(s, x->sink, subtask, parallelism, from)))
        return false;
    for (int i = 0; i < MAX_SUBS; i++)
        if (!x->open[i]) {
            x->open[i] = s;
            break;
        }
    snprintf(step, sizeof step, "restore subtask %d of %d from checkpoint %" PRIu64, subtask,
             parallelism, from ? from->restored : 0);
    return ok(x, step, tpc__txn_task_initialize(s->task, entries, n));
}

static bool fresh(ctx_t *x, tpc_test_txn_sub_t *s)
{
    return start(x, s, 0, 1, NULL, NULL, 0);
}

/* Write records [first, first + n) of source subtask 0. */
static bool put(ctx_t *x, tpc_test_txn_sub_t *s, uint64_t first, uint64_t n)
{
    for (uint64_t i = 0; i < n; i += 64)
        if (!ok(x, "write", tpc_test_txn_sub_write(s, first + i, n - i < 64 ? n - i : 64)))
            return false;
    return true;
}

static bool snap(ctx_t *x, tpc_test_txn_sub_t *s, uint64_t id, tpc_test_txn_state_t *state)
{
    char step[64];
    snprintf(step, sizeof step, "snapshot of checkpoint %" PRIu64, id);
    return ok(x, step, tpc_test_txn_sub_snapshot(s, id, state));
}

static bool notify(ctx_t *x, tpc_test_txn_sub_t *s, uint64_t id)
{
    char step[64];
    snprintf(step, sizeof step, "notification of checkpoint %" PRIu64, id);
    return ok(x, step, tpc__txn_task_complete(s->task, id));
}

static bool aborted(ctx_t *x, tpc_test_txn_sub_t *s, uint64_t id)
{
    return ok(x, "checkpoint aborted", tpc__txn_task_aborted(s->task, id));
}

/* From now on records [first, first + n) must be visible. */
static bool expect(ctx_t *x, uint64_t first, uint64_t n)
{
    unsigned char b[8], *p;
    for (uint64_t k = first; k < first + n; k++) {
        p = b;
        tpc_txn_put_be(&p, k, 8);
        tpc_conformance_keys_add(&x->expect, b, 8);
    }
    return true;
}

/* What a reader sees now is exactly what must be visible. */
static bool visible(ctx_t *x, const char *when)
{
    tpc_conformance_keys_t got = {0};
    char why[1024] = "";
    bool passed = x->c->read(x->ns, &got, why, sizeof why) &&
                  tpc_conformance_compare(&got, &x->expect, why, sizeof why);
    tpc_conformance_keys_free(&got);
    return passed || fail(x, "%s: %s", when, why);
}

/* Nothing is left open or prepared. */
static bool clean(ctx_t *x, const char *when)
{
    long long n = -1;
    char why[512] = "";
    if (!x->c->leftovers(x->ns, &n, why, sizeof why))
        return fail(x, "%s: %s", when, why);
    return n == 0 || fail(x, "%s: %lld transactions are left open or prepared", when, n);
}

static bool footprint(ctx_t *x, long long *out)
{
    char why[512] = "";
    return x->c->footprint(x->ns, out, why, sizeof why) || fail(x, "footprint: %s", why);
}

static bool same_footprint(ctx_t *x, long long before, const char *when)
{
    long long now;
    return footprint(x, &now) &&
           (now == before || fail(x, "%s: the external system changed (footprint %lld, was %lld)",
                                  when, now, before));
}

static bool close_sub(ctx_t *x, tpc_test_txn_sub_t *s)
{
    sub_close(x, s);
    return true;
}

static void stats(ctx_t *x, tpc_txn_sink_stats_t *st)
{
    tpc_txn_sink_get_stats(x->sink, st);
}

/* ---- crashes -------------------------------------------------------------------------------- */

typedef bool (*crash_fn)(ctx_t *x, tpc_test_txn_state_t *states);

static bool write_all(int fd, const void *p, size_t n)
{
    const char *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w <= 0)
            return false;
        b += w;
        n -= (size_t)w;
    }
    return true;
}

static bool read_all(int fd, void *p, size_t n)
{
    char *b = p;
    while (n) {
        ssize_t r = read(fd, b, n);
        if (r <= 0)
            return false;
        b += r;
        n -= (size_t)r;
    }
    return true;
}

/* Run @fn in a child process, which fills @nstates states (one per subtask it drives) and is
 * then killed with SIGKILL, closing nothing; the states come back into @states. */
static bool crash_after(ctx_t *x, crash_fn fn, tpc_test_txn_state_t *states, int nstates)
{
    int fds[2];
    if (pipe(fds) != 0)
        return fail(x, "pipe failed");
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return fail(x, "fork failed");
    if (pid == 0) {
        close(fds[0]);
        for (int i = 0; i < MAX_SUBS; i++)
            x->open[i] = NULL; /* the parent's subtasks are not this process's to close */
        bool passed = fn(x, states);
        char tag = passed ? 'S' : 'E';
        write_all(fds[1], &tag, 1);
        if (!passed) {
            uint32_t len = (uint32_t)strlen(x->why);
            write_all(fds[1], &len, 4);
            write_all(fds[1], x->why, len);
        }
        for (int s = 0; passed && s < nstates; s++) {
            uint32_t count = (uint32_t)states[s].count;
            write_all(fds[1], &count, 4);
            for (size_t i = 0; i < states[s].count; i++) {
                uint32_t len = (uint32_t)states[s].entries[i].len;
                write_all(fds[1], &len, 4);
                write_all(fds[1], states[s].entries[i].bytes, len);
            }
        }
        close(fds[1]);
        kill(getpid(), SIGKILL);
        _exit(99);
    }
    close(fds[1]);
    char tag = 0;
    bool got = read_all(fds[0], &tag, 1);
    bool passed = got && tag == 'S';
    if (got && tag == 'E') {
        uint32_t len = 0;
        char msg[1024] = "";
        if (read_all(fds[0], &len, 4) && len < sizeof msg)
            read_all(fds[0], msg, len);
        fail(x, "before the crash: %s", msg);
    }
    for (int s = 0; passed && s < nstates; s++) {
        uint32_t count = 0;
        passed = read_all(fds[0], &count, 4) && count <= TPC_TEST_TXN_MAX_ENTRIES;
        tpc_test_txn_state_free(&states[s]);
        for (uint32_t i = 0; passed && i < count; i++) {
            uint32_t len = 0;
            passed = read_all(fds[0], &len, 4);
            void *bytes = passed ? malloc(len ? len : 1) : NULL;
            passed = passed && bytes && read_all(fds[0], bytes, len);
            if (bytes)
                states[s].entries[states[s].count++] = (tpc__txn_bytes_t){bytes, len};
        }
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!got)
        return fail(x, "the crashing child said nothing (wait status %d)", status);
    if (tag == 'E')
        return false;
    if (!passed)
        return fail(x, "the crashing child's states were cut short");
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
        return fail(x, "the crashing child was not killed (wait status %d)", status);
    return true;
}

/* The entries of @states (one per old subtask) that subtask @subtask of @parallelism owns, as the
 * runtime hands them over after a parallelism change: old subtask i's go to i % parallelism. */
static size_t owned(const tpc_test_txn_state_t *states, int old_parallelism, int subtask,
                    int parallelism, tpc__txn_bytes_t *out, size_t cap)
{
    size_t n = 0;
    for (int i = 0; i < old_parallelism; i++)
        if (i % parallelism == subtask)
            for (size_t e = 0; e < states[i].count && n < cap; e++)
                out[n++] = states[i].entries[e];
    return n;
}

static void states_free(tpc_test_txn_state_t *states, int n)
{
    for (int i = 0; i < n; i++)
        tpc_test_txn_state_free(&states[i]);
}

/* ---- the checks ----------------------------------------------------------------------------- */

#define CHECK_BEGIN(c, why, len)                                                                   \
    ctx_t x_;                                                                                      \
    ctx_t *x = &x_;                                                                                \
    if (!ctx_open(x, (c), (why), (len)))                                                           \
        return ctx_close(x, false);

/* Visible only after the notification of the checkpoint that pre-committed it; close() drops
 * what was written since and leaves nothing behind. */
static bool check_checkpoint_then_notify(const tpc_conformance_t *c, char *why, size_t len)
{
    CHECK_BEGIN(c, why, len);
    tpc_test_txn_sub_t s;
    bool passed =
        fresh(x, &s) && put(x, &s, 0, 100) && visible(x, "written, no checkpoint yet") &&
        snap(x, &s, 1, NULL) && visible(x, "pre-committed in checkpoint 1") && notify(x, &s, 1) &&
        expect(x, 0, 100) && visible(x, "checkpoint 1 complete") && put(x, &s, 100, 50) &&
        snap(x, &s, 2, NULL) && notify(x, &s, 2) && expect(x, 100, 50) &&
        visible(x, "checkpoint 2 complete") && put(x, &s, 150, 30) && close_sub(x, &s) &&
        visible(x, "closed with records written after checkpoint 2") && clean(x, "after close");
    return ctx_close(x, passed);
}

/* A notification commits every pending transaction up to its checkpoint, and no later one. */
static bool check_partial_notification(const tpc_conformance_t *c, char *why, size_t len)
{
    CHECK_BEGIN(c, why, len);
    tpc_test_txn_sub_t s;
    bool passed = fresh(x, &s);
    for (uint64_t id = 1; passed && id <= 3; id++)
        passed = put(x, &s, id * 100, 40) && snap(x, &s, id, NULL);
    passed = passed && visible(x, "checkpoints 1 to 3 pre-committed") && notify(x, &s, 2) &&
             expect(x, 100, 40) && expect(x, 200, 40) &&
             visible(x, "notification of 2 with 3 pending") && notify(x, &s, 3) &&
             expect(x, 300, 40) && visible(x, "notification of 3") && close_sub(x, &s) &&
             clean(x, "after close");
    return ctx_close(x, passed);
}

/* A notification that subsumes earlier ones commits them all, once; the late ones change
 * nothing. */
static bool check_subsumed_notification(const tpc_conformance_t *c, char *why, size_t len)
{
    CHECK_BEGIN(c, why, len);
    tpc_test_txn_sub_t s;
    bool passed = fresh(x, &s);
    for (uint64_t id = 1; passed && id <= 3; id++)
        passed = put(x, &s, id * 100, 40) && snap(x, &s, id, NULL);
    passed = passed && notify(x, &s, 3) && expect(x, 100, 40) && expect(x, 200, 40) &&
             expect(x, 300, 40) && visible(x, "notification of 3 only") && notify(x, &s, 1) &&
             notify(x, &s, 2) && notify(x, &s, 3) && visible(x, "late notifications of 1, 2, 3") &&
             close_sub(x, &s) && clean(x, "after close");
    return ctx_close(x, passed);
}

/* A notification of a checkpoint this subtask never snapshotted, of one older than anything
 * pending, and an aborted checkpoint change nothing; the transaction of the aborted checkpoint
 * is committed by the next one that completes. */
static bool check_unknown_and_aborted_checkpoints(const tpc_conformance_t *c, char *why, size_t len)
{
    CHECK_BEGIN(c, why, len);
    tpc_test_txn_sub_t s;
    bool passed = fresh(x, &s) && put(x, &s, 0, 50) && notify(x, &s, 1) &&
                  visible(x, "notification of checkpoint 1, never snapshotted") &&
                  snap(x, &s, 2, NULL) && notify(x, &s, 2) && expect(x, 0, 50) &&
                  visible(x, "checkpoint 2 complete") && put(x, &s, 50, 50) &&
                  snap(x, &s, 3, NULL) && aborted(x, &s, 3) && notify(x, &s, 2) &&
                  visible(x, "checkpoint 3 aborted, notification of 2 again") &&
                  put(x, &s, 100, 50) && snap(x, &s, 4, NULL) && notify(x, &s, 4) &&
                  expect(x, 50, 100) && visible(x, "checkpoint 4 complete after 3 aborted") &&
                  close_sub(x, &s) && clean(x, "after close");
    return ctx_close(x, passed);
}

/* After finish() no transaction is begun; the final checkpoint commits the last one, also when
 * the first checkpoint after finish() aborts. */
static bool check_finish_then_final_checkpoint(const tpc_conformance_t *c, char *why, size_t len)
{
    CHECK_BEGIN(c, why, len);
    tpc_test_txn_sub_t s;
    tpc_test_txn_state_t st2 = {.count = 0}, st4 = {.count = 0};
    tpc_txn_sink_stats_t before, after;
    bool passed = fresh(x, &s) && put(x, &s, 0, 60) && snap(x, &s, 1, NULL) && notify(x, &s, 1) &&
                  expect(x, 0, 60) && put(x, &s, 60, 60) &&
                  ok(x, "finish", tpc__txn_task_finish(s.task)) &&
                  visible(x, "finished before the final checkpoint");
    stats(x, &before);
    passed = passed && snap(x, &s, 2, &st2) && aborted(x, &s, 2) &&
             visible(x, "first checkpoint after finish aborted") && snap(x, &s, 3, NULL) &&
             notify(x, &s, 3) && expect(x, 60, 60) && visible(x, "final checkpoint complete") &&
             snap(x, &s, 4, &st4) && notify(x, &s, 4) && visible(x, "a checkpoint after the end");
    stats(x, &after);
    if (passed && after.begun != before.begun)
        passed = fail(x, "%" PRIu64 " transactions begun after finish()",
                      (uint64_t)(after.begun - before.begun));
    if (passed && (st2.count != 1 || st4.count != 0))
        passed = fail(x,
                      "a finished subtask's state holds %zu entries at the final checkpoint "
                      "(1 expected: the last transaction, no new one) and %zu after it (0 "
                      "expected)",
                      st2.count, st4.count);
    passed = passed && close_sub(x, &s) && visible(x, "after close") && clean(x, "after close");
    tpc_test_txn_state_free(&st2);
    tpc_test_txn_state_free(&st4);
    return ctx_close(x, passed);
}

/* Empty transactions cost nothing: no pre-commit, no commit, nothing in the external system, at
 * a checkpoint, after finish() and at close. */
static bool check_empty_checkpoints(const tpc_conformance_t *c, char *why, size_t len)
{
    CHECK_BEGIN(c, why, len);
    tpc_test_txn_sub_t s;
    long long f0 = 0, f1 = 0;
    tpc_txn_sink_stats_t st;
    bool passed = fresh(x, &s) && footprint(x, &f0) && snap(x, &s, 1, NULL) && notify(x, &s, 1) &&
                  snap(x, &s, 2, NULL) && notify(x, &s, 2) &&
                  same_footprint(x, f0, "two empty checkpoints") &&
                  visible(x, "two empty checkpoints");
    stats(x, &st);
    if (passed && (st.pre_commits || st.commits || st.empty_skipped != 2))
        passed = fail(x,
                      "two empty checkpoints made %" PRIu64 " pre-commits and %" PRIu64
                      " commits, skipped %" PRIu64 " (0, 0, 2 expected)",
                      (uint64_t)st.pre_commits, (uint64_t)st.commits, (uint64_t)st.empty_skipped);
    passed = passed && put(x, &s, 0, 30) && snap(x, &s, 3, NULL) && notify(x, &s, 3) &&
             expect(x, 0, 30) && visible(x, "checkpoint 3 complete") && footprint(x, &f1) &&
             snap(x, &s, 4, NULL) && notify(x, &s, 4) &&
             ok(x, "finish", tpc__txn_task_finish(s.task)) && snap(x, &s, 5, NULL) &&
             notify(x, &s, 5) && close_sub(x, &s) &&
             same_footprint(x, f1, "empty checkpoints, finish and close") &&
             visible(x, "after close") && clean(x, "after close");
    return ctx_close(x, passed);
}

/* close() aborts the current transaction and never touches a pending one, which a restore from
 * its checkpoint commits. */
static bool check_close_keeps_pending(const tpc_conformance_t *c, char *why, size_t len)
{
    CHECK_BEGIN(c, why, len);
    tpc_test_txn_sub_t s;
    tpc_test_txn_state_t st = {.count = 0};
    tpc_test_txn_origin_t from = {.restored = 1, .first_checkpoint = 2};
    bool passed =
        fresh(x, &s) && put(x, &s, 0, 40) && snap(x, &s, 1, &st) && put(x, &s, 40, 40) &&
        close_sub(x, &s) && visible(x, "closed before the notification of checkpoint 1") &&
        start(x, &s, 0, 1, &from, st.entries, st.count) && expect(x, 0, 40) &&
        visible(x, "restored from checkpoint 1") && clean(x, "after recovery") && close_sub(x, &s);
    tpc_test_txn_state_free(&st);
    return ctx_close(x, passed);
}

static bool write_and_snapshot_1(ctx_t *x, tpc_test_txn_state_t *states)
{
    tpc_test_txn_sub_t s;
    return fresh(x, &s) && put(x, &s, 0, 70) && snap(x, &s, 1, &states[0]) && put(x, &s, 70, 20);
}

/* Killed after checkpoint 1 completed and before its notification: the restore commits the
 * pending transaction, and a second restore from the same checkpoint commits nothing twice. */
static bool check_recovery_commits_pending(const tpc_conformance_t *c, char *why, size_t len)
{
    CHECK_BEGIN(c, why, len);
    tpc_test_txn_sub_t s;
    tpc_test_txn_state_t st = {.count = 0};
    tpc_test_txn_origin_t from = {.restored = 1, .first_checkpoint = 2};
    bool passed = crash_after(x, write_and_snapshot_1, &st, 1) &&
                  visible(x, "killed before the notification") &&
                  start(x, &s, 0, 1, &from, st.entries, st.count) && expect(x, 0, 70) &&
                  visible(x, "restored from checkpoint 1") && clean(x, "after recovery") &&
                  close_sub(x, &s) && start(x, &s, 0, 1, &from, st.entries, st.count) &&
                  visible(x, "restored from checkpoint 1 again") && put(x, &s, 100, 10) &&
                  snap(x, &s, 2, NULL) && notify(x, &s, 2) && expect(x, 100, 10) &&
                  visible(x, "checkpoint 2 complete after recovery") && close_sub(x, &s) &&
                  clean(x, "after close");
    tpc_test_txn_state_free(&st);
    return ctx_close(x, passed);
}

static bool commit_and_crash(ctx_t *x, tpc_test_txn_state_t *states)
{
    tpc_test_txn_sub_t s;
    return fresh(x, &s) && put(x, &s, 0, 70) && snap(x, &s, 1, &states[0]) && notify(x, &s, 1) &&
           put(x, &s, 70, 20);
}

/* Recovery commit is idempotent: killed after the notification of checkpoint 1 committed it,
 * restored from checkpoint 1 (the newest) twice, and recover_and_commit called twice more on the
 * same restored handle: the records are visible once. */
static bool check_recovery_commit_idempotent(const tpc_conformance_t *c, char *why, size_t len)
{
    CHECK_BEGIN(c, why, len);
    tpc_test_txn_sub_t s;
    tpc_test_txn_state_t st = {.count = 0};
    tpc_test_txn_origin_t from = {.restored = 1, .first_checkpoint = 2};
    tpc__txn_entry_t e = {0};
    void *txn = NULL;
    bool passed = crash_after(x, commit_and_crash, &st, 1) && expect(x, 0, 70) &&
                  visible(x, "committed, then killed") &&
                  start(x, &s, 0, 1, &from, st.entries, st.count) &&
                  visible(x, "restored from checkpoint 1") && close_sub(x, &s) &&
                  start(x, &s, 0, 1, &from, st.entries, st.count) &&
                  visible(x, "restored from checkpoint 1 again");
    for (size_t i = 0; passed && i < st.count; i++) {
        passed = ok(x, "decode a state entry",
                    tpc__txn_entry_decode(st.entries[i].bytes, st.entries[i].len, &e));
        if (!passed || e.kind != TPC__TXN_PENDING)
            continue;
        const tpc_txn_connector_ops_t *ops = s.task->ops;
        passed =
            ok(x, "deserialize", ops->deserialize(s.task->conn, e.handle, e.handle_len, &txn)) &&
            ok(x, "recover_and_commit of a committed handle",
               ops->recover_and_commit(s.task->conn, txn)) &&
            ok(x, "recover_and_commit of it again", ops->recover_and_commit(s.task->conn, txn));
        ops->free_txn(s.task->conn, txn);
    }
    passed = passed && visible(x, "recover_and_commit twice more") && put(x, &s, 100, 10) &&
             snap(x, &s, 2, NULL) && notify(x, &s, 2) && expect(x, 100, 10) &&
             visible(x, "checkpoint 2 complete") && close_sub(x, &s) && clean(x, "after close");
    tpc_test_txn_state_free(&st);
    return ctx_close(x, passed);
}

static bool leave_lingering(ctx_t *x, tpc_test_txn_state_t *states)
{
    tpc_test_txn_sub_t s;
    return fresh(x, &s) && put(x, &s, 0, 50) && snap(x, &s, 1, &states[0]) && notify(x, &s, 1) &&
           put(x, &s, 50, 50) && snap(x, &s, 2, NULL) && put(x, &s, 100, 50);
}

/* Killed with a transaction pre-committed in checkpoint 2, which never completed, and one open:
 * restored from checkpoint 1, both are gone, nothing is left open and nothing blocks what comes
 * after. */
static bool check_lingering_cleanup(const tpc_conformance_t *c, char *why, size_t len)
{
    CHECK_BEGIN(c, why, len);
    tpc_test_txn_sub_t s;
    tpc_test_txn_state_t st = {.count = 0};
    tpc_test_txn_origin_t from = {.restored = 1, .first_checkpoint = 3};
    bool passed = crash_after(x, leave_lingering, &st, 1) && expect(x, 0, 50) &&
                  visible(x, "killed with checkpoint 2 pending and a transaction open") &&
                  start(x, &s, 0, 1, &from, st.entries, st.count) &&
                  visible(x, "restored from checkpoint 1") && clean(x, "after recovery") &&
                  put(x, &s, 200, 50) && snap(x, &s, 3, NULL) && notify(x, &s, 3) &&
                  expect(x, 200, 50) && visible(x, "checkpoint 3 complete after recovery") &&
                  close_sub(x, &s) && clean(x, "after close");
    tpc_test_txn_state_free(&st);
    return ctx_close(x, passed);
}

static bool never_complete(ctx_t *x, tpc_test_txn_state_t *states)
{
    (void)states;
    tpc_test_txn_sub_t s;
    return fresh(x, &s) && put(x, &s, 0, 50) && snap(x, &s, 1, NULL) && put(x, &s, 50, 50);
}

/* Killed before any checkpoint completed, with one transaction pre-committed and one open: a
 * start without state cleans up both. */
static bool check_lingering_cleanup_fresh_start(const tpc_conformance_t *c, char *why, size_t len)
{
    CHECK_BEGIN(c, why, len);
    tpc_test_txn_sub_t s;
    tpc_test_txn_state_t none = {.count = 0};
    tpc_test_txn_origin_t from = {.first_checkpoint = 2};
    bool passed = crash_after(x, never_complete, &none, 0) &&
                  visible(x, "killed before any checkpoint completed") &&
                  start(x, &s, 0, 1, &from, NULL, 0) && visible(x, "started without state") &&
                  clean(x, "after the start") && put(x, &s, 200, 50) && snap(x, &s, 2, NULL) &&
                  notify(x, &s, 2) && expect(x, 200, 50) && visible(x, "checkpoint 2 complete") &&
                  close_sub(x, &s) && clean(x, "after close");
    return ctx_close(x, passed);
}

/* Rescale: old subtask i writes records [i * 1000, +40) pre-committed in checkpoint 1, which
 * completes (subtask 0 alone gets the notification), [i * 1000 + 500, +20) pre-committed in
 * checkpoint 2, which does not, and [i * 1000 + 700, +20) into its open transaction. */
#define RESCALE_MAX 4

static bool rescale_crash(ctx_t *x, tpc_test_txn_state_t *states)
{
    tpc_test_txn_sub_t s[RESCALE_MAX];
    bool passed = true;
    int from = x->crash_parallelism;
    for (int i = 0; passed && i < from; i++)
        passed = start(x, &s[i], i, from, NULL, NULL, 0);
    for (int i = 0; passed && i < from; i++)
        passed = put(x, &s[i], (uint64_t)i * 1000, 40) && snap(x, &s[i], 1, &states[i]);
    passed = passed && notify(x, &s[0], 1);
    for (int i = 0; passed && i < from; i++)
        passed = put(x, &s[i], (uint64_t)i * 1000 + 500, 20) && snap(x, &s[i], 2, NULL) &&
                 put(x, &s[i], (uint64_t)i * 1000 + 700, 20);
    return passed;
}

/* Restored at another parallelism, each old subtask's transactions are recovered by its new
 * owner: pending ones committed once, open ones dropped, whatever the order in which the new
 * subtasks start (subtask 0 cleans up before the others recover). */
static bool rescale(const tpc_conformance_t *c, char *why, size_t len, int from_p, int to_p)
{
    CHECK_BEGIN(c, why, len);
    tpc_test_txn_state_t st[RESCALE_MAX] = {{.count = 0}};
    tpc_test_txn_sub_t s[RESCALE_MAX];
    tpc__txn_bytes_t entries[TPC_TEST_TXN_MAX_ENTRIES];
    int high = from_p > to_p ? from_p : to_p;
    tpc_test_txn_origin_t from = {.restored = 1,
                                  .restored_parallelism = from_p,
                                  .highest_parallelism = high,
                                  .first_checkpoint = 3};
    char when[96];
    snprintf(when, sizeof when, "restored at parallelism %d from %d", to_p, from_p);
    x->crash_parallelism = from_p;
    bool passed = crash_after(x, rescale_crash, st, from_p);
    expect(x, 0, 40);
    passed = passed && visible(x, "killed after checkpoint 1 completed, subtask 0 committed");
    for (int j = 0; passed && j < to_p; j++) {
        size_t n = owned(st, from_p, j, to_p, entries, TPC_TEST_TXN_MAX_ENTRIES);
        passed = start(x, &s[j], j, to_p, &from, entries, n);
    }
    for (int i = 1; i < from_p; i++)
        expect(x, (uint64_t)i * 1000, 40);
    passed = passed && visible(x, when) && clean(x, when);
    for (int j = 0; passed && j < to_p; j++)
        passed = put(x, &s[j], 10000 + (uint64_t)j * 100, 30) && snap(x, &s[j], 2, NULL);
    for (int j = 0; passed && j < to_p; j++)
        passed = notify(x, &s[j], 2) && expect(x, 10000 + (uint64_t)j * 100, 30);
    passed = passed && visible(x, "checkpoint 2 complete after the rescale");
    for (int j = 0; passed && j < to_p; j++)
        close_sub(x, &s[j]);
    passed = passed && clean(x, "after close");
    states_free(st, RESCALE_MAX);
    return ctx_close(x, passed);
}

static bool check_rescale_down(const tpc_conformance_t *c, char *why, size_t len)
{
    return rescale(c, why, len, 3, 2);
}

static bool check_rescale_up(const tpc_conformance_t *c, char *why, size_t len)
{
    return rescale(c, why, len, 2, 3);
}

const tpc_conformance_check_t tpc_conformance_checks[] = {
    {"checkpoint_then_notify", "visible after the notification, not before; close drops the rest",
     check_checkpoint_then_notify},
    {"partial_notification", "a notification commits up to its checkpoint, no later one",
     check_partial_notification},
    {"subsumed_notification",
     "a later notification commits earlier ones once; late ones are no-ops",
     check_subsumed_notification},
    {"unknown_and_aborted_checkpoints",
     "notifications without a snapshot change nothing; an aborted checkpoint's transaction waits",
     check_unknown_and_aborted_checkpoints},
    {"finish_then_final_checkpoint", "nothing begun after finish(); the final checkpoint commits",
     check_finish_then_final_checkpoint},
    {"empty_checkpoints", "empty transactions cost nothing and leave nothing",
     check_empty_checkpoints},
    {"close_keeps_pending", "close() aborts the open transaction, never a pending one",
     check_close_keeps_pending},
    {"recovery_commits_pending", "a restore commits what its checkpoint holds, once",
     check_recovery_commits_pending},
    {"recovery_commit_idempotent", "committing a restored handle again changes nothing",
     check_recovery_commit_idempotent},
    {"lingering_cleanup", "transactions of no completed checkpoint are dropped on restore",
     check_lingering_cleanup},
    {"lingering_cleanup_fresh_start", "a start without state drops what a killed run left",
     check_lingering_cleanup_fresh_start},
    {"rescale_down", "parallelism 3 -> 2: each transaction recovered once by its new owner",
     check_rescale_down},
    {"rescale_up", "parallelism 2 -> 3: each transaction recovered once by its new owner",
     check_rescale_up},
    {"kill_9_at_every_phase", "jobs killed in every phase of a transaction: nothing lost or twice",
     tpc_conformance_kill_9},
};
const size_t tpc_conformance_check_count =
    sizeof tpc_conformance_checks / sizeof tpc_conformance_checks[0];
