/*
 * The recording connector of tpc_test_txn_conn.h. Every call takes the recorder's mutex, so the
 * trace is one total order over all subtasks; injected delays sleep outside it.
 */
#include "tpc_test_txn_conn.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    tpc_test_txn_rec_t *rec;
    const tpc_txn_subtask_t *st;
} conn_t;

typedef struct {
    uint64_t id;
} handle_t;

static const char *const op_words[TPC_TEST_TXN_NOPS] = {
    "open",  "begin",          "write",         "flush",     "pre_commit", "commit",
    "abort", "recover_commit", "recover_abort", "lingering", "close",
};

void tpc_test_txn_rec_init(tpc_test_txn_rec_t *r, uint64_t max_seq)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    r->max_seq = max_seq;
    r->visible = calloc(16 * (max_seq ? max_seq : 1), 1);
}

void tpc_test_txn_rec_free(tpc_test_txn_rec_t *r)
{
    for (size_t i = 0; i < r->ntxns; i++)
        free(r->txns[i].keys);
    free(r->txns);
    free(r->events);
    free(r->visible);
    pthread_mutex_destroy(&r->mu);
}

void tpc_test_txn_fail(tpc_test_txn_rec_t *r, tpc_test_txn_op_t op, int from_call, int times,
                       bool retriable)
{
    r->inject[op].from_call = from_call;
    r->inject[op].times = times;
    r->inject[op].retriable = retriable;
    r->inject[op].delay_ms = 0;
}

void tpc_test_txn_delay(tpc_test_txn_rec_t *r, tpc_test_txn_op_t op, int call, int ms)
{
    r->inject[op].from_call = call;
    r->inject[op].times = 1;
    r->inject[op].delay_ms = ms;
}

void tpc_test_txn_expire(tpc_test_txn_rec_t *r, uint64_t id)
{
    pthread_mutex_lock(&r->mu);
    if (id && id <= r->ntxns)
        r->txns[id - 1].expired = true;
    pthread_mutex_unlock(&r->mu);
}

static void violation(tpc_test_txn_rec_t *r, const char *fmt, ...)
{
    if (r->violations++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->first_violation, sizeof r->first_violation, fmt, ap);
        va_end(ap);
    }
}

/* Record the call (mutex held) and say whether it must fail or sleep. */
static void record(tpc_test_txn_rec_t *r, tpc_test_txn_op_t op, int subtask, uint64_t txn,
                   uint64_t ckpt, bool *fail, bool *retriable, int *delay_ms)
{
    int k = ++r->calls[op];
    *fail = false;
    *delay_ms = 0;
    int from = r->inject[op].from_call;
    if (op == TPC_TEST_TXN_FLUSH)
        r->flushed = true;
    if (op == TPC_TEST_TXN_PRE_COMMIT && r->flushed && r->slow_final_pre_commit_ms) {
        *delay_ms = r->slow_final_pre_commit_ms;
        r->slow_final_pre_commit_ms = 0;
    }
    if (from && k >= from && k < from + r->inject[op].times) {
        if (r->inject[op].delay_ms)
            *delay_ms = r->inject[op].delay_ms;
        else
            *fail = true;
        *retriable = r->inject[op].retriable;
    }
    if (r->nevents == r->events_cap) {
        r->events_cap = r->events_cap ? r->events_cap * 2 : 256;
        r->events = realloc(r->events, r->events_cap * sizeof *r->events);
    }
    r->events[r->nevents++] = (tpc_test_txn_event_t){op, subtask, txn, ckpt};
}

