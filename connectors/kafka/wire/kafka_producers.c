/*
 * Who writes into one partition, as its leader knows it (KIP-664's DescribeProducers), for the
 * `twopc` command: Metadata for the topic finds the partition's leader, DescribeProducers asks it
 * for the partition's active producers: producer id and epoch, last sequence and timestamp, the
 * coordinator epoch of the last transaction marker, and the first offset of the producer's open
 * transaction (-1 for none). An open transaction holds the partition's last stable offset there:
 * read_committed readers see nothing past it until the transaction ends. Over the recovery
 * client's connection (kafka_wire.c), so TLS and SASL work as for recovery commits.
 */
#include "kafka_wire.h"
#include "tpc_kit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tpc_error_t *malformed(const tpc__kafka_conn_t *c, const char *what)
{
    return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_RETRIABLE,
                         "broker \"%s\" sent a malformed %s response", tpc__kafka_conn_name(c),
                         what);
}

static void skip_i32_array(tpc__kafka_rbuf_t *r)
{
    int32_t n = tpc__kafka_r_i32(r);
    for (int32_t i = 0; i < n && !r->bad; i++)
        tpc__kafka_r_i32(r);
}

/* The leader of @topic's @partition: its address into @host / @port; the topic's number of
 * partitions into *@count when @count is not NULL. */
static tpc_error_t *leader_of(tpc__kafka_conn_t *c, const char *topic, int32_t partition,
                              int64_t deadline, char *host, size_t cap, int *port, int32_t *count)
{
    int v = tpc__kafka_conn_version(c, TPC__KAFKA_API_METADATA, 4, 8);
    if (v < 0)
        return tpc_error_new(TPC_ERR_UNSUPPORTED, TPC_ERROR_FATAL,
                             "broker \"%s\" does not support Metadata versions 4 to 8",
                             tpc__kafka_conn_name(c));
    tpc__kafka_rbuf_t r;
    tpc__kafka_node_t *nodes;
    int32_t nbrokers;
    tpc_error_t *err = tpc__kafka_metadata(c, v, topic, deadline, &r, &nodes, &nbrokers);
    if (err)
        return err;
    char cluster[256];
    tpc__kafka_r_str(&r, false, cluster, sizeof cluster);
    tpc__kafka_r_i32(&r); /* controller */
    int32_t ntopics = tpc__kafka_r_i32(&r);
    int16_t topic_error = -1, part_error = -1;
    int32_t leader = -1;
    for (int32_t t = 0; t < ntopics && !r.bad; t++) {
        char name[256];
        int16_t te = tpc__kafka_r_i16(&r);
        tpc__kafka_r_str(&r, false, name, sizeof name);
        tpc__kafka_r_i8(&r); /* internal */
        int32_t nparts = tpc__kafka_r_i32(&r);
        bool ours = strcmp(name, topic) == 0;
        if (ours)
            topic_error = te;
        if (ours && count)
            *count = nparts;
        for (int32_t p = 0; p < nparts && !r.bad; p++) {
            int16_t pe = tpc__kafka_r_i16(&r);
            int32_t index = tpc__kafka_r_i32(&r);
            int32_t lead = tpc__kafka_r_i32(&r);
            if (v >= 7)
                tpc__kafka_r_i32(&r); /* leader epoch */
            skip_i32_array(&r);       /* replicas */
            skip_i32_array(&r);       /* in-sync replicas */
            if (v >= 5)
                skip_i32_array(&r); /* offline replicas */
            if (ours && index == partition) {
                part_error = pe;
                leader = lead;
            }
        }
        if (v >= 8)
            tpc__kafka_r_i32(&r); /* topic authorized operations */
    }
    if (r.bad) {
        free(nodes);
        return malformed(c, "Metadata");
    }
    if (topic_error != 0 || part_error != 0 || leader < 0) {
        free(nodes);
        int16_t code = topic_error ? topic_error : part_error;
        return tpc_error_hint(tpc_error_new(TPC_ERR_NOT_FOUND, 0,
                                            "kafka topic \"%s\" partition %d: %s", topic,
                                            (int)partition,
                                            code > 0    ? tpc__kafka_code_name(code)
                                            : code == 0 ? "no leader"
                                                        : "no such topic or partition"),
                              "list the topic's partitions with kafka-topics.sh --describe");
    }
    err = tpc_error_new(TPC_ERR_NOT_FOUND, TPC_ERROR_RETRIABLE,
                        "the leader of kafka topic \"%s\" partition %d (broker %d) is not "
                        "among the brokers Metadata listed",
                        topic, (int)partition, (int)leader);
    for (int32_t i = 0; i < nbrokers; i++)
        if (nodes[i].id == leader) {
            snprintf(host, cap, "%s", nodes[i].host);
            *port = nodes[i].port;
            tpc_error_destroy(err);
            err = NULL;
        }
    free(nodes);
    return err;
}

