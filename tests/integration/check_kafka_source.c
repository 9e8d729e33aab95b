/*
 * The Kafka source against the real broker. Input topics are written the way real producers of
 * exactly-once pipelines write them, in transactions, some of them aborted, so that transaction
 * markers and aborted records occupy offsets between the committed ones. Shown here:
 *   - a bounded job emits exactly the committed records, each once, every key in order, and ends
 *     at the end offsets taken at its start even while a transaction is still open;
 *   - after a stop with a savepoint, a new run resumes exactly at the offsets the savepoint
 *     holds: the records before it and the records of the new run are the input, each once;
 *   - unbounded from latest reads only what was written after the start, and commits the offsets
 *     of completed checkpoints to a consumer group when one is named;
 *   - with partitions= it reads only the listed partitions, and refuses ones the topic lacks;
 *   - unknown topics, unreachable clusters and bad keys fail with a clear message;
 *   - a job slower than the broker gets its records without the stalls of a parked fetcher.
 * Crashes are in check_kafka_source_crash.c.
 */
#include "check_kafka_common.h"
#include "check_kafka_source_fill.h"
#include "tpc_kafka.h"
#include "tpc_test_ops.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

static const char *bootstrap;

static void setup(void)
{
    bootstrap = tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP");
    ck_assert_msg(bootstrap != NULL, "TWOPC_TEST_KAFKA_BOOTSTRAP is not set");
}

static void set_ok(tpc_error_t *err)
{
    ck_assert_msg(err == NULL, "%s", tpc_error_message(err));
}

/* A sink that keeps the values it receives in arrival order, and how many it had at its last
 * snapshot. Shared by all its subtasks. */
static struct {
    pthread_mutex_t lock;
    uint64_t *values;
    size_t count, cap;
    size_t at_snapshot;
    int snapshots;
    unsigned batch_sleep_us;
    double last_batch_s, max_gap_s; /* between two batches, after the first */
} got = {.lock = PTHREAD_MUTEX_INITIALIZER};

static tpc_error_t *collect_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx, (void)arg;
    *self = NULL;
    return NULL;
}

static tpc_error_t *collect_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)self, (void)ctx;
    pthread_mutex_lock(&got.lock);
    double now = tpc_test_now_s();
    if (got.last_batch_s > 0 && now - got.last_batch_s > got.max_gap_s)
        got.max_gap_s = now - got.last_batch_s;
    got.last_batch_s = now;
    for (size_t i = 0; i < tpc_batch_count(batch); i++) {
        tpc_record_t r;
        tpc_batch_get(batch, i, &r);
        if (got.count == got.cap) {
            got.cap = got.cap ? 2 * got.cap : 1024;
            got.values = realloc(got.values, got.cap * sizeof *got.values);
        }
        got.values[got.count++] = kf_value_of(r.value, r.value_len);
    }
    pthread_mutex_unlock(&got.lock);
    if (got.batch_sleep_us)
        usleep(got.batch_sleep_us);
    return NULL;
}

static tpc_error_t *collect_snapshot(void *self, tpc_ctx_t *ctx, uint64_t id, tpc_state_writer_t *w)
{
    (void)self, (void)ctx, (void)id, (void)w;
    pthread_mutex_lock(&got.lock);
    got.at_snapshot = got.count;
    got.snapshots++;
    pthread_mutex_unlock(&got.lock);
    return NULL;
}

static tpc_error_t *collect_notify(void *self, tpc_ctx_t *ctx, uint64_t id)
{
    (void)self, (void)ctx, (void)id;
    return NULL;
}

static const tpc_operator_ops_t collect_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = collect_open,
    .process = collect_process,
    .snapshot_state = collect_snapshot,
    .notify_checkpoint_complete = collect_notify,
};

static size_t got_count(void)
{
    pthread_mutex_lock(&got.lock);
    size_t n = got.count;
    pthread_mutex_unlock(&got.lock);
    return n;
}

static void got_reset(void)
{
    pthread_mutex_lock(&got.lock);
    got.count = 0;
    got.at_snapshot = 0;
    got.snapshots = 0;
    got.last_batch_s = got.max_gap_s = 0;
    pthread_mutex_unlock(&got.lock);
}

typedef struct {
    tpc_job_t *job;
    tpc_kafka_source_t *src;
    char *ckpt;
} job_t;

/* source -> collecting sink, both with @parallelism subtasks; @keys: source keys and values,
 * NULL-terminated, after bounded=true */
