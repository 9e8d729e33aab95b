/*
 * Where the Kafka source starts on a fresh start, against the real broker. Records are written in
 * transactions to chosen partitions with chosen timestamps, values numbered so that a reader can
 * tell every record apart. Shown here:
 *   - start=timestamp:<ms> reads exactly the records stamped at or after that time, and nothing
 *     when every record is older;
 *   - start=group reads from the group's committed offsets, and a partition the group has none
 *     for from its first offset (start.fallback=earliest) or its end (start.fallback=latest);
 *     start=group without a group fails at open;
 *   - a source over several topics ("b,a") reads every partition of each exactly once, dealt
 *     over its subtasks;
 *   - an offset stored in a checkpoint that retention deleted (DeleteRecords) while the job was
 *     stopped fails the restored job with TPC_ERR_DATA_LOSS.
 */
#include "check_kafka_common.h"
#include "check_kafka_source_fill.h"
#include "tpc_kafka.h"
#include "tpc_test_ops.h"

#include <pthread.h>
#include <unistd.h>
#include <stdlib.h>
#include <time.h>

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

/* The values a job's sink received, from all its subtasks. */
static struct {
    pthread_mutex_t lock;
    uint64_t *values;
    size_t count, cap;
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
    return NULL;
}

static const tpc_operator_ops_t collect_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = collect_open,
    .process = collect_process,
};

/* Write records @from .. @from + @n - 1 to @partition of @topic in one committed transaction,
 * stamped @timestamp (0: now). */
static void write_range(const char *topic, int32_t partition, uint64_t from, int n,
                        int64_t timestamp)
{
    char id[200], key[32], value[32];
    snprintf(id, sizeof id, "%s-w%d-%llu", topic, (int)partition, (unsigned long long)from);
    rd_kafka_t *rk = kf_producer(bootstrap, id);
    ck_assert_ptr_null(rd_kafka_begin_transaction(rk));
    for (int i = 0; i < n; i++) {
        uint64_t v = from + (uint64_t)i;
        snprintf(key, sizeof key, "k%llu", (unsigned long long)(v % KF_KEYS));
        snprintf(value, sizeof value, "%llu", (unsigned long long)v);
        rd_kafka_resp_err_t e = rd_kafka_producev(
            rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(partition),
            RD_KAFKA_V_KEY(key, strlen(key)), RD_KAFKA_V_VALUE(value, strlen(value)),
            RD_KAFKA_V_TIMESTAMP(timestamp), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_END);
        ck_assert_msg(!e, "produce: %s", rd_kafka_err2str(e));
    }
    kf_end_open_txn(rk, true);
}

/* Run a bounded job, source (@parallelism subtasks) -> collector, over @topics with the source
 * keys @keys (name, value, ..., NULL) and @returns its error. */
