/*
 * Operators shared by tests and benchmarks (see tpc_test_ops.h).
 */
#include "tpc_test_ops.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdio.h>
#include <ftw.h>
#include <unistd.h>

typedef struct {
    const tpc_test_seq_conf_t *conf;
    uint64_t next, end;
    int subtask;
    uint8_t *value;
} seq_t;

static void put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

bool tpc_test_seq_decode(const void *key, size_t key_len, int *subtask, uint64_t *seq)
{
    if (key_len != 8)
        return false;
    const uint8_t *p = key;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    *subtask = (int)(v >> 40);
    *seq = v & ((1ull << 40) - 1);
    return true;
}

static tpc_error_t *seq_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    tpc_test_seq_conf_t *conf = arg;
    atomic_fetch_add(&conf->opens, 1);
    seq_t *s = calloc(1, sizeof(*s));
    s->conf = conf;
    s->subtask = tpc_ctx_subtask(ctx);
    s->end =
        s->subtask < 16 && conf->count[s->subtask] ? conf->count[s->subtask] : conf->count_default;
    s->value = calloc(1, 8 + conf->value_pad);
    *self = s;
    return NULL;
}

static tpc_error_t *seq_init(void *self, tpc_ctx_t *ctx, const tpc_state_reader_t *restored)
{
    (void)ctx;
    seq_t *s = self;
    for (size_t i = 0; i < tpc_state_count(restored, TPC_STATE_LIST); i++) {
        const void *p;
        size_t len;
        tpc_state_get(restored, TPC_STATE_LIST, i, &p, &len);
        if (len != 8)
            return tpc_error_new(TPC_ERR_CORRUPT, 0, "sequence source state of %zu bytes", len);
        memcpy(&s->next, p, 8);
    }
    return NULL;
}

static tpc_error_t *seq_poll(void *self, tpc_ctx_t *ctx, tpc_poll_result_t *result)
{
    seq_t *s = self;
    uint32_t n = s->conf->per_poll ? s->conf->per_poll : 64;
    for (uint32_t i = 0; i < n && s->next < s->end; i++) {
        if (s->conf->fail_at && s->subtask == s->conf->fail_subtask &&
            s->next == s->conf->fail_at && tpc_ctx_attempt(ctx) == 0)
            return tpc_error_new(TPC_ERR_TASK, 0, "injected failure at record %llu",
                                 (unsigned long long)s->next);
        uint8_t key[8];
        put_be64(key, (uint64_t)s->subtask << 40 | s->next);
        memcpy(s->value, key, 8);
        tpc_record_t rec = {.key = key,
                            .key_len = 8,
                            .value = s->value,
                            .value_len = 8 + s->conf->value_pad,
                            .timestamp = (int64_t)s->next};
        tpc_err_t rc = tpc_emit(ctx, &rec);
        if (rc == TPC_ERR_CANCELED)
            return NULL; /* the task notices */
        if (rc != TPC_OK)
            return tpc_error_new(rc, 0, "emit: %s", tpc_strerror(rc));
        s->next++;
    }
    if (s->conf->sleep_us) {
        struct timespec ts = {0, (long)s->conf->sleep_us * 1000};
        nanosleep(&ts, NULL);
    }
    *result = s->next >= s->end ? TPC_POLL_END : TPC_POLL_MORE;
    return NULL;
}

static tpc_error_t *seq_snapshot(void *self, tpc_ctx_t *ctx, uint64_t id, tpc_state_writer_t *w)
{
    (void)ctx;
    (void)id;
    seq_t *s = self;
    return tpc_state_add(w, TPC_STATE_LIST, &s->next, sizeof s->next);
}

static void seq_close(void *self, tpc_ctx_t *ctx)
{
    (void)ctx;
    seq_t *s = self;
    free(s->value);
    free(s);
}

const tpc_operator_ops_t tpc_test_seq_source_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = seq_open,
    .initialize_state = seq_init,
    .poll = seq_poll,
    .snapshot_state = seq_snapshot,
    .close = seq_close,
};

static tpc_error_t *plain_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx;
    (void)arg;
    *self = (void *)1;
    return NULL;
}

static tpc_error_t *identity_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)self;
    size_t n = tpc_batch_count(batch);
    for (size_t i = 0; i < n; i++) {
        tpc_record_t r;
        tpc_batch_get(batch, i, &r);
        if (tpc_emit(ctx, &r) != TPC_OK)
            return NULL;
    }
    return NULL;
}

static tpc_error_t *discard_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)self;
    (void)ctx;
    (void)batch;
    return NULL;
}

const tpc_operator_ops_t tpc_test_identity_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = plain_open,
    .process = identity_process,
};

const tpc_operator_ops_t tpc_test_discard_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = plain_open,
    .process = discard_process,
};

char *tpc_test_tmpdir(const char *tag)
{
    const char *base = getenv("TMPDIR");
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/twopc-%s-XXXXXX", base && *base ? base : "/tmp", tag);
    char *p = mkdtemp(tmpl);
    return p ? strdup(p) : NULL;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void tpc_test_rmdir(const char *path)
{
    if (path)
        nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static tpc_error_t *hold_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx;
    *self = arg;
    return NULL;
}

static tpc_error_t *hold_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *b)
{
    const tpc_test_hold_t *h = self;
    for (size_t i = 0; h->forward && i < tpc_batch_count(b); i++) {
        tpc_record_t r;
        tpc_batch_get(b, i, &r);
        if (tpc_emit(ctx, &r) != TPC_OK)
            return NULL; /* canceled */
    }
    return NULL;
}

static tpc_error_t *hold_snapshot(void *self, tpc_ctx_t *ctx, uint64_t id, tpc_state_writer_t *w)
{
    (void)ctx, (void)w;
    tpc_test_hold_t *h = self;
    pthread_mutex_lock(&h->mu);
    if (h->pause_from && id >= h->pause_from && !h->release) {
        h->paused_id = id;
        pthread_cond_broadcast(&h->cv);
        while (!h->release)
            pthread_cond_wait(&h->cv, &h->mu);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

const tpc_operator_ops_t tpc_test_hold_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = hold_open,
    .process = hold_process,
    .snapshot_state = hold_snapshot,
};

void tpc_test_hold_init(tpc_test_hold_t *h, bool forward)
{
    memset(h, 0, sizeof *h);
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    h->forward = forward;
}

void tpc_test_hold_destroy(tpc_test_hold_t *h)
{
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
}
