/*
 * The zombie as a real frozen process, against the real broker, PostgreSQL and the local S3
 * server. Two member processes, A and B, share three units; each unit's job numbers its records
 * and writes them exactly once into a Kafka topic (transactions) and a PostgreSQL table (prepared
 * transactions), with its checkpoints on S3 under the unit's own prefix.
 *
 * A's jobs are held inside a checkpoint n: each unit's source stops writing at n, and an operator
 * before the PostgreSQL sink blocks in its snapshot of n, so that the Kafka sink has pre-committed
 * n (its transaction open on the broker) and PostgreSQL has not prepared n yet. Once n - 1 is
 * committed in both sinks and the broker has every record of n, A is frozen with SIGSTOP past its
 * session timeout. B takes A's units over: it claims each unit's checkpoints (a newer owner
 * epoch), restores n - 1, fences A's transactional ids (which aborts their open transactions of
 * n) and completes checkpoints, committing output. Then the hold is let go and A resumes with
 * SIGCONT: PostgreSQL prepares A's transaction of n (a gid of A's epoch, after the take-over), and
 * each of A's units must end fenced (TPC_ERR_FENCED) at the completion of n, released without a
 * restart, and A must not crash. B's next checkpoints roll A's prepared gids back. At the end an
 * independent read_committed consumer finds every record of every unit exactly once in the topic,
 * SQL finds every row exactly once, no gid of the application is left in pg_prepared_xacts and no
 * transactional id of it has a transaction open.
 *
 * A member learns of a lost assignment from its consumer a few milliseconds after it resumes, and
 * then cancels its jobs; which of the two comes first, that or a job's next checkpoint, is a race.
 * The test makes the zombie's case the sure one: A's log callback holds its membership thread at
 * the "lost units" line until its jobs have ended (for at most a minute), as a member whose
 * consumer is slow to notice would. The fences alone must then stop A: the owner epoch of each
 * unit's completion record (compare-and-set), the Kafka sink's fencing of the previous epoch's
 * transactional ids and the PostgreSQL sink's roll-back of older epochs' gids.
 *
 * Without a local S3 server (no moto: see tests/services/s3.sh) the checkpoints go to a folder
 * and the test says so loudly; TWOPC_TEST_S3_REQUIRED=1 makes that a failure. Classic protocol
 * (cooperative-sticky) with any librdkafka; KIP-848's with librdkafka 2.12 or
 * later.
 */
#include "check_cluster_common.h"
#include "check_kafka_common.h"
#include "kafka_wire.h"
#include "tpc_kafka.h"
#include "tpc_pg.h"
#include "tpc_test_pg.h"
#include "tpc_test_s3.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define UNITS      3
#define WAIT_MS    150000
#define S3_BUCKET  "twopc-test"
#define MEMBERS    2 /* A, B */
#define PARTITIONS 3

static tpc_test_s3_t local_s3; /* the local S3 server: endpoint NULL, none */

/* What the processes share (MAP_SHARED): the test's controls and what the members saw. */
typedef struct {
    atomic_bool finish;   /* sources end their input at the next poll */
    atomic_int hold_pid;  /* the process whose hold operators block their snapshots, 0: none */
    atomic_int gate_pid;  /* the process whose membership thread waits at a lost assignment */
    atomic_int gate_need; /* ... until this many of its units ended fenced */
    atomic_ullong
        quiet_at[UNITS]; /* the checkpoint at which the unit's source in hold_pid stopped */
    atomic_ullong quiet_next[UNITS]; /* ... and the number it stopped before */
    atomic_ullong held[UNITS];       /* the checkpoint the unit's hold operator blocks in */
    atomic_ullong end[UNITS];        /* where the unit's input ended */
    atomic_int running[MEMBERS][UNITS];
    atomic_int assigned[MEMBERS][UNITS], fenced[MEMBERS][UNITS], failed[MEMBERS][UNITS];
    atomic_int finished[MEMBERS][UNITS];
    atomic_int fenced_code[MEMBERS][UNITS];
    atomic_int fenced_total[MEMBERS];
    atomic_int completed[MEMBERS][UNITS]; /* checkpoints completed since the unit was assigned */
    atomic_int opens[MEMBERS][UNITS];     /* instances of the unit's job opened */
    atomic_int opens_at_fence[MEMBERS][UNITS];
    atomic_int assigned_after_fence[MEMBERS][UNITS];
} zw_t;

