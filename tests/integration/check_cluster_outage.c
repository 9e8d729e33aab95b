/*
 * Outages during a rebalance, against the real broker and the local S3 server (moto, started by
 * tests/services/s3.sh), which holds every unit's checkpoints under a prefix of the unit's own:
 *
 * - the broker restarts (kill -9, then started again on its port and storage) while a member that
 *   joined makes the others release units: afterwards every unit runs on exactly one member and
 *   resumes from its newest completed checkpoint. A member that could not reach the broker may
 *   run a unit that the group gave to another meanwhile, until its next completion is fenced
 *   (the owner epoch); nothing else may leave a unit open on two members. The broker is the one
 * with-services.sh started for this run (TWOPC_TEST_KAFKA_RESTART); for a broker started elsewhere
 * the case says that it did not run;
 * - the S3 server is frozen (SIGSTOP) longer than the storage timeout while units are released
 *   with a savepoint and taken by another member: no unit runs on two members at once, no
 *   checkpoint completes while the store does not answer, the members report errors that name
 *   the store and the timeout, and once the server runs again (SIGCONT) the units resume.
 *
 * In both, the committed output of every unit holds each of its records exactly once. Each case
 * runs one application with the classic protocol and, with librdkafka 2.12 or later, a second one
 * with KIP-848's (group.protocol=consumer) through the same outage.
 */
#include "check_cluster_common.h"
#include "tpc_test_s3.h"

#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <sys/stat.h>

#define UNITS         4
#define S3_BUCKET     "twopc-cluster"
#define S3_TIMEOUT_MS 2000
#define S3_ATTEMPTS   2
/* A request sent just before the freeze has failed by then (every attempt, and the backoff
 * between them, at most 2 s), with time to spare under load; so has what waited for it, such as
 * the report of a checkpoint whose completion record was written just before the freeze. */
#define S3_GIVEN_UP_MS (S3_TIMEOUT_MS * S3_ATTEMPTS + 5000)
/* How long the store stays frozen: past a request's every attempt, several times over. */
#define S3_FROZEN_MS (4 * S3_TIMEOUT_MS * S3_ATTEMPTS)
/* How long the units' placement must hold unchanged to count as settled. */
#define SETTLED_MS 3000

static tpc_test_s3_t local_s3; /* the local S3 server: endpoint NULL, none */

/* The world of the cluster tests, and what this file watches besides. */
typedef struct {
    ct_world_t w;                       /* first: the common helpers take it */
    atomic_ullong newest[CT_UNITS_MAX]; /* the newest checkpoint a unit's job completed */
    atomic_int completions;             /* checkpoints completed, all units */
    atomic_int behind;                  /* restores of an older checkpoint than the newest */
    atomic_int restores;                /* restores of a checkpoint (not a fresh start) */
    pthread_mutex_t mu;
    char errors[4096]; /* the first error messages the members reported, one a line */
    int nerrors;
} ot_world_t;

static ot_world_t *ot_world_new(char **dir)
{
    ot_world_t *o = calloc(1, sizeof *o);
    o->w.per_poll = 10;
    o->w.sleep_us = 10000;
    pthread_mutex_init(&o->mu, NULL);
    *dir = tpc_test_tmpdir("cluster");
    snprintf(o->w.out_dir, sizeof o->w.out_dir, "%s/out", *dir);
    ck_assert_int_eq(mkdir(o->w.out_dir, 0755), 0);
    return o;
}

/* The counting source of the cluster tests, which also checks what each instance restores: the
 * newest checkpoint any owner of the unit completed (or a newer one, whose completion its owner
 * had not yet reported when this instance restored it). */
static tpc_error_t *ot_init(void *self, tpc_ctx_t *ctx, const tpc_state_reader_t *restored)
{
    ct_source_t *s = self;
    ot_world_t *o = (ot_world_t *)s->w;
    uint64_t newest = atomic_load(&o->newest[s->unit]);
    tpc_error_t *err = ct_init(self, ctx, restored);
    uint64_t id = tpc_ctx_restored_checkpoint(ctx);
    if (id)
        atomic_fetch_add(&o->restores, 1);
    if (id < newest) {
        atomic_fetch_add(&o->behind, 1);
        fprintf(stderr, "unit %d restored checkpoint %llu, but %llu had completed\n", s->unit,
                (unsigned long long)id, (unsigned long long)newest);
    }
    return err;
}

