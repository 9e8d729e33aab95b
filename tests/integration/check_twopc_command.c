/*
 * The `twopc` command against the real servers, on what a job killed with kill -9 leaves behind.
 * The job (this binary run again with "--child") writes a sequence into an exactly-once Kafka sink
 * and an exactly-once PostgreSQL sink, two subtasks each, and kills itself when checkpoint 3
 * completes, before its commits: checkpoint 3's transactions are prepared in PostgreSQL and open in
 * Kafka, promised by a completed checkpoint; whatever the killed run had begun after it is not.
 *
 * - The checkpoint listing of that real folder names checkpoint 3 as the one a restart restores,
 *   its vertices, and its pending transactions with ids, producer ids and epochs, and gids.
 * - `pg transactions` and `kafka transactions` classify every open transaction; `twopc resolve`
 *   (the library's own restore) then does what a restart would, and the verdicts match what it
 *   did: every "pending" one committed, every "lingering" one aborted. A read_committed consumer
 *   and SQL then see exactly the records checkpoint 3 covers, once each; nothing of the prefixes is
 *   left prepared or open.
 * - While a job holds the folder's lease, `kafka commit` / `abort`, `resolve` and `pg resolve` are
 *   refused and end nothing.
 * - Ended by hand instead (`kafka commit` / `kafka abort` one by one, `pg resolve`), a restart of
 *   the job afterwards agrees (it would report data loss for a promised transaction that was
 *   aborted) and the outputs hold every record exactly once.
 */
#include "check_kafka_child.h"
#include "runtime_internal.h"
#include "tpc_pg.h"
#include "tpc_test_pg.h"

#include <libgen.h>
#include <stdarg.h>

#define RECORDS 2000
#define KILL_AT "3"

/* ---- the child: sequence -> Kafka and PostgreSQL, kill -9 when checkpoint KILL_AT completes -- */

static void kill_on_checkpoint(void *opaque, uint64_t id, bool completed, uint64_t us,
                               const char *why)
{
    (void)us, (void)why;
    if (completed && id == *(const uint64_t *)opaque)
        kill(getpid(), SIGKILL);
}

/* BINARY --child BOOTSTRAP TOPIC KPREFIX TABLE GPREFIX MARKER CKPT KILL_AT */
static int child_main(int argc, char **argv)
{
    alarm(120);
    if (argc != 10)
        return 2;
    uint64_t kill_at = strtoull(argv[9], NULL, 10);
    tpc_test_seq_conf_t src = {.count_default = RECORDS, .per_poll = 4, .sleep_us = 4000};
    tpc_job_t *job = tpc_job_new("twopc-command");
    tpc_txn_sink_t *kafka = NULL, *pg = NULL;
    tpc_job_set_logger(job, kc_log_line, NULL, TPC_LOG_INFO);
    tpc_error_t *err = tpc_job_set(job, "checkpoint.dir", argv[8]);
    if (!err)
        err = tpc_job_set(job, "checkpoint.interval.ms", "100");
    if (!err)
        err = tpc_kafka_sink_new(argv[2], argv[3], &kafka);
    if (!err)
        err = tpc_txn_sink_set(kafka, "transactional.id.prefix", argv[4]);
    if (!err)
        err = tpc_txn_sink_set(kafka, "kafka.linger.ms", "2");
    if (!err)
        err = tpc_pg_sink_new(&pg);
    const char *const kv[][2] = {{"pg.conninfo", tpc_test_env("TWOPC_TEST_PG_CONNINFO")},
                                 {"pg.table", argv[5]},
                                 {"pg.gid-prefix", argv[6]},
                                 {"pg.marker-table", argv[7]}};
    for (size_t i = 0; !err && i < sizeof kv / sizeof kv[0]; i++)
        err = tpc_txn_sink_set(pg, kv[i][0], kv[i][1]);
    if (kill_at)
        tpc_job_set_checkpoint_callback(job, kill_on_checkpoint, &kill_at);
    int s, k, p;
    if (!err)
        err = tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s);
    if (!err)
        err = tpc_txn_sink_add_to_job(kafka, job, "kafka", 2, &k);
    if (!err)
        err = tpc_txn_sink_add_to_job(pg, job, "rows", 2, &p);
    if (!err)
        err = tpc_job_connect(job, s, k, TPC_EDGE_REBALANCE);
    if (!err)
        err = tpc_job_connect(job, s, p, TPC_EDGE_REBALANCE);
    tpc_job_result_t result = TPC_JOB_CANCELED;
    if (!err)
        err = tpc_job_run(job, &result);
    int rc = err || result != TPC_JOB_FINISHED;
    if (rc)
        fprintf(stderr, "child: %s\n", err ? tpc_error_message(err) : "did not finish");
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(kafka);
    tpc_txn_sink_destroy(pg);
    return rc;
}