static tpc_error_t *run_bounded(const char *topics, int parallelism, const char *const *keys)
{
    tpc_kafka_source_t *src = NULL;
    char *ckpt = tpc_test_tmpdir("kafka-source-start");
    tpc_job_t *job = tpc_job_new("kafka-source-start");
    int s, k;
    pthread_mutex_lock(&got.lock);
    got.count = 0;
    pthread_mutex_unlock(&got.lock);
    set_ok(tpc_job_set(job, "checkpoint.dir", ckpt));
    set_ok(tpc_job_set(job, "checkpoint.interval.ms", "100"));
    set_ok(tpc_job_set(job, "restart.attempts", "0"));
    set_ok(tpc_kafka_source_new(bootstrap, topics, &src));
    set_ok(tpc_kafka_source_set(src, "bounded", "true"));
    for (; keys && *keys; keys += 2)
        set_ok(tpc_kafka_source_set(src, keys[0], keys[1]));
    set_ok(tpc_kafka_source_add_to_job(src, job, "source", parallelism, &s));
    set_ok(tpc_job_add_vertex(job, "collect", parallelism, &collect_ops, NULL, &k));
    set_ok(tpc_job_connect(job, s, k, TPC_EDGE_FORWARD));
    tpc_job_result_t result = TPC_JOB_CANCELED;
    tpc_error_t *err = tpc_job_run(job, &result);
    if (!err)
        ck_assert_int_eq(result, TPC_JOB_FINISHED);
    tpc_job_destroy(job);
    tpc_kafka_source_destroy(src);
    tpc_test_rmdir(ckpt);
    free(ckpt);
    return err;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The job received exactly the values of the ranges [from, to) given as from, to, ..., 0, 0. */
static void expect_ranges(const char *what, const uint64_t *ranges)
{
    size_t n = 0;
    for (const uint64_t *r = ranges; r[0] || r[1]; r += 2)
        n += r[1] - r[0];
    uint64_t *want = malloc((n ? n : 1) * sizeof *want);
    size_t i = 0;
    for (const uint64_t *r = ranges; r[0] || r[1]; r += 2)
        for (uint64_t v = r[0]; v < r[1]; v++)
            want[i++] = v;
    qsort(got.values, got.count, sizeof *got.values, cmp_u64);
    ck_assert_msg(got.count == n, "%s: %zu records, expected %zu", what, got.count, n);
    for (i = 0; i < n; i++)
        ck_assert_msg(got.values[i] == want[i], "%s: record %llu where %llu was expected", what,
                      (unsigned long long)got.values[i], (unsigned long long)want[i]);
    free(want);
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

START_TEST(test_start_at_a_timestamp)
{
    char topic[128], at[64], after[64];
    tpc_test_unique_name(topic, sizeof topic, "twopc-src-ts", '-');
    kt_create_topic(bootstrap, topic, 2);
    int64_t base = wall_ms() - 600000;
    write_range(topic, 0, 0, 40, base);
    write_range(topic, 1, 40, 40, base + 1000);
    write_range(topic, 0, 80, 30, base + 20000);
    write_range(topic, 1, 110, 30, base + 30000);
    snprintf(at, sizeof at, "timestamp:%lld", (long long)(base + 20000));
    const char *keys[] = {"start", at, NULL};
    set_ok(run_bounded(topic, 2, keys));
    expect_ranges("start at a timestamp", (const uint64_t[]){80, 140, 0, 0});

    /* Later than every record: nothing to read, and the bounded job still ends. */
    snprintf(after, sizeof after, "timestamp:%lld", (long long)wall_ms() + 3600000);
    const char *later[] = {"start", after, NULL};
    set_ok(run_bounded(topic, 1, later));
    expect_ranges("start after every record", (const uint64_t[]){0, 0});
}
END_TEST

/* Commit, for @group, offset @offset of partition 0 of @topic and nothing for the others. */
static void commit_group(const char *group, const char *topic, int64_t offset)
{
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    kt_set(conf, "bootstrap.servers", bootstrap);
    kt_set(conf, "group.id", group);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    ck_assert_msg(rk != NULL, "%s", errstr);
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, topic, 0)->offset = offset;
    rd_kafka_resp_err_t e = rd_kafka_commit(rk, list, 0);
    ck_assert_msg(!e, "commit: %s", rd_kafka_err2str(e));
    rd_kafka_topic_partition_list_destroy(list);
    rd_kafka_destroy(rk);
}

START_TEST(test_start_at_the_group_offsets)
{
    char topic[128], g1[128], g2[128];
    tpc_test_unique_name(topic, sizeof topic, "twopc-src-grp", '-');
    tpc_test_unique_name(g1, sizeof g1, "twopc-src-grp1", '-');
    tpc_test_unique_name(g2, sizeof g2, "twopc-src-grp2", '-');
    kt_create_topic(bootstrap, topic, 2);
    write_range(topic, 0, 0, 50, 0);
    write_range(topic, 1, 50, 50, 0);
    /* Partition 0 holds 50 records and a commit marker: the group read all of it. */
    commit_group(g1, topic, 51);
    commit_group(g2, topic, 51);
    write_range(topic, 0, 100, 50, 0);
    write_range(topic, 1, 150, 50, 0);

    const char *keys1[] = {"start", "group", "kafka.group.id", g1, NULL};
    set_ok(run_bounded(topic, 2, keys1));
    expect_ranges("start at the group's offsets, else earliest",
                  (const uint64_t[]){50, 100, 100, 200, 0, 0});

    const char *keys2[] = {"start", "group", "start.fallback", "latest", "kafka.group.id",
                           g2,      NULL};
    set_ok(run_bounded(topic, 1, keys2));
    expect_ranges("start at the group's offsets, else latest", (const uint64_t[]){100, 150, 0, 0});

    const char *no_group[] = {"start", "group", NULL};
    tpc_error_t *err = run_bounded(topic, 1, no_group);
    ck_assert_msg(err && strstr(tpc_error_message(err), "start=group needs a consumer group"),
                  "start=group without a group: %s", err ? tpc_error_message(err) : "no error");
    tpc_error_destroy(err);

    tpc_kafka_source_t *src = NULL;
    set_ok(tpc_kafka_source_new(bootstrap, topic, &src));
    err = tpc_kafka_source_set(src, "start", "timestamp:soon");
    ck_assert_msg(err && strstr(tpc_error_hint_text(err), "timestamp:<ms>"), "bad timestamp");
    tpc_error_destroy(err);
    err = tpc_kafka_source_set(src, "start.fallback", "group");
    ck_assert_msg(err != NULL, "start.fallback=group accepted");
    tpc_error_destroy(err);
    tpc_kafka_source_destroy(src);
}
END_TEST

START_TEST(test_several_topics)
{
    char a[128], b[128], both[300];
    tpc_test_unique_name(a, sizeof a, "twopc-src-a", '-');
    tpc_test_unique_name(b, sizeof b, "twopc-src-b", '-');
    kt_create_topic(bootstrap, a, 2);
    kt_create_topic(bootstrap, b, 3);
    for (int p = 0; p < 2; p++)
        write_range(a, p, 40 * (uint64_t)p, 40, 0);
    for (int p = 0; p < 3; p++)
        write_range(b, p, 80 + 40 * (uint64_t)p, 40, 0);
    snprintf(both, sizeof both, "%s, %s", b, a);
    set_ok(run_bounded(both, 2, NULL));
    expect_ranges("two topics, two subtasks", (const uint64_t[]){0, 200, 0, 0});
    set_ok(run_bounded(both, 4, NULL));
    expect_ranges("two topics, four subtasks", (const uint64_t[]){0, 200, 0, 0});

    tpc_kafka_source_t *src = NULL;
    tpc_error_t *err = tpc_kafka_source_new(bootstrap, "a,,b", &src);
    ck_assert_msg(err && strstr(tpc_error_message(err), "empty topic name"), "a,,b accepted");
    tpc_error_destroy(err);
}
END_TEST

static void delete_records_before(const char *topic, int64_t offset)
{
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    kt_set(conf, "bootstrap.servers", bootstrap);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    ck_assert_msg(rk != NULL, "%s", errstr);
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, topic, 0)->offset = offset;
    rd_kafka_DeleteRecords_t *del = rd_kafka_DeleteRecords_new(list);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_DeleteRecords(rk, &del, 1, NULL, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, KT_TIMEOUT_MS);
    ck_assert_msg(ev && !rd_kafka_event_error(ev), "delete records: %s",
                  ev ? rd_kafka_event_error_string(ev) : "timed out");
    const rd_kafka_topic_partition_list_t *res =
        rd_kafka_DeleteRecords_result_offsets(rd_kafka_event_DeleteRecords_result(ev));
    ck_assert_msg(res && res->cnt == 1 && !res->elems[0].err, "delete records: %s",
                  res && res->cnt ? rd_kafka_err2str(res->elems[0].err) : "no result");
    rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_DeleteRecords_destroy(del);
    rd_kafka_topic_partition_list_destroy(list);
    rd_kafka_destroy(rk);
}