static const tpc_operator_ops_t ot_source_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = ct_open,
    .initialize_state = ot_init,
    .poll = ct_poll,
    .snapshot_state = ct_snapshot,
    .close = ct_close,
};

/* What one unit's job borrows: the common part first, which ct_release frees. */
typedef struct {
    ct_unit_job_t base;
    ot_world_t *o;
    int unit;
} ot_unit_job_t;

static void ot_on_checkpoint(void *opaque, uint64_t id, bool completed, uint64_t duration_us,
                             const char *reason)
{
    (void)duration_us;
    (void)reason;
    ot_unit_job_t *r = opaque;
    if (!completed)
        return;
    atomic_fetch_add(&r->o->completions, 1);
    atomic_ullong *newest = &r->o->newest[r->unit];
    uint64_t now = atomic_load(newest);
    while (id > now && !atomic_compare_exchange_weak(newest, &now, id))
        ;
}

/* The unit's job of the cluster tests; the member gives it its checkpoints on the local S3
 * server, under the unit's own prefix. */
static tpc_error_t *ot_build(void *opaque, const tpc_cluster_unit_t *unit, tpc_job_t *job,
                             void **resources)
{
    ot_world_t *o = opaque;
    ot_unit_job_t *r = calloc(1, sizeof *r);
    r->base.arg = (ct_source_t){.w = &o->w, .unit = unit->unit};
    r->o = o;
    r->unit = unit->unit;
    *resources = r;
    ck_assert_ptr_nonnull(unit->checkpoint_s3_prefix);
    const char *const keys[][2] = {
        {"checkpoint.interval.ms", "200"},
        {"restart.delay.ms", "200"},
        {"stop.timeout.ms", "6000"},
    };
    tpc_error_t *err = NULL;
    for (size_t i = 0; !err && i < sizeof keys / sizeof *keys; i++)
        err = tpc_job_set(job, keys[i][0], keys[i][1]);
    if (!err && tpc_job_set_checkpoint_callback(job, ot_on_checkpoint, r) != TPC_OK)
        err = tpc_error_new(TPC_ERR_INVALID_ARG, 0, "no checkpoint callback");
    int src = -1, snk = -1;
    if (!err)
        err = tpc_job_add_vertex(job, "numbers", 1, &ot_source_ops, &r->base.arg, &src);
    if (!err)
        err = tpc_file_sink_new(o->w.out_dir, &r->base.sink);
    if (!err)
        err = tpc_txn_sink_set(r->base.sink, "file.prefix", unit->gid_prefix);
    if (!err)
        err = tpc_file_sink_set_encoder(r->base.sink, ct_encode, NULL);
    if (!err)
        err = tpc_txn_sink_add_to_job(r->base.sink, job, "files", 1, &snk);
    if (!err)
        err = tpc_job_connect(job, src, snk, TPC_EDGE_FORWARD);
    return err;
}

/* The common event counts, and the first error messages kept for the test to read. */
static void ot_on_event(void *opaque, const tpc_cluster_event_t *ev)
{
    ct_member_t *m = opaque;
    ot_world_t *o = (ot_world_t *)m->w;
    if (!ev->error) {
        ct_on_event(m, ev);
        return;
    }
    const char *msg = tpc_error_message(ev->error);
    if (ev->kind == TPC_CLUSTER_UNIT_RELEASED)
        fprintf(stderr, "member %s unit %d released without a savepoint: %s\n", m->name, ev->unit,
                msg);
    pthread_mutex_lock(&o->mu);
    size_t at = strlen(o->errors);
    if (at + strlen(msg) + 2 < sizeof o->errors)
        snprintf(o->errors + at, sizeof o->errors - at, "%s\n", msg);
    o->nerrors++;
    pthread_mutex_unlock(&o->mu);
    ct_on_event(m, ev); /* counted once the message is kept */
}