/* The names of one run, the same in every process. */
typedef struct {
    char app[96], topic[128], table[96], marker[96], dir[512];
    bool consumer_protocol;
} zrun_t;

static zw_t *w;
static const zrun_t *run;
static int me; /* in a member process: 0 A, 1 B */

/* ---- a unit's job ---------------------------------------------------------------------------- */

typedef struct {
    int unit;
    uint64_t next;
    bool quiet; /* stopped at a checkpoint of the held process: it writes nothing more */
} zsource_t;

static uint64_t key_of(int unit, uint64_t seq)
{
    return ((uint64_t)unit << 40) | seq;
}

static tpc_error_t *zs_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx;
    zsource_t *s = calloc(1, sizeof *s);
    s->unit = *(int *)arg;
    atomic_fetch_add(&w->opens[me][s->unit], 1);
    *self = s;
    return NULL;
}

static tpc_error_t *zs_init(void *self, tpc_ctx_t *ctx, const tpc_state_reader_t *restored)
{
    (void)ctx;
    zsource_t *s = self;
    for (size_t i = 0; i < tpc_state_count(restored, TPC_STATE_LIST); i++) {
        const void *p;
        size_t len;
        tpc_state_get(restored, TPC_STATE_LIST, i, &p, &len);
        if (len == sizeof s->next)
            memcpy(&s->next, p, sizeof s->next);
    }
    return NULL;
}

static tpc_error_t *zs_poll(void *self, tpc_ctx_t *ctx, tpc_poll_result_t *result)
{
    zsource_t *s = self;
    if (atomic_load(&w->finish)) {
        atomic_store(&w->end[s->unit], s->next);
        *result = TPC_POLL_END;
        return NULL;
    }
    for (int i = 0; !s->quiet && i < 5; i++, s->next++) {
        uint8_t k[8];
        uint64_t key = key_of(s->unit, s->next);
        for (int b = 0; b < 8; b++)
            k[b] = (uint8_t)(key >> (56 - 8 * b));
        tpc_record_t rec = {.key = k, .key_len = 8, .value = k, .value_len = 8};
        tpc_emit(ctx, &rec);
    }
    usleep(10000);
    *result = TPC_POLL_MORE;
    return NULL;
}

static tpc_error_t *zs_snapshot(void *self, tpc_ctx_t *ctx, uint64_t id, tpc_state_writer_t *wr)
{
    (void)ctx;
    zsource_t *s = self;
    if (!s->quiet && atomic_load(&w->hold_pid) == getpid()) {
        s->quiet = true;
        atomic_store(&w->quiet_next[s->unit], s->next);
        atomic_store(&w->quiet_at[s->unit], id);
    }
    return tpc_state_add(wr, TPC_STATE_LIST, &s->next, sizeof s->next);
}

static void zs_close(void *self, tpc_ctx_t *ctx)
{
    (void)ctx;
    free(self);
}

static const tpc_operator_ops_t zsource_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = zs_open,
    .initialize_state = zs_init,
    .poll = zs_poll,
    .snapshot_state = zs_snapshot,
    .close = zs_close,
};

/* Passes records on; in the process hold_pid names, its snapshot of the checkpoint at which the
 * source stopped waits until that changes. */
static tpc_error_t *zh_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx;
    *self = arg;
    return NULL;
}

static tpc_error_t *zh_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *b)
{
    (void)self;
    for (size_t i = 0; i < tpc_batch_count(b); i++) {
        tpc_record_t r;
        tpc_batch_get(b, i, &r);
        if (tpc_emit(ctx, &r) != TPC_OK)
            return NULL; /* canceled */
    }
    return NULL;
}

