/*
 * Randomized jobs: for a bounded set of seeds, a random DAG of 1-5 vertices with parallelism 1-4,
 * random edge kinds, 1-3 concurrent checkpoints, sources of random lengths and speeds, and random
 * failures injected into sources and into checkpoint writes. Every run must end, every subtask must
 * get a notify after its finish() (the final checkpoint reached it), and every vertex's state must
 * count each record that reached it exactly once. Set TPC_TEST_SEEDS to run more seeds.
 */
#include "runtime_internal.h"
#include "tpc_test_ops.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXV 5
#define MAXP 4

typedef struct {
    pthread_mutex_t mu;
    uint64_t count[MAXP], sum[MAXP]; /* per subtask, as of its last finish() */
    bool notified_after_finish[MAXP];
    int finishes[MAXP];
} vstats_t;

typedef struct {
    vstats_t *vs;
    bool finished;
    uint64_t count, sum;
} relay_t;

static tpc_error_t *relay_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx;
    relay_t *r = calloc(1, sizeof(*r));
    r->vs = arg;
    *self = r;
    return NULL;
}

static tpc_error_t *relay_init(void *self, tpc_ctx_t *ctx, const tpc_state_reader_t *st)
{
    (void)ctx;
    relay_t *r = self;
    for (size_t i = 0; i < tpc_state_count(st, TPC_STATE_LIST); i++) {
        const void *p;
        size_t len;
        tpc_state_get(st, TPC_STATE_LIST, i, &p, &len);
        uint64_t v[2];
        memcpy(v, p, sizeof v);
        r->count += v[0];
        r->sum += v[1];
    }
    return NULL;
}

static tpc_error_t *relay_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *b)
{
    relay_t *r = self;
    for (size_t i = 0; i < tpc_batch_count(b); i++) {
        tpc_record_t rec;
        tpc_batch_get(b, i, &rec);
        int sub;
        uint64_t seq;
        tpc_test_seq_decode(rec.key, rec.key_len, &sub, &seq);
        r->count++;
        r->sum += seq;
        tpc_err_t rc = tpc_emit(ctx, &rec);
        if (rc != TPC_OK && rc != TPC_ERR_STATE)
            return NULL; /* canceled */
    }
    return NULL;
}

static tpc_error_t *relay_snap(void *self, tpc_ctx_t *ctx, uint64_t id, tpc_state_writer_t *w)
{
    (void)ctx;
    (void)id;
    relay_t *r = self;
    uint64_t v[2] = {r->count, r->sum};
    return tpc_state_add(w, TPC_STATE_LIST, v, sizeof v);
}

static tpc_error_t *relay_notify(void *self, tpc_ctx_t *ctx, uint64_t id)
{
    (void)id;
    relay_t *r = self;
    if (r->finished) {
        pthread_mutex_lock(&r->vs->mu);
        r->vs->notified_after_finish[tpc_ctx_subtask(ctx)] = true;
        pthread_mutex_unlock(&r->vs->mu);
    }
    return NULL;
}

static tpc_error_t *relay_finish(void *self, tpc_ctx_t *ctx)
{
    relay_t *r = self;
    r->finished = true;
    int me = tpc_ctx_subtask(ctx);
    pthread_mutex_lock(&r->vs->mu);
    r->vs->count[me] = r->count;
    r->vs->sum[me] = r->sum;
    r->vs->finishes[me]++;
    pthread_mutex_unlock(&r->vs->mu);
    return NULL;
}

static void relay_close(void *self, tpc_ctx_t *ctx)
{
    (void)ctx;
    free(self);
}

static const tpc_operator_ops_t relay_ops = {.version = TPC_OPERATOR_OPS_VERSION,
                                             .open = relay_open,
                                             .initialize_state = relay_init,
                                             .process = relay_process,
                                             .snapshot_state = relay_snap,
                                             .notify_checkpoint_complete = relay_notify,
                                             .finish = relay_finish,
                                             .close = relay_close};

static int write_faults_left;
static tpc_error_t *random_write_fault(uint64_t id)
{
    if (write_faults_left > 0 && rand() % 6 == 0) {
        write_faults_left--;
        return tpc_error_new(TPC_ERR_IO, 0, "injected write failure at checkpoint %llu",
                             (unsigned long long)id);
    }
    return NULL;
}