static bool ot_error_seen(ot_world_t *o, const char *a, const char *b)
{
    pthread_mutex_lock(&o->mu);
    bool seen = false;
    for (const char *line = o->errors; *line && !seen;) {
        size_t len = strcspn(line, "\n");
        char one[1024];
        snprintf(one, sizeof one, "%.*s", (int)(len < sizeof one ? len : sizeof one - 1), line);
        seen = strstr(one, a) && strstr(one, b);
        line += len + (line[len] == '\n');
    }
    pthread_mutex_unlock(&o->mu);
    return seen;
}

static void ot_member_start(ct_member_t *m, ot_world_t *o, const char *name, const char *app,
                            bool consumer_protocol)
{
    *m = (ct_member_t){.w = &o->w, .name = name};
    const char *bootstrap = tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP");
    ck_assert_ptr_nonnull(bootstrap);
    TPC_TEST_OK(tpc_cluster_new(bootstrap, app, UNITS, &m->c));
    char timeout[32], attempts[32];
    snprintf(timeout, sizeof timeout, "%d", S3_TIMEOUT_MS);
    snprintf(attempts, sizeof attempts, "%d", S3_ATTEMPTS);
    const char *const storage[][2] = {
        {"checkpoint.storage", "s3"},          {"checkpoint.s3.endpoint", local_s3.endpoint},
        {"checkpoint.s3.bucket", S3_BUCKET},   {"checkpoint.s3.region", "us-east-1"},
        {"checkpoint.s3.timeout.ms", timeout}, {"checkpoint.s3.attempts", attempts},
    };
    for (size_t i = 0; i < sizeof storage / sizeof *storage; i++)
        TPC_TEST_OK(tpc_cluster_set(m->c, storage[i][0], storage[i][1]));
    TPC_TEST_OK(tpc_cluster_set(m->c, "unit.restart.delay.ms", "1000"));
    ct_member_protocol(m->c, app, name, consumer_protocol);
    TPC_TEST_OK(tpc_cluster_set_builder(m->c, ot_build, ct_release, o));
    ck_assert_int_eq(tpc_cluster_set_event_callback(m->c, ot_on_event, m), TPC_OK);
    ck_assert_int_eq(pthread_create(&m->thread, NULL, ct_member_main, m), 0);
}

static int running_on(ct_member_t *const *m, int n)
{
    int sum = 0;
    for (int i = 0; i < n; i++)
        sum += m[i]->c ? atomic_load(&m[i]->running) : 0;
    return sum;
}

/* Every unit assigned to one member and open there once, and so for SETTLED_MS on end. */
static bool ot_placed(ot_world_t *o, ct_member_t *const *m, int n)
{
    if (running_on(m, n) != UNITS)
        return false;
    for (int u = 0; u < UNITS; u++)
        if (atomic_load(&o->w.live[u]) != 1)
            return false;
    return true;
}

static void ot_wait_settled(ot_world_t *o, ct_member_t *const *m, int n)
{
    int64_t until = tpc_test_now_ms() + CT_WAIT_MS, since = 0;
    while (tpc_test_now_ms() < until) {
        if (!ot_placed(o, m, n))
            since = 0;
        else if (!since)
            since = tpc_test_now_ms();
        else if (tpc_test_now_ms() - since >= SETTLED_MS)
            return;
        usleep(50 * 1000);
    }
    char live[64] = "";
    for (int u = 0, at = 0; u < UNITS; u++)
        at += snprintf(live + at, sizeof live - (size_t)at, " %d", atomic_load(&o->w.live[u]));
    ck_abort_msg("the units did not settle within %d ms: %d assigned, open instances per unit:%s",
                 CT_WAIT_MS, running_on(m, n), live);
}

/* Every unit completes a checkpoint newer than @before[u]. */
static void ot_wait_progress(ot_world_t *o, const uint64_t *before)
{
    for (int u = 0; u < UNITS; u++)
        CT_WAIT_FOR(atomic_load(&o->newest[u]) > before[u]);
}