static tpc_error_t *zh_snapshot(void *self, tpc_ctx_t *ctx, uint64_t id, tpc_state_writer_t *wr)
{
    (void)ctx;
    (void)wr;
    int unit = *(int *)self;
    uint64_t at = atomic_load(&w->quiet_at[unit]);
    if (atomic_load(&w->hold_pid) != getpid() || !at || id < at)
        return NULL;
    atomic_store(&w->held[unit], id);
    while (atomic_load(&w->hold_pid) == getpid())
        usleep(2000);
    return NULL;
}

static const tpc_operator_ops_t zhold_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = zh_open,
    .process = zh_process,
    .snapshot_state = zh_snapshot,
};

typedef struct {
    int unit;
    tpc_txn_sink_t *kafka, *pg;
} zjob_t;

static void on_checkpoint(void *opaque, uint64_t id, bool completed, uint64_t duration_us,
                          const char *reason)
{
    (void)id;
    (void)duration_us;
    (void)reason;
    if (completed)
        atomic_fetch_add(&w->completed[me][((zjob_t *)opaque)->unit], 1);
}

static tpc_error_t *set_all(tpc_txn_sink_t *sink, const char *const (*kv)[2], size_t n)
{
    tpc_error_t *err = NULL;
    for (size_t i = 0; !err && i < n; i++)
        err = tpc_txn_sink_set(sink, kv[i][0], kv[i][1]);
    return err;
}

static tpc_error_t *zbuild(void *opaque, const tpc_cluster_unit_t *unit, tpc_job_t *job,
                           void **resources)
{
    (void)opaque;
    zjob_t *r = calloc(1, sizeof *r);
    r->unit = unit->unit;
    *resources = r;
    const char *const kafka_keys[][2] = {
        {"transactional.id.prefix", unit->transactional_id_prefix},
        {"kafka.linger.ms", "5"},
        /* far above the reader's wait: a transaction left open stays open while the test reads */
        {"kafka.transaction.timeout.ms", "600000"},
    };
    const char *const pg_keys[][2] = {
        {"pg.conninfo", tpc_test_env("TWOPC_TEST_PG_CONNINFO")},
        {"pg.table", run->table},
        {"pg.gid-prefix", unit->gid_prefix},
        {"pg.marker-table", run->marker},
    };
    int src, hold, pg, kafka;
    tpc_error_t *err = tpc_job_set(job, "checkpoint.interval.ms", "300");
    if (!err) /* the held checkpoint outlives the freeze */
        err = tpc_job_set(job, "checkpoint.timeout.ms", "300000");
    if (!err)
        err = tpc_job_set(job, "restart.delay.ms", "200");
    if (!err && tpc_job_set_checkpoint_callback(job, on_checkpoint, r) != TPC_OK)
        err = tpc_error_new(TPC_ERR_INVALID_ARG, 0, "no checkpoint callback");
    if (!err)
        err = tpc_job_add_vertex(job, "numbers", 1, &zsource_ops, &r->unit, &src);
    if (!err)
        err = tpc_job_add_vertex(job, "hold", 1, &zhold_ops, &r->unit, &hold);
    if (!err)
        err = tpc_kafka_sink_new(tpc_test_env("TWOPC_TEST_KAFKA_BOOTSTRAP"), run->topic, &r->kafka);
    if (!err)
        err = set_all(r->kafka, kafka_keys, sizeof kafka_keys / sizeof *kafka_keys);
    if (!err)
        err = tpc_txn_sink_add_to_job(r->kafka, job, "kafka", 1, &kafka);
    if (!err)
        err = tpc_pg_sink_new(&r->pg);
    if (!err)
        err = set_all(r->pg, pg_keys, sizeof pg_keys / sizeof *pg_keys);
    if (!err)
        err = tpc_txn_sink_add_to_job(r->pg, job, "postgres", 1, &pg);
    if (!err)
        err = tpc_job_connect(job, src, kafka, TPC_EDGE_FORWARD);
    if (!err)
        err = tpc_job_connect(job, src, hold, TPC_EDGE_FORWARD);
    if (!err)
        err = tpc_job_connect(job, hold, pg, TPC_EDGE_FORWARD);
    return err;
}

