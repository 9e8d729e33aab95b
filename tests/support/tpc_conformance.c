/*
 * What the hand-driven checks of the connector conformance suite (tpc_conformance.h) are made of
 * (tpc_conformance_steps.h): comparing what is visible with what must be, the context of one
 * check, its steps, and crashes. A crash is a child process (fork) that drives subtasks, sends
 * their state entries to the parent and kills itself with SIGKILL: nothing is closed, connections
 * and producers die with it, as in a real crash. The parent then restores from those entries, as
 * the runtime would.
 */
#include "tpc_conformance_steps.h"

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

bool tpc_conf_fail(tpc_conf_ctx_t *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->why, x->why_len, fmt, ap);
    va_end(ap);
    return false;
}

/* @err of @step: false with its message and hint. */
bool tpc_conf_ok(tpc_conf_ctx_t *x, const char *step, tpc_error_t *err)
{
    if (!err)
        return true;
    const char *hint = tpc_error_hint_text(err);
    tpc_conf_fail(x, "%s: %s%s%s", step, tpc_error_message(err), hint ? " (hint: " : "",
                  hint ? hint : "");
    if (hint)
        strncat(x->why, ")", x->why_len - strlen(x->why) - 1);
    tpc_error_destroy(err);
    return false;
}

typedef tpc_error_t *(*sink_fn)(const char *ns, tpc_txn_sink_t **out);

static tpc_error_t *sink_new(sink_fn make, const char *ns, tpc_txn_sink_t **out)
{
    tpc_error_t *err = make(ns, out);
    /* Short pauses between commit retries: a check never waits for a slow server. */
    if (!err)
        err = tpc_txn_sink_set(*out, "commit.retry.backoff.ms", "5");
    return err;
}

bool tpc_conf_other_open(tpc_conf_ctx_t *x)
{
    if (!x->c->other_sink_new)
        return tpc_conf_fail(x, "the connector gives no other_sink_new");
    return tpc_conf_ok(x, "make the other sink", sink_new(x->c->other_sink_new, x->ns, &x->other));
}

bool tpc_conf_ctx_open(tpc_conf_ctx_t *x, const tpc_conformance_t *c, char *why, size_t why_len)
{
    memset(x, 0, sizeof *x);
    x->c = c;
    x->why = why;
    x->why_len = why_len;
    if (!c->ns_new(x->ns, sizeof x->ns, why, why_len))
        return false;
    x->ns_made = true;
    return tpc_conf_ok(x, "make the sink", sink_new(c->sink_new, x->ns, &x->sink));
}

void tpc_conf_sub_close(tpc_conf_ctx_t *x, tpc_test_txn_sub_t *s)
{
    for (int i = 0; i < TPC_CONF_MAX_SUBS; i++)
        if (x->open[i] == s)
            x->open[i] = NULL;
    tpc_test_txn_sub_close(s);
}

/* Close what is still open (a check that failed half way), free everything; @returns @passed. */
bool tpc_conf_ctx_close(tpc_conf_ctx_t *x, bool passed)
{
    for (int i = 0; i < TPC_CONF_MAX_SUBS; i++)
        if (x->open[i])
            tpc_conf_sub_close(x, x->open[i]);
    tpc_txn_sink_destroy(x->sink);
    tpc_txn_sink_destroy(x->other);
    if (x->ns_made)
        x->c->ns_free(x->ns);
    tpc_conformance_keys_free(&x->expect);
    return passed;
}

/* ---- steps ---------------------------------------------------------------------------------- */

/* Open subtask @subtask of @parallelism of @sink from @from and restore it with @n entries. */
bool tpc_conf_start_sink(tpc_conf_ctx_t *x, tpc_txn_sink_t *sink, tpc_test_txn_sub_t *s,
                         int subtask, int parallelism, const tpc_test_txn_origin_t *from,
                         const tpc__txn_bytes_t *entries, size_t n)
{
    char step[96];
    snprintf(step, sizeof step, "open subtask %d of %d", subtask, parallelism);
    if (!tpc_conf_ok(x, step, tpc_test_txn_sub_open_from(s, sink, subtask, parallelism, from)))
        return false;
    for (int i = 0; i < TPC_CONF_MAX_SUBS; i++)
        if (!x->open[i]) {
            x->open[i] = s;
            break;
        }
    snprintf(step, sizeof step, "restore subtask %d of %d from checkpoint %" PRIu64, subtask,
             parallelism, from ? from->restored : 0);
    return tpc_conf_ok(x, step, tpc__txn_task_initialize(s->task, entries, n));
}

bool tpc_conf_start(tpc_conf_ctx_t *x, tpc_test_txn_sub_t *s, int subtask, int parallelism,
                    const tpc_test_txn_origin_t *from, const tpc__txn_bytes_t *entries, size_t n)
{
    return tpc_conf_start_sink(x, x->sink, s, subtask, parallelism, from, entries, n);
}

bool tpc_conf_fresh(tpc_conf_ctx_t *x, tpc_test_txn_sub_t *s)
{
    return tpc_conf_start(x, s, 0, 1, NULL, NULL, 0);
}