static tpc_error_t *enter(conn_t *c, tpc_test_txn_op_t op, uint64_t txn, uint64_t ckpt)
{
    bool fail, retriable = false;
    int delay_ms;
    record(c->rec, op, c->st ? c->st->subtask : -1, txn, ckpt, &fail, &retriable, &delay_ms);
    if (delay_ms) {
        pthread_mutex_unlock(&c->rec->mu);
        struct timespec ts = {delay_ms / 1000, (long)(delay_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&c->rec->mu);
    }
    if (!fail)
        return NULL;
    /* Not fatal: an injected failure stands for an external system that fails for a while. */
    return tpc_error_new(TPC_ERR_EXTERNAL, retriable ? TPC_ERROR_RETRIABLE : 0,
                         "injected failure in %s", op_words[op]);
}

static tpc_test_txn_t *txn_of(tpc_test_txn_rec_t *r, const void *h)
{
    return &r->txns[((const handle_t *)h)->id - 1];
}

static tpc_error_t *rec_open(void *arg, const tpc_txn_subtask_t *st, void **out)
{
    conn_t *c = calloc(1, sizeof *c);
    c->rec = arg;
    c->st = st;
    pthread_mutex_lock(&c->rec->mu);
    tpc_error_t *err = enter(c, TPC_TEST_TXN_OPEN, 0, 0);
    pthread_mutex_unlock(&c->rec->mu);
    if (err) {
        free(c);
        return err;
    }
    *out = c;
    return NULL;
}

static void rec_close(void *conn)
{
    conn_t *c = conn;
    pthread_mutex_lock(&c->rec->mu);
    tpc_error_t *err = enter(c, TPC_TEST_TXN_CLOSE, 0, 0);
    pthread_mutex_unlock(&c->rec->mu);
    tpc_error_destroy(err);
    free(c);
}

static tpc_error_t *rec_begin(void *conn, uint64_t ckpt, void **out)
{
    conn_t *c = conn;
    tpc_test_txn_rec_t *r = c->rec;
    pthread_mutex_lock(&r->mu);
    uint64_t id = r->ntxns + 1;
    tpc_error_t *err = enter(c, TPC_TEST_TXN_BEGIN, id, ckpt);
    if (!err) {
        if (r->ntxns == r->txns_cap) {
            r->txns_cap = r->txns_cap ? r->txns_cap * 2 : 64;
            r->txns = realloc(r->txns, r->txns_cap * sizeof *r->txns);
        }
        r->txns[r->ntxns++] = (tpc_test_txn_t){.subtask = c->st->subtask, .begin_ckpt = ckpt};
        handle_t *h = malloc(sizeof *h);
        h->id = id;
        *out = h;
    }
    pthread_mutex_unlock(&r->mu);
    return err;
}

static bool is_open(const tpc_test_txn_t *t)
{
    return !t->ckpt && !t->committed && !t->aborted;
}

static tpc_error_t *rec_write(void *conn, void *txn, const tpc_record_t *recs, size_t n)
{
    conn_t *c = conn;
    tpc_test_txn_rec_t *r = c->rec;
    pthread_mutex_lock(&r->mu);
    uint64_t id = ((handle_t *)txn)->id;
    tpc_error_t *err = enter(c, TPC_TEST_TXN_WRITE, id, 0);
    tpc_test_txn_t *t = txn_of(r, txn);
    if (!err && !is_open(t))
        violation(r, "write into transaction %" PRIu64 " that is no longer open", id);
    for (size_t i = 0; !err && i < n; i++) {
        uint64_t key = UINT64_MAX;
        if (recs[i].key_len == 8) {
            const unsigned char *p = recs[i].key;
            key = 0;
            for (int b = 0; b < 8; b++)
                key = key << 8 | p[b];
        }
        if (t->nkeys == t->cap) {
            t->cap = t->cap ? t->cap * 2 : 64;
            t->keys = realloc(t->keys, t->cap * sizeof *t->keys);
        }
        t->keys[t->nkeys++] = key;
    }
    pthread_mutex_unlock(&r->mu);
    return err;
}

static tpc_error_t *rec_flush(void *conn, void *txn)
{
    conn_t *c = conn;
    pthread_mutex_lock(&c->rec->mu);
    tpc_error_t *err = enter(c, TPC_TEST_TXN_FLUSH, ((handle_t *)txn)->id, 0);
    pthread_mutex_unlock(&c->rec->mu);
    return err;
}

static tpc_error_t *rec_pre_commit(void *conn, void *txn, uint64_t ckpt)
{
    conn_t *c = conn;
    tpc_test_txn_rec_t *r = c->rec;
    pthread_mutex_lock(&r->mu);
    uint64_t id = ((handle_t *)txn)->id;
    tpc_error_t *err = enter(c, TPC_TEST_TXN_PRE_COMMIT, id, ckpt);
    tpc_test_txn_t *t = txn_of(r, txn);
    if (!err) {
        if (!is_open(t))
            violation(r, "pre_commit of transaction %" PRIu64 " that is not open", id);
        if (!t->nkeys)
            violation(r, "pre_commit of empty transaction %" PRIu64, id);
        t->ckpt = ckpt;
    }
    pthread_mutex_unlock(&r->mu);
    return err;
}

static void make_visible(tpc_test_txn_rec_t *r, tpc_test_txn_t *t)
{
    t->committed = true;
    for (size_t i = 0; i < t->nkeys; i++) {
        uint64_t sub = t->keys[i] >> 40, seq = t->keys[i] & ((1ull << 40) - 1);
        r->visible_records++;
        if (sub < 16 && seq < r->max_seq && r->visible[sub * r->max_seq + seq] < 255)
            r->visible[sub * r->max_seq + seq]++;
    }
}

static tpc_error_t *do_commit(conn_t *c, void *txn, tpc_test_txn_op_t op)
{
    tpc_test_txn_rec_t *r = c->rec;
    pthread_mutex_lock(&r->mu);
    uint64_t id = ((handle_t *)txn)->id;
    tpc_error_t *err = enter(c, op, id, 0);
    tpc_test_txn_t *t = txn_of(r, txn);
    if (!err && (!t->ckpt || t->aborted))
        violation(r, "%s of transaction %" PRIu64 " that was not pre-committed", op_words[op], id);
    for (size_t i = 0; !err && i < r->ntxns; i++) {
        const tpc_test_txn_t *o = &r->txns[i];
        if (o != t && o->subtask == t->subtask && o->ckpt && o->ckpt < t->ckpt && !o->committed &&
            !o->aborted && !o->expired)
            violation(r, "transaction %" PRIu64 " committed before %zu of an older checkpoint", id,
                      i + 1);
    }
    if (!err && t->expired && !t->committed)
        err = tpc_error_new(TPC_ERR_COMMIT, TPC_ERROR_FATAL, "transaction %" PRIu64 " expired", id);
    if (!err && !t->committed)
        make_visible(r, t);
    pthread_mutex_unlock(&r->mu);
    return err;
}

static tpc_error_t *rec_commit(void *conn, void *txn)
{
    return do_commit(conn, txn, TPC_TEST_TXN_COMMIT);
}

static tpc_error_t *rec_recover_commit(void *conn, void *txn)
{
    return do_commit(conn, txn, TPC_TEST_TXN_RECOVER_COMMIT);
}

static tpc_error_t *do_abort(conn_t *c, void *txn, tpc_test_txn_op_t op)
{
    tpc_test_txn_rec_t *r = c->rec;
    pthread_mutex_lock(&r->mu);
    uint64_t id = ((handle_t *)txn)->id;
    tpc_error_t *err = enter(c, op, id, 0);
    tpc_test_txn_t *t = txn_of(r, txn);
    /* A restored current transaction may have been pre-committed after its handle was stored,
     * for a checkpoint that never completed: aborting it then is right. close() must never
     * abort a pre-committed one, and nothing may abort a committed one. */
    if (!err && (t->committed || (op == TPC_TEST_TXN_ABORT && t->ckpt)))
        violation(r, "%s of transaction %" PRIu64 " that was %s", op_words[op], id,
                  t->committed ? "committed" : "pre-committed");
    if (!err && op == TPC_TEST_TXN_ABORT && !t->nkeys)
        violation(r, "abort of empty transaction %" PRIu64, id);
    if (!err)
        t->aborted = true;
    pthread_mutex_unlock(&r->mu);
    return err;
}

static tpc_error_t *rec_abort(void *conn, void *txn)
{
    return do_abort(conn, txn, TPC_TEST_TXN_ABORT);
}

static tpc_error_t *rec_recover_abort(void *conn, void *txn)
{
    return do_abort(conn, txn, TPC_TEST_TXN_RECOVER_ABORT);
}

/* Like a real external system's cleanup: transactions of this subtask's share that no checkpoint
 * up to the restored one can hold are dropped (the file sink's rule, see file_commit.c). */
static tpc_error_t *rec_lingering(void *conn, const tpc_txn_lingering_t *l)
{
    conn_t *c = conn;
    tpc_test_txn_rec_t *r = c->rec;
    pthread_mutex_lock(&r->mu);
    tpc_error_t *err = enter(c, TPC_TEST_TXN_LINGERING, 0, l->restored_checkpoint);
    for (size_t i = 0; !err && i < r->ntxns; i++) {
        tpc_test_txn_t *t = &r->txns[i];
        if (t->subtask % c->st->parallelism == c->st->subtask &&
            t->begin_ckpt > l->restored_checkpoint && !t->committed)
            t->aborted = true;
    }
    pthread_mutex_unlock(&r->mu);
    return err;
}

static tpc_error_t *rec_serialize(void *conn, const void *txn, tpc_txn_buf_t *out)
{
    (void)conn;
    return tpc_txn_buf_append(out, &((const handle_t *)txn)->id, sizeof(uint64_t));
}

static tpc_error_t *rec_deserialize(void *conn, const void *bytes, size_t len, void **out)
{
    conn_t *c = conn;
    uint64_t id;
    if (len != sizeof id)
        return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL, "handle of %zu bytes", len);
    memcpy(&id, bytes, sizeof id);
    pthread_mutex_lock(&c->rec->mu);
    bool known = id && id <= c->rec->ntxns;
    pthread_mutex_unlock(&c->rec->mu);
    if (!known)
        return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL, "unknown transaction %" PRIu64, id);
    handle_t *h = malloc(sizeof *h);
    h->id = id;
    *out = h;
    return NULL;
}