static void zrelease(void *opaque, const tpc_cluster_unit_t *unit, void *resources)
{
    (void)opaque;
    (void)unit;
    zjob_t *r = resources;
    if (r) {
        tpc_txn_sink_destroy(r->kafka);
        tpc_txn_sink_destroy(r->pg);
    }
    free(r);
}

/* ---- a member process ------------------------------------------------------------------------ */

static tpc_cluster_t *member;

static void on_event(void *opaque, const tpc_cluster_event_t *ev)
{
    (void)opaque;
    int u = ev->unit;
    switch (ev->kind) {
    case TPC_CLUSTER_UNIT_ASSIGNED:
        atomic_store(&w->completed[me][u], 0);
        atomic_fetch_add(&w->assigned[me][u], 1);
        atomic_store(&w->running[me][u], 1);
        if (atomic_load(&w->fenced[me][u]))
            atomic_fetch_add(&w->assigned_after_fence[me][u], 1);
        break;
    case TPC_CLUSTER_UNIT_RELEASED:
    case TPC_CLUSTER_UNIT_LOST:
        atomic_store(&w->running[me][u], 0);
        break;
    case TPC_CLUSTER_UNIT_FINISHED:
        atomic_fetch_add(&w->finished[me][u], 1);
        break;
    case TPC_CLUSTER_UNIT_FENCED:
        fprintf(stderr, "member %c unit %d fenced: %s\n", "AB"[me], u,
                tpc_error_message(ev->error));
        atomic_store(&w->fenced_code[me][u], (int)tpc_error_code(ev->error));
        atomic_store(&w->opens_at_fence[me][u], atomic_load(&w->opens[me][u]));
        atomic_fetch_add(&w->fenced[me][u], 1);
        atomic_fetch_add(&w->fenced_total[me], 1);
        break;
    case TPC_CLUSTER_UNIT_FAILED:
        fprintf(stderr, "member %c unit %d failed: %s\n", "AB"[me], u,
                tpc_error_message(ev->error));
        atomic_fetch_add(&w->failed[me][u], 1);
        break;
    }
}

/* The zombie's membership thread learns of its loss only once its jobs had their chance. */
static void on_log(void *opaque, tpc_log_level_t level, const char *msg)
{
    (void)opaque;
    (void)level;
    fprintf(stderr, "member %c: %s\n", "AB"[me], msg);
    if (atomic_load(&w->gate_pid) != getpid() || strncmp(msg, "lost units", 10) != 0)
        return;
    int64_t until = tpc_test_now_ms() + 60000;
    while (atomic_load(&w->fenced_total[me]) < atomic_load(&w->gate_need) &&
           tpc_test_now_ms() < until)
        usleep(5000);
    fprintf(stderr, "member %c: its membership goes on after %d fenced units\n", "AB"[me],
            atomic_load(&w->fenced_total[me]));
}

static void on_term(int sig)
{
    (void)sig;
    tpc_cluster_stop(member);
}

static void set_ok(tpc_error_t *err)
{
    if (err) {
        fprintf(stderr, "member %c: %s\n", "AB"[me], tpc_error_message(err));
        _exit(2);
    }
}

