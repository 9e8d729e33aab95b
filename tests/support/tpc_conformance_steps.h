/*
 * Private to the conformance suite (tpc_conformance.c, tpc_conformance_checks.c): the context of
 * one check and the steps the checks are written in. Each step returns true, or false with the
 * reason in the context (x->why), so that a check is one chain of steps joined by &&; the first
 * step that fails says what went wrong and where.
 */
#ifndef TPC_CONFORMANCE_STEPS_H
#define TPC_CONFORMANCE_STEPS_H

#include "tpc_conformance.h"
#include "tpc_test_txn_drive.h"

#define TPC_CONF_MAX_SUBS 8

/* One check: its namespace and sinks, what must be visible, the subtasks still open. */
typedef struct {
    const tpc_conformance_t *c;
    char ns[TPC_CONFORMANCE_NS_MAX];
    bool ns_made;
    tpc_txn_sink_t *sink, *other;
    char *why;
    size_t why_len;
    tpc_conformance_keys_t expect; /* must be visible, each once */
    tpc_test_txn_sub_t *open[TPC_CONF_MAX_SUBS];
    int crash_parallelism; /* for the crash function of the rescale checks */
} tpc_conf_ctx_t;

/* Make the namespace and the sink (false: the reason is in @why). */
bool tpc_conf_ctx_open(tpc_conf_ctx_t *x, const tpc_conformance_t *c, char *why, size_t why_len);
/* Close what is still open (a check that failed half way), free everything; @returns @passed. */
bool tpc_conf_ctx_close(tpc_conf_ctx_t *x, bool passed);

/* The first lines of every check: the context x, or return false. */
#define TPC_CONF_CHECK_BEGIN(c, why, len)                                                          \
    tpc_conf_ctx_t x_;                                                                             \
    tpc_conf_ctx_t *x = &x_;                                                                       \
    if (!tpc_conf_ctx_open(x, (c), (why), (len)))                                                  \
        return tpc_conf_ctx_close(x, false);

/* false with the reason, printf-style. */
bool tpc_conf_fail(tpc_conf_ctx_t *x, const char *fmt, ...) TPC_PRINTF(2, 3);
/* @err of @step: true for NULL, else false with its message and hint. */
bool tpc_conf_ok(tpc_conf_ctx_t *x, const char *step, tpc_error_t *err);
/* Make the other sink of the namespace (tpc_conformance_t.other_sink_new) into x->other. */
bool tpc_conf_other_open(tpc_conf_ctx_t *x);

/* Open subtask @subtask of @parallelism of @sink from @from (NULL: a first start) and restore it
 * with @n state entries. */
bool tpc_conf_start_sink(tpc_conf_ctx_t *x, tpc_txn_sink_t *sink, tpc_test_txn_sub_t *s,
                         int subtask, int parallelism, const tpc_test_txn_origin_t *from,
                         const tpc__txn_bytes_t *entries, size_t n);
/* The same for x->sink. */
bool tpc_conf_start(tpc_conf_ctx_t *x, tpc_test_txn_sub_t *s, int subtask, int parallelism,
                    const tpc_test_txn_origin_t *from, const tpc__txn_bytes_t *entries, size_t n);
/* Subtask 0 of 1 of x->sink, first start. */
bool tpc_conf_fresh(tpc_conf_ctx_t *x, tpc_test_txn_sub_t *s);
/* Write records [first, first + n) of source subtask 0. */
bool tpc_conf_put(tpc_conf_ctx_t *x, tpc_test_txn_sub_t *s, uint64_t first, uint64_t n);
/* Snapshot of checkpoint @id, its state entries into @state (may be NULL). */
bool tpc_conf_snap(tpc_conf_ctx_t *x, tpc_test_txn_sub_t *s, uint64_t id,
                   tpc_test_txn_state_t *state);
bool tpc_conf_notify(tpc_conf_ctx_t *x, tpc_test_txn_sub_t *s, uint64_t id);
bool tpc_conf_aborted(tpc_conf_ctx_t *x, tpc_test_txn_sub_t *s, uint64_t id);
bool tpc_conf_close_sub(tpc_conf_ctx_t *x, tpc_test_txn_sub_t *s);
void tpc_conf_stats(tpc_conf_ctx_t *x, tpc_txn_sink_stats_t *st);

/* From now on records [first, first + n) must be visible. */
bool tpc_conf_expect(tpc_conf_ctx_t *x, uint64_t first, uint64_t n);
/* What a reader sees now is exactly what must be visible; @when names the moment. */
bool tpc_conf_visible(tpc_conf_ctx_t *x, const char *when);
/* Nothing of the sink is left open or prepared. */
bool tpc_conf_clean(tpc_conf_ctx_t *x, const char *when);
bool tpc_conf_footprint(tpc_conf_ctx_t *x, long long *out);
/* The footprint is still @before. */
bool tpc_conf_same_footprint(tpc_conf_ctx_t *x, long long before, const char *when);

/* What a crashing child does before it is killed: drive subtasks, fill one state per subtask. */
typedef bool (*tpc_conf_crash_fn)(tpc_conf_ctx_t *x, tpc_test_txn_state_t *states);
/* Run @fn in a child process, which fills @nstates states and is then killed with SIGKILL,
 * closing nothing; the states come back into @states. */
bool tpc_conf_crash_after(tpc_conf_ctx_t *x, tpc_conf_crash_fn fn, tpc_test_txn_state_t *states,
                          int nstates);
/* The entries of @states (one per old subtask) that subtask @subtask of @parallelism owns, as the
 * runtime hands them over after a parallelism change: old subtask i's go to i % parallelism. */
size_t tpc_conf_owned(const tpc_test_txn_state_t *states, int old_parallelism, int subtask,
                      int parallelism, tpc__txn_bytes_t *out, size_t cap);
void tpc_conf_states_free(tpc_test_txn_state_t *states, int n);

#endif