static tpc_error_t *describe_at(tpc__kafka_conn_t *c, const char *topic, int32_t partition,
                                int64_t deadline, tpc__kafka_producer_info_t **out, size_t *n)
{
    if (tpc__kafka_conn_version(c, TPC__KAFKA_API_DESCRIBE_PRODUCERS, 0, 0) < 0)
        return tpc_error_hint(tpc_error_new(TPC_ERR_UNSUPPORTED, TPC_ERROR_FATAL,
                                            "broker \"%s\" does not support DescribeProducers",
                                            tpc__kafka_conn_name(c)),
                              "describing producers needs Apache Kafka 3.0 or later");
    tpc__kafka_wbuf_t w = {0};
    tpc__kafka_w_uvarint(&w, 2); /* one topic */
    tpc__kafka_w_str(&w, topic, true);
    tpc__kafka_w_uvarint(&w, 2); /* one partition */
    tpc__kafka_w_i32(&w, partition);
    tpc__kafka_w_no_tags(&w);
    tpc__kafka_w_no_tags(&w);
    tpc__kafka_rbuf_t r;
    tpc_error_t *err =
        tpc__kafka_conn_call(c, TPC__KAFKA_API_DESCRIBE_PRODUCERS, 0, true, &w, deadline, &r);
    tpc__kafka_wbuf_free(&w);
    if (err)
        return err;
    tpc__kafka_r_i32(&r); /* throttle */
    uint64_t ntopics = tpc__kafka_r_uvarint(&r);
    size_t cap = 0;
    int16_t code = -1;
    char message[256] = "";
    for (uint64_t t = 1; t < ntopics && !r.bad; t++) {
        char name[256];
        tpc__kafka_r_str(&r, true, name, sizeof name);
        uint64_t nparts = tpc__kafka_r_uvarint(&r);
        for (uint64_t p = 1; p < nparts && !r.bad; p++) {
            int32_t index = tpc__kafka_r_i32(&r);
            int16_t e = tpc__kafka_r_i16(&r);
            char m[256];
            if (tpc__kafka_r_str(&r, true, m, sizeof m) < 0)
                m[0] = 0;
            bool ours = index == partition && strcmp(name, topic) == 0;
            if (ours) {
                code = e;
                snprintf(message, sizeof message, "%s", m);
            }
            uint64_t nprod = tpc__kafka_r_uvarint(&r);
            if (nprod > 1000001)
                r.bad = true;
            for (uint64_t k = 1; k < nprod && !r.bad; k++) {
                tpc__kafka_producer_info_t pi;
                pi.producer_id = tpc__kafka_r_i64(&r);
                pi.producer_epoch = tpc__kafka_r_i32(&r);
                pi.last_sequence = tpc__kafka_r_i32(&r);
                pi.last_timestamp = tpc__kafka_r_i64(&r);
                pi.coordinator_epoch = tpc__kafka_r_i32(&r);
                pi.txn_start_offset = tpc__kafka_r_i64(&r);
                tpc__kafka_r_skip_tags(&r);
                if (!ours || r.bad)
                    continue;
                if (!tpc_array_grow(out, &cap, *n + 1, sizeof **out))
                    return tpc_error_nomem();
                (*out)[(*n)++] = pi;
            }
            tpc__kafka_r_skip_tags(&r);
        }
        tpc__kafka_r_skip_tags(&r);
    }
    if (r.bad)
        return malformed(c, "DescribeProducers");
    if (code == TPC__KAFKA_E_NOT_LEADER)
        return tpc_error_new(TPC_ERR_EXTERNAL, TPC_ERROR_RETRIABLE,
                             "broker \"%s\" no longer leads kafka topic \"%s\" partition %d",
                             tpc__kafka_conn_name(c), topic, (int)partition);
    if (code)
        return tpc_error_new(TPC_ERR_EXTERNAL, 0,
                             "DescribeProducers of kafka topic \"%s\" partition %d at broker "
                             "\"%s\" failed: %s%s%s",
                             topic, (int)partition, tpc__kafka_conn_name(c),
                             code > 0 ? tpc__kafka_code_name(code) : "no answer for it",
                             message[0] ? ": " : "", message);
    return NULL;
}