static bool rec_is_empty(void *conn, const void *txn)
{
    conn_t *c = conn;
    pthread_mutex_lock(&c->rec->mu);
    bool empty = txn_of(c->rec, txn)->nkeys == 0;
    pthread_mutex_unlock(&c->rec->mu);
    return empty;
}

static void rec_free_txn(void *conn, void *txn)
{
    (void)conn;
    free(txn);
}

static void rec_describe(void *conn, const void *txn, char *buf, size_t cap)
{
    (void)conn;
    snprintf(buf, cap, "rec-%" PRIu64, ((const handle_t *)txn)->id);
}

const tpc_txn_connector_ops_t tpc_test_txn_ops = {
    .version = TPC_TXN_CONNECTOR_OPS_VERSION,
    .name = "recorder",
    .open = rec_open,
    .close = rec_close,
    .begin = rec_begin,
    .write = rec_write,
    .flush = rec_flush,
    .pre_commit = rec_pre_commit,
    .commit = rec_commit,
    .abort = rec_abort,
    .recover_and_commit = rec_recover_commit,
    .recover_and_abort = rec_recover_abort,
    .abort_lingering = rec_lingering,
    .serialize = rec_serialize,
    .deserialize = rec_deserialize,
    .is_empty = rec_is_empty,
    .free_txn = rec_free_txn,
    .describe = rec_describe,
};