static void build_with(job_t *j, const char *topic, int parallelism, const char *interval,
                       const char *ckpt, const char *const *keys)
{
    int s, k;
    j->ckpt = ckpt ? NULL : tpc_test_tmpdir("kafka-source");
    j->job = tpc_job_new("kafka-source");
    set_ok(tpc_job_set(j->job, "checkpoint.dir", ckpt ? ckpt : j->ckpt));
    set_ok(tpc_job_set(j->job, "checkpoint.interval.ms", interval));
    set_ok(tpc_job_set(j->job, "restart.attempts", "0"));
    set_ok(tpc_kafka_source_new(bootstrap, topic, &j->src));
    set_ok(tpc_kafka_source_set(j->src, "bounded", "true"));
    set_ok(tpc_kafka_source_set(j->src, "max.batch", "20"));
    for (; keys && *keys; keys += 2)
        set_ok(tpc_kafka_source_set(j->src, keys[0], keys[1]));
    set_ok(tpc_kafka_source_add_to_job(j->src, j->job, "source", parallelism, &s));
    set_ok(tpc_job_add_vertex(j->job, "collect", parallelism, &collect_ops, NULL, &k));
    set_ok(tpc_job_connect(j->job, s, k, TPC_EDGE_FORWARD));
}

static void build(job_t *j, const char *topic, int parallelism, const char *interval,
                  const char *ckpt)
{
    build_with(j, topic, parallelism, interval, ckpt, NULL);
}

static void destroy(job_t *j)
{
    tpc_job_destroy(j->job);
    tpc_kafka_source_destroy(j->src);
    if (j->ckpt) {
        tpc_test_rmdir(j->ckpt);
        free(j->ckpt);
    }
}

static void run_to_end(job_t *j)
{
    tpc_job_result_t result = TPC_JOB_CANCELED;
    set_ok(tpc_job_run(j->job, &result));
    ck_assert_int_eq(result, TPC_JOB_FINISHED);
}

START_TEST(test_bounded_reads_exactly_the_committed_records)
{
    char topic[128];
    tpc_test_unique_name(topic, sizeof topic, "twopc-src", '-');
    kt_create_topic(bootstrap, topic, 3);
    uint64_t committed = kf_fill(bootstrap, topic, 24, 50, 3);
    /* A transaction still open at the start: the end offsets stop before it, so neither its
     * records nor those committed after the start are read. */
    rd_kafka_t *open_txn = kf_begin_open_txn(bootstrap, topic, 40);
    got_reset();
    job_t j;
    build(&j, topic, 2, "100", NULL);
    run_to_end(&j);
    kf_check_t c = kf_check(got.values, got.count, committed);
    ck_assert_msg(c.dups == 0 && c.missing == 0 && c.foreign == 0 && c.disorder == 0,
                  "%zu records: %ld duplicates, %ld missing, %ld foreign, %ld out of key order",
                  got.count, c.dups, c.missing, c.foreign, c.disorder);
    kf_end_open_txn(open_txn, true);
    destroy(&j);
}
END_TEST

/* A job slower than the broker fills librdkafka's read-ahead queue; librdkafka 2.0.2 then stops
 * fetching and looks again only up to a second later, after the source had emptied the queue:
 * with a 10,000-record queue and a job taking some 100,000 records a second, gaps of 450-480 ms
 * here (4-17 ms with the wake-up). The source wakes the fetcher as the queue runs low, so records
 * keep coming. */
START_TEST(test_no_stall_when_the_read_ahead_queue_fills)
{
    char topic[128];
    tpc_test_unique_name(topic, sizeof topic, "twopc-src-stall", '-');
    kt_create_topic(bootstrap, topic, 1);
    uint64_t committed = kf_fill(bootstrap, topic, 40, 5000, 1000);
    got_reset();
    got.batch_sleep_us = 2000; /* batches of up to 256 records: ~100,000 records a second */
    static const char *const keys[] = {"kafka.queued.min.messages", "10000", "max.batch", "500",
                                       NULL};
    job_t j;
    build_with(&j, topic, 1, "1000", NULL, keys);
    run_to_end(&j);
    got.batch_sleep_us = 0;
    kf_check_t c = kf_check(got.values, got.count, committed);
    ck_assert_msg(c.dups == 0 && c.missing == 0 && c.foreign == 0 && c.disorder == 0,
                  "%zu records: %ld duplicates, %ld missing, %ld foreign, %ld out of key order",
                  got.count, c.dups, c.missing, c.foreign, c.disorder);
    ck_assert_msg(got.max_gap_s < 0.25, "records stopped for %.0f ms", got.max_gap_s * 1000);
    destroy(&j);
}
END_TEST

