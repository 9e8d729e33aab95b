/*
 * What the cluster tests share: the job of one unit — a paced counting source whose position is
 * its checkpoint state, into an exactly-once file sink named after the unit — and the reading of
 * the committed files, which must hold every number from 0 to the unit's end exactly once.
 *
 * The source watches the process: how many instances of each unit are open at once (two would
 * mean two owners), and which checkpoint each instance restored, so that a test can compare it
 * with the savepoint the previous owner reported.
 */
#ifndef CHECK_CLUSTER_COMMON_H
#define CHECK_CLUSTER_COMMON_H

#include "tpc_cluster.h"
#include "tpc_file.h"
#include "tpc_test_check.h"
#include "tpc_test_env.h"
#include "tpc_test_ops.h"

#include <check.h>
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CT_UNITS_MAX 16

/* Shared by every unit's job of the process. */
typedef struct {
    char out_dir[512];
    atomic_bool finish;                    /* sources end their input at the next poll */
    uint32_t per_poll, sleep_us;           /* pace */
    atomic_int live[CT_UNITS_MAX];         /* open instances of each unit */
    atomic_int most_live[CT_UNITS_MAX];    /* the most at once */
    atomic_int opens[CT_UNITS_MAX];        /* instances opened */
    atomic_ullong end[CT_UNITS_MAX];       /* where the unit's last finished instance ended */
    atomic_ullong restored[CT_UNITS_MAX];  /* the checkpoint its last instance restored */
    atomic_ullong savepoint[CT_UNITS_MAX]; /* a savepoint a release reported, not yet restored */
    atomic_int savepoint_restores;         /* instances that restored the reported savepoint */
    atomic_int savepoint_misses;           /* ... that restored another checkpoint */
} ct_world_t;

typedef struct {
    ct_world_t *w;
    int unit;
    uint64_t next;
} ct_source_t;

static inline tpc_error_t *ct_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx;
    ct_source_t *s = calloc(1, sizeof *s);
    *s = *(ct_source_t *)arg;
    int now = atomic_fetch_add(&s->w->live[s->unit], 1) + 1;
    int most = atomic_load(&s->w->most_live[s->unit]);
    while (now > most && !atomic_compare_exchange_weak(&s->w->most_live[s->unit], &most, now))
        ;
    atomic_fetch_add(&s->w->opens[s->unit], 1);
    *self = s;
    return NULL;
}

static inline tpc_error_t *ct_init(void *self, tpc_ctx_t *ctx, const tpc_state_reader_t *restored)
{
    ct_source_t *s = self;
    for (size_t i = 0; i < tpc_state_count(restored, TPC_STATE_LIST); i++) {
        const void *p;
        size_t len;
        tpc_state_get(restored, TPC_STATE_LIST, i, &p, &len);
        ck_assert_uint_eq(len, 8);
        memcpy(&s->next, p, 8);
    }
    uint64_t id = tpc_ctx_restored_checkpoint(ctx);
    atomic_store(&s->w->restored[s->unit], id);
    uint64_t sp = atomic_exchange(&s->w->savepoint[s->unit], 0);
    if (sp)
        atomic_fetch_add(sp == id ? &s->w->savepoint_restores : &s->w->savepoint_misses, 1);
    return NULL;
}

static inline tpc_error_t *ct_poll(void *self, tpc_ctx_t *ctx, tpc_poll_result_t *result)
{
    ct_source_t *s = self;
    if (atomic_load(&s->w->finish)) {
        atomic_store(&s->w->end[s->unit], s->next);
        *result = TPC_POLL_END;
        return NULL;
    }
    for (uint32_t i = 0; i < s->w->per_poll; i++, s->next++) {
        tpc_record_t rec = {.value = &s->next, .value_len = sizeof s->next};
        tpc_emit(ctx, &rec);
    }
    if (s->w->sleep_us)
        usleep(s->w->sleep_us);
    *result = TPC_POLL_MORE;
    return NULL;
}

static inline tpc_error_t *ct_snapshot(void *self, tpc_ctx_t *ctx, uint64_t id,
                                       tpc_state_writer_t *wr)
{
    (void)ctx;
    (void)id;
    ct_source_t *s = self;
    return tpc_state_add(wr, TPC_STATE_LIST, &s->next, sizeof s->next);
}

