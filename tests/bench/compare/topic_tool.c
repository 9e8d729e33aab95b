/*
 * Topics for `make bench-compare`, with librdkafka alone (no twopc code, so that it judges both
 * sides the same way):
 *
 *   topic_tool create BOOTSTRAP TOPIC PARTITIONS        a topic whose records carry the broker's
 *                                                       append time (LogAppendTime)
 *   topic_tool fill BOOTSTRAP TOPIC PARTITIONS N        create TOPIC and write N records: 8-byte
 *                                                       big-endian keys 0..N-1, 100-byte lower-case
 *                                                       values
 *   topic_tool measure BOOTSTRAP TOPIC N                read TOPIC read_committed from the start to
 *                                                       its end and print
 *     count C distinct D foreign F upper U first_ms A last_ms B
 *   (records, distinct keys below N, keys outside 0..N-1, values upper-cased, and the first and
 * last append time). A side did its work exactly once when C = D = U = N and F = 0.
 *   topic_tool fill-keyed BOOTSTRAP TOPIC PARTITIONS N KEYS
 *                                                       create TOPIC and write N purchases for
 *                                                       the keyed part: purchase i of user i % KEYS
 *                                                       (key: 8 bytes big-endian) and amount
 *                                                       i % 1000 + 1 (value: 8 bytes big-endian)
 *   topic_tool totals BOOTSTRAP TOPIC N KEYS            read the keyed job's output TOPIC
 *                                                       read_committed (key: user; value: count and
 *                                                       total, 8 bytes big-endian each) and print
 *     count C users U wrong W first_ms A last_ms B
 *   (records, users seen, users whose outputs are not exactly counts 1..n once each with the last
 * one's total the sum of their amounts, or records that are not a user's, and the first and last
 * append time). The job was exact when C = N, U = min(N, KEYS) and W = 0.
 *   topic_tool latency BOOTSTRAP INPUT OUTPUT RATE SECONDS
 *                                                       with an unbounded job running from INPUT
 *                                                       to OUTPUT: append records to INPUT at RATE
 *                                                       a second until the first result is visible
 *                                                       in OUTPUT (read_committed; the job is up),
 *                                                       then SECONDS more at RATE, and print
 *     p50_ms A p99_ms B max_ms C visible V of N
 *   (over the records after the warm-up but the first second of them: from a record's append,
 * its delivery report, to the moment a read_committed consumer of OUTPUT first sees it).
 */
#include <librdkafka/rdkafka.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define VALUE_BYTES 100

static void die(const char *what, const char *why)
{
    fprintf(stderr, "topic_tool: %s: %s\n", what, why);
    exit(1);
}

static rd_kafka_t *client(rd_kafka_type_t type, const char *bootstrap, const char *const *kv)
{
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, err, sizeof err))
        die("configure", err);
    for (; kv && kv[0]; kv += 2)
        if (rd_kafka_conf_set(conf, kv[0], kv[1], err, sizeof err))
            die(kv[0], err);
    rd_kafka_t *rk = rd_kafka_new(type, conf, err, sizeof err);
    if (!rk)
        die("client", err);
    return rk;
}

/* Assign every partition of @topic to consumer @rk from its first offset. @returns the
 * partitions. */
static int assign_from_start(rd_kafka_t *rk, const char *topic)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    if (rd_kafka_metadata(rk, 0, rkt, &md, 10000) || md->topic_cnt != 1 || md->topics[0].err)
        die(topic, "no metadata");
    int parts = md->topics[0].partition_cnt;
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(parts);
    for (int p = 0; p < parts; p++)
        rd_kafka_topic_partition_list_add(list, topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);
    if (rd_kafka_assign(rk, list))
        die("assign", topic);
    rd_kafka_topic_partition_list_destroy(list);
    return parts;
}

static void create(const char *bootstrap, const char *topic, int partitions, bool append_time)
{
    rd_kafka_t *rk = client(RD_KAFKA_PRODUCER, bootstrap, NULL);
    char err[512];
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, partitions, 1, err, sizeof err);
    if (!nt)
        die("new topic", err);
    if (append_time)
        rd_kafka_NewTopic_set_config(nt, "message.timestamp.type", "LogAppendTime");
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
    if (!ev)
        die("create topic", "no answer in 30 s");
    const rd_kafka_CreateTopics_result_t *res = rd_kafka_event_CreateTopics_result(ev);
    size_t n = 0;
    const rd_kafka_topic_result_t **tr = rd_kafka_CreateTopics_result_topics(res, &n);
    if (rd_kafka_event_error(ev))
        die("create topic", rd_kafka_event_error_string(ev));
    if (n == 1 && rd_kafka_topic_result_error(tr[0]) &&
        rd_kafka_topic_result_error(tr[0]) != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
        die(topic, rd_kafka_topic_result_error_string(tr[0]));
    rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_NewTopic_destroy(nt);
    rd_kafka_destroy(rk);
}

