/*
 * Input for the Kafka source tests, written as exactly-once producers write it: in transactions,
 * some aborted after their records reached the broker, so that aborted records and transaction
 * markers sit between the committed ones. Committed record i has key "k<i mod KF_KEYS>" and value
 * "<i>", i = 0, 1, ...; aborted records have values "x<n>" and records of a transaction left open
 * "o<n>", so a reader can tell every record it sees apart. Keys go to partitions with murmur2, as
 * the Kafka sink and Java producers place them, so each key's records sit in one partition in
 * order.
 */
#ifndef CHECK_KAFKA_SOURCE_FILL_H
#define CHECK_KAFKA_SOURCE_FILL_H

#include "check_kafka_common.h"
#include "tpc_runtime.h"

#include <inttypes.h>
#include <stdlib.h>

#define KF_KEYS    7
#define KF_FOREIGN UINT64_MAX

static inline rd_kafka_t *kf_producer(const char *bootstrap, const char *txn_id)
{
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    kt_set(conf, "bootstrap.servers", bootstrap);
    kt_set(conf, "transactional.id", txn_id);
    kt_set(conf, "partitioner", "murmur2_random");
    kt_set(conf, "linger.ms", "5");
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    ck_assert_msg(rk != NULL, "could not create producer: %s", errstr);
    rd_kafka_error_t *e = rd_kafka_init_transactions(rk, KT_TIMEOUT_MS);
    ck_assert_msg(e == NULL, "init_transactions: %s", e ? rd_kafka_error_string(e) : "");
    return rk;
}

static inline void kf_send(rd_kafka_t *rk, const char *topic, const char *key, const char *value)
{
    rd_kafka_resp_err_t e =
        rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, strlen(key)),
                          RD_KAFKA_V_VALUE((void *)value, strlen(value)),
                          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
    ck_assert_msg(!e, "produce: %s", rd_kafka_err2str(e));
}

static inline void kf_end_open_txn(rd_kafka_t *rk, bool commit)
{
    rd_kafka_error_t *e = commit ? rd_kafka_commit_transaction(rk, KT_TIMEOUT_MS)
                                 : rd_kafka_abort_transaction(rk, KT_TIMEOUT_MS);
    ck_assert_msg(e == NULL, "end transaction: %s", e ? rd_kafka_error_string(e) : "");
    rd_kafka_destroy(rk);
}

/* Write @txns transactions of @per_txn records into @topic; every @abort_every-th is aborted
 * after its records were flushed to the broker. @returns the number of committed records. */
static inline uint64_t kf_fill(const char *bootstrap, const char *topic, int txns, int per_txn,
                               int abort_every)
{
    char id[160], key[32], value[32];
    snprintf(id, sizeof id, "%s-fill", topic);
    rd_kafka_t *rk = kf_producer(bootstrap, id);
    uint64_t committed = 0, aborted = 0;
    for (int t = 0; t < txns; t++) {
        bool abort = t % abort_every == abort_every - 1;
        ck_assert_ptr_null(rd_kafka_begin_transaction(rk));
        for (int r = 0; r < per_txn; r++) {
            uint64_t i = abort ? aborted++ : committed + (uint64_t)r;
            snprintf(key, sizeof key, "k%" PRIu64, i % KF_KEYS);
            snprintf(value, sizeof value, "%s%" PRIu64, abort ? "x" : "", i);
            kf_send(rk, topic, key, value);
        }
        if (abort) {
            ck_assert_int_eq(rd_kafka_flush(rk, KT_TIMEOUT_MS), 0);
            rd_kafka_error_t *e = rd_kafka_abort_transaction(rk, KT_TIMEOUT_MS);
            ck_assert_msg(e == NULL, "abort: %s", e ? rd_kafka_error_string(e) : "");
        } else {
            rd_kafka_error_t *e = rd_kafka_commit_transaction(rk, KT_TIMEOUT_MS);
            ck_assert_msg(e == NULL, "commit: %s", e ? rd_kafka_error_string(e) : "");
            committed += (uint64_t)per_txn;
        }
    }
    rd_kafka_destroy(rk);
    return committed;
}

/* Begin a transaction with @n records on another transactional id and leave it open. */
static inline rd_kafka_t *kf_begin_open_txn(const char *bootstrap, const char *topic, int n)
{
    char id[160], key[32], value[32];
    snprintf(id, sizeof id, "%s-open", topic);
    rd_kafka_t *rk = kf_producer(bootstrap, id);
    ck_assert_ptr_null(rd_kafka_begin_transaction(rk));
    for (int r = 0; r < n; r++) {
        snprintf(key, sizeof key, "k%d", r % KF_KEYS);
        snprintf(value, sizeof value, "o%d", r);
        kf_send(rk, topic, key, value);
    }
    ck_assert_int_eq(rd_kafka_flush(rk, KT_TIMEOUT_MS), 0);
    return rk;
}

/* The number of a committed record, or KF_FOREIGN. */
static inline uint64_t kf_value_of(const void *value, size_t len)
{
    char buf[32];
    if (len == 0 || len >= sizeof buf)
        return KF_FOREIGN;
    memcpy(buf, value, len);
    buf[len] = '\0';
    char *end = NULL;
    uint64_t i = strtoull(buf, &end, 10);
    return *end || buf[0] < '0' || buf[0] > '9' ? KF_FOREIGN : i;
}

typedef struct {
    long dups, missing, foreign, disorder;
} kf_check_t;

/* Compare @n values, in the order they were read, with the committed records 0..@committed-1:
 * each must appear once, and every key's records in increasing order. */
static inline kf_check_t kf_check(const uint64_t *values, size_t n, uint64_t committed)
{
    kf_check_t c = {0};
    unsigned char *seen = calloc(committed + 1, 1);
    int64_t last[KF_KEYS];
    for (int k = 0; k < KF_KEYS; k++)
        last[k] = -1;
    for (size_t i = 0; i < n; i++) {
        uint64_t v = values[i];
        if (v >= committed) {
            c.foreign++;
        } else if (seen[v]++) {
            c.dups++;
        } else {
            c.disorder += (int64_t)v < last[v % KF_KEYS];
            last[v % KF_KEYS] = (int64_t)v;
        }
    }
    for (uint64_t i = 0; i < committed; i++)
        c.missing += !seen[i];
    free(seen);
    return c;
}

#endif
