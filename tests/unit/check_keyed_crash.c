/*
 * Incremental checkpoints of keyed state under kill -9: a separate process runs
 * sequence source -> rekey ("k<seq % KEYS>") -> hash -> keyed running total -> file sink, with
 * state.incremental and chains of at most 3 checkpoints, and is killed at random moments and,
 * on purpose, right while an incremental checkpoint and while a compaction (a full snapshot that
 * ends a chain) is being written; each start takes the next parallelism of 2 -> 3 -> 1 for the
 * keyed vertex, so that chains are restored split and merged. The committed lines
 * "k<key> <count> <total>" must then hold, per key, every count from 1 to the key's number of
 * records exactly once, each with the exact running total: a restore that lost or repeated a
 * change of the chain shows as a wrong total, a gap or a repeat.
 *
 * The child is this binary, run again with "--crash-child" (tpc_test_crash.h); the random seed is
 * printed, TWOPC_CRASH_SEED repeats a run.
 */
#include "runtime_internal.h"
#include "tpc_file.h"
#include "tpc_test_crash.h"
#include "tpc_test_env.h"
#include "tpc_test_file.h"
#include "tpc_test_ops.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define RECORDS 30000
#define KEYS    500
#define KILLS   16 /* by the parent, at random moments */
#define PROBES  6  /* on purpose, while writing: half increments, half compactions */

/* ---- the child ----------------------------------------------------------------------------- */

static tpc_error_t *pass_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx;
    *self = arg;
    return NULL;
}

static tpc_error_t *rekey_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)self;
    for (size_t i = 0; i < tpc_batch_count(batch); i++) {
        tpc_record_t r;
        tpc_batch_get(batch, i, &r);
        int sub;
        uint64_t seq;
        if (!tpc_test_seq_decode(r.key, r.key_len, &sub, &seq))
            return tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL, "not a sequence record");
        char key[16];
        int n = snprintf(key, sizeof key, "k%llu", (unsigned long long)(seq % KEYS));
        tpc_record_t out = {.key = key, .key_len = (size_t)n, .value = r.key, .value_len = 8};
        if (tpc_emit(ctx, &out) != TPC_OK)
            return tpc_error_new(TPC_ERR_CANCELED, 0, "canceled");
    }
    return NULL;
}

/* Per key: count and total in "sum"; "odd" is there at an odd count only (deletes in the chain). */
static tpc_error_t *total_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)self;
    for (size_t i = 0; i < tpc_batch_count(batch); i++) {
        tpc_record_t r;
        tpc_batch_get(batch, i, &r);
        int sub;
        uint64_t seq, s[2] = {0, 0};
        tpc_test_seq_decode(r.value, r.value_len, &sub, &seq);
        const void *v;
        size_t len;
        tpc_error_t *err = tpc_keyed_get(ctx, "sum", r.key, r.key_len, &v, &len);
        if (err)
            return err;
        if (v && len == sizeof s)
            memcpy(s, v, sizeof s);
        const void *odd;
        if ((err = tpc_keyed_get(ctx, "odd", r.key, r.key_len, &odd, &len)))
            return err;
        if ((odd != NULL) != (s[0] % 2 == 1))
            return tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL, "\"odd\" of %.*s is wrong",
                                 (int)r.key_len, (const char *)r.key);
        s[0]++;
        s[1] += seq;
        if ((err = tpc_keyed_put(ctx, "sum", r.key, r.key_len, s, sizeof s)))
            return err;
        err = s[0] % 2 ? tpc_keyed_put(ctx, "odd", r.key, r.key_len, "x", 1)
                       : tpc_keyed_delete(ctx, "odd", r.key, r.key_len);
        if (err)
            return err;
        char line[64];
        int n = snprintf(line, sizeof line, "%.*s %llu %llu", (int)r.key_len, (const char *)r.key,
                         (unsigned long long)s[0], (unsigned long long)s[1]);
        tpc_record_t out = {.key = r.key, .key_len = r.key_len, .value = line, .value_len = n};
        if (tpc_emit(ctx, &out) != TPC_OK)
            return tpc_error_new(TPC_ERR_CANCELED, 0, "canceled");
    }
    return NULL;
}

static const tpc_operator_ops_t rekey_ops = {
    .version = TPC_OPERATOR_OPS_VERSION, .open = pass_open, .process = rekey_process};
static const tpc_operator_ops_t total_ops = {
    .version = TPC_OPERATOR_OPS_VERSION, .open = pass_open, .process = total_process};

/* What the child kills itself at (TWOPC_TEST_PROBE): "incremental", "compaction" or nothing. */
static const char *probe_kind;
static bool after_increment; /* the checkpoint this process wrote before was incremental */

