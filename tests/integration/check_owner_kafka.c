/*
 * The Kafka sink under owners (checkpoint.owner=claim), against the real broker. Owner 1 (epoch 1,
 * ids `<prefix>-e1-0-<n>`) is held inside checkpoint n: the source feeds the sink and, beside it,
 * an operator whose snapshot of n blocks, so the sink has pre-committed its transaction of n
 * (open on the broker) but n cannot complete. Owner 2 takes the job over, restores checkpoint
 * n - 1, commits owner 1's transaction that n - 1 lists by its recorded id (or finds it committed),
 * fences the ids of epoch 1 (which aborts the transaction of n: no id of epoch 1 is left with an
 * open transaction, which would hold every read_committed reader back until its timeout) and
 * writes on with ids of epoch 2. Resumed, owner 1 ends with TPC_ERR_FENCED. A read_committed reader
 * then sees every record exactly once, within a wait far below the transaction timeout.
 */
#include "check_kafka_common.h"
#include "kafka_sink_internal.h"
#include "tpc_kafka.h"
#include "tpc_test_ops.h"

#include <pthread.h>
#include <stdlib.h>

#define RECORDS 3000

static const char *bootstrap;
static char topic[128], prefix[128], dir[512];

typedef struct {
    tpc_job_t *job;
    tpc_txn_sink_t *sink;
    tpc_test_seq_conf_t seq;
    tpc_test_hold_t hold;
    pthread_t thread;
    tpc_error_t *err;
    tpc_job_result_t result;
    bool ended;
    int recovered_e1; /* log lines: a transaction of an epoch-1 id committed by recovery */
    int fenced;       /* log lines: ids of earlier owners fenced */
} owner_t;

static void owner_log(void *opaque, tpc_log_level_t level, const char *msg)
{
    (void)level;
    owner_t *o = opaque;
    char e1[160];
    snprintf(e1, sizeof e1, "transaction \"%s-e1-", prefix);
    pthread_mutex_lock(&o->hold.mu);
    if (strstr(msg, e1) && strstr(msg, "committed"))
        o->recovered_e1++;
    if (strstr(msg, "initialised (fenced)"))
        o->fenced++;
    pthread_mutex_unlock(&o->hold.mu);
}

static void set_ok(tpc_error_t *err)
{
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
}

static void owner_new(owner_t *o, const char *interval_ms, uint32_t sleep_us)
{
    memset(o, 0, sizeof *o);
    tpc_test_hold_init(&o->hold, false);
    o->seq.count_default = RECORDS;
    o->seq.per_poll = 8;
    o->seq.sleep_us = sleep_us;
    o->job = tpc_job_new("owned-kafka");
    set_ok(tpc_job_set(o->job, "checkpoint.dir", dir));
    set_ok(tpc_job_set(o->job, "checkpoint.owner", "claim"));
    set_ok(tpc_job_set(o->job, "checkpoint.interval.ms", interval_ms));
    set_ok(tpc_job_set(o->job, "restart.attempts", "3"));
    set_ok(tpc_job_set(o->job, "restart.delay.ms", "10"));
    ck_assert_int_eq(tpc_job_set_logger(o->job, owner_log, o, TPC_LOG_INFO), TPC_OK);
    set_ok(tpc_kafka_sink_new(bootstrap, topic, &o->sink));
    set_ok(tpc_txn_sink_set(o->sink, "transactional.id.prefix", prefix));
    set_ok(tpc_txn_sink_set(o->sink, "kafka.linger.ms", "5"));
    /* Far above the reader's wait: a transaction left open stays open while the test reads. */
    set_ok(tpc_txn_sink_set(o->sink, "kafka.transaction.timeout.ms", "300000"));
    int src, hold, sink;
    set_ok(tpc_job_add_vertex(o->job, "source", 1, &tpc_test_seq_source_ops, &o->seq, &src));
    set_ok(tpc_job_add_vertex(o->job, "hold", 1, &tpc_test_hold_ops, &o->hold, &hold));
    set_ok(tpc_txn_sink_add_to_job(o->sink, o->job, "kafka", 1, &sink));
    set_ok(tpc_job_connect(o->job, src, sink, TPC_EDGE_FORWARD));
    set_ok(tpc_job_connect(o->job, src, hold, TPC_EDGE_FORWARD));
}

static void *owner_main(void *arg)
{
    owner_t *o = arg;
    tpc_error_t *err = tpc_job_run(o->job, &o->result);
    pthread_mutex_lock(&o->hold.mu);
    o->err = err;
    o->ended = true;
    pthread_cond_broadcast(&o->hold.cv);
    pthread_mutex_unlock(&o->hold.mu);
    return NULL;
}

static void owner_free(owner_t *o)
{
    tpc_error_destroy(o->err);
    tpc_job_destroy(o->job);
    tpc_txn_sink_destroy(o->sink);
    tpc_test_hold_destroy(&o->hold);
}

static bool wait_until(owner_t *o, bool (*cond)(owner_t *), int seconds)
{
    for (int i = 0; i < seconds * 100; i++) {
        pthread_mutex_lock(&o->hold.mu);
        bool held = cond(o);
        pthread_mutex_unlock(&o->hold.mu);
        if (held)
            return true;
        tpc_sleep_ms(10, NULL, NULL);
    }
    return false;
}

static bool is_paused(owner_t *o)
{
    return o->hold.paused_id != 0;
}

static bool has_ended(owner_t *o)
{
    return o->ended;
}

static uint64_t completed(owner_t *o)
{
    tpc_job_stats_t st;
    ck_assert_int_eq(tpc_job_get_stats(o->job, &st), TPC_OK);
    return st.checkpoints_completed;
}