char *tpc_test_txn_trace(tpc_test_txn_rec_t *r, int subtask)
{
    pthread_mutex_lock(&r->mu);
    size_t cap = 64 + r->nevents * 48, len = 0;
    char *s = malloc(cap);
    s[0] = '\0';
    const tpc_test_txn_event_t *prev = NULL;
    for (size_t i = 0; i < r->nevents; i++) {
        const tpc_test_txn_event_t *e = &r->events[i];
        if (subtask >= 0 && e->subtask != subtask)
            continue;
        if (prev && e->op == TPC_TEST_TXN_WRITE && prev->op == e->op && prev->txn == e->txn)
            continue;
        prev = e;
        len += (size_t)snprintf(s + len, cap - len, "%s%s", len ? " " : "", op_words[e->op]);
        if (e->txn)
            len += (size_t)snprintf(s + len, cap - len, ":%" PRIu64, e->txn);
        if (e->op == TPC_TEST_TXN_BEGIN || e->op == TPC_TEST_TXN_PRE_COMMIT ||
            e->op == TPC_TEST_TXN_LINGERING)
            len += (size_t)snprintf(s + len, cap - len, "@%" PRIu64, e->ckpt);
    }
    pthread_mutex_unlock(&r->mu);
    return s;
}

uint64_t tpc_test_txn_missing(tpc_test_txn_rec_t *r, int sub, uint64_t count)
{
    uint64_t bad = 0;
    pthread_mutex_lock(&r->mu);
    for (uint64_t i = 0; i < count && i < r->max_seq; i++)
        bad += r->visible[(uint64_t)sub * r->max_seq + i] != 1;
    pthread_mutex_unlock(&r->mu);
    return bad;
}

int tpc_test_txn_count(tpc_test_txn_rec_t *r, tpc_test_txn_op_t op)
{
    pthread_mutex_lock(&r->mu);
    int n = r->calls[op];
    pthread_mutex_unlock(&r->mu);
    return n;
}