/* A compaction is a full checkpoint after an incremental one: the chain it ends was built (a
 * full one at the start, or one after a restore, is not). */
static void probe(const tpc__checkpoint_t *c)
{
    const char *kind = c->nrefs ? "incremental" : after_increment ? "compaction" : NULL;
    after_increment = c->nrefs > 0;
    if (!probe_kind || !kind || strcmp(kind, probe_kind) != 0)
        return;
    for (int v = 0; v < c->nvertices; v++) /* with keyed state written */
        if (strcmp(c->vertices[v].name, "total") == 0)
            for (int s = 0; s < c->vertices[v].parallelism; s++)
                if (c->vertices[v].subtasks[s].state.nkeyed) {
                    fprintf(stderr, "probe kill: %s checkpoint %llu\n", kind,
                            (unsigned long long)c->id);
                    fflush(stderr);
                    raise(SIGKILL);
                }
}

/* The parallelism of "total" for this start: @p par, unless the checkpoint a restart restores
 * holds it finished (a kill can land after the job's last records, before it exits), which the
 * runtime restores only at the parallelism it had. */
static int total_parallelism(const char *ckpt, const char *par)
{
    int p = atoi(par);
    tpc_checkpoint_folder_t f;
    tpc_error_t *err = tpc_checkpoint_folder_read(ckpt, false, &f);
    const tpc_checkpoint_t *c =
        !err && f.restore_index >= 0 ? f.files[f.restore_index].checkpoint : NULL;
    for (int v = 0; c && v < tpc_checkpoint_vertex_count(c); v++) {
        int vp;
        if (strcmp(tpc_checkpoint_vertex(c, v, &vp), "total") != 0)
            continue;
        for (int s = 0; s < vp; s++) {
            tpc_checkpoint_subtask_t st;
            tpc_checkpoint_subtask(c, v, s, &st);
            if (st.finished || st.closed)
                p = vp;
        }
    }
    tpc_error_destroy(err);
    tpc_checkpoint_folder_free(&f);
    return p;
}

static int child_main(const char *ckpt, const char *out, const char *par)
{
    probe_kind = getenv("TWOPC_TEST_PROBE");
    tpc__checkpoint_write_probe = probe;
    tpc_test_seq_conf_t src = {.count_default = RECORDS, .per_poll = 20, .sleep_us = 600};
    tpc_job_t *job = tpc_job_new("keyed-crash");
    tpc_txn_sink_t *sink = NULL;
    int s, r, t, k;
    tpc_error_t *err = tpc_job_set(job, "checkpoint.dir", ckpt);
    if (!err)
        err = tpc_job_set(job, "checkpoint.interval.ms", "20");
    if (!err)
        err = tpc_job_set(job, "restart.delay.ms", "5");
    if (!err)
        err = tpc_job_set(job, "state.incremental", "true");
    if (!err)
        err = tpc_job_set(job, "state.incremental.max-chain", "3");
    if (!err)
        err = tpc_file_sink_new(out, &sink);
    if (!err)
        err = tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s);
    if (!err)
        err = tpc_job_add_vertex(job, "rekey", 1, &rekey_ops, NULL, &r);
    if (!err)
        err = tpc_job_add_vertex(job, "total", total_parallelism(ckpt, par), &total_ops, NULL, &t);
    if (!err)
        err = tpc_txn_sink_add_to_job(sink, job, "files", 1, &k);
    if (!err)
        err = tpc_job_connect(job, s, r, TPC_EDGE_FORWARD);
    if (!err)
        err = tpc_job_connect(job, r, t, TPC_EDGE_HASH);
    if (!err)
        err = tpc_job_connect(job, t, k, TPC_EDGE_REBALANCE);
    tpc_job_result_t result = TPC_JOB_CANCELED;
    if (!err)
        err = tpc_job_run(job, &result);
    int rc = 0;
    if (err || result != TPC_JOB_FINISHED) {
        fprintf(stderr, "crash child: %s\n", err ? tpc_error_message(err) : "did not finish");
        rc = 1;
    }
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(sink);
    return rc;
}

/* ---- the parent ---------------------------------------------------------------------------- */

