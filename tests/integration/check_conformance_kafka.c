/*
 * The Kafka sink passes the connector conformance suite (tests/support/tpc_conformance.h) against
 * the real broker: every order of checkpoint events, crashes, restores at another parallelism and
 * kill -9 in every phase. What is committed is read back by an independent read_committed consumer
 * from the beginning of the topic to its last stable offset. Each check has its own topic and
 * transactional id prefix; the other sink of one check shares the topic.
 *
 * A commit returns once the transaction coordinator has decided; the markers that make records
 * visible reach the partitions a moment later. So before reading, the coordinators are asked
 * (ListTransactions, DescribeTransactions) until no transaction of the prefix is still between
 * its decision and its markers; an Ongoing transaction is one left open.
 */
#include "check_kafka_common.h"
#include "kafka_wire.h"
#include "tpc_conformance_check.h"
#include "tpc_kafka.h"

#define SETTLE_MS 15000

static const char *bootstrap(void)
{
    return tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP");
}

/* The namespace is one unique name: the topic (one partition) and the transactional id prefix. */
static bool ns_new(char *ns, size_t cap, char *why, size_t why_len)
{
    if (!bootstrap()) {
        snprintf(why, why_len, "no Kafka broker (TWOPC_TEST_KAFKA_BOOTSTRAP)");
        return false;
    }
    tpc_test_unique_name(ns, cap < 128 ? cap : 128, "conformance", '-');
    kt_create_topic(bootstrap(), ns, 1);
    return true;
}

static void ns_free(const char *ns)
{
    kt_delete_topic(bootstrap(), ns);
}

static tpc_error_t *sink_new(const char *ns, tpc_txn_sink_t **out)
{
    tpc_error_t *err = tpc_kafka_sink_new(bootstrap(), ns, out);
    if (!err)
        err = tpc_txn_sink_set(*out, "transactional.id.prefix", ns);
    if (!err)
        err = tpc_txn_sink_set(*out, "kafka.linger.ms", "2");
    return err;
}

/* @id is one of the sink's own transactional ids, "<ns>-<subtask>-<n>" (not one of the other
 * sink's, "<ns>-0-<subtask>-<n>"). */
static bool own_id(const char *ns, const char *id)
{
    size_t len = strlen(ns);
    int fields = 0;
    if (strncmp(id, ns, len) != 0)
        return false;
    for (const char *p = id + len; *p; p++) {
        if (*p == '-' && p[1] >= '0' && p[1] <= '9')
            fields++;
        else if (*p < '0' || *p > '9')
            return false;
    }
    return fields == 2;
}

/* Wait until no transaction of the namespace (either sink) is between its decision and its
 * markers. @returns false with a reason, else the number of the sink's own transactions left
 * open (Ongoing) in @open. */
static bool settle(const char *ns, long long *open, char *why, size_t why_len)
{
    char prefix[160];
    snprintf(prefix, sizeof prefix, "%s-", ns);
    tpc__kafka_wire_conf_t wire = {.bootstrap = bootstrap()};
    int64_t deadline = tpc_test_now_ms() + SETTLE_MS;
    for (;;) {
        tpc__kafka_txn_info_t *txns = NULL;
        size_t n = 0, ending = 0;
        tpc_error_t *err = tpc__kafka_list_transactions(&wire, prefix, true, 10000, &txns, &n);
        if (err) {
            snprintf(why, why_len, "could not list transactions: %s", tpc_error_message(err));
            tpc_error_destroy(err);
            return false;
        }
        *open = 0;
        for (size_t i = 0; i < n; i++) {
            if (strncmp(txns[i].state, "Prepare", 7) == 0)
                ending++;
            else if (own_id(ns, txns[i].id))
                (*open)++;
        }
        free(txns);
        if (!ending)
            return true;
        if (tpc_test_now_ms() > deadline) {
            snprintf(why, why_len, "%zu transactions of \"%s\" did not end within %d ms", ending,
                     prefix, SETTLE_MS);
            return false;
        }
        usleep(20 * 1000);
    }
}

/* Another sink into the same topic, with an id prefix that starts with this one's. */
static tpc_error_t *other_sink_new(const char *ns, tpc_txn_sink_t **out)
{
    char prefix[160];
    snprintf(prefix, sizeof prefix, "%s-0", ns);
    tpc_error_t *err = sink_new(ns, out);
    if (!err)
        err = tpc_txn_sink_set(*out, "transactional.id.prefix", prefix);
    return err;
}

static void collect(void *opaque, const rd_kafka_message_t *msg)
{
    tpc_conformance_keys_add(opaque, msg->key, msg->key_len);
}

static bool read_back(const char *ns, tpc_conformance_keys_t *out, char *why, size_t why_len)
{
    long long open;
    if (!settle(ns, &open, why, why_len))
        return false;
    /* Settled: every marker is written, so the end of the partition may be seen at once. */
    kt_read_topic_wait(bootstrap(), ns, "read_committed", "20", collect, out);
    return true;
}

/* The log end offset of the partition: every transaction that touched it, committed or aborted,
 * moved it on (its records and its marker). */
static bool footprint(const char *ns, long long *out, char *why, size_t why_len)
{
    long long open;
    if (!settle(ns, &open, why, why_len))
        return false;
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    kt_set(conf, "bootstrap.servers", bootstrap());
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    if (!rk) {
        snprintf(why, why_len, "could not create a consumer: %s", errstr);
        return false;
    }
    int64_t lo = 0, hi = 0;
    rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(rk, ns, 0, &lo, &hi, KT_TIMEOUT_MS);
    rd_kafka_destroy(rk);
    if (e) {
        snprintf(why, why_len, "could not read the offsets of \"%s\": %s", ns, rd_kafka_err2str(e));
        return false;
    }
    *out = hi;
    return true;
}

static bool leftovers(const char *ns, long long *out, char *why, size_t why_len)
{
    return settle(ns, out, why, why_len);
}

static const tpc_conformance_t kafka_connector = {
    .name = "kafka",
    .ns_new = ns_new,
    .ns_free = ns_free,
    .sink_new = sink_new,
    .read = read_back,
    .footprint = footprint,
    .leftovers = leftovers,
    .other_sink_new = other_sink_new,
    .other_visible = true,
    .crash_records = 1500,
    .crash_interval_ms = 100,
    .crash_run_ms = 60000,
};

int main(int argc, char **argv)
{
    return tpc_conformance_main(&kafka_connector, argc, argv);
}