/* ---- the parent --------------------------------------------------------------------------- */

static char twopc_bin[4096];

typedef struct {
    kc_scenario_t kc;
    char table[96], gprefix[96], marker[96];
    const char *conninfo;
    PGconn *pg;
} scenario_t;

static void scenario_init(scenario_t *sc, const char *tag)
{
    kc_scenario_init(&sc->kc, tag);
    tpc_test_unique_name(sc->table, sizeof sc->table, "cmd", '_');
    tpc_test_unique_name(sc->gprefix, sizeof sc->gprefix, "cmd", '-');
    tpc_test_unique_name(sc->marker, sizeof sc->marker, "cmd_markers", '_');
    sc->conninfo = tpc_test_env_require("TWOPC_TEST_PG_CONNINFO");
    ck_assert_ptr_nonnull(sc->conninfo);
    sc->pg = tpc_test_pg_connect();
    ck_assert_ptr_nonnull(sc->pg);
    ck_assert(tpc_test_pg_exec(sc->pg, "CREATE TABLE %s (k bytea, v bytea)", sc->table));
}

static void scenario_clean(scenario_t *sc)
{
    tpc_test_pg_rollback_prefix(sc->pg, sc->gprefix);
    tpc_test_pg_exec(sc->pg, "DROP TABLE %s", sc->table);
    tpc_test_pg_exec(sc->pg, "DROP TABLE IF EXISTS %s", sc->marker);
    PQfinish(sc->pg);
    kc_scenario_clean(&sc->kc);
}