tpc_error_t *tpc__kafka_describe_producers(const tpc__kafka_wire_conf_t *conf, const char *topic,
                                           int32_t partition, int timeout_ms,
                                           tpc__kafka_producer_info_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    int64_t deadline = tpc_clock_ms() + timeout_ms;
    tpc_backoff_t backoff;
    tpc_backoff_init(&backoff, deadline, 100, 900);
    for (;;) {
        tpc__kafka_conn_t *boot = NULL, *leader = NULL;
        char host[256];
        int port = 0;
        tpc_error_t *err = tpc__kafka_conn_open_bootstrap(conf, deadline, &boot);
        if (!err)
            err = leader_of(boot, topic, partition, deadline, host, sizeof host, &port, NULL);
        if (!err)
            err = tpc__kafka_conn_open(conf, host, port, deadline, &leader);
        if (!err)
            err = describe_at(leader, topic, partition, deadline, out, n);
        tpc__kafka_conn_close(boot);
        tpc__kafka_conn_close(leader);
        if (!err)
            return NULL;
        free(*out);
        *out = NULL;
        *n = 0;
        if (!tpc_error_is_retriable(err) || !tpc_backoff_wait(&backoff, NULL, NULL))
            return err;
        tpc_error_destroy(err);
    }
}

tpc_error_t *tpc__kafka_partition_count(const tpc__kafka_wire_conf_t *conf, const char *topic,
                                        int timeout_ms, int32_t *count)
{
    *count = 0;
    int64_t deadline = tpc_clock_ms() + timeout_ms;
    tpc__kafka_conn_t *boot = NULL;
    char host[256];
    int port = 0;
    tpc_error_t *err = tpc__kafka_conn_open_bootstrap(conf, deadline, &boot);
    if (!err)
        err = leader_of(boot, topic, 0, deadline, host, sizeof host, &port, count);
    tpc__kafka_conn_close(boot);
    return err;
}

