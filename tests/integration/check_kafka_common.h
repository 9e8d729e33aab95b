/*
 * What the Kafka connector tests share: creating a topic, reading a whole topic from the
 * beginning to its end as an independent read_committed consumer sees it (up to the last stable
 * offset of every partition), handing each record to a callback, and a transactional producer
 * that is killed with SIGKILL before it commits, for the tests that end its transaction.
 */
#ifndef CHECK_KAFKA_COMMON_H
#define CHECK_KAFKA_COMMON_H

#include "tpc_test_crash.h"
#include "tpc_test_env.h"

#include <check.h>
#include <librdkafka/rdkafka.h>

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <unistd.h>

#define KT_TIMEOUT_MS 30000

static inline void kt_set(rd_kafka_conf_t *conf, const char *name, const char *value)
{
    char errstr[512];
    if (rd_kafka_conf_set(conf, name, value, errstr, sizeof errstr) != RD_KAFKA_CONF_OK)
        ck_abort_msg("could not set %s=%s: %s", name, value, errstr);
}

/* Create @topic with @partitions and, when @key is not NULL, the topic setting @key = @value;
 * @tries > 1: again while the broker says it exists (a topic of that name being deleted). */
static inline void kt_create_topic_tries(const char *bootstrap, const char *topic, int partitions,
                                         const char *key, const char *value, int tries)
{
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    kt_set(conf, "bootstrap.servers", bootstrap);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    ck_assert_msg(rk != NULL, "%s", errstr);
    rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR_NO_ERROR;
    for (int t = 0; t < tries; t++) {
        if (t)
            usleep(200 * 1000);
        rd_kafka_NewTopic_t *nt =
            rd_kafka_NewTopic_new(topic, partitions, -1, errstr, sizeof errstr);
        ck_assert_msg(nt != NULL, "%s", errstr);
        if (key)
            ck_assert_int_eq(rd_kafka_NewTopic_set_config(nt, key, value),
                             RD_KAFKA_RESP_ERR_NO_ERROR);
        rd_kafka_queue_t *queue = rd_kafka_queue_new(rk);
        rd_kafka_CreateTopics(rk, &nt, 1, NULL, queue);
        rd_kafka_event_t *ev = rd_kafka_queue_poll(queue, KT_TIMEOUT_MS);
        ck_assert_msg(ev != NULL, "no answer to CreateTopics for \"%s\"", topic);
        size_t n = 0;
        const rd_kafka_topic_result_t **res =
            rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
        e = rd_kafka_event_error(ev) ? rd_kafka_event_error(ev)
            : n == 1                 ? rd_kafka_topic_result_error(res[0])
                                     : RD_KAFKA_RESP_ERR__FAIL;
        rd_kafka_event_destroy(ev);
        rd_kafka_queue_destroy(queue);
        rd_kafka_NewTopic_destroy(nt);
        if (e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
            break;
    }
    ck_assert_msg(!e, "could not create topic \"%s\": %s", topic, rd_kafka_err2str(e));
    /* The controller answers before the broker's metadata has the topic: a client that looks it
     * up at once may hear "unknown topic". Wait until metadata shows every partition led. */
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    bool ready = false;
    for (int look = 0; !ready && look < KT_TIMEOUT_MS / 50; look++) {
        const struct rd_kafka_metadata *md = NULL;
        if (rd_kafka_metadata(rk, 0, rkt, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
            ready = md->topic_cnt == 1 && !md->topics[0].err &&
                    md->topics[0].partition_cnt == partitions;
            for (int p = 0; ready && p < md->topics[0].partition_cnt; p++)
                ready = !md->topics[0].partitions[p].err && md->topics[0].partitions[p].leader >= 0;
            rd_kafka_metadata_destroy(md);
        }
        if (!ready)
            usleep(50 * 1000);
    }
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    ck_assert_msg(ready, "topic \"%s\" was created but its metadata did not show it", topic);
}

static inline void kt_create_topic_with(const char *bootstrap, const char *topic, int partitions,
                                        const char *key, const char *value)
{
    kt_create_topic_tries(bootstrap, topic, partitions, key, value, 1);
}

static inline void kt_create_topic(const char *bootstrap, const char *topic, int partitions)
{
    kt_create_topic_with(bootstrap, topic, partitions, NULL, NULL);
}

/* The result of admin request @what on @queue: every topic of it must have succeeded. */
static inline void kt_admin_wait(rd_kafka_queue_t *queue, const char *what, const char *topic)
{
    rd_kafka_event_t *ev = rd_kafka_queue_poll(queue, KT_TIMEOUT_MS);
    ck_assert_msg(ev != NULL, "no answer to %s for \"%s\"", what, topic);
    size_t n = 0;
    const rd_kafka_topic_result_t **res = NULL;
    if (rd_kafka_event_type(ev) == RD_KAFKA_EVENT_CREATEPARTITIONS_RESULT)
        res =
            rd_kafka_CreatePartitions_result_topics(rd_kafka_event_CreatePartitions_result(ev), &n);
    else if (rd_kafka_event_type(ev) == RD_KAFKA_EVENT_DELETETOPICS_RESULT)
        res = rd_kafka_DeleteTopics_result_topics(rd_kafka_event_DeleteTopics_result(ev), &n);
    ck_assert_msg(!rd_kafka_event_error(ev) && n == 1 && !rd_kafka_topic_result_error(res[0]),
                  "%s for \"%s\" failed: %s", what, topic,
                  n == 1 ? rd_kafka_topic_result_error_string(res[0])
                         : rd_kafka_event_error_string(ev));
    rd_kafka_event_destroy(ev);
}

static inline rd_kafka_t *kt_admin(const char *bootstrap)
{
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    kt_set(conf, "bootstrap.servers", bootstrap);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    ck_assert_msg(rk != NULL, "%s", errstr);
    return rk;
}

/* Give @topic @total partitions in all (more than it has). */
static inline void kt_add_partitions(const char *bootstrap, const char *topic, int total)
{
    char errstr[512];
    rd_kafka_t *rk = kt_admin(bootstrap);
    rd_kafka_NewPartitions_t *np =
        rd_kafka_NewPartitions_new(topic, (size_t)total, errstr, sizeof errstr);
    ck_assert_msg(np != NULL, "%s", errstr);
    rd_kafka_queue_t *queue = rd_kafka_queue_new(rk);
    rd_kafka_CreatePartitions(rk, &np, 1, NULL, queue);
    kt_admin_wait(queue, "CreatePartitions", topic);
    rd_kafka_queue_destroy(queue);
    rd_kafka_NewPartitions_destroy(np);
    rd_kafka_destroy(rk);
}

static inline void kt_delete_topic(const char *bootstrap, const char *topic)
{
    rd_kafka_t *rk = kt_admin(bootstrap);
    rd_kafka_DeleteTopic_t *dt = rd_kafka_DeleteTopic_new(topic);
    rd_kafka_queue_t *queue = rd_kafka_queue_new(rk);
    rd_kafka_DeleteTopics(rk, &dt, 1, NULL, queue);
    kt_admin_wait(queue, "DeleteTopics", topic);
    rd_kafka_queue_destroy(queue);
    rd_kafka_DeleteTopic_destroy(dt);
    rd_kafka_destroy(rk);
}

typedef void (*kt_record_cb)(void *opaque, const rd_kafka_message_t *msg);

/* Read every partition of @topic from the beginning to its end with @isolation; @returns the
 * number of records. At the end of a partition the broker holds each fetch up to @fetch_wait_ms
 * (NULL: librdkafka's 500 ms) before it answers, and the end is only seen from an answer: a
 * reader that knows every transaction has its markers written can ask for a short wait. */
static inline long kt_read_topic_wait(const char *bootstrap, const char *topic,
                                      const char *isolation, const char *fetch_wait_ms,
                                      kt_record_cb cb, void *opaque)
{
    char errstr[512], group[128];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    kt_set(conf, "bootstrap.servers", bootstrap);
    kt_set(conf, "group.id", tpc_test_unique_name(group, sizeof group, "twopc-kt", '-'));
    kt_set(conf, "isolation.level", isolation);
    kt_set(conf, "enable.partition.eof", "true");
    kt_set(conf, "enable.auto.commit", "false");
    if (fetch_wait_ms)
        kt_set(conf, "fetch.wait.max.ms", fetch_wait_ms);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    ck_assert_msg(rk != NULL, "could not create consumer: %s", errstr);
    rd_kafka_poll_set_consumer(rk);

    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    ck_assert_int_eq(rd_kafka_metadata(rk, 0, rkt, &md, KT_TIMEOUT_MS), 0);
    ck_assert_int_eq(md->topic_cnt, 1);
    int parts = md->topics[0].partition_cnt;
    rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);

    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(parts);
    for (int i = 0; i < parts; i++)
        rd_kafka_topic_partition_list_add(list, topic, i)->offset = RD_KAFKA_OFFSET_BEGINNING;
    ck_assert_int_eq(rd_kafka_assign(rk, list), 0);
    rd_kafka_topic_partition_list_destroy(list);

    long count = 0;
    int at_end = 0;
    time_t deadline = time(NULL) + KT_TIMEOUT_MS / 1000;
    while (at_end < parts && time(NULL) < deadline) {
        rd_kafka_message_t *msg = rd_kafka_consumer_poll(rk, 200);
        if (!msg)
            continue;
        if (msg->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            at_end++;
        } else if (msg->err) {
            fprintf(stderr, "consumer: %s\n", rd_kafka_message_errstr(msg));
        } else {
            count++;
            if (cb)
                cb(opaque, msg);
        }
        rd_kafka_message_destroy(msg);
    }
    ck_assert_msg(at_end == parts, "%s consumer did not reach the end of \"%s\"", isolation, topic);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return count;
}

/* kt_read_topic_wait() with librdkafka's fetch wait, which also gives the markers of a
 * transaction committed just before time to be written. */
static inline long kt_read_topic(const char *bootstrap, const char *topic, const char *isolation,
                                 kt_record_cb cb, void *opaque)
{
    return kt_read_topic_wait(bootstrap, topic, isolation, NULL, cb, opaque);
}

/* ---- a transactional producer that crashes --------------------------------------------------
 * The test runs its own binary again as a child (kt_crash_producer()), whose main calls
 * kt_crash_child(): it begins a transaction, produces and flushes, prints its producer id and
 * epoch and waits to be killed. */

typedef struct {
    long pid;
    int epoch;
} kt_producer_id_t;

static inline int kt_crash_stats(rd_kafka_t *rk, char *json, size_t len, void *opaque)
{
    (void)rk, (void)len;
    kt_producer_id_t *out = opaque;
    const char *eos = strstr(json, "\"eos\":");
    const char *p = eos ? strstr(eos, "\"producer_id\":") : NULL;
    const char *e = eos ? strstr(eos, "\"producer_epoch\":") : NULL;
    const char *state = eos ? strstr(eos, "\"idemp_state\":") : NULL;
    const char *assigned = state ? strstr(state, "Assigned") : NULL;
    if (p && e && assigned && assigned - state < 24) {
        out->pid = atol(p + strlen("\"producer_id\":"));
        out->epoch = atoi(e + strlen("\"producer_epoch\":"));
    }
    return 0;
}

/* In the child: with @conf (which has the bootstrap servers and any security properties; taken
 * over), begin a transaction of @id with a transaction timeout of @timeout_ms, produce @records
 * values "<tag>-<i>" to @topic, flush, print "<producer id> <epoch>" on stdout and wait to be
 * killed. No Check calls: this runs outside any test. @returns an exit status on failure. */
static inline int kt_crash_child(rd_kafka_conf_t *conf, const char *topic, const char *id,
                                 const char *timeout_ms, const char *tag, int records)
{
    char errstr[512];
    static kt_producer_id_t seen = {-1, -1};
    alarm(40); /* never outlive the test */
    rd_kafka_conf_set(conf, "transactional.id", id, errstr, sizeof errstr);
    rd_kafka_conf_set(conf, "transaction.timeout.ms", timeout_ms, errstr, sizeof errstr);
    rd_kafka_conf_set(conf, "statistics.interval.ms", "50", errstr, sizeof errstr);
    rd_kafka_conf_set_stats_cb(conf, kt_crash_stats);
    rd_kafka_conf_set_opaque(conf, &seen);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    rd_kafka_error_t *error = rk ? rd_kafka_init_transactions(rk, KT_TIMEOUT_MS) : NULL;
    if (!rk || error || rd_kafka_begin_transaction(rk)) {
        fprintf(stderr, "child: %s\n", rk ? rd_kafka_error_string(error) : errstr);
        return 3;
    }
    for (int i = 0; i < records; i++) {
        char value[64];
        int n = snprintf(value, sizeof value, "%s-%d", tag, i);
        if (rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_VALUE(value, (size_t)n),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END))
            return 4;
    }
    if (rd_kafka_flush(rk, KT_TIMEOUT_MS))
        return 5;
    /* The id and epoch were assigned by init_transactions and do not change within the
     * transaction; they may already have been seen (a 1 s transaction may time out before the
     * next statistics, and then the state is no longer "Assigned"). */
    while (seen.pid < 0)
        rd_kafka_poll(rk, 20);
    printf("%ld %d\n", seen.pid, seen.epoch);
    fflush(stdout);
    for (;;)
        pause();
}

/* Run @args (the child's arguments after the binary's path, NULL-terminated, at most 8), read
 * the producer id and epoch it prints, kill -9 it. @what names it in a failure. */
static inline void kt_crash_producer(const char *const *args, const char *what, int64_t *pid,
                                     int16_t *epoch)
{
    char self[4096];
    ck_assert(tpc_test_self_path(self, sizeof self));
    const char *argv[10] = {self};
    for (int i = 0; args[i] && i < 8; i++)
        argv[i + 1] = args[i];
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t child = tpc_test_spawn(argv, NULL, fds[1]);
    ck_assert_int_gt(child, 0);
    close(fds[1]);
    FILE *f = fdopen(fds[0], "r");
    long p = -1;
    int e = -1;
    int got = fscanf(f, "%ld %d", &p, &e);
    fclose(f);
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    ck_assert_msg(got == 2, "the %s reported no producer id (status %d)", what, status);
    *pid = p;
    *epoch = (int16_t)e;
}

#endif
