/*
 * A Kafka source that keeps up with its topics, against the real broker: partitions added to the
 * input topic while the job runs, and topics that appear for a pattern, are read; a Kafka ->
 * Kafka job keeps every record's key, value, timestamp and headers. The job runs in a child
 * process (this binary with "--child"), Kafka source (unbounded) -> pass-through -> exactly-once
 * Kafka sink, and is killed with SIGKILL: before a discovery, after one, and then restarted at
 * another parallelism. An independent read_committed consumer must find in the output every
 * input record exactly once.
 */
#include "check_kafka_common.h"
#include "tpc_kafka.h"
#include "tpc_test_ops.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define WAIT_S 40

static const char *bootstrap;

static void log_line(void *opaque, tpc_log_level_t level, const char *message)
{
    (void)opaque, (void)level;
    fprintf(stderr, "%s\n", message);
}

static int pass_sleep_us; /* per batch, to kill a bounded job half-way */

static tpc_error_t *pass_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)self;
    if (pass_sleep_us)
        usleep((useconds_t)pass_sleep_us);
    for (size_t i = 0; i < tpc_batch_count(batch); i++) {
        tpc_record_t r;
        tpc_batch_get(batch, i, &r);
        if (tpc_emit(ctx, &r) != TPC_OK)
            return NULL; /* canceled */
    }
    return NULL;
}

static tpc_error_t *pass_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx, (void)arg;
    *self = NULL;
    return NULL;
}

static const tpc_operator_ops_t pass_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = pass_open,
    .process = pass_process,
};

/* The job, until it is killed (or, bounded, until it ends): source(@p) -> pass(@p) -> sink(@p),
 * checkpoints every 100 ms. */
static int child_main(char **argv)
{
    const char *bs = argv[0], *in = argv[1], *out = argv[2], *prefix = argv[3], *ckpt = argv[4];
    const char *parallelism = argv[5], *discovery_ms = argv[6], *bounded = argv[7];
    pass_sleep_us = atoi(argv[8]) * 1000;
    alarm(120);
    int p = atoi(parallelism), s, m, k;
    tpc_job_t *job = tpc_job_new("kafka-source-discovery");
    tpc_kafka_source_t *src = NULL;
    tpc_txn_sink_t *sink = NULL;
    tpc_job_set_logger(job, log_line, NULL, TPC_LOG_INFO);
    tpc_error_t *err = tpc_job_set(job, "checkpoint.dir", ckpt);
    if (!err)
        err = tpc_job_set(job, "checkpoint.interval.ms", "100");
    if (!err)
        err = tpc_kafka_source_new(bs, in, &src);
    if (!err)
        err = tpc_kafka_source_set(src, "partition.discovery.interval.ms", discovery_ms);
    if (!err)
        err = tpc_kafka_source_set(src, "kafka.topic.metadata.refresh.interval.ms", "500");
    if (!err)
        err = tpc_kafka_source_set(src, "bounded", bounded);
    if (!err)
        err = tpc_kafka_source_set(src, "max.batch", pass_sleep_us ? "10" : "500");
    if (!err)
        err = tpc_kafka_sink_new(bs, out, &sink);
    if (!err)
        err = tpc_txn_sink_set(sink, "transactional.id.prefix", prefix);
    if (!err)
        err = tpc_txn_sink_set(sink, "kafka.linger.ms", "2");
    if (!err)
        err = tpc_kafka_source_add_to_job(src, job, "source", p, &s);
    if (!err)
        err = tpc_job_add_vertex(job, "pass", p, &pass_ops, NULL, &m);
    if (!err)
        err = tpc_txn_sink_add_to_job(sink, job, "sink", p, &k);
    if (!err)
        err = tpc_job_connect(job, s, m, TPC_EDGE_FORWARD);
    if (!err)
        err = tpc_job_connect(job, m, k, TPC_EDGE_FORWARD);
    tpc_job_result_t result = TPC_JOB_CANCELED;
    if (!err)
        err = tpc_job_run(job, &result);
    fprintf(stderr, "discovery child: %s\n", err ? tpc_error_message(err) : "ended");
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(sink);
    tpc_kafka_source_destroy(src);
    return 1; /* an unbounded job ends only when killed */
}