static void member_main(void)
{
    /* A session of its own: a stopped process in a group that an exit leaves orphaned gets SIGHUP
     */
    setsid();
    set_ok(tpc_cluster_new(tpc_test_env("TWOPC_TEST_KAFKA_BOOTSTRAP"), run->app, UNITS, &member));
    if (local_s3.endpoint) {
        set_ok(tpc_cluster_set(member, "checkpoint.storage", "s3"));
        set_ok(tpc_cluster_set(member, "checkpoint.s3.bucket", S3_BUCKET));
        set_ok(tpc_cluster_set(member, "checkpoint.s3.endpoint", local_s3.endpoint));
        set_ok(tpc_cluster_set(member, "checkpoint.s3.region", "us-east-1"));
        set_ok(tpc_cluster_set(member, "checkpoint.s3.prefix", run->app));
    } else {
        set_ok(tpc_cluster_set(member, "checkpoint.dir", run->dir));
    }
    set_ok(tpc_cluster_set(member, "unit.restart.delay.ms", "500"));
    if (run->consumer_protocol) {
        set_ok(tpc_cluster_set(member, "group.protocol", "consumer"));
    } else {
        /* No static membership: a member that stops leaves the group, and its units move at once
         * rather than after its session timeout. */
        set_ok(tpc_cluster_set(member, "kafka.session.timeout.ms", "6000"));
        set_ok(tpc_cluster_set(member, "kafka.heartbeat.interval.ms", "500"));
    }
    set_ok(tpc_cluster_set_builder(member, zbuild, zrelease, NULL));
    tpc_cluster_set_event_callback(member, on_event, NULL);
    tpc_cluster_set_logger(member, on_log, NULL, TPC_LOG_INFO);
    struct sigaction sa = {.sa_handler = on_term};
    sigaction(SIGTERM, &sa, NULL);
    tpc_error_t *err = tpc_cluster_run(member);
    if (err)
        fprintf(stderr, "member %c: %s\n", "AB"[me], tpc_error_message(err));
    int rc = err ? 3 : 0;
    tpc_error_destroy(err);
    tpc_cluster_destroy(member);
    _exit(rc);
}

static pid_t member_start(int who)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test leaves no member behind */
        me = who;
        member_main();
    }
    return pid;
}