/* End the input, let every unit's job finish, stop the members and check the output. With
 * @fenced_overlap a unit may have been open on two members at once, if the older one ended fenced:
 * a member that could not reach the broker through its restart learns that its session ended
 * only when it reaches it again, after the group gave its units to others (a zombie, which the
 * owner epoch fences). Without it, no unit may ever be open on two members. */
static void ot_finish(ot_world_t *o, const char *app, ct_member_t *const *m, int n,
                      bool fenced_overlap)
{
    atomic_store(&o->w.finish, true);
    int finished;
    int64_t until = tpc_test_now_ms() + CT_WAIT_MS;
    do {
        finished = 0;
        for (int i = 0; i < n; i++)
            finished += atomic_load(&m[i]->finished);
        if (finished < UNITS)
            usleep(50 * 1000);
    } while (finished < UNITS && tpc_test_now_ms() < until);
    ck_assert_msg(finished >= UNITS, "only %d of %d units finished", finished, UNITS);
    for (int i = 0; i < n; i++)
        ct_member_end(m[i]);
    int fenced = 0;
    for (int i = 0; i < n; i++)
        fenced += atomic_load(&m[i]->fenced);
    for (int u = 0; u < UNITS; u++) {
        int most = atomic_load(&o->w.most_live[u]);
        ck_assert_msg(most == 1 || (fenced_overlap && most == 2 && fenced > 0),
                      "unit %d was open on %d members at once (%d units ended fenced)", u, most,
                      fenced);
        ct_verify_unit(&o->w, app, u);
    }
    ck_assert_int_eq(atomic_load(&o->behind), 0);
}

static void ot_world_free(ot_world_t *o, char *dir, ct_member_t **m, int n)
{
    for (int i = 0; i < n; i++)
        free(m[i]);
    pthread_mutex_destroy(&o->mu);
    free(o);
    tpc_test_rmdir(dir);
    free(dir);
}

static int sum_of(ct_member_t *const *m, int n, size_t field)
{
    int sum = 0;
    for (int i = 0; i < n; i++)
        sum += atomic_load((atomic_int *)((char *)m[i] + field));
    return sum;
}
#define SUM(m, n, field) sum_of((m), (n), offsetof(ct_member_t, field))

static bool s3_ready(void)
{
    if (local_s3.endpoint)
        return true;
    fprintf(stderr, "check_cluster_outage: NOT RUN: no local S3 server (%s)\n", local_s3.missing);
    return false;
}

/* One application per group protocol that this librdkafka has, all through the same outage: the
 * classic protocol always, KIP-848's with librdkafka 2.12 or later. */
#define GROUPS_MAX 2

typedef struct {
    bool consumer_protocol;
    ot_world_t *o;
    char *dir;
    char app[128];
    ct_member_t *m[3];
    int n; /* members started */
} ot_group_t;

static int ot_groups(ot_group_t *g, const char *tag)
{
    int n = rd_kafka_version() >= 0x020c0000 ? 2 : 1;
    for (int k = 0; k < n; k++) {
        g[k] = (ot_group_t){.consumer_protocol = k == 1};
        g[k].o = ot_world_new(&g[k].dir);
        tpc_test_unique_name(g[k].app, sizeof g[k].app, tag, '-');
        for (int i = 0; i < 3; i++)
            g[k].m[i] = calloc(1, sizeof *g[k].m[i]);
    }
    return n;
}

static void ot_join(ot_group_t *g, const char *name)
{
    ot_member_start(g->m[g->n], g->o, name, g->app, g->consumer_protocol);
    g->n++;
}

static const char *ot_protocol(const ot_group_t *g)
{
    return g->consumer_protocol ? "consumer" : "classic";
}

/* Every unit of every group completes a checkpoint newer than those it had. */
static void ot_groups_progress(ot_group_t *g, int n)
{
    for (int k = 0; k < n; k++) {
        uint64_t before[UNITS];
        for (int u = 0; u < UNITS; u++)
            before[u] = atomic_load(&g[k].o->newest[u]);
        ot_wait_progress(g[k].o, before);
    }
}