/* Write records [first, first + n) of source subtask 0. */
bool tpc_conf_put(tpc_conf_ctx_t *x, tpc_test_txn_sub_t *s, uint64_t first, uint64_t n)
{
    for (uint64_t i = 0; i < n; i += 64)
        if (!tpc_conf_ok(x, "write", tpc_test_txn_sub_write(s, first + i, n - i < 64 ? n - i : 64)))
            return false;
    return true;
}

bool tpc_conf_snap(tpc_conf_ctx_t *x, tpc_test_txn_sub_t *s, uint64_t id,
                   tpc_test_txn_state_t *state)
{
    char step[64];
    snprintf(step, sizeof step, "snapshot of checkpoint %" PRIu64, id);
    return tpc_conf_ok(x, step, tpc_test_txn_sub_snapshot(s, id, state));
}

bool tpc_conf_notify(tpc_conf_ctx_t *x, tpc_test_txn_sub_t *s, uint64_t id)
{
    char step[64];
    snprintf(step, sizeof step, "notification of checkpoint %" PRIu64, id);
    return tpc_conf_ok(x, step, tpc__txn_task_complete(s->task, id));
}

bool tpc_conf_aborted(tpc_conf_ctx_t *x, tpc_test_txn_sub_t *s, uint64_t id)
{
    return tpc_conf_ok(x, "checkpoint aborted", tpc__txn_task_aborted(s->task, id));
}

/* From now on records [first, first + n) must be visible. */
bool tpc_conf_expect(tpc_conf_ctx_t *x, uint64_t first, uint64_t n)
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
bool tpc_conf_visible(tpc_conf_ctx_t *x, const char *when)
{
    tpc_conformance_keys_t got = {0};
    char why[1024] = "";
    bool passed = x->c->read(x->ns, &got, why, sizeof why) &&
                  tpc_conformance_compare(&got, &x->expect, why, sizeof why);
    tpc_conformance_keys_free(&got);
    return passed || tpc_conf_fail(x, "%s: %s", when, why);
}

/* Nothing is left open or prepared. */
bool tpc_conf_clean(tpc_conf_ctx_t *x, const char *when)
{
    long long n = -1;
    char why[512] = "";
    if (!x->c->leftovers(x->ns, &n, why, sizeof why))
        return tpc_conf_fail(x, "%s: %s", when, why);
    return n == 0 || tpc_conf_fail(x, "%s: %lld transactions are left open or prepared", when, n);
}

bool tpc_conf_footprint(tpc_conf_ctx_t *x, long long *out)
{
    char why[512] = "";
    return x->c->footprint(x->ns, out, why, sizeof why) || tpc_conf_fail(x, "footprint: %s", why);
}

bool tpc_conf_same_footprint(tpc_conf_ctx_t *x, long long before, const char *when)
{
    long long now;
    return tpc_conf_footprint(x, &now) &&
           (now == before ||
            tpc_conf_fail(x, "%s: the external system changed (footprint %lld, was %lld)", when,
                          now, before));
}

bool tpc_conf_close_sub(tpc_conf_ctx_t *x, tpc_test_txn_sub_t *s)
{
    tpc_conf_sub_close(x, s);
    return true;
}

void tpc_conf_stats(tpc_conf_ctx_t *x, tpc_txn_sink_stats_t *st)
{
    tpc_txn_sink_get_stats(x->sink, st);
}

/* ---- crashes -------------------------------------------------------------------------------- */

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
bool tpc_conf_crash_after(tpc_conf_ctx_t *x, tpc_conf_crash_fn fn, tpc_test_txn_state_t *states,
                          int nstates)
{
    int fds[2];
    if (pipe(fds) != 0)
        return tpc_conf_fail(x, "pipe failed");
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return tpc_conf_fail(x, "fork failed");
    if (pid == 0) {
        close(fds[0]);
        for (int i = 0; i < TPC_CONF_MAX_SUBS; i++)
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
        tpc_conf_fail(x, "before the crash: %s", msg);
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
        return tpc_conf_fail(x, "the crashing child said nothing (wait status %d)", status);
    if (tag == 'E')
        return false;
    if (!passed)
        return tpc_conf_fail(x, "the crashing child's states were cut short");
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
        return tpc_conf_fail(x, "the crashing child was not killed (wait status %d)", status);
    return true;
}

/* The entries of @states (one per old subtask) that subtask @subtask of @parallelism owns, as the
 * runtime hands them over after a parallelism change: old subtask i's go to i % parallelism. */
size_t tpc_conf_owned(const tpc_test_txn_state_t *states, int old_parallelism, int subtask,
                      int parallelism, tpc__txn_bytes_t *out, size_t cap)
{
    size_t n = 0;
    for (int i = 0; i < old_parallelism; i++)
        if (i % parallelism == subtask)
            for (size_t e = 0; e < states[i].count && n < cap; e++)
                out[n++] = states[i].entries[e];
    return n;
}

void tpc_conf_states_free(tpc_test_txn_state_t *states, int n)
{
    for (int i = 0; i < n; i++)
        tpc_test_txn_state_free(&states[i]);
}