static inline void ct_close(void *self, tpc_ctx_t *ctx)
{
    (void)ctx;
    ct_source_t *s = self;
    atomic_fetch_sub(&s->w->live[s->unit], 1);
    free(s);
}

static const tpc_operator_ops_t ct_source_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = ct_open,
    .initialize_state = ct_init,
    .poll = ct_poll,
    .snapshot_state = ct_snapshot,
    .close = ct_close,
};

static inline size_t ct_encode(void *opaque, const tpc_record_t *rec, void *buf, size_t cap)
{
    (void)opaque;
    uint64_t n;
    memcpy(&n, rec->value, sizeof n);
    char line[32];
    int len = snprintf(line, sizeof line, "%llu\n", (unsigned long long)n);
    if ((size_t)len <= cap)
        memcpy(buf, line, (size_t)len);
    return (size_t)len;
}

/* What one unit's job borrows until it is destroyed. */
typedef struct {
    ct_source_t arg;
    tpc_txn_sink_t *sink;
} ct_unit_job_t;

static inline tpc_error_t *ct_build(void *opaque, const tpc_cluster_unit_t *unit, tpc_job_t *job,
                                    void **resources)
{
    ct_world_t *w = opaque;
    ct_unit_job_t *r = calloc(1, sizeof *r);
    r->arg = (ct_source_t){.w = w, .unit = unit->unit};
    *resources = r;
    int src = -1, snk = -1;
    tpc_error_t *err = tpc_job_set(job, "checkpoint.interval.ms", "200");
    if (!err)
        err = tpc_job_add_vertex(job, "numbers", 1, &ct_source_ops, &r->arg, &src);
    if (!err)
        err = tpc_file_sink_new(w->out_dir, &r->sink);
    if (!err)
        err = tpc_txn_sink_set(r->sink, "file.prefix", unit->gid_prefix);
    if (!err)
        err = tpc_file_sink_set_encoder(r->sink, ct_encode, NULL);
    if (!err)
        err = tpc_txn_sink_add_to_job(r->sink, job, "files", 1, &snk);
    if (!err)
        err = tpc_job_connect(job, src, snk, TPC_EDGE_FORWARD);
    return err;
}

static inline void ct_release(void *opaque, const tpc_cluster_unit_t *unit, void *resources)
{
    (void)opaque;
    (void)unit;
    ct_unit_job_t *r = resources;
    if (r)
        tpc_txn_sink_destroy(r->sink);
    free(r);
}

/* The committed files of unit @unit of @app: every number below end[unit] exactly once. */
static inline void ct_verify_unit(ct_world_t *w, const char *app, int unit)
{
    uint64_t end = atomic_load(&w->end[unit]);
    ck_assert_msg(end > 0, "unit %d never ended its input", unit);
    unsigned char *seen = calloc(end, 1);
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s-u%d-", app, unit);
    DIR *d = opendir(w->out_dir);
    ck_assert_ptr_nonnull(d);
    uint64_t lines = 0, dups = 0, beyond = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", w->out_dir, e->d_name);
        FILE *f = fopen(path, "r");
        ck_assert_ptr_nonnull(f);
        unsigned long long n;
        while (fscanf(f, "%llu", &n) == 1) {
            lines++;
            if (n >= end)
                beyond++;
            else if (seen[n]++)
                dups++;
        }
        fclose(f);
    }
    closedir(d);
    uint64_t missing = 0;
    for (uint64_t n = 0; n < end; n++)
        missing += !seen[n];
    free(seen);
    ck_assert_msg(!missing && !dups && !beyond,
                  "unit %d: %llu numbers below %llu in %llu lines: %llu missing, %llu twice, "
                  "%llu beyond the end",
                  unit, (unsigned long long)lines, (unsigned long long)end,
                  (unsigned long long)lines, (unsigned long long)missing, (unsigned long long)dups,
                  (unsigned long long)beyond);
}

/* The savepoint id in a path ".../savepoint-<id>". */
static inline uint64_t ct_savepoint_id(const char *path)
{
    const char *at = strrchr(path, '-');
    return at ? strtoull(at + 1, NULL, 10) : 0;
}

#endif