/* ---- the broker restarts during a rebalance ------------------------------------------------ */

START_TEST(test_broker_restart)
{
    const char *restart = tpc_test_env("TWOPC_TEST_KAFKA_RESTART");
    if (!restart) {
        fprintf(stderr, "check_cluster_outage: the broker restart case NOT RUN: "
                        "TWOPC_TEST_KAFKA_RESTART is not set (the broker was started elsewhere, "
                        "and a test restarts only a broker started for it)\n");
        return;
    }
    if (!s3_ready())
        return;
    ot_group_t g[GROUPS_MAX];
    int n = ot_groups(g, "brestart");
    for (int k = 0; k < n; k++) {
        ot_join(&g[k], "a");
        ot_join(&g[k], "b");
    }
    for (int k = 0; k < n; k++) {
        ot_wait_settled(g[k].o, g[k].m, 2);
        ck_assert_int_gt(atomic_load(&g[k].m[0]->running), 0);
        ck_assert_int_gt(atomic_load(&g[k].m[1]->running), 0);
    }
    ot_groups_progress(g, n); /* every unit has a completed checkpoint */

    /* C joins: once A or B has released a unit, the rebalance is under way; the broker goes
     * down in the middle of it and comes back on its port and storage. */
    for (int k = 0; k < n; k++)
        ot_join(&g[k], "c");
    for (int k = 0; k < n; k++)
        CT_WAIT_FOR(SUM(g[k].m, 2, released) > 0);
    int64_t t0 = tpc_test_now_ms();
    int rc = system(restart);
    ck_assert_msg(rc == 0, "the broker restart command failed (%d)", rc);
    int64_t away = tpc_test_now_ms() - t0;

    /* Every unit runs on exactly one member again, and checkpoints. */
    for (int k = 0; k < n; k++)
        ot_wait_settled(g[k].o, g[k].m, 3);
    int64_t settled = tpc_test_now_ms() - t0;
    ot_groups_progress(g, n);
    for (int k = 0; k < n; k++) {
        ct_member_t **m = g[k].m;
        fprintf(stderr,
                "broker restart (%s, librdkafka %s): broker away %lld ms, every unit settled "
                "%lld ms after it went down, on %d/%d/%d; released %d, lost %d, failed %d, "
                "fenced %d, restores %d\n",
                ot_protocol(&g[k]), rd_kafka_version_str(), (long long)away, (long long)settled,
                atomic_load(&m[0]->running), atomic_load(&m[1]->running),
                atomic_load(&m[2]->running), SUM(m, 3, released), SUM(m, 3, lost),
                SUM(m, 3, failed), SUM(m, 3, fenced), atomic_load(&g[k].o->restores));
        ck_assert_msg(atomic_load(&g[k].o->restores) > 0,
                      "no unit moved through the broker restart (%s)", ot_protocol(&g[k]));
    }
    for (int k = 0; k < n; k++) {
        ot_finish(g[k].o, g[k].app, g[k].m, 3, true);
        ot_world_free(g[k].o, g[k].dir, g[k].m, 3);
    }
}
END_TEST

/* ---- the S3 server is frozen during a rebalance -------------------------------------------- */