/* Ids starting with @of that the broker shows with an open transaction. */
static size_t open_transactions(const char *of)
{
    tpc__kafka_wire_conf_t wire = {.bootstrap = bootstrap};
    tpc__kafka_txn_info_t *txns = NULL;
    size_t n = 0;
    set_ok(tpc__kafka_list_transactions(&wire, of, true, KT_TIMEOUT_MS, &txns, &n));
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "check_owner_kafka: open: %s %s producer id %lld epoch %d\n", txns[i].id,
                txns[i].state, (long long)txns[i].producer_id, (int)txns[i].producer_epoch);
    free(txns);
    return n;
}

static void tally_record(void *opaque, const rd_kafka_message_t *msg)
{
    long *t = opaque; /* [0] duplicates, [1] foreign, then one counter per record */
    int st = 0;
    uint64_t seq = 0;
    if (!tpc_test_seq_decode(msg->key, msg->key_len, &st, &seq) || st != 0 || seq >= RECORDS) {
        t[1]++;
        return;
    }
    if (t[2 + seq]++)
        t[0]++;
}

START_TEST(test_zombie_producer)
{
    char e1[160];
    snprintf(e1, sizeof e1, "%s-e1-", prefix);
    owner_t a, b;
    owner_new(&a, "50", 2000);
    a.hold.pause_from = 4;
    ck_assert_int_eq(pthread_create(&a.thread, NULL, owner_main, &a), 0);
    ck_assert_msg(wait_until(&a, is_paused, 60), "owner 1 never reached checkpoint 4");
    /* The sink of owner 1 pre-commits its transaction of the held checkpoint: open on the broker
     * under an id of epoch 1. */
    size_t open1 = 0;
    for (int i = 0; i < 300 && !(open1 = open_transactions(e1)); i++)
        tpc_sleep_ms(100, NULL, NULL);
    fprintf(stderr, "check_owner_kafka: owner 1 paused in checkpoint %llu, %zu open transactions\n",
            (unsigned long long)a.hold.paused_id, open1);
    ck_assert_uint_ge(open1, 1);

    owner_new(&b, "300", 5000);
    ck_assert_int_eq(pthread_create(&b.thread, NULL, owner_main, &b), 0);
    for (int i = 0; i < 6000 && completed(&b) < 1 && !b.ended; i++)
        tpc_sleep_ms(10, NULL, NULL);
    ck_assert_uint_ge(completed(&b), 1);
    /* Owner 2 fenced the ids of epoch 1 before it wrote: none carries an open transaction. */
    size_t left = open_transactions(e1);
    fprintf(stderr,
            "check_owner_kafka: ids of epoch 1 with an open transaction after the "
            "take-over: %zu\n",
            left);
    ck_assert_uint_eq(left, 0);
    pthread_mutex_lock(&b.hold.mu);
    int recovered = b.recovered_e1, fenced = b.fenced;
    pthread_mutex_unlock(&b.hold.mu);
    ck_assert_int_ge(recovered, 1); /* owner 1's transaction of the restored checkpoint */
    ck_assert_int_ge(fenced, 1);

    /* Owner 1 resumes, and is fenced. */
    pthread_mutex_lock(&a.hold.mu);
    a.hold.release = true;
    pthread_cond_broadcast(&a.hold.cv);
    pthread_mutex_unlock(&a.hold.mu);
    ck_assert_msg(wait_until(&a, has_ended, 60), "owner 1 did not end");
    pthread_join(a.thread, NULL);
    ck_assert_ptr_nonnull(a.err);
    fprintf(stderr, "check_owner_kafka: owner 1 ended with: %s\n", tpc_error_message(a.err));
    ck_assert_int_eq(tpc_error_code(a.err), TPC_ERR_FENCED);

    pthread_join(b.thread, NULL);
    ck_assert_msg(b.err == NULL, "%s", tpc_error_message(b.err));
    ck_assert_int_eq(b.result, TPC_JOB_FINISHED);
    ck_assert_uint_eq(open_transactions(prefix), 0);

    long *t = calloc(RECORDS + 2, sizeof *t);
    ck_assert_ptr_nonnull(t);
    long total = kt_read_topic(bootstrap, topic, "read_committed", tally_record, t);
    long missing = 0;
    for (long i = 0; i < RECORDS; i++)
        missing += !t[2 + i];
    fprintf(stderr, "check_owner_kafka: read_committed: %ld records, %ld duplicates, %ld missing\n",
            total, t[0], missing);
    ck_assert_msg(t[0] == 0 && missing == 0 && t[1] == 0,
                  "topic \"%s\": %ld records, %ld duplicates, %ld missing, %ld foreign", topic,
                  total, t[0], missing, t[1]);
    free(t);
    owner_free(&a);
    owner_free(&b);
}
END_TEST

static void setup(void)
{
    bootstrap = tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP");
    ck_assert_msg(bootstrap != NULL, "TWOPC_TEST_KAFKA_BOOTSTRAP is not set");
    tpc_test_unique_name(topic, sizeof topic, "twopc-owner", '-');
    tpc_test_unique_name(prefix, sizeof prefix, "twopc-owner", '-');
    kt_create_topic(bootstrap, topic, 2);
    char *d = tpc_test_tmpdir("owner-kafka");
    snprintf(dir, sizeof dir, "%s", d);
    free(d);
}

static void teardown(void)
{
    kt_delete_topic(bootstrap, topic);
    tpc_test_rmdir(dir);
}

int main(void)
{
    Suite *s = suite_create("owner_kafka");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_zombie_producer);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