static void fill(const char *bootstrap, const char *topic, uint64_t n)
{
    const char *kv[] = {
        "enable.idempotence",           "true",    "linger.ms", "20", "batch.size", "1000000",
        "queue.buffering.max.messages", "1000000", NULL};
    rd_kafka_t *rk = client(RD_KAFKA_PRODUCER, bootstrap, kv);
    char value[VALUE_BYTES];
    for (int i = 0; i < VALUE_BYTES; i++)
        value[i] = (char)('a' + i % 26);
    for (uint64_t i = 0; i < n; i++) {
        unsigned char key[8];
        for (int b = 0; b < 8; b++)
            key[b] = (unsigned char)(i >> (56 - 8 * b));
        for (;;) {
            rd_kafka_resp_err_t e =
                rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, 8),
                                  RD_KAFKA_V_VALUE(value, VALUE_BYTES),
                                  RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
            if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
                break;
            if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
                die("produce", rd_kafka_err2str(e));
            rd_kafka_poll(rk, 10);
        }
        rd_kafka_poll(rk, 0);
    }
    if (rd_kafka_flush(rk, 120000))
        die("flush", "records still queued after 120 s");
    rd_kafka_destroy(rk);
}

static void put_be64(unsigned char *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (56 - 8 * i));
}

static uint64_t get_be64(const unsigned char *b)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | b[i];
    return v;
}

static uint64_t amount(uint64_t i)
{
    return i % 1000 + 1;
}

static void fill_keyed(const char *bootstrap, const char *topic, uint64_t n, uint64_t keys)
{
    const char *kv[] = {
        "enable.idempotence",           "true",    "linger.ms", "20", "batch.size", "1000000",
        "queue.buffering.max.messages", "1000000", NULL};
    rd_kafka_t *rk = client(RD_KAFKA_PRODUCER, bootstrap, kv);
    for (uint64_t i = 0; i < n; i++) {
        unsigned char key[8], value[8];
        put_be64(key, i % keys);
        put_be64(value, amount(i));
        for (;;) {
            rd_kafka_resp_err_t e = rd_kafka_producev(
                rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, 8), RD_KAFKA_V_VALUE(value, 8),
                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
            if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
                break;
            if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
                die("produce", rd_kafka_err2str(e));
            rd_kafka_poll(rk, 10);
        }
        rd_kafka_poll(rk, 0);
    }
    if (rd_kafka_flush(rk, 120000))
        die("flush", "records still queued after 120 s");
    rd_kafka_destroy(rk);
}

/* Per user, what the output held: records, the sum of their counts and of their squares (counts
 * 1..c once each, and no other, give c (c + 1) / 2 and c (c + 1) (2c + 1) / 6), the highest count
 * and the total that came with it. */
typedef struct {
    uint32_t records, last;
    uint64_t count_sum, square_sum, total;
} user_seen_t;

static void totals(const char *bootstrap, const char *topic, uint64_t n, uint64_t keys)
{
    const char *kv[] = {"group.id",
                        "twopc-bench-compare",
                        "isolation.level",
                        "read_committed",
                        "enable.partition.eof",
                        "true",
                        "enable.auto.commit",
                        "false",
                        NULL};
    rd_kafka_t *rk = client(RD_KAFKA_CONSUMER, bootstrap, kv);
    int parts = assign_from_start(rk, topic);
    user_seen_t *seen = calloc(keys, sizeof *seen);
    if (!seen)
        die("totals", "out of memory");
    uint64_t count = 0, foreign = 0;
    int64_t first = INT64_MAX, last = 0;
    for (int eof = 0; eof < parts;) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 5000);
        if (!m)
            die("totals", "no record and no end of partition in 5 s");
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            eof++;
        } else if (m->err) {
            die("consume", rd_kafka_message_errstr(m));
        } else {
            count++;
            uint64_t u = m->key_len == 8 ? get_be64(m->key) : UINT64_MAX;
            if (u >= keys || m->len != 16) {
                foreign++;
            } else {
                user_seen_t *s = &seen[u];
                uint64_t c = get_be64(m->payload);
                s->records++;
                s->count_sum += c;
                s->square_sum += c * c;
                if (c > s->last) {
                    s->last = (uint32_t)c;
                    s->total = get_be64((const unsigned char *)m->payload + 8);
                }
            }
            int64_t ts = rd_kafka_message_timestamp(m, NULL);
            first = ts < first ? ts : first;
            last = ts > last ? ts : last;
        }
        rd_kafka_message_destroy(m);
    }
    /* User u had the purchases u, u + KEYS, u + 2 KEYS, ... below N. */
    uint64_t users = 0, wrong = foreign;
    for (uint64_t u = 0; u < keys; u++) {
        uint64_t c = 0, sum = 0;
        for (uint64_t i = u; i < n; i += keys)
            c++, sum += amount(i);
        const user_seen_t *s = &seen[u];
        users += s->records > 0;
        if (s->records != c || s->last != c || s->count_sum != c * (c + 1) / 2 ||
            s->square_sum != c * (c + 1) * (2 * c + 1) / 6 || (c && s->total != sum))
            wrong++;
    }
    printf("count %" PRIu64 " users %" PRIu64 " wrong %" PRIu64 " first_ms %" PRId64
           " last_ms %" PRId64 "\n",
           count, users, wrong, count ? first : 0, last);
    free(seen);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
}