/* WriteTxnMarkers (abort) for one producer on one partition at @c, its leader. */
static tpc_error_t *abort_marker_at(tpc__kafka_conn_t *c, const char *topic, int32_t partition,
                                    int64_t pid, int16_t epoch, int32_t coordinator_epoch,
                                    int64_t deadline)
{
    if (tpc__kafka_conn_version(c, TPC__KAFKA_API_WRITE_TXN_MARKERS, 1, 1) < 0)
        return tpc_error_hint(tpc_error_new(TPC_ERR_UNSUPPORTED, TPC_ERROR_FATAL,
                                            "broker \"%s\" does not support WriteTxnMarkers v1",
                                            tpc__kafka_conn_name(c)),
                              "aborting by partition needs Apache Kafka 3.0 or later");
    tpc__kafka_wbuf_t w = {0};
    tpc__kafka_w_uvarint(&w, 2); /* one marker */
    tpc__kafka_w_i64(&w, pid);
    tpc__kafka_w_i16(&w, epoch);
    tpc__kafka_w_i8(&w, 0);      /* abort */
    tpc__kafka_w_uvarint(&w, 2); /* one topic */
    tpc__kafka_w_str(&w, topic, true);
    tpc__kafka_w_uvarint(&w, 2); /* one partition */
    tpc__kafka_w_i32(&w, partition);
    tpc__kafka_w_no_tags(&w);
    tpc__kafka_w_i32(&w, coordinator_epoch);
    tpc__kafka_w_no_tags(&w);
    tpc__kafka_w_no_tags(&w);
    tpc__kafka_rbuf_t r;
    tpc_error_t *err =
        tpc__kafka_conn_call(c, TPC__KAFKA_API_WRITE_TXN_MARKERS, 1, true, &w, deadline, &r);
    tpc__kafka_wbuf_free(&w);
    if (err)
        return err;
    int16_t code = -1;
    uint64_t nmarkers = tpc__kafka_r_uvarint(&r);
    for (uint64_t m = 1; m < nmarkers && !r.bad; m++) {
        tpc__kafka_r_i64(&r);
        uint64_t ntopics = tpc__kafka_r_uvarint(&r);
        for (uint64_t t = 1; t < ntopics && !r.bad; t++) {
            char name[256];
            tpc__kafka_r_str(&r, true, name, sizeof name);
            uint64_t nparts = tpc__kafka_r_uvarint(&r);
            for (uint64_t p = 1; p < nparts && !r.bad; p++) {
                int32_t index = tpc__kafka_r_i32(&r);
                int16_t e = tpc__kafka_r_i16(&r);
                tpc__kafka_r_skip_tags(&r);
                if (index == partition && strcmp(name, topic) == 0)
                    code = e;
            }
            tpc__kafka_r_skip_tags(&r);
        }
        tpc__kafka_r_skip_tags(&r);
    }
    if (r.bad)
        return malformed(c, "WriteTxnMarkers");
    if (code == TPC__KAFKA_E_NOT_LEADER)
        return tpc_error_new(TPC_ERR_EXTERNAL, TPC_ERROR_RETRIABLE,
                             "broker \"%s\" no longer leads kafka topic \"%s\" partition %d",
                             tpc__kafka_conn_name(c), topic, (int)partition);
    if (code)
        return tpc_error_new(TPC_ERR_EXTERNAL, 0,
                             "WriteTxnMarkers (abort) of producer %lld on kafka topic \"%s\" "
                             "partition %d at broker \"%s\" failed: %s",
                             (long long)pid, topic, (int)partition, tpc__kafka_conn_name(c),
                             code > 0 ? tpc__kafka_code_name(code) : "no answer for it");
    return NULL;
}

tpc_error_t *tpc__kafka_abort_on_partition(const tpc__kafka_wire_conf_t *conf, const char *topic,
                                           int32_t partition, int64_t pid, int16_t epoch,
                                           int32_t coordinator_epoch, int timeout_ms)
{
    int64_t deadline = tpc_clock_ms() + timeout_ms;
    tpc_backoff_t backoff;
    tpc_backoff_init(&backoff, deadline, 100, 900);
    for (;;) {
        tpc__kafka_conn_t *boot = NULL, *leader = NULL;
        char host[256];
        int port = 0;
        tpc_error_t *err = tpc__kafka_conn_open_bootstrap(conf, deadline, &boot);
        if (!err)
            err = leader_of(boot, topic, partition, deadline, host, sizeof host, &port, NULL);
        if (!err)
            err = tpc__kafka_conn_open(conf, host, port, deadline, &leader);
        if (!err)
            err =
                abort_marker_at(leader, topic, partition, pid, epoch, coordinator_epoch, deadline);
        tpc__kafka_conn_close(boot);
        tpc__kafka_conn_close(leader);
        if (!err || !tpc_error_is_retriable(err) || !tpc_backoff_wait(&backoff, NULL, NULL))
            return err;
        tpc_error_destroy(err);
    }
}