/* Check the committed lines; false with a reason in @p why. */
static bool check_lines(const tpc_test_file_out_t *f, char *why, size_t len)
{
    static uint8_t seen[KEYS][RECORDS / KEYS + 1];
    memset(seen, 0, sizeof seen);
    const char *p = (const char *)f->data, *end = p + f->len;
    size_t lines = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) {
            snprintf(why, len, "a line without its newline at byte %zu",
                     (size_t)(p - (char *)f->data));
            return false;
        }
        unsigned key;
        unsigned long long count, total;
        if (sscanf(p, "k%u %llu %llu", &key, &count, &total) != 3 || key >= KEYS || count == 0 ||
            count > RECORDS / KEYS) {
            snprintf(why, len, "malformed line %zu: %.*s", lines, (int)(nl - p), p);
            return false;
        }
        /* the key's records are key, key + KEYS, ...: the first `count` of them */
        unsigned long long want = count * key + (unsigned long long)KEYS * count * (count - 1) / 2;
        if (total != want) {
            snprintf(why, len, "k%u at count %llu: total %llu, want %llu", key, count, total, want);
            return false;
        }
        if (seen[key][count]++) {
            snprintf(why, len, "k%u count %llu written twice", key, count);
            return false;
        }
        lines++;
        p = nl + 1;
    }
    for (unsigned k = 0; k < KEYS; k++)
        for (unsigned c = 1; c <= RECORDS / KEYS; c++)
            if (!seen[k][c]) {
                snprintf(why, len, "k%u count %u missing", k, c);
                return false;
            }
    return true;
}

static int count_in_log(const char *log, const char *what)
{
    FILE *f = fopen(log, "r");
    if (!f)
        return 0;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, what) != NULL;
    fclose(f);
    return n;
}

START_TEST(test_kill_9_during_incremental_checkpoints)
{
    uint64_t seed = tpc_test_crash_seed();
    tpc_test_rng_t rng;
    tpc_test_rng_init(&rng, seed);
    char self[4096];
    ck_assert(tpc_test_self_path(self, sizeof self));
    char *ckpt = tpc_test_tmpdir("keyed-crash-ckpt");
    char *out = tpc_test_tmpdir("keyed-crash-out");
    char log[4200];
    snprintf(log, sizeof log, "%s.log", ckpt);
    unlink(log);
    static const char *const pars[] = {"2", "3", "1"};
    int runs = 0, kills = 0, probes = 0, status = -1;
    double t0 = tpc_test_now_s();
    for (;;) {
        /* First the kills on purpose, alternating their kind, then the random ones. */
        const char *kind = probes < PROBES ? (probes % 2 ? "compaction" : "incremental") : NULL;
        if (kind)
            setenv("TWOPC_TEST_PROBE", kind, 1);
        else
            unsetenv("TWOPC_TEST_PROBE");
        const char *argv[] = {self, "--crash-child", ckpt, out, pars[runs % 3], NULL};
        pid_t pid = tpc_test_spawn(argv, log, -1);
        ck_assert_int_gt(pid, 0);
        runs++;
        if (kind) {
            ck_assert_msg(tpc_test_wait(pid, 60000, &status), "run %d did not end (seed %llu)",
                          runs, (unsigned long long)seed);
            if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
                probes++;
                continue;
            }
            break; /* it ended before such a checkpoint came: the test fails below */
        }
        if (kills < KILLS) {
            double at = 10 + (double)(tpc_test_rng_next(&rng) % 150);
            if (!tpc_test_wait(pid, at, &status)) {
                tpc_test_kill(pid);
                kills++;
                continue;
            }
            break;
        }
        ck_assert_msg(tpc_test_wait(pid, 120000, &status), "the last run did not end (seed %llu)",
                      (unsigned long long)seed);
        break;
    }
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && probes == PROBES;
    if (!ok)
        tpc_test_dump_log(log);
    ck_assert_msg(ok, "run %d (seed %llu) ended with status %d after %d probe kills", runs,
                  (unsigned long long)seed, status, probes);
    ck_assert_int_eq(count_in_log(log, "probe kill: incremental"), PROBES / 2);
    ck_assert_int_eq(count_in_log(log, "probe kill: compaction"), PROBES / 2);
    tpc_test_file_out_t files;
    char why[256];
    ck_assert_msg(tpc_test_file_read(out, "part", &files, why, sizeof why), "%s", why);
    ok = check_lines(&files, why, sizeof why);
    if (!ok)
        tpc_test_dump_log(log);
    ck_assert_msg(ok, "after %d kills and %d probe kills over %d runs (seed %llu): %s", kills,
                  probes, runs, (unsigned long long)seed, why);
    tpc_test_file_out_free(&files);
    printf("keyed crash test: %d kill -9 at random and %d while writing an incremental checkpoint "
           "or a compaction, over %d runs at parallelism 2 -> 3 -> 1, %.1f s, seed %llu\n",
           kills, probes, runs, tpc_test_now_s() - t0, (unsigned long long)seed);
    fflush(stdout);
    unlink(log);
    tpc_test_rmdir(ckpt);
    tpc_test_rmdir(out);
    free(ckpt);
    free(out);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "--crash-child") == 0)
        return child_main(argv[2], argv[3], argv[4]);
    Suite *s = suite_create("keyed_crash");
    TCase *tc = tcase_create("crash");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_kill_9_during_incremental_checkpoints);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