/* Run the job; @kill_at "0" runs it to its end. */
static void run_child(const scenario_t *sc, const char *kill_at)
{
    const char *argv[] = {sc->kc.self, "--child",   sc->kc.bootstrap, sc->kc.topic, sc->kc.prefix,
                          sc->table,   sc->gprefix, sc->marker,       sc->kc.ckpt,  kill_at,
                          NULL};
    pid_t pid = tpc_test_spawn(argv, sc->kc.log, -1);
    ck_assert_int_gt(pid, 0);
    int status = 0;
    bool ended = tpc_test_wait(pid, 90000, &status);
    if (!ended)
        tpc_test_kill(pid);
    bool want_kill = strcmp(kill_at, "0") != 0;
    bool ok = ended && (want_kill ? WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL
                                  : WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (!ok)
        tpc_test_dump_log(sc->kc.log);
    ck_assert_msg(ok, "the job %s", want_kill ? "was not killed at its checkpoint" : "failed");
}

/* Run `twopc ARGS` (a shell command line after the program); its stdout into @out (@cap bytes).
 * @returns its exit status, -1 when it did not exit. */
static int twopc(char *out, size_t cap, const char *fmt, ...) TPC_PRINTF(3, 4);
static int twopc(char *out, size_t cap, const char *fmt, ...)
{
    char args[8192], line[sizeof args + sizeof twopc_bin + 8];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(line, sizeof line, "'%s' %s", twopc_bin, args);
    FILE *p = popen(line, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int status = pclose(p);
    printf("$ twopc %s\n%s", args, out);
    fflush(stdout);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The records the source had emitted before barrier @id: its position in checkpoint @id. */
static uint64_t promised_records(const char *dir, uint64_t id)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/chk-%020llu", dir, (unsigned long long)id);
    tpc__checkpoint_t c;
    tpc_error_t *err = tpc__checkpoint_read(path, &c);
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
    uint64_t next = 0;
    for (int v = 0; v < c.nvertices; v++) {
        if (strcmp(c.vertices[v].name, "source") != 0)
            continue;
        const tpc__buf_t *list = &c.vertices[v].subtasks[0].state.list;
        ck_assert_uint_eq(list->len, 12); /* one entry: u32 length, 8 bytes */
        memcpy(&next, list->data + 4, 8);
    }
    tpc__checkpoint_free(&c);
    return next;
}

/* A transaction as a listing shows it. */
typedef struct {
    char id[200];
    char state[32];
    char cls[32];
    long long pid;
    int epoch;
} item_t;

/* The rows of a `pg transactions` listing: GID STATE CLASS ... */
static size_t parse_pg(const char *out, const char *prefix, item_t *items, size_t cap)
{
    size_t n = 0;
    for (const char *l = out; l && *l && n < cap; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (strncmp(l, prefix, strlen(prefix)) == 0 &&
            sscanf(l, "%199s %31s %31s", items[n].id, items[n].state, items[n].cls) == 3)
            n++;
    return n;
}

/* The rows of a `kafka transactions` listing: ID STATE PID EPOCH AGE CLASS ... */
static size_t parse_kafka(const char *out, const char *prefix, item_t *items, size_t cap)
{
    size_t n = 0;
    for (const char *l = out; l && *l && n < cap;
         l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        double age;
        if (strncmp(l, prefix, strlen(prefix)) == 0 &&
            sscanf(l, "%199s %31s %lld %d %lf %31s", items[n].id, items[n].state, &items[n].pid,
                   &items[n].epoch, &age, items[n].cls) == 6)
            n++;
    }
    return n;
}

/* The pending transactions of checkpoint KILL_AT as `twopc checkpoint` prints them:
 * "SINK SUB pending CKPT CONNECTOR NAME [(producer id P, epoch E)]". */
static size_t parse_pending(const char *out, const char *connector, item_t *items, size_t cap)
{
    size_t n = 0;
    for (const char *l = out; l && *l && n < cap;
         l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        char sink[64], kind[16], conn[16];
        int sub;
        unsigned long long ckpt;
        item_t it = {.pid = -1, .epoch = -1};
        int got = sscanf(l, " %63s %d %15s %llu %15s %199s (producer id %lld, epoch %d)", sink,
                         &sub, kind, &ckpt, conn, it.id, &it.pid, &it.epoch);
        if (got >= 6 && strcmp(kind, "pending") == 0 && strcmp(conn, connector) == 0)
            items[n++] = it;
    }
    return n;
}

static const item_t *find(const item_t *items, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(items[i].id, id) == 0)
            return &items[i];
    return NULL;
}

/* Kafka (read_committed) and the table each hold records 0 .. @records - 1 once, nothing else. */
static void expect_outputs(const scenario_t *sc, uint64_t records, const char *what)
{
    kc_check_exactly_once(&sc->kc, records, what);
    long long rows = tpc_test_pg_long(sc->pg, "SELECT count(*) FROM %s", sc->table);
    long long distinct = tpc_test_pg_long(sc->pg, "SELECT count(DISTINCT k) FROM %s", sc->table);
    long long below = tpc_test_pg_long(
        sc->pg, "SELECT count(*) FROM %s WHERE substr(k, 4, 5) < '\\x%010llx'::bytea", sc->table,
        (unsigned long long)records);
    ck_assert_msg(rows == (long long)records && distinct == rows && below == rows,
                  "%s: postgresql: %lld rows, %lld distinct, %lld below %llu", what, rows, distinct,
                  below, (unsigned long long)records);
    ck_assert_int_eq(tpc_test_pg_prepared(sc->pg, sc->gprefix), 0);
}

static char out[65536];

START_TEST(test_listings_and_resolve_match_a_restart)
{
    scenario_t sc;
    scenario_init(&sc, "cmd-resolve");
    run_child(&sc, KILL_AT);
    uint64_t promised = promised_records(sc.kc.ckpt, 3);
    ck_assert_msg(promised > 0 && promised < RECORDS, "checkpoint 3 covers %llu records",
                  (unsigned long long)promised);
    /* What a run killed between its PREPARE for checkpoint 9 and that checkpoint's completion
     * leaves: a prepared transaction of the sink's prefix that no completed checkpoint promised. */
    PGconn *killed = tpc_test_pg_connect();
    ck_assert(tpc_test_pg_exec(killed, "BEGIN"));
    ck_assert(tpc_test_pg_exec(killed, "INSERT INTO %s VALUES ('\\x%016llx', 'x')", sc.table,
                               (unsigned long long)RECORDS + 7));
    ck_assert(tpc_test_pg_exec(killed, "PREPARE TRANSACTION '%s:1:2:9'", sc.gprefix));
    PQfinish(killed);

    /* The real checkpoint folder. */
    ck_assert_int_eq(twopc(out, sizeof out, "checkpoints %s", sc.kc.ckpt), 0);
    ck_assert_ptr_nonnull(strstr(out, "newest completed checkpoint 3"));
    ck_assert_msg(strstr(out, "\n3 ") && strstr(strstr(out, "\n3 "), "restore"),
                  "checkpoint 3 is not the one to restore");
    ck_assert_int_eq(twopc(out, sizeof out, "checkpoints %s --json", sc.kc.ckpt), 0);
    ck_assert_ptr_nonnull(strstr(out, "\"completed\":3,\"restore\":3,"));
    ck_assert_int_eq(twopc(out, sizeof out, "checkpoint %s --json", sc.kc.ckpt), 0);
    ck_assert_ptr_nonnull(strstr(out, "\"id\":3,"));
    ck_assert_ptr_nonnull(strstr(out, "\"job\":\"twopc-command\""));
    ck_assert_ptr_nonnull(strstr(out, "{\"name\":\"source\",\"parallelism\":1,"));
    ck_assert_ptr_nonnull(strstr(out, "{\"name\":\"kafka\",\"parallelism\":2,"));
    ck_assert_ptr_nonnull(strstr(out, "{\"name\":\"rows\",\"parallelism\":2,"));
    ck_assert_int_eq(twopc(out, sizeof out, "checkpoint %s", sc.kc.ckpt), 0);
    item_t kpend[8], gpend[8];
    size_t nk = parse_pending(out, "kafka", kpend, 8),
           ng = parse_pending(out, "postgres", gpend, 8);
    ck_assert_msg(nk >= 1 && ng >= 1, "checkpoint 3 lists %zu kafka and %zu postgres pending", nk,
                  ng);
    for (size_t i = 0; i < nk; i++)
        ck_assert_msg(strncmp(kpend[i].id, sc.kc.prefix, strlen(sc.kc.prefix)) == 0 &&
                          kpend[i].pid >= 0 && kpend[i].epoch >= 0,
                      "pending kafka transaction \"%s\" (%lld, %d)", kpend[i].id, kpend[i].pid,
                      kpend[i].epoch);
    for (size_t i = 0; i < ng; i++)
        ck_assert_msg(strncmp(gpend[i].id, sc.gprefix, strlen(sc.gprefix)) == 0 &&
                          strcmp(gpend[i].id + strlen(gpend[i].id) - 2, ":3") == 0,
                      "pending gid \"%s\"", gpend[i].id);

    /* The verdicts, before anything is resolved. */
    ck_assert_int_eq(twopc(out, sizeof out,
                           "pg transactions --conninfo '%s' --prefix %s --marker-table %s "
                           "--checkpoint-dir %s --check",
                           sc.conninfo, sc.gprefix, sc.marker, sc.kc.ckpt),
                     3);
    item_t pg[32];
    size_t npg = parse_pg(out, sc.gprefix, pg, 32);
    size_t pg_prepared = 0;
    for (size_t i = 0; i < npg; i++) {
        if (strcmp(pg[i].state, "prepared") != 0)
            continue;
        pg_prepared++;
        const char *want = find(gpend, ng, pg[i].id) ? "pending" : "lingering";
        ck_assert_msg(strcmp(pg[i].cls, want) == 0, "gid %s is %s, not %s", pg[i].id, pg[i].cls,
                      want);
    }
    for (size_t i = 0; i < ng; i++)
        ck_assert_msg(find(pg, npg, gpend[i].id), "pending gid %s is not listed", gpend[i].id);
    char left[128];
    snprintf(left, sizeof left, "%s:1:2:9", sc.gprefix);
    ck_assert_msg(find(pg, npg, left) && strcmp(find(pg, npg, left)->cls, "lingering") == 0,
                  "the prepared transaction of checkpoint 9 is not listed as lingering");
    ck_assert_int_eq(twopc(out, sizeof out,
                           "kafka transactions --bootstrap %s --prefix %s --checkpoint-dir %s "
                           "--check",
                           sc.kc.bootstrap, sc.kc.prefix, sc.kc.ckpt),
                     3);
    item_t kx[32];
    size_t nkx = parse_kafka(out, sc.kc.prefix, kx, 32);
    for (size_t i = 0; i < nkx; i++) {
        const item_t *p = find(kpend, nk, kx[i].id);
        bool promised_here = p && p->pid == kx[i].pid && p->epoch == kx[i].epoch;
        ck_assert_msg(strcmp(kx[i].cls, promised_here ? "pending" : "lingering") == 0,
                      "transactional id %s is %s", kx[i].id, kx[i].cls);
    }
    for (size_t i = 0; i < nk; i++) {
        const item_t *x = find(kx, nkx, kpend[i].id);
        ck_assert_msg(x && strcmp(x->state, "Ongoing") == 0 && strcmp(x->cls, "pending") == 0,
                      "pending transaction %s is not listed as open and pending", kpend[i].id);
    }

    /* What a restart would do, done by the library's own restore. */
    ck_assert_int_eq(twopc(out, sizeof out,
                           "resolve --checkpoint-dir %s --sink kafka=kafka "
                           "--set kafka.kafka.bootstrap.servers=%s --set kafka.topic=%s "
                           "--set kafka.transactional.id.prefix=%s --sink rows=postgres "
                           "--set 'rows.pg.conninfo=%s' --set rows.pg.table=%s "
                           "--set rows.pg.gid-prefix=%s --set rows.pg.marker-table=%s",
                           sc.kc.ckpt, sc.kc.bootstrap, sc.kc.topic, sc.kc.prefix, sc.conninfo,
                           sc.table, sc.gprefix, sc.marker),
                     0);
    ck_assert_ptr_nonnull(strstr(out, "done:"));

    /* The verdicts held: pending ones committed (their marker rows, CompleteCommit), lingering
     * ones rolled back and aborted. */
    for (size_t i = 0; i < npg; i++) {
        if (strcmp(pg[i].state, "prepared") != 0)
            continue;
        long long markers = tpc_test_pg_long(sc.pg, "SELECT count(*) FROM %s WHERE gid = '%s'",
                                             sc.marker, pg[i].id);
        ck_assert_msg(markers == (strcmp(pg[i].cls, "pending") == 0 ? 1 : 0),
                      "gid %s (%s) has %lld marker rows after resolve", pg[i].id, pg[i].cls,
                      markers);
    }
    ck_assert_int_eq(twopc(out, sizeof out, "kafka transactions --bootstrap %s --prefix %s --all",
                           sc.kc.bootstrap, sc.kc.prefix),
                     0);
    item_t after[64];
    size_t nafter = parse_kafka(out, sc.kc.prefix, after, 64);
    for (size_t i = 0; i < nkx; i++) {
        const item_t *a = find(after, nafter, kx[i].id);
        ck_assert_ptr_nonnull(a);
        if (strcmp(kx[i].cls, "pending") == 0)
            ck_assert_msg(strcmp(a->state, "CompleteCommit") == 0 && a->pid == kx[i].pid,
                          "%s: %s after resolve", a->id, a->state);
        else
            ck_assert_msg(strcmp(a->state, "CompleteAbort") == 0 || strcmp(a->state, "Empty") == 0,
                          "%s: %s after resolve", a->id, a->state);
    }
    ck_assert_int_eq(twopc(out, sizeof out, "kafka transactions --bootstrap %s --prefix %s --check",
                           sc.kc.bootstrap, sc.kc.prefix),
                     0);
    ck_assert_int_eq(twopc(out, sizeof out,
                           "pg transactions --conninfo '%s' --prefix %s --marker-table %s --check",
                           sc.conninfo, sc.gprefix, sc.marker),
                     0);
    expect_outputs(&sc, promised, "after twopc resolve");
    printf("twopc resolve: %zu prepared gids, %zu open kafka transactions judged; the outputs hold "
           "the %llu records of checkpoint 3\n",
           pg_prepared, nkx, (unsigned long long)promised);
    scenario_clean(&sc);
}
END_TEST

START_TEST(test_ending_by_hand_agrees_with_a_restart)
{
    scenario_t sc;
    scenario_init(&sc, "cmd-hand");
    run_child(&sc, KILL_AT);
    ck_assert_int_eq(twopc(out, sizeof out,
                           "kafka transactions --bootstrap %s --prefix %s --checkpoint-dir %s",
                           sc.kc.bootstrap, sc.kc.prefix, sc.kc.ckpt),
                     0);
    item_t kx[32];
    size_t nkx = parse_kafka(out, sc.kc.prefix, kx, 32), committed = 0;
    char mine[65536];
    /* While a job runs on the folder (it holds the folder's lease shared, as tpc_job_run does),
     * every command that would commit or abort is refused and changes nothing; listings and dry
     * runs still work. */
    tpc_dir_lease_t *job_lease = NULL;
    tpc_error_t *lerr = tpc_checkpoint_dir_lease(sc.kc.ckpt, false, &job_lease);
    ck_assert_msg(!lerr, "%s", tpc_error_message(lerr));
    ck_assert_uint_ge(nkx, 1);
    ck_assert_int_eq(twopc(mine, sizeof mine,
                           "kafka %s --bootstrap %s --transactional-id %s --checkpoint-dir %s 2>&1",
                           strcmp(kx[0].cls, "pending") == 0 ? "commit" : "abort", sc.kc.bootstrap,
                           kx[0].id, sc.kc.ckpt),
                     1);
    ck_assert_ptr_nonnull(strstr(mine, "in use by a running job"));
    ck_assert_int_eq(twopc(mine, sizeof mine, "resolve --checkpoint-dir %s 2>&1", sc.kc.ckpt), 1);
    ck_assert_ptr_nonnull(strstr(mine, "in use by a running job"));
    ck_assert_int_eq(twopc(mine, sizeof mine,
                           "pg resolve --conninfo '%s' --prefix %s --marker-table %s "
                           "--checkpoint-dir %s 2>&1",
                           sc.conninfo, sc.gprefix, sc.marker, sc.kc.ckpt),
                     1);
    ck_assert_ptr_nonnull(strstr(mine, "in use by a running job"));
    ck_assert_int_eq(twopc(mine, sizeof mine,
                           "pg resolve --conninfo '%s' --prefix %s --marker-table %s "
                           "--checkpoint-dir %s --dry-run 2>&1",
                           sc.conninfo, sc.gprefix, sc.marker, sc.kc.ckpt),
                     0);
    tpc_checkpoint_dir_release(job_lease);
    ck_assert_int_eq(twopc(mine, sizeof mine,
                           "kafka transactions --bootstrap %s --prefix %s --checkpoint-dir %s",
                           sc.kc.bootstrap, sc.kc.prefix, sc.kc.ckpt),
                     0);
    ck_assert_uint_eq(parse_kafka(mine, sc.kc.prefix, kx, 32), nkx); /* nothing was ended */
    /* kafka hanging finds them holding the topic's partition, each judged as its id is. */
    ck_assert_int_eq(twopc(mine, sizeof mine,
                           "kafka hanging --bootstrap %s --topic %s --checkpoint-dir %s --json",
                           sc.kc.bootstrap, sc.kc.topic, sc.kc.ckpt),
                     0);
    size_t held = 0, held_pending = 0;
    static const char idkey[] = "\"transactional_id\":\"", clskey[] = "\"class\":\"";
    for (const char *at = strstr(mine, idkey); at; at = strstr(at + 1, idkey)) {
        char hid[200] = "", hcls[32] = "";
        const char *c = strstr(at, clskey);
        ck_assert_ptr_nonnull(c);
        ck_assert_int_eq(sscanf(at + strlen(idkey), "%199[^\"]", hid), 1);
        ck_assert_int_eq(sscanf(c + strlen(clskey), "%31[^\"]", hcls), 1);
        const item_t *it = find(kx, nkx, hid);
        ck_assert_msg(it, "kafka hanging names %s, which kafka transactions does not list", hid);
        ck_assert_str_eq(hcls, it->cls);
        held++;
        if (strcmp(hcls, "pending") == 0 && held_pending++ == 0) {
            /* Its abort on the partition would lose records a restart commits: refused. */
            const char *entry = at;
            while (entry > mine && *entry != '{')
                entry--;
            long long hpid = -1;
            int hepoch = -1;
            ck_assert_int_eq(sscanf(entry,
                                    "{\"partition\":0,\"producer_id\":%lld,"
                                    "\"producer_epoch\":%d",
                                    &hpid, &hepoch),
                             2);
            char refused[4096];
            ck_assert_int_eq(twopc(refused, sizeof refused,
                                   "kafka abort --bootstrap %s --topic %s --partition 0 "
                                   "--producer-id %lld --epoch %d --checkpoint-dir %s 2>&1",
                                   sc.kc.bootstrap, sc.kc.topic, hpid, hepoch, sc.kc.ckpt),
                             1);
            ck_assert_ptr_nonnull(strstr(refused, "loses its records"));
        }
    }
    ck_assert_uint_ge(held, 1);
    ck_assert_uint_ge(held_pending, 1);
    /* Against the verdict, or unjudged, an end is refused. */
    for (size_t i = 0; i < nkx; i++) {
        bool commit = strcmp(kx[i].cls, "pending") == 0;
        ck_assert_int_eq(twopc(mine, sizeof mine,
                               "kafka %s --bootstrap %s --transactional-id %s --checkpoint-dir %s "
                               "2>&1",
                               commit ? "abort" : "commit", sc.kc.bootstrap, kx[i].id, sc.kc.ckpt),
                         1);
        ck_assert_ptr_nonnull(strstr(mine, commit ? "loses its records" : "duplicates them"));
        ck_assert_ptr_nonnull(strstr(mine, "--force"));
        ck_assert_int_eq(twopc(mine, sizeof mine,
                               "kafka %s --bootstrap %s --transactional-id %s 2>&1",
                               commit ? "commit" : "abort", sc.kc.bootstrap, kx[i].id),
                         2);
    }
    for (size_t i = 0; i < nkx; i++) {
        bool commit = strcmp(kx[i].cls, "pending") == 0;
        committed += commit;
        ck_assert_int_eq(twopc(mine, sizeof mine,
                               "kafka %s --bootstrap %s --transactional-id %s --checkpoint-dir %s",
                               commit ? "commit" : "abort", sc.kc.bootstrap, kx[i].id, sc.kc.ckpt),
                         0);
    }
    ck_assert_uint_ge(committed, 1);
    ck_assert_int_eq(twopc(out, sizeof out,
                           "pg resolve --conninfo '%s' --prefix %s --marker-table %s "
                           "--checkpoint-dir %s",
                           sc.conninfo, sc.gprefix, sc.marker, sc.kc.ckpt),
                     0);
    ck_assert_int_eq(tpc_test_pg_prepared(sc.pg, sc.gprefix), 0);
    ck_assert_int_eq(twopc(out, sizeof out, "kafka transactions --bootstrap %s --prefix %s --check",
                           sc.kc.bootstrap, sc.kc.prefix),
                     0);
    /* A restart finds the promised transactions committed, and nothing else left. */
    run_child(&sc, "0");
    expect_outputs(&sc, RECORDS, "ended by hand, then restarted");
    scenario_clean(&sc);
}
END_TEST

/* A transaction no checkpoint knows: its commit is refused, and done with --force, which says what
 * it may cost. Then pg resolve without --prefix (it takes the checkpoint's gid prefixes). */
START_TEST(test_forced_commit_says_what_it_costs)
{
    scenario_t sc;
    scenario_init(&sc, "cmd-force");
    run_child(&sc, KILL_AT);
    char topic[128], id[128], errstr[512];
    tpc_test_unique_name(topic, sizeof topic, "twopc-stray", '-');
    tpc_test_unique_name(id, sizeof id, "twopc-stray-id", '-');
    kt_create_topic(sc.kc.bootstrap, topic, 1);
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    kt_set(conf, "bootstrap.servers", sc.kc.bootstrap);
    kt_set(conf, "transactional.id", id);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    ck_assert_msg(rk != NULL, "%s", errstr);
    ck_assert_ptr_null(rd_kafka_init_transactions(rk, KT_TIMEOUT_MS));
    ck_assert_ptr_null(rd_kafka_begin_transaction(rk));
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_VALUE("x", 1),
                                           RD_KAFKA_V_END),
                         0);
    ck_assert_int_eq(rd_kafka_flush(rk, KT_TIMEOUT_MS), 0);

    ck_assert_int_eq(twopc(out, sizeof out,
                           "kafka commit --bootstrap %s --transactional-id %s --checkpoint-dir %s "
                           "2>&1",
                           sc.kc.bootstrap, id, sc.kc.ckpt),
                     1);
    ck_assert_ptr_nonnull(strstr(out, "refused"));
    ck_assert_int_eq(kt_read_topic(sc.kc.bootstrap, topic, "read_committed", NULL, NULL), 0);
    ck_assert_int_eq(twopc(out, sizeof out,
                           "kafka commit --bootstrap %s --transactional-id %s --checkpoint-dir %s "
                           "--force 2>&1",
                           sc.kc.bootstrap, id, sc.kc.ckpt),
                     0);
    ck_assert_ptr_nonnull(strstr(out, "--force: no completed checkpoint promised"));
    ck_assert_int_eq(kt_read_topic(sc.kc.bootstrap, topic, "read_committed", NULL, NULL), 5);
    rd_kafka_destroy(rk);
    kt_delete_topic(sc.kc.bootstrap, topic);
    /* pg resolve without --prefix takes the prefixes of the checkpoint's own gids. */
    ck_assert_int_eq(twopc(out, sizeof out,
                           "pg resolve --conninfo '%s' --marker-table %s --checkpoint-dir %s 2>&1",
                           sc.conninfo, sc.marker, sc.kc.ckpt),
                     0);
    ck_assert_int_eq(tpc_test_pg_prepared(sc.pg, sc.gprefix), 0);
    /* The job's own transactions are left to its restart, which is exactly once. */
    run_child(&sc, "0");
    expect_outputs(&sc, RECORDS, "restarted after a forced commit of another transaction");
    scenario_clean(&sc);
}
END_TEST