static void measure(const char *bootstrap, const char *topic, uint64_t n)
{
    const char *kv[] = {"group.id",
                        "twopc-bench-compare",
                        "isolation.level",
                        "read_committed",
                        "enable.partition.eof",
                        "true",
                        "enable.auto.commit",
                        "false",
                        NULL};
    rd_kafka_t *rk = client(RD_KAFKA_CONSUMER, bootstrap, kv);
    int parts = assign_from_start(rk, topic);
    unsigned char *seen = calloc(n ? n : 1, 1);
    uint64_t count = 0, distinct = 0, foreign = 0, upper = 0;
    int64_t first = INT64_MAX, last = 0;
    for (int eof = 0; eof < parts;) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 5000);
        if (!m)
            die("measure", "no record and no end of partition in 5 s");
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            eof++;
        } else if (m->err) {
            die("consume", rd_kafka_message_errstr(m));
        } else {
            count++;
            uint64_t k = 0;
            const unsigned char *key = m->key;
            for (size_t b = 0; m->key_len == 8 && b < 8; b++)
                k = k << 8 | key[b];
            if (m->key_len != 8 || k >= n)
                foreign++;
            else if (!seen[k]++)
                distinct++;
            bool up = m->len == VALUE_BYTES;
            for (size_t i = 0; up && i < m->len; i++)
                up = ((const char *)m->payload)[i] == (char)('A' + i % 26);
            upper += up;
            int64_t ts = rd_kafka_message_timestamp(m, NULL);
            first = ts < first ? ts : first;
            last = ts > last ? ts : last;
        }
        rd_kafka_message_destroy(m);
    }
    printf("count %" PRIu64 " distinct %" PRIu64 " foreign %" PRIu64 " upper %" PRIu64
           " first_ms %" PRId64 " last_ms %" PRId64 "\n",
           count, distinct, foreign, upper, count ? first : 0, last);
    free(seen);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* One latency run: per key, when it was appended and when it was first seen in the output. */
typedef struct {
    const char *bootstrap, *output;
    uint64_t cap;     /* keys the arrays hold */
    double *appended; /* per key: delivery report, ms */
    double *seen;     /* per key: first seen read_committed, ms */
    atomic_uint_fast64_t visible;
    atomic_bool stop;
} lat_t;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    lat_t *l = opaque;
    if (m->err)
        die("produce", rd_kafka_err2str(m->err));
    uint64_t k = 0;
    for (size_t b = 0; b < 8 && b < m->key_len; b++)
        k = k << 8 | ((const unsigned char *)m->key)[b];
    if (k < l->cap)
        l->appended[k] = now_ms();
}