START_TEST(test_s3_frozen)
{
    if (!s3_ready())
        return;
    ot_group_t g[GROUPS_MAX];
    int n = ot_groups(g, "s3frozen");
    for (int k = 0; k < n; k++)
        ot_join(&g[k], "a");
    for (int k = 0; k < n; k++)
        ot_wait_settled(g[k].o, g[k].m, 1);
    ot_groups_progress(g, n);

    /* The store stops answering; B joins, so A releases units (the savepoint cannot be
     * written) and B takes them (its claim of each unit cannot be written either). */
    ck_assert_int_eq(kill(local_s3.pid, SIGSTOP), 0);
    int64_t frozen = tpc_test_now_ms();
    for (int k = 0; k < n; k++)
        ot_join(&g[k], "b");
    while (tpc_test_now_ms() - frozen < S3_GIVEN_UP_MS)
        usleep(50 * 1000);
    int completions[GROUPS_MAX];
    for (int k = 0; k < n; k++)
        completions[k] = atomic_load(&g[k].o->completions);
    for (int k = 0; k < n; k++) {
        ct_member_t **m = g[k].m;
        CT_WAIT_FOR(atomic_load(&m[0]->released) > 0 && atomic_load(&m[1]->assigned) > 0 &&
                    atomic_load(&m[1]->failed) > 0);
    }
    while (tpc_test_now_ms() - frozen < S3_FROZEN_MS)
        usleep(50 * 1000);
    /* Nothing completed while the store did not answer, and the members said why. */
    int completed_frozen[GROUPS_MAX];
    bool said[GROUPS_MAX];
    char store[256], timeout[64];
    snprintf(store, sizeof store, "S3 at \"%s\"", local_s3.endpoint);
    snprintf(timeout, sizeof timeout, "at most %d ms each", S3_TIMEOUT_MS);
    for (int k = 0; k < n; k++) {
        completed_frozen[k] = atomic_load(&g[k].o->completions) - completions[k];
        said[k] = ot_error_seen(g[k].o, store, timeout);
    }
    ck_assert_int_eq(kill(local_s3.pid, SIGCONT), 0);
    int64_t thawed = tpc_test_now_ms();
    for (int k = 0; k < n; k++) {
        ck_assert_msg(completed_frozen[k] == 0,
                      "%s: %d checkpoints completed between %d ms after S3 was frozen and its "
                      "thaw",
                      ot_protocol(&g[k]), completed_frozen[k], S3_GIVEN_UP_MS);
        pthread_mutex_lock(&g[k].o->mu);
        ck_assert_msg(said[k],
                      "%s: no member reported an error that names %s and %s; they said:\n%s",
                      ot_protocol(&g[k]), store, timeout, g[k].o->errors);
        pthread_mutex_unlock(&g[k].o->mu);
    }

    /* The store answers again: every unit runs on one member and checkpoints again. */
    for (int k = 0; k < n; k++)
        ot_wait_settled(g[k].o, g[k].m, 2);
    ot_groups_progress(g, n);
    int64_t resumed = tpc_test_now_ms() - thawed;
    for (int k = 0; k < n; k++) {
        ct_member_t **m = g[k].m;
        ck_assert_int_gt(atomic_load(&m[1]->running), 0);
        fprintf(stderr,
                "S3 frozen (%s, librdkafka %s): %lld ms frozen, every unit on one member (%d/%d) "
                "and checkpointing %lld ms after SIGCONT; released %d (%d without savepoint), "
                "failed %d, lost %d, fenced %d, errors %d\n",
                ot_protocol(&g[k]), rd_kafka_version_str(), (long long)(thawed - frozen),
                atomic_load(&m[0]->running), atomic_load(&m[1]->running), (long long)resumed,
                SUM(m, 2, released), SUM(m, 2, released_without_savepoint), SUM(m, 2, failed),
                SUM(m, 2, lost), SUM(m, 2, fenced), g[k].o->nerrors);
    }
    for (int k = 0; k < n; k++) {
        ot_finish(g[k].o, g[k].app, g[k].m, 2, false);
        ck_assert_int_eq(SUM(g[k].m, 2, fenced), 0);
        ot_world_free(g[k].o, g[k].dir, g[k].m, 3);
    }
}
END_TEST

int main(void)
{
    /* moto takes any credentials; the S3 storage of a job reads them from the environment. */
    setenv("AWS_ACCESS_KEY_ID", "twopc-test", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "twopc-test-secret", 1);
    unsetenv("AWS_SESSION_TOKEN");
    tpc_test_s3_start_own(&local_s3, "check_cluster_outage", S3_BUCKET);
    Suite *s = suite_create("cluster_outage");
    TCase *tc = tcase_create("outage");
    tcase_set_timeout(tc, 400);
    tcase_add_test(tc, test_s3_frozen);
    tcase_add_test(tc, test_broker_restart);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    tpc_test_s3_stop(&local_s3, "check_cluster_outage");
    return failed ? 1 : 0;
}