/* pg resolve decides as a restart would, by the job's own rule:
 * - the newest completed checkpoint's file is missing: a restart refuses, so does resolve (with
 *   the job's reason), and touches nothing;
 * - the record says the job started over after it (first id above it, as a restore.mode=fresh
 *   start that failed before its first checkpoint leaves it): a restart starts without state and
 *   rolls every prepared transaction back, so resolve commits none. The restart then writes every
 *   record again beside what checkpoints 1 and 2 committed (starting over means that), but not
 *   checkpoint 3's rows a third time, as it did when resolve committed them. */
START_TEST(test_pg_resolve_follows_the_restore_rule)
{
    scenario_t sc;
    scenario_init(&sc, "cmd-rule");
    run_child(&sc, KILL_AT);
    long long prepared = tpc_test_pg_prepared(sc.pg, sc.gprefix);
    ck_assert_int_gt(prepared, 0);
    tpc__record_t rec;
    bool found;
    ck_assert_ptr_null(tpc__record_read(sc.kc.ckpt, &rec, &found));
    ck_assert(found && rec.newest > 0);
    char path[8400], aside[8500];
    snprintf(path, sizeof path, "%s/chk-%020llu", sc.kc.ckpt, (unsigned long long)rec.newest);
    snprintf(aside, sizeof aside, "%s.aside", path);
    ck_assert_int_eq(rename(path, aside), 0);
    ck_assert_int_eq(twopc(out, sizeof out,
                           "pg resolve --conninfo '%s' --prefix %s --marker-table %s "
                           "--checkpoint-dir %s 2>&1",
                           sc.conninfo, sc.gprefix, sc.marker, sc.kc.ckpt),
                     1);
    ck_assert_msg(strstr(out, "refuses to restore") && strstr(out, "missing"), "%s", out);
    ck_assert_int_eq(tpc_test_pg_prepared(sc.pg, sc.gprefix), prepared);
    ck_assert_int_eq(rename(aside, path), 0);

    long long before = tpc_test_pg_long(sc.pg, "SELECT count(*) FROM %s", sc.table);
    rec.first = rec.newest + 1; /* started over after it, before a checkpoint of its own */
    ck_assert_ptr_null(tpc__record_write(sc.kc.ckpt, &rec));
    tpc__record_free(&rec);
    ck_assert_int_eq(twopc(out, sizeof out,
                           "pg resolve --conninfo '%s' --prefix %s --marker-table %s "
                           "--checkpoint-dir %s 2>&1",
                           sc.conninfo, sc.gprefix, sc.marker, sc.kc.ckpt),
                     0);
    ck_assert_int_eq(tpc_test_pg_prepared(sc.pg, sc.gprefix), 0);
    ck_assert_int_eq(tpc_test_pg_long(sc.pg, "SELECT count(*) FROM %s", sc.table), before);
    run_child(&sc, "0");
    ck_assert_int_eq(tpc_test_pg_long(sc.pg, "SELECT count(*) FROM %s", sc.table),
                     before + RECORDS);
    ck_assert_int_eq(tpc_test_pg_long(sc.pg, "SELECT count(DISTINCT k) FROM %s", sc.table),
                     RECORDS);
    scenario_clean(&sc);
}
END_TEST

