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
#include <stdint.h>
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

/* A member of the application on a thread of this process, and what its events said. */
#define CT_WAIT_MS 90000

typedef struct {
    ct_world_t *w;
    const char *name;
    tpc_cluster_t *c;
    pthread_t thread;
    tpc_error_t *err;
    atomic_int assigned, released, finished, lost, failed, fenced;
    atomic_int released_without_savepoint;
    atomic_int running; /* units assigned and not released */
    int event_fd;       /* > 0: each event also written there as "<kind> <unit>\n" */
} ct_member_t;

static inline void ct_on_event(void *opaque, const tpc_cluster_event_t *ev)
{
    ct_member_t *m = opaque;
    if (m->event_fd > 0) {
        char line[32];
        int len = snprintf(line, sizeof line, "%d %d\n", (int)ev->kind, ev->unit);
        ck_assert_int_eq(write(m->event_fd, line, (size_t)len), len);
    }
    switch (ev->kind) {
    case TPC_CLUSTER_UNIT_ASSIGNED:
        atomic_fetch_add(&m->assigned, 1);
        atomic_fetch_add(&m->running, 1);
        break;
    case TPC_CLUSTER_UNIT_RELEASED:
        atomic_fetch_add(&m->released, 1);
        atomic_fetch_sub(&m->running, 1);
        if (ev->savepoint)
            atomic_store(&m->w->savepoint[ev->unit], ct_savepoint_id(ev->savepoint));
        else if (atomic_load(&m->w->end[ev->unit]) == 0)
            atomic_fetch_add(&m->released_without_savepoint, 1);
        break;
    case TPC_CLUSTER_UNIT_LOST:
        atomic_fetch_add(&m->lost, 1);
        atomic_fetch_sub(&m->running, 1);
        break;
    case TPC_CLUSTER_UNIT_FINISHED:
        atomic_fetch_add(&m->finished, 1);
        break;
    case TPC_CLUSTER_UNIT_FENCED:
    case TPC_CLUSTER_UNIT_FAILED:
        fprintf(stderr, "member %s unit %d: %s\n", m->name, ev->unit,
                ev->error ? tpc_error_message(ev->error) : "?");
        atomic_fetch_add(ev->kind == TPC_CLUSTER_UNIT_FENCED ? &m->fenced : &m->failed, 1);
        break;
    }
}

static inline void *ct_member_main(void *arg)
{
    ct_member_t *m = arg;
    m->err = tpc_cluster_run(m->c);
    return NULL;
}

/* The group protocol of member @name of @app: KIP-848's, or the classic one with static
 * membership and a 6 s session. */
static inline void ct_member_protocol(tpc_cluster_t *c, const char *app, const char *name,
                                      bool consumer_protocol)
{
    if (consumer_protocol) {
        TPC_TEST_OK(tpc_cluster_set(c, "group.protocol", "consumer"));
        return;
    }
    char instance[256];
    snprintf(instance, sizeof instance, "%s-%s", app, name);
    TPC_TEST_OK(tpc_cluster_set(c, "kafka.group.instance.id", instance));
    TPC_TEST_OK(tpc_cluster_set(c, "kafka.session.timeout.ms", "6000"));
    TPC_TEST_OK(tpc_cluster_set(c, "kafka.heartbeat.interval.ms", "500"));
}

static inline void ct_member_start(ct_member_t *m, ct_world_t *w, const char *name, const char *app,
                                   const char *dir, int units, bool consumer_protocol)
{
    *m = (ct_member_t){.w = w, .name = name, .event_fd = m->event_fd};
    const char *bootstrap = tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP");
    ck_assert_ptr_nonnull(bootstrap);
    TPC_TEST_OK(tpc_cluster_new(bootstrap, app, units, &m->c));
    TPC_TEST_OK(tpc_cluster_set(m->c, "checkpoint.dir", dir));
    ct_member_protocol(m->c, app, name, consumer_protocol);
    TPC_TEST_OK(tpc_cluster_set_builder(m->c, ct_build, ct_release, w));
    ck_assert_int_eq(tpc_cluster_set_event_callback(m->c, ct_on_event, m), TPC_OK);
    ck_assert_int_eq(pthread_create(&m->thread, NULL, ct_member_main, m), 0);
}

static inline void ct_member_end(ct_member_t *m)
{
    tpc_cluster_stop(m->c);
    pthread_join(m->thread, NULL);
    ck_assert_msg(m->err == NULL, "member %s: %s", m->name, tpc_error_message(m->err));
    ck_assert_int_eq(atomic_load(&m->running), 0);
    tpc_cluster_destroy(m->c);
    m->c = NULL;
}

/* Wait until @what holds; fail after CT_WAIT_MS. */
#define CT_WAIT_FOR(what)                                                                          \
    do {                                                                                           \
        int64_t until_ = tpc_test_now_ms() + CT_WAIT_MS;                                           \
        while (!(what) && tpc_test_now_ms() < until_)                                              \
            usleep(50 * 1000);                                                                     \
        ck_assert_msg((what), "waited %d ms for: %s", CT_WAIT_MS, #what);                          \
    } while (0)

#endif
