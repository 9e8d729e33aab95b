/*
 * Recording sink and counting operator for tests (see tpc_test_sink.h).
 */
#include "tpc_test_sink.h"
#include "tpc_test_ops.h"

#include <stdlib.h>
#include <string.h>

void tpc_test_rec_init(tpc_test_rec_t *r, uint64_t max_seq)
{
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
    r->max_seq = max_seq;
    r->seen = calloc(16 * max_seq, 1);
}

void tpc_test_rec_free(tpc_test_rec_t *r)
{
    free(r->seen);
    pthread_mutex_destroy(&r->mu);
}

uint64_t tpc_test_rec_missing(tpc_test_rec_t *r, int sub, uint64_t count)
{
    uint64_t bad = 0;
    for (uint64_t i = 0; i < count && i < r->max_seq; i++)
        bad += r->seen[(uint64_t)sub * r->max_seq + i] != 1;
    return bad;
}

static tpc_error_t *rec_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx;
    tpc_test_rec_t *r = arg;
    pthread_mutex_lock(&r->mu);
    r->opens++;
    pthread_mutex_unlock(&r->mu);
    *self = r;
    return NULL;
}

static tpc_error_t *rec_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)ctx;
    tpc_test_rec_t *r = self;
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < tpc_batch_count(batch); i++) {
        tpc_record_t rec;
        tpc_batch_get(batch, i, &rec);
        int sub;
        uint64_t seq;
        r->records++;
        if (!tpc_test_seq_decode(rec.key, rec.key_len, &sub, &seq) || sub >= 16 ||
            seq >= r->max_seq) {
            r->out_of_range++;
            continue;
        }
        uint8_t *c = &r->seen[(uint64_t)sub * r->max_seq + seq];
        if (*c)
            r->duplicates++;
        if (*c < 255)
            (*c)++;
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

static tpc_error_t *rec_snapshot(void *self, tpc_ctx_t *ctx, uint64_t id, tpc_state_writer_t *w)
{
    (void)ctx;
    (void)w;
    tpc_test_rec_t *r = self;
    pthread_mutex_lock(&r->mu);
    if (r->nsnapshots < TPC_TEST_MAX_EVENTS)
        r->snapshots[r->nsnapshots++] = id;
    if (r->finishes && !r->snapshot_after_finish) {
        r->snapshot_after_finish = true;
        r->first_snapshot_after_finish = id;
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

static tpc_error_t *rec_notify(void *self, tpc_ctx_t *ctx, uint64_t id)
{
    (void)ctx;
    tpc_test_rec_t *r = self;
    pthread_mutex_lock(&r->mu);
    if (r->nnotifies < TPC_TEST_MAX_EVENTS)
        r->notifies[r->nnotifies++] = id;
    if (r->finishes && !r->first_notify_after_finish)
        r->first_notify_after_finish = id;
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

static tpc_error_t *rec_aborted(void *self, tpc_ctx_t *ctx, uint64_t id)
{
    (void)ctx;
    tpc_test_rec_t *r = self;
    pthread_mutex_lock(&r->mu);
    if (r->naborts < TPC_TEST_MAX_EVENTS)
        r->aborts[r->naborts++] = id;
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

static tpc_error_t *rec_finish(void *self, tpc_ctx_t *ctx)
{
    (void)ctx;
    tpc_test_rec_t *r = self;
    pthread_mutex_lock(&r->mu);
    r->finishes++;
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

static void rec_close(void *self, tpc_ctx_t *ctx)
{
    (void)ctx;
    tpc_test_rec_t *r = self;
    pthread_mutex_lock(&r->mu);
    r->closes++;
    pthread_mutex_unlock(&r->mu);
}

const tpc_operator_ops_t tpc_test_rec_sink_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = rec_open,
    .process = rec_process,
    .snapshot_state = rec_snapshot,
    .notify_checkpoint_complete = rec_notify,
    .notify_checkpoint_aborted = rec_aborted,
    .finish = rec_finish,
    .close = rec_close,
};

/* ---- counting operator -------------------------------------------------------------------- */

typedef struct {
    tpc_test_count_t *shared;
    uint64_t count[16], sum[16];
} counter_t;

void tpc_test_count_init(tpc_test_count_t *c)
{
    memset(c, 0, sizeof(*c));
    pthread_mutex_init(&c->mu, NULL);
}

void tpc_test_count_total(tpc_test_count_t *c, int src, uint64_t *count, uint64_t *sum)
{
    pthread_mutex_lock(&c->mu);
    *count = *sum = 0;
    for (int k = 0; k < 16; k++) {
        *count += c->count[k][src];
        *sum += c->sum[k][src];
    }
    pthread_mutex_unlock(&c->mu);
}

static tpc_error_t *count_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx;
    counter_t *c = calloc(1, sizeof(*c));
    c->shared = arg;
    *self = c;
    return NULL;
}

static tpc_error_t *count_init(void *self, tpc_ctx_t *ctx, const tpc_state_reader_t *st)
{
    (void)ctx;
    counter_t *c = self;
    for (size_t i = 0; i < tpc_state_count(st, TPC_STATE_LIST); i++) {
        const void *p;
        size_t len;
        tpc_state_get(st, TPC_STATE_LIST, i, &p, &len);
        if (len != sizeof c->count + sizeof c->sum)
            return tpc_error_new(TPC_ERR_CORRUPT, 0, "counter state of %zu bytes", len);
        uint64_t v[32];
        memcpy(v, p, sizeof v);
        for (int k = 0; k < 16; k++) {
            c->count[k] += v[k];
            c->sum[k] += v[16 + k];
        }
    }
    return NULL;
}

static tpc_error_t *count_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)ctx;
    counter_t *c = self;
    for (size_t i = 0; i < tpc_batch_count(batch); i++) {
        tpc_record_t rec;
        tpc_batch_get(batch, i, &rec);
        int sub;
        uint64_t seq;
        if (tpc_test_seq_decode(rec.key, rec.key_len, &sub, &seq) && sub < 16) {
            c->count[sub]++;
            c->sum[sub] += seq;
        }
    }
    return NULL;
}

static tpc_error_t *count_snapshot(void *self, tpc_ctx_t *ctx, uint64_t id, tpc_state_writer_t *w)
{
    (void)ctx;
    (void)id;
    counter_t *c = self;
    uint64_t v[32];
    memcpy(v, c->count, sizeof c->count);
    memcpy(v + 16, c->sum, sizeof c->sum);
    tpc_error_t *err = tpc_state_add(w, TPC_STATE_LIST, v, sizeof v);
    if (!err && c->shared->use_union)
        err = tpc_state_add(w, TPC_STATE_UNION, v, sizeof v);
    return err;
}

static tpc_error_t *count_finish(void *self, tpc_ctx_t *ctx)
{
    counter_t *c = self;
    int me = tpc_ctx_subtask(ctx);
    if (me >= 16)
        return tpc_error_new(TPC_ERR_INVALID_ARG, 0, "counting operator supports 16 subtasks");
    pthread_mutex_lock(&c->shared->mu);
    c->shared->finishes++;
    memcpy(c->shared->count[me], c->count, sizeof c->count);
    memcpy(c->shared->sum[me], c->sum, sizeof c->sum);
    pthread_mutex_unlock(&c->shared->mu);
    return NULL;
}

static void count_close(void *self, tpc_ctx_t *ctx)
{
    (void)ctx;
    free(self);
}

const tpc_operator_ops_t tpc_test_count_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = count_open,
    .initialize_state = count_init,
    .process = count_process,
    .snapshot_state = count_snapshot,
    .finish = count_finish,
    .close = count_close,
};