START_TEST(test_errors_say_what_to_do)
{
    ck_assert_int_eq(twopc(out, sizeof out, "checkpoints /nonexistent-folder 2>&1"), 1);
    ck_assert_ptr_nonnull(strstr(out, "hint:"));
    ck_assert_int_eq(twopc(out, sizeof out, "pg transactions 2>&1"), 2);
    ck_assert_ptr_nonnull(strstr(out, "--conninfo"));
    ck_assert_int_eq(twopc(out, sizeof out,
                           "kafka transactions --bootstrap 127.0.0.1:1 "
                           "--timeout-ms 1000 2>&1"),
                     1);
    ck_assert_int_eq(twopc(out, sizeof out, "frobnicate 2>&1"), 2);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--child") == 0)
        return child_main(argc, argv);
    char self[4096];
    if (!tpc_test_self_path(self, sizeof self))
        return 2;
    snprintf(twopc_bin, sizeof twopc_bin, "%s/../bin/twopc", dirname(self));
    Suite *s = suite_create("twopc_command");
    TCase *tc = tcase_create("killed job");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_listings_and_resolve_match_a_restart);
    tcase_add_test(tc, test_ending_by_hand_agrees_with_a_restart);
    tcase_add_test(tc, test_forced_commit_says_what_it_costs);
    tcase_add_test(tc, test_pg_resolve_follows_the_restore_rule);
    tcase_add_test(tc, test_errors_say_what_to_do);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