static void *stop_midway(void *arg)
{
    job_t *j = arg;
    while (got_count() < 300)
        usleep(1000);
    char *path = NULL;
    tpc_error_t *err = tpc_job_stop_with_savepoint(j->job, false, &path);
    free(path);
    return err;
}

START_TEST(test_resumes_at_the_checkpointed_offsets)
{
    char topic[128];
    tpc_test_unique_name(topic, sizeof topic, "twopc-src", '-');
    kt_create_topic(bootstrap, topic, 3);
    uint64_t committed = kf_fill(bootstrap, topic, 20, 100, 4);
    got_reset();
    got.batch_sleep_us = 5000;
    job_t j;
    build(&j, topic, 1, "0", NULL);
    pthread_t stopper;
    pthread_create(&stopper, NULL, stop_midway, &j);
    tpc_job_result_t result = TPC_JOB_FINISHED;
    set_ok(tpc_job_run(j.job, &result));
    void *stop_err = NULL;
    pthread_join(stopper, &stop_err);
    set_ok(stop_err);
    ck_assert_int_eq(result, TPC_JOB_STOPPED);
    ck_assert_int_eq(got.snapshots, 1);
    size_t cut = got.at_snapshot;
    ck_assert_msg(cut > 0 && cut < committed, "savepoint after %zu of %llu records", cut,
                  (unsigned long long)committed);

    /* The records the savepoint covers, then a new run restoring it. */
    uint64_t *before = malloc(cut * sizeof *before);
    memcpy(before, got.values, cut * sizeof *before);
    got_reset();
    got.batch_sleep_us = 0;
    job_t again;
    build(&again, topic, 1, "100", j.ckpt);
    run_to_end(&again);
    size_t n = cut + got.count;
    uint64_t *all = malloc(n * sizeof *all);
    memcpy(all, before, cut * sizeof *all);
    memcpy(all + cut, got.values, got.count * sizeof *all);
    kf_check_t c = kf_check(all, n, committed);
    ck_assert_msg(c.dups == 0 && c.missing == 0 && c.foreign == 0 && c.disorder == 0,
                  "%zu before the savepoint + %zu after: %ld duplicates, %ld missing, "
                  "%ld foreign, %ld out of key order",
                  cut, got.count, c.dups, c.missing, c.foreign, c.disorder);
    free(before);
    free(all);
    destroy(&again);
    destroy(&j);
}
END_TEST

typedef struct {
    job_t *job;
    const char *topic;
    atomic_int checkpoints;
    uint64_t committed;
} live_t;

static void on_checkpoint(void *opaque, uint64_t id, bool completed, uint64_t us, const char *why)
{
    live_t *l = opaque;
    (void)id, (void)us, (void)why;
    if (completed)
        atomic_fetch_add(&l->checkpoints, 1);
}

/* Once the job runs, write input, wait until it arrived, then stop with a drain. */
static void *write_then_drain(void *arg)
{
    live_t *l = arg;
    while (atomic_load(&l->checkpoints) == 0)
        usleep(1000);
    l->committed = kf_fill(bootstrap, l->topic, 6, 50, 3);
    for (int waited = 0; got_count() < l->committed && waited < 20000; waited++)
        usleep(1000);
    return tpc_job_stop_with_savepoint(l->job->job, true, NULL);
}