static void *stop_after_50(void *arg)
{
    for (int waited = 0; waited < 20000; waited++) {
        pthread_mutex_lock(&got.lock);
        size_t n = got.count;
        pthread_mutex_unlock(&got.lock);
        if (n >= 50)
            break;
        usleep(1000);
    }
    return tpc_job_stop_with_savepoint(arg, false, NULL);
}

/* An unbounded one-subtask job over @topic keeping its checkpoints in @ckpt; @stop: stop it
 * with a savepoint once it has 50 records. @returns the job's error. */
static tpc_error_t *run_unbounded(const char *topic, const char *ckpt, bool stop)
{
    tpc_kafka_source_t *src = NULL;
    tpc_job_t *job = tpc_job_new("kafka-source-start");
    int s, k;
    pthread_mutex_lock(&got.lock);
    got.count = 0;
    pthread_mutex_unlock(&got.lock);
    set_ok(tpc_job_set(job, "checkpoint.dir", ckpt));
    set_ok(tpc_job_set(job, "checkpoint.interval.ms", "0"));
    set_ok(tpc_job_set(job, "restart.attempts", "0"));
    set_ok(tpc_kafka_source_new(bootstrap, topic, &src));
    set_ok(tpc_kafka_source_add_to_job(src, job, "source", 1, &s));
    set_ok(tpc_job_add_vertex(job, "collect", 1, &collect_ops, NULL, &k));
    set_ok(tpc_job_connect(job, s, k, TPC_EDGE_FORWARD));
    pthread_t stopper;
    if (stop)
        pthread_create(&stopper, NULL, stop_after_50, job);
    tpc_job_result_t result = TPC_JOB_CANCELED;
    tpc_error_t *err = tpc_job_run(job, &result);
    if (stop) {
        void *stop_err = NULL;
        pthread_join(stopper, &stop_err);
        set_ok(stop_err);
        ck_assert_int_eq(result, TPC_JOB_STOPPED);
    }
    tpc_job_destroy(job);
    tpc_kafka_source_destroy(src);
    return err;
}