static void *watch_output(void *arg)
{
    lat_t *l = arg;
    const char *kv[] = {"group.id",
                        "twopc-bench-compare-latency",
                        "isolation.level",
                        "read_committed",
                        "enable.auto.commit",
                        "false",
                        "fetch.wait.max.ms",
                        "5",
                        NULL};
    rd_kafka_t *rk = client(RD_KAFKA_CONSUMER, l->bootstrap, kv);
    assign_from_start(rk, l->output);
    while (!atomic_load(&l->stop)) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 10);
        if (!m)
            continue;
        if (!m->err && m->key_len == 8) {
            uint64_t k = 0;
            for (size_t b = 0; b < 8; b++)
                k = k << 8 | ((const unsigned char *)m->key)[b];
            if (k < l->cap && l->seen[k] == 0) {
                l->seen[k] = now_ms();
                atomic_fetch_add(&l->visible, 1);
            }
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void latency(const char *bootstrap, const char *input, const char *output, double rate,
                    double seconds)
{
    /* Up to two minutes of warm-up (a JVM's start), then the measured part. */
    uint64_t measured = (uint64_t)(rate * seconds);
    lat_t l = {.bootstrap = bootstrap, .output = output};
    l.cap = (uint64_t)(rate * 120) + measured;
    l.appended = calloc(l.cap, sizeof *l.appended);
    l.seen = calloc(l.cap, sizeof *l.seen);
    if (!l.appended || !l.seen)
        die("latency", "out of memory");
    pthread_t watcher;
    pthread_create(&watcher, NULL, watch_output, &l);

    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    const char *kv[] = {"bootstrap.servers",  bootstrap, "linger.ms", "1",
                        "enable.idempotence", "true",    NULL};
    for (const char **p = kv; *p; p += 2)
        if (rd_kafka_conf_set(conf, p[0], p[1], err, sizeof err))
            die(p[0], err);
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_conf_set_opaque(conf, &l);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk)
        die("producer", err);
    char value[VALUE_BYTES];
    for (int i = 0; i < VALUE_BYTES; i++)
        value[i] = (char)('a' + i % 26);
    double t0 = now_ms();
    uint64_t first_measured = 0, end = l.cap;
    for (uint64_t i = 0; i < end; i++) {
        double due = t0 + (double)i * 1000.0 / rate;
        while (now_ms() < due)
            rd_kafka_poll(rk, 1);
        if (!first_measured && atomic_load(&l.visible) > 0) {
            /* The job is up: SECONDS more, of which the first is still warm-up. */
            first_measured = i + (uint64_t)rate;
            end = i + measured;
            if (end > l.cap)
                end = l.cap;
        }
        unsigned char key[8];
        for (int b = 0; b < 8; b++)
            key[b] = (unsigned char)(i >> (56 - 8 * b));
        rd_kafka_resp_err_t e;
        while ((e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(input), RD_KAFKA_V_KEY(key, 8),
                                      RD_KAFKA_V_VALUE(value, VALUE_BYTES),
                                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END)) ==
               RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(rk, 1);
        if (e)
            die("produce", rd_kafka_err2str(e));
        rd_kafka_poll(rk, 0);
    }
    if (!first_measured)
        die("latency", "no result visible in the output within two minutes: is the job running?");
    if (rd_kafka_flush(rk, 60000))
        die("flush", "records still queued after 60 s");
    rd_kafka_destroy(rk);
    /* Until every measured record is visible, for 30 s at the most. */
    for (double stop = now_ms() + 30000; now_ms() < stop;) {
        bool all = true;
        for (uint64_t k = end; k-- > first_measured && all;)
            all = l.seen[k] > 0;
        if (all)
            break;
        struct timespec ts = {0, 20 * 1000000};
        nanosleep(&ts, NULL);
    }
    atomic_store(&l.stop, true);
    pthread_join(watcher, NULL);
    size_t n = 0, total = end > first_measured ? (size_t)(end - first_measured) : 0;
    double *v = malloc((total ? total : 1) * sizeof *v);
    for (uint64_t k = first_measured; k < end; k++)
        if (l.seen[k] > 0 && l.appended[k] > 0)
            v[n++] = l.seen[k] - l.appended[k];
    qsort(v, n, sizeof *v, cmp_double);
    printf("p50_ms %.1f p99_ms %.1f max_ms %.1f visible %zu of %zu\n",
           n ? v[(size_t)(0.50 * (double)(n - 1) + 0.5)] : 0,
           n ? v[(size_t)(0.99 * (double)(n - 1) + 0.5)] : 0, n ? v[n - 1] : 0, n, total);
    free(v);
    free(l.appended);
    free(l.seen);
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "create") == 0) {
        create(argv[2], argv[3], atoi(argv[4]), true);
    } else if (argc == 6 && strcmp(argv[1], "fill") == 0) {
        create(argv[2], argv[3], atoi(argv[4]), false);
        fill(argv[2], argv[3], strtoull(argv[5], NULL, 10));
    } else if (argc == 5 && strcmp(argv[1], "measure") == 0) {
        measure(argv[2], argv[3], strtoull(argv[4], NULL, 10));
    } else if (argc == 7 && strcmp(argv[1], "fill-keyed") == 0) {
        uint64_t keys = strtoull(argv[6], NULL, 10);
        if (keys == 0)
            die("fill-keyed", "KEYS must be at least 1");
        create(argv[2], argv[3], atoi(argv[4]), false);
        fill_keyed(argv[2], argv[3], strtoull(argv[5], NULL, 10), keys);
    } else if (argc == 6 && strcmp(argv[1], "totals") == 0) {
        uint64_t keys = strtoull(argv[5], NULL, 10);
        if (keys == 0)
            die("totals", "KEYS must be at least 1");
        totals(argv[2], argv[3], strtoull(argv[4], NULL, 10), keys);
    } else if (argc == 7 && strcmp(argv[1], "latency") == 0) {
        latency(argv[2], argv[3], argv[4], atof(argv[5]), atof(argv[6]));
    } else {
        fprintf(stderr,
                "usage: topic_tool create|fill|fill-keyed|measure|totals|latency ... (see the "
                "file's "
                "comment)\n");
        return 2;
    }
    return 0;
}