/* ---- input ---------------------------------------------------------------------------------- */

static rd_kafka_t *producer(void)
{
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    kt_set(conf, "bootstrap.servers", bootstrap);
    kt_set(conf, "enable.idempotence", "true");
    kt_set(conf, "linger.ms", "5");
    /* Partitions added a moment ago are known at once. */
    kt_set(conf, "topic.metadata.refresh.interval.ms", "200");
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    ck_assert_msg(rk != NULL, "%s", errstr);
    return rk;
}

/* Values first .. first + count - 1 into @partition of @topic. */
static void produce(const char *topic, int partition, int first, int count)
{
    rd_kafka_t *rk = producer();
    for (int i = first; i < first + count; i++) {
        char key[32], value[32];
        snprintf(key, sizeof key, "k%d", i % 7);
        snprintf(value, sizeof value, "%d", i);
        rd_kafka_resp_err_t e;
        /* A partition created a moment ago may not be in the producer's metadata yet. */
        for (int tries = 0; tries < 200; tries++) {
            e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(partition),
                                  RD_KAFKA_V_KEY(key, strlen(key)),
                                  RD_KAFKA_V_VALUE(value, strlen(value)),
                                  RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
            if (e != RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION && e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
                break;
            rd_kafka_poll(rk, 50);
        }
        ck_assert_msg(!e, "produce to %s [%d]: %s", topic, partition, rd_kafka_err2str(e));
    }
    ck_assert_int_eq(rd_kafka_flush(rk, KT_TIMEOUT_MS), 0);
    rd_kafka_destroy(rk);
}

/* ---- output --------------------------------------------------------------------------------- */

typedef struct {
    int *seen; /* per value */
    int total;
    long foreign;
    long records;
} tally_t;

static void count_value(void *opaque, const rd_kafka_message_t *msg)
{
    tally_t *t = opaque;
    char buf[32];
    size_t n = msg->payload ? (msg->len < sizeof buf - 1 ? msg->len : sizeof buf - 1) : 0;
    if (n)
        memcpy(buf, msg->payload, n);
    buf[n] = '\0';
    char *end;
    long v = strtol(buf, &end, 10);
    t->records++;
    if (*end || n == 0 || v < 0 || v >= t->total)
        t->foreign++;
    else
        t->seen[v]++;
}

static tally_t read_output(const char *out, int total)
{
    tally_t t = {.seen = calloc((size_t)total, sizeof(int)), .total = total};
    kt_read_topic(bootstrap, out, "read_committed", count_value, &t);
    return t;
}

/* Wait until the output holds @want records, the child still running. */
static void wait_output(const char *out, long want, pid_t child, const char *log, const char *what)
{
    long got = 0;
    for (int i = 0; i < WAIT_S * 4; i++) {
        tally_t t = read_output(out, 1);
        got = t.records;
        free(t.seen);
        if (got >= want)
            return;
        int status;
        if (tpc_test_wait(child, 0, &status)) {
            tpc_test_dump_log(log);
            ck_abort_msg("the job ended (status %d) %s", status, what);
        }
        usleep(250000);
    }
    tpc_test_dump_log(log);
    ck_abort_msg("%s: only %ld of %ld records reached the output", what, got, want);
}

static int count_in_log(const char *log, const char *needle)
{
    FILE *f = fopen(log, "r");
    char line[2048];
    int n = 0;
    while (f && fgets(line, sizeof line, f))
        n += strstr(line, needle) != NULL;
    if (f)
        fclose(f);
    return n;
}

static void wait_log(const char *log, const char *needle, int want, const char *what)
{
    for (int i = 0; i < WAIT_S * 4 && count_in_log(log, needle) < want; i++)
        usleep(250000);
    if (count_in_log(log, needle) < want) {
        tpc_test_dump_log(log);
        ck_abort_msg("%s: the log does not say \"%s\"", what, needle);
    }
}

static pid_t start_job_as(const char *in, const char *out, const char *prefix, const char *ckpt,
                          const char *parallelism, const char *discovery_ms, const char *bounded,
                          const char *sleep_ms, const char *log)
{
    char self[4096];
    ck_assert(tpc_test_self_path(self, sizeof self));
    const char *argv[] = {self, "--child",   bootstrap,    in,      out,      prefix,
                          ckpt, parallelism, discovery_ms, bounded, sleep_ms, NULL};
    pid_t pid = tpc_test_spawn(argv, log, -1);
    ck_assert_int_gt(pid, 0);
    return pid;
}

static pid_t start_job(const char *in, const char *out, const char *prefix, const char *ckpt,
                       const char *parallelism, const char *discovery_ms, const char *log)
{
    return start_job_as(in, out, prefix, ckpt, parallelism, discovery_ms, "false", "0", log);
}

/* Every value 0 .. total - 1 exactly once, nothing else. */
static void check_exactly_once(const char *out, int total, const char *log)
{
    tally_t t = read_output(out, total);
    long missing = 0, dups = 0;
    for (int v = 0; v < total; v++) {
        missing += t.seen[v] == 0;
        dups += t.seen[v] > 1 ? t.seen[v] - 1 : 0;
    }
    if (missing || dups || t.foreign)
        tpc_test_dump_log(log);
    ck_assert_msg(!missing && !dups && !t.foreign,
                  "%ld records read back: %ld missing, %ld duplicates, %ld foreign", t.records,
                  missing, dups, t.foreign);
    free(t.seen);
}

START_TEST(test_partitions_added_while_running_are_read_exactly_once)
{
    char in[128], out[128], prefix[128];
    tpc_test_unique_name(in, sizeof in, "twopc-disc-in", '-');
    tpc_test_unique_name(out, sizeof out, "twopc-disc-out", '-');
    tpc_test_unique_name(prefix, sizeof prefix, "twopc-disc", '-');
    char *ckpt = tpc_test_tmpdir("kafka-discovery");
    char log[4200];
    snprintf(log, sizeof log, "%s.log", ckpt);
    kt_create_topic(bootstrap, in, 2);
    kt_create_topic(bootstrap, out, 3);
    produce(in, 0, 0, 200);
    produce(in, 1, 200, 200);

    /* Run 1: the old partitions; then two partitions appear, and the job dies before its first
     * discovery (due a minute after its start) can find them. */
    pid_t job = start_job(in, out, prefix, ckpt, "2", "60000", log);
    wait_output(out, 400, job, log, "run 1");
    kt_add_partitions(bootstrap, in, 4);
    produce(in, 2, 400, 100);
    produce(in, 3, 500, 100);
    tpc_test_kill(job);

    /* Run 2 restores a checkpoint without partitions 2 and 3: it reads them from their first
     * offsets. Two more appear while it runs; once it found them and a checkpoint that holds
     * them completed (their records are committed), more records follow and it is killed. */
    job = start_job(in, out, prefix, ckpt, "2", "300", log);
    wait_output(out, 600, job, log, "run 2, partitions added while the job was down");
    int found = count_in_log(log, "more partitions of");
    kt_add_partitions(bootstrap, in, 6);
    produce(in, 4, 600, 100);
    produce(in, 5, 700, 100);
    for (int p = 0; p < 4; p++)
        produce(in, p, 800 + 50 * p, 50);
    wait_log(log, "more partitions of", found + 1, "run 2");
    wait_output(out, 1000, job, log, "run 2, partitions added while the job ran");
    produce(in, 4, 1000, 50);
    produce(in, 5, 1050, 50);
    tpc_test_kill(job);

    /* Run 3 at parallelism 3: the same rule spreads the six partitions over three subtasks, each
     * from the checkpoint's offset. */
    job = start_job(in, out, prefix, ckpt, "3", "300", log);
    for (int p = 0; p < 6; p++)
        produce(in, p, 1100 + 20 * p, 20);
    wait_output(out, 1220, job, log, "run 3, rescaled");
    usleep(500000); /* a few more checkpoints: nothing more may come */
    tpc_test_kill(job);
    check_exactly_once(out, 1220, log);
    ck_assert_int_ge(count_in_log(log, "from the restored offsets"), 2);
    printf("kafka source discovery: 2 -> 4 -> 6 partitions, kill -9 before and after a discovery, "
           "parallelism 2 -> 3: 1220 records exactly once\n");
    unlink(log);
    tpc_test_rmdir(ckpt);
    free(ckpt);
}
END_TEST

START_TEST(test_pattern_reads_topics_that_appear)
{
    char base[96], a[128], b[128], other[128], pattern[160], out[128], prefix[128];
    tpc_test_unique_name(base, sizeof base, "twopc-pat", '-');
    snprintf(a, sizeof a, "%s-a", base);
    snprintf(b, sizeof b, "%s-b", base);
    snprintf(other, sizeof other, "%sx-c", base);
    snprintf(pattern, sizeof pattern, "^%s-.*", base);
    tpc_test_unique_name(out, sizeof out, "twopc-pat-out", '-');
    tpc_test_unique_name(prefix, sizeof prefix, "twopc-pat", '-');
    char *ckpt = tpc_test_tmpdir("kafka-pattern");
    char log[4200];
    snprintf(log, sizeof log, "%s.log", ckpt);
    kt_create_topic(bootstrap, a, 2);
    kt_create_topic(bootstrap, other, 1);
    kt_create_topic(bootstrap, out, 2);
    produce(a, 0, 0, 50);
    produce(a, 1, 50, 50);
    produce(other, 0, 5000, 10); /* does not match: never read */

    pid_t job = start_job(pattern, out, prefix, ckpt, "2", "300", log);
    wait_output(out, 100, job, log, "topic of the pattern at start");
    kt_create_topic(bootstrap, b, 3);
    for (int p = 0; p < 3; p++)
        produce(b, p, 100 + 30 * p, 30);
    wait_output(out, 190, job, log, "topic of the pattern that appeared");
    /* A crash after the new topic was taken: the restore goes on from the checkpoint. */
    tpc_test_kill(job);
    job = start_job(pattern, out, prefix, ckpt, "2", "300", log);
    produce(b, 0, 190, 10);
    wait_output(out, 200, job, log, "after the restore");
    /* A topic that goes away is reported, not dropped in silence. */
    kt_delete_topic(bootstrap, a);
    wait_log(log, "was deleted", 1, "deleted topic");
    tpc_test_kill(job);
    check_exactly_once(out, 200, log);
    printf("kafka source pattern: a topic created while the job ran was read, one deleted was "
           "reported: 200 records exactly once\n");
    unlink(log);
    tpc_test_rmdir(ckpt);
    free(ckpt);
}
END_TEST

/* A checkpoint without the list of known partitions (list state: a bounded run, or a version
 * before discovery) restored into an unbounded source: each subtask keeps the partitions it got,
 * the partitions there are count as known, and partitions added later are read. */
START_TEST(test_unbounded_after_a_bounded_checkpoint_discovers)
{
    char in[128], out[128], prefix[128];
    tpc_test_unique_name(in, sizeof in, "twopc-list-in", '-');
    tpc_test_unique_name(out, sizeof out, "twopc-list-out", '-');
    tpc_test_unique_name(prefix, sizeof prefix, "twopc-list", '-');
    char *ckpt = tpc_test_tmpdir("kafka-list-state");
    char log[4200];
    snprintf(log, sizeof log, "%s.log", ckpt);
    kt_create_topic(bootstrap, in, 2);
    kt_create_topic(bootstrap, out, 2);
    produce(in, 0, 0, 300);
    produce(in, 1, 300, 300);

    /* A slow bounded run, killed once part of the input is committed. */
    pid_t job = start_job_as(in, out, prefix, ckpt, "2", "300", "true", "100", log);
    wait_output(out, 50, job, log, "bounded run");
    tpc_test_kill(job);
    /* Unbounded from its checkpoint: the rest, then two partitions that appear. */
    job = start_job(in, out, prefix, ckpt, "2", "300", log);
    wait_log(log, "has no list of the partitions", 1, "restore of list state");
    kt_add_partitions(bootstrap, in, 4);
    produce(in, 2, 600, 100);
    produce(in, 3, 700, 100);
    produce(in, 0, 800, 50);
    wait_output(out, 850, job, log, "partitions added after the restore");
    /* Restored again, now from union state with the floor: nothing twice. */
    tpc_test_kill(job);
    job = start_job(in, out, prefix, ckpt, "3", "300", log);
    produce(in, 3, 850, 50);
    wait_output(out, 900, job, log, "rescaled after the list-state restore");
    usleep(500000);
    tpc_test_kill(job);
    check_exactly_once(out, 900, log);
    unlink(log);
    tpc_test_rmdir(ckpt);
    free(ckpt);
}
END_TEST

/* ---- headers -------------------------------------------------------------------------------- */

#define HDR_RECORDS 300
#define HDR_TS_BASE 1700000000000LL

/* What record i carries: none, one header, or three (a repeated name, binary bytes with a zero
 * byte, a null value, an empty name with an empty value). */
static int expected_headers(int i, tpc_header_t *h)
{
    static const char bin[] = {'x', '\0', 'y', (char)0xff};
    static char trace[HDR_RECORDS][16];
    switch (i % 3) {
    case 0:
        return 0;
    case 1:
        snprintf(trace[i], sizeof trace[i], "t-%d", i);
        h[0] = (tpc_header_t){"trace", 5, trace[i], strlen(trace[i])};
        return 1;
    default:
        h[0] = (tpc_header_t){"a", 1, bin, sizeof bin};
        h[1] = (tpc_header_t){"a", 1, NULL, 0};
        h[2] = (tpc_header_t){"", 0, "", 0};
        return 3;
    }
}

static void produce_with_headers(const char *topic)
{
    rd_kafka_t *rk = producer();
    for (int i = 0; i < HDR_RECORDS; i++) {
        char key[32], value[32];
        int klen = snprintf(key, sizeof key, "key-%d", i);
        snprintf(value, sizeof value, "%d", i);
        tpc_header_t h[3];
        int n = expected_headers(i, h);
        rd_kafka_headers_t *hdrs = n ? rd_kafka_headers_new((size_t)n) : NULL;
        for (int j = 0; j < n; j++)
            rd_kafka_header_add(hdrs, h[j].name, (ssize_t)h[j].name_len, h[j].value,
                                (ssize_t)h[j].value_len);
        /* A null key, or a null value (a tombstone): null, not empty, at the other end. */
        bool null_key = i % 10 == 7, null_value = i % 10 == 3;
        rd_kafka_resp_err_t e = rd_kafka_producev(
            rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(i % 2),
            RD_KAFKA_V_KEY(null_key ? NULL : key, null_key ? 0 : (size_t)klen),
            RD_KAFKA_V_VALUE(null_value ? NULL : value, null_value ? 0 : strlen(value)),
            RD_KAFKA_V_TIMESTAMP(HDR_TS_BASE + i), RD_KAFKA_V_HEADERS(hdrs),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
        ck_assert_msg(!e, "produce: %s", rd_kafka_err2str(e));
    }
    ck_assert_int_eq(rd_kafka_flush(rk, KT_TIMEOUT_MS), 0);
    rd_kafka_destroy(rk);
}

typedef struct {
    int seen[HDR_RECORDS];
    long wrong;
    char first_wrong[256];
} hdr_check_t;

static void check_message(void *opaque, const rd_kafka_message_t *msg)
{
    hdr_check_t *c = opaque;
    char buf[32], key[32];
    /* The record's number is its value, or for a tombstone in its key "key-<i>". */
    const void *from = msg->payload ? msg->payload : msg->key;
    size_t flen = msg->payload ? msg->len : msg->key_len;
    size_t n = flen < sizeof buf - 1 ? flen : sizeof buf - 1;
    if (from)
        memcpy(buf, from, n);
    buf[from ? n : 0] = '\0';
    int i = atoi(msg->payload ? buf : buf + (n > 4 ? 4 : n));
    if (!from)
        i = -1;
    const char *why = NULL;
    rd_kafka_timestamp_type_t type;
    int klen = snprintf(key, sizeof key, "key-%d", i);
    bool null_key = i % 10 == 7, null_value = i % 10 == 3;
    tpc_header_t want[3];
    int nwant = i >= 0 && i < HDR_RECORDS ? expected_headers(i, want) : 0;
    rd_kafka_headers_t *hdrs = NULL;
    size_t ngot = rd_kafka_message_headers(msg, &hdrs) ? 0 : rd_kafka_header_cnt(hdrs);
    if (i < 0 || i >= HDR_RECORDS)
        why = "foreign value";
    else if (null_key ? msg->key != NULL
                      : !msg->key || msg->key_len != (size_t)klen ||
                            memcmp(msg->key, key, (size_t)klen) != 0)
        why = "key";
    else if (null_value != (msg->payload == NULL))
        why = "null value";
    else if (rd_kafka_message_timestamp(msg, &type) != HDR_TS_BASE + i)
        why = "timestamp";
    else if (ngot != (size_t)nwant)
        why = "header count";
    for (int j = 0; !why && j < nwant; j++) {
        const char *name;
        const void *value;
        size_t len;
        if (rd_kafka_header_get_all(hdrs, (size_t)j, &name, &value, &len) ||
            strlen(name) != want[j].name_len || memcmp(name, want[j].name, want[j].name_len) ||
            (value == NULL) != (want[j].value == NULL) || len != want[j].value_len ||
            (len && memcmp(value, want[j].value, len)))
            why = "header bytes";
    }
    if (why && !c->wrong++)
        snprintf(c->first_wrong, sizeof c->first_wrong, "record %d: %s differs", i, why);
    if (i >= 0 && i < HDR_RECORDS)
        c->seen[i]++;
}

START_TEST(test_kafka_to_kafka_keeps_headers_across_a_crash)
{
    char in[128], out[128], prefix[128];
    tpc_test_unique_name(in, sizeof in, "twopc-hdr-in", '-');
    tpc_test_unique_name(out, sizeof out, "twopc-hdr-out", '-');
    tpc_test_unique_name(prefix, sizeof prefix, "twopc-hdr", '-');
    char *ckpt = tpc_test_tmpdir("kafka-headers");
    char log[4200];
    snprintf(log, sizeof log, "%s.log", ckpt);
    kt_create_topic(bootstrap, in, 2);
    kt_create_topic(bootstrap, out, 2);
    produce_with_headers(in);

    pid_t job = start_job(in, out, prefix, ckpt, "2", "10000", log);
    wait_output(out, 1, job, log, "first records");
    tpc_test_kill(job);
    job = start_job(in, out, prefix, ckpt, "2", "10000", log);
    wait_output(out, HDR_RECORDS, job, log, "after the restore");
    usleep(300000);
    tpc_test_kill(job);

    hdr_check_t *c = calloc(1, sizeof *c);
    long n = kt_read_topic(bootstrap, out, "read_committed", check_message, c);
    long missing = 0, dups = 0;
    for (int i = 0; i < HDR_RECORDS; i++) {
        missing += c->seen[i] == 0;
        dups += c->seen[i] > 1;
    }
    if (c->wrong || missing || dups)
        tpc_test_dump_log(log);
    ck_assert_msg(!c->wrong, "%ld of %ld records differ from the input, first: %s", c->wrong, n,
                  c->first_wrong);
    ck_assert_msg(!missing && !dups, "%ld missing, %ld duplicates", missing, dups);
    printf("kafka -> kafka headers: %ld records with their keys, timestamps and headers byte for "
           "byte across a kill -9\n",
           n);
    free(c);
    unlink(log);
    tpc_test_rmdir(ckpt);
    free(ckpt);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc == 11 && strcmp(argv[1], "--child") == 0)
        return child_main(argv + 2);
    bootstrap = tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP");
    Suite *s = suite_create("kafka_source_discovery");
    TCase *tc = tcase_create("discovery");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_partitions_added_while_running_are_read_exactly_once);
    tcase_add_test(tc, test_pattern_reads_topics_that_appear);
    tcase_add_test(tc, test_unbounded_after_a_bounded_checkpoint_discovers);
    tcase_add_test(tc, test_kafka_to_kafka_keeps_headers_across_a_crash);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