START_TEST(test_unbounded_from_latest_reports_offsets_to_a_group)
{
    char topic[128], group[128];
    tpc_test_unique_name(topic, sizeof topic, "twopc-src", '-');
    tpc_test_unique_name(group, sizeof group, "twopc-src-group", '-');
    kt_create_topic(bootstrap, topic, 2);
    kf_end_open_txn(kf_begin_open_txn(bootstrap, topic, 30), true); /* before the start */
    /* "latest" is the last stable offset: until the commit's markers are written it is still
     * before those 30 records, which would then be read. Start once they are visible. */
    long visible = 0;
    for (int tries = 0;
         (visible = kt_read_topic(bootstrap, topic, "read_committed", NULL, NULL)) < 30 &&
         tries < 100;
         tries++)
        usleep(100 * 1000);
    ck_assert_int_eq(visible, 30);
    got_reset();
    job_t j;
    const char *keys[] = {"bounded", "false", "start", "latest", "kafka.group.id", group, NULL};
    build_with(&j, topic, 2, "100", NULL, keys);
    live_t live = {.job = &j, .topic = topic};
    tpc_job_set_checkpoint_callback(j.job, on_checkpoint, &live);
    pthread_t writer;
    pthread_create(&writer, NULL, write_then_drain, &live);
    tpc_job_result_t result = TPC_JOB_FINISHED;
    set_ok(tpc_job_run(j.job, &result));
    void *stop_err = NULL;
    pthread_join(writer, &stop_err);
    set_ok(stop_err);
    ck_assert_int_eq(result, TPC_JOB_STOPPED);
    kf_check_t c = kf_check(got.values, got.count, live.committed);
    ck_assert_msg(c.dups == 0 && c.missing == 0 && c.foreign == 0 && c.disorder == 0,
                  "%zu records: %ld duplicates, %ld missing, %ld foreign (older than the start), "
                  "%ld out of key order",
                  got.count, c.dups, c.missing, c.foreign, c.disorder);

    /* The group holds the offsets of the last checkpoint: past the 30 records and 2 markers
     * older than the start and every committed record after it, at most the end. */
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    kt_set(conf, "bootstrap.servers", bootstrap);
    kt_set(conf, "group.id", group);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    ck_assert_msg(rk != NULL, "%s", errstr);
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(2);
    rd_kafka_topic_partition_list_add(list, topic, 0);
    rd_kafka_topic_partition_list_add(list, topic, 1);
    ck_assert_int_eq(rd_kafka_committed(rk, list, KT_TIMEOUT_MS), 0);
    int64_t sum = 0, low, high, ends = 0;
    for (int p = 0; p < 2; p++) {
        ck_assert_int_eq(rd_kafka_query_watermark_offsets(rk, topic, p, &low, &high, KT_TIMEOUT_MS),
                         0);
        ck_assert_int_le(list->elems[p].offset, high);
        sum += list->elems[p].offset > 0 ? list->elems[p].offset : 0;
        ends += high;
    }
    ck_assert_msg(sum >= 32 + (int64_t)live.committed,
                  "the group's offsets add up to %lld of %lld: they miss records the job read",
                  (long long)sum, (long long)ends);
    rd_kafka_topic_partition_list_destroy(list);
    rd_kafka_destroy(rk);
    destroy(&j);
}
END_TEST

/* partitions=: only the listed partitions are read, dealt to the subtasks as usual; a listed
 * partition the topic lacks fails the open. Record p*1000+i is the i-th of partition p. */
START_TEST(test_reads_only_the_listed_partitions)
{
    char topic[128];
    tpc_test_unique_name(topic, sizeof topic, "twopc-src-parts", '-');
    kt_create_topic(bootstrap, topic, 4);
    rd_kafka_t *rk = kf_producer(bootstrap, topic);
    rd_kafka_error_t *e = rd_kafka_begin_transaction(rk);
    ck_assert_msg(e == NULL, "begin: %s", e ? rd_kafka_error_string(e) : "");
    for (int p = 0; p < 4; p++)
        for (int i = 0; i < 50; i++) {
            char value[32];
            snprintf(value, sizeof value, "%d", p * 1000 + i);
            ck_assert_int_eq(rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(p),
                                               RD_KAFKA_V_VALUE(value, strlen(value)),
                                               RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                               RD_KAFKA_V_END),
                             RD_KAFKA_RESP_ERR_NO_ERROR);
        }
    kf_end_open_txn(rk, true);

    got_reset();
    job_t j;
    const char *keys[] = {"partitions", "1,3-3", NULL};
    build_with(&j, topic, 2, "100", NULL, keys);
    run_to_end(&j);
    ck_assert_uint_eq(got.count, 100);
    int per[4] = {0};
    for (size_t i = 0; i < got.count; i++) {
        ck_assert_uint_lt(got.values[i], 4000);
        per[got.values[i] / 1000]++;
    }
    ck_assert_msg(per[0] == 0 && per[1] == 50 && per[2] == 0 && per[3] == 50,
                  "records of partitions 0-3: %d %d %d %d", per[0], per[1], per[2], per[3]);
    destroy(&j);

    const char *beyond[] = {"partitions", "2-4", NULL};
    build_with(&j, topic, 1, "100", NULL, beyond);
    tpc_error_t *err = tpc_job_run(j.job, NULL);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    ck_assert_msg(strstr(tpc_error_message(err), "names partition 4, but topic"), "%s",
                  tpc_error_message(err));
    tpc_error_destroy(err);
    destroy(&j);
}
END_TEST