/* SIGTERM, and the member must stop cleanly: it never crashed. */
static void member_end(pid_t pid, char name)
{
    ck_assert_int_eq(kill(pid, SIGTERM), 0);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "member %c did not stop cleanly: %s %d", name,
                  WIFSIGNALED(status) ? "signal" : "exit status",
                  WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

#define WAIT_FOR(what)                                                                             \
    do {                                                                                           \
        int64_t until_ = tpc_test_now_ms() + WAIT_MS;                                              \
        while (!(what) && tpc_test_now_ms() < until_)                                              \
            usleep(50 * 1000);                                                                     \
        ck_assert_msg((what), "waited %d ms for: %s", WAIT_MS, #what);                             \
    } while (0)

static int running(int m)
{
    int n = 0;
    for (int u = 0; u < UNITS; u++)
        n += atomic_load(&w->running[m][u]);
    return n;
}

/* Every unit running on @m has completed at least @n checkpoints there. */
static bool completed_all(int m, int n)
{
    for (int u = 0; u < UNITS; u++)
        if (atomic_load(&w->running[m][u]) && atomic_load(&w->completed[m][u]) < n)
            return false;
    return true;
}

static void max_seq(void *opaque, const rd_kafka_message_t *msg)
{
    uint64_t *most = opaque; /* per unit: 1 + the highest number seen */
    if (msg->key_len != 8)
        return;
    const uint8_t *k = msg->key;
    uint64_t v = 0;
    for (int b = 0; b < 8; b++)
        v = v << 8 | k[b];
    int unit = (int)(v >> 40);
    uint64_t seq = v & ((1ull << 40) - 1);
    if (unit >= 0 && unit < UNITS && seq + 1 > most[unit])
        most[unit] = seq + 1;
}

static size_t open_transactions(const char *bootstrap, const char *prefix, bool print)
{
    tpc__kafka_wire_conf_t wire = {.bootstrap = bootstrap};
    tpc__kafka_txn_info_t *txns = NULL;
    size_t n = 0;
    TPC_TEST_OK(tpc__kafka_list_transactions(&wire, prefix, true, KT_TIMEOUT_MS, &txns, &n));
    for (size_t i = 0; print && i < n; i++)
        fprintf(stderr, "check_cluster_zombie: open: %s %s producer id %lld epoch %d\n", txns[i].id,
                txns[i].state, (long long)txns[i].producer_id, (int)txns[i].producer_epoch);
    free(txns);
    return n;
}

/* A's held units: no prepared gid (the checkpoint before the held one committed, the held one not
 * prepared), one open Kafka transaction (the held one's, pre-committed; the one before committed),
 * and every record of the held checkpoint on the broker. */
static bool settled(PGconn *pg, const char *bootstrap, const bool *taken)
{
    uint64_t most[UNITS] = {0};
    kt_read_topic(bootstrap, run->topic, "read_uncommitted", max_seq, most);
    for (int u = 0; u < UNITS; u++) {
        if (!taken[u])
            continue;
        char prefix[160];
        snprintf(prefix, sizeof prefix, "%s-u%d", run->app, u);
        if (tpc_test_pg_prepared(pg, prefix) != 0)
            return false;
        snprintf(prefix, sizeof prefix, "%s-u%d-", run->app, u);
        if (open_transactions(bootstrap, prefix, false) != 1)
            return false;
        if (most[u] < atomic_load(&w->quiet_next[u]))
            return false;
    }
    return true;
}

/* ---- the outputs ----------------------------------------------------------------------------- */

typedef struct {
    unsigned char *seen[UNITS];
    long dups, foreign;
} tally_t;

static void tally_key(tally_t *t, const void *key, size_t len)
{
    if (len != 8) {
        t->foreign++;
        return;
    }
    const uint8_t *k = key;
    uint64_t v = 0;
    for (int b = 0; b < 8; b++)
        v = v << 8 | k[b];
    int unit = (int)(v >> 40);
    uint64_t seq = v & ((1ull << 40) - 1);
    if (unit < 0 || unit >= UNITS || seq >= atomic_load(&w->end[unit]))
        t->foreign++;
    else if (t->seen[unit][seq]++)
        t->dups++;
}

static void tally_record(void *opaque, const rd_kafka_message_t *msg)
{
    tally_key(opaque, msg->key, msg->key_len);
}

/* @what: every record of every unit exactly once, nothing else. */
static void tally_check(tally_t *t, const char *what, long total)
{
    long missing = 0;
    for (int u = 0; u < UNITS; u++) {
        for (uint64_t i = 0; i < atomic_load(&w->end[u]); i++)
            missing += !t->seen[u][i];
        free(t->seen[u]);
    }
    fprintf(stderr, "check_cluster_zombie: %s: %ld records, %ld twice, %ld missing, %ld foreign\n",
            what, total, t->dups, missing, t->foreign);
    ck_assert_msg(t->dups == 0 && missing == 0 && t->foreign == 0,
                  "%s: %ld records, %ld twice, %ld missing, %ld foreign", what, total, t->dups,
                  missing, t->foreign);
}

static void tally_init(tally_t *t)
{
    *t = (tally_t){0};
    for (int u = 0; u < UNITS; u++)
        t->seen[u] = calloc(atomic_load(&w->end[u]) + 1, 1);
}

static void verify(PGconn *pg, const char *bootstrap)
{
    tally_t t;
    tally_init(&t);
    long total = kt_read_topic(bootstrap, run->topic, "read_committed", tally_record, &t);
    tally_check(&t, "read_committed consumer", total);

    tally_init(&t);
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT k FROM %s", run->table);
    PGresult *res = PQexecParams(pg, sql, 0, NULL, NULL, NULL, NULL, 1);
    ck_assert_msg(PQresultStatus(res) == PGRES_TUPLES_OK, "%s", PQerrorMessage(pg));
    for (int i = 0; i < PQntuples(res); i++)
        tally_key(&t, PQgetvalue(res, i, 0), (size_t)PQgetlength(res, i, 0));
    total = PQntuples(res);
    PQclear(res);
    tally_check(&t, "SQL", total);

    long long prepared = tpc_test_pg_long(
        pg, "SELECT count(*) FROM pg_prepared_xacts WHERE gid LIKE '%s-u%%'", run->app);
    fprintf(stderr, "check_cluster_zombie: prepared transactions of the application: %lld\n",
            prepared);
    ck_assert_int_eq(prepared, 0);

    ck_assert_uint_eq(open_transactions(bootstrap, run->app, true), 0);
}

/* ---- the test -------------------------------------------------------------------------------- */

static void zombie(bool consumer_protocol)
{
    if (!local_s3.endpoint) {
        fprintf(stderr,
                "check_cluster_zombie: WITHOUT S3: no local S3 server (tests/services/s3.sh "
                "could not start moto), the checkpoints go to a folder\n");
        ck_assert_msg(!getenv("TWOPC_TEST_S3_REQUIRED") ||
                          strcmp(getenv("TWOPC_TEST_S3_REQUIRED"), "1") != 0,
                      "TWOPC_TEST_S3_REQUIRED=1, but there is no local S3 server");
    }
    const char *bootstrap = tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP");
    ck_assert_ptr_nonnull(bootstrap);
    PGconn *pg = tpc_test_pg_connect();
    ck_assert_msg(pg != NULL, "no test server: TWOPC_TEST_PG_CONNINFO");

    w = mmap(NULL, sizeof *w, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(w, MAP_FAILED);
    memset(w, 0, sizeof *w);
    zrun_t *r = calloc(1, sizeof *r);
    run = r;
    r->consumer_protocol = consumer_protocol;
    tpc_test_unique_name(r->app, sizeof r->app, "zombie", '-');
    tpc_test_unique_name(r->topic, sizeof r->topic, "twopc-zombie", '-');
    tpc_test_unique_name(r->table, sizeof r->table, "zombie", '_');
    tpc_test_unique_name(r->marker, sizeof r->marker, "zombie_markers", '_');
    char *d = tpc_test_tmpdir("zombie");
    snprintf(r->dir, sizeof r->dir, "%s", d);
    free(d);
    kt_create_topic(bootstrap, r->topic, PARTITIONS);
    ck_assert(tpc_test_pg_exec(pg, "CREATE TABLE %s (k bytea, v bytea)", r->table));

    /* A runs every unit, then B joins and takes a share. */
    pid_t a = member_start(0);
    WAIT_FOR(running(0) == UNITS && completed_all(0, 1));
    pid_t b = member_start(1);
    WAIT_FOR(running(1) > 0 && running(0) > 0 && running(0) + running(1) == UNITS &&
             completed_all(0, 1) && completed_all(1, 1));

    /* A's jobs are held inside a checkpoint, and A freezes. */
    bool taken[UNITS];
    int ntaken = 0;
    for (int u = 0; u < UNITS; u++)
        ntaken += taken[u] = atomic_load(&w->running[0][u]);
    atomic_store(&w->hold_pid, a);
    for (int u = 0; u < UNITS; u++)
        if (taken[u])
            WAIT_FOR(atomic_load(&w->held[u]) > 0);
    /* Nothing of A in flight when it freezes: the checkpoint before the held one committed in
     * both sinks, and the broker has every record of the held one. */
    WAIT_FOR(settled(pg, bootstrap, taken));
    ck_assert_int_eq(kill(a, SIGSTOP), 0);
    int64_t stopped = tpc_test_now_ms();

    /* B takes A's units over and completes checkpoints on them. */
    WAIT_FOR(running(1) == UNITS);
    int64_t taken_over = tpc_test_now_ms() - stopped;
    WAIT_FOR(completed_all(1, 2));
    for (int u = 0; u < UNITS; u++)
        ck_assert_int_eq(atomic_load(&w->running[0][u]), taken[u]); /* A knows nothing yet */

    /* A resumes: each of its units must end fenced, without a restart. */
    atomic_store(&w->gate_need, ntaken);
    atomic_store(&w->gate_pid, a);
    atomic_store(&w->hold_pid, 0);
    ck_assert_int_eq(kill(a, SIGCONT), 0);
    int64_t resumed = tpc_test_now_ms();
    WAIT_FOR(atomic_load(&w->fenced_total[0]) >= ntaken);
    int64_t fenced_after = tpc_test_now_ms() - resumed;
    for (int u = 0; u < UNITS; u++) {
        if (!taken[u])
            continue;
        ck_assert_int_eq(atomic_load(&w->fenced[0][u]), 1);
        ck_assert_msg(atomic_load(&w->fenced_code[0][u]) == TPC_ERR_FENCED,
                      "unit %d of A ended with %s", u,
                      tpc_err_name((tpc_err_t)atomic_load(&w->fenced_code[0][u])));
    }
    member_end(a, 'A');
    for (int u = 0; u < UNITS; u++) {
        ck_assert_int_eq(atomic_load(&w->failed[0][u]), 0);
        /* an instance opened after the fence came from a new assignment, never from a restart */
        if (taken[u])
            ck_assert_int_le(atomic_load(&w->opens[0][u]) - atomic_load(&w->opens_at_fence[0][u]),
                             atomic_load(&w->assigned_after_fence[0][u]));
    }

    /* B goes on past A's prepared gids, then ends its input. */
    WAIT_FOR(running(1) == UNITS);
    for (int u = 0; u < UNITS; u++)
        atomic_store(&w->completed[1][u], 0);
    WAIT_FOR(completed_all(1, 2));
    atomic_store(&w->finish, true);
    for (int u = 0; u < UNITS; u++)
        WAIT_FOR(atomic_load(&w->finished[1][u]) > 0);
    member_end(b, 'B');
    for (int u = 0; u < UNITS; u++) {
        ck_assert_int_eq(atomic_load(&w->fenced[1][u]), 0);
        ck_assert_int_eq(atomic_load(&w->failed[1][u]), 0);
    }
    fprintf(stderr,
            "check_cluster_zombie (%s, librdkafka %s, %s): %d units of A on B %lld ms after "
            "SIGSTOP; A fenced on each %lld ms after SIGCONT; ends %llu %llu %llu\n",
            consumer_protocol ? "consumer" : "classic", rd_kafka_version_str(),
            local_s3.endpoint ? "S3" : "folder", ntaken, (long long)taken_over,
            (long long)fenced_after, (unsigned long long)atomic_load(&w->end[0]),
            (unsigned long long)atomic_load(&w->end[1]),
            (unsigned long long)atomic_load(&w->end[2]));

    verify(pg, bootstrap);

    kt_delete_topic(bootstrap, r->topic);
    tpc_test_pg_exec(pg, "DROP TABLE IF EXISTS %s", r->table);
    tpc_test_pg_exec(pg, "DROP TABLE IF EXISTS %s", r->marker);
    PQfinish(pg);
    tpc_test_rmdir(r->dir);
    free(r);
    munmap(w, sizeof *w);
}

START_TEST(test_zombie_classic)
{
    zombie(false);
}
END_TEST

START_TEST(test_zombie_consumer_protocol)
{
    zombie(true);
}
END_TEST

int main(void)
{
    /* moto takes any credentials; the units' jobs read them from the environment */
    setenv("AWS_ACCESS_KEY_ID", "twopc-test", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "twopc-test-secret", 1);
    tpc_test_s3_start(&local_s3, "check_cluster_zombie", S3_BUCKET);
    Suite *s = suite_create("cluster_zombie");
    TCase *tc = tcase_create("zombie");
    tcase_set_timeout(tc, 400);
    tcase_add_test(tc, test_zombie_classic);
    /* KIP-848's consumer needs librdkafka 2.12 (check_cluster_handoff checks the refusal). */
    if (rd_kafka_version() >= 0x020c0000)
        tcase_add_test(tc, test_zombie_consumer_protocol);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    tpc_test_s3_stop(&local_s3, "check_cluster_zombie");
    return failed ? 1 : 0;
}