START_TEST(test_deleted_offset_is_data_loss)
{
    char topic[128];
    tpc_test_unique_name(topic, sizeof topic, "twopc-src-lost", '-');
    kt_create_topic(bootstrap, topic, 1);
    write_range(topic, 0, 0, 50, 0); /* offsets 0-49, marker 50 */
    char *ckpt = tpc_test_tmpdir("kafka-source-lost");
    set_ok(run_unbounded(topic, ckpt, true)); /* the savepoint stores offset 51 */
    write_range(topic, 0, 50, 50, 0);         /* offsets 51-100, marker 101 */
    delete_records_before(topic, 80);
    tpc_error_t *err = run_unbounded(topic, ckpt, false);
    ck_assert_msg(err && tpc_error_code(err) == TPC_ERR_DATA_LOSS, "restore after deletion: %s",
                  err ? tpc_error_message(err) : "no error");
    ck_assert_msg(strstr(tpc_error_message(err), topic), "%s", tpc_error_message(err));
    ck_assert_msg(strstr(tpc_error_message(err), "no longer has the records"), "%s",
                  tpc_error_message(err));
    tpc_error_destroy(err);
    tpc_test_rmdir(ckpt);
    free(ckpt);
}
END_TEST

/* The topic deleted and made again with fewer records than the job had read: data loss too, but
 * said as what it is (the partition ends before the stored offset), not as retention. */
START_TEST(test_offset_past_the_end_is_named)
{
    char topic[128];
    tpc_test_unique_name(topic, sizeof topic, "twopc-src-short", '-');
    kt_create_topic(bootstrap, topic, 1);
    write_range(topic, 0, 0, 50, 0); /* offsets 0-49, marker 50 */
    char *ckpt = tpc_test_tmpdir("kafka-source-short");
    set_ok(run_unbounded(topic, ckpt, true)); /* the savepoint stores offset 51 */
    kt_delete_topic(bootstrap, topic);
    kt_create_topic_tries(bootstrap, topic, 1, NULL, NULL, 50);
    write_range(topic, 0, 0, 10, 0); /* offsets 0-9, marker 10 */
    tpc_error_t *err = run_unbounded(topic, ckpt, false);
    ck_assert_msg(err && tpc_error_code(err) == TPC_ERR_DATA_LOSS, "restore after re-creation: %s",
                  err ? tpc_error_message(err) : "no error");
    ck_assert_msg(strstr(tpc_error_message(err), "ends at offset") &&
                      strstr(tpc_error_message(err), topic),
                  "%s", tpc_error_message(err));
    tpc_error_destroy(err);
    tpc_test_rmdir(ckpt);
    free(ckpt);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kafka_source_start");
    TCase *tc = tcase_create("start");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_start_at_a_timestamp);
    tcase_add_test(tc, test_start_at_the_group_offsets);
    tcase_add_test(tc, test_several_topics);
    tcase_add_test(tc, test_deleted_offset_is_data_loss);
    tcase_add_test(tc, test_offset_past_the_end_is_named);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