static void run_seed(unsigned seed)
{
    srand(seed);
    int nv = 1 + rand() % MAXV;
    int par[MAXV];
    bool is_source[MAXV];
    tpc_test_seq_conf_t src[MAXV];
    vstats_t vs[MAXV];
    /* expected total count/sum reaching each vertex (for sources: what they emit) */
    uint64_t exp_count[MAXV] = {0}, exp_sum[MAXV] = {0};
    char *dir = tpc_test_tmpdir("random");
    tpc_job_t *job = tpc_job_new("random");
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.dir", dir));
    char interval[16];
    snprintf(interval, sizeof interval, "%d", 5 + rand() % 30);
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.interval.ms", interval));
    ck_assert_ptr_null(tpc_job_set(job, "restart.delay.ms", "5"));
    char concurrent[4];
    snprintf(concurrent, sizeof concurrent, "%d", 1 + rand() % 3);
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.max-concurrent", concurrent));
    ck_assert_ptr_null(tpc_job_set(job, "restart.attempts", "10"));
    int injected = 0;
    for (int v = 0; v < nv; v++) {
        par[v] = 1 + rand() % MAXP;
        is_source[v] = v == 0 || rand() % 3 == 0;
        memset(&src[v], 0, sizeof src[v]);
        memset(&vs[v], 0, sizeof vs[v]);
        pthread_mutex_init(&vs[v].mu, NULL);
        char name[16];
        snprintf(name, sizeof name, "v%d", v);
        if (is_source[v]) {
            src[v].per_poll = 1 + (uint32_t)(rand() % 64);
            src[v].sleep_us = (uint32_t)(rand() % 400);
            for (int s = 0; s < par[v]; s++) {
                src[v].count[s] = 1 + (uint64_t)(rand() % 3000);
                exp_count[v] += src[v].count[s];
                exp_sum[v] += src[v].count[s] * (src[v].count[s] - 1) / 2;
            }
            if (rand() % 3 == 0) {
                src[v].fail_subtask = rand() % par[v];
                src[v].fail_at = 1 + (uint64_t)(rand() % 1500);
                injected += src[v].fail_at < src[v].count[src[v].fail_subtask];
            }
            ck_assert_ptr_null(
                tpc_job_add_vertex(job, name, par[v], &tpc_test_seq_source_ops, &src[v], NULL));
        } else {
            ck_assert_ptr_null(tpc_job_add_vertex(job, name, par[v], &relay_ops, &vs[v], NULL));
            int ninputs = 1 + rand() % 2;
            bool used[MAXV] = {false};
            for (int k = 0; k < ninputs; k++) {
                int from = rand() % v;
                if (used[from])
                    continue;
                used[from] = true;
                tpc_edge_t kind = (tpc_edge_t)(rand() % 4);
                if (kind == TPC_EDGE_FORWARD && par[from] != par[v])
                    kind = TPC_EDGE_REBALANCE;
                ck_assert_ptr_null(tpc_job_connect(job, from, v, kind));
                if (getenv("TPC_TEST_VERBOSE"))
                    fprintf(stderr, "  v%d(p%d) -%d-> v%d(p%d)\n", from, par[from], (int)kind, v,
                            par[v]);
                uint64_t mult = kind == TPC_EDGE_BROADCAST ? (uint64_t)par[v] : 1;
                exp_count[v] += exp_count[from] * mult;
                exp_sum[v] += exp_sum[from] * mult;
            }
        }
    }
    write_faults_left = rand() % 3;
    tpc__checkpoint_write_fault = random_write_fault;
    tpc_job_result_t res;
    tpc_error_t *err = tpc_job_run(job, &res);
    tpc__checkpoint_write_fault = NULL;
    ck_assert_msg(err == NULL, "seed %u: %s", seed, tpc_error_message(err));
    ck_assert_int_eq(res, TPC_JOB_FINISHED);
    tpc_job_stats_t st;
    tpc_job_get_stats(job, &st);
    /* Failures are injected in the first attempt only: one restart may cover several. */
    ck_assert_msg(!injected || st.restarts >= 1, "seed %u: %d failures, %llu restarts", seed,
                  injected, (unsigned long long)st.restarts);
    for (int v = 0; v < nv; v++) {
        if (is_source[v])
            continue;
        uint64_t count = 0, sum = 0;
        for (int s = 0; s < par[v]; s++) {
            count += vs[v].count[s];
            sum += vs[v].sum[s];
            ck_assert_msg(vs[v].notified_after_finish[s],
                          "seed %u: v%d[%d] got no notify after finish", seed, v, s);
        }
        ck_assert_msg(count == exp_count[v] && sum == exp_sum[v],
                      "seed %u: v%d counted %llu records (sum %llu), expected %llu (sum %llu)",
                      seed, v, (unsigned long long)count, (unsigned long long)sum,
                      (unsigned long long)exp_count[v], (unsigned long long)exp_sum[v]);
    }
    for (int v = 0; v < nv; v++)
        pthread_mutex_destroy(&vs[v].mu);
    tpc_job_destroy(job);
    tpc_test_rmdir(dir);
    free(dir);
}

START_TEST(test_random_dags)
{
    const char *env = getenv("TPC_TEST_SEEDS");
    unsigned seeds = env ? (unsigned)atoi(env) : 40;
    const char *first = getenv("TPC_TEST_FIRST_SEED");
    unsigned from = first ? (unsigned)atoi(first) : 1;
    for (unsigned seed = from; seed < from + seeds; seed++) {
        if (getenv("TPC_TEST_VERBOSE"))
            fprintf(stderr, "seed %u\n", seed);
        run_seed(seed);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("random_dags");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_random_dags);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