/* Run a one-subtask job on @bs/@topic and @returns its error (the caller frees it). */
static tpc_error_t *run_failing(const char *bs, const char *topic, const char *timeout)
{
    job_t j = {0};
    int s, k;
    j.ckpt = tpc_test_tmpdir("kafka-source");
    j.job = tpc_job_new("kafka-source");
    set_ok(tpc_job_set(j.job, "checkpoint.dir", j.ckpt));
    set_ok(tpc_job_set(j.job, "restart.attempts", "0"));
    set_ok(tpc_kafka_source_new(bs, topic, &j.src));
    set_ok(tpc_kafka_source_set(j.src, "open.timeout.ms", timeout));
    set_ok(tpc_kafka_source_add_to_job(j.src, j.job, "source", 1, &s));
    set_ok(tpc_job_add_vertex(j.job, "collect", 1, &collect_ops, NULL, &k));
    set_ok(tpc_job_connect(j.job, s, k, TPC_EDGE_FORWARD));
    tpc_error_t *err = tpc_job_run(j.job, NULL);
    destroy(&j);
    return err;
}

static void expect(tpc_error_t *err, const char *message, const char *hint)
{
    ck_assert_msg(err != NULL, "expected an error saying \"%s\"", message);
    const char *m = tpc_error_message(err), *h = tpc_error_hint_text(err);
    ck_assert_msg(strstr(m, message), "message \"%s\" does not say \"%s\"", m, message);
    if (hint)
        ck_assert_msg(h && strstr(h, hint), "hint \"%s\" does not say \"%s\"", h ? h : "(none)",
                      hint);
    tpc_error_destroy(err);
}

START_TEST(test_unknown_topic_and_unreachable_cluster)
{
    char topic[128];
    tpc_test_unique_name(topic, sizeof topic, "twopc-src-missing", '-');
    expect(run_failing(bootstrap, topic, "10000"), "could not read kafka topic",
           "create the topic");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    expect(run_failing("127.0.0.1:1", topic, "1500"), "could not reach kafka at \"127.0.0.1:1\"",
           NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ck_assert_int_lt(t1.tv_sec - t0.tv_sec, 10);
}
END_TEST

START_TEST(test_bad_keys)
{
    tpc_kafka_source_t *src = NULL;
    set_ok(tpc_kafka_source_new("127.0.0.1:1", "t", &src));
    expect(tpc_kafka_source_set(src, "bounded", "yes"), "invalid value \"yes\" for \"bounded\"",
           "true or false");
    expect(tpc_kafka_source_set(src, "start", "middle"), "invalid value \"middle\"", "latest");
    expect(tpc_kafka_source_set(src, "poll.timeout.ms", "500"), "\"poll.timeout.ms\"", "0 to 50");
    expect(tpc_kafka_source_set(src, "max.batch", "0"), "\"max.batch\"", NULL);
    expect(tpc_kafka_source_set(src, "kafka.isolation.level", "read_uncommitted"),
           "\"kafka.isolation.level\" cannot be set", "read_committed");
    expect(tpc_kafka_source_set(src, "kafka.no.such.property", "1"),
           "invalid kafka property \"no.such.property\"", NULL);
    expect(tpc_kafka_source_set(src, "group.id", "g"),
           "unknown configuration key \"group.id\" for a kafka source", "kafka.group.id");
    expect(tpc_kafka_source_set(src, "colour", "red"), "unknown configuration key \"colour\"",
           "kafka.");
    static const char *const bad_parts[] = {"", "a", "3-1", "1,,2", "-1", "1-", "2147483648"};
    for (size_t i = 0; i < sizeof bad_parts / sizeof *bad_parts; i++)
        expect(tpc_kafka_source_set(src, "partitions", bad_parts[i]), "for \"partitions\"",
               "e.g. 3 or 0-3,7");
    set_ok(tpc_kafka_source_set(src, "partitions", "0-3,7"));
    set_ok(tpc_kafka_source_set(src, "kafka.fetch.wait.max.ms", "10"));
    tpc_kafka_source_destroy(src);
    tpc_kafka_source_destroy(NULL);
    expect(tpc_kafka_source_new("127.0.0.1:1", NULL, &src), "needs bootstrap servers, a topic",
           NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kafka_source");
    TCase *tc = tcase_create("source");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_bounded_reads_exactly_the_committed_records);
    tcase_add_test(tc, test_resumes_at_the_checkpointed_offsets);
    tcase_add_test(tc, test_unbounded_from_latest_reports_offsets_to_a_group);
    tcase_add_test(tc, test_unknown_topic_and_unreachable_cluster);
    tcase_add_test(tc, test_bad_keys);
    tcase_add_test(tc, test_reads_only_the_listed_partitions);
    tcase_add_test(tc, test_no_stall_when_the_read_ahead_queue_fills);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
